#include "nn/mlp.h"

#include <torch/nn/functional/activation.h>

namespace lol::nn {

MLPImpl::MLPImpl(int64_t d, int64_t h) {
  using torch::nn::LinearOptions;
  gate_proj = register_module("gate_proj", torch::nn::Linear(LinearOptions(d, h).bias(false)));
  up_proj = register_module("up_proj", torch::nn::Linear(LinearOptions(d, h).bias(false)));
  down_proj = register_module("down_proj", torch::nn::Linear(LinearOptions(h, d).bias(false)));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return down_proj(torch::silu(gate_proj(x)) * up_proj(x));
}

}  // namespace lol::nn
