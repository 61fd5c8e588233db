// `lol hf info|generate|ppl|bench`: Hugging Face model folders (issue 10, docs/hf.md).
//   info DIR                      config, weights, tokenizer and chat template summary
//   generate DIR --prompt TEXT    streamed KV-cached generation (--chat: the folder's chat template)
//   ppl DIR --data FILE           perplexity and bits per byte of a text file
//   bench CONFIG_OR_DIR           prefill / decode tokens/s (random weights from a config.json)
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <cmath>
#include <memory>
#include <sstream>

#include "analysis/lm_eval.h"
#include "baselines/dense_trainable.h"
#include "baselines/flops.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "cli/prompt_room.h"
#include "core/runtime.h"
#include "hf/hf_chat.h"
#include "hf/hf_files.h"
#include "hf/hf_model.h"
#include "inference/dense_benchmark.h"
#include "inference/dense_generate.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/utf8.h"
#include "util/error.h"
#include "util/size_limits.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

/// --dtype of the CPU commands: a dtype the LibTorch build can multiply matrices in on
/// CPU (LibTorch 1.13 has no float16 addmm on CPU), checked with a 2 x 2 product so that
/// the answer follows the library, not a list of ours.
c10::ScalarType cpu_compute_dtype(const std::string& name) {
  const auto t = hf::parse_dtype_name(name);
  try {
    auto x = torch::ones({2, 2}, torch::TensorOptions().dtype(t));
    (void)torch::addmm(x, x, x);
  } catch (const c10::Error& e) {
    const std::string m = e.what_without_backtrace();
    throw InputError("--dtype " + name + ": this LibTorch build cannot compute in " + name + " on CPU (" +
                     m.substr(0, m.find('\n')) + "); use float32 or bfloat16");
  }
  return t;
}

/// The folder's tokenizer; when there is none, nullptr, or (`required_for` not empty) an
/// InputError saying what needs it.
std::unique_ptr<tokenizers::Tokenizer> folder_tokenizer(const std::string& dir, const std::string& required_for) {
  if (fs::exists(fs::path(dir) / "tokenizer.json") || fs::exists(fs::path(dir) / "vocab.json")) {
    auto tok = tokenizers::load_tokenizer(dir);
    // Fewer ids than vocab_size is usual (Qwen2 pads its embeddings); more means the
    // tokenizer belongs to another model, whose ids this one cannot read.
    require_tokenizer_fits(*tok, hf::HfConfig::load_dir(dir).vocab_size, dir + "/tokenizer.json", "config.json");
    return tok;
  }
  if (!required_for.empty()) throw InputError(dir + ": no tokenizer.json (needed " + required_for + ")");
  return nullptr;
}

// ---------------------------------------------------------------- info
/// `hf info`'s chat template line: what a one-message conversation renders as (JSON
/// string escapes, cut at 400 bytes), or why it does not render.
std::string chat_template_summary(const tokenizers::Tokenizer& tok, const std::string& dir) {
  const std::string& t = tok.chat_template();
  std::string named;
  for (const auto& kv : tok.named_chat_templates()) named += (named.empty() ? "" : ", ") + kv.first;
  if (!named.empty()) named = "; named templates: " + named + " (--chat-template NAME)";
  if (t.empty()) return (named.empty() ? "none (--chat unavailable)" : "no default" + named);
  const std::string head = "Jinja, " + std::to_string(t.size()) + " bytes" + named;
  try {
    tokenizers::ChatTemplateOptions o;
    o.max_steps = 1'000'000;  // a summary: a template that runs long is reported, not waited for
    const std::string text =
        hf::format_chat(tok, std::vector<tokenizers::ChatMessage>{{"user", "Hi"}}, o, hf::chat_template_source(dir));
    std::string shown = nlohmann::json(text.substr(0, 400)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() > 400) shown += "...";
    return head + "; a user turn \"Hi\" renders as " + shown;
  } catch (const InputError& e) {
    return head + "; does not render (--chat unavailable): " + e.what();
  }
}

/// Which layers slide, for `hf info`.
std::string attention_text(const hf::HfConfig& c) {
  if (c.sliding_window == 0) return "full causal, every layer";
  const std::string w = "sliding window of " + std::to_string(c.sliding_window) + " tokens";
  if (c.full_attention_interval > 0) {
    std::string full;  // the leading full layers, then every P-th
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      if (c.layer_is_full(i)) full += (full.empty() ? "" : ",") + std::to_string(i);
    const int64_t p = c.full_attention_interval;
    const char* th = p % 100 / 10 == 1 ? "th" : p % 10 == 1 ? "st" : p % 10 == 2 ? "nd" : p % 10 == 3 ? "rd" : "th";
    return w + " on every layer but " + (full.empty() ? "none" : full) + " (full causal: every " +
           std::to_string(p) + th + " layer)" +
           (c.rope_local_theta > 0 ? "; sliding layers use unscaled RoPE with base " + nlohmann::json(c.rope_local_theta).dump()
                                   : std::string());
  }
  return w + " on layers " + std::to_string(c.full_attention_layers) + ".." + std::to_string(c.num_hidden_layers - 1) +
         (c.full_attention_layers > 0 ? ", full causal on 0.." + std::to_string(c.full_attention_layers - 1)
                                      : std::string());
}

