// The gate activation of a gated feed-forward network (nn/mlp.h): SiLU for SwiGLU
// (Llama, Qwen2, LoL paper Appendix A), GELU for GeGLU (Gemma); the activation of an
// ungated one (GPT-2's GELU, OPT's ReLU). LibTorch-free.
#pragma once
#include <string>

#include "util/error.h"

namespace lol::nn {

/// SiLU: x sigmoid(x). GeluTanh: transformers' "gelu_pytorch_tanh",
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Gelu: the exact 0.5 x (1 + erf(x / sqrt 2)).
/// ReLU: max(x, 0) (OPT).
enum class Activation { SiLU, GeluTanh, Gelu, ReLU };

/// The transformers ACT2FN name of `a`: "silu", "gelu_pytorch_tanh", "gelu" or "relu".
inline std::string activation_name(Activation a) {
  switch (a) {
    case Activation::SiLU: return "silu";
    case Activation::GeluTanh: return "gelu_pytorch_tanh";
    case Activation::Gelu: return "gelu";
    case Activation::ReLU: return "relu";
  }
  return "silu";
}

/// The activation of an ACT2FN name: "silu" / "swish", "gelu_pytorch_tanh" / "gelu_new" /
/// "gelu_fast" (tanh approximations, equal up to rounding), "gelu", "relu". Throws InputError
/// "<where> = "<name>": expected ..." otherwise.
inline Activation activation_from_name(const std::string& name, const std::string& where) {
  if (name == "silu" || name == "swish") return Activation::SiLU;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") return Activation::GeluTanh;
  if (name == "gelu") return Activation::Gelu;
  if (name == "relu") return Activation::ReLU;
  throw InputError(where + " = \"" + name + "\": expected silu, gelu_pytorch_tanh (gelu_new, gelu_fast), gelu or relu");
}

}  // namespace lol::nn
