// Saving and loading a module's parameters and buffers as safetensors, with strict
// validation (used by every model's checkpoint code).
#pragma once
#include <map>
#include <string>

#include <torch/nn/module.h>

#include "core/tensor_io.h"

namespace lol {

/// All parameters and buffers by their dotted names (e.g. "model.library.0.mlp.up_proj.weight").
NamedTensors module_state(const torch::nn::Module& m);

/// Writes module_state(m) to `path` atomically (tensors stored in their dtype).
void save_module(const torch::nn::Module& m, const std::string& path,
                 const std::map<std::string, std::string>& metadata = {});

/// Loads `path` into `m`: every parameter and buffer must be present with the same
/// shape; extra tensors in the file are an error; floating tensors of any stored
/// float dtype (F32/F16/BF16/F64) are converted; NaN/Inf values are rejected.
/// Every error is an InputError naming the file and the tensor.
void load_module(torch::nn::Module& m, const std::string& path);
/// Same, from tensors already in memory (`where` names their source in errors).
void load_module(torch::nn::Module& m, const NamedTensors& tensors, const std::string& where);

}  // namespace lol
