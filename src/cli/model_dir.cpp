#include "cli/model_dir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dataset/text_tokenizer.h"
#include "inference/generate.h"
#include "io/json_file.h"
#include "lol/checkpoint.h"
#include "lol/config.h"
#include "tokenizers/hf_json.h"
#include "training/train_checkpoint.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

/// True when `file` (an existing path) is `dir` or lies inside it (any depth).
bool inside(const fs::path& file, const fs::path& dir) {
  std::error_code ec;
  const fs::path f = fs::weakly_canonical(file, ec);
  if (ec) return false;
  const fs::path d = fs::weakly_canonical(dir, ec);
  if (ec || d.empty()) return false;
  auto fi = f.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++fi)
    if (fi == f.end() || *fi != *di) return false;
  return true;
}

/// The training run directory holding checkpoint `model_dir` (RUN/checkpoints/NAME with
/// RUN/latest or RUN/run.json), or empty.
fs::path run_of_checkpoint(const std::string& model_dir) {
  std::error_code ec;
  const fs::path ck = fs::weakly_canonical(model_dir, ec);
  if (ec || ck.parent_path().filename() != "checkpoints") return {};
  const fs::path run = ck.parent_path().parent_path();
  return fs::exists(run / "latest", ec) || fs::exists(run / "run.json", ec) ? run : fs::path();
}

}  // namespace

void require_output_outside_model(const std::string& out, const std::string& model_dir, const std::string& flag) {
  std::error_code ec;
  if (out.empty() || !fs::exists(out, ec)) return;
  if (fs::is_directory(out, ec)) throw InputError(flag + " " + out + ": is a directory (expected a file to write)");
  const auto refuse = [&](const std::string& what) {
    throw InputError(flag + " " + out + ": is " + what + " (writing it would destroy it); choose another path");
  };
  for (const auto& e : fs::directory_iterator(model_dir, ec)) {
    std::error_code eq;
    if (e.is_regular_file(eq) && fs::equivalent(out, e.path(), eq))
      refuse(e.path().string() + ", a file of the model being read");
  }
  // The run the checkpoint belongs to: its own files and every checkpoint.
  const fs::path run = run_of_checkpoint(model_dir);
  if (run.empty()) return;
  for (const char* f : {"latest", "run.json", "metrics.jsonl", "environment.jsonl", "trainer_state.json", ".lol.lock"}) {
    std::error_code eq;
    if (fs::equivalent(out, run / f, eq)) refuse((run / f).string() + ", a file of the training run being read");
  }
  if (inside(out, run / "checkpoints")) refuse("inside " + (run / "checkpoints").string() + ", a checkpoint of the run being read");
}

void require_output_outside_dataset(const std::string& out, const std::string& dataset_dir, const std::string& flag) {
  std::error_code ec;
  if (out.empty() || !fs::exists(out, ec) || !fs::is_directory(dataset_dir, ec)) return;
  if (inside(out, dataset_dir))
    throw InputError(flag + " " + out + ": is a file of the dataset " + dataset_dir +
                     " being read (writing it would destroy it); choose another path");
}

void require_output_is_not_input(const std::string& out, const std::string& in, const std::string& out_flag,
                                 const std::string& in_flag) {
  std::error_code ec;
  if (!out.empty() && !in.empty() && fs::exists(out, ec) && fs::equivalent(out, in, ec))
    throw InputError(out_flag + " " + out + ": is the " + in_flag + " file (writing it would destroy the input); "
                     "choose another path");
}

void require_tokenizer_fits(const tokenizers::Tokenizer& tok, int64_t model_vocab, const std::string& what,
                            const std::string& vocab_source) {
  if (int64_t(tok.vocab_size()) > model_vocab)
    throw InputError(what + ": " + std::to_string(tok.vocab_size()) + " ids, more than " + vocab_source +
                     " vocab_size = " + std::to_string(model_vocab) + " (expected a tokenizer of this model)");
}

std::string model_architecture(const std::string& model_dir) {
  const auto cfg = io::read_json_file(model_dir + "/config.json");
  return cfg.is_object() && cfg.contains("architecture") && cfg["architecture"].is_string()
             ? cfg["architecture"].get<std::string>()
             : "lol";
}

void refuse_routing_option(bool given, const std::string& flag, const std::string& model_dir, const std::string& arch) {
  if (given)
    throw InputError(flag + ": " + model_dir + " is a " + arch +
                     " model (no routed core); routing options apply to LoL models only");
}

