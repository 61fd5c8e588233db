// libFuzzer target: maze/sudoku JSONL task records (src/dataset/task_dataset.h):
// verify_task_file runs the record parser, the question/trace/answer tokenizers and
// the task verifiers on every line and must never throw on a bad line; every line
// that is a JSON object also goes through example_from_json directly.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "dataset/task_dataset.h"
#include "fuzz_util.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lol::fuzz::write_scratch("records.jsonl", data, size);
  auto report = lol::data::verify_task_file(path);
  if (report.passed + report.failed + report.malformed != report.records) __builtin_trap();
  std::string_view s(reinterpret_cast<const char*>(data), size);
  while (!s.empty()) {
    const auto nl = s.find('\n');
    const std::string_view line = s.substr(0, nl);
    s = nl == std::string_view::npos ? std::string_view() : s.substr(nl + 1);
    auto j = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    try {
      (void)lol::data::example_from_json(j, "fuzz.jsonl:1");
    } catch (const lol::InputError&) {
    }
  }
  return 0;
}
