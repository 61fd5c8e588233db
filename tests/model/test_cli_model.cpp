// `lol init | info | forward` run as a separate process (LOL_BINARY).
// The compatibility test builds a checkpoint by hand, the way an independent
// implementation following docs/checkpoint-format.md would (config.json written as
// JSON, tensors written with the raw safetensors writer in arbitrary order), and
// checks `lol forward` against the per-window reference of ref_lol.cpp.
#include <map>
#include <random>

#include "io/safetensors.h"
#include "lol/checkpoint.h"
#include "model/file_test_util.h"
#include "model/model_test_util.h"

using namespace reftest;
namespace io = lol::io;

namespace {

/// Shapes of every tensor of a checkpoint for config c (names of src/lol/model.h).
std::vector<std::pair<std::string, std::vector<int64_t>>> tensor_shapes(const lol::LoLConfig& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> v;
  const int64_t d = c.d_model, hd = c.head_dim();
  auto block = [&](const std::string& p) {
    v.push_back({p + "input_layernorm.weight", {d}});
    v.push_back({p + "self_attn.q_proj.weight", {c.n_heads * hd, d}});
    v.push_back({p + "self_attn.k_proj.weight", {c.n_kv_heads * hd, d}});
    v.push_back({p + "self_attn.v_proj.weight", {c.n_kv_heads * hd, d}});
    v.push_back({p + "self_attn.o_proj.weight", {d, c.n_heads * hd}});
    v.push_back({p + "post_attention_layernorm.weight", {d}});
    v.push_back({p + "mlp.gate_proj.weight", {c.ffn_hidden, d}});
    v.push_back({p + "mlp.up_proj.weight", {c.ffn_hidden, d}});
    v.push_back({p + "mlp.down_proj.weight", {d, c.ffn_hidden}});
  };
  v.push_back({"model.embed_tokens.weight", {c.vocab_size, d}});
  for (int64_t i = 0; i < c.n_prelude; ++i) block("model.prelude." + std::to_string(i) + ".");
  for (int64_t i = 0; i < c.library_size; ++i) block("model.library." + std::to_string(i) + ".");
  for (int64_t i = 0; i < c.n_coda; ++i) block("model.coda." + std::to_string(i) + ".");
  v.push_back({"model.norm.weight", {d}});
  if (!c.tie_embeddings) v.push_back({"lm_head.weight", {c.vocab_size, d}});
  if (c.untied_router)
    for (int64_t l = 0; l < c.core_depth; ++l) v.push_back({"model.routers." + std::to_string(l) + ".weight", {c.library_size, d}});
  else
    v.push_back({"model.router.weight", {c.library_size, d}});
  v.push_back({"model.depth_embed", {c.core_depth, d}});
  for (int64_t l = 0; l < c.core_depth; ++l)
    for (const char* s : {"attn_gamma", "attn_beta", "ffn_gamma", "ffn_beta"})
      v.push_back({"model.film." + std::to_string(l) + "." + s, {d}});
  v.push_back({"model.balance_bias", {c.library_size}});
  return v;
}

/// Writes config.json and model.safetensors by hand with random float32 values;
/// returns the same values as float64 tensors for the reference.
Weights write_independent_checkpoint(const std::string& dir, const lol::LoLConfig& c, uint64_t seed) {
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"architecture", "lol"},      {"vocab_size", c.vocab_size},   {"d_model", c.d_model},
                        {"n_heads", c.n_heads},       {"n_kv_heads", c.n_kv_heads},   {"ffn_hidden", c.ffn_hidden},
                        {"n_prelude", c.n_prelude},   {"n_coda", c.n_coda},           {"library_size", c.library_size},
                        {"core_depth", c.core_depth}, {"window", c.window},           {"stride", c.stride},
                        {"rope_theta", c.rope_theta}, {"norm_eps", c.norm_eps},       {"tie_embeddings", c.tie_embeddings},
                        {"untied_router", c.untied_router}, {"max_seq_len", c.max_seq_len}};
  write_text(dir + "/config.json", cfg.dump(2));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<std::vector<float>> data;
  std::vector<io::TensorBlob> blobs;
  Weights w;
  auto shapes = tensor_shapes(c);
  std::shuffle(shapes.begin(), shapes.end(), rng);  // file order must not matter
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> v(n);
    auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
    for (auto& x : v) {
      const float z = normal(rng);
      if (has("router")) x = 2.0f * z;
      else if (has("norm") || has("gamma")) x = 1.0f + 0.2f * z;
      else if (has("beta")) x = 0.2f * z;
      else if (has("balance_bias")) x = 0.05f * z;
      else if (has("depth_embed")) x = 0.5f * z;
      else x = 0.2f * z;
    }
    w[name] = torch::from_blob(v.data(), {n}, torch::kFloat32).clone().reshape(shape).to(torch::kFloat64);
    data.push_back(std::move(v));
    io::TensorBlob b;
    b.name = name;
    b.dtype = io::DType::F32;
    b.shape = shape;
    b.data = data.back().data();
    b.nbytes = data.back().size() * sizeof(float);
    blobs.push_back(b);
  }
  io::write_safetensors(dir + "/model.safetensors", blobs, {{"format", "pt"}});
  return w;
}

struct ForwardFile {
  torch::Tensor logits, expert, alpha, probs;
  std::vector<std::string> names;
};

