// Checkpoint directories (config.json + model.safetensors, names of src/lol/model.h):
// bit-exact round trip, and clear errors for every kind of damaged input.
#include <cmath>
#include <cstring>

#include "core/tensor_io.h"
#include "lol/checkpoint.h"
#include "model/file_test_util.h"
#include "model/model_test_util.h"
#include "util/error.h"

using namespace reftest;

namespace {

lol::LoLConfig ckpt_config() {
  auto c = tiny_config();
  c.untied_router = true;
  c.tie_embeddings = false;
  return c;
}

/// Writes a float32 checkpoint of a randomised model into dir.
lol::LoLModel write_ckpt(const std::string& dir) {
  auto m = make_model(ckpt_config(), 41, torch::kFloat32);
  lol::save_lol(m, dir, nlohmann::json{{"task", "toy"}});
  return m;
}

/// Expects load_lol(dir) to throw an InputError whose message holds every needle.
void expect_load_error(const std::string& dir, const std::vector<std::string>& needles) {
  try {
    lol::load_lol(dir);
    ADD_FAILURE() << "no error; expected one mentioning " << needles.at(0);
  } catch (const lol::InputError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message '" << msg << "' lacks '" << n << "'";
  }
}

}  // namespace

TEST(Checkpoint, RoundTripIsBitExact) {
  TempDir tmp("ckpt_rt");
  const std::string dir = tmp / "ck";
  auto m = write_ckpt(dir);
  EXPECT_TRUE(std::filesystem::exists(dir + "/config.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.safetensors"));
  nlohmann::json extra;
  auto l = lol::load_lol(dir, torch::kCPU, &extra);
  EXPECT_EQ(extra, (nlohmann::json{{"task", "toy"}}));
  EXPECT_EQ(l->config().to_json(), m->config().to_json());
  auto a = weights_of(m), b = weights_of(l);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(b[name].scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(b[name], t)) << name << " not bit-exact";
  }
  EXPECT_GT(max_abs(l->model->balance_bias), 0) << "balance bias must be saved";
  // Same logits, and saving again gives byte-identical files.
  RefRow row;
  row.tokens = random_tokens(15, m->config().vocab_size, 1);
  torch::NoGradGuard ng;
  m->eval();  // no router noise
  l->eval();
  EXPECT_TRUE(torch::equal(m->forward(make_batch({row})).logits, l->forward(make_batch({row})).logits));
  lol::save_lol(l, tmp / "again", nlohmann::json{{"task", "toy"}});
  EXPECT_EQ(read_bytes(dir + "/model.safetensors"), read_bytes(tmp / "again/model.safetensors"));
  EXPECT_EQ(read_text(dir + "/config.json"), read_text(tmp / "again/config.json"));
}

TEST(Checkpoint, TensorNamesFollowTheDocumentedScheme) {
  TempDir tmp("ckpt_names");
  auto m = write_ckpt(tmp / "ck");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [n, t] : lol::load_tensors(tmp / "ck/model.safetensors")) shapes[n] = t.sizes().vec();
  const auto& c = m->config();
  const int64_t d = c.d_model, hd = c.head_dim();
  using S = std::vector<int64_t>;
  std::map<std::string, S> expect = {{"model.embed_tokens.weight", {c.vocab_size, d}},
                                     {"model.norm.weight", {d}},
                                     {"lm_head.weight", {c.vocab_size, d}},
                                     {"model.depth_embed", {c.core_depth, d}},
                                     {"model.balance_bias", {c.library_size}}};
  auto add_block = [&](const std::string& p) {
    expect[p + "input_layernorm.weight"] = {d};
    expect[p + "post_attention_layernorm.weight"] = {d};
    expect[p + "self_attn.q_proj.weight"] = {c.n_heads * hd, d};
    expect[p + "self_attn.k_proj.weight"] = {c.n_kv_heads * hd, d};
    expect[p + "self_attn.v_proj.weight"] = {c.n_kv_heads * hd, d};
    expect[p + "self_attn.o_proj.weight"] = {d, c.n_heads * hd};
    expect[p + "mlp.gate_proj.weight"] = {c.ffn_hidden, d};
    expect[p + "mlp.up_proj.weight"] = {c.ffn_hidden, d};
    expect[p + "mlp.down_proj.weight"] = {d, c.ffn_hidden};
  };
  for (int64_t i = 0; i < c.n_prelude; ++i) add_block("model.prelude." + std::to_string(i) + ".");
  for (int64_t i = 0; i < c.library_size; ++i) add_block("model.library." + std::to_string(i) + ".");
  for (int64_t i = 0; i < c.n_coda; ++i) add_block("model.coda." + std::to_string(i) + ".");
  for (int64_t l = 0; l < c.core_depth; ++l) {
    expect["model.routers." + std::to_string(l) + ".weight"] = {c.library_size, d};
    for (const char* s : {"attn_gamma", "attn_beta", "ffn_gamma", "ffn_beta"})
      expect["model.film." + std::to_string(l) + "." + s] = {d};
  }
  EXPECT_EQ(shapes, expect);
}

