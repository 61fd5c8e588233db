// Flags and inputs shared by the `lol layerroute` subcommands (layerroute_cmd.h).
#include "cli/layerroute_cmd.h"

#include <filesystem>
#include <iostream>

#include "cli/model_dir.h"
#include "hf/hf_chat.h"
#include "io/json_file.h"
#include "layerroute/adapter_io.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli::layerroute_cmd {

std::string max_len_words(const DataArgs& d) {
  if (d.max_len_origin.empty()) return "--max-len " + std::to_string(d.max_len);
  return "max_len " + std::to_string(d.max_len) + " (the training's, from " + d.max_len_origin +
         "; --max-len overrides it)";
}

nlohmann::json tokenizer_record(const DataArgs& d) {
  return d.tokenizer.empty() ? nlohmann::json(nullptr) : nlohmann::json(fs::absolute(d.tokenizer).string());
}

std::string resolve_base(const std::string& base) {
  if (base.empty()) return base;
  std::string dir;
  try {
    dir = find_model_dir(base);
  } catch (const InputError& e) {
    throw InputError(std::string("--base ") + e.what() +
                     " (expected a Hugging Face Qwen2/Qwen3/Llama/Mistral/Phi-3/OLMo 2 folder, a dense checkpoint or a `lol train` run of one)");
  }
  if (dir != base)
    std::cerr << "note: --base " << base << " is a training run: using its latest checkpoint " << dir << "\n";
  layerroute::require_dense_base(dir);
  return dir;
}

std::string template_where(const std::string& base, const std::string& tokenizer) {
  const fs::path from = tokenizer.empty() ? fs::path(base) : fs::path(tokenizer);
  std::error_code ec;
  const std::string dir = fs::is_directory(from, ec) ? from.string() : from.parent_path().string();
  return hf::chat_template_source(dir.empty() ? "." : dir);
}

ChatTokenizer open_tokenizer(const std::string& base, const DataArgs& d) {
  ChatTokenizer out;
  if (d.tokenizer == "byte") {
    throw InputError("--tokenizer byte: LayerRoute renders samples with the base model's chat template (or ChatML) "
                     "and needs its tokenizer (a tokenizer.json)");
  } else if (!d.tokenizer.empty()) {
    out.tok = tokenizers::load_tokenizer(d.tokenizer);
  } else if (fs::exists(fs::path(base) / "tokenizer.json")) {
    out.tok = tokenizers::load_tokenizer(base);
  } else {
    throw InputError(base + ": no tokenizer.json; pass --tokenizer FILE_OR_DIR");
  }
  out.format = layerroute::chat_format_for(*out.tok, template_where(base, d.tokenizer), d.system);
  // A tokenizer with more ids than the base model's vocabulary belongs to another model.
  const auto cfg_path = fs::path(base) / "config.json";
  if (fs::exists(cfg_path)) {
    const auto cfg = io::read_json_file(cfg_path.string());
    if (cfg.is_object() && cfg.contains("vocab_size") && cfg["vocab_size"].is_number_integer())
      require_tokenizer_fits(*out.tok, cfg["vocab_size"].get<int64_t>(),
                             d.tokenizer.empty() ? (fs::path(base) / "tokenizer.json").string() : "--tokenizer " + d.tokenizer,
                             cfg_path.string());
  }
  return out;
}

std::vector<layerroute::Example> load_examples(const std::string& path, const ChatTokenizer& t, const DataArgs& d) {
  std::vector<layerroute::Example> out;
  const auto samples = layerroute::read_samples(path);
  const auto loss = layerroute::parse_loss_tokens(d.loss_tokens);
  for (const auto& s : samples) {
    auto e = layerroute::tokenize_sample(s, *t.tok, d.max_len, t.format, loss);
    bool any = false;
    for (auto m : e.loss_mask) any = any || m;
    if (any) out.push_back(std::move(e));
  }
  if (out.empty()) throw InputError(path + ": no sample keeps an assistant token within " + max_len_words(d));
  if (out.size() < samples.size())
    std::cerr << "note: " << path << ": " << samples.size() - out.size() << " of " << samples.size()
              << " samples keep no assistant token within " << max_len_words(d) << " and are left out\n";
  return out;
}

void add_data_flags(CLI::App* c, DataArgs& d) {
  d.tokenizer_flag = c->add_option("--tokenizer", d.tokenizer,
                                   "tokenizer.json or folder (default: the base folder's; eval --adapter: the training's)");
  d.system_flag = c->add_option("--system", d.system,
                                "system prompt for samples without one (auto: the chat template's default; "
                                "eval --adapter: the training's)");
  d.max_len_flag = c->add_option("--max-len", d.max_len,
                                 "samples are cut to this many tokens (default 512; eval --adapter: the training's)")
                       ->check(CLI::Range(layerroute::kMinMaxLen, layerroute::kMaxMaxLen));
  d.loss_tokens_flag = c->add_option("--loss-tokens", d.loss_tokens,
                                     "tokens the LM loss and perplexities count: assistant (their content and "
                                     "end-of-turn token) or all (eval --adapter: the training's)");
}

layerroute::GatedModel load_gated_model_noting_base(const std::string& adapter, const std::string& base) {
  std::string note;
  auto m = layerroute::load_gated_model(adapter, base, &note);
  if (!note.empty()) std::cerr << "warning: " << note << "\n";
  return m;
}

}  // namespace lol::cli::layerroute_cmd
