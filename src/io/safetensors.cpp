#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "util/error.h"

namespace lol::io {

namespace {
constexpr uint64_t kMaxHeader = 100ull << 20;

struct DTypeInfo {
  DType d;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2},  {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4}, {DType::I16, "I16", 2},  {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::U16, "U16", 2}, {DType::U32, "U32", 4},  {DType::U64, "U64", 8},
    {DType::BOOL, "BOOL", 1},
};
}  // namespace

DType parse_dtype(const std::string& s, const std::string& where) {
  for (const auto& d : kDTypes)
    if (s == d.name) return d.d;
  throw InputError(where + ": unknown dtype '" + s +
                   "' (expected one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 U16 U32 U64 BOOL)");
}

std::string dtype_name(DType d) {
  for (const auto& x : kDTypes)
    if (x.d == d) return x.name;
  return "?";
}

size_t dtype_size(DType d) {
  for (const auto& x : kDTypes)
    if (x.d == d) return x.size;
  return 0;
}

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) > 0; }

const TensorEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw InputError(path_ + ": missing tensor '" + name + "'");
  return entries_[it->second];
}

SafetensorsFile SafetensorsFile::read(const std::string& path, bool strict_layout) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);  // follows symbolic links
  if (st.type() == std::filesystem::file_type::directory)
    throw InputError(path + ": is a directory, expected a safetensors file");
  // A device, FIFO or socket has no size to read the tensors against (/dev/zero read as
  // "0 bytes", a FIFO blocks): refused by what it is.
  if (!ec && st.type() != std::filesystem::file_type::regular && st.type() != std::filesystem::file_type::not_found)
    throw InputError(path + ": is not a regular file (a device, FIFO or socket), expected a safetensors file");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InputError(path + ": cannot open safetensors file");
  std::streamsize size = in.tellg();
  in.seekg(0);
  std::vector<uint8_t> bytes(size_t(size < 0 ? 0 : size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw InputError(path + ": read error");
  return parse(std::move(bytes), path, strict_layout);
}

SafetensorsFile SafetensorsFile::parse(std::vector<uint8_t> bytes, const std::string& where, bool strict_layout) {
  SafetensorsFile f;
  f.path_ = where;
  if (bytes.size() < 8) throw InputError(where + ": truncated safetensors file (" + std::to_string(bytes.size()) + " bytes, need >= 8)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxHeader) throw InputError(where + ": header length " + std::to_string(n) + " exceeds 100 MB limit");
  if (n > bytes.size() - 8)
    throw InputError(where + ": truncated file: header declares " + std::to_string(n) + " bytes but only " +
                     std::to_string(bytes.size() - 8) + " follow");
  nlohmann::ordered_json header;  // keeps file order for entries()
  try {
    header = nlohmann::ordered_json::parse(bytes.begin() + 8, bytes.begin() + 8 + n);
  } catch (const std::exception& e) {
    throw InputError(where + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw InputError(where + ": header must be a JSON object");
  f.data_start_ = 8 + n;
  const uint64_t data_len = bytes.size() - f.data_start_;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw InputError(where + ": __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) throw InputError(where + ": __metadata__['" + m.key() + "'] must be a string");
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    std::string w = where + ": tensor '" + name + "'";
    if (!v.is_object()) throw InputError(w + ": entry must be an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) throw InputError(w + ": missing string field 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) throw InputError(w + ": missing array field 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      throw InputError(w + ": 'data_offsets' must be [begin, end]");
    TensorEntry e;
    e.name = name;
    e.dtype = parse_dtype(v["dtype"].get<std::string>(), w);
    uint64_t count = 1;
    bool overflow = false;
    for (const auto& s : v["shape"]) {
      if (!s.is_number_unsigned()) throw InputError(w + ": shape entries must be non-negative integers");
      uint64_t d = s.get<uint64_t>();
      if (d > (1ull << 48)) overflow = true;
      e.shape.push_back(int64_t(d));
      // Prefix products must fit int64 (TensorEntry::numel and LibTorch sizes are signed).
      if (d != 0 && count > uint64_t(INT64_MAX) / d) overflow = true;
      count *= d;
    }
    for (const auto& o : v["data_offsets"])
      if (!o.is_number_unsigned()) throw InputError(w + ": data_offsets must be non-negative integers");
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    size_t es = dtype_size(e.dtype);
    if (overflow || count > (~0ull) / es) throw InputError(w + ": shape too large");
    if (e.end < e.begin) throw InputError(w + ": data_offsets end < begin");
    if (e.end - e.begin != count * es)
      throw InputError(w + ": size mismatch: " + std::to_string(e.end - e.begin) + " bytes for dtype " +
                       dtype_name(e.dtype) + " and " + std::to_string(count) + " elements (expected " +
                       std::to_string(count * es) + ")");
    if (e.end > data_len)
      throw InputError(w + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       ") outside the data buffer of " + std::to_string(data_len) + " bytes (truncated file?)");
    f.index_[name] = f.entries_.size();
    f.entries_.push_back(std::move(e));
  }
  // Overlap check: sort by begin.
  std::vector<const TensorEntry*> sorted;
  for (const auto& e : f.entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  const TensorEntry* last = nullptr;  // non-empty tensor with the largest end so far
  for (const TensorEntry* e : sorted) {
    if (e->end == e->begin) continue;
    if (last && e->begin < last->end)
      throw InputError(where + ": tensors '" + last->name + "' and '" + e->name + "' overlap");
    // The format has no holes (as the reference reader checks): the tensors tile the
    // data buffer from byte 0 to its end.
    const uint64_t expected = last ? last->end : 0;
    if (e->begin > expected && f.layout_problem_.empty())
      f.layout_problem_ = (where + ": data bytes [" + std::to_string(expected) + ", " + std::to_string(e->begin) +
                       ") belong to no tensor (" + (last ? "after '" + last->name + "', " : std::string("")) +
                       "before '" + e->name + "'): expected tensors that tile the data buffer (an entry removed "
                       "from the header?)");
    if (!last || e->end > last->end) last = e;
  }
  const uint64_t covered = last ? last->end : 0;
  if (covered != data_len && f.layout_problem_.empty())
    f.layout_problem_ = (where + ": " + std::to_string(data_len - covered) + " data bytes after " +
                     (last ? "the last tensor '" + last->name + "'" : std::string("the header (no tensor has data)")) +
                     ": expected the data buffer to end with its last tensor (bytes appended to the file, or an "
                     "entry removed from the header?)");
  if (strict_layout && !f.layout_problem_.empty()) throw InputError(f.layout_problem_);
  f.bytes_ = std::move(bytes);
  return f;
}

void write_safetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second) throw InputError(path + ": duplicate tensor name '" + t.name + "'");
    uint64_t count = 1;
    for (auto s : t.shape) count *= uint64_t(s);
    if (count * dtype_size(t.dtype) != t.nbytes)
      throw InputError(path + ": tensor '" + t.name + "': " + std::to_string(t.nbytes) + " bytes do not match shape");
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + t.nbytes}}};
    off += t.nbytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');
  AtomicFile out(path);
  uint64_t n = h.size();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(n >> (8 * i));
  out.write(len, 8);
  out.write(h.data(), h.size());
  for (const auto& t : tensors) out.write(t.data, t.nbytes);
  out.commit();
}

}  // namespace lol::io