/// The block's layout, for `hf info`.
std::string block_text(const hf::HfConfig& c) {
  if (c.is_gpt2())
    return "pre-norm LayerNorms (weight and bias), MLP " + c.activation +
           " (not gated), biases on every projection, Conv1D weights stored [in, out]";
  if (c.is_opt())
    return "pre-norm LayerNorms (weight and bias, epsilon 1e-5), MLP " + c.activation + " (not gated; fc1, fc2), " +
           (c.qkv_bias ? "biases on every projection" : "no biases (enable_bias false)");
  if (c.is_gpt_bigcode())
    return "pre-norm LayerNorms (weight and bias), MLP " + c.activation +
           " (not gated), biases on every projection, c_attn " +
           (c.num_key_value_heads == 1 ? "[q; k; v] with one key/value head (multi_query)" : "per head [q; k; v]");
  if (c.is_stablelm())
    return std::string(c.parallel_residual ? "parallel (x + attn(ln x) + mlp(ln x), one input_layernorm)"
                                           : "sequential pre-norm") +
           " LayerNorms (weight and bias), MLP gate " + c.activation + (c.qkv_bias ? ", q/k/v biases" : "");
  if (c.is_cohere())
    return "parallel (x + attn(ln x) + mlp(ln x), one input_layernorm) LayerNorms (weight, no bias), MLP gate " +
           c.activation + ", no biases, RoPE in interleaved pairs (q_proj / k_proj rows reordered to rotate-half on "
           "load), logits times " + nlohmann::json(c.logit_scale).dump();
  if (c.is_phi())
    return "parallel (x + attn(ln x) + mlp(ln x), one input_layernorm) LayerNorms (weight and bias), MLP " +
           c.activation + " (not gated, biases), biases on q/k/v_proj and dense, lm_head with a bias";
  if (c.is_starcoder2())
    return "sequential pre-norm LayerNorms (weight and bias), MLP " + c.activation + " (not gated: c_fc, c_proj)" +
           (c.qkv_bias ? ", biases on q/k/v/o_proj and the MLP" : ", no biases");
  if (c.is_gptj())
    return "parallel (x + attn(ln_1 x) + mlp(ln_1 x), one LayerNorm) LayerNorms (weight and bias), MLP " + c.activation +
           " (not gated, biases), no q/k/v or out_proj biases, lm_head with a bias, RoPE in interleaved pairs (q_proj / "
           "k_proj rows reordered to rotate-half on load)";
  if (c.is_falcon())
    return std::string(c.shared_input_norm   ? "parallel (x + attn(ln x) + mlp(ln x), one input_layernorm)"
                       : c.parallel_residual ? "parallel (x + attn(ln_attn x) + mlp(ln_mlp x))"
                                             : "sequential pre-norm") +
           " LayerNorms (weight and bias), MLP " + c.activation + " (not gated)" +
           (c.qkv_bias ? ", biases on query_key_value, dense and the MLP" : ", no biases") +
           ", q/k/v stored per key/value group in query_key_value" +
           (c.falcon_new_decoder ? " (new_decoder_architecture)" : c.num_key_value_heads == 1 ? " (multi_query)" : "");
  if (c.is_gpt_neox())
    return std::string(c.parallel_residual ? "parallel (x + attn(ln1 x) + mlp(ln2 x))" : "sequential pre-norm") +
           " LayerNorms (weight and bias), MLP " + c.activation + " (not gated, biases)" +
           (c.qkv_bias ? ", query_key_value and dense biases" : ", no attention biases") +
           ", q/k/v stored per head in query_key_value";
  std::string s = std::string(!c.input_norms      ? "output norms only (post attention and feed-forward, no input norms)"
                              : c.sandwich_norm ? "sandwich norms (pre/post attention and feed-forward)"
                                                : "pre-norm") +
                  (c.is_moe() ? ", sparse mixture-of-experts FFNs (SwiGLU experts, gate " + c.activation + ")"
                              : ", MLP gate " + c.activation);
  if (c.norm_offset) s += ", norm weights stored as offsets from 1";
  if (c.scale_embeddings) s += ", embeddings times sqrt(hidden_size)";
  if (c.attn_logit_softcapping > 0) s += ", attention logits soft-capped at " + nlohmann::json(c.attn_logit_softcapping).dump();
  if (c.final_logit_softcapping > 0) s += ", final logits soft-capped at " + nlohmann::json(c.final_logit_softcapping).dump();
  if (c.query_pre_attn_scalar > 0)
    s += ", attention scale query_pre_attn_scalar^-1/2 = " + nlohmann::json(1.0 / std::sqrt(c.query_pre_attn_scalar)).dump();
  if (c.is_granite())
    s += ", embeddings times " + nlohmann::json(c.embedding_multiplier).dump() + ", attention scale " +
         nlohmann::json(c.attention_multiplier).dump() + ", sublayer outputs times " +
         nlohmann::json(c.residual_multiplier).dump() + ", logits divided by " + nlohmann::json(c.logits_scaling).dump();
  return s;
}

