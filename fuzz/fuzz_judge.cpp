// libFuzzer target: `lol data judge` input (src/dataset/judge.h): JSONL lines of
// {question, strategy, generated[, task]}. judge_continuations either judges every line
// or throws lol::InputError (a bad line); the maze and sudoku verifiers must never throw
// on a continuation, whatever its tokens, and every verdict is well formed.
#include <cstdint>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "dataset/judge.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::ostringstream out;
  try {
    const auto tally = lol::data::judge_continuations(in, "fuzz.jsonl", out);
    std::istringstream back(out.str());
    int64_t lines = 0;
    for (std::string line; std::getline(back, line); ++lines) {
      const auto v = nlohmann::json::parse(line);
      const int followed = v.at("followed").get<int>();
      const double padding = v.at("padding").get<double>();
      if (followed < 0 || followed > 5 || !(padding >= 0.0 && padding <= 1.0)) __builtin_trap();
      // Faithful implies legal; an exact trace of the requested strategy is as requested.
      if (v.at("faithful").get<bool>() && !v.at("legal").get<bool>()) __builtin_trap();
    }
    if (lines != tally.n || tally.faithful > tally.legal) __builtin_trap();
  } catch (const lol::InputError&) {
  }
  return 0;
}