ForwardFile read_forward(const std::string& path) {
  auto f = io::SafetensorsFile::read(path);
  ForwardFile r;
  auto get = [&](const std::string& n, io::DType dt, torch::ScalarType st) {
    const auto& e = f.entry(n);
    EXPECT_EQ(e.dtype, dt) << n;
    std::vector<int64_t> shape(e.shape.begin(), e.shape.end());
    auto t = torch::empty(shape, st);
    if (t.nbytes()) std::memcpy(t.data_ptr(), f.data(e), t.nbytes());
    return t;
  };
  for (const auto& e : f.entries()) r.names.push_back(e.name);
  r.logits = get("logits", io::DType::F32, torch::kFloat32);
  r.expert = get("routing.expert", io::DType::I64, torch::kInt64);
  r.alpha = get("routing.alpha", io::DType::F32, torch::kFloat32);
  r.probs = get("routing.probs", io::DType::F32, torch::kFloat32);
  return r;
}

std::string join(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

/// Checks a `lol forward` output against the reference logits and decisions.
void check_against_reference(const ForwardFile& f, const torch::Tensor& ref, const std::vector<RefDecision>& tr,
                             const lol::LoLConfig& c, int64_t n) {
  EXPECT_EQ(f.names, (std::vector<std::string>{"logits", "routing.expert", "routing.alpha", "routing.probs"}));
  ASSERT_EQ(f.logits.sizes(), (std::vector<int64_t>{n, c.vocab_size}));
  EXPECT_LT(max_diff(f.logits.to(torch::kFloat64), ref), 1e-4) << "logits differ from the reference";
  int64_t K = 0;
  for (const auto& d : tr) K = std::max(K, d.k + 1);
  ASSERT_EQ(f.expert.sizes(), (std::vector<int64_t>{c.core_depth, K}));
  ASSERT_EQ(f.alpha.sizes(), (std::vector<int64_t>{c.core_depth, K}));
  ASSERT_EQ(f.probs.sizes(), (std::vector<int64_t>{c.core_depth, K, c.library_size}));
  auto seen = torch::zeros({c.core_depth, K}, torch::kBool);
  for (const auto& d : tr) {
    const int64_t l = d.depth - 1;
    seen[l][d.k] = true;
    EXPECT_EQ(f.expert[l][d.k].item<int64_t>(), d.expert) << "depth " << d.depth << " window " << d.k;
    EXPECT_NEAR(f.alpha[l][d.k].item<double>(), d.alpha, 1e-4);
    for (int64_t m = 0; m < c.library_size; ++m) EXPECT_NEAR(f.probs[l][d.k][m].item<double>(), d.probs[m], 1e-4);
  }
  // Depths with fewer windows: expert -1 beyond their last window.
  EXPECT_TRUE(torch::equal(f.expert.lt(0), seen.logical_not()));
}

lol::LoLConfig compat_config(bool untied) {
  lol::LoLConfig c = tiny_config();
  c.vocab_size = 29;
  c.d_model = 24;
  c.n_heads = 6;
  c.n_kv_heads = 2;
  c.ffn_hidden = 40;
  c.n_prelude = 2;
  c.n_coda = 1;
  c.library_size = 4;
  c.core_depth = 4;
  c.window = 5;
  c.stride = 2;
  c.norm_eps = 1e-6;
  c.rope_theta = 500.0;
  c.tie_embeddings = !untied;
  c.untied_router = untied;
  return c;
}

}  // namespace

TEST(CliForward, MatchesReferenceOnIndependentlyWrittenCheckpoint) {
  TempDir tmp("cli_compat");
  for (bool untied : {false, true}) {
    SCOPED_TRACE(untied ? "untied embeddings and routers" : "tied embeddings, shared router");
    const auto c = compat_config(untied);
    const std::string dir = tmp / (untied ? "untied" : "tied");
    const int64_t n = 31;
    auto tokens = random_tokens(n, c.vocab_size, 3);

    struct Variant {
      std::string name;
      int64_t prompt = 0;
      std::vector<int64_t> router_only;
      bool force = false;
    };
    std::vector<Variant> variants = {{"plain"}, {"forced path, prompt, router-only", 6, {11, 20}, true}};
    if (!untied) {
      variants.push_back({"prompt", 9});
      variants.push_back({"router-only", 0, {4, 5, 17}});
    }
    // The forced path, written by hand in the documented format (docs/routing-paths.md).
    nlohmann::json pj = {{"format", "lol-routing-path"},
                         {"version", 1},
                         {"library_size", c.library_size},
                         {"core_depth", 3},
                         {"expert", {{3, nullptr, 1}, {nullptr, 0}, {2, 2, 2, 2, 2, 2, 2, 2, 2}}},
                         {"alpha", {{0.5, nullptr, nullptr}, {nullptr, 1.0}, {nullptr, 0.25, nullptr, 0.0, 1.0, nullptr, nullptr, nullptr, 0.7}}},
                         {"meta", {{"strategy", "test"}}}};
    write_text(tmp / "path.json", pj.dump());
    const auto path = lol::RoutingPath::load(tmp / "path.json");
    auto setup = [&](const Variant& v, RefRow& row, RefOptions& ro) {
      row.tokens = tokens;
      row.prompt_len = v.prompt;
      if (!v.router_only.empty()) {
        row.router_only.assign(n, 0);
        for (auto p : v.router_only) row.router_only[p] = 1;
      }
      if (v.force) ro.force = &path;
    };
    // Pick a seed whose free routing decisions are far from ties (float32 vs float64 argmax).
    Weights w;
    for (uint64_t seed = 1;; ++seed) {
      ASSERT_LT(seed, 20u) << "no seed with clear routing margins";
      w = write_independent_checkpoint(dir, c, seed);
      double margin = 1e9;
      for (const auto& v : variants) {
        RefRow row;
        RefOptions ro;
        setup(v, row, ro);
        std::vector<RefDecision> tr;
        ref_forward_row(w, c, row, ro, &tr);
        for (const auto& d : tr)
          if (!d.forced) margin = std::min(margin, d.margin);
      }
      if (margin > 1e-3) break;
    }

    std::vector<std::string> cmds;
    for (size_t i = 0; i < variants.size(); ++i) {
      const auto& v = variants[i];
      std::string args = "forward --model " + quote(dir) + " --tokens " + quote(join(tokens, " ")) + " --out " +
                         quote(tmp / ("out" + std::to_string(i) + ".safetensors"));
      if (v.prompt) args += " --prompt-len " + std::to_string(v.prompt);
      if (!v.router_only.empty()) args += " --router-only " + join(v.router_only, ",");
      if (v.force) args += " --force-path " + quote(tmp / "path.json");
      cmds.push_back(args);
    }
    auto results = run_lol_all(cmds);
    for (size_t i = 0; i < variants.size(); ++i) {
      const auto& v = variants[i];
      SCOPED_TRACE(v.name);
      RefRow row;
      RefOptions ro;
      setup(v, row, ro);
      std::vector<RefDecision> tr;
      auto ref = ref_forward_row(w, c, row, ro, &tr);
      ASSERT_EQ(results[i].code, 0) << results[i].out;
      check_against_reference(read_forward(tmp / ("out" + std::to_string(i) + ".safetensors")), ref, tr, c, n);
      if (v.force) {
        int64_t forced = 0;
        for (const auto& d : tr) forced += d.forced;
        EXPECT_GE(forced, 8);
      }
    }
  }
}