/// ", A active per token" for a mixture-of-experts config (baselines::cost_model's
/// active_parameters: the router and top_k experts of each MoE layer), else "".
std::string experts_active_text(const hf::HfConfig& c) {
  if (!c.is_moe()) return "";
  return " (" + std::to_string(baselines::cost_model(hf::to_dense_config(c)).active_parameters) + " active per token)";
}

/// The "experts" line of `hf info` for a mixture-of-experts config, else "".
std::string experts_text(const hf::HfConfig& c) {
  if (!c.is_moe()) return "";
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) moe_layers += c.is_moe_layer(i) ? 1 : 0;
  return "experts       " + std::to_string(c.num_experts) + " per layer, top " + std::to_string(c.num_experts_per_tok) +
         " per token" + (c.norm_topk_prob ? " (weights renormalised)" : " (softmax weights as they are)") + ", width " +
         std::to_string(c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size) + ", in " +
         std::to_string(moe_layers) + " of " + std::to_string(c.num_hidden_layers) + " layers" +
         (c.shared_expert_intermediate_size > 0
              ? ", and a shared expert of width " + std::to_string(c.shared_expert_intermediate_size) + " (sigmoid-gated)"
              : std::string()) +
         "\n";
}

void run_info(const std::string& dir, bool check) {
  const hf::HfConfig c = hf::HfConfig::load_dir(dir);
  const hf::WeightFiles files = hf::find_weight_files(dir);
  std::cout << "folder        " << dir << "\n"
            << "architecture  " << c.architecture
            << (c.multimodal_text ? std::string(" (the text model of a ") + hf::kGemma3VisionArch + " folder)" : "")
            << (c.is_gpt2() || c.is_gpt_neox() || c.is_phi() || c.is_stablelm() || c.is_falcon() || c.is_gptj() ||
                        c.is_starcoder2() || c.is_gpt_bigcode() || c.is_opt()
                    ? ""
                : c.qkv_bias                                                             ? " (q/k/v biases)"
                                                                                         : "")
            << (c.qk_norm ? (c.qk_norm_across_heads ? " (q/k norms across heads)" : " (q/k norms)") : "") << "\n"
            << "parameters    " << hf::parameter_count(c) << experts_active_text(c) << "\n"
            << "layers        " << c.num_hidden_layers << ", hidden " << c.hidden_size << ", intermediate "
            << c.intermediate_size << "\n"
            << experts_text(c)
            << "heads         " << c.num_attention_heads << " query, " << c.num_key_value_heads << " key/value, head_dim "
            << c.head_dim << "\n"
            << "vocab         " << c.vocab_size << (c.tie_word_embeddings ? " (tied embeddings)" : " (separate lm_head)")
            << "\n"
            << "positions     " << c.max_position_embeddings;
  if (c.is_gpt2() || c.is_gpt_bigcode())
    std::cout << " (learned position embeddings, no RoPE), layer_norm_epsilon " << c.rms_norm_eps << "\n";
  else if (c.is_opt())
    std::cout << " (learned position embeddings at offset 2, no RoPE)\n";
  else
    std::cout << ", rope_theta " << c.rope_theta
              << (c.is_falcon() || c.is_gptj()                      ? ", layer_norm_epsilon "
                  : c.is_gpt_neox() || c.is_phi() || c.is_stablelm() ? ", layer_norm_eps "
                  : c.is_starcoder2()                                ? ", norm_epsilon "
                                                                     : ", rms_norm_eps ")
              << c.rms_norm_eps << "\n";
  std::cout
            << (c.is_gpt2() || c.is_gpt_bigcode() || c.is_opt() ? std::string() : "rope scaling  " + c.rope_scaling.describe() + "\n")
            << (c.partial_rotary_factor != 1.0
                    ? "rotary dims   " + std::to_string(c.rotary_dim()) +
                          " of " + std::to_string(c.head_dim) + " per head (" +
                          (c.is_gptj() ? std::string("rotary_dim") : "partial_rotary_factor " + nlohmann::json(c.partial_rotary_factor).dump()) +
                          ")\n"
                    : std::string())
            << "attention     " << attention_text(c) << "\n"
            << "block         " << block_text(c) << "\n"
            << "torch_dtype   " << (c.torch_dtype.empty() ? "(not stated)" : c.torch_dtype)
            << " (config.json; each tensor keeps its own stored dtype)\n";
  uint64_t bytes = 0;
  for (const auto& s : files.shards) {
    const fs::path f = fs::path(dir) / s;
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) throw InputError(f.string() + ": expected a safetensors file");
    bytes += fs::file_size(f, ec);
  }
  std::cout << "weights       " << (files.sharded() ? std::to_string(files.shards.size()) + " shards" : "model.safetensors")
            << ", " << std::fixed << std::setprecision(1) << double(bytes) / 1048576.0 << " MiB\n";
  auto tok = folder_tokenizer(dir, "");
  if (tok) {
    std::cout << "tokenizer     " << tok->type() << ", " << tok->vocab_size() << " ids, " << tok->added_tokens().size()
              << " added tokens";
    if (tok->bos_id()) std::cout << ", bos " << *tok->bos_id();
    if (tok->eos_id()) std::cout << ", eos " << *tok->eos_id();
    std::cout << "\n";
    std::cout << "chat template " << chat_template_summary(*tok, dir) << "\n";
  } else {
    std::cout << "tokenizer     none\n";
  }
  const auto stops = hf::stop_tokens(dir, c, tok.get());
  note_unreachable_stops(stops, c.vocab_size, dir + ": eos_token_id");
  std::cout << "stop tokens  ";
  for (auto s : stops) std::cout << " " << s;
  std::cout << "\n";
  if (check) {
    auto t0 = std::chrono::steady_clock::now();
    hf::load_hf_model(dir);
    std::cout << "check         all tensors present with the expected shapes, finite (loaded in " << std::setprecision(1)
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s)\n";
  }
}

