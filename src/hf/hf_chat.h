// Text-side pieces of a Hugging Face folder (issue 10): the chat template of
// tokenizer_config.json, the stop tokens of config.json / generation_config.json and
// the sampling defaults of generation_config.json.
// LibTorch-free.
//
// Chat templates are Jinja programs: `--chat` runs them with lol's Jinja interpreter
// (jinja/template.h, tokenizers::render_chat_template) as transformers'
// apply_chat_template does. LayerRoute's training data is ChatML rendered by lol itself
// (layerroute/data.h); for it, the default system prompt a ChatML template inserts is
// read from the template (chatml_default_system) and templates whose ChatML differs
// from that rendering are refused (chatml_unsupported_construct).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hf/hf_config.h"
#include "inference/sampling.h"
#include "tokenizers/chat_template.h"
#include "tokenizers/tokenizer.h"

namespace lol::hf {

/// The default system prompt of a ChatML chat template: the literal text the
/// template emits between "<|im_start|>system\n" and "<|im_end|>" within one piece of
/// emitted text (a Jinja string literal, escapes such as \n, \\ and \' undone, or raw
/// text between tags), e.g. Qwen2.5's "You are Qwen, created by Alibaba Cloud. You are
/// a helpful assistant."; "" when the template inserts none. nullopt when `jinja` is
/// not a ChatML template (no "<|im_start|>" and "<|im_end|>").
std::optional<std::string> chatml_default_system(const std::string& jinja);

/// Why a ChatML template's output would differ from lol's ChatML rendering, or "" when it
/// would not: the template changes the message text (`| trim`, `.strip(`, `.split(`...),
/// uses bos_token, adds a <think> block, or emits more text after its generation prompt's
/// "<|im_start|>assistant\n" (e.g. Qwen3 / QwQ, or a template that prepends the BOS token).
std::string chatml_unsupported_construct(const std::string& jinja);

/// The system prompt ChatML rendering inserts for a conversation without one, for
/// `tok`: its chat template's default (chatml_default_system), or "" when it has no
/// template. Throws InputError naming `where` when the tokenizer lacks the
/// <|im_start|>/<|im_end|> tokens, its template is not ChatML, or it is ChatML with a
/// construct lol does not render (chatml_unsupported_construct).
std::string chatml_system_prompt(const tokenizers::Tokenizer& tok, const std::string& where);

/// Where the chat template of the model folder `dir` comes from, for messages:
/// "dir/chat_template.jinja" when that file exists (transformers prefers it), else
/// "dir/tokenizer_config.json: chat_template".
std::string chat_template_source(const std::string& dir);

/// The prompt text of `messages` as transformers' apply_chat_template(messages,
/// tokenize=False, add_generation_prompt=..., **variables) formats it with the
/// tokenizer's chat template (tokenizers::render_chat_template: the template runs with
/// the tokenizer's special tokens). Throws InputError naming `where` when the tokenizer
/// has no chat template or the template fails (a syntax error, an unsupported
/// construct, its own raise_exception).
std::string format_chat(const tokenizers::Tokenizer& tok, const std::vector<tokenizers::ChatMessage>& messages,
                        const tokenizers::ChatTemplateOptions& options, const std::string& where);
/// As above for a JSON array of message objects (any fields: tool_calls, content parts...).
std::string format_chat(const tokenizers::Tokenizer& tok, const nlohmann::ordered_json& messages,
                        const tokenizers::ChatTemplateOptions& options, const std::string& where);

/// Token ids that end generation for the folder `dir`: config.json eos_token_id,
/// generation_config.json eos_token_id (when that file exists) and the tokenizer's
/// EOS (tok may be null), without duplicates, in that order. Throws InputError
/// naming generation_config.json when it is malformed.
std::vector<int64_t> stop_tokens(const std::string& dir, const HfConfig& cfg, const tokenizers::Tokenizer* tok);

/// Appends the id of "<|im_end|>" to `stops` when `tok` has that token and it is not
/// there yet: a ChatML answer ends with it (Qwen2.5-Instruct's generation_config lists
/// it; folders exported from this project have no generation_config.json). tok may be null.
void add_chatml_stop(const tokenizers::Tokenizer* tok, std::vector<int64_t>& stops);

/// The sampling that transformers' generate() uses by default for the folder `dir`:
/// generation_config.json's do_sample, temperature, top_k, top_p and
/// repetition_penalty; absent fields take GenerationConfig's defaults (false, 1.0, 50,
/// 1.0, 1.0), null ones turn their step off as transformers' None does (top_k null = no
/// top-k). Without do_sample the result is greedy (temperature 0; the repetition penalty
/// still applies, as in transformers). nullopt when the folder has no
/// generation_config.json. Throws InputError naming the file and field for a wrong type
/// or a value transformers refuses (do_sample with temperature <= 0, top_p outside
/// [0, 1], top_k < 0) or float32 cannot hold (a repetition penalty of 1e39).
std::optional<inference::SamplingOptions> generation_sampling_defaults(const std::string& dir);

/// The fields of `dir`/generation_config.json that transformers' generate() would apply
/// and lol does not implement, each as "field 'min_p' = 0.05" (those at transformers'
/// default, null or absent are not listed; max_length / max_new_tokens are listed
/// because lol's --max-new decides the length). Empty when there is no such file.
/// Source: transformers' GenerationConfig defaults.
std::vector<std::string> generation_config_unapplied(const std::string& dir);

}  // namespace lol::hf