TEST(CliForward, OwnRoundTripMatchesInProcessForward) {
  TempDir tmp("cli_rt");
  auto c = tiny_config();
  c.core_depth = 4;
  auto m = make_model(c, 51, torch::kFloat32);
  lol::save_lol(m, tmp / "ck");
  auto tokens = random_tokens(21, c.vocab_size, 4);
  RefRow row;
  row.tokens = tokens;
  row.prompt_len = 5;
  row.router_only.assign(21, 0);
  row.router_only[7] = 1;
  m->set_active_depth(3);
  lol::ForwardOptions fo;
  fo.trace = true;
  torch::NoGradGuard ng;
  auto out = m->forward(make_batch({row}), fo);
  auto r = run_lol("forward --model " + quote(tmp / "ck") + " --tokens " + quote(join(tokens, ",")) +
                   " --prompt-len 5 --router-only 7 --depth 3 --out " + quote(tmp / "o.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto f = read_forward(tmp / "o.safetensors");
  EXPECT_LT(max_diff(f.logits, out.logits[0]), 1e-6);
  ASSERT_EQ(f.expert.size(0), 3);
  for (int64_t d = 0; d < 3; ++d)
    for (size_t g = 0; g < out.trace[d].k.size(); ++g)
      EXPECT_EQ(f.expert[d][out.trace[d].k[g]].item<int64_t>(), out.trace[d].expert[int64_t(g)].item<int64_t>());
}

TEST(CliForward, BadInputExitsWithCode2AndAMessage) {
  TempDir tmp("cli_bad");
  auto c = tiny_config();
  lol::save_lol(make_model(c, 52, torch::kFloat32), tmp / "ck");
  const std::string base = "forward --model " + quote(tmp / "ck") + " --out " + quote(tmp / "o.safetensors");
  lol::RoutingPath bad_l;
  bad_l.library_size = c.library_size + 1;
  bad_l.set(0, 0, 0, std::nullopt);
  bad_l.save(tmp / "bad_l.json");
  lol::RoutingPath deep;  // one row more than the model's routed depths
  deep.library_size = c.library_size;
  for (int64_t d = 0; d <= c.core_depth; ++d) deep.set(d, 0, 0, std::nullopt);
  deep.save(tmp / "deep.json");
  std::filesystem::create_directories(tmp / "run/checkpoints");
  write_text(tmp / "run/latest", "step-000001\n");
  // A training run with two checkpoints, a dataset and a task file: outputs must not land
  // on any of their files (seventh pass).
  lol::save_lol(make_model(c, 52, torch::kFloat32), tmp / "run2/checkpoints/step-000001");
  lol::save_lol(make_model(c, 52, torch::kFloat32), tmp / "run2/checkpoints/step-000002");
  write_text(tmp / "run2/latest", "step-000002\n");
  write_text(tmp / "run2/metrics.jsonl", "{}\n");
  std::filesystem::create_directories(tmp / "ds");
  write_text(tmp / "ds/dataset.json", "{}");
  write_text(tmp / "ch.jsonl", "{}\n");
  write_text(tmp / "bad_e.json",
             R"({"format": "lol-routing-path", "version": 1, "library_size": 3, "expert": [[0, 3]], "alpha": [[null, null]]})");
  std::string too_long = "1";  // max_seq_len + 1 token ids
  for (int64_t i = 0; i < c.max_seq_len; ++i) too_long += " 1";
  struct Bad {
    std::string args, needle;
  };
  const std::vector<Bad> bads = {
      {base + " --tokens '1 2 x'", "--tokens"},
      {base + " --tokens '1 2 23'", "vocab_size"},
      {base + " --tokens ''", "--tokens"},
      {base + " --tokens '1 2 3' --prompt-len 4", "--prompt-len"},
      {base + " --tokens '1 2 3' --router-only 1,3", "--router-only"},
      {base + " --tokens '1 2 3' --depth 9", "--depth"},
      {base + " --tokens '1 2 3' --force-path " + quote(tmp / "bad_l.json"), "library_size"},
      {base + " --tokens '1 2 3' --force-path " + quote(tmp / "bad_e.json"), "expert[0][1]"},
      // generate checks a path against the model the same way, naming the file.
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --force-path " +
           quote(tmp / "bad_l.json"),
       "bad_l.json: field 'library_size'"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --force-path " +
           quote(tmp / "deep.json"),
       "deep.json: field 'expert' has " + std::to_string(c.core_depth + 1) + " rows (one per routed depth)"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2 23' --ids --max-new 1", "--tokens: id 23"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2 3' --prompt-len 4 --ids --max-new 1", "--prompt-len 4"},
      // Unsigned options (seeds) refuse negative values instead of wrapping them to 2^64 - 1.
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --seed -1", "--seed: Value -1"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --threads -2", "--threads: Value -2"},
      {"layerroute eval --data " + quote(tmp / "none.jsonl") + " --samples -1", "--samples: Value -1"},
      {"info " + quote(tmp / "ck") + " --context -5", "--context -5: expected 0 (= max_seq_len) or 1 <= context"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '" + too_long + "' --ids --max-new 1",
       "--tokens: the prompt has " + std::to_string(c.max_seq_len + 1) + " tokens"},
      // Third adversarial pass: values that were ignored, clamped or saturated.
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --stop 999", "--stop 999: token id 999"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --stop the",
       "--stop 'the': the model has no tokenizer or vocabulary to look up token text"},
      // Options that contradict each other are refused rather than one silently winning.
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --stop 5 --no-stop",
       "--stop excludes --no-stop"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --prompt-len 1 --prompt-window",
       "--prompt-len excludes --prompt-window"},
      {"data maze --n 2 --threads 4 --out " + quote(tmp / "maze_threads"), "not expected: 4 --threads"},
      {"export --hf " + quote(tmp / "ck") + " --out " + quote(tmp / "hf_out") + " --tokenizer byte --no-tokenizer",
       "--tokenizer excludes --no-tokenizer"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --router-only-last -1",
       "--router-only-last: Value -1"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --trace " + quote(tmp / "no/t.json"),
       "--trace " + (tmp / "no/t.json") + ": directory"},
      {base + " --tokens '1 2 3' --depth -5", "--depth: Value -5"},
      // Break-it pass of session 35: a forced path at --depth 0 is checked too; --tokens
      // refuses empty fields as `generate --ids` does; --out naming a file is refused
      // before minutes of generation.
      {base + " --tokens '1 2 3' --depth 0 --force-path " + quote(tmp / "deep.json"),
       "rows (one per routed depth): expected at most the 0 routed depths"},
      {base + " --tokens '1,,2'", "--tokens: an empty field"},
      {"data maze --n 2 --out " + quote(tmp / "ch.jsonl"), "exists and is not a directory"},
      {"data maze --n 1 --size 4 --seed 18446744073709551616 --out " + quote(tmp / "seed"),
       "--seed: Value 18446744073709551616: expected an integer in [0, 18446744073709551615]"},
      {"launch --nproc 5000 -- true", "--nproc: Value 5000 not in range 1 to 1024"},
      {"launch --nproc 1 --timeout 0 -- true", "--timeout: Value 0 not in range 1 to 604800"},
      {"launch --nproc 1 --grace -1 -- true", "--grace: Value -1"},
      // bench generate names the flag that is out of range.
      {"bench generate --model " + quote(tmp / "ck") + " --context 0", "--context 0: expected >= 1"},
      {"bench generate --model " + quote(tmp / "ck") + " --context 4 --full-steps 0", "--full-steps 0: expected >= 1"},
      {"bench generate --model " + quote(tmp / "ck") + " --context 4 --batch 0", "--batch 0: expected >= 1"},
      {"bench generate --model " + quote(tmp / "ck") + " --context " + std::to_string(c.max_seq_len) + " --new 1",
       "expected --context + max(--new, --full-steps) + 1 <= max_seq_len"},
      {"forward --model " + quote(tmp / "nope") + " --tokens 1 --out " + quote(tmp / "o.safetensors"), "nope"},
      {"forward --model " + quote(tmp / "ck") + " --tokens 1 --out " + quote(tmp / "no/dir/o.safetensors"), "no/dir"},
      {"forward --tokens 1 --out x", "--model"},
      // Fourth adversarial pass: an empty --prompt or --out; a checkpoint written into a run
      // directory (it would shadow the run's latest checkpoint).
      {"generate --model " + quote(tmp / "ck") + " --prompt '' --ids --max-new 1", "--prompt: the text is empty"},
      {"init --config " + quote(tmp / "ck/config.json") + " --out ''", "--out: empty path"},
      {"init --config " + quote(tmp / "ck/config.json") + " --out " + quote(tmp / "run") + " --force",
       "a training run directory"},
      // An output path that is a file of the model being read (fourth adversarial pass).
      {"forward --model " + quote(tmp / "ck") + " --tokens 1 --out " + quote(tmp / "ck/model.safetensors"),
       "ck/model.safetensors, a file of the model being read"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --trace " + quote(tmp / "ck/config.json"),
       "ck/config.json, a file of the model being read"},
      {"forward --model " + quote(tmp / "run2") + " --tokens 1 --out " + quote(tmp / "run2/latest"),
       "run2/latest, a file of the training run being read"},
      {"forward --model " + quote(tmp / "run2") + " --tokens 1 --out " + quote(tmp / "run2/metrics.jsonl"),
       "run2/metrics.jsonl, a file of the training run being read"},
      {"forward --model " + quote(tmp / "run2") + " --tokens 1 --out " +
           quote(tmp / "run2/checkpoints/step-000001/model.safetensors"),
       "a checkpoint of the run being read"},
      {"generate --model " + quote(tmp / "ck") + " --tokens '1 2' --ids --max-new 1 --trace " + quote(tmp / "ds"),
       "is a directory (expected a file to write)"},
      {"eval lm --model " + quote(tmp / "run2") + " --data " + quote(tmp / "ds") + " --out " + quote(tmp / "ds/dataset.json"),
       "a file of the dataset"},
      {"eval choice --model " + quote(tmp / "run2") + " --data " + quote(tmp / "ch.jsonl") + " --out " + quote(tmp / "ch.jsonl"),
       "is the --data file"},
  };
  std::vector<std::string> cmds;
  for (const auto& b : bads) cmds.push_back(b.args);
  auto results = run_lol_all(cmds);
  for (size_t i = 0; i < bads.size(); ++i) {
    SCOPED_TRACE(bads[i].args);
    EXPECT_EQ(results[i].code, 2) << results[i].out;
    EXPECT_NE(results[i].out.find(bads[i].needle), std::string::npos) << results[i].out;
  }
  EXPECT_EQ(read_text(tmp / "run2/latest"), "step-000002\n");
  EXPECT_EQ(read_text(tmp / "ds/dataset.json"), "{}");
  // An existing file elsewhere is replaced as asked (the --trace check compares the
  // model's files, not the trace's own folder), and a new file inside the run is fine.
  write_text(tmp / "old_trace.json", "old");
  auto ok = run_lol_all({"generate --model " + quote(tmp / "run2") + " --tokens '1 2' --ids --max-new 1 --trace " +
                             quote(tmp / "old_trace.json"),
                         "forward --model " + quote(tmp / "run2") + " --tokens 1 --out " + quote(tmp / "run2/fwd.safetensors")});
  for (const auto& r : ok) EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(read_text(tmp / "old_trace.json"), "old");
}

