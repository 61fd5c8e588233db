// safetensors reader/writer (src/io/safetensors.h): round trip and header validation.
// Every rejected file must raise lol::InputError naming the file (and the tensor).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "util/error.h"

using lol::InputError;
using lol::io::DType;
using lol::io::SafetensorsFile;

namespace {

std::vector<uint8_t> image(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), b.begin() + 8);
  std::copy(data.begin(), data.end(), b.begin() + 8 + header.size());
  return b;
}

/// Expects parse() to throw InputError mentioning every needle.
void expect_error(const std::vector<uint8_t>& bytes, const std::vector<std::string>& needles) {
  try {
    SafetensorsFile::parse(bytes, "mem.safetensors");
    ADD_FAILURE() << "accepted; expected an error mentioning " << needles.at(0);
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("mem.safetensors"), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << msg << "' lacks '" << n << "'";
  }
}

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lol_io_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST(Safetensors, WriteReadRoundTrip) {
  const std::string path = tmp_path("rt.safetensors");
  std::vector<float> a = {1.5f, -2.f, 3.25f, 0.f, 7.f, -0.5f};
  std::vector<int64_t> b = {-3, 1ll << 40};
  std::vector<uint8_t> flags = {1, 0, 1};
  std::vector<lol::io::TensorBlob> blobs = {
      {"a", DType::F32, {2, 3}, a.data(), a.size() * 4},
      {"b.ints", DType::I64, {2}, b.data(), b.size() * 8},
      {"empty", DType::F32, {0, 4}, nullptr, 0},
      {"scalar", DType::BOOL, {}, flags.data(), 1},
      {"flags", DType::U8, {3}, flags.data(), 3},
  };
  lol::io::write_safetensors(path, blobs, {{"format", "pt"}, {"note", "x"}});
  auto f = SafetensorsFile::read(path);
  ASSERT_EQ(f.entries().size(), blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) {
    const auto& e = f.entries()[i];
    EXPECT_EQ(e.name, blobs[i].name);  // file order kept
    EXPECT_EQ(e.dtype, blobs[i].dtype);
    EXPECT_EQ(e.shape, blobs[i].shape);
    EXPECT_EQ(e.end - e.begin, blobs[i].nbytes);
    if (blobs[i].nbytes) EXPECT_EQ(std::memcmp(f.data(e), blobs[i].data, blobs[i].nbytes), 0);
  }
  EXPECT_EQ(f.metadata().at("note"), "x");
  EXPECT_TRUE(f.contains("b.ints"));
  EXPECT_FALSE(f.contains("c"));
  EXPECT_THROW(f.entry("c"), InputError);
  // Header padded to 8 bytes: data starts 8-aligned.
  std::ifstream in(path, std::ios::binary);
  uint8_t len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  EXPECT_EQ((8 + n) % 8, 0u);
  std::filesystem::remove(path);
}

TEST(Safetensors, WriterRejectsBadBlobs) {
  const std::string path = tmp_path("bad.safetensors");
  float x[4] = {0, 1, 2, 3};
  EXPECT_THROW(lol::io::write_safetensors(path, {{"a", DType::F32, {2}, x, 8}, {"a", DType::F32, {2}, x, 8}}), InputError);
  EXPECT_THROW(lol::io::write_safetensors(path, {{"a", DType::F32, {3}, x, 8}}), InputError);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Safetensors, ParsesHandWrittenFile) {
  // Offsets relative to the data buffer, arbitrary order in the header, trailing blanks.
  std::vector<uint8_t> data(12);
  float v[2] = {1.f, 2.f};
  std::memcpy(data.data() + 4, v, 8);
  auto f = SafetensorsFile::parse(
      image(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}, "h": {"dtype": "F16", "shape": [1, 2], "data_offsets": [0, 4]}, "__metadata__": {"k": "v"}}   )",
            data),
      "mem.safetensors");
  ASSERT_EQ(f.entries().size(), 2u);
  const auto& w = f.entry("w");
  float got[2];
  std::memcpy(got, f.data(w), 8);
  EXPECT_EQ(got[1], 2.f);
  EXPECT_EQ(f.entry("h").dtype, DType::F16);
  EXPECT_EQ(f.metadata().at("k"), "v");
}