TEST(Checkpoint, DamagedSafetensorsFailWithClearErrors) {
  TempDir tmp("ckpt_bad");
  const std::string dir = tmp / "ck", st = dir + "/model.safetensors";
  write_ckpt(dir);
  const auto good = read_bytes(st);
  const uint64_t n = header_len(good);
  const std::string header(good.begin() + 8, good.begin() + 8 + n);

  struct Damage {
    std::string what;
    std::function<void()> apply;
    std::vector<std::string> needles;
  };
  const std::string w = "model.embed_tokens.weight";
  std::vector<Damage> damages = {
      {"truncated data", [&] { write_bytes(st, std::vector<uint8_t>(good.begin(), good.end() - 10)); }, {st, "truncated"}},
      {"shorter than 8 bytes", [&] { write_bytes(st, std::vector<uint8_t>(good.begin(), good.begin() + 5)); }, {st, "has only 5 bytes"}},
      {"header length past EOF",
       [&] {
         auto b = good;
         uint64_t big = good.size();
         for (int i = 0; i < 8; ++i) b[i] = uint8_t(big >> (8 * i));
         write_bytes(st, b);
       },
       {st, "header"}},
      {"bad JSON", [&] { write_bytes(st, with_header(good, "{\"a\": [1, 2" + std::string(20, ' '))); }, {st, "JSON"}},
      {"unknown dtype", [&] { edit_header(st, [&](auto& j) { j[w]["dtype"] = "F33"; }); }, {st, w, "F33"}},
      {"offsets outside the file",
       [&] {
         edit_header(st, [&](auto& j) {
           auto e = j[w]["data_offsets"];
           uint64_t len = e[1].template get<uint64_t>() - e[0].template get<uint64_t>();
           j[w]["data_offsets"] = {good.size(), good.size() + len};
         });
       },
       {st, w, "outside"}},
      {"overlapping tensors",
       [&] {
         edit_header(st, [&](auto& j) {
           // Point the depth vectors into the middle of the embedding.
           auto& e = j["model.depth_embed"];
           uint64_t len = e["data_offsets"][1].template get<uint64_t>() - e["data_offsets"][0].template get<uint64_t>();
           uint64_t b0 = j[w]["data_offsets"][0].template get<uint64_t>() + 4;
           e["data_offsets"] = {b0, b0 + len};
         });
       },
       {st, "overlap", "model.depth_embed"}},
      {"size != dtype x shape", [&] { edit_header(st, [&](auto& j) { j[w]["dtype"] = "F16"; }); }, {st, w, "size"}},
      {"missing tensor", [&] { edit_header(st, [&](auto& j) { j.erase("model.film.1.ffn_beta"); }); }, {st, "model.film.1.ffn_beta", "missing"}},
      {"extra tensor",
       [&] {
         edit_header(st, [&](auto& j) {
           auto e = j["model.balance_bias"];
           e["shape"] = {0};
           e["data_offsets"] = {0, 0};
           j["model.not_a_tensor"] = e;
         });
       },
       {st, "model.not_a_tensor"}},
      {"shape mismatch",
       [&] {
         edit_header(st, [&](auto& j) {
           auto s = j[w]["shape"];
           j[w]["shape"] = {s[1], s[0]};
         });
       },
       {st, w, "shape"}},
      {"NaN weights",
       [&] {
         auto b = good;
         auto j = nlohmann::json::parse(header);
         uint64_t off = 8 + n + j["model.norm.weight"]["data_offsets"][0].get<uint64_t>();
         float nan = std::nanf("");
         std::memcpy(b.data() + off + 4, &nan, 4);
         write_bytes(st, b);
       },
       {st, "model.norm.weight", "NaN"}},
      {"integer dtype for a float tensor",
       [&] { edit_header(st, [&](auto& j) { j["model.norm.weight"]["dtype"] = "I32"; }); },
       {st, "model.norm.weight", "dtype"}},
      {"bytes appended after the last tensor",
       [&] {
         auto b = good;
         b.insert(b.end(), 16, 0);
         write_bytes(st, b);
       },
       {st, "16 data bytes after the last tensor"}},
      {"a hole between two tensors",
       [&] {
         // 16 bytes inserted after the embedding, the later offsets shifted past them.
         auto j = nlohmann::ordered_json::parse(header);
         const uint64_t at = j[w]["data_offsets"][1].get<uint64_t>();
         for (auto it = j.begin(); it != j.end(); ++it)
           if (it.key() != "__metadata__" && it.value()["data_offsets"][0].get<uint64_t>() >= at)
             it.value()["data_offsets"] = {it.value()["data_offsets"][0].get<uint64_t>() + 16,
                                           it.value()["data_offsets"][1].get<uint64_t>() + 16};
         std::vector<uint8_t> data(good.begin() + 8 + n, good.end());
         data.insert(data.begin() + at, 16, 0);
         auto b = with_header(std::vector<uint8_t>(good.begin(), good.begin() + 8 + n), j.dump());
         b.insert(b.end(), data.begin(), data.end());
         write_bytes(st, b);
       },
       {st, "data bytes [", "belong to no tensor (after '" + w + "'"}},
      {"missing file", [&] { std::filesystem::remove(st); }, {st}},
  };
  for (const auto& dmg : damages) {
    SCOPED_TRACE(dmg.what);
    write_bytes(st, good);
    dmg.apply();
    expect_load_error(dir, dmg.needles);
  }
  write_bytes(st, good);
  EXPECT_NO_THROW(lol::load_lol(dir));
}

