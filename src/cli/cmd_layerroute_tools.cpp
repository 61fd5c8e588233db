// `lol layerroute merge|render|generate` (issue 11, LayerRoute paper seed 004):
//   merge --adapter DIR --out HF_DIR                            LoRA folded into a Hugging Face folder + gates
//   render --data F.jsonl [--base DIR] [--ids]                  samples as training sees them
//   generate --adapter DIR --prompt TEXT [--chat]              text from the gated model (layers skipped)
// See docs/layerroute.md; train and eval are in cmd_layerroute.cpp.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/cli_options.h"
#include "cli/layerroute_cmd.h"
#include "cli/prompt_room.h"
#include "dataset/text_tokenizer.h"
#include "core/runtime.h"
#include "hf/hf_chat.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"
#include "io/json_file.h"
#include "layerroute/adapter_io.h"
#include "layerroute/data.h"
#include "layerroute/decode.h"
#include "tokenizers/chat_template.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli::layerroute_cmd {

void register_merge_cmd(CLI::App* lr) {
  struct A {
    std::string adapter, base, out, dtype = "float32", arch;
    bool overwrite = false;
  };
  auto a = std::make_shared<A>();
  auto* c = lr->add_subcommand("merge", "fold LoRA into the weights: Hugging Face folder + gates.safetensors");
  c->add_option("--adapter", a->adapter, "adapter directory")->required();
  c->add_option("--base", a->base, "base model (default: the one recorded in the adapter)");
  c->add_option("--out", a->out, "output folder")->required();
  c->add_option("--dtype", a->dtype, "stored dtype: float32 | bfloat16 | float16");
  c->add_option("--arch", a->arch,
                "qwen2 | qwen3 | llama | mistral | phi3 | olmo2 | olmo3 | gemma | gemma2 | gemma3 | gpt2 | gpt_neox | phi | "
                "stablelm | falcon | gptj | starcoder2 | gpt_bigcode | granite | cohere (default: the base folder's architecture, else as `lol export`: gpt2 / gpt_neox / phi / "
                "stablelm / falcon for GPT-2's / GPT-NeoX's / Phi's / StableLM's layout (falcon: grouped-query or tied Phi-like), olmo2/3 for OLMo's, "
                "gemma/2/3 for Gemma's, granite for Granite's multipliers, cohere for logit_scale, qwen3 for a qk_norm model, else qwen2)");
  c->add_flag("--overwrite", a->overwrite, "allow a non-empty --out");
  c->callback([a] {
    init_runtime(0);
    a->base = resolve_base(a->base);
    auto m = load_gated_model_noting_base(a->adapter, a->base);
    const std::string base = a->base.empty() ? layerroute::read_adapter_info(a->adapter).base_dir : a->base;
    std::unique_ptr<tokenizers::Tokenizer> tok;
    if (fs::exists(fs::path(base) / "tokenizer.json")) tok = tokenizers::load_tokenizer(base);
    hf::ExportOptions eo;
    // --arch, else a Hugging Face base's architecture, else as `lol export`
    // (hf::default_architecture).
    eo.architecture = hf::default_architecture(m->base->config());
    if (!a->arch.empty()) {
      eo.architecture = hf::architecture_from_name(a->arch);
    } else if (fs::exists(fs::path(base) / "config.json")) {
      const auto bc = io::read_json_file((fs::path(base) / "config.json").string());
      for (const auto& known : hf::architectures())
        if (known.cli && bc.contains("architectures") && bc["architectures"] == nlohmann::json::array({known.cls}))
          eo.architecture = known.cls;
    }
    eo.dtype = hf::parse_dtype_name(a->dtype);
    eo.overwrite = a->overwrite;
    eo.read_from = {a->adapter};
    eo.derived_from = base;  // keeps the base's generation_config.json, token ids and tokenizer files
    layerroute::save_merged(*m, tok.get(), a->out, eo, a->adapter, layerroute::read_adapter_info(a->adapter).extra);
    std::cout << "merged " << a->adapter << " into " << a->out << " (" << a->dtype << ") + gates.safetensors\n";
  });
}