std::string find_model_dir(const std::string& dir) {
  if (fs::exists(dir + "/config.json")) return dir;
  const std::string latest = dir + "/latest";
  if (fs::is_symlink(latest) || fs::is_directory(latest)) {
    if (fs::exists(latest + "/config.json")) return latest;
  }
  if (fs::is_regular_file(latest)) {
    std::ifstream in(latest);
    std::string name;
    std::getline(in, name);
    for (const std::string& cand : {name, dir + "/" + name, dir + "/checkpoints/" + name})
      if (!name.empty() && fs::exists(cand + "/config.json")) return cand;
    const auto checkpoints = training::list_checkpoints(dir);
    throw InputError(latest + ": names checkpoint '" + name + "', which is not in " + dir + "/checkpoints" +
                     (checkpoints.empty() ? std::string(" (the run has no checkpoint)")
                                          : " (the newest there is " + checkpoints.back() +
                                                "; pass it as the model directory)"));
  } else if (!fs::exists(latest) && !training::list_checkpoints(dir).empty()) {
    // A run killed before writing `latest` for its first checkpoint: its newest one.
    return training::resolve_checkpoint(dir);
  }
  throw InputError(dir + ": not a model directory (no config.json) and not a run directory with a 'latest' checkpoint");
}

std::string resolve_model_dir(const std::string& dir) {
  const std::string found = find_model_dir(dir);
  const auto cfg = io::read_json_file(found + "/config.json");
  // A Hugging Face folder: transformers' config.json names "architectures" (a list) and
  // "model_type"; a lol checkpoint names one "architecture".
  if (cfg.is_object() && !cfg.contains("architecture") && (cfg.contains("architectures") || cfg.contains("model_type")))
    throw InputError(found + "/config.json: a Hugging Face model folder (field '" +
                     (cfg.contains("architectures") ? "architectures' = " + cfg["architectures"].dump()
                                                    : "model_type' = " + cfg["model_type"].dump()) +
                     "), not a lol checkpoint: use `lol hf info|generate|ppl|bench " + found + "`");
  const auto arch = cfg.is_object() ? cfg.find("architecture") : cfg.end();
  if (cfg.is_object() && (arch == cfg.end() || *arch == "lol")) {
    // config.json is checked first: its errors are its own, not trainer_state.json's.
    nlohmann::json model_cfg = cfg;
    model_cfg.erase("extra");
    const int64_t core_depth = LoLConfig::from_json(model_cfg, found + "/config.json").core_depth;
    const int64_t active = saved_active_depth(found, core_depth);
    if (active < core_depth)
      std::fprintf(stderr,
                   "note: %s was saved while its routed core was growing: it runs %lld of its %lld routed depths, "
                   "as its last training step did (trainer_state.json active_depth), unless --depth says otherwise\n",
                   found.c_str(), (long long)active, (long long)core_depth);
  }
  return found;
}

void require_routed_depth(const LoLModel& model, const std::string& dir, const std::string& what,
                          const std::string& hint) {
  if (model->active_depth() > 0) return;
  throw InputError(dir + ": runs 0 of its " + std::to_string(model->config().core_depth) +
                   " routed depths (saved at trainer_state.json active_depth 0 while growing): " + what +
                   " needs at least one routed depth" + (hint.empty() ? "" : "; " + hint));
}

std::unique_ptr<tokenizers::Tokenizer> training_tokenizer(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "tokenizer.json")) return tokenizers::load_tokenizer(dir);
  const auto cfg = io::read_json_file(dir + "/config.json");
  if (!cfg.is_object() || !cfg.contains("extra") || !cfg["extra"].is_object()) return nullptr;
  const auto& e = cfg["extra"];
  if (!e.contains("tokenizer") || !e["tokenizer"].is_string() || !e.contains("dataset_dir") ||
      !e["dataset_dir"].is_string())
    return nullptr;
  const fs::path p = fs::path(e["dataset_dir"].get<std::string>()) / e["tokenizer"].get<std::string>();
  if (!fs::exists(p)) return nullptr;
  return tokenizers::load_tokenizer(p.string());
}

namespace {

/// "" when both tokenizers spell every id alike, else the first difference.
std::string vocabulary_difference(const tokenizers::Tokenizer& a, const tokenizers::Tokenizer& b) {
  const int32_t n = std::max(a.vocab_size(), b.vocab_size());
  for (int32_t id = 0; id < n; ++id) {
    const auto x = a.id_to_token(id), y = b.id_to_token(id);
    if (x != y)
      return "id " + std::to_string(id) + " is " + (x ? "'" + *x + "'" : std::string("unused")) + " in it and " +
             (y ? "'" + *y + "'" : std::string("unused")) + " in the training tokenizer";
  }
  return "";
}

}  // namespace

