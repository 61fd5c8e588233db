#include "cli/prompt_room.h"

#include <iostream>

#include "util/error.h"

namespace lol::cli {

void check_prompt_flags(bool prompt_given, const std::string& prompt, bool tokens_given, const std::string& tokens) {
  if (prompt_given && prompt.empty()) throw InputError("--prompt: the text is empty (expected at least one character)");
  if (tokens_given && tokens.find_first_not_of(" ,\t") == std::string::npos)
    throw InputError("--tokens '" + tokens + "': no ids (expected ids separated by spaces or commas)");
}

void check_prompt_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& flag) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw InputError(flag + ": id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       ": expected 0 <= id < vocab_size = " + std::to_string(vocab_size));
}

int64_t room_for_new_tokens(int64_t prompt_tokens, int64_t max_new, int64_t context, const std::string& context_name,
                            const std::string& prompt_flag) {
  const int64_t room = context - prompt_tokens;
  const std::string has = std::to_string(prompt_tokens) + (prompt_tokens == 1 ? " token" : " tokens");
  if (max_new == 0 && room >= 0) return 0;  // a prefill only: the prompt may fill the context
  if (room < 1)
    throw InputError(prompt_flag + ": the prompt has " + has + " and the model's context (" + context_name + ") is " +
                     std::to_string(context) + ": no room for a new token (shorten the prompt)");
  if (max_new <= room) return max_new;
  std::cerr << "note: --max-new " << max_new << " reduced to " << room << " (the model's " << context_name << " is "
            << context << ", the prompt has " << has << ")\n";
  return room;
}

void note_unreachable_stops(const std::vector<int64_t>& stops, int64_t vocab_size, const std::string& source) {
  for (int64_t id : stops)
    if (id < 0 || id >= vocab_size)
      std::cerr << "note: " << source << " " << id << " is outside the vocabulary (vocab_size " << vocab_size
                << "): the model can never generate it, so it never stops generation\n";
}

}  // namespace lol::cli