TEST(CliGenerate, NewTokensStopAtMaxSeqLen) {
  TempDir tmp("cli_gen_cap");
  auto c = tiny_config();
  lol::save_lol(make_model(c, 53, torch::kFloat32), tmp / "ck");
  // 3 prompt tokens + 1000 new ones do not fit max_seq_len: generation ends when the context is full.
  auto r = run_lol("generate --model " + quote(tmp / "ck") + " --tokens '1 2 3' --ids --no-stop --max-new 1000");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string cap = "note: --max-new 1000 reduced to " + std::to_string(c.max_seq_len - 3) +
                          " (the model's max_seq_len is " + std::to_string(c.max_seq_len) + ", the prompt has 3 tokens)";
  EXPECT_NE(r.out.find(cap), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(c.max_seq_len - 3) + " tokens in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max_seq_len reached"), std::string::npos) << r.out;
}

// A failed allocation is reported as out of memory (exit 4), not as an internal error.
TEST(CliErrors, OutOfMemoryExitsWith4AndSaysSo) {
#if LOL_BINARY_SANITIZED
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: ulimit -v cannot apply";
#elif defined(LOL_CUDA_BUILD)
  GTEST_SKIP() << "a CUDA LibTorch maps more address space while loading than ulimit -v leaves (seen: "
                  "libnvshmem_host.so.3: failed to map segment)";
#else
  // 2.5 GB of address space; the first 32768^2 fp32 matrix alone needs 4 GiB.
  auto r = run_cmd("ulimit -v 2500000; LOL_NUM_THREADS=1 " + quote(LOL_BINARY) +
                   " bench matmul --n 32768 --seconds 0.01");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find("error: out of memory"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
#endif
}

// Benchmark flags out of range, nan and inf included, are refused naming the flag
// (`--seconds inf` never finished; a peak of -5 or nan was ignored silently).
TEST(CliErrors, BenchFlagsAreChecked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench matmul --n 8 --seconds inf", "--seconds: Value inf not in range"},
      {"bench matmul --n 8 --seconds nan", "--seconds: Value nan not in range"},
      {"bench matmul --n 8 --seconds -1", "--seconds: Value -1 not in range"},
      {"bench train --steps 1 --warmup 0 --peak-gflops -5", "--peak-gflops: Value -5 not in range"},
      {"bench train --steps 1 --warmup 0 --peak-gflops nan", "--peak-gflops: Value nan not in range"},
      {"bench train --steps 1 --warmup 0 --peak-gflops 0", "--peak-gflops: Value 0 not in range"},
      {"bench train --profile 1 --profile-top -1", "--profile-top: Value -1 not in range"},
      {"bench train --optimizer-grouping fused", "--optimizer-grouping: fused not in"},
  };
  std::vector<std::string> args;
  for (const auto& c : cases) args.push_back(c.first);
  auto r = run_lol_all(args);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(r[i].code, 2) << cases[i].first << ": " << r[i].out;
    EXPECT_NE(r[i].out.find(cases[i].second), std::string::npos) << cases[i].first << ": " << r[i].out;
  }
}

