// LibTorch <-> safetensors (src/io/safetensors.h).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "io/safetensors.h"

namespace lol {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Converts one entry to a CPU tensor that owns its memory, keeping the stored
/// dtype (F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL; U16/U32/U64 are widened
/// to I32/I64/I64 since LibTorch 1.13 lacks unsigned types beyond U8).
torch::Tensor to_tensor(const io::SafetensorsFile& f, const io::TensorEntry& e);

/// All tensors of a file, in file order. Throws InputError for a malformed file; with
/// `layout_problem` given, data bytes outside every tensor are reported there instead
/// (io::SafetensorsFile::read), for callers that check the tensor names first.
NamedTensors load_tensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr,
                          std::string* layout_problem = nullptr);

/// Writes tensors (moved to CPU, made contiguous) atomically. Float tensors keep
/// their dtype; pass `store_dtype` (e.g. torch::kBFloat16) to convert floating
/// tensors on the way out.
void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata = {},
                  c10::optional<torch::ScalarType> store_dtype = c10::nullopt);

/// safetensors dtype of a LibTorch scalar type; throws std::invalid_argument if none.
io::DType to_io_dtype(torch::ScalarType t);

}  // namespace lol
