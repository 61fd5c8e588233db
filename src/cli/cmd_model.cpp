// `lol init | info | forward`: create a LoL checkpoint, describe it (parameters,
// active parameters and FLOPs per token), and run one sequence through it with the
// routing trace (paper section 3, Algorithm 1). Formats: docs/checkpoint-format.md,
// docs/routing-paths.md.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "baselines/flops.h"
#include "baselines/looped_config.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "core/finite.h"
#include "core/runtime.h"
#include "core/tensor_io.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "lol/checkpoint.h"
#include "lol/model.h"
#include "nn/block_cost.h"
#include "training/model_sections.h"
#include "util/size_limits.h"
#include "training/run_config.h"
#include "training/trainable.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

// ------------------------------------------------------------------ parsing helpers

/// Integers separated by blanks and/or commas. Throws InputError naming `flag`.
std::vector<int64_t> parse_int_list(const std::string& s, const std::string& flag) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < s.size()) {
    if (std::isspace(static_cast<unsigned char>(s[i])) || s[i] == ',') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])) && s[j] != ',') ++j;
    const std::string tok = s.substr(i, j - i);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != tok.size() || tok.empty())
      throw InputError(flag + ": '" + tok + "' (item " + std::to_string(out.size()) + ") is not an integer");
    out.push_back(v);
    i = j;
  }
  return out;
}

std::string human(double x) {
  const char* units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (std::abs(x) >= 1000 && u < 5) {
    x /= 1000;
    ++u;
  }
  std::ostringstream s;
  s << std::setprecision(4) << x << units[u];
  return s.str();
}

// ------------------------------------------------------------------ FLOPs per token

/// Matmul FLOPs (2 x multiply-adds) of one forward pass, per token. `context` is the
/// sequence length assumed for the full-attention prelude/coda. See docs/checkpoint-format.md.
struct FlopCount {
  double block_linear = 0;   ///< q,k,v,o projections + SwiGLU of one block
  double outer_linear = 0;   ///< the same for a prelude/coda block (its gate + top-k experts with an MoE FFN)
  double full_attn = 0;      ///< QK^T + AV of one prelude/coda block, average causal context (n+1)/2
  double window_attn = 0;    ///< QK^T + AV of one routed depth, average context (W+1)/2
  double router = 0;         ///< one router matmul per window of W tokens, per token
  double head = 0;           ///< LM head
  double prelude_coda = 0, core = 0, forward = 0;
};

FlopCount count_flops(const LoLConfig& c, int64_t depth, int64_t context) {
  FlopCount f;
  const double d = double(c.d_model), hd = double(c.head_dim()), H = double(c.n_heads);
  f.block_linear = 2 * double(nn::block_active_matmul_weights(block_shape(c)));
  f.outer_linear = 2 * double(nn::block_active_matmul_weights(prelude_coda_shape(c)));
  f.full_attn = 2 * 2 * H * hd * (double(context) + 1) / 2;
  const double w = double(std::min<int64_t>(c.window, context));
  f.window_attn = 2 * 2 * H * hd * (w + 1) / 2;
  f.router = 2 * d * double(c.library_size) / w;
  f.head = 2 * d * double(c.vocab_size);
  f.prelude_coda = double(c.n_prelude + c.n_coda) * (f.outer_linear + f.full_attn);
  f.core = double(depth) * (f.block_linear + f.window_attn + f.router);
  f.forward = f.prelude_coda + f.core + f.head;
  return f;
}

// ------------------------------------------------------------------ init

/// Splits config.json's "extra" (task and vocabulary of the training data) off `cfg`.
nlohmann::json take_extra(nlohmann::json& cfg) {
  nlohmann::json extra;
  if (cfg.is_object() && cfg.contains("extra")) {
    extra = cfg["extra"];
    cfg.erase("extra");
  }
  return extra;
}

struct InitArgs {
  std::string config, out;
  uint64_t seed = 0;
  bool force = false;
};