TEST(CliInitInfo, InitWritesALoadableCheckpointAndInfoCountsHonestly) {
  TempDir tmp("cli_init");
  auto c = compat_config(false);
  c.library_size = 6;  // L > D: some experts are not on a token's path
  c.max_seq_len = 128;
  auto cj = c.to_json();
  cj["extra"] = {{"task", "maze"}};
  write_text(tmp / "c.json", cj.dump());
  auto bad = c.to_json();
  bad["stride"] = c.window;
  write_text(tmp / "bad1.json", bad.dump());
  bad = c.to_json();
  bad["n_layers"] = 4;
  write_text(tmp / "bad2.json", bad.dump());
  // 345 G parameters (1.4 TB of float32): refused before allocating (it ran minutes into
  // the kernel's out-of-memory kill).
  auto huge = c.to_json();
  for (const auto& [k, v] : std::map<std::string, int64_t>{{"vocab_size", 100000}, {"d_model", 16384}, {"n_heads", 128},
                                                           {"n_kv_heads", 128}, {"ffn_hidden", 65536}, {"library_size", 64},
                                                           {"core_depth", 64}, {"n_prelude", 8}, {"n_coda", 8}})
    huge[k] = v;
  write_text(tmp / "huge.json", huge.dump());
  const std::string ck = tmp / "ck", ck2 = tmp / "ck2", init = "init --config " + quote(tmp / "c.json");

  // Round 1: two inits with the same seed, bad configs (exit 2, file and field named).
  auto r1 = run_lol_all({init + " --seed 7 --out " + quote(ck), init + " --seed 7 --out " + quote(ck2),
                         "init --config " + quote(tmp / "bad1.json") + " --out " + quote(tmp / "x"),
                         "init --config " + quote(tmp / "bad2.json") + " --out " + quote(tmp / "x"),
                         "init --config " + quote(tmp / "huge.json") + " --out " + quote(tmp / "x")});
  ASSERT_EQ(r1[0].code, 0) << r1[0].out;
  ASSERT_EQ(r1[1].code, 0) << r1[1].out;
  EXPECT_EQ(read_bytes(ck + "/model.safetensors"), read_bytes(ck2 + "/model.safetensors")) << "init not deterministic";
  EXPECT_EQ(r1[2].code, 2);
  EXPECT_NE(r1[2].out.find("bad1.json"), std::string::npos) << r1[2].out;
  EXPECT_NE(r1[2].out.find("stride"), std::string::npos) << r1[2].out;
  EXPECT_EQ(r1[3].code, 2);
  EXPECT_NE(r1[3].out.find("n_layers"), std::string::npos) << r1[3].out;
  EXPECT_EQ(r1[4].code, 2) << r1[4].out;
  EXPECT_NE(r1[4].out.find("huge.json: the model's float32 weights need about 12"), std::string::npos) << r1[4].out;
  EXPECT_NE(r1[4].out.find(" GiB, more than the "), std::string::npos) << r1[4].out;
  EXPECT_FALSE(std::filesystem::exists(tmp / "x"));
  nlohmann::json extra;
  auto m = lol::load_lol(ck, torch::kCPU, &extra);
  EXPECT_EQ(extra, (nlohmann::json{{"task", "maze"}}));
  EXPECT_EQ(m->config().to_json(), c.to_json());

  // Round 2: no overwrite without --force; info as JSON (two contexts) and as text.
  auto r2 = run_lol_all({init + " --seed 8 --out " + quote(ck2), "info --json " + quote(ck),
                         "info --json --context 16 " + quote(ck), "info " + quote(ck)});
  EXPECT_EQ(r2[0].code, 2) << "overwrote a checkpoint without --force: " << r2[0].out;
  for (int i = 1; i < 4; ++i) ASSERT_EQ(r2[i].code, 0) << r2[i].out;

  // Parameters counted independently from the file: every tensor but the balancing bias.
  auto f = io::SafetensorsFile::read(ck + "/model.safetensors");
  int64_t params = 0, expert = 0;
  for (const auto& e : f.entries()) {
    if (e.name == "model.balance_bias") continue;
    params += e.numel();
    if (e.name.rfind("model.library.0.", 0) == 0) expert += e.numel();
  }
  auto j = nlohmann::json::parse(r2[1].out);
  EXPECT_EQ(j["parameters"].get<int64_t>(), params);
  EXPECT_EQ(j["parameters_per_expert"].get<int64_t>(), expert);
  EXPECT_EQ(j["active_parameters_per_token"].get<int64_t>(), params - (c.library_size - c.core_depth) * expert);
  EXPECT_EQ(j["config"], c.to_json());
  // FLOPs: 2 x multiply-adds of every matmul a token goes through.
  const double d = c.d_model, hd = c.head_dim(), H = c.n_heads, kv = c.n_kv_heads * hd, F = c.ffn_hidden;
  const double lin = 2 * d * H * hd + 2 * 2 * d * kv + 2 * H * hd * d + 3 * 2 * d * F;
  const double n = c.max_seq_len, Wn = c.window;
  const double expect = (c.n_prelude + c.n_coda) * (lin + 2 * 2 * H * hd * (n + 1) / 2) +
                        c.core_depth * (lin + 2 * 2 * H * hd * (Wn + 1) / 2 + 2 * d * c.library_size / Wn) +
                        2 * d * c.vocab_size;
  EXPECT_NEAR(j["forward_flops_per_token"].get<double>(), expect, 1e-6 * expect);
  EXPECT_NEAR(j["training_flops_per_token"].get<double>(), 3 * expect, 3e-6 * expect);
  // A shorter context lowers only the full-attention term.
  auto j16 = nlohmann::json::parse(r2[2].out);
  EXPECT_NEAR(j["forward_flops_per_token"].get<double>() - j16["forward_flops_per_token"].get<double>(),
              (c.n_prelude + c.n_coda) * 2 * H * hd * (n - 16), 1e-6 * expect);
  // Text output names the numbers and the formula.
  for (const std::string& s : std::vector<std::string>{std::to_string(params), "active", "FLOPs", "training", "(n+1)/2",
                                                       "(W+1)/2", "\"library_size\":6"})
    EXPECT_NE(r2[3].out.find(s), std::string::npos) << s << "\n" << r2[3].out;

  // Round 3: --force overwrites; another seed gives other weights.
  auto r3 = run_lol(init + " --seed 8 --force --out " + quote(ck2));
  ASSERT_EQ(r3.code, 0) << r3.out;
  EXPECT_NE(read_bytes(ck + "/model.safetensors"), read_bytes(ck2 + "/model.safetensors"));
}

