// `lol hf info|generate|ppl|bench` and `lol export --hf` end to end on tiny folders.
#include <cmath>
#include <filesystem>

#include "baselines/dense_trainable.h"
#include "hf/hf_model.h"
#include "hf_test_util.h"
#include "inference/dense_generate.h"
#include "model/file_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"

namespace lol::hf::test {
namespace {

using reftest::quote;
using reftest::run_lol;
using reftest::run_lol_all;

tokenizers::ByteTokenizer chat_tokenizer() { return chatml_byte_tokenizer(); }

std::vector<int64_t> parse_ids(const std::string& line) {
  std::vector<int64_t> v;
  std::istringstream in(line);
  int64_t x;
  while (in >> x) v.push_back(x);
  return v;
}

TEST(CliHf, InfoGeneratePpl) {
  TinyShape s;
  s.vocab = 300;
  TempDir d("cli");
  write_tiny_checkpoint(d.path(), s, 21, torch::kBFloat16, 2);
  chat_tokenizer().save(d.path());
  write_text(d / "text.txt", "In the beginning God created the heaven and the earth. And the earth was without form.");
  auto r = run_lol_all({"hf info " + quote(d.path()) + " --check",
                        "hf generate " + quote(d.path()) + " --tokens 1,2,3 --max-new 6 --ids --no-stop",
                        "hf generate " + quote(d.path()) + " --prompt hi --chat --max-new 3 --ids",
                        "hf ppl " + quote(d.path()) + " --data " + quote(d / "text.txt") + " --context 16 --out " +
                            quote(d / "ppl.json"),
                        "hf info " + quote(d / "absent"),
                        "hf generate " + quote(d.path()) + " --prompt hi --dtype int4",
                        // bfloat16 compute on CPU (the mask fill must fit bfloat16), and float16,
                        // which this LibTorch cannot multiply on CPU: exit 2 naming --dtype, or it runs.
                        "hf ppl " + quote(d.path()) + " --data " + quote(d / "text.txt") +
                            " --context 16 --dtype bfloat16 --out " + quote(d / "ppl_bf16.json"),
                        "hf generate " + quote(d.path()) + " --tokens 1,2,3 --max-new 2 --ids --dtype float16",
                        // bfloat16 cached decoding (the KV-cache attention fills its mask the same way).
                        "hf generate " + quote(d.path()) + " --tokens 1,2,3 --max-new 4 --ids --no-stop --dtype bfloat16",
                        // The defaults fit a context (max_position_embeddings 128) smaller than them.
                        "hf generate " + quote(d.path()) + " --tokens 1,2,3 --ids --no-stop",
                        "hf generate " + quote(d.path()) + " --tokens 1,300 --ids",
                        "hf ppl " + quote(d.path()) + " --data " + quote(d / "text.txt") + " --out " +
                            quote(d / "ppl_default.json"),
                        // lol's own commands name the hf command for a Hugging Face folder.
                        "info " + quote(d.path())});
  EXPECT_EQ(r[0].code, 0) << r[0].out;
  // The chat template line shows what a user turn renders as (JSON escapes).
  for (const char* needle : {"Qwen2ForCausalLM", "2 shards", "bfloat16", "chat template Jinja",
                             R"(renders as "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")",
                             "check"})
    EXPECT_NE(r[0].out.find(needle), std::string::npos) << needle << "\n" << r[0].out;
  // The CLI's greedy ids equal the library's.
  EXPECT_EQ(r[1].code, 0) << r[1].out;
  auto m = load_hf_model(d.path());
  inference::GenerateOptions o;
  o.max_new_tokens = 6;
  const auto want = inference::generate_dense(m, {{1, 2, 3}}, o)[0].tokens;
  EXPECT_EQ(parse_ids(r[1].out.substr(0, r[1].out.find('\n'))), want) << r[1].out;
  EXPECT_EQ(r[2].code, 0) << r[2].out;
  EXPECT_EQ(r[3].code, 0) << r[3].out;
  const auto ppl = nlohmann::json::parse(read_text(d / "ppl.json"));
  EXPECT_EQ(ppl["targets"], 86 - 6);  // 86 byte tokens in windows of 16: 6 windows, first token of each unpredicted
  EXPECT_EQ(ppl["bytes"], 86 - 6) << "one byte per predicted byte token";
  EXPECT_NEAR(ppl["bits_per_byte"].get<double>(), ppl["loss"].get<double>() / std::log(2.0), 1e-9);
  EXPECT_GT(ppl["perplexity"].get<double>(), 1.0);
  EXPECT_EQ(r[4].code, 2) << r[4].out;
  EXPECT_NE(r[4].out.find("absent/config.json"), std::string::npos) << r[4].out;
  EXPECT_EQ(r[5].code, 2) << r[5].out;
  ASSERT_EQ(r[6].code, 0) << r[6].out;
  const auto ppl_bf16 = nlohmann::json::parse(read_text(d / "ppl_bf16.json"));
  EXPECT_EQ(ppl_bf16["targets"], ppl["targets"]);
  EXPECT_NEAR(ppl_bf16["loss"].get<double>(), ppl["loss"].get<double>(), 0.05);  // bf16 rounding of a float32 run
  ASSERT_EQ(r[8].code, 0) << r[8].out;
  EXPECT_EQ(parse_ids(r[8].out.substr(0, r[8].out.find('\n'))).size(), 4u) << r[8].out;
  // --max-new 128 (the default) is reduced to the room a 3-token prompt leaves.
  EXPECT_EQ(r[9].code, 0) << r[9].out;
  EXPECT_NE(r[9].out.find("note: --max-new 128 reduced to 125 (the model's max_position_embeddings is 128, the "
                          "prompt has 3 tokens)"),
            std::string::npos)
      << r[9].out;
  {
    std::istringstream lines(r[9].out);
    std::string note, ids;  // the note (stderr, before generating), then the ids (stdout)
    std::getline(lines, note);
    std::getline(lines, ids);
    EXPECT_EQ(parse_ids(ids).size(), 125u) << r[9].out;
  }
  EXPECT_EQ(r[10].code, 2) << r[10].out;
  EXPECT_NE(r[10].out.find("--tokens: id 300 at position 1: expected 0 <= id < vocab_size = 300"), std::string::npos)
      << r[10].out;
  // --context defaults to min(512, max_position_embeddings): the text's 86 tokens in one window.
  ASSERT_EQ(r[11].code, 0) << r[11].out;
  const auto ppl_default = nlohmann::json::parse(read_text(d / "ppl_default.json"));
  EXPECT_EQ(ppl_default["context"], 128);
  EXPECT_EQ(ppl_default["targets"], 86 - 1);
  EXPECT_EQ(r[12].code, 2) << r[12].out;
  EXPECT_NE(r[12].out.find("/config.json: a Hugging Face model folder (field 'architectures' = [\"Qwen2ForCausalLM\"]), "
                           "not a lol checkpoint: use `lol hf info|generate|ppl|bench "),
            std::string::npos)
      << r[12].out;
  if (r[7].code != 0) {
    EXPECT_EQ(r[7].code, 2) << r[7].out;
    EXPECT_NE(r[7].out.find("--dtype float16: this LibTorch build cannot compute in float16 on CPU"),
              std::string::npos)
        << r[7].out;
  }
  // --max-tokens below 2 (a negative value evaluated everything; 1 blamed the data file).
  const std::string ppl_cmd = "hf ppl " + quote(d.path()) + " --context 16 --data " + quote(d / "text.txt");
  auto e = run_lol_all({ppl_cmd + " --max-tokens -5", ppl_cmd + " --max-tokens 1"});
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(e[i].code, 2) << e[i].out;
    EXPECT_NE(e[i].out.find(": expected 0 (= all) or >= 2"), std::string::npos) << e[i].out;
  }
  EXPECT_NE(e[0].out.find("--max-tokens -5"), std::string::npos) << e[0].out;
}

// Finite weights whose products overflow float32 (a final norm weight of 3e38): generation
// and perplexity stop with exit status 3 naming what held NaN/Inf, instead of sampling
// from NaN logits or reporting a NaN perplexity.

// `hf ppl`'s bytes are the predicted tokens' bytes as they stand in the text. With a
// SentencePiece tokenizer (Prepend normalizer, Strip decoder) decoding the predicted
// tokens alone lost the leading space the decoder strips: one byte per window too few
// (adversarial pass, session 26).
TEST(CliHf, PplCountsThePredictedBytesOfSentencePieceText) {
  TinyShape s;
  s.vocab = 1287;
  TempDir d("cli_ppl_spm");
  write_tiny_checkpoint(d.path(), s, 23, torch::kFloat32);
  const std::string spm = std::string(LOL_SOURCE_DIR) + "/tests/tokenizers/data/spm_bpe_tokenizer.json";
  std::filesystem::copy_file(spm, d / "tokenizer.json");
  const std::string text = "In the beginning God created the heaven and the earth. And the earth was without form.";
  write_text(d / "text.txt", text);
  auto r = run_lol("hf ppl " + quote(d.path()) + " --data " + quote(d / "text.txt") + " --context 4 --out " +
                   quote(d / "ppl.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  // The bytes of each piece (U+2581 is a space, <0xNN> one byte), summed over every
  // window's predicted tokens (all but the first of each window of 4).
  const auto tok = tokenizers::load_tokenizer(spm);
  const auto ids = tok->encode(text);
  int64_t want = 0;
  for (size_t b = 0; b + 1 < ids.size(); b += 4)
    for (size_t i = b + 1; i < std::min(ids.size(), b + 4); ++i) {
      const std::string piece = *tok->id_to_token(ids[i]);
      if (piece.size() == 6 && piece.rfind("<0x", 0) == 0) {
        want += 1;
        continue;
      }
      for (size_t k = 0; k < piece.size(); ++k) {
        if (piece.compare(k, 3, "\u2581") == 0) k += 2;  // one space
        ++want;
      }
    }
  const auto ppl = nlohmann::json::parse(read_text(d / "ppl.json"));
  EXPECT_EQ(ppl["bytes"].get<int64_t>(), want);
}
TEST(CliHf, OverflowingWeightsExitWith3) {
  TinyShape s;
  s.vocab = 300;
  TempDir d("overflow");
  write_text(d / "config.json", tiny_config_json(s, "float32").dump(2));
  auto w = tiny_weights(s, 21);
  for (auto& [name, t] : w)
    if (name == "model.norm.weight") t.fill_(3e38);
  write_hf_weights(d.path(), w, torch::kFloat32);
  chat_tokenizer().save(d.path());
  write_text(d / "text.txt", "In the beginning God created the heaven and the earth.");
  auto r = run_lol_all({"hf generate " + quote(d.path()) + " --tokens 1,2,3 --max-new 2 --ids --no-stop",
                        "hf ppl " + quote(d.path()) + " --data " + quote(d / "text.txt") + " --context 16"});
  EXPECT_EQ(r[0].code, 3) << r[0].out;
  EXPECT_NE(r[0].out.find("error: generation: the logits of prompt 0 for new token 1: NaN or Inf values"),
            std::string::npos)
      << r[0].out;
  EXPECT_EQ(r[1].code, 3) << r[1].out;
  EXPECT_NE(r[1].out.find("error: evaluation: the log-likelihood of continuation 1: NaN or Inf values"), std::string::npos)
      << r[1].out;
}

// --generation-config samples as transformers' generate() does by default; flags override
// it, and a temperature of 0 makes it greedy with the file's repetition penalty, which
// equals the library's greedy generation with that penalty.
TEST(CliHf, GenerationConfigSampling) {
  TinyShape s;
  s.vocab = 300;
  TempDir d("gencfg");
  write_tiny_checkpoint(d.path(), s, 21, torch::kFloat32, 1);
  write_text(d / "generation_config.json",
             R"({"do_sample": true, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.5})");
  const std::string gen = "hf generate " + quote(d.path()) + " --tokens 1,2,3,2 --max-new 8 --ids --no-stop ";
  auto r = run_lol_all({gen + "--generation-config --seed 4", gen + "--generation-config --temperature 0",
                        gen + "--repetition-penalty -1"});
  ASSERT_EQ(r[0].code, 0) << r[0].out;
  EXPECT_NE(r[0].out.find("sampling: temperature 0.7, top_k 20, top_p 0.8, repetition_penalty 1.5"), std::string::npos)
      << r[0].out;
  ASSERT_EQ(r[1].code, 0) << r[1].out;
  EXPECT_NE(r[1].out.find("sampling: greedy, top_k 20, top_p 0.8, repetition_penalty 1.5"), std::string::npos)
      << r[1].out;
  inference::GenerateOptions o;
  o.max_new_tokens = 8;
  o.sampling.repetition_penalty = 1.5;
  const auto want = inference::generate_dense(load_hf_model(d.path()), {{1, 2, 3, 2}}, o)[0].tokens;
  const auto ids_line = r[1].out.substr(r[1].out.find('\n') + 1);
  EXPECT_EQ(parse_ids(ids_line.substr(0, ids_line.find('\n'))), want) << r[1].out;
  EXPECT_EQ(r[2].code, 2) << r[2].out;
  EXPECT_NE(r[2].out.find("repetition_penalty -1"), std::string::npos) << r[2].out;
  std::filesystem::remove(d / "generation_config.json");
  const auto none = run_lol(gen + "--generation-config");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("--generation-config: " + d.path() + "/generation_config.json does not exist"),
            std::string::npos)
      << none.out;
}

// The cached decoder (hf generate, hf bench) runs a head_dim other than hidden / heads
// (it refused it until session 41) and Qwen3's q/k norms; hf bench names the position
// limit max_position_embeddings. An eos_token_id beyond the
// vocabulary gets a note (it can never stop generation). generation_config.json fields
// lol does not apply get a note each.
TEST(CliHf, CachedDecodingLimitsAndUnappliedSettingsAreNamed) {
  TinyShape h;
  h.arch = "Qwen3ForCausalLM";
  h.head_dim = 16;
  TempDir q3("hdim");
  write_tiny_checkpoint(q3.path(), h, 3, torch::kFloat32, 1);
  auto r = run_lol_all({"hf generate " + quote(q3.path()) + " --tokens 1,2 --max-new 2 --ids --no-stop",
                        "hf bench " + quote(q3 / "config.json") + " --context 4 --new 2",
                        "hf info " + quote(q3.path()),
                        "hf bench " + quote(q3.path()) + " --context " + std::to_string(h.max_pos) + " --new 2"});
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(r[i].code, 0) << r[i].out;
  // The position limit is named as config.json spells it.
  EXPECT_EQ(r[3].code, 2) << r[3].out;
  EXPECT_NE(r[3].out.find(q3.path() + "/config.json: max_position_embeddings " + std::to_string(h.max_pos)),
            std::string::npos)
      << r[3].out;
  EXPECT_NE(r[2].out.find("Qwen3ForCausalLM (q/k norms)"), std::string::npos) << r[2].out;
  EXPECT_NE(r[2].out.find("head_dim 16"), std::string::npos) << r[2].out;
  TinyShape s;
  TempDir d("eos");
  write_tiny_checkpoint(d.path(), s, 3, torch::kFloat32, 1);
  auto cfg = tiny_config_json(s);
  cfg["eos_token_id"] = s.vocab;
  write_text(d / "config.json", cfg.dump());
  write_text(d / "generation_config.json", R"({"do_sample": true, "min_p": 0.5, "max_new_tokens": 2})");
  const auto g = run_lol("hf generate " + quote(d.path()) + " --tokens 1,2 --max-new 2 --ids --generation-config");
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find("eos_token_id " + std::to_string(s.vocab) + " is outside the vocabulary (vocab_size " +
                       std::to_string(s.vocab) + ")"),
            std::string::npos)
      << g.out;
  EXPECT_NE(g.out.find("generation_config.json: field 'min_p' = 0.5 is not applied"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("field 'max_new_tokens' = 2 is not applied"), std::string::npos) << g.out;
}

// A plain --prompt is encoded as transformers' tokenizer(prompt) does, with the
// post-processor's special tokens (a Llama-3-style BOS); a --chat prompt as
// apply_chat_template(tokenize=True) does, without them (the template has its own).
TEST(CliHf, PlainPromptGetsThePostProcessorsBos) {
  TinyShape s;
  s.vocab = 300;
  TempDir d("bos");
  write_tiny_checkpoint(d.path(), s, 21, torch::kFloat32, 1);
  auto tok = chat_tokenizer();
  const auto bos = nlohmann::json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [256], "tokens": ["<|endoftext|>"]}}})");
  tok.set_post_processor(bos, {256}, {});
  tok.save(d.path());
  ASSERT_EQ(tokenizers::load_tokenizer(d.path())->encode("hi", true), (std::vector<int32_t>{256, 'h', 'i'}));
  auto r = run_lol_all({"hf generate " + quote(d.path()) + " --prompt hi --max-new 1 --ids --no-stop",
                        "hf generate " + quote(d.path()) + " --prompt hi --chat --max-new 1 --ids --no-stop"});
  ASSERT_EQ(r[0].code, 0) << r[0].out;
  EXPECT_NE(r[0].out.find("prompt 3 tokens"), std::string::npos) << "BOS + 'h' + 'i'\n" << r[0].out;
  ASSERT_EQ(r[1].code, 0) << r[1].out;
  // <|im_start|> "system\nYou are a helpful assistant." <|im_end|> "\n" <|im_start|> "user\nhi" <|im_end|> "\n"
  // <|im_start|> "assistant\n": 35 + 1 + 7 + 1 + 10 bytes + 5 special tokens, no BOS.
  EXPECT_NE(r[1].out.find("prompt 59 tokens"), std::string::npos) << r[1].out;
}

