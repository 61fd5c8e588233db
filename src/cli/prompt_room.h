// Prompt checks shared by the generating commands (lol generate, hf generate,
// layerroute generate): token ids within the vocabulary, and the room the model's
// context leaves for new tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lol::cli {

/// Throws InputError naming the flag when --prompt was given empty (`prompt_given`) or
/// --tokens was given without an id (`tokens_given`; only spaces and commas).
void check_prompt_flags(bool prompt_given, const std::string& prompt, bool tokens_given, const std::string& tokens);

/// Throws InputError naming `flag` (e.g. "--tokens"), the id and its position when an
/// id of `ids` is outside [0, vocab_size).
void check_prompt_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& flag);

/// The number of new tokens to generate after a prompt of `prompt_tokens` tokens in a
/// model whose context holds `context` positions (`context_name` names it in messages:
/// "max_seq_len", "max_position_embeddings"): `max_new`, or the room left
/// (context - prompt_tokens) when that is less, with a note on stderr naming --max-new.
/// Throws InputError naming `prompt_flag` (--prompt or --tokens) when the prompt leaves no
/// room for a new token (max_new = 0, a prefill only, needs the prompt to fit, no more).
int64_t room_for_new_tokens(int64_t prompt_tokens, int64_t max_new, int64_t context, const std::string& context_name,
                            const std::string& prompt_flag);

/// Prints a note on stderr for each stop id of `stops` outside [0, vocab_size): the
/// model can never generate it (a config's eos_token_id beyond vocab_size). `source`
/// names where the ids come from (e.g. "DIR: eos_token_id").
void note_unreachable_stops(const std::vector<int64_t>& stops, int64_t vocab_size, const std::string& source);

}  // namespace lol::cli