void run_init(const InitArgs& a) {
  nlohmann::json j = io::read_json_file(a.config);
  if (j.is_object() && j.contains("model") && (j.contains("data") || j.contains("train")))
    throw InputError(a.config + ": a training run config (sections \"model\", \"data\", \"train\"); lol init takes a "
                     "model config: the fields of a \"model\" section with vocab_size (docs/checkpoint-format.md). "
                     "To train from it: lol train --config " + a.config);
  const nlohmann::json extra = take_extra(j);
  const LoLConfig cfg = LoLConfig::from_json(j, a.config);
  if (a.out.empty()) throw InputError("--out: empty path (expected the checkpoint directory to write)");
  if (fs::exists(a.out + "/latest") && fs::exists(a.out + "/checkpoints"))
    throw InputError("--out " + a.out + ": a training run directory (it has 'latest'); a checkpoint written here "
                     "would be loaded instead of the run's latest one: choose another directory");
  if (fs::exists(a.out + "/model.safetensors") && !a.force)
    throw InputError("--out " + a.out + ": already holds a checkpoint (pass --force to overwrite)");
  util::require_fits_in_memory(a.config, "the model's float32 weights",
                               4.0 * double(baselines::cost_model(cfg, cfg.core_depth).parameters));
  LoLModel m(cfg);
  m->reset_parameters(a.seed);
  save_lol(m, a.out, extra);
  std::cout << "wrote " << a.out << ": " << human(double(m->num_parameters())) << " parameters (L="
            << cfg.library_size << ", D=" << cfg.core_depth << ", W=" << cfg.window << ", S=" << cfg.stride
            << "), seed " << a.seed << "\n";
}

// ------------------------------------------------------------------ info

struct InfoArgs {
  std::string dir;
  int64_t context = 0;
  int64_t recurrence = 0;
  int64_t vocab_size = 0;  ///< config files without vocab_size (0: the dataset's)
  bool vocab_size_given = false;
  bool json = false;
};

/// Prints the per-token accounting of any architecture (baselines/flops.h).
void print_flops_lines(const baselines::FlopsReport& r) {
  std::cout << "effective   " << r.effective_parameters << " (" << human(double(r.effective_parameters))
            << ") parameters per token, counted once per application\n"
            << "accounting  " << human(r.forward_flops) << " forward FLOPs/token (linear " << human(r.linear_flops)
            << " + attention " << human(r.attention_flops) << " over the allowed query-key pairs), "
            << human(r.train_flops) << " training, context " << r.context << " (baselines/flops.h)\n"
            << "FLOPs/param " << std::setprecision(4) << r.flops_per_parameter
            << " forward FLOPs per token / parameters\n";
}

/// What `lol info` describes: a saved model (checkpoint or run directory) or, for a config
/// file, a model not trained yet (sizes from the configuration alone).
struct InfoSubject {
  std::string label;   ///< JSON key of `path`: "checkpoint" or "config_file"
  std::string path;    ///< as given on the command line
  std::string where;   ///< names the configuration in errors
  nlohmann::json config;  ///< model configuration, "extra" removed
  nlohmann::json extra;   ///< config.json "extra" (task, vocabulary), or null
  std::string dir;     ///< checkpoint directory; empty for a config file
};