// `render`: what training sees, sample by sample: the ChatML text (the string
// apply_chat_template returns) or the token ids with their loss mask.
void register_render_cmd(CLI::App* lr) {
  struct A {
    std::string base, data;
    int64_t first = 0, count = 1;
    bool ids = false;
    DataArgs d;
  };
  auto a = std::make_shared<A>();
  auto* c = lr->add_subcommand("render", "print samples as training sees them: ChatML text, or token ids + loss mask");
  c->add_option("--data", a->data, "JSONL (messages / conversations / question+answer)")->required();
  c->add_option("--base", a->base, "model folder whose tokenizer.json to use (or --tokenizer)");
  c->add_option("--first", a->first, "index of the first sample (0-based line among non-empty lines)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  c->add_option("--count", a->count, "samples to print")->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  c->add_flag("--ids", a->ids,
              "print one JSON line per sample: {\"tokens\": [...], \"loss_mask\": [...], \"prompt_len\": N} "
              "(needs a tokenizer; cut at --max-len)");
  add_data_flags(c, a->d);
  c->callback([a] {
    const auto samples = layerroute::read_samples(a->data);
    ChatTokenizer tok;
    // A folder holding tokenizer.json is taken as it is; a run directory is resolved.
    const bool tok_dir = a->base.empty() || fs::exists(fs::path(a->base) / "tokenizer.json");
    if (!a->d.tokenizer.empty() || !a->base.empty()) {
      tok = open_tokenizer(tok_dir ? a->base : resolve_base(a->base), a->d);
    } else {
      // No tokenizer: the paper's ChatML with Qwen2.5's default system prompt.
      tok.format.system = a->d.system == "auto" ? tokenizers::kQwen25DefaultSystem : a->d.system;
    }
    if (a->ids && !tok.tok) throw InputError("render --ids needs --base DIR or --tokenizer T");
    require(a->first < int64_t(samples.size()), "--first",
            std::to_string(a->first) + ": " + a->data + " has " + std::to_string(samples.size()) + " samples");
    const int64_t end = std::min<int64_t>(int64_t(samples.size()), a->first + a->count);
    for (int64_t i = a->first; i < end; ++i) {
      const auto& s = samples[size_t(i)];
      if (!a->ids) {
        std::cout << layerroute::render_sample(s, tok.format);
        if (i + 1 < end) std::cout << "\n";
        continue;
      }
      const auto e =
          layerroute::tokenize_sample(s, *tok.tok, a->d.max_len, tok.format, layerroute::parse_loss_tokens(a->d.loss_tokens));
      std::cout << nlohmann::json{{"sample", i},
                                  {"source", e.source},
                                  {"tokens", e.tokens},
                                  {"loss_mask", e.loss_mask},
                                  {"prompt_len", e.prompt_len}}
                       .dump()
                << "\n";
    }
  });
}

namespace {

/// Stop ids of the base model `base`: a Hugging Face folder's (hf::stop_tokens), or
/// the tokenizer's EOS for a lol dense checkpoint.
std::vector<int64_t> base_stop_tokens(const std::string& base, const tokenizers::Tokenizer* tok) {
  const auto j = io::read_json_file((fs::path(base) / "config.json").string());
  if (j.is_object() && j.value("architecture", std::string()) == "dense") {
    if (tok && tok->eos_id()) return {int64_t(*tok->eos_id())};
    return {};
  }
  return hf::stop_tokens(base, hf::HfConfig::load_dir(base), tok);
}

}  // namespace

