// LayerRoute on any chat template (layerroute/chat_format.h): Qwen2.5's real template
// gives exactly the ids and loss mask of the paper's ChatML rendering; Llama 3's
// template trains the assistant's text and <|eot_id|>; templates that rewrite earlier
// turns, or raise, are refused naming the sample; `layerroute render|train|generate`
// end to end on a Llama folder.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "hf/hf_test_util.h"
#include "layerroute/chat_format.h"
#include "layerroute_test_util.h"
#include "model/file_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/chat_template.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/regex_splitter.h"
#include "tokenizers/tok_test_util.h"
#include "util/error.h"

namespace lol::layerroute::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Qwen2.5-Instruct's chat template (tool calls and responses included), as stored in its
// tokenizer_config.json after JSON decoding.
std::string qwen25_template() { return read_file(std::string(LOL_SOURCE_DIR) + "/tests/layerroute/data/qwen2.5_chat_template.jinja"); }

// Llama-3-Instruct's chat template.
const char* kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

// GPT-2's byte-level BPE with Qwen2's pre-tokenizer and `specials` added: merges across
// the role line's "\n" and the content's white space as a real tokenizer makes them.
std::unique_ptr<tokenizers::Tokenizer> bpe(const std::vector<std::string>& specials) {
  auto tok = tokenizers::load_vocab_merges(tokenizers::test::gpt2_dir() + "/vocab.json",
                                           tokenizers::test::gpt2_dir() + "/merges.txt", tokenizers::kQwen2Pattern);
  for (const auto& sp : specials) {
    tokenizers::AddedToken t;
    t.content = sp;
    tok->add_token(t);
  }
  return tok;
}

std::string masked_text(const tokenizers::Tokenizer& tok, const Example& e) {
  std::vector<int32_t> m;
  for (size_t i = 0; i < e.tokens.size(); ++i)
    if (e.loss_mask[i]) m.push_back(e.tokens[i]);
  return tok.decode(m);
}

const char* kSamples[] = {
    kToolCallSample,
    R"({"question": "q", "answer": "\nHi there"})",
    R"({"question": "Two  spaces ", "answer": "  leading and trailing  \n\n"})",
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}, {"role": "user", "content": "and 2+2?"}, {"role": "assistant", "content": " 4\n"}]})",
    R"({"conversations": [{"from": "human", "value": "weather?"}, {"from": "gpt", "value": "<tool_call>\n{\"name\": \"w\", \"arguments\": {}}\n</tool_call>"}, {"from": "tool", "value": "<tool_response>\nsun\n</tool_response>"}, {"from": "gpt", "value": "Sunny."}]})",
};

