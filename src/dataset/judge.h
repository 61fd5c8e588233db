// Judging generated continuations with the task verifiers (paper 4.1.3, Figure 14,
// Appendix C.3/C.4 metrics): `lol data judge`. The same verifier that fills
// `lol eval-strategies`' confusion table, for continuations generated elsewhere (an
// exported model under transformers, another implementation, hand-written traces).
#pragma once
#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "tasks/task.h"

namespace lol::data {

/// The verdict as `lol eval-strategies` writes it in results.json's samples:
/// {"followed", "as_requested", "legal", "faithful", "correct", "error"} (docs/tasks.md
/// "Verdict fields"); `padding` is not included.
nlohmann::json verdict_json(const tasks::Verdict& v);


/// Reads JSONL records {"question", "strategy", "generated"[, "task"]} from `in` and
/// writes one line per record to `out`: {"line", "followed", "as_requested", "legal",
/// "faithful", "correct", "padding", "error"} (`line` = the 1-based input line).
/// `question` is the prompt ("Q : ..." with the strategy's label, the filler or no
/// label), `strategy` the requested strategy 1..5, `generated` the continuation from
/// "R :" on; `task` is "maze" or "sudoku" (default: maze when the question holds
/// " start ", else sudoku). Blank lines are skipped. Returns the tally of the verdicts.
/// Throws InputError naming `where`:line and the field for a line that is not a JSON
/// object, a missing or mistyped field, a strategy outside 1..5, an unknown task or a
/// question the task cannot parse (the continuation itself is never an error: it is
/// judged). Nothing is written for a record after the first bad line.
tasks::VerdictTally judge_continuations(std::istream& in, const std::string& where, std::ostream& out);

}  // namespace lol::data
