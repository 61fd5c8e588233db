// `lol generate`: stream a continuation of a prompt from a LoL checkpoint (issue 6), a
// dense checkpoint with full / sliding-window attention (KV-cached, inference/dense_generate.h),
// or a strided dense / looped / MoE baseline by full recomputation.
// `lol bench generate`: prefill and decode tokens/s, cached vs full recompute.
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "cli/prompt_room.h"
#include "core/runtime.h"
#include "baselines/dense_trainable.h"
#include "inference/decode_benchmark.h"
#include "inference/dense_generate.h"
#include "inference/full_recompute.h"
#include "inference/generate.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "lol/checkpoint.h"
#include "tasks/vocab.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

/// Text <-> ids for a checkpoint: its tokenizer (--tokenizer, checked against the
/// training tokenizer, else the one it was trained with: model_tokenizer), else a word
/// vocabulary stored in config.json "extra.vocab".
class TextCodec {
 public:
  static std::unique_ptr<TextCodec> find(const std::string& model_dir, const nlohmann::json& extra,
                                         const std::string& tokenizer_flag, int64_t model_vocab) {
    auto c = std::make_unique<TextCodec>();
    if (auto tok = model_tokenizer(model_dir, tokenizer_flag, model_vocab)) {
      c->tok_ = std::move(tok);
    } else if (extra.is_object() && extra.contains("vocab")) {
      c->vocab_ = std::make_unique<tasks::Vocab>(tasks::Vocab::from_json(extra["vocab"], model_dir + "/config.json: extra.vocab"));
    } else {
      return nullptr;
    }
    return c;
  }
  std::vector<int64_t> encode(const std::string& text) const {
    std::vector<int32_t> ids = tok_ ? tok_->encode(text) : vocab_->encode(text);
    return std::vector<int64_t>(ids.begin(), ids.end());
  }
  /// Text of `ids`; word vocabularies join tokens with spaces.
  std::string decode(const std::vector<int64_t>& ids) const {
    std::vector<int32_t> v(ids.begin(), ids.end());
    return tok_ ? tok_->decode(v) : vocab_->decode(v);
  }
  /// Id of a token written as text: the text when it encodes to one token, else the
  /// vocabulary entry spelled `s` (tokenizer.json's strings, e.g. "Ġthe" of a byte-level
  /// BPE; *vocab_entry is then set), else nullopt.
  std::optional<int64_t> token_id(const std::string& s, bool* vocab_entry = nullptr) const {
    if (vocab_) {
      int32_t i = vocab_->find(s);
      return i < 0 ? std::nullopt : std::optional<int64_t>(i);
    }
    auto ids = tok_->encode(s);
    if (ids.size() == 1) return ids[0];
    if (auto t = tok_->token_to_id(s)) {
      if (vocab_entry) *vocab_entry = true;
      return *t;
    }
    return std::nullopt;
  }
  bool words() const { return vocab_ != nullptr; }
  /// The text tokenizer, or null for a word vocabulary.
  const tokenizers::Tokenizer* tokenizer() const { return tok_.get(); }
  /// The end-of-sequence token: "<eos>" of a task vocabulary, the tokenizer's EOS otherwise.
  std::optional<int64_t> eos() const {
    if (vocab_) return token_id("<eos>");
    if (auto e = tok_->eos_id()) return int64_t(*e);
    return std::nullopt;
  }

 private:
  std::unique_ptr<tokenizers::Tokenizer> tok_;
  std::unique_ptr<tasks::Vocab> vocab_;
};

struct GenerateArgs {
  std::string model, prompt, tokens, force_path, tokenizer, device = "cpu", depth_rule = "stretch", trace_file;
  std::vector<std::string> stop;
  bool no_stop = false;
  int64_t depth = -1, max_new = 64, prompt_len = 0, router_only_last = 0;
  inference::SamplingOptions sampling;
  uint64_t seed = 0;
  int threads = 0;
  bool prompt_window = false, ids_out = false;
};

nlohmann::json trace_json(const std::vector<inference::WindowDecision>& trace) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& w : trace)
    a.push_back({{"depth", w.depth + 1}, {"window", w.k}, {"begin", w.begin}, {"expert", w.expert},
                 {"alpha", w.alpha}, {"forced", w.forced}, {"probs", w.probs}});
  return a;
}