// `lol info FILE`: a model config.json or a run config describes the model before it is
// trained, with the numbers `lol info` gives for the checkpoint made from it; a run
// config's vocab_size comes from its dataset (as the trainer takes it) or --vocab-size.
TEST(CliInitInfo, InfoOnAConfigFileGivesTheNumbersOfTheModelItMakes) {
  TempDir tmp("cli_info_config");
  auto c = compat_config(false);
  c.library_size = 6;
  c.max_seq_len = 128;
  write_text(tmp / "c.json", c.to_json().dump());
  const std::string ck = tmp / "ck";
  ASSERT_EQ(run_lol("init --config " + quote(tmp / "c.json") + " --out " + quote(ck)).code, 0);
  // A run config whose model section leaves vocab_size and max_seq_len to the trainer.
  auto section = c.to_json();
  section.erase("vocab_size");
  section.erase("max_seq_len");
  const nlohmann::json run = {{"model", section},
                              {"data", {{"dir", tmp / "data"}, {"seq_len", 128}}},
                              {"train", {{"steps", 1}, {"out", tmp / "run"}}}};
  write_text(tmp / "run.json", run.dump());
  auto r = run_lol_all({"info --json " + quote(ck), "info --json " + quote(tmp / "c.json"),
                        "info --json " + quote(tmp / "run.json"),
                        "info --json " + quote(tmp / "run.json") + " --vocab-size " + std::to_string(c.vocab_size),
                        "info " + quote(tmp / "c.json") + " --vocab-size 99", "info " + quote(ck) + " --vocab-size 99",
                        "info " + quote(tmp / "c.json"), "info " + quote(tmp / "run.json") + " --vocab-size 0"});
  ASSERT_EQ(r[0].code, 0) << r[0].out;
  ASSERT_EQ(r[1].code, 0) << r[1].out;
  auto from_ck = nlohmann::json::parse(r[0].out), from_cfg = nlohmann::json::parse(r[1].out);
  EXPECT_EQ(from_ck["checkpoint"], ck);
  EXPECT_EQ(from_cfg["config_file"], tmp / "c.json");
  EXPECT_EQ(from_cfg["config"], c.to_json());
  from_ck.erase("checkpoint");
  from_cfg.erase("config_file");
  EXPECT_EQ(from_cfg.erase("checkpoint"), 0u);
  EXPECT_EQ(from_ck, from_cfg) << "config file and checkpoint disagree";
  // No dataset yet: the error names the file, the field, data.dir and --vocab-size.
  EXPECT_EQ(r[2].code, 2) << r[2].out;
  for (const std::string s : {"run.json:model", "vocab_size", "data.dir", "--vocab-size"})
    EXPECT_NE(r[2].out.find(s), std::string::npos) << s << "\n" << r[2].out;
  ASSERT_EQ(r[3].code, 0) << r[3].out;
  auto from_run = nlohmann::json::parse(r[3].out);
  EXPECT_EQ(from_run["parameters"], nlohmann::json::parse(r[1].out)["parameters"]);
  EXPECT_EQ(from_run["config"]["max_seq_len"], 1024) << "max(1024, data.seq_len), as the trainer fills it";
  EXPECT_EQ(r[4].code, 2) << r[4].out;  // the config sets vocab_size
  EXPECT_NE(r[4].out.find("sets vocab_size"), std::string::npos) << r[4].out;
  EXPECT_EQ(r[5].code, 2) << r[5].out;  // a saved model's vocabulary is fixed
  EXPECT_NE(r[5].out.find("applies to config files"), std::string::npos) << r[5].out;
  ASSERT_EQ(r[6].code, 0) << r[6].out;
  EXPECT_NE(r[6].out.find("not trained"), std::string::npos) << r[6].out;
  EXPECT_EQ(r[7].code, 2) << r[7].out;  // given as 0: refused (it was ignored)
  EXPECT_NE(r[7].out.find("--vocab-size 0: expected 1 <= vocab_size"), std::string::npos) << r[7].out;
  // With the dataset in place the vocabulary is the dataset's.
  ASSERT_EQ(run_lol("data maze --n 4 --size 4 --no-progress --out " + quote(tmp / "data")).code, 0);
  auto r2 = run_lol("info --json " + quote(tmp / "run.json"));
  ASSERT_EQ(r2.code, 0) << r2.out;
  const auto ds = nlohmann::json::parse(read_text(tmp / "data/dataset.json"));
  EXPECT_EQ(nlohmann::json::parse(r2.out)["config"]["vocab_size"], ds["vocab_size"]);
}