// ---------------------------------------------------------------- generate
struct GenArgs {
  std::string dir, prompt, tokens, system, dtype = "float32";
  int64_t max_new = 128;
  inference::SamplingOptions sampling;
  uint64_t seed = 0;
  int threads = 0;
  bool chat = false, ids = false, no_stop = false, generation_config = false, system_set = false;
  std::vector<std::string> vars;  ///< --var NAME=VALUE (chat template variables)
  std::string messages;           ///< --messages FILE (a conversation for the chat template)
  std::string template_name;      ///< --chat-template NAME
  bool date_given = false;
  std::string date;               ///< --date YYYY-MM-DD (strftime_now)
  /// Sampling flags given on the command line (they override generation_config.json).
  bool set_temperature = false, set_top_k = false, set_top_p = false, set_repetition_penalty = false;
};

/// `v` with up to 6 significant digits, no trailing zeros (0.7, 1.05, 20).
std::string fmt_g(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void run_generate(const GenArgs& a) {
  if (a.threads > 0) init_runtime(a.threads);
  hf::HfConfig cfg;
  auto t_load = std::chrono::steady_clock::now();
  auto model = hf::load_hf_model(a.dir, cpu_compute_dtype(a.dtype), c10::Device(c10::kCPU), &cfg);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const bool text_prompt = !a.prompt.empty() || !a.messages.empty();
  auto tok = folder_tokenizer(a.dir, text_prompt ? "for text prompts; use --tokens for ids" : "");
  std::vector<int64_t> prompt;
  if (text_prompt) {
    std::string text = a.prompt;
    if (a.chat) {
      tokenizers::ChatTemplateOptions co = chat_template_options(a.vars, a.date, a.date_given);
      co.add_generation_prompt = true;
      co.template_name = a.template_name;
      if (!a.messages.empty()) {
        text = hf::format_chat(*tok, read_messages_file(a.messages), co, hf::chat_template_source(a.dir));
      } else {
        std::vector<tokenizers::ChatMessage> msgs;
        if (a.system_set) msgs.push_back({"system", a.system});  // "" too: an empty system turn, as transformers
        msgs.push_back({"user", a.prompt});
        text = hf::format_chat(*tok, msgs, co, hf::chat_template_source(a.dir));
      }
    }
    // As transformers: tokenizer(prompt) adds the post-processor's special tokens (e.g.
    // a BOS); the chat template's text already holds its own, so none are added.
    for (int32_t id : tok->encode(text, !a.chat)) prompt.push_back(id);
  } else {
    if (a.chat) throw InputError("--chat needs --prompt TEXT");
    prompt = parse_ids(a.tokens, "--tokens");
    check_prompt_ids(prompt, cfg.vocab_size, "--tokens");
  }
  const char* prompt_flag = !a.messages.empty() ? "--messages" : a.prompt.empty() ? "--tokens" : "--prompt";
  if (prompt.empty()) throw InputError(std::string(prompt_flag) + ": the prompt has no tokens");
  inference::GenerateOptions o;
  o.max_new_tokens = room_for_new_tokens(int64_t(prompt.size()), a.max_new, cfg.max_position_embeddings,
                                         "max_position_embeddings", prompt_flag);
  o.sampling = a.sampling;
  if (a.generation_config) {
    const auto d = hf::generation_sampling_defaults(a.dir);
    if (!d) throw InputError("--generation-config: " + a.dir + "/generation_config.json does not exist");
    if (!a.set_temperature) o.sampling.temperature = d->temperature;
    if (!a.set_top_k) o.sampling.top_k = d->top_k;
    if (!a.set_top_p) o.sampling.top_p = d->top_p;
    if (!a.set_repetition_penalty) o.sampling.repetition_penalty = d->repetition_penalty;
    for (const auto& f : hf::generation_config_unapplied(a.dir))
      std::cerr << "note: " << a.dir << "/generation_config.json: " << f
                << " is not applied (lol samples with temperature, top_k, top_p and repetition_penalty; "
                   "--max-new sets the length)\n";
    const auto& sp = o.sampling;
    std::cerr << "sampling: " << (sp.temperature == 0 ? std::string("greedy") : "temperature " + fmt_g(sp.temperature))
              << ", top_k " << sp.top_k << ", top_p " << fmt_g(sp.top_p) << ", repetition_penalty "
              << fmt_g(sp.repetition_penalty) << " (generation_config.json and flags)\n";
  }
  o.seed = a.seed;
  o.batch_size = 1;
  if (!a.no_stop) {
    o.stop_tokens = hf::stop_tokens(a.dir, cfg, tok.get());
    note_unreachable_stops(o.stop_tokens, cfg.vocab_size, a.dir + ": eos_token_id");
    if (a.chat) hf::add_chatml_stop(tok.get(), o.stop_tokens);
  }
  std::vector<int32_t> generated;
  // Text as tok->decode(generated, true) gives it, one token at a time; a character split
  // across tokens prints when complete; clean_up_tokenization_spaces as the folder sets it.
  std::unique_ptr<tokenizers::DecodeStream> stream;
  if (tok) stream = std::make_unique<tokenizers::DecodeStream>(*tok, /*skip_special_tokens=*/true);
  auto t_first = std::chrono::steady_clock::now();
  double prefill_s = 0;
  o.on_token = [&](int64_t, int64_t t) {
    if (generated.empty())
      prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_first).count();
    generated.push_back(int32_t(t));
    if (a.ids || !tok) {
      std::cout << (generated.size() > 1 ? " " : "") << t << std::flush;
      return;
    }
    std::cout << stream->push(int32_t(t)) << std::flush;
  };
  const int64_t max_len = int64_t(prompt.size()) + o.max_new_tokens;
  inference::DenseSessionOptions so;
  so.max_len = std::max<int64_t>(max_len, 1);
  inference::DenseDecodeSession session(model, so);
  t_first = std::chrono::steady_clock::now();
  auto gens = inference::generate_dense(session, {prompt}, o);
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_first).count();
  std::cout << (stream ? stream->finish() : std::string()) << "\n";
  const int64_t n = int64_t(gens[0].tokens.size());
  std::cerr << std::fixed << std::setprecision(2) << "load " << load_s << " s; prompt " << prompt.size()
            << " tokens in " << prefill_s << " s";
  if (prefill_s > 0) std::cerr << " (" << std::setprecision(1) << double(prompt.size()) / prefill_s << " tok/s)";
  std::cerr << "; " << n << " new tokens";
  if (n > 1 && total_s > prefill_s) std::cerr << ", decode " << double(n - 1) / (total_s - prefill_s) << " tok/s";
  std::cerr << " ("
            << (gens[0].stopped ? "stop token" : o.max_new_tokens < a.max_new ? "max_position_embeddings reached" : "max new tokens")
            << ")\n";
}