/// The token a --stop value `s` names: a text that encodes to one token, a vocabulary
/// entry (with a note on stderr saying which token it is), or a token id. Throws
/// InputError naming --stop for text of several tokens, a list of ids, or an id >=
/// `vocab_size`. `codec` may be null (the model has neither tokenizer nor vocabulary).
/// With `ids_mode` (--ids or --tokens) a number is a token id, not text.
int64_t stop_token_id(const TextCodec* codec, const std::string& s, int64_t vocab_size, bool ids_mode) {
  bool vocab_entry = false;
  // With --ids or --tokens the user works in ids: a number is an id.
  const bool number = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  std::optional<int64_t> id = codec && !(ids_mode && number) ? codec->token_id(s, &vocab_entry) : std::nullopt;
  if (vocab_entry) {  // not what the text encodes to: say which token it is
    const std::string text = nlohmann::json(codec->decode({*id})).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::cerr << "note: --stop '" << s << "' is the vocabulary entry of token " << *id << " (its text: " << text
              << "; the text '" << s << "' itself encodes to " << codec->encode(s).size() << " tokens)\n";
  }
  const std::size_t first = s.find_first_not_of(" \t");
  const bool looks_like_ids =
      first != std::string::npos && (std::isdigit(static_cast<unsigned char>(s[first])) || s[first] == '[');
  // A number that is also one token's text ("2") is read as that text outside ids mode:
  // say so (it stopped at the token "2", not at id 2).
  if (id && !vocab_entry && number)
    std::cerr << "note: --stop '" << s << "' is read as text: token " << *id << " (with --ids or --tokens, numbers "
              << "are token ids)\n";
  if (!id && !looks_like_ids) {
    std::string split;  // what a text tokenizer makes of it
    if (codec && !codec->words()) {
      const auto ids = codec->encode(s);
      split = " (the tokenizer encodes it as " + std::to_string(ids.size()) + " tokens:";
      for (auto t : ids) split += " " + std::to_string(t);
      split += ")";
    }
    throw InputError("--stop '" + s + "': " +
                     (codec ? "not one token of the model's vocabulary" + split
                            : std::string("the model has no tokenizer or vocabulary to look up token text")) +
                     "; expected one token's text or a token id");
  }
  if (!id) {
    const auto ids = parse_ids(s, "--stop");
    if (ids.size() != 1) throw InputError("--stop '" + s + "': expected one token id, got " + std::to_string(ids.size()));
    id = ids[0];
  }
  if (*id >= vocab_size)
    throw InputError("--stop " + s + ": token id " + std::to_string(*id) + " is not below vocab_size = " +
                     std::to_string(vocab_size) + " (it could never be generated)");
  return *id;
}