void register_generate_cmd(CLI::App* lr) {
  struct A {
    std::string adapter, base, prompt, tokens, system, tokenizer, gates = "learned";
    int64_t max_new = 128;
    inference::SamplingOptions sampling;
    uint64_t seed = 0;
    int threads = 0;
    bool chat = false, ids = false, no_stop = false, system_set = false;
  };
  auto a = std::make_shared<A>();
  auto* c = lr->add_subcommand(
      "generate", "generate text with the gated model: gates decided from the prompt, closed layers not run");
  c->add_option("--adapter", a->adapter, "adapter directory or merged folder")->required();
  c->add_option("--base", a->base, "base model (default: the one recorded in the adapter)");
  auto* pr = c->add_option("--prompt", a->prompt, "prompt text");
  auto* tk = c->add_option("--tokens", a->tokens, "prompt token ids, comma or space separated");
  pr->excludes(tk);
  c->add_flag("--chat", a->chat, "format the prompt as a user turn, as LayerRoute trains (ChatML, or the base's chat template)");
  auto* sy = c->add_option("--system", a->system,
                           "system message for --chat (\"\": no system turn; default: the training's --system, else the chat template's)");
  c->add_option("--tokenizer", a->tokenizer, "tokenizer.json or folder (default: the base folder's)");
  c->add_option("--max-new", a->max_new, "maximum new tokens (0: decide the gates and run the prompt only)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  c->add_option("--gates", a->gates, "learned | open | bias-only | closed")->capture_default_str();
  add_sampling_options(c, a->sampling, a->seed);
  c->add_flag("--ids", a->ids, "print token ids instead of text");
  c->add_flag("--no-stop", a->no_stop, "ignore EOS tokens (always generate --max-new tokens)");
  c->add_option("--threads", a->threads, "CPU threads (0 = default)");
  c->callback([a, pr, tk, sy] {
    init_runtime(a->threads);
    a->system_set = sy->count() > 0;
    if (a->system_set && !a->chat) throw InputError("--system needs --chat");
    check_prompt_flags(pr->count() > 0, a->prompt, tk->count() > 0, a->tokens);
    if (a->prompt.empty() && a->tokens.empty()) throw InputError("layerroute generate: give --prompt TEXT or --tokens IDS");
    if (a->chat && a->prompt.empty()) throw InputError("--chat needs --prompt TEXT");
    layerroute::GatedGenerateOptions o;
    o.mode = layerroute::parse_gate_mode(a->gates);
    o.max_new_tokens = a->max_new;
    o.sampling = a->sampling;
    o.seed = a->seed;
    inference::validate_sampling(o.sampling, "layerroute generate");
    const auto info = layerroute::read_adapter_info(a->adapter);
    const auto trained = layerroute::training_record(info);  // checked before the model is loaded
    a->base = resolve_base(a->base);
    const auto t_load = std::chrono::steady_clock::now();
    auto m = load_gated_model_noting_base(a->adapter, a->base);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    const std::string base = info.merged ? a->adapter : (a->base.empty() ? info.base_dir : a->base);
    // As eval does: the training's --tokenizer and --system (layerroute.json "extra")
    // unless given here, so that the decisions are those eval reports.
    if (a->tokenizer.empty()) a->tokenizer = trained.tokenizer.value_or("");
    std::optional<std::string> trained_system = trained.system;
    if (trained_system == "auto") trained_system.reset();  // the chat template's default
    std::unique_ptr<tokenizers::Tokenizer> tok;
    if (!a->tokenizer.empty()) tok = data::open_text_tokenizer(a->tokenizer);  // "byte" too, as lol generate
    else if (fs::exists(fs::path(base) / "tokenizer.json")) tok = tokenizers::load_tokenizer(base);
    else if (!a->prompt.empty()) throw InputError(base + ": no tokenizer.json (needed for text prompts; pass --tokenizer or use --tokens)");
    std::vector<int64_t> prompt;
    layerroute::ChatFormat format;  // --chat: the format of training
    if (!a->prompt.empty()) {
      std::string text = a->prompt;
      if (a->chat) {
        // As training renders samples (layerroute/chat_format.h): the system message of
        // --system (also ""), else the training's, else the format's default.
        format = layerroute::chat_format_for(*tok, template_where(base, a->tokenizer), trained_system.value_or("auto"));
        text = layerroute::generation_prompt(a->prompt, a->system_set ? std::optional<std::string>(a->system) : std::nullopt,
                                             format);
      }
      for (int32_t id : tok->encode(text, !a->chat)) prompt.push_back(id);  // as hf generate
    } else {
      prompt = parse_ids(a->tokens, "--tokens");
      check_prompt_ids(prompt, m->base->config().vocab_size, "--tokens");
    }
    if (prompt.empty()) throw InputError(std::string(a->prompt.empty() ? "--tokens" : "--prompt") + ": the prompt has no tokens");
    o.max_new_tokens = room_for_new_tokens(int64_t(prompt.size()), o.max_new_tokens, m->base->config().max_seq_len,
                                           "max_seq_len", a->prompt.empty() ? "--tokens" : "--prompt");
    if (!a->no_stop) {
      o.stop_tokens = base_stop_tokens(base, tok.get());
      note_unreachable_stops(o.stop_tokens, m->base->config().vocab_size, base + ": eos_token_id");
      // The token LayerRoute trains the model to end its turn with (<|im_end|>, <|eot_id|>, ...).
      if (a->chat)
        if (const auto end_id = layerroute::turn_end_token(*tok, format))
          if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), *end_id) == o.stop_tokens.end())
            o.stop_tokens.push_back(*end_id);
    }
    std::vector<int32_t> generated;
    // Text as tok->decode(generated, true) gives it, one token at a time; a character split
    // across tokens prints when complete; clean_up_tokenization_spaces as the folder sets it.
    std::unique_ptr<tokenizers::DecodeStream> stream;
    if (tok) stream = std::make_unique<tokenizers::DecodeStream>(*tok, /*skip_special_tokens=*/true);
    o.on_token = [&](int64_t t) {
      generated.push_back(int32_t(t));
      if (a->ids || !tok) {
        std::cout << (generated.size() > 1 ? " " : "") << t << std::flush;
        return;
      }
      std::cout << stream->push(int32_t(t)) << std::flush;
    };
    const auto g = layerroute::generate_gated(*m, prompt, o);
    std::cout << (stream ? stream->finish() : std::string()) << "\n";
    std::string skipped;
    for (std::size_t i = 0; i < g.open.size(); ++i)
      if (!g.open[i]) skipped += (skipped.empty() ? "" : ", ") + std::to_string(i);
    const int64_t n = int64_t(g.tokens.size());
    std::cerr << std::fixed << std::setprecision(2) << "gates " << layerroute::gate_mode_name(o.mode) << ": "
              << g.executed_layers << " of " << g.open.size() << " layers run"
              << (skipped.empty() ? std::string() : " (skipped: " + skipped + ")") << "\n"
              << "load " << load_s << " s; prompt " << prompt.size() << " tokens in " << g.prefill_seconds << " s; " << n
              << " new tokens";
    if (n > 1 && g.seconds > g.prefill_seconds)
      std::cerr << ", decode " << std::setprecision(1) << double(n - 1) / (g.seconds - g.prefill_seconds) << " tok/s";
    std::cerr << " (" << (g.stopped ? "stop token" : "max new tokens") << ")\n";
  });
}

}  // namespace lol::cli::layerroute_cmd
