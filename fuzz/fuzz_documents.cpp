// libFuzzer target: the streaming document reader of `lol corpus` / `lol tokenizer
// train` (src/dataset/documents.h) on arbitrary bytes, read once as JSON lines (text
// and label fields) and once as plain text with each document split rule, with tiny
// blocks so that the block cutting logic runs often.
#include <cstdint>
#include <string>

#include "dataset/documents.h"
#include "fuzz_util.h"
#include "util/error.h"

namespace {
void read_all(const std::string& path, lol::data::DocumentSourceOptions o) {
  try {
    lol::data::DocumentReader r({path}, o);
    lol::data::Document d;
    int64_t last_index = -1;
    while (r.next(d)) {
      if (d.index < last_index) __builtin_trap();
      last_index = d.index;
    }
    if (r.bytes_read() > r.total_bytes()) __builtin_trap();
  } catch (const lol::InputError&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lol::data::DocumentSourceOptions o;
  o.label_field = "lang";
  o.max_bytes_per_label = 64;
  read_all(lol::fuzz::write_scratch("docs.jsonl", data, size), o);
  const std::string txt = lol::fuzz::write_scratch("docs.txt", data, size);
  for (auto split : {lol::data::DocSplit::kBlankLine, lol::data::DocSplit::kLine, lol::data::DocSplit::kFile}) {
    lol::data::DocumentSourceOptions p;
    p.doc_split = split;
    p.block_bytes = 7;
    read_all(txt, p);
  }
  return 0;
}