void run_generate(const GenerateArgs& a) {
  if (a.threads > 0) init_runtime(a.threads);
  const auto dev = parse_device(a.device);
  nlohmann::json extra;
  const std::string dir = resolve_model_dir(a.model);  // a run directory means its latest checkpoint
  const std::string arch = model_architecture(dir);
  LoLModel model{nullptr};
  std::unique_ptr<training::TrainableModel> baseline;  // dense / looped / MoE
  int64_t vocab_size = 0, max_seq_len = 0;
  if (arch == "lol") {
    model = load_lol(dir, dev, &extra);
    model->eval();
    vocab_size = model->config().vocab_size;
    max_seq_len = model->config().max_seq_len;
  } else {
    const auto lol_only = [&](bool given, const std::string& flag) { refuse_routing_option(given, flag, dir, arch); };
    lol_only(!a.force_path.empty(), "--force-path");
    lol_only(a.depth >= 0, "--depth");
    lol_only(a.depth_rule != "stretch", "--depth-rule");
    lol_only(a.prompt_len != 0, "--prompt-len");
    lol_only(a.prompt_window, "--prompt-window");
    lol_only(a.router_only_last != 0, "--router-only-last");
    lol_only(!a.trace_file.empty(), "--trace");
    baseline = training::load_model(dir);
    baseline->module().to(dev);
    const auto cfg = baseline->config_json();
    vocab_size = cfg.value("vocab_size", int64_t(0));
    max_seq_len = cfg.value("max_seq_len", int64_t(0));
    const auto file = io::read_json_file(dir + "/config.json");
    if (file.is_object() && file.contains("extra")) extra = file["extra"];
  }
  auto codec = TextCodec::find(dir, extra, a.tokenizer, vocab_size);
  inference::Prompt p;
  if (!a.prompt.empty()) {
    if (!codec)
      throw InputError("--prompt: " + a.model +
                       " has no tokenizer.json and no extra.vocab in config.json; pass --tokenizer or --tokens");
    try {
      p.tokens = codec->encode(a.prompt);
    } catch (const InputError& e) {
      const std::string what = e.what();
      if (what.rfind("vocab: unknown token", 0) != 0) throw InputError("--prompt: " + what);
      throw InputError("--prompt: " + what + " (not in the task vocabulary of " + dir +
                       "/config.json extra.vocab; its tokens are separated by spaces)");
    }
  } else {
    p.tokens = parse_ids(a.tokens, "--tokens");
    check_prompt_ids(p.tokens, vocab_size, "--tokens");
  }
  if (p.tokens.empty()) throw InputError(std::string(a.prompt.empty() ? "--tokens" : "--prompt") + ": the prompt has no tokens");
  const int64_t n = int64_t(p.tokens.size());
  // The context ends at max_seq_len positions, as in `forward`: generation stops there.
  const int64_t max_new =
      room_for_new_tokens(n, a.max_new, max_seq_len, "max_seq_len", a.prompt.empty() ? "--tokens" : "--prompt");
  if (a.prompt_len > n)
    throw InputError("--prompt-len " + std::to_string(a.prompt_len) + ": expected 0 <= P <= prompt tokens = " +
                     std::to_string(n));
  if (a.router_only_last > n)
    throw InputError("--router-only-last " + std::to_string(a.router_only_last) + ": the prompt has only " +
                     std::to_string(n) + " tokens");
  if (a.router_only_last > 0) {
    p.router_only.assign(n, 0);
    for (int64_t i = n - a.router_only_last; i < n; ++i) p.router_only[i] = 1;
  }
  p.prompt_len = a.prompt_window ? -1 : a.prompt_len;
  std::unique_ptr<RoutingPath> path;
  if (!a.force_path.empty()) {
    path = std::make_unique<RoutingPath>(
        load_routing_path_for(a.force_path, model->config().library_size,
                              /*active_depth=*/a.depth >= 0 ? a.depth : model->active_depth()));
    p.force = path.get();
  }
  inference::GenerateOptions o;
  o.max_new_tokens = max_new;
  o.sampling = a.sampling;
  o.seed = a.seed;
  o.depth = a.depth;
  o.depth_rule = inference::parse_depth_rule(a.depth_rule);
  o.batch_size = 1;
  o.trace = !a.trace_file.empty();
  for (const auto& s : a.stop) o.stop_tokens.push_back(stop_token_id(codec.get(), s, vocab_size, a.ids_out || !a.tokens.empty()));
  // --trace's directory must exist before the generation runs.
  if (!a.trace_file.empty()) {
    const fs::path trace_dir = fs::path(a.trace_file).parent_path();
    if (!trace_dir.empty() && !fs::is_directory(trace_dir))
      throw InputError("--trace " + a.trace_file + ": directory " + trace_dir.string() + " does not exist");
    require_output_outside_model(a.trace_file, dir, "--trace");
  }
  // Without --stop, generation ends at the model's end-of-sequence token (--no-stop: never).
  if (a.stop.empty() && !a.no_stop && codec)
    if (auto e = codec->eos()) o.stop_tokens.push_back(*e);
  // Stream: print the text of the tokens so far past what was already printed.
  std::vector<int64_t> generated;
  // Text as codec->decode(generated) gives it, one token at a time (a character split
  // across tokens prints when complete; clean_up_tokenization_spaces applied when the
  // tokenizer_config.json sets it, as transformers' decode).
  std::unique_ptr<tokenizers::DecodeStream> stream;
  if (codec && codec->tokenizer()) stream = std::make_unique<tokenizers::DecodeStream>(*codec->tokenizer(), false);
  o.on_token = [&](int64_t, int64_t tok) {
    generated.push_back(tok);
    if (a.ids_out || !codec) {
      std::cout << (generated.size() > 1 ? " " : "") << tok << std::flush;
      return;
    }
    if (codec->words()) std::cout << (generated.size() > 1 ? " " : "") << codec->decode({tok}) << std::flush;
    else std::cout << stream->push(int32_t(tok)) << std::flush;
  };
  auto t0 = std::chrono::steady_clock::now();
  // A dense checkpoint with full or sliding-window layers decodes with a KV cache (the
  // decoder of Hugging Face folders); strided dense, looped and MoE ones recompute.
  auto* dense = dynamic_cast<baselines::DenseTrainable*>(baseline.get());
  const bool cached_dense = dense && dense->model()->config().attention != "strided";
  auto gens = model          ? inference::generate(model, {p}, o)
              : cached_dense ? inference::generate_dense(dense->model(), {p.tokens}, o)
                             : std::vector<inference::Generation>{inference::generate_full_recompute(*baseline, p.tokens, o)};
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << (stream ? stream->finish() : std::string()) << "\n";
  std::cerr << gens[0].tokens.size() << " tokens in " << std::fixed << std::setprecision(3) << s << " s ("
            << (gens[0].stopped ? "stop token" : max_new < a.max_new ? "max_seq_len reached" : "max new tokens")
            << ")\n";
  if (!a.trace_file.empty()) {
    nlohmann::json j = {{"prompt_tokens", p.tokens}, {"generated", gens[0].tokens}, {"windows", trace_json(gens[0].trace)}};
    io::write_file_atomic(a.trace_file, j.dump(1) + "\n");
  }
}