// ---------------------------------------------------------------- ppl
struct PplArgs {
  std::string dir, data, dtype = "float32", out;
  int64_t context = 0, max_tokens = 0;  ///< context 0: min(512, max_position_embeddings)
  int threads = 0;
};

/// Documents of a data file: the "text" fields of a .jsonl file, else the whole file.
std::vector<std::string> read_documents(const std::string& path) {
  std::vector<std::string> docs;
  if (path.size() > 6 && path.substr(path.size() - 6) == ".jsonl") {
    std::ifstream in(path);
    if (!in) throw InputError(path + ": cannot read");
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const std::exception& e) {
        throw InputError(path + ":" + std::to_string(n) + ": not valid JSON: " + e.what());
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        throw InputError(path + ":" + std::to_string(n) + ": expected an object with a string field \"text\"");
      docs.push_back(j["text"].get<std::string>());
    }
  } else {
    docs.push_back(io::read_file(path));
  }
  return docs;
}

void run_ppl(const PplArgs& given) {
  PplArgs a = given;
  if (a.threads > 0) init_runtime(a.threads);
  if (a.context == 1 || a.context < 0)
    throw InputError("--context " + std::to_string(a.context) + ": expected 0 (= min(512, max_position_embeddings)) or >= 2");
  if (a.max_tokens == 1 || a.max_tokens < 0)
    throw InputError("--max-tokens " + std::to_string(a.max_tokens) +
                     ": expected 0 (= all) or >= 2 (a context token and a predicted one)");
  require_output_outside_model(a.out, a.dir, "--out");
  require_output_is_not_input(a.out, a.data, "--out", "--data");
  hf::HfConfig cfg;
  auto model = hf::load_hf_model(a.dir, cpu_compute_dtype(a.dtype), c10::Device(c10::kCPU), &cfg);
  if (a.context == 0) a.context = std::min<int64_t>(512, cfg.max_position_embeddings);
  if (a.context > cfg.max_position_embeddings)
    throw InputError("--context " + std::to_string(a.context) + ": expected <= max_position_embeddings " +
                     std::to_string(cfg.max_position_embeddings));
  if (a.context < 2)
    throw InputError(a.dir + "/config.json: max_position_embeddings " + std::to_string(cfg.max_position_embeddings) +
                     ": windows of at least 2 tokens are needed to predict a token");
  auto tok = folder_tokenizer(a.dir, "to tokenize the text hf ppl scores");
  // Non-overlapping windows of `context` tokens per document; the first token of each
  // window is context only, every other token is predicted from the window before it.
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> req;
  int64_t used = 0, bytes = 0;
  for (const auto& doc : read_documents(a.data)) {
    std::vector<int32_t> ids;
    try {
      ids = tok->encode(doc);
    } catch (const InputError& e) {
      throw InputError("--data " + a.data + ": " + e.what());
    }
    for (size_t b = 0; b + 1 < ids.size(); b += size_t(a.context)) {
      size_t e = std::min(ids.size(), b + size_t(a.context));
      if (a.max_tokens > 0) e = std::min<size_t>(e, b + size_t(std::max<int64_t>(a.max_tokens - used, 0)));
      if (e < b + 2) break;
      req.push_back({{ids[b]}, std::vector<int32_t>(ids.begin() + b + 1, ids.begin() + e)});
      used += int64_t(e - b);
      // The predicted tokens' bytes: the window's text less its context token's. Decoding
      // the predicted tokens alone dropped the leading space a SentencePiece decoder strips
      // at the start of a text (about 1% too few bytes per 16-token window).
      const std::vector<int32_t> window(ids.begin() + b, ids.begin() + e);
      bytes += int64_t(tok->decode(window).size()) - int64_t(tok->decode({ids[b]}).size());
    }
    if (a.max_tokens > 0 && used >= a.max_tokens) break;
  }
  if (req.empty()) throw InputError(a.data + ": fewer than 2 tokens of text");
  baselines::DenseTrainable trainable(model);
  auto t0 = std::chrono::steady_clock::now();
  // The whole window in one call, as transformers' perplexity recipe (longrope's factors
  // depend on the call's length).
  const auto ll = analysis::continuation_logliks(trainable, req, a.context, c10::Device(c10::kCPU), 1, true);
  analysis::LmEvalResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < req.size(); ++i) {
    r.loss_sum -= ll[i];
    r.targets += int64_t(req[i].second.size());
  }
  r.rows = int64_t(req.size());
  r.bytes = bytes;
  r.bytes_counted = true;
  r.loss = r.loss_sum / double(r.targets);
  r.perplexity = std::exp(r.loss);
  r.bits_per_byte = r.loss_sum / std::log(2.0) / double(bytes);
  auto j = r.to_json();
  j["model"] = a.dir;
  j["data"] = a.data;
  j["context"] = a.context;
  j["dtype"] = a.dtype;
  if (!a.out.empty()) io::write_file_atomic(a.out, j.dump(2) + "\n");
  std::cout << std::fixed << std::setprecision(4) << "tokens " << r.targets << " (" << r.rows << " windows of <= "
            << a.context << "), loss " << r.loss << " nats, perplexity " << r.perplexity << ", bits/byte "
            << r.bits_per_byte << " (" << std::setprecision(1) << r.seconds << " s)\n";
}