TEST(Checkpoint, BadConfigValuesFailNamingFileAndField) {
  TempDir tmp("ckpt_cfg");
  const std::string dir = tmp / "ck", cfg = dir + "/config.json";
  write_ckpt(dir);
  const auto good = nlohmann::json::parse(read_text(cfg));
  struct Bad {
    std::string field;
    nlohmann::json value;
  };
  const std::vector<Bad> bads = {
      {"n_heads", 3},             // does not divide d_model
      {"n_kv_heads", 3},          // does not divide n_heads
      {"stride", 4},              // must be < window
      {"window", 0},
      {"library_size", 0},
      {"core_depth", -1},
      {"d_model", "sixteen"},     // wrong type
      {"norm_eps", 2.0},
      {"tie_embeddings", 1},
      {"architecture", "gpt2"},
      {"frobnicate", 1},          // unknown key
  };
  for (const auto& b : bads) {
    SCOPED_TRACE(b.field);
    auto j = good;
    j[b.field] = b.value;
    write_text(cfg, j.dump());
    expect_load_error(dir, {cfg, b.field});
  }
  // A config that does not match the tensors: the tensor is named.
  auto j = good;
  j["ffn_hidden"] = 20;
  write_text(cfg, j.dump());
  expect_load_error(dir, {dir + "/model.safetensors", "mlp", "shape"});
  write_text(cfg, "{\"d_model\": 16,");
  expect_load_error(dir, {cfg, "JSON"});
  std::filesystem::remove(cfg);
  expect_load_error(dir, {dir, "config.json"});
}
