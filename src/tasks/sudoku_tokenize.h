// Word-level vocabulary and tokenization of sudoku sequences (paper Appendix A:
// "small tokenizers specifically for the vocabulary of each task"; C.3.1 format).
#pragma once
#include "tasks/task.h"
#include "tasks/vocab.h"

namespace lol::tasks {

/// The fixed sudoku vocabulary (140 tokens, ids in this order):
///   "<pad>" (0), "<eos>" (1), "Q", "R", "A", ":", "[", "]", "S1".."S5", "...",
///   ".", "1".."9", ";", "=", "{", "}", "->", "set", "x", "back",
///   "row1".."row9", "col1".."col9", "box1".."box9", "r1c1".."r9c9" (row-major).
/// It covers every question, label (including the filler "[ ... ]"), trace and answer.
Vocab sudoku_vocab();

/// Token ids and roles of an example (see TokenizedExample): loss_mask is 1 on the
/// trace and answer tokens ("R", ":", steps, "A", ":", digits, "<eos>"), router_only
/// is 1 on the label tokens "[", "Sx", "]", prompt_len = question + label tokens.
/// Throws lol::InputError naming the token when a word is not in `vocab`.
TokenizedExample tokenize_sudoku_example(const Example& e, const Vocab& vocab);

}  // namespace lol::tasks