// ---------------------------------------------------------------- bench
struct HfBenchArgs {
  std::string model, dtype = "float32";
  int64_t context = 512, new_tokens = 64, full_steps = 0, batch = 1;
  int threads = 0;
  bool json = false;
};

void run_hf_bench(const HfBenchArgs& a) {
  if (a.threads > 0) init_runtime(a.threads);
  const auto dtype = cpu_compute_dtype(a.dtype);
  hf::HfConfig cfg;
  baselines::DenseModel model{nullptr};
  const bool random = !fs::is_directory(a.model);
  if (random) {
    cfg = hf::HfConfig::from_json(io::read_json_file(a.model), a.model);
    util::require_fits_in_memory(a.model, "the model's float32 weights", 4.0 * double(hf::parameter_count(cfg)));
    model = baselines::DenseModel(hf::to_dense_config(cfg));
    model->to(dtype);
    model->eval();
  } else {
    model = hf::load_hf_model(a.model, dtype, c10::Device(c10::kCPU), &cfg);
  }
  inference::DecodeBenchOptions o;
  o.context = a.context;
  o.new_tokens = a.new_tokens;
  o.full_steps = a.full_steps;
  o.batch = a.batch;
  const auto r = inference::bench_dense_decode(model, o, (random ? a.model : a.model + "/config.json") +
                                                             ": max_position_embeddings");
  if (a.json) {
    nlohmann::json j = {{"model", a.model}, {"random_weights", random}, {"parameters", hf::parameter_count(cfg)},
                        {"dtype", a.dtype}, {"threads", at::get_num_threads()}, {"context", a.context},
                        {"new_tokens", a.new_tokens}, {"batch", a.batch}, {"prefill_tok_s", r.prefill_tok_s},
                        {"decode_tok_s", r.decode_tok_s}, {"decode_ms_per_step", 1000.0 * r.decode_s / double(a.new_tokens)}};
    if (a.full_steps > 0) j["full_decode_tok_s"] = r.full_decode_tok_s;
    std::cout << j.dump(1) << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(1) << a.model << ": " << cfg.architecture << ", "
            << hf::parameter_count(cfg) << " parameters" << (random ? " (random weights)" : "") << ", " << a.dtype << ", "
            << at::get_num_threads() << " threads, batch " << a.batch << "\n"
            << "prefill (" << a.context << " tokens):           " << r.prefill_tok_s << " tok/s\n"
            << "decode  (" << a.new_tokens << " steps after " << a.context << "):  " << r.decode_tok_s << " tok/s ("
            << std::setprecision(2) << 1000.0 * r.decode_s / double(a.new_tokens) << " ms/step)\n";
  if (a.full_steps > 0)
    std::cout << std::setprecision(1) << "decode  (full recompute, " << a.full_steps << " steps): " << r.full_decode_tok_s
              << " tok/s\n";
}

}  // namespace

