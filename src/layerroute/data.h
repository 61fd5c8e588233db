// LayerRoute training/evaluation data (issue 11): JSONL files, one sample per line,
// rendered as ChatML exactly as Qwen2.5-Instruct's chat template renders it
// (`tokenizer.apply_chat_template(messages, tools=tools)` in transformers), with the
// loss on assistant tokens only. Accepted line shapes:
//   {"messages": [{"role": "system"|"user"|"assistant"|"tool", "content": "...",
//                  "tool_calls": [{"function": {"name": ..., "arguments": ...}}]?}, ...],
//    "tools": [{...function signature...}, ...]?}
//   {"conversations": [{"from": "system"|"human"|"gpt"|"tool", "value": "..."}, ...]}  (ShareGPT / Hermes)
//   {"question": "...", "answer": "..."}                                             (GSM8K style)
// Optional "source" (string) labels a sample: held-out selection and reports are per
// source (eval.h). The template's rules, reproduced here:
//  - an assistant message with tool calls renders as its content (when non-empty)
//    followed by "\n<tool_call>\n{\"name\": \"NAME\", \"arguments\": ARGS}\n</tool_call>"
//    per call, where ARGS is `arguments | tojson` (Python json.dumps, separators ", " and
//    ": ", non-ASCII kept): an object stays an object, a string is written as a JSON
//    string, exactly as the template does; the leading "\n" of the first call is dropped
//    when the content is empty (the role line's own "\n" stands there);
//  - consecutive "tool" messages form one user turn, each wrapped in
//    "<tool_response>\n...\n</tool_response>" and joined by "\n";
//  - "tools" renders the template's "# Tools" block after the system prompt (the
//    sample's own system message, else the default system prompt).
// ShareGPT data (Hermes) already carries its tags in the text: a "gpt" value is kept
// verbatim and a "tool" value already wrapped in <tool_response> tags is not wrapped again.
// Deliberate deviations from the template: roles "function" and "ipython" are taken as
// "tool" (Qwen2.5's template has no branch for them and drops such messages silently);
// integers beyond 64 bits are written as floats; NaN / Infinity (not JSON) are refused;
// "tool_calls" on a non-assistant message and a non-string tool name are refused (the
// template ignores the former and prints the latter).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizers/tokenizer.h"
#include "training/trainable.h"

namespace lol::layerroute {

/// One ChatML turn: "<|im_start|>" + role + "\n" + content + "<|im_end|>" + "\n".
struct Turn {
  std::string role;     ///< "system", "user" or "assistant" (after mapping)
  std::string content;  ///< the text between the role line and <|im_end|> (tool calls rendered in)
};

struct Sample {
  std::vector<Turn> turns;
  std::string tools;   ///< the rendered "# Tools" block appended to the system prompt ("" = no tools)
  /// The conversation as a chat template takes it (chat_format.h): the "messages"
  /// objects as given; ShareGPT entries as {"role", "content"} (human -> user, gpt ->
  /// assistant; a tool value wrapped exactly as "<tool_response>\n...\n</tool_response>"
  /// unwrapped, as templates wrap it themselves); a question/answer pair as a user and
  /// an assistant message.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  /// The sample's "tools" list as given (null: none).
  nlohmann::ordered_json tool_schemas;
  std::string source;
  std::string where;   ///< "file:line" (read_samples), for messages
};

/// Python's `json.dumps(v, ensure_ascii=False)` (what `tojson` writes in transformers'
/// chat templates): ", " and ": " separators, keys in their stored order, non-ASCII
/// characters as UTF-8, control characters escaped. Integers beyond 64 bits (parsed as
/// floating point by nlohmann-json) are written as floats. Throws InputError for a value
/// nested deeper than 1000 levels (Python's json.dumps fails there too, RecursionError).
std::string python_json_dumps(const nlohmann::ordered_json& v);

/// Parses one JSONL line (see above; parse with nlohmann::ordered_json so that object
/// keys keep their order, as Python's json does). `where` = "file:line" for errors:
/// InputError for an unknown shape or role, a missing, null or non-string content
/// (only an assistant message with tool calls may leave it out; the template fails on
/// the others too), a malformed tool call, a "tools" entry that is not an object, JSON
/// nested deeper than 1000 levels, or a sample without an assistant turn.
Sample parse_sample(const nlohmann::ordered_json& j, const std::string& where);
/// Every non-empty line of a JSONL file. InputError naming file:line.
std::vector<Sample> read_samples(const std::string& path);

/// A tokenised sample.
struct Example {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> loss_mask;  ///< 1 on assistant content tokens and their <|im_end|>
  int64_t prompt_len = 0;          ///< tokens before the last assistant turn's content
  std::string source;
  std::string where;               ///< "file:line" of the sample when read from a file
};

/// The tokens the language-model loss and the perplexities count (`--loss-tokens`).
/// Paper eq. 4 names "the standard autoregressive cross-entropy loss" without saying
/// over which tokens: Assistant (the default) is the supervised fine-tuning reading for
/// chat data, All counts every token of the sample.
enum class LossTokens { Assistant, All };
/// "assistant" | "all"; InputError naming `flag` otherwise.
LossTokens parse_loss_tokens(const std::string& s, const std::string& flag = "--loss-tokens");
const char* loss_tokens_name(LossTokens l);

/// The turns as rendered: a system turn `default_system` first when the sample has
/// none and it is not empty (or the sample has tools), the tools block appended to the
/// system turn.
std::vector<Turn> chat_turns(const Sample& s, const std::string& default_system);

/// The whole ChatML text of the sample (chat_turns, no generation prompt): the string
/// transformers' apply_chat_template returns for the same messages and tools.
std::string render_chatml(const Sample& s, const std::string& default_system);

/// Tokens of render_chatml(s, default_system), encoded turn by turn at the special
/// tokens (where Hugging Face tokenizers split the text too, so the ids equal encoding
/// the whole string at once), truncated to max_len tokens (0 = no limit). The loss mask
/// covers every token of an assistant turn's content that holds a content byte (a
/// token the pre-tokenizer merges across the role line's "\n" and the content counts
/// as content) and its <|im_end|>; with LossTokens::All every token, when the sample
/// keeps an assistant token within max_len (else the mask stays empty: callers drop
/// such samples either way).
Example tokenize_sample(const Sample& s, const tokenizers::Tokenizer& tok, int64_t max_len,
                        const std::string& default_system, LossTokens loss = LossTokens::Assistant);

/// Cuts `e` to max_len tokens (0 = no limit; prompt_len too) and, with LossTokens::All,
/// sets every mask entry when an assistant token is left (else the mask stays empty).
void cut_example(Example& e, int64_t max_len, LossTokens loss);

/// Throws InputError (naming `what`, the first example longer than `max_positions` (by
/// its file:line when known), its length and the --max-len that fits) when an example has more tokens than the
/// base model has positions (max_seq_len / max_position_embeddings); the forward pass
/// would fail on it.
void require_examples_fit(const std::vector<Example>& examples, int64_t max_positions, const std::string& what);

/// Batch of examples, one per row, padded (training::assemble_batch: targets count on
/// loss_mask tokens only).
training::TrainBatch make_batch(const std::vector<const Example*>& rows);

}  // namespace lol::layerroute
