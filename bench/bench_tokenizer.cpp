// Tokenizer micro-benchmarks (issue 7): encode throughput in bytes/s on
// en_kjv.txt (4.15 MB, the shared English corpus) for GPT-2 (vocab.json +
// merges.txt), GPT-2's vocabulary with Qwen2's pre-tokenizer, the byte
// tokenizer, the pre-tokenizer regexes alone, BPE training, and added-token
// loading and matching with many tokens (visual-token vocabularies).
//
// Data: shared/data is looked up in $LOL_SHARED_DATA, else next to an ancestor of
// the executable's folder (<repo>/../shared/data when built in <repo>/build*).
//
//   ./lol_bench --benchmark_filter=Tokenizer
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "tokenizers/added_vocab.h"
#include "tokenizers/bpe_trainer.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/regex_splitter.h"

namespace {

namespace fs = std::filesystem;
using namespace lol::tokenizers;

std::string shared_data_dir() {
  if (const char* env = std::getenv("LOL_SHARED_DATA")) return env;
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (fs::exists(p / "shared/data/corpora/en_kjv.txt", ec)) return (p / "shared/data").string();
  }
  return "";
}

const std::string* kjv() {
  static const std::unique_ptr<std::string> text = [] {
    const std::string dir = shared_data_dir();
    if (dir.empty()) return std::unique_ptr<std::string>();
    std::ifstream f(dir + "/corpora/en_kjv.txt", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return std::make_unique<std::string>(ss.str());
  }();
  return text.get();
}

std::shared_ptr<Tokenizer> gpt2(const char* pattern) {
  const std::string dir = shared_data_dir() + "/tokenizers/gpt2";
  return load_vocab_merges(dir + "/vocab.json", dir + "/merges.txt", pattern);
}

bool have_data(benchmark::State& state) {
  if (kjv()) return true;
  state.SkipWithError("shared/data/corpora/en_kjv.txt not found (set LOL_SHARED_DATA)");
  return false;
}

void run_encode(benchmark::State& state, const Tokenizer& tok) {
  const std::string& text = *kjv();
  tok.encode(text);  // warm the per-word cache, as in steady-state use
  std::size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(n_tokens);
  state.counters["bytes/token"] = double(text.size()) / double(n_tokens);
}

void BM_TokenizerEncodeGpt2Kjv(benchmark::State& state) {
  if (!have_data(state)) return;
  static const auto tok = gpt2(kGpt2Pattern);
  run_encode(state, *tok);
}
BENCHMARK(BM_TokenizerEncodeGpt2Kjv)->Unit(benchmark::kMillisecond);

void BM_TokenizerEncodeQwen2PatternKjv(benchmark::State& state) {
  if (!have_data(state)) return;
  static const auto tok = gpt2(kQwen2Pattern);
  run_encode(state, *tok);
}
BENCHMARK(BM_TokenizerEncodeQwen2PatternKjv)->Unit(benchmark::kMillisecond);

// First encode of a text with an empty per-word cache.
void BM_TokenizerEncodeGpt2KjvColdCache(benchmark::State& state) {
  if (!have_data(state)) return;
  const std::string& text = *kjv();
  for (auto _ : state) {
    state.PauseTiming();
    auto tok = gpt2(kGpt2Pattern);
    state.ResumeTiming();
    benchmark::DoNotOptimize(tok->encode(text).data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}
BENCHMARK(BM_TokenizerEncodeGpt2KjvColdCache)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_TokenizerEncodeBytesKjv(benchmark::State& state) {
  if (!have_data(state)) return;
  static const ByteTokenizer tok;
  run_encode(state, tok);
}
BENCHMARK(BM_TokenizerEncodeBytesKjv)->Unit(benchmark::kMillisecond);

void BM_TokenizerPreTokenize(benchmark::State& state, const char* pattern) {
  if (!have_data(state)) return;
  const std::string& text = *kjv();
  RegexSplitter re(pattern);
  std::vector<std::string_view> pieces;
  for (auto _ : state) {
    pieces.clear();
    re.split(text, pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["jit"] = re.jit() ? 1 : 0;
}
BENCHMARK_CAPTURE(BM_TokenizerPreTokenize, gpt2, kGpt2Pattern)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerPreTokenize, qwen2, kQwen2Pattern)->Unit(benchmark::kMillisecond);

void BM_TokenizerTrainBpe4096Kjv(benchmark::State& state) {
  if (!have_data(state)) return;
  TrainBpeOptions o;
  o.vocab_size = 4096;
  o.special_tokens = {"<|endoftext|>"};
  for (auto _ : state) {
    auto tok = train_bpe_files({shared_data_dir() + "/corpora/en_kjv.txt"}, o);
    benchmark::DoNotOptimize(tok.get());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kjv()->size()));
}
BENCHMARK(BM_TokenizerTrainBpe4096Kjv)->Unit(benchmark::kMillisecond)->Iterations(2);

// N added tokens <img_0> ... <img_N-1> (all starting with the same byte), as
// tokenizers of visual-token models have.
AddedVocab image_tokens(int n) {
  AddedVocab v;
  for (int i = 0; i < n; ++i) {
    AddedToken t;
    t.content = "<img_" + std::to_string(i) + ">";
    t.id = 100000 + i;
    v.add(t);
  }
  return v;
}

// The time to add them all.
void BM_TokenizerAddedVocabLoad(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    AddedVocab v = image_tokens(n);
    benchmark::DoNotOptimize(v.max_id());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_TokenizerAddedVocabLoad)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

// Splitting 1 MB of text with one added token every ~30 bytes, among N tokens.
void BM_TokenizerAddedVocabSplit(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const AddedVocab v = image_tokens(n);
  std::string text;
  for (uint32_t k = 0; text.size() < (1u << 20); ++k)
    text += "hello world <img_" + std::to_string((k * 2654435761u) % n) + "> text ";
  std::vector<Segment> segs;
  for (auto _ : state) {
    segs.clear();
    v.split(text, segs);
    benchmark::DoNotOptimize(segs.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}
BENCHMARK(BM_TokenizerAddedVocabSplit)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

// lol_bench is one executable built from every bench/*.cpp. This main is weak so
// that a strong main elsewhere (BENCHMARK_MAIN() in another file) takes over
// without a duplicate-symbol error; one of them must exist.
__attribute__((weak)) int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
