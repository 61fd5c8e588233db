#include "core/tensor_io.h"

#include <cstring>
#include <stdexcept>

#include "util/error.h"

namespace lol {

io::DType to_io_dtype(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat64: return io::DType::F64;
    case torch::kFloat32: return io::DType::F32;
    case torch::kFloat16: return io::DType::F16;
    case torch::kBFloat16: return io::DType::BF16;
    case torch::kInt64: return io::DType::I64;
    case torch::kInt32: return io::DType::I32;
    case torch::kInt16: return io::DType::I16;
    case torch::kInt8: return io::DType::I8;
    case torch::kUInt8: return io::DType::U8;
    case torch::kBool: return io::DType::BOOL;
    default: throw std::invalid_argument(std::string("no safetensors dtype for ") + c10::toString(t));
  }
}

torch::Tensor to_tensor(const io::SafetensorsFile& f, const io::TensorEntry& e) {
  using io::DType;
  const uint8_t* p = f.data(e);
  std::vector<int64_t> shape(e.shape.begin(), e.shape.end());
  auto copy_as = [&](torch::ScalarType st) {
    auto t = torch::empty(shape, torch::TensorOptions().dtype(st));
    if (t.nbytes() > 0) std::memcpy(t.data_ptr(), p, t.nbytes());
    return t;
  };
  switch (e.dtype) {
    case DType::F64: return copy_as(torch::kFloat64);
    case DType::F32: return copy_as(torch::kFloat32);
    case DType::F16: return copy_as(torch::kFloat16);
    case DType::BF16: return copy_as(torch::kBFloat16);
    case DType::I64: return copy_as(torch::kInt64);
    case DType::I32: return copy_as(torch::kInt32);
    case DType::I16: return copy_as(torch::kInt16);
    case DType::I8: return copy_as(torch::kInt8);
    case DType::U8: return copy_as(torch::kUInt8);
    case DType::BOOL: return copy_as(torch::kBool);
    case DType::U16: {
      auto t = torch::empty(shape, torch::kInt32);
      auto* out = t.data_ptr<int32_t>();
      for (int64_t i = 0; i < e.numel(); ++i) {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        out[i] = v;
      }
      return t;
    }
    case DType::U32:
    case DType::U64: {
      auto t = torch::empty(shape, torch::kInt64);
      auto* out = t.data_ptr<int64_t>();
      size_t es = io::dtype_size(e.dtype);
      for (int64_t i = 0; i < e.numel(); ++i) {
        uint64_t v = 0;
        std::memcpy(&v, p + es * i, es);
        out[i] = int64_t(v);
      }
      return t;
    }
  }
  throw InputError(f.path() + ": tensor '" + e.name + "': unsupported dtype");
}

NamedTensors load_tensors(const std::string& path, std::map<std::string, std::string>* metadata,
                          std::string* layout_problem) {
  auto f = io::SafetensorsFile::read(path, /*strict_layout=*/layout_problem == nullptr);
  if (layout_problem) *layout_problem = f.layout_problem();
  NamedTensors out;
  for (const auto& e : f.entries()) out.emplace_back(e.name, to_tensor(f, e));
  if (metadata) *metadata = f.metadata();
  return out;
}

void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata,
                  c10::optional<torch::ScalarType> store_dtype) {
  std::vector<torch::Tensor> keep;
  std::vector<io::TensorBlob> blobs;
  keep.reserve(tensors.size());
  for (const auto& [name, t0] : tensors) {
    auto t = t0.detach().to(torch::kCPU).contiguous();
    if (store_dtype && t.is_floating_point()) t = t.to(*store_dtype).contiguous();
    keep.push_back(t);
    io::TensorBlob b;
    b.name = name;
    b.dtype = to_io_dtype(t.scalar_type());
    b.shape.assign(t.sizes().begin(), t.sizes().end());
    b.data = t.data_ptr();
    b.nbytes = t.nbytes();
    blobs.push_back(b);
  }
  io::write_safetensors(path, blobs, metadata);
}

}  // namespace lol