struct BenchArgs {
  std::string model, device = "cpu";
  int64_t context = 512, new_tokens = 64, full_steps = 8, batch = 1;
  int threads = 0;
  bool json = false;
};

/// A checkpoint directory, or a config.json for a randomly initialised model.
LoLModel bench_model(const std::string& path, const torch::Device& dev) {
  if (fs::is_directory(path)) return load_lol(resolve_model_dir(path), dev);
  if (!fs::exists(path)) throw InputError("--model: " + path + " does not exist (expected a checkpoint directory or a config .json)");
  if (fs::path(path).filename() == "latest")
    throw InputError("--model " + path + ": a run's `latest` file, not a model config .json (pass the run directory)");
  LoLConfig c = LoLConfig::load(path);
  LoLModel m(c);
  m->to(dev);
  return m;
}

void run_bench(const BenchArgs& a) {
  if (a.threads > 0) init_runtime(a.threads);
  const auto dev = parse_device(a.device);
  LoLModel model = bench_model(a.model, dev);
  inference::DecodeBenchOptions o;
  o.context = a.context;
  o.new_tokens = a.new_tokens;
  o.full_steps = a.full_steps;
  o.batch = a.batch;
  auto r = inference::bench_decode(model, o);
  const auto& c = model->config();
  if (a.json) {
    nlohmann::json j = {{"model", a.model}, {"parameters", model->num_parameters()}, {"threads", at::get_num_threads()},
                        {"context", a.context}, {"new_tokens", a.new_tokens}, {"full_steps", a.full_steps},
                        {"batch", a.batch}, {"prefill_tok_s", r.prefill_tok_s}, {"decode_tok_s", r.decode_tok_s},
                        {"full_decode_tok_s", r.full_decode_tok_s},
                        {"speedup", r.decode_tok_s / r.full_decode_tok_s}};
    std::cout << j.dump(1) << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(1);
  std::cout << "model " << a.model << ": " << model->num_parameters() << " parameters, d_model " << c.d_model
            << ", prelude/core/coda " << c.n_prelude << "/" << c.core_depth << "/" << c.n_coda << ", L "
            << c.library_size << ", W " << c.window << ", S " << c.stride << "; " << at::get_num_threads()
            << " threads, batch " << a.batch << "\n";
  std::cout << "prefill (" << a.context << " tokens, cached):        " << r.prefill_tok_s << " tok/s\n";
  std::cout << "decode  (cached, " << a.new_tokens << " steps after " << a.context << "):   " << r.decode_tok_s
            << " tok/s (" << std::setprecision(2) << 1000.0 * r.decode_s / double(a.new_tokens) << " ms/step)\n"
            << std::setprecision(1);
  std::cout << "decode  (full recompute, " << a.full_steps << " steps):    " << r.full_decode_tok_s << " tok/s ("
            << std::setprecision(2) << 1000.0 * r.full_s / double(a.full_steps) << " ms/step)\n";
  std::cout << "cached / full recompute: " << std::setprecision(1) << r.decode_tok_s / r.full_decode_tok_s << "x\n";
}

}  // namespace

