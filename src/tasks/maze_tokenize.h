// Word-level vocabulary and tokenization of maze examples (LoL paper Appendix A:
// "small tokenizers specifically for the vocabulary of each task"; C.4: "only
// allow the router to view the strategy description, and compute the loss only
// over the solving steps and final answer").
#pragma once
#include "tasks/task.h"
#include "tasks/vocab.h"

namespace lol::tasks {

/// The maze vocabulary for grids up to max_size x max_size (4..16), in id order:
///   <pad> <eos> Q : R A [ ] ... start goal N E S W r1c1 r1c2 ... r<max>c<max>
/// (cells row-major). "..." is the filler label token of section 4.1.3. A
/// vocabulary for a larger max_size extends one for a smaller one only by cells,
/// but cell ids differ between sizes, so store the vocabulary with the data.
/// Throws lol::InputError for max_size outside 4..16.
Vocab maze_vocab(int max_size);

/// Token ids and per-token roles of one example: ids of question, label, trace
/// and answer in order; loss_mask = 1 on the trace and answer tokens (including
/// "R", ":", "A", ":" and <eos>); router_only = 1 on the label tokens from "["
/// to "]" inclusive; prompt_len = question + label tokens.
/// Throws lol::InputError naming the token when a word is not in `vocab`, or when
/// the label does not start with "[" and end with "]".
TokenizedExample tokenize_maze_example(const Example& example, const Vocab& vocab);

}  // namespace lol::tasks
