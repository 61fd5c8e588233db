// LayerRoute training/evaluation data (issue 11): JSONL files, one sample per line,
// rendered as ChatML (the Qwen2.5 format, tokenizers/chat_template.h), with the loss
// on assistant tokens only. Accepted line shapes:
//   {"messages": [{"role": "system"|"user"|"assistant"|"tool", "content": "...",
//                  "tool_calls": [{"function": {"name": ..., "arguments": ...}}]?}, ...]}
//   {"conversations": [{"from": "system"|"human"|"gpt"|"tool", "value": "..."}, ...]}  (ShareGPT / Hermes)
//   {"question": "...", "answer": "..."}                                             (GSM8K style)
// Optional "source" (string) labels a sample in reports. Tool calls of an assistant
// message are appended to its content as "<tool_call>\n{json}\n</tool_call>" and tool
// messages become user turns wrapped in "<tool_response>\n...\n</tool_response>", as
// Qwen2.5's chat template renders them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizers/tokenizer.h"
#include "training/trainable.h"

namespace lol::layerroute {

struct Turn {
  std::string role;  ///< "system", "user" or "assistant" (after mapping)
  std::string content;
};

struct Sample {
  std::vector<Turn> turns;
  std::string source;
};

/// Parses one JSONL line (see above). `where` = "file:line" for errors: InputError
/// for an unknown shape or role, a non-string content, or a sample without an
/// assistant turn.
Sample parse_sample(const nlohmann::json& j, const std::string& where);
/// Every non-empty line of a JSONL file. InputError naming file:line.
std::vector<Sample> read_samples(const std::string& path);

/// A tokenised sample.
struct Example {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> loss_mask;  ///< 1 on assistant content tokens and their <|im_end|>
  int64_t prompt_len = 0;          ///< tokens up to and including the last "<|im_start|>assistant\n"
  std::string source;
};

/// ChatML rendering (a system turn `default_system` is added when the sample has none
/// and it is not empty), truncated to max_len tokens (0 = no limit).
Example tokenize_sample(const Sample& s, const tokenizers::Tokenizer& tok, int64_t max_len,
                        const std::string& default_system);

/// Throws InputError (naming `what`, the first example longer than `max_positions`,
/// its length and the --max-len that fits) when an example has more tokens than the
/// base model has positions (max_seq_len / max_position_embeddings); the forward pass
/// would fail on it.
void require_examples_fit(const std::vector<Example>& examples, int64_t max_positions, const std::string& what);

/// Batch of examples, one per row, padded (training::assemble_batch: targets count on
/// loss_mask tokens only).
training::TrainBatch make_batch(const std::vector<const Example*>& rows);

}  // namespace lol::layerroute