// Start-up (core/runtime.h): OMP_WAIT_POLICY=PASSIVE and OPENBLAS_THREAD_TIMEOUT=4 when the
// user set neither (the program re-executes itself from its .preinit_array, before any
// library is initialised); a user's own values are kept. Checked where it matters: the
// values libgomp (OMP_DISPLAY_ENV=verbose prints its spin count: 0 means passive) and
// OpenBLAS (openblas_thread_timeout(), `lol env`'s blas_thread_timeout) actually read.
TEST(CliRuntime, StartUpSetsPassiveOpenMPAndAShortOpenBLASTimeoutUnlessTheUserDid) {
  const std::string lol = reftest::quote(LOL_BINARY);
  struct Case {
    std::string env;  // prefix of the command line
    std::string wait_policy, timeout;
    bool passive;
  };
  const std::vector<Case> cases = {
      {"env -u OMP_WAIT_POLICY -u OPENBLAS_THREAD_TIMEOUT", "PASSIVE", "4", true},
      {"env OMP_WAIT_POLICY=ACTIVE OPENBLAS_THREAD_TIMEOUT=9", "ACTIVE", "9", false},
      {"env -u OPENBLAS_THREAD_TIMEOUT OMP_WAIT_POLICY=ACTIVE", "ACTIVE", "4", false},
      {"env -u OMP_WAIT_POLICY OPENBLAS_THREAD_TIMEOUT=6", "PASSIVE", "6", true},
  };
  TempDir tmp("cli_startup");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.env);
    // One start per case: the JSON record on stdout, libgomp's settings on stderr.
    const std::string err = tmp / "omp.txt";
    auto r = reftest::run_cmd("(" + c.env + " LOL_NUM_THREADS=1 OMP_DISPLAY_ENV=verbose " + lol + " env --json 2>" +
                              reftest::quote(err) + ")");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["env"]["OMP_WAIT_POLICY"], c.wait_policy);
    EXPECT_EQ(j["env"]["OPENBLAS_THREAD_TIMEOUT"], c.timeout);
    if (j["blas"].is_string())  // OpenBLAS read the value when it was loaded
      EXPECT_EQ(j["blas_thread_timeout"], std::stoi(c.timeout));