std::unique_ptr<tokenizers::Tokenizer> model_tokenizer(const std::string& dir, const std::string& flag,
                                                       int64_t model_vocab) {
  auto trained = training_tokenizer(dir);
  std::unique_ptr<tokenizers::Tokenizer> tok;
  if (!flag.empty()) {
    tok = data::open_text_tokenizer(flag);
    if (trained) {
      const std::string diff = vocabulary_difference(*tok, *trained);
      if (!diff.empty())
        throw InputError("--tokenizer " + flag + ": not the vocabulary " + dir +
                         " was trained with (" + diff + "); omit --tokenizer to use the checkpoint's own");
    }
  } else {
    tok = std::move(trained);
  }
  if (tok && model_vocab > 0 && tok->vocab_size() > model_vocab)
    throw InputError((flag.empty() ? dir + ": the training tokenizer" : "--tokenizer " + flag) + " has ids up to " +
                     std::to_string(tok->vocab_size() - 1) + ", beyond the model's vocab_size " +
                     std::to_string(model_vocab) + " (expected a tokenizer with at most " +
                     std::to_string(model_vocab) + " ids)");
  return tok;
}

void require_model_reads_dataset(const std::string& model_dir, const nlohmann::json& model_extra,
                                 int64_t model_vocab, const data::Dataset& ds, const std::string& data_flag) {
  if (model_extra.is_object() && model_extra.contains("task") && model_extra["task"].is_string() &&
      model_extra["task"].get<std::string>() != ds.task())
    throw InputError(data_flag + ": task '" + ds.task() + "', but " + model_dir + " was trained on '" +
                     model_extra["task"].get<std::string>() + "' data (config.json extra.task)");
  if (model_extra.is_object() && model_extra.contains("vocab") && ds.info().contains("vocab") &&
      model_extra["vocab"] != ds.info()["vocab"])
    throw InputError(data_flag + ": its task vocabulary (dataset.json vocab) differs from the one " + model_dir +
                     " was trained with (config.json extra.vocab)");
  if (ds.vocab_size() > model_vocab)
    throw InputError(data_flag + ": dataset vocab_size " + std::to_string(ds.vocab_size()) + " exceeds the model's " +
                     std::to_string(model_vocab));
  // A text corpus names its tokenizer (dataset.json "tokenizer"): ids of another one
  // would be read as other text, and the losses would mean nothing.
  const auto t = ds.info().find("tokenizer");
  if (t != ds.info().end() && t->is_string()) {
    const fs::path file = fs::path(ds.dir()) / t->get<std::string>();
    if (!fs::exists(file)) return;
    const auto trained = training_tokenizer(model_dir);
    if (!trained) return;
    const std::string diff = vocabulary_difference(*tokenizers::load_tokenizer(file.string()), *trained);
    if (!diff.empty())
      throw InputError(data_flag + ": its tokenizer (" + file.string() + ") is not the one " + model_dir +
                       " was trained with (" + diff + "); prepare the data with `lol corpus --tokenizer " + model_dir +
                       "`");
  }
}

RoutingPath load_routing_path_for(const std::string& file, int64_t library_size, int64_t active_depth) {
  RoutingPath path = RoutingPath::load(file);
  if (path.library_size != library_size)
    throw InputError(file + ": field 'library_size' = " + std::to_string(path.library_size) +
                     ": the model has library_size = " + std::to_string(library_size) + " (a path of another model?)");
  if (path.depth() > active_depth)
    throw InputError(file + ": field 'expert' has " + std::to_string(path.depth()) +
                     " rows (one per routed depth): expected at most the " + std::to_string(active_depth) +
                     " routed depths the model runs");
  return path;
}

/// Greedy cached batched decoding (src/inference) behind the analysis GenerateFn interface.
static std::vector<std::vector<int64_t>> generate_cached(LoLModel& model, const std::vector<analysis::PromptSpec>& prompts,
                                                         const RoutingPath* force, int64_t max_new, int64_t eos) {
  std::vector<inference::Prompt> ps;
  ps.reserve(prompts.size());
  for (const auto& p : prompts) {
    inference::Prompt q;
    q.tokens = p.tokens;
    q.router_only = p.router_only;
    q.prompt_len = p.prompt_len;
    q.force = force;
    ps.push_back(std::move(q));
  }
  inference::GenerateOptions opt;
  opt.max_new_tokens = max_new;
  opt.stop_tokens = {eos};
  opt.batch_size = int64_t(prompts.size());
  auto gens = inference::generate(model, ps, opt);
  std::vector<std::vector<int64_t>> out;
  out.reserve(gens.size());
  for (auto& g : gens) out.push_back(std::move(g.tokens));
  return out;
}

analysis::GenerateFn default_generator(bool cached) {
  // The cached decoder (src/inference) is tested equal to the full forward
  // (tests/inference/test_decode_exact.cpp); full recompute stays as the reference.
  if (cached) return generate_cached;
  return analysis::generate_full_recompute;
}

}  // namespace lol::cli
