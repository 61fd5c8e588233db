#include "tasks/sudoku_tokenize.h"

#include <string>
#include <vector>

#include "tasks/sudoku_grid.h"

namespace lol::tasks {

Vocab sudoku_vocab() {
  std::vector<std::string> t = {"<pad>", "<eos>", "Q", "R", "A", ":", "[", "]"};
  for (int s = 1; s <= 5; ++s) t.push_back("S" + std::to_string(s));
  t.push_back("...");
  t.push_back(".");
  for (int d = 1; d <= 9; ++d) t.push_back(std::to_string(d));
  for (const char* w : {";", "=", "{", "}", "->", "set", "x", "back"}) t.emplace_back(w);
  for (int u = 0; u < 27; ++u) t.push_back(sudoku_unit_name(u));
  for (int c = 0; c < 81; ++c) t.push_back(sudoku_cell_name(c));
  return Vocab(std::move(t));
}

TokenizedExample tokenize_sudoku_example(const Example& e, const Vocab& vocab) {
  TokenizedExample out;
  auto add = [&](const std::string& part, uint8_t loss, uint8_t router) {
    for (int32_t id : vocab.encode(part)) {
      out.ids.push_back(id);
      out.loss_mask.push_back(loss);
      out.router_only.push_back(router);
    }
  };
  add(e.question, 0, 0);
  add(e.label, 0, 1);
  out.prompt_len = int32_t(out.ids.size());
  add(e.trace, 1, 0);
  add(e.answer, 1, 0);
  out.strategy = e.strategy;
  out.puzzle_id = e.puzzle_id;
  return out;
}

}  // namespace lol::tasks