// The template path and the paper's ChatML path agree on Qwen2.5: same text, ids, loss
// mask and prompt length, with and without a system prompt given.
TEST(LayerRouteChatFormat, TemplateEqualsChatMLOnQwen25) {
  auto tok = bpe({"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  tok->set_eos_token("<|im_end|>");
  tok->set_chat_template(qwen25_template());
  const auto chatml = chat_format_for(*tok, "t", "auto");
  ASSERT_TRUE(chatml.chatml());
  EXPECT_EQ(chatml.system, tokenizers::kQwen25DefaultSystem);
  ChatFormat tmpl = chatml;
  tmpl.jinja = tmpl.jinja_tools = qwen25_template();
  for (const std::string system : {"", "SYS"}) {
    ChatFormat c = chatml, t = tmpl;
    c.system = system.empty() ? std::string(tokenizers::kQwen25DefaultSystem) : system;
    t.system = system;  // "": the template writes its default system prompt itself
    for (const char* line : kSamples) {
      const auto s = parse_sample(ordered_json::parse(line), "t:1");
      EXPECT_EQ(render_sample(s, t), render_sample(s, c)) << line;
      for (int64_t max_len : {0, 20}) {
        const auto a = tokenize_sample(s, *tok, max_len, c), b = tokenize_sample(s, *tok, max_len, t);
        EXPECT_EQ(b.tokens, a.tokens) << line;
        EXPECT_EQ(b.loss_mask, a.loss_mask) << line << "\n" << masked_text(*tok, a) << "\nvs\n" << masked_text(*tok, b);
        EXPECT_EQ(b.prompt_len, a.prompt_len) << line;
      }
      const auto all = tokenize_sample(s, *tok, 0, t, LossTokens::All);
      EXPECT_EQ(std::count(all.loss_mask.begin(), all.loss_mask.end(), 1), int64_t(all.tokens.size()));
    }
  }
  EXPECT_EQ(turn_end_token(*tok, tmpl), tok->token_to_id("<|im_end|>"));
  EXPECT_EQ(turn_end_token(*tok, chatml), tok->token_to_id("<|im_end|>"));
  EXPECT_EQ(generation_prompt("hi", std::string("S"), tmpl), generation_prompt("hi", std::string("S"), chatml));
  EXPECT_EQ(generation_prompt("hi", std::nullopt, tmpl), generation_prompt("hi", std::nullopt, chatml));
}

// Llama 3: each assistant turn's text and its <|eot_id|> are trained, nothing of the
// headers; the prompt ends with the assistant header; <|eot_id|> stops generation.
TEST(LayerRouteChatFormat, Llama3TrainsTheAnswersAndTheirEndOfTurn) {
  auto tok = bpe({"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  tok->set_bos_token("<|begin_of_text|>");
  tok->set_eos_token("<|eot_id|>");
  tok->set_chat_template(kLlama3Template);
  const auto f = chat_format_for(*tok, "dir/tokenizer_config.json: chat_template", "auto");
  ASSERT_FALSE(f.chatml());
  EXPECT_EQ(f.system, "");
  const auto s = parse_sample(ordered_json::parse(kSamples[3]), "t:4");
  const std::string text = render_sample(s, f);
  EXPECT_EQ(text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n1+1?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n2<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nand 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>");
  const auto e = tokenize_sample(s, *tok, 0, f);
  EXPECT_EQ(e.tokens, tok->encode(text));
  EXPECT_EQ(masked_text(*tok, e), "2<|eot_id|>4<|eot_id|>");
  EXPECT_EQ(tok->decode(std::vector<int32_t>(e.tokens.begin(), e.tokens.begin() + e.prompt_len)),
            text.substr(0, text.size() - std::string("4<|eot_id|>").size()));
  EXPECT_EQ(turn_end_token(*tok, f), tok->token_to_id("<|eot_id|>"));
  EXPECT_EQ(generation_prompt("hi", std::nullopt, f),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // --system: a system message first in samples without one.
  const auto qa = parse_sample(ordered_json::parse(kSamples[1]), "t:2");
  const auto with_system = chat_format_for(*tok, "t", "Be kind.");
  EXPECT_EQ(render_sample(qa, with_system).substr(0, 69),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe kind.");
  EXPECT_EQ(masked_text(*tok, tokenize_sample(qa, *tok, 0, with_system)), "Hi there<|eot_id|>");
}

// A template that writes earlier assistant turns otherwise once later turns follow
// (as Qwen3's drops their reasoning) cannot place them in the whole conversation:
// refused naming the sample and the message; its last turn alone trains.
TEST(LayerRouteChatFormat, TemplatesThatRewriteEarlierTurnsOrRaiseAreRefused) {
  auto tok = bpe({"<s>", "</s>", "[INST]", "[/INST]"});
  tok->set_eos_token("</s>");
  tok->set_chat_template(
      "{% for m in messages %}{% if m.role == 'assistant' %}{% if loop.last %}<think></think>{% endif %}{{ m.content "
      "}}</s>{% else %}[INST]{{ m.content }}[/INST]{% endif %}{% endfor %}");
  const auto f = chat_format_for(*tok, "dir/chat_template.jinja", "auto");
  const auto multi = parse_sample(ordered_json::parse(kSamples[3]), "data.jsonl:7");
  lol_test::expect_input_error([&] { tokenize_sample(multi, *tok, 0, f); },
                               {"data.jsonl:7", "dir/chat_template.jinja", "assistant message 2",
                                "differently once later messages follow", "one sample per assistant turn"});
  const auto one = parse_sample(ordered_json::parse(kSamples[1]), "data.jsonl:8");
  EXPECT_EQ(masked_text(*tok, tokenize_sample(one, *tok, 0, f)), "<think></think>\nHi there</s>");
  // raise_exception in the template: its message, with the sample's file:line.
  tok->set_chat_template(
      "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
      "roles must alternate user/assistant/user/assistant/...') }}{% endif %}[INST]{{ m.content }}{% endfor %}");
  const auto g = chat_format_for(*tok, "dir/chat_template.jinja", "auto");
  lol_test::expect_input_error([&] { tokenize_sample(multi, *tok, 0, g); },
                               {"data.jsonl:7", "roles must alternate"});
  // Neither a template nor ChatML tokens: nothing tells the assistant's tokens apart.
  tok->set_chat_template("");
  lol_test::expect_input_error([&] { chat_format_for(*tok, "dir/tokenizer_config.json: chat_template", "auto"); },
                               {"dir/tokenizer_config.json: chat_template", "neither a chat template",
                                "<|im_start|>/<|im_end|>"});
}

// A base-model format without an end-of-turn token keeps the answer's own trailing
// white space (the template's separator after it is not trained); a generation prompt
// that the whole conversation does not repeat (DeepSeek-R1's "<think>\n") starts the
// answer where the two part.
TEST(LayerRouteChatFormat, AnswerWhiteSpaceAndUnrepeatedGenerationPrompts) {
  auto tok = bpe({"<s>", "</s>", "<|Assistant|>", "<|User|>"});
  tok->set_bos_token("<s>");
  tok->set_eos_token("</s>");
  tok->set_chat_template(
      "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}### Instruction:\n{{ m.content }}\n\n### "
      "Response:\n{% else %}{{ m.content }}\n\n{% endif %}{% endfor %}");
  const auto f = chat_format_for(*tok, "t", "auto");
  const auto s = parse_sample(ordered_json::parse(R"({"question": "Greet me.", "answer": "  Hello there!  \n"})"), "t:1");
  const auto e = tokenize_sample(s, *tok, 0, f);
  // "\n\n" holds the answer's "\n" and the template's first: assistant.
  EXPECT_EQ(masked_text(*tok, e), "  Hello there!  \n\n");
  const auto space = parse_sample(ordered_json::parse(R"({"question": "Anything?", "answer": " "})"), "t:2");
  EXPECT_EQ(masked_text(*tok, tokenize_sample(space, *tok, 0, f)), " ");
  tok->set_chat_template(
      "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}<|User|>{{ m.content }}{% else "
      "%}<|Assistant|>{{ m.content }}</s>{% endif %}{% endfor %}{% if add_generation_prompt %}<|Assistant|><think>\n{% "
      "endif %}");
  const auto r1 = chat_format_for(*tok, "t", "auto");
  const auto hi = parse_sample(ordered_json::parse(R"({"question": "Hi?", "answer": "Hello."})"), "t:3");
  const auto h = tokenize_sample(hi, *tok, 0, r1);
  EXPECT_EQ(masked_text(*tok, h), "Hello.</s>");
  EXPECT_EQ(tok->decode(std::vector<int32_t>(h.tokens.begin(), h.tokens.begin() + h.prompt_len)), "<s><|User|>Hi?<|Assistant|>");
  // An answer that begins like the unrepeated generation prompt is still trained whole.
  const auto html = parse_sample(ordered_json::parse(R"({"question": "Table?", "answer": "<th>Name</th>"})"), "t:4");
  EXPECT_EQ(masked_text(*tok, tokenize_sample(html, *tok, 0, r1)), "<th>Name</th></s>");
}

// End to end on a tiny Llama folder with Llama 3's template: render --ids shows the
// mask, train records the format, generate --chat stops at <|eot_id|>.
TEST(LayerRouteChatFormat, CommandsRunOnALlamaFolder) {
  lol_test::TempDir d("lr_llama");
  const std::string base = d / "base", data = d / "train.jsonl", ad = d / "ad";
  hf::test::TinyShape s;
  s.arch = "LlamaForCausalLM";
  s.vocab = 300;
  s.layers = 4;
  fs::create_directories(base);
  hf::test::write_tiny_checkpoint(base, s, 5, torch::kFloat32);
  tokenizers::ByteTokenizer tok({"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  tok.set_bos_token("<|begin_of_text|>");
  tok.set_eos_token("<|eot_id|>");
  tok.set_chat_template(kLlama3Template);
  tok.save(base);
  std::string jsonl;
  for (int i = 0; i < 6; ++i)
    jsonl += "{\"question\": \"what is " + std::to_string(i) + " plus one?\", \"answer\": \"" + std::to_string(i + 1) + "\"}\n";
  lol_test::write_text(data, jsonl);
  using reftest::quote;
  auto r = reftest::run_lol("layerroute render --data " + quote(data) + " --base " + quote(base) + " --ids --first 2 --count 1");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  const auto ids = j["tokens"].get<std::vector<int32_t>>();
  const auto mask = j["loss_mask"].get<std::vector<uint8_t>>();
  std::vector<int32_t> trained;
  for (size_t i = 0; i < ids.size(); ++i)
    if (mask[i]) trained.push_back(ids[i]);
  EXPECT_EQ(tok.decode(trained), "3<|eot_id|>");
  EXPECT_EQ(tok.decode(ids).substr(0, 17), "<|begin_of_text|>");
  r = reftest::run_lol("layerroute train --base " + quote(base) + " --data " + quote(data) +
                       " --steps 2 --batch 2 --accum 1 --max-len 128 --no-progress --out " + quote(ad));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(lol_test::read_text(ad + "/layerroute.json"))["extra"]["chat_format"], "chat template");
  r = reftest::run_lol("layerroute generate --adapter " + quote(ad) + " --chat --prompt hi --max-new 64 --ids");
  ASSERT_EQ(r.code, 0) << r.out;
  const int32_t eot = *tok.token_to_id("<|eot_id|>");
  std::istringstream first_line(r.out.substr(0, r.out.find('\n')));
  std::vector<int32_t> out;
  for (int32_t t; first_line >> t;) out.push_back(t);
  ASSERT_FALSE(out.empty()) << r.out;
  // Stops at the first <|eot_id|> (a stop token through the template's end of turn), or
  // runs out of room / --max-new without one.
  for (size_t i = 0; i + 1 < out.size(); ++i) EXPECT_NE(out[i], eot) << r.out;
  EXPECT_NE(r.out.find("prompt 25 tokens"), std::string::npos) << r.out;  // "<|begin_of_text|>...hi<|eot_id|>...\n\n"
}

}  // namespace
}  // namespace lol::layerroute::test