void register_generate(CLI::App& app) {
  auto ga = std::make_shared<GenerateArgs>();
  auto* g = app.add_subcommand("generate",
                               "Generate a continuation of a prompt with a LoL checkpoint (streams output; dense "
                               "baselines with a KV cache, strided dense, looped and MoE ones by full recomputation)");
  g->add_option("--model", ga->model, "Checkpoint directory, or a training run directory (its latest checkpoint)")->required();
  auto* pr = g->add_option("--prompt", ga->prompt, "Prompt text (needs a tokenizer)");
  auto* tk = g->add_option("--tokens", ga->tokens, "Prompt token ids, comma or space separated");
  pr->excludes(tk);
  g->add_option("--tokenizer", ga->tokenizer,
                "'byte', a tokenizer.json or its directory (default: the one the checkpoint was trained with)");
  g->add_option("--force-path", ga->force_path, "Routing path JSON that replaces the router's decisions");
  g->add_option("--depth", ga->depth, "Routed depths to run (-1: as trained); see docs/generation.md")
      ->check(CLI::Range(int64_t(-1), int64_t(4096)));
  g->add_option("--depth-rule", ga->depth_rule, "Parameters of extra depths: stretch | cycle")->capture_default_str();
  g->add_option("--max-new", ga->max_new, "Maximum new tokens (reduced so that prompt + new tokens <= max_seq_len)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  add_sampling_options(g, ga->sampling, ga->seed);
  auto* stop = g->add_option("--stop", ga->stop, "Stop token(s): token text or id (default: the end-of-sequence token)");
  g->add_flag("--no-stop", ga->no_stop, "Ignore end-of-sequence tokens (always generate --max-new tokens)")->excludes(stop);
  auto* plen = g->add_option("--prompt-len", ga->prompt_len, "Prompt window: the first N positions (0..the prompt's tokens) form window 0")
                   ->capture_default_str()
                   ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  g->add_flag("--prompt-window", ga->prompt_window, "The whole prompt forms window 0 (as in the maze/sudoku tasks)")
      ->excludes(plen);
  g->add_option("--router-only-last", ga->router_only_last,
                "The last N prompt tokens are seen only by the router (e.g. a strategy label)")
      ->check(CLI::Range(0, 1 << 20));
  g->add_option("--trace", ga->trace_file, "Write every window's routing decision to this JSON file");
  g->add_flag("--ids", ga->ids_out, "Print token ids instead of text");
  g->add_option("--device", ga->device, "cpu | cuda[:N]")->capture_default_str();
  g->add_option("--threads", ga->threads, "CPU threads (default: all available)");
  g->callback([ga, pr, tk] {
    check_prompt_flags(pr->count() > 0, ga->prompt, tk->count() > 0, ga->tokens);
    if (ga->prompt.empty() && ga->tokens.empty()) throw InputError("generate: give --prompt TEXT or --tokens IDS");
    run_generate(*ga);
  });

  auto ba = std::make_shared<BenchArgs>();
  auto* b = bench_command(app)->add_subcommand("generate", "Prefill and decode tokens/s: cached vs full recompute");
  b->add_option("--model", ba->model, "Checkpoint directory, or a config .json (random weights)")->required();
  b->add_option("--context", ba->context, "Prompt tokens before decoding")->capture_default_str();
  b->add_option("--new", ba->new_tokens, "Cached decode steps timed")->capture_default_str();
  b->add_option("--full-steps", ba->full_steps, "Full-recompute decode steps timed")->capture_default_str();
  b->add_option("--batch", ba->batch, "Sequences decoded together")->capture_default_str();
  b->add_option("--device", ba->device, "cpu | cuda[:N]")->capture_default_str();
  b->add_option("--threads", ba->threads, "CPU threads (default: all available)");
  b->add_flag("--json", ba->json, "Print JSON");
  b->callback([ba] { run_bench(*ba); });
}

}  // namespace lol::cli