// --messages: a whole conversation through the folder's chat template (a one-turn file
// is the same prompt as --chat --prompt); the flags it replaces are refused.
TEST(CliHf, GenerateFromAConversationFile) {
  TinyShape s;
  s.vocab = 300;
  TempDir d("messages");
  write_tiny_checkpoint(d.path(), s, 21, torch::kFloat32, 1);
  chat_tokenizer().save(d.path());
  write_text(d / "one.json", R"([{"role": "user", "content": "hi"}])");
  write_text(d / "three.json", R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                                   {"role": "user", "content": "ok"}])");
  write_text(d / "bad.json", R"({"role": "user"})");
  const std::string g = "hf generate " + quote(d.path()) + " --max-new 2 --ids --no-stop ";
  auto r = run_lol_all({g + "--chat --prompt hi", g + "--messages " + quote(d / "one.json"),
                        g + "--messages " + quote(d / "three.json"), g + "--messages " + quote(d / "bad.json"),
                        g + "--messages " + quote(d / "one.json") + " --system x"});
  ASSERT_EQ(r[0].code, 0) << r[0].out;
  ASSERT_EQ(r[1].code, 0) << r[1].out;
  EXPECT_EQ(r[0].out.substr(0, r[0].out.find('\n')), r[1].out.substr(0, r[1].out.find('\n')));  // the ids
  EXPECT_NE(r[1].out.find("prompt 59 tokens"), std::string::npos) << r[1].out;
  ASSERT_EQ(r[2].code, 0) << r[2].out;
  // Two more turns: <|im_start|> "assistant\nyo" <|im_end|> "\n" <|im_start|> "user\nok" <|im_end|> "\n":
  // 12 + 1 + 7 bytes + 4 special tokens = 25 more.
  EXPECT_NE(r[2].out.find("prompt 84 tokens"), std::string::npos) << r[2].out;
  EXPECT_EQ(r[3].code, 2) << r[3].out;
  EXPECT_NE(r[3].out.find("expected a JSON array of message objects"), std::string::npos) << r[3].out;
  EXPECT_EQ(r[4].code, 2) << r[4].out;
  EXPECT_NE(r[4].out.find("--messages replaces"), std::string::npos) << r[4].out;
}

