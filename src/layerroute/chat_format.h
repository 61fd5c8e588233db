// How LayerRoute turns a sample into tokens (issue 11): the paper (section 4) fine-tunes
// Qwen2.5-Instruct on its ChatML, which data.h renders itself (render_chatml, the tool
// format included). Any other base model is trained on what its own chat template
// renders, as transformers' apply_chat_template does, run by src/jinja: Llama 3, Mistral,
// Qwen3, Gemma, ... instruct folders.
//
// Template format, for a sample with messages m_0..m_{n-1} (data.h Sample::messages) and
// tools T (Sample::tool_schemas):
//   text  = template(m_0..m_{n-1}, tools=T, add_generation_prompt=False)
//   ids   = encode(text) without the post-processor's special tokens (as
//           apply_chat_template(tokenize=True))
//   for each assistant message m_i:
//     a_i = |template(m_0..m_{i-1}, add_generation_prompt=True)|
//     b_i = |template(m_0..m_i, add_generation_prompt=False)| with the white space that
//           ends it dropped (ChatML's "\n" after <|im_end|>, Gemma's after <end_of_turn>)
//   Both renderings must be prefixes of `text` (else the sample is refused: the
//   template writes earlier turns differently once later ones follow, as Qwen3's drops
//   their reasoning). The loss mask covers the tokens holding a byte of [a_i, b_i):
//   from the first token where encode(text[0, a_i)) and ids part, to the last token
//   that holds a byte before b_i; a token holding bytes on both sides of a boundary
//   counts as assistant (as data.h's ChatML mask does). The assistant's end-of-turn
//   token (<|eot_id|>, </s>, <end_of_turn>, <|im_end|>) is inside [a_i, b_i).
// For the Qwen2.5 template both formats give the same ids and mask
// (LayerRouteChatFormat.TemplateEqualsChatMLOnQwen25).
#pragma once
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layerroute/data.h"
#include "tokenizers/tokenizer.h"

namespace lol::layerroute {

/// The date chat templates see when they ask for today's (strftime_now, Llama 3.1's
/// "Today Date"): fixed at 26 Jul 2024 (Llama 3.1's own fallback), so that a sample
/// renders to the same tokens on every day a training is resumed or evaluated.
constexpr std::time_t kChatTemplateDate = 1721952000;  // 2024-07-26 00:00:00 UTC

struct ChatFormat {
  /// "": ChatML (render_chatml). Otherwise the Jinja chat template run for samples
  /// without tools; `jinja_tools` for samples with tools (the tokenizer's "tool_use"
  /// template when it has one, else the same).
  std::string jinja, jinja_tools;
  std::string where;   ///< the template's name in messages ("DIR/tokenizer_config.json: chat_template")
  /// ChatML: the system turn of samples without one ("": none). Template: a system
  /// message put first in samples without one ("": none; the template may then write
  /// its own default system prompt, as Qwen2.5's does).
  std::string system;
  const tokenizers::Tokenizer* tok = nullptr;  ///< special tokens for the template (bos_token, eos_token)

  bool chatml() const { return jinja.empty(); }
  /// "chatml" or "chat template".
  std::string name() const { return chatml() ? "chatml" : "chat template"; }
};

/// The format LayerRoute uses with `tok`: ChatML when the tokenizer has the ChatML
/// tokens and either no chat template or a plain ChatML one (hf::chatml_default_system
/// finds its default system prompt, hf::chatml_unsupported_construct finds nothing);
/// else its chat template. `system_flag`: "auto" (ChatML: the template's default system
/// prompt; template: none added) or the text of --system. `where` names the template
/// (hf::chat_template_source). Throws InputError naming `where` for a tokenizer with
/// neither a chat template nor the ChatML tokens.
ChatFormat chat_format_for(const tokenizers::Tokenizer& tok, const std::string& where, const std::string& system_flag);

/// The whole text of sample `s` in format `f` (no generation prompt). Throws InputError
/// naming the sample and the template for a template that fails on it (e.g. Mistral's
/// "roles must alternate user/assistant").
std::string render_sample(const Sample& s, const ChatFormat& f);

/// Tokens and loss mask of `s` in format `f` (ChatML: tokenize_sample of data.h;
/// template: see the header comment), cut to max_len tokens (0 = no limit); prompt_len
/// is the first assistant token of the last assistant message. Throws InputError naming
/// the sample for a template that fails or that renders earlier turns differently once
/// later ones follow.
Example tokenize_sample(const Sample& s, const tokenizers::Tokenizer& tok, int64_t max_len, const ChatFormat& f,
                        LossTokens loss = LossTokens::Assistant);

/// The prompt text of one user turn (after a system message `system` when given),
/// ending where the assistant's answer begins (ChatML: "<|im_start|>assistant\n";
/// template: add_generation_prompt=True).
std::string generation_prompt(const std::string& user, const std::optional<std::string>& system, const ChatFormat& f);

/// The token that ends an assistant turn in format `f` (ChatML: <|im_end|>; Llama 3:
/// <|eot_id|>; ...): the last loss token of a one-exchange conversation, when it is an
/// added token (a stop token for generation); nullopt otherwise.
std::optional<int32_t> turn_end_token(const tokenizers::Tokenizer& tok, const ChatFormat& f);

}  // namespace lol::layerroute