TEST(Safetensors, RejectsMalformedFiles) {
  const std::vector<uint8_t> d8(8, 0);
  const std::string ok = R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  // Sanity: the base case is accepted.
  EXPECT_NO_THROW(SafetensorsFile::parse(image(ok, d8), "mem.safetensors"));

  // Truncated: fewer than 8 bytes; header length past EOF; data shorter than offsets.
  expect_error({1, 2, 3}, {"truncated"});
  {
    auto b = image(ok, d8);
    b[0] = uint8_t(b.size());  // header length = whole file
    expect_error(b, {"header"});
  }
  {
    auto b = image(ok, d8);
    for (int i = 0; i < 8; ++i) b[i] = 0xff;  // absurd length
    expect_error(b, {"header"});
  }
  expect_error(image(ok, std::vector<uint8_t>(5, 0)), {"'t'", "outside"});
  // Bad JSON / not an object.
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [2], )", d8), {"JSON"});
  expect_error(image(R"([1, 2])", d8), {"object"});
  // Unknown dtype, missing fields, bad shapes and offsets.
  expect_error(image(R"({"t": {"dtype": "F31", "shape": [2], "data_offsets": [0, 8]}})", d8), {"'t'", "F31"});
  expect_error(image(R"({"t": {"shape": [2], "data_offsets": [0, 8]}})", d8), {"'t'", "dtype"});
  expect_error(image(R"({"t": {"dtype": "F32", "data_offsets": [0, 8]}})", d8), {"'t'", "shape"});
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [2]}})", d8), {"'t'", "data_offsets"});
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", d8), {"'t'", "shape"});
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", d8), {"'t'", "shape"});
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", d8), {"'t'", "data_offsets"});
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", d8), {"'t'"});
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})", d8), {"'t'"});
  expect_error(image(R"({"t": "F32"})", d8), {"'t'"});
  // Offsets outside the data buffer.
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", d8), {"'t'", "outside"});
  // Size != dtype size x shape.
  expect_error(image(R"({"t": {"dtype": "F64", "shape": [2], "data_offsets": [0, 8]}})", d8), {"'t'", "size"});
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [3, 1], "data_offsets": [0, 8]}})", d8), {"'t'", "size"});
  // Shape product overflow.
  expect_error(image(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 8]}})", d8),
               {"'t'"});
  // Overlapping tensors.
  expect_error(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                     d8),
               {"overlap", "'a'", "'b'"});
  expect_error(image(R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}})",
                     d8),
               {"overlap"});
  // Metadata must be strings.
  expect_error(image(R"({"__metadata__": {"k": 1}})", {}), {"__metadata__"});
}

TEST(Safetensors, ReadErrorsNameThePath) {
  const std::string path = tmp_path("does_not_exist.safetensors");
  try {
    SafetensorsFile::read(path);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}

// A symbolic link to a device, or a FIFO, is refused by what it is (it has no size to
// check the header against; a FIFO without a writer would block the reader).
TEST(Safetensors, NonRegularFilesAreRefusedByKind) {
  const std::string link = tmp_path("zero.safetensors"), fifo = tmp_path("fifo.safetensors");
  std::filesystem::remove(link);
  std::filesystem::remove(fifo);
  std::filesystem::create_symlink("/dev/zero", link);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& path : {link, fifo}) {
    try {
      SafetensorsFile::read(path);
      ADD_FAILURE() << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": is not a regular file"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(link);
  std::filesystem::remove(fifo);
}

TEST(Safetensors, DTypeNamesAndSizes) {
  for (auto [name, d, size] : std::vector<std::tuple<std::string, DType, size_t>>{
           {"F64", DType::F64, 8}, {"F32", DType::F32, 4}, {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2},
           {"I64", DType::I64, 8}, {"I32", DType::I32, 4}, {"I16", DType::I16, 2}, {"I8", DType::I8, 1},
           {"U8", DType::U8, 1},   {"U16", DType::U16, 2}, {"U32", DType::U32, 4}, {"U64", DType::U64, 8},
           {"BOOL", DType::BOOL, 1}}) {
    EXPECT_EQ(lol::io::parse_dtype(name, "x"), d);
    EXPECT_EQ(lol::io::dtype_name(d), name);
    EXPECT_EQ(lol::io::dtype_size(d), size);
  }
  EXPECT_THROW(lol::io::parse_dtype("f32", "x"), InputError);
}