#if LOL_KERNELS_OPENMP
    const std::string omp = read_text(err);
    if (omp.find("GOMP_SPINCOUNT") != std::string::npos) {  // libgomp, GCC's OpenMP runtime
      EXPECT_EQ(omp.find("GOMP_SPINCOUNT = '0'") != std::string::npos, c.passive) << omp;
    }
#endif
  }
}

// `lol env` (core/environment.h): the record a run's numbers depend on. The kernels it
// names are the ones in use: OPENBLAS_CORETYPE / ATEN_CPU_CAPABILITY change them, and
// the record shows it.
TEST(CliRuntime, EnvReportsVersionsThreadsAndTheKernelsInUse) {
  auto r = reftest::run_lol("env --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["lol"], "0.1.0");
  EXPECT_EQ(j["threads"], 1);  // run_lol sets LOL_NUM_THREADS=1
  EXPECT_EQ(j["env"]["LOL_NUM_THREADS"], "1");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_TRUE(j["libtorch"].is_string());
  EXPECT_TRUE(j["cpu"].is_object());
  ASSERT_TRUE(j["aten_cpu_capability"].is_string()) << j.dump();
  // ATen honours ATEN_CPU_CAPABILITY=default on every CPU (at::show_config() names it
  // "NO AVX" in LibTorch 1.x, "DEFAULT" in 2.x: seen with 2.11 on the GPU machine).
  auto d = reftest::run_cmd("ATEN_CPU_CAPABILITY=default LOL_NUM_THREADS=1 " + reftest::quote(LOL_BINARY) +
                            " env --json");
  ASSERT_EQ(d.code, 0) << d.out;
  const auto dflt = nlohmann::json::parse(d.out)["aten_cpu_capability"];
  EXPECT_TRUE(dflt == "NO AVX" || dflt == "DEFAULT") << dflt;
  const auto& isa = j["cpu"].value("isa", nlohmann::json::array());
  const bool avx2 = std::find(isa.begin(), isa.end(), "avx2") != isa.end();
  if (j["blas"].is_string() && avx2) {  // OpenBLAS (Debian: libopenblas0-pthread) on an x86 CPU with Haswell's ISA
    EXPECT_EQ(j["blas"].get<std::string>().rfind("OpenBLAS", 0), 0u) << j["blas"];
    auto h = reftest::run_cmd("OPENBLAS_CORETYPE=Haswell LOL_NUM_THREADS=1 " + reftest::quote(LOL_BINARY) +
                              " env --json");
    ASSERT_EQ(h.code, 0) << h.out;
    EXPECT_EQ(nlohmann::json::parse(h.out)["blas_core"], "Haswell");
    // Unset, OpenBLAS chooses by the CPU it detects, and lol sets nothing.
    auto u = reftest::run_cmd("env -u OPENBLAS_CORETYPE LOL_NUM_THREADS=1 " + reftest::quote(LOL_BINARY) + " env --json");
    ASSERT_EQ(u.code, 0) << u.out;
    const auto uj = nlohmann::json::parse(u.out);
    EXPECT_FALSE(uj["env"].contains("OPENBLAS_CORETYPE")) << uj.dump();
    EXPECT_TRUE(uj["blas_core"].is_string()) << uj.dump();
  }
  auto text = reftest::run_lol("env");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("blas_core"), std::string::npos) << text.out;
  EXPECT_NE(reftest::run_lol("env --device nonsense").code, 0);
  EXPECT_EQ(j["cpu_kernels"], true);
  // LOL_CPU_KERNELS=0: the composed operations a GPU runs (recorded and named); a value
  // other than 0 or 1, like a thread count beyond the bound, is an error at start-up
  // (exit 2, naming the variable), not an abort.
  auto off = reftest::run_cmd("LOL_CPU_KERNELS=0 LOL_NUM_THREADS=1 " + reftest::quote(LOL_BINARY) + " env --json");
  ASSERT_EQ(off.code, 0) << off.out;
  const auto oj = nlohmann::json::parse(off.out);
  EXPECT_EQ(oj["cpu_kernels"], false);
  EXPECT_EQ(oj["env"]["LOL_CPU_KERNELS"], "0");
  for (const std::string bad : {"LOL_CPU_KERNELS=2", "LOL_NUM_THREADS=5000", "LOL_NUM_THREADS=abc", "LOL_NUM_THREADS=-1"}) {
    auto b = reftest::run_cmd(bad + " " + reftest::quote(LOL_BINARY) + " env");
    EXPECT_EQ(b.code, 2) << bad << ": " << b.out;
    EXPECT_NE(b.out.find("error: "), std::string::npos) << b.out;
    EXPECT_NE(b.out.find(bad.substr(0, bad.find('='))), std::string::npos) << b.out;
  }
}
