// Precompiled header for every LibTorch translation unit (see CMakeLists.txt).
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <memory>
#include <stdexcept>
