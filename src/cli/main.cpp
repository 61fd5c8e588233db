#include <torch/torch.h>
#include <iostream>
int main(int argc, char** argv) { std::cout << "lol\n"; return 0; }