/// `lol info FILE`: a training run config (its "model" section; the whole file is
/// validated by RunConfig::load) or a model config.json. Fields a run config's model
/// section leaves to the trainer are filled as the trainer fills them
/// (training::with_data_sizes): vocab_size from data.dir's dataset (an InputError naming
/// the file and field when that dataset does not exist yet), max_seq_len from data.seq_len.
/// `vocab_size` (--vocab-size, 0 when not given) stands in for that dataset; it is refused
/// for a config that sets vocab_size itself. A run config with init_from describes that
/// model directory.
InfoSubject info_subject_from_file(const std::string& file, int64_t vocab_size) {
  nlohmann::json j;
  try {
    j = io::read_json_file(file);
  } catch (const InputError& e) {
    const fs::path p(file);
    const std::string weights = p.extension() == ".safetensors"
                                    ? " (this is a weights file: pass the checkpoint directory holding it, " +
                                          (p.has_parent_path() ? p.parent_path().string() : std::string(".")) + ")"
                                    : "";
    throw InputError(std::string(e.what()) +
                     "; lol info takes a checkpoint or run directory, or a run or model config .json" + weights);
  }
  if (!j.is_object()) throw InputError(file + ": expected a JSON object (a run config or a model config.json)");
  const nlohmann::json* model = j.contains("model") ? &j["model"] : j.contains("init_from") ? nullptr : &j;
  if (vocab_size != 0 && model && model->is_object() && model->contains("vocab_size"))
    throw InputError("--vocab-size " + std::to_string(vocab_size) + ": " + file +
                     " sets vocab_size itself (expected --vocab-size only for a config without it)");
  if (model == &j) {
    nlohmann::json extra = take_extra(j);
    if (vocab_size > 0) j["vocab_size"] = vocab_size;  // else the model's default, as lol init
    return {"config_file", file, file, j, extra, ""};
  }
  const auto rc = training::RunConfig::load(file);
  if (!rc.init_from.empty()) {
    if (vocab_size != 0) throw InputError("--vocab-size: " + file + " starts from init_from \"" + rc.init_from +
                                          "\", a saved model (expected --vocab-size only for a new model's config)");
    const std::string dir = resolve_model_dir(rc.init_from);
    nlohmann::json cfg = io::read_json_file(dir + "/config.json");
    nlohmann::json extra = take_extra(cfg);
    return {"checkpoint", rc.init_from, dir + "/config.json", cfg, extra, dir};
  }
  int64_t vocab = vocab_size;
  if (!rc.model.contains("vocab_size") && vocab == 0) {
    if (!fs::exists(fs::path(rc.data.dir) / "dataset.json"))
      throw InputError(file + ":model: field 'vocab_size' is not set, and the trainer takes it from data.dir \"" +
                       rc.data.dir + "\", which holds no dataset.json yet (expected --vocab-size N, vocab_size in the "
                       "model section, or the dataset the run will train on)");
    vocab = data::Dataset::open(rc.data.dir).vocab_size();
  }
  return {"config_file", file, file + ":model", training::with_data_sizes(rc.model, vocab, rc.data.seq_len),
          nlohmann::json(), ""};
}

/// `lol info DIR`: a checkpoint directory, or a run directory (its latest checkpoint).
InfoSubject info_subject_from_dir(const std::string& path) {
  const std::string dir = resolve_model_dir(path);
  nlohmann::json cfg = io::read_json_file(dir + "/config.json");
  nlohmann::json extra = take_extra(cfg);
  return {"checkpoint", path, dir + "/config.json", cfg, extra, dir};
}

/// Throws std::logic_error when the closed-form count (baselines/flops.h) differs from the
/// parameters of the loaded model: the accounting printed would be wrong.
void require_counted(const char* what, int64_t counted, int64_t model) {
  if (counted != model)
    throw std::logic_error(std::string("flops accounting: ") + what + " " + std::to_string(counted) +
                           " differs from the model's " + std::to_string(model));
}

int64_t info_context(const InfoArgs& a, int64_t max_len) {
  if (a.context < 0 || a.context > max_len)
    throw InputError("--context " + std::to_string(a.context) + ": expected 0 (= max_seq_len) or 1 <= context <= max_seq_len = " +
                     std::to_string(max_len));
  return a.context > 0 ? a.context : max_len;
}

/// The first lines of the text output: what is described.
void print_subject(const InfoSubject& s) {
  if (s.dir.empty())
    std::cout << "config      " << s.path << " (not trained: sizes from the configuration)\n";
  else
    std::cout << "checkpoint  " << s.path << "\n";
}

