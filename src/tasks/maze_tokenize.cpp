#include "tasks/maze_tokenize.h"

#include "tasks/maze.h"
#include "util/error.h"

namespace lol::tasks {

Vocab maze_vocab(int max_size) {
  if (!(max_size >= kMazeMinSize && max_size <= kMazeMaxSize))
    throw InputError("maze vocabulary: max_size must be 4..16, got " + std::to_string(max_size));
  std::vector<std::string> tokens = {"<pad>", "<eos>", "Q",    ":", "R", "A", "[", "]",
                                     "...",   "start", "goal", "N", "E", "S", "W"};
  for (int c = 0; c < max_size * max_size; ++c) tokens.push_back(maze_cell_name(c, max_size));
  return Vocab(std::move(tokens));
}

TokenizedExample tokenize_maze_example(const Example& example, const Vocab& vocab) {
  TokenizedExample t;
  t.strategy = example.strategy;
  t.puzzle_id = example.puzzle_id;
  const std::vector<std::string> label = split_tokens(example.label);
  if (!(label.size() >= 2 && label.front() == "[" && label.back() == "]"))
    throw InputError("maze example: label must be '[ ... ]', got '" + example.label + "'");
  auto append = [&](const std::string& part, uint8_t loss, uint8_t router) {
    for (int32_t id : vocab.encode(part)) {
      t.ids.push_back(id);
      t.loss_mask.push_back(loss);
      t.router_only.push_back(router);
    }
  };
  append(example.question, 0, 0);
  append(example.label, 0, 1);
  t.prompt_len = int32_t(t.ids.size());
  append(example.trace, 1, 0);
  append(example.answer, 1, 0);
  return t;
}

}  // namespace lol::tasks