void register_hf(CLI::App& app) {
  auto* hf = app.add_subcommand("hf", "Hugging Face model folders: Qwen2, Qwen3, Llama, Mistral, Phi-3, Gemma, Gemma 2, Gemma 3, OLMo 2, OLMo 3, GPT-2, GPT-BigCode, GPT-NeoX, Phi-1/1.5/2, StableLM, Falcon, GPT-J, StarCoder2, Granite, Cohere Command-R, OPT, Mixtral, OLMoE, Qwen2-MoE, Qwen3-MoE (config.json + safetensors + tokenizer)");
  hf->require_subcommand(1);

  auto info_dir = std::make_shared<std::string>();
  auto info_check = std::make_shared<bool>(false);
  auto* info = hf->add_subcommand("info", "Summarise a model folder: config, weights, tokenizer, chat template");
  info->add_option("dir", *info_dir, "Model folder")->required();
  info->add_flag("--check", *info_check, "Also load every tensor (strict names, shapes, finite values)");
  info->callback([info_dir, info_check] { run_info(*info_dir, *info_check); });

  auto g = std::make_shared<GenArgs>();
  auto* gen = hf->add_subcommand("generate", "Generate text (KV-cached; streams to stdout, speed to stderr)");
  gen->add_option("dir", g->dir, "Model folder")->required();
  auto* pr = gen->add_option("--prompt", g->prompt, "Prompt text");
  auto* tk = gen->add_option("--tokens", g->tokens, "Prompt token ids, comma or space separated");
  pr->excludes(tk);
  gen->add_flag("--chat", g->chat, "Format the prompt as a user turn with the folder's chat template (run as "
                                   "transformers' apply_chat_template runs it)");
  auto* sy = gen->add_option("--system", g->system, "System message for --chat (\"\": an empty one; default: the template's)");
  auto* vr = gen->add_option("--var", g->vars,
                             "Chat template variable NAME=VALUE for --chat (VALUE as JSON, else text), e.g. "
                             "enable_thinking=false");
  auto* dt = gen->add_option("--date", g->date, "YYYY-MM-DD: the date strftime_now gives --chat's template");
  auto* ct = gen->add_option("--chat-template", g->template_name,
                             "Which of the folder's named chat templates --chat runs (default: the default one)");
  auto* ms = gen->add_option("--messages", g->messages,
                             "A conversation (JSON array of messages) for the chat template, instead of --prompt "
                             "(implies --chat)");
  gen->add_option("--max-new", g->max_new, "Maximum new tokens (reduced so that prompt + new tokens <= max_position_embeddings)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24));
  add_sampling_options(gen, g->sampling, g->seed);
  gen->add_option("--dtype", g->dtype, "Compute dtype: float32 | bfloat16 | float16 | float64")->capture_default_str();
  gen->add_flag("--ids", g->ids, "Print token ids instead of text");
  gen->add_flag("--no-stop", g->no_stop, "Ignore EOS tokens (always generate --max-new tokens)");
  gen->add_flag("--generation-config", g->generation_config,
                "Sample as transformers' generate() does by default: generation_config.json's do_sample, temperature, "
                "top_k, top_p, repetition_penalty (sampling flags given here override them)");
  gen->add_option("--threads", g->threads, "CPU threads (default: all available)");
  gen->callback([g, pr, tk, gen, sy, vr, dt, ms, ct] {
    if (ms->count() > 0) {
      if (pr->count() > 0 || tk->count() > 0 || sy->count() > 0)
        throw InputError("--messages replaces --prompt, --tokens and --system (put the system turn in the file)");
      g->chat = true;
    }
    g->system_set = sy->count() > 0;
    if (g->system_set && !g->chat) throw InputError("--system needs --chat");
    g->date_given = dt->count() > 0;
    if ((vr->count() > 0 || dt->count() > 0 || ct->count() > 0) && !g->chat)
      throw InputError("--var / --date / --chat-template need --chat");
    g->set_temperature = gen->get_option("--temperature")->count() > 0;
    g->set_top_k = gen->get_option("--top-k")->count() > 0;
    g->set_top_p = gen->get_option("--top-p")->count() > 0;
    g->set_repetition_penalty = gen->get_option("--repetition-penalty")->count() > 0;
    check_prompt_flags(pr->count() > 0, g->prompt, tk->count() > 0, g->tokens);
    if (g->prompt.empty() && g->tokens.empty() && g->messages.empty())
      throw InputError("hf generate: give --prompt TEXT, --messages FILE or --tokens IDS");
    run_generate(*g);
  });

  auto p = std::make_shared<PplArgs>();
  auto* ppl = hf->add_subcommand("ppl", "Perplexity and bits per byte of a text file (.txt, or .jsonl \"text\" fields)");
  ppl->add_option("dir", p->dir, "Model folder")->required();
  ppl->add_option("--data", p->data, "Text file")->required();
  ppl->add_option("--context", p->context,
                  "Tokens per window (non-overlapping); 0 = min(512, max_position_embeddings)")->capture_default_str();
  ppl->add_option("--max-tokens", p->max_tokens, "Evaluate at most this many tokens (0 = all)")->capture_default_str();
  ppl->add_option("--dtype", p->dtype, "Compute dtype")->capture_default_str();
  ppl->add_option("--out", p->out, "Also write the result as JSON");
  ppl->add_option("--threads", p->threads, "CPU threads (default: all available)");
  ppl->callback([p] { run_ppl(*p); });

  auto b = std::make_shared<HfBenchArgs>();
  auto* bench = hf->add_subcommand("bench", "Prefill and decode tokens/s (a config.json: random weights; a folder: its weights)");
  bench->add_option("model", b->model, "config.json of the shape to time, or a model folder")->required();
  bench->add_option("--context", b->context, "Prompt tokens before decoding")->capture_default_str();
  bench->add_option("--new", b->new_tokens, "Cached decode steps timed")->capture_default_str();
  bench->add_option("--full-steps", b->full_steps, "Full-recompute decode steps timed (0 = skip)")->capture_default_str();
  bench->add_option("--batch", b->batch, "Sequences decoded together")->capture_default_str();
  bench->add_option("--dtype", b->dtype, "Compute dtype")->capture_default_str();
  bench->add_option("--threads", b->threads, "CPU threads (default: all available)");
  bench->add_flag("--json", b->json, "Print JSON");
  bench->callback([b] { run_hf_bench(*b); });
}

}  // namespace lol::cli