/// `lol info` for the baseline architectures (dense, looped, moe).
void run_info_baseline(const InfoArgs& a, const InfoSubject& s) {
  const std::string arch = s.config.value("architecture", std::string());
  const int64_t n = info_context(a, s.config.value("max_seq_len", int64_t(2048)));
  baselines::CostModel cm;
  int64_t R = 0;
  if (arch == "looped") {
    const auto lc = baselines::LoopedConfig::from_json(s.config, s.where);
    if (a.recurrence < 0 || a.recurrence > 1000000)
      throw InputError("--recurrence " + std::to_string(a.recurrence) +
                       ": expected 0 (= the config's recurrence) or 1 <= R <= 1000000");
    R = a.recurrence > 0 ? a.recurrence : lc.recurrence;
    cm = baselines::cost_model(lc, R);
  } else {
    if (a.recurrence != 0) throw InputError("--recurrence applies to looped models only (this is " + arch + ")");
    cm = baselines::cost_model_from_json(s.config, s.where);
  }
  if (!s.dir.empty()) require_counted("parameter count", cm.parameters, training::load_model(s.dir)->num_parameters());
  const auto r = baselines::flops_report(cm, n);
  if (a.json) {
    nlohmann::json j = {{s.label, s.path}, {"architecture", arch}, {"config", s.config}};
    const nlohmann::json rj = r.to_json();
    for (const auto& it : rj.items()) j[it.key()] = it.value();
    if (R > 0) j["recurrence"] = R;
    if (!s.extra.is_null()) j["extra"] = s.extra;
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_subject(s);
  std::cout << "architecture " << arch << (R > 0 ? " (R = " + std::to_string(R) + " iterations)" : std::string()) << "\n"
            << "parameters  " << r.parameters << " (" << human(double(r.parameters)) << ")\n"
            << "active      " << r.active_parameters << " (" << human(double(r.active_parameters))
            << ") parameters per token\n";
  print_flops_lines(r);
  std::cout << "config      " << s.config.dump() << "\n";
  if (!s.extra.is_null()) std::cout << "extra       " << s.extra.dump() << "\n";
}

void run_info(const InfoArgs& a) {
  if (a.vocab_size_given && (a.vocab_size < 1 || a.vocab_size > (int64_t(1) << 31)))
    throw InputError("--vocab-size " + std::to_string(a.vocab_size) + ": expected 1 <= vocab_size <= 2^31");
  if (a.vocab_size_given && !fs::is_regular_file(a.dir))
    throw InputError("--vocab-size applies to config files (" + a.dir + " is a saved model: its vocab_size is fixed)");
  const InfoSubject s =
      fs::is_regular_file(a.dir) ? info_subject_from_file(a.dir, a.vocab_size) : info_subject_from_dir(a.dir);
  if (s.config.is_object() && s.config.value("architecture", std::string("lol")) != "lol") return run_info_baseline(a, s);
  if (a.recurrence != 0) throw InputError("--recurrence applies to looped models only (this is lol)");
  // A checkpoint runs at core_depth, or at the depth a growing run saved it at.
  LoLConfig c;
  int64_t depth = 0;
  std::optional<LoLModel> m;
  if (!s.dir.empty()) {
    m = load_lol(s.dir, torch::kCPU);
    c = (*m)->config();
    depth = (*m)->active_depth();
  } else {
    c = LoLConfig::from_json(s.config, s.where);
    depth = c.core_depth;
  }
  const int64_t n = info_context(a, c.max_seq_len);
  const auto f = count_flops(c, depth, n);
  const auto cm = baselines::cost_model(c, depth);
  const int64_t params = cm.parameters, active = cm.active_parameters;
  const int64_t expert_params = nn::block_parameters(block_shape(c));
  if (m) {
    require_counted("parameter count", params, (*m)->num_parameters());
    require_counted("active parameter count", active, (*m)->active_parameters_per_token());
  }
  const auto report = baselines::flops_report(cm, n);

  if (a.json) {
    nlohmann::json j = {{s.label, s.path},
                        {"parameters", params},
                        {"active_parameters_per_token", active},
                        {"active_depth", depth},
                        {"parameters_per_expert", expert_params},
                        {"context", n},
                        {"forward_flops_per_token", f.forward},
                        {"training_flops_per_token", 3 * f.forward},
                        {"flops_breakdown",
                         {{"block_linear", f.block_linear},
                          {"prelude_coda_linear", f.outer_linear},
                          {"full_attention_per_block", f.full_attn},
                          {"window_attention_per_depth", f.window_attn},
                          {"router_per_depth", f.router},
                          {"lm_head", f.head},
                          {"prelude_and_coda", f.prelude_coda},
                          {"routed_core", f.core}}},
                        {"flops_report", report.to_json()},
                        {"config", c.to_json()}};
    if (!s.extra.is_null()) j["extra"] = s.extra;
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_subject(s);
  std::cout << "parameters  " << params << " (" << human(double(params)) << "), " << expert_params
            << " per expert x " << c.library_size << " experts\n"
            << "active      " << active << " (" << human(double(active)) << ") parameters per token (min(L, D) = "
            << std::min(c.library_size, depth) << " experts on a token's path)\n"
            << "depth       " << depth << " of " << c.core_depth << " routed depths run"
            << (depth < c.core_depth ? " (saved while growing: trainer_state.json active_depth)" : "") << "\n"
            << "FLOPs/token " << std::setprecision(6) << f.forward << " (" << human(f.forward) << ") forward, "
            << 3 * f.forward << " (" << human(3 * f.forward) << ") training (3 x forward), every window full\n"
            << "  matmul FLOPs = 2 x multiply-adds, context n = " << n << ":\n"
            << "  (P+C) x [linear_pc + 4 H hd (n+1)/2] + D x [linear + 4 H hd (W+1)/2 + 2 d L / W] + 2 d V\n"
            << "  linear = 2 d (H hd) + 4 d (Hkv hd) + 2 (H hd) d + 6 d F = " << f.block_linear << "\n";
  if (c.moe_prelude_coda())
    std::cout << "  linear_pc = linear with the MoE FFN's 2 d E (gate) + k x 6 d F_e (E = " << c.prelude_coda_experts
              << ", k = " << c.prelude_coda_top_k << ") = " << f.outer_linear << "\n";
  else
    std::cout << "  linear_pc = linear (dense prelude/coda)\n";
  std::cout << "  prelude+coda " << f.prelude_coda << ", routed core " << f.core << ", LM head " << f.head << "\n";
  print_flops_lines(report);
  std::cout << "config      " << c.to_json().dump() << "\n";
  if (!s.extra.is_null()) std::cout << "extra       " << s.extra.dump() << "\n";
}

// ------------------------------------------------------------------ forward

struct ForwardArgs {
  std::string model, tokens, router_only, force_path, out, device = "cpu";
  int64_t prompt_len = 0;
  int64_t depth = -1;
};

/// --tokens as ids, checked against the model's vocabulary and max_seq_len.
std::vector<int64_t> forward_tokens(const ForwardArgs& a, int64_t vocab_size, int64_t max_seq_len) {
  const auto toks = parse_ids(a.tokens, "--tokens");  // as `lol generate --ids` reads them
  const int64_t n = int64_t(toks.size());
  if (n == 0) throw InputError("--tokens: no token ids given");
  if (n > max_seq_len)
    throw InputError("--tokens: " + std::to_string(n) + " tokens exceed max_seq_len = " + std::to_string(max_seq_len));
  for (int64_t i = 0; i < n; ++i)
    if (toks[i] < 0 || toks[i] >= vocab_size)
      throw InputError("--tokens: item " + std::to_string(i) + " = " + std::to_string(toks[i]) +
                       ": expected 0 <= id < vocab_size = " + std::to_string(vocab_size));
  return toks;
}

void write_forward(const ForwardArgs& a, const NamedTensors& tensors, std::map<std::string, std::string> meta) {
  const auto parent = fs::path(a.out).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    throw InputError("--out " + a.out + ": directory " + parent.string() + " does not exist");
  meta["format"] = "lol-forward";
  meta["checkpoint"] = a.model;
  save_tensors(a.out, tensors, meta);
}

/// `lol forward` on a dense, looped or MoE checkpoint (docs/baselines.md): the logits of
/// one sequence (one document); the LoL-only options are refused.
void run_forward_baseline(const ForwardArgs& a, const std::string& dir, const std::string& arch,
                          const torch::Device& dev) {
  const auto lol_only = [&](bool given, const std::string& flag) { refuse_routing_option(given, flag, dir, arch); };
  lol_only(a.prompt_len != 0, "--prompt-len");
  lol_only(!a.router_only.empty(), "--router-only");
  lol_only(!a.force_path.empty(), "--force-path");
  lol_only(a.depth >= 0, "--depth");
  auto model = training::load_model(dir);
  model->module().to(dev);
  model->module().eval();
  const auto cfg = model->config_json();
  const int64_t vocab = cfg.value("vocab_size", int64_t(0));
  const auto toks = forward_tokens(a, vocab, cfg.value("max_seq_len", int64_t(2048)));
  const int64_t n = int64_t(toks.size());
  training::TrainBatch batch;
  batch.tokens = torch::tensor(toks, torch::kInt64).unsqueeze(0).to(dev);
  batch.doc_ids = torch::zeros({1, n}, torch::kInt64).to(dev);
  torch::NoGradGuard ng;
  const auto logits = model->forward(batch);
  require_finite(logits, "forward: the logits");
  write_forward(a, {{"logits", logits[0].to(torch::kCPU, torch::kFloat32).contiguous()}},
                {{"architecture", arch}, {"tokens", std::to_string(n)}});
  std::cout << "wrote " << a.out << ": logits [" << n << ", " << vocab << "] (" << arch << " model: no routing)\n";
}

void run_forward(const ForwardArgs& a) {
  const auto dev = parse_device(a.device);
  const std::string dir = resolve_model_dir(a.model);
  require_output_outside_model(a.out, dir, "--out");  // before any work
  const std::string arch = model_architecture(dir);
  if (arch != "lol") return run_forward_baseline(a, dir, arch, dev);
  LoLModel m = load_lol(dir, dev);
  m->eval();
  const auto& c = m->config();

  const auto toks = forward_tokens(a, c.vocab_size, c.max_seq_len);
  const int64_t n = int64_t(toks.size());
  if (a.prompt_len < 0 || a.prompt_len > n)
    throw InputError("--prompt-len " + std::to_string(a.prompt_len) + ": expected 0 <= P <= number of tokens = " +
                     std::to_string(n));
  if (a.depth >= 0) {  // -1 (the default): core_depth
    if (a.depth > c.core_depth)
      throw InputError("--depth " + std::to_string(a.depth) + ": expected 0 <= depth <= core_depth = " +
                       std::to_string(c.core_depth));
    m->set_active_depth(a.depth);
  }

  LoLBatch batch;
  batch.tokens = torch::tensor(toks, torch::kInt64).unsqueeze(0);
  if (a.prompt_len > 0) batch.prompt_len = torch::tensor({a.prompt_len}, torch::kInt64);
  if (!a.router_only.empty()) {
    auto ro = torch::zeros({1, n}, torch::kBool);
    for (int64_t p : parse_int_list(a.router_only, "--router-only")) {
      if (p < 0 || p >= n)
        throw InputError("--router-only: position " + std::to_string(p) + ": expected 0 <= position < " + std::to_string(n));
      ro[0][p] = true;
    }
    batch.router_only = ro;
  }
  RoutingPath path;
  ForwardOptions fo;
  fo.trace = true;
  if (!a.force_path.empty()) {
    path = load_routing_path_for(a.force_path, c.library_size, m->active_depth());
    fo.force = &path;
  }

  torch::NoGradGuard ng;
  auto out = m->forward(batch, fo);
  require_finite_routing(out.trace, "forward");
  require_finite(out.logits, "forward: the logits");
  const int64_t D = int64_t(out.trace.size()), L = c.library_size;
  int64_t K = 0;
  for (const auto& t : out.trace) K = std::max<int64_t>(K, int64_t(t.k.size()));
  auto expert = torch::full({D, K}, -1, torch::kInt64);
  auto alpha = torch::zeros({D, K}, torch::kFloat32);
  auto probs = torch::zeros({D, K, L}, torch::kFloat32);
  for (int64_t d = 0; d < D; ++d) {
    const auto& t = out.trace[d];
    for (size_t g = 0; g < t.k.size(); ++g) {
      const int64_t k = t.k[g];
      expert[d][k] = t.expert[int64_t(g)];
      alpha[d][k] = t.alpha[int64_t(g)];
      probs[d][k] = t.probs[int64_t(g)];
    }
  }
  NamedTensors tensors = {{"logits", out.logits[0].to(torch::kCPU, torch::kFloat32).contiguous()},
                          {"routing.expert", expert},
                          {"routing.alpha", alpha},
                          {"routing.probs", probs}};
  write_forward(a, tensors,
                {{"architecture", "lol"}, {"tokens", std::to_string(n)}, {"prompt_len", std::to_string(a.prompt_len)},
                 {"active_depth", std::to_string(D)}, {"forced", a.force_path.empty() ? "" : a.force_path}});
  std::cout << "wrote " << a.out << ": logits [" << n << ", " << c.vocab_size << "], routing [" << D << ", " << K
            << "] over " << L << " experts\n";
}

}  // namespace

void register_model_commands(CLI::App& app) {
  auto ia = std::make_shared<InitArgs>();
  auto* init = app.add_subcommand("init", "Create a LoL checkpoint with freshly initialised weights");
  init->add_option("--config", ia->config, "Model config JSON (fields: docs/checkpoint-format.md)")->required();
  init->add_option("--seed", ia->seed, "Initialisation seed")->default_val(0);
  init->add_option("--out", ia->out, "Checkpoint directory to write")->required();
  init->add_flag("--force", ia->force, "Overwrite an existing checkpoint in --out");
  init->callback([ia] { run_init(*ia); });

  auto na = std::make_shared<InfoArgs>();
  auto* info = app.add_subcommand(
      "info", "Parameters, active parameters, FLOPs per token and FLOPs/parameter of a model (any architecture)");
  info->add_option("path", na->dir, "Checkpoint or run directory; or a config file (a run config or a model config.json: "
                                     "sizes of a model not trained yet)")
      ->required();
  info->add_option("--context", na->context, "Sequence length for the attention FLOPs (default max_seq_len)");
  auto* vocab = info->add_option(
      "--vocab-size", na->vocab_size,
      "Config files without vocab_size: the vocabulary (default: the dataset of the run config's data.dir)");
  info->add_option("--recurrence", na->recurrence, "Looped models: iterations R (0 = the config's recurrence)");
  info->add_flag("--json", na->json, "Print one JSON object instead of text");
  info->callback([na, vocab] {
    na->vocab_size_given = vocab->count() > 0;
    run_info(*na);
  });

  auto fa = std::make_shared<ForwardArgs>();
  auto* fwd = app.add_subcommand("forward", "Run one token sequence; write logits and the routing trace (safetensors)");
  fwd->add_option("--model", fa->model,
                  "Checkpoint directory, or a training run directory (its latest checkpoint); LoL, or dense / looped / "
                  "MoE (logits only)")
      ->required();
  fwd->add_option("--tokens", fa->tokens, "Token ids separated by blanks or commas, e.g. \"1 2 3\"")->required();
  fwd->add_option("--prompt-len", fa->prompt_len, "Prompt window: positions < P form window 0 at every depth")
      ->default_val(0);
  fwd->add_option("--router-only", fa->router_only, "Positions of router-only tokens, e.g. 4,9");
  fwd->add_option("--force-path", fa->force_path, "Routing path JSON (docs/routing-paths.md)");
  fwd->add_option("--depth", fa->depth, "Routed depths to run, 0..core_depth, with their own parameters (default: as trained, "
                "i.e. core_depth or the active depth of a checkpoint saved while growing)")
      ->check(CLI::Range(0, 4096));
  fwd->add_option("--device", fa->device, "cpu, cuda or cuda:N")->default_val("cpu");
  fwd->add_option("--out", fa->out, "Output .safetensors: logits, routing.expert, routing.alpha, routing.probs")
      ->required();
  fwd->callback([fa] { run_forward(*fa); });
}

}  // namespace lol::cli