// `lol layerroute train|eval|merge` never replace what they read or an earlier adapter
// unasked (docs/robustness.md, seventh pass); an adapter's evaluation refuses the
// protocol's training flags instead of ignoring them.
TEST(CliLayerRoute, OutputsKeepTheInputsAndAnEarlierAdapter) {
  TinyShape s;
  s.vocab = 300;
  s.layers = 4;
  TempDir d("cli_lr");
  const std::string base = d / "base", ad = d / "ad", data = d / "train.jsonl";
  std::filesystem::create_directories(base);
  write_tiny_checkpoint(base, s, 5, torch::kFloat32);
  chat_tokenizer().save(base);
  std::string jsonl;
  for (int i = 0; i < 6; ++i)
    jsonl += "{\"question\": \"what is " + std::to_string(i) + " plus one?\", \"answer\": \"" +
             std::to_string(i + 1) + "\"}\n";
  write_text(data, jsonl);
  const std::string train = "layerroute train --base " + quote(base) + " --data " + quote(data) +
                            " --steps 2 --batch 2 --accum 1 --max-len 128 --no-progress --out ";
  auto r0 = run_lol(train + quote(ad));
  ASSERT_EQ(r0.code, 0) << r0.out;
  EXPECT_TRUE(std::filesystem::exists(ad + "/train_log.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(ad + "/train_log.jsonl.partial"));
  const std::string adapter_json = read_text(ad + "/layerroute.json"), base_weights = read_text(base + "/model.safetensors");
  const std::string eval = "layerroute eval --adapter " + quote(ad) + " --data " + quote(data) +
                           " --samples 2 --timing-samples 0 ";
  std::filesystem::create_directories(d / "dir");
  auto r = run_lol_all({train + quote(ad), eval + "--json " + quote(ad + "/layerroute.json"),
                        eval + "--json " + quote(base + "/model.safetensors"), eval + "--json " + quote(data),
                        eval + "--steps 3", "layerroute merge --adapter " + quote(ad) + " --out " + quote(base) + " --overwrite",
                        eval + "--repeats 0", "layerroute train --base " + quote(base) + " --data " + quote(d / "dir") +
                            " --steps 1 --out " + quote(d / "ad2")});
  const std::vector<std::string> says = {"not empty (it holds an adapter); pass --overwrite",
                                         "a file of the model being read",
                                         "a file of the model being read",
                                         "is the --data file",
                                         "--steps applies to the protocol (--seeds N) only",
                                         "a folder being read",
                                         "--repeats: Value 0 not in range",
                                         "a directory (expected a JSONL file"};
  for (size_t i = 0; i < says.size(); ++i) {
    EXPECT_EQ(r[i].code, 2) << i << ": " << r[i].out;
    EXPECT_NE(r[i].out.find(says[i]), std::string::npos) << i << ": " << r[i].out;
  }
  EXPECT_EQ(read_text(ad + "/layerroute.json"), adapter_json);
  EXPECT_EQ(read_text(base + "/model.safetensors"), base_weights);
  EXPECT_EQ(read_text(data), jsonl);
  EXPECT_FALSE(std::filesystem::exists(d / "ad2"));
  // --overwrite replaces the adapter (another seed: other gate weights) and its log.
  auto r1 = run_lol(train + quote(ad) + " --overwrite --seed 3 --system ''");
  ASSERT_EQ(r1.code, 0) << r1.out;
  EXPECT_NE(read_text(ad + "/gates.safetensors"), "");
  EXPECT_NE(read_text(ad + "/layerroute.json"), adapter_json);
  EXPECT_FALSE(std::filesystem::exists(ad + "/train_log.jsonl.partial"));
  // The adapter's evaluation renders samples with the training's --system ("" here),
  // not the chat template's default, unless --system says otherwise.
  EXPECT_EQ(nlohmann::json::parse(read_text(ad + "/layerroute.json"))["extra"]["system"], "");
  auto ev = run_lol_all({eval + "--json " + quote(d / "e1.json"), eval + "--system '' --json " + quote(d / "e2.json"),
                         eval + "--system auto --json " + quote(d / "e3.json")});
  for (const auto& x : ev) ASSERT_EQ(x.code, 0) << x.out;
  const auto e1 = nlohmann::json::parse(read_text(d / "e1.json")), e2 = nlohmann::json::parse(read_text(d / "e2.json")),
             e3 = nlohmann::json::parse(read_text(d / "e3.json"));
  EXPECT_EQ(e1["ppl_base"], e2["ppl_base"]);
  EXPECT_NE(e1["ppl_base"], e3["ppl_base"]) << "the default system prompt changes the rendered samples";
  EXPECT_EQ(e1["loss_tokens"], "assistant");
  // --loss-tokens all is recorded and the adapter's evaluation counts alike: every token.
  auto r2 = run_lol(train + quote(ad) + " --overwrite --seed 3 --system '' --loss-tokens all");
  ASSERT_EQ(r2.code, 0) << r2.out;
  EXPECT_EQ(nlohmann::json::parse(read_text(ad + "/layerroute.json"))["extra"]["loss_tokens"], "all");
  auto ev2 = run_lol_all({eval + "--json " + quote(d / "e4.json"), eval + "--loss-tokens assistant --json " + quote(d / "e5.json")});
  for (const auto& x : ev2) ASSERT_EQ(x.code, 0) << x.out;
  const auto e4 = nlohmann::json::parse(read_text(d / "e4.json")), e5 = nlohmann::json::parse(read_text(d / "e5.json"));
  EXPECT_EQ(e4["loss_tokens"], "all");
  EXPECT_NE(ev2[0].out.find("loss tokens: all (the perplexities count every token)"), std::string::npos) << ev2[0].out;
  EXPECT_EQ(e5["loss_tokens"], "assistant");
  EXPECT_EQ(e5["ppl_base"], e1["ppl_base"]) << "the backbone does not depend on the adapter";
  EXPECT_NE(e4["ppl_base"], e5["ppl_base"]) << "all tokens: another perplexity";
  // layerroute generate --chat renders the prompt with the training's --system too
  // (session 29: the chat template's default, so its gates were not eval's).
  const std::string gen = "layerroute generate --adapter " + quote(ad) + " --chat --prompt hi --max-new 0 ";
  auto g = run_lol_all({gen, gen + "--system ''", gen + "--system 'You are a helpful assistant.'"});
  std::vector<std::string> prompt_lens;
  for (const auto& x : g) {
    ASSERT_EQ(x.code, 0) << x.out;
    const auto at = x.out.find("prompt ");
    ASSERT_NE(at, std::string::npos) << x.out;
    prompt_lens.push_back(x.out.substr(at, x.out.find(" tokens", at) - at));
  }
  EXPECT_EQ(prompt_lens[0], prompt_lens[1]);
  EXPECT_NE(prompt_lens[0], prompt_lens[2]);
  // A tokenizer with more ids (259) than the model's vocab_size (258) belongs to another
  // model: refused at load, naming both files, not later as "token id N outside".
  TinyShape small = s;
  small.vocab = 258;
  std::filesystem::create_directories(d / "small");
  write_tiny_checkpoint(d / "small", small, 6, torch::kFloat32);
  chat_tokenizer().save(d / "small");
  auto t = run_lol_all({"hf info " + quote(d / "small"), "hf generate " + quote(d / "small") + " --prompt hi",
                        "layerroute train --base " + quote(d / "small") + " --data " + quote(data) + " --steps 1 --out " +
                            quote(d / "ad3")});
  for (const auto& x : t) {
    EXPECT_EQ(x.code, 2) << x.out;
    EXPECT_NE(x.out.find("small/tokenizer.json: 259 ids, more than "), std::string::npos) << x.out;
    EXPECT_NE(x.out.find("vocab_size = 258"), std::string::npos) << x.out;
  }
}

// `lol layerroute train` stopped by SIGTERM keeps a checkpoint in OUT/train_state;
// `--resume` finishes it with the adapter, gates and log of an uninterrupted run byte
// for byte, and refuses other flags naming the field (docs/layerroute.md).
TEST(CliLayerRoute, StoppedTrainingResumesToTheSameAdapter) {
  TinyShape s;
  s.vocab = 300;
  s.layers = 4;
  TempDir d("cli_lr_resume");
  const std::string base = d / "base", data = d / "train.jsonl", ref = d / "ref", ad = d / "ad";
  std::filesystem::create_directories(base);
  write_tiny_checkpoint(base, s, 5, torch::kFloat32);
  chat_tokenizer().save(base);
  std::string jsonl;
  for (int i = 0; i < 5; ++i)
    jsonl += "{\"question\": \"what is " + std::to_string(i) + " times two?\", \"answer\": \"" + std::to_string(2 * i) +
             "\"}\n";
  write_text(data, jsonl);
  const std::string lol = "LOL_NUM_THREADS=1 " + quote(LOL_BINARY) + " ";
  auto train_lr = [&](const std::string& lr) {
    return "layerroute train --base " + quote(base) + " --data " + quote(data) +
           " --steps 120 --batch 2 --accum 1 --warmup 5 --max-len 128 --log-every 1 --no-progress --lr " + lr + " ";
  };
  const std::string train = train_lr("1e-2");
  auto r0 = run_lol(train + "--out " + quote(ref));
  ASSERT_EQ(r0.code, 0) << r0.out;
  EXPECT_FALSE(std::filesystem::exists(ref + "/train_state")) << "a finished training keeps no checkpoint";
  // SIGTERM once the first step is logged: the step ends, a checkpoint is saved, exit 0.
  const std::string partial = ad + "/train_log.jsonl.partial";
  auto k = reftest::run_cmd(lol + train + "--save-every 1000 --out " + quote(ad) + " 2>&1 & pid=$!; i=0; while [ ! -s " +
                            quote(partial) + " ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done; kill -TERM $pid; "
                            "wait $pid; echo status $?");
  EXPECT_NE(k.out.find("status 0"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("continue with the same command and --resume"), std::string::npos) << k.out;
  ASSERT_TRUE(std::filesystem::exists(ad + "/train_state/latest")) << k.out;
  EXPECT_FALSE(std::filesystem::exists(ad + "/layerroute.json"));
  auto r = run_lol_all({train + "--out " + quote(ad), train_lr("2e-2") + "--out " + quote(ad) + " --resume",
                        train + "--out " + quote(ad) + " --resume --overwrite", train + "--out " + quote(ref) + " --resume"});
  const std::vector<std::string> says = {"holds an unfinished training: continue it with --resume",
                                         "train.lr = 0.01 there, 0.02 here", "--overwrite excludes --resume",
                                         "holds no unfinished training (no train_state/latest); its training finished"};
  for (size_t i = 0; i < says.size(); ++i) {
    EXPECT_EQ(r[i].code, 2) << i << ": " << r[i].out;
    EXPECT_NE(r[i].out.find(says[i]), std::string::npos) << i << ": " << r[i].out;
  }
  // The checkpoint is an adapter: it evaluates as one.
  const std::string ck = ad + "/train_state/" + read_text(ad + "/train_state/latest").substr(0, 23);
  auto ev = run_lol("layerroute eval --adapter " + quote(ck) + " --data " + quote(data) + " --timing-samples 0");
  EXPECT_EQ(ev.code, 0) << ev.out;
  auto res = run_lol(train + "--out " + quote(ad) + " --resume");
  ASSERT_EQ(res.code, 0) << res.out;
  for (const char* f : {"adapter_model.safetensors", "gates.safetensors", "train_log.jsonl"})
    EXPECT_EQ(read_text(ad + "/" + f), read_text(ref + "/" + f)) << f;
  EXPECT_EQ(nlohmann::json::parse(read_text(ad + "/layerroute.json"))["extra"],
            nlohmann::json::parse(read_text(ref + "/layerroute.json"))["extra"]);
  EXPECT_FALSE(std::filesystem::exists(ad + "/train_state"));
  EXPECT_FALSE(std::filesystem::exists(partial));
}

TEST(CliHf, ExportTrainedDenseCheckpoint) {
  baselines::DenseConfig c;
  c.vocab_size = 260;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_hidden = 48;
  c.max_seq_len = 64;
  c.tie_word_embeddings = true;
  baselines::DenseModel m(c);
  m->reset_parameters(9);
  m->eval();
  TempDir d("exportcli");
  const std::string ckpt = d / "run/checkpoints/step-5";
  std::filesystem::create_directories(ckpt);
  baselines::DenseTrainable(m).save(ckpt, nlohmann::json::object());
  write_text(d / "run/latest", "step-5\n");
  chat_tokenizer().save(ckpt);
  write_text(d / "verify.txt", "Let there be light: and there was light.");
  auto r = run_lol_all({"export --hf " + quote(d / "run") + " --out " + quote(d / "hf") +
                            " --dtype bfloat16 --max-shard-size 20KB --verify " + quote(d / "verify.txt"),
                        "export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --max-shard-size 2XB",
                        "export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --arch gpt2",
                        "export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --max-shard-size 0.5",
                        "export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --max-shard-size 1e300"});
  ASSERT_EQ(r[0].code, 0) << r[0].out;
  EXPECT_NE(r[0].out.find("Qwen2ForCausalLM"), std::string::npos) << r[0].out;
  EXPECT_NE(r[0].out.find("verify: 40 tokens"), std::string::npos) << r[0].out;
  EXPECT_NE(r[0].out.find("max |exported - source rounded to BFloat16| = 0 (identical)"), std::string::npos)
      << r[0].out;
  // ... and what the rounding to bfloat16 costs against the float32 checkpoint (not 0).
  EXPECT_NE(r[0].out.find("verify: max |exported - float32 source| = "), std::string::npos) << r[0].out;
  EXPECT_EQ(r[0].out.find("float32 source| = 0 "), std::string::npos) << r[0].out;
  EXPECT_TRUE(std::filesystem::exists(d / "hf/model.safetensors.index.json"));
  EXPECT_TRUE(std::filesystem::exists(d / "hf/tokenizer.json"));
  auto back = load_hf_model(d / "hf");
  {
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.copy_(p.to(torch::kBFloat16).to(torch::kFloat32));
  }
  c10::InferenceMode g;
  auto t = torch::tensor(std::vector<int64_t>{1, 100, 258, 7}, torch::kInt64).unsqueeze(0);
  EXPECT_TRUE(torch::equal(back->forward(t), m->forward(t)));
  EXPECT_EQ(r[1].code, 2) << r[1].out;
  EXPECT_NE(r[1].out.find("--max-shard-size"), std::string::npos) << r[1].out;
  EXPECT_EQ(r[2].code, 2) << r[2].out;
  for (int i : {3, 4}) {  // under a byte, or beyond 64 bits: refused, not one unsharded file
    EXPECT_EQ(r[i].code, 2) << r[i].out;
    EXPECT_NE(r[i].out.find("expected a size of 1 byte to 1e18 bytes"), std::string::npos) << r[i].out;
  }
  EXPECT_FALSE(std::filesystem::exists(d / "bad"));

  // --verify's file is checked before anything is written; a tokenizer of another
  // vocabulary than the checkpoint's (byte ids fit this 260-id model) is refused.
  auto bad = run_lol_all({"export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --verify " +
                              quote(d / "missing.txt"),
                          "export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --tokenizer byte",
                          "export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --dtype float64",
                          "export --hf " + quote(d / "run") + " --out " + quote(d / "bad") + " --dtype int8"});
  EXPECT_EQ(bad[0].code, 2) << bad[0].out;
  EXPECT_NE(bad[0].out.find("--verify: " + (d / "missing.txt") + ": cannot open file"), std::string::npos)
      << bad[0].out;
  EXPECT_EQ(bad[1].code, 2) << bad[1].out;
  EXPECT_NE(bad[1].out.find("--tokenizer byte: not the vocabulary"), std::string::npos) << bad[1].out;
  for (int i = 2; i < 4; ++i) {  // only the dtypes a Hugging Face folder stores, named before any writing
    EXPECT_EQ(bad[i].code, 2) << bad[i].out;
    EXPECT_NE(bad[i].out.find("\": expected float32, bfloat16 or float16"), std::string::npos) << bad[i].out;
    EXPECT_EQ(bad[i].out.find("removed what was written"), std::string::npos) << bad[i].out;
  }
  EXPECT_FALSE(std::filesystem::exists(d / "bad"));

  // Outputs never replace what is being read (docs/robustness.md, seventh pass): the
  // checkpoint itself, another lol checkpoint, a ppl report over the model's files or
  // its --data file; --overwrite replaces only an earlier export, and all of its files:
  // no tokenizer left from it when the new export has none.
  const std::string ck_bytes = read_text(ckpt + "/model.safetensors");
  std::filesystem::create_directories(d / "other_ck");
  baselines::DenseTrainable(m).save(d / "other_ck", nlohmann::json::object());
  auto o = run_lol_all({"export --hf " + quote(d / "run") + " --out " + quote(ckpt) + " --overwrite --no-tokenizer",
                        "export --hf " + quote(d / "run") + " --out " + quote(d / "other_ck") + " --overwrite --no-tokenizer",
                        "export --hf " + quote(d / "run") + " --out " + quote(d / "verify.txt") + " --no-tokenizer",
                        "export --hf " + quote(d / "run") + " --out " + quote(d / "hf") + " --no-tokenizer",
                        "hf ppl " + quote(d / "hf") + " --data " + quote(d / "verify.txt") + " --out " + quote(d / "hf/config.json"),
                        "hf ppl " + quote(d / "hf") + " --data " + quote(d / "verify.txt") + " --out " + quote(d / "verify.txt")});
  // Only after the refusals above have read d/hf: this replaces it.
  const auto with_tokenizer = nlohmann::json::parse(read_text(d / "hf/config.json"));
  o.push_back(run_lol("export --hf " + quote(d / "run") + " --out " + quote(d / "hf") + " --overwrite --no-tokenizer"));
  EXPECT_EQ(o[0].code, 2) << o[0].out;
  EXPECT_NE(o[0].out.find("a folder being read"), std::string::npos) << o[0].out;
  EXPECT_EQ(o[1].code, 2) << o[1].out;
  EXPECT_NE(o[1].out.find("holds a lol model"), std::string::npos) << o[1].out;
  EXPECT_EQ(o[2].code, 2) << o[2].out;
  EXPECT_NE(o[2].out.find("is a file (expected a folder"), std::string::npos) << o[2].out;
  EXPECT_EQ(o[3].code, 2) << o[3].out;
  EXPECT_NE(o[3].out.find("pass --overwrite"), std::string::npos) << o[3].out;
  for (int i : {4, 5}) {
    EXPECT_EQ(o[i].code, 2) << o[i].out;
    EXPECT_NE(o[i].out.find("--out "), std::string::npos) << o[i].out;
  }
  EXPECT_NE(o[4].out.find("a file of the model being read"), std::string::npos) << o[4].out;
  EXPECT_NE(o[5].out.find("is the --data file"), std::string::npos) << o[5].out;
  EXPECT_EQ(read_text(ckpt + "/model.safetensors"), ck_bytes);
  EXPECT_EQ(read_text(d / "verify.txt"), "Let there be light: and there was light.");
  EXPECT_TRUE(std::filesystem::exists(d / "other_ck/config.json"));
  ASSERT_EQ(o[6].code, 0) << o[6].out;
  EXPECT_FALSE(std::filesystem::exists(d / "hf/tokenizer.json")) << "a tokenizer left from the earlier export";
  EXPECT_FALSE(std::filesystem::exists(d / "hf/model.safetensors.index.json")) << "shards left from the earlier export";
  EXPECT_TRUE(std::filesystem::exists(d / "hf/model.safetensors"));
  EXPECT_NO_THROW(load_hf_model(d / "hf"));
  // --no-tokenizer writes no tokenizer files, but keeps the tokenizer's bos/eos ids.
  const auto without = nlohmann::json::parse(read_text(d / "hf/config.json"));
  ASSERT_FALSE(with_tokenizer["eos_token_id"].is_null()) << with_tokenizer.dump();
  EXPECT_EQ(without["eos_token_id"], with_tokenizer["eos_token_id"]);
  EXPECT_EQ(without["bos_token_id"], with_tokenizer["bos_token_id"]);
}

}  // namespace
}  // namespace lol::hf::test
