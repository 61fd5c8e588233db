// Reader and writer of the safetensors format (Hugging Face), LibTorch-free.
//
// File layout: 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"k": "v"}}, then the data buffer. Offsets are relative to
// the start of the data buffer.
//
// Validation (every violation throws lol::InputError naming the file and tensor):
// header length within the file and <= 100 MB, JSON well formed, every entry an
// object with a known dtype, a shape of non-negative integers and two offsets,
// end - begin == dtype size x product(shape) (no overflow), offsets inside the
// data buffer, and no two tensors overlapping.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lol::io {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, U16, U32, U64, BOOL };

/// "F32" -> DType::F32; throws InputError(where + ...) when unknown.
DType parse_dtype(const std::string& s, const std::string& where);
std::string dtype_name(DType d);
size_t dtype_size(DType d);

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  ///< byte offsets in the data buffer
  int64_t numel() const;
};

/// A whole safetensors file read into ordinary memory (no mmap: on the project's
/// VMs memory-mapped weights get paged out by the host).
class SafetensorsFile {
 public:
  /// Reads and validates `path`. Throws InputError on any format violation. With
  /// `strict_layout` false, data bytes outside every tensor (a hole, bytes appended) are
  /// not thrown but kept in layout_problem(), for a caller that first reports what it
  /// finds missing by name (a removed header entry leaves a hole).
  static SafetensorsFile read(const std::string& path, bool strict_layout = true);
  /// Parses an in-memory file image (used by fuzzers and tests). `where` names it.
  static SafetensorsFile parse(std::vector<uint8_t> bytes, const std::string& where, bool strict_layout = true);
  /// "" or the message of data bytes that belong to no tensor (see read()).
  const std::string& layout_problem() const { return layout_problem_; }

  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  /// Throws InputError naming the file when absent.
  const TensorEntry& entry(const std::string& name) const;
  /// Pointer to the first byte of a tensor's data.
  const uint8_t* data(const TensorEntry& e) const { return bytes_.data() + data_start_ + e.begin; }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  size_t data_start_ = 0;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::string layout_problem_;
};

/// One tensor to write: raw little-endian bytes of `dtype` in row-major order.
struct TensorBlob {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

/// Writes a safetensors file atomically: to `path + ".tmp"`, fsync, rename.
/// Tensors are stored in the given order, 8-byte aligned header.
/// Throws InputError on duplicate names or size mismatches, std::runtime_error on I/O errors.
void write_safetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace lol::io
