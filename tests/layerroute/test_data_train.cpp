// Data (ChatML rendering, assistant-only loss mask, tool calls, Q/A pairs), the
// training loop (only gates + LoRA move; lambda drives the gates) and KV-cached gated
// generation (equal to the full forward; closed layers keep no cache).
#include <algorithm>
#include <csignal>
#include <cmath>
#include <fstream>
#include <set>

#include "core/module_io.h"
#include "layerroute/decode.h"
#include "layerroute/eval.h"
#include "layerroute/train.h"
#include "training/stop_signal.h"
#include "layerroute_test_util.h"
#include "model/file_test_util.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/hf_json.h"
#include "tokenizers/regex_splitter.h"
#include "tokenizers/tok_test_util.h"
#include "util/error.h"

namespace lol::layerroute::test {
namespace {

tokenizers::ByteTokenizer chat_tokenizer() { return tokenizers::ByteTokenizer({"<|endoftext|>", "<|im_start|>", "<|im_end|>"}); }

// The Qwen2.5-Instruct chat template applied by hand to this sample (tools block,
// tool calls with object and string arguments, consecutive tool results in one user
// turn): what transformers' apply_chat_template(messages, tools=tools) returns.
TEST(LayerRouteData, RendersAsTheQwen25ChatTemplate) {
  auto tok = chat_tokenizer();
  auto j = nlohmann::ordered_json::parse(kToolCallSample);
  j["source"] = "glaive";
  auto s = parse_sample(j, "t:1");
  const std::string expected =
      "<|im_start|>system\nSYS\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}\n</tools>\n\n"
      "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
      "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nhi<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1, \"a\": [true, null, 2.5], "
      "\"s\": \"\xc3\xa9\\n\"}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\n43\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"g\", \"arguments\": \"{\\\"y\\\":2}\"}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"h\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\ndone<|im_end|>\n";
  EXPECT_EQ(render_chatml(s, "SYS"), expected);
  ASSERT_EQ(s.turns.size(), 6u);
  EXPECT_EQ(s.turns[2].role, "user");

  auto e = tokenize_sample(s, tok, 0, "SYS");
  EXPECT_EQ(e.source, "glaive");
  EXPECT_EQ(tok.decode(e.tokens), expected);
  EXPECT_EQ(e.tokens, tok.encode(expected));
  std::vector<int32_t> m;
  for (size_t i = 0; i < e.tokens.size(); ++i)
    if (e.loss_mask[i]) m.push_back(e.tokens[i]);
  EXPECT_EQ(tok.decode(m), s.turns[1].content + "<|im_end|>" + s.turns[3].content + "<|im_end|>" + "done<|im_end|>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>(e.tokens.begin(), e.tokens.begin() + e.prompt_len)),
            expected.substr(0, expected.rfind("done<|im_end|>")));
  // Batch: targets count exactly on masked tokens (position t predicts t+1).
  auto b = make_batch({&e});
  EXPECT_EQ(b.n_targets, int64_t(m.size()));
  // --loss-tokens all: the same tokens, every one after the first a target.
  const auto all = tokenize_sample(s, tok, 0, "SYS", LossTokens::All);
  EXPECT_EQ(all.tokens, e.tokens);
  EXPECT_EQ(all.prompt_len, e.prompt_len);
  EXPECT_EQ(make_batch({&all}).n_targets, int64_t(e.tokens.size()) - 1);
  // A sample cut before its answer keeps an empty mask either way (callers drop it).
  const auto cut = tokenize_sample(s, tok, 3, "SYS", LossTokens::All);
  EXPECT_EQ(std::count(cut.loss_mask.begin(), cut.loss_mask.end(), 1), 0);
  EXPECT_EQ(parse_loss_tokens("all"), LossTokens::All);
  lol_test::expect_input_error([] { parse_loss_tokens("prompt"); }, {"--loss-tokens 'prompt'", "assistant or all"});

  // Without tools and with no default system prompt: no system turn at all.
  auto plain = parse_sample(nlohmann::ordered_json::parse(R"({"question": "q", "answer": "a"})"), "t:2");
  EXPECT_EQ(render_chatml(plain, ""), "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na<|im_end|>\n");
}

TEST(LayerRouteData, ShareGptToolTurnsKeepTheirTags) {
  auto s = parse_sample(nlohmann::ordered_json::parse(R"({"conversations": [
      {"from": "system", "value": "S"}, {"from": "human", "value": "q"},
      {"from": "gpt", "value": "<tool_call>\n{'arguments': {}, 'name': 'f'}\n</tool_call>"},
      {"from": "tool", "value": "<tool_response>\n{\"r\": 1}\n</tool_response>"},
      {"from": "tool", "value": "plain"},
      {"from": "gpt", "value": "a"}]})"),
                        "t:3");
  EXPECT_EQ(render_chatml(s, "unused"),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{'arguments': {}, 'name': 'f'}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n{\"r\": 1}\n</tool_response>\n<tool_response>\nplain\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\na<|im_end|>\n");
  // An assistant message of the messages format may not leave out "arguments", and only
  // assistants carry tool calls (an empty list is no tool call, as in the template).
  EXPECT_THROW(parse_sample(nlohmann::ordered_json::parse(
                                R"({"messages": [{"role": "assistant", "tool_calls": [{"name": "f"}]}]})"),
                            "t:4"),
               InputError);
  EXPECT_THROW(parse_sample(nlohmann::ordered_json::parse(
                                R"({"messages": [{"role": "user", "content": "x", "tool_calls": [{"name": "f", "arguments": {}}]},
                                                 {"role": "assistant", "content": "y"}]})"),
                            "t:5"),
               InputError);
  EXPECT_NO_THROW(parse_sample(nlohmann::ordered_json::parse(
                                   R"({"messages": [{"role": "user", "content": "x", "tool_calls": []},
                                                    {"role": "assistant", "content": "y", "tool_calls": []}]})"),
                               "t:6"));
}

// `lol layerroute render` prints what training sees: the text, or ids + loss mask.
TEST(LayerRouteData, RenderCommandPrintsTextAndIds) {
  test::TempDir d("render");
  const std::string data = d.path() + "/s.jsonl";
  lol_test::write_text(data,
                       R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}, {"role": "tool", "content": "2"}, {"role": "assistant", "content": "ok"}]})"
                       "\n\n"
                       R"({"question": "q", "answer": "a", "source": "gsm"})"
                       "\n");
  const auto samples = read_samples(data);
  ASSERT_EQ(samples.size(), 2u);
  const std::string lol = LOL_BINARY;
  auto r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --system SYS 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, render_chatml(samples[0], "SYS"));
  auto tok = chat_tokenizer();
  tok.save(d.path() + "/tok");
  r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --tokenizer " +
                       reftest::quote(d.path() + "/tok") + " --system SYS --ids --first 1 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto e = tokenize_sample(samples[1], tok, 512, "SYS");
  EXPECT_EQ(j["sample"], 1);
  EXPECT_EQ(j["source"], "gsm");
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), e.tokens);
  EXPECT_EQ(j["loss_mask"].get<std::vector<uint8_t>>(), e.loss_mask);
  EXPECT_EQ(j["prompt_len"].get<int64_t>(), e.prompt_len);
  r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --tokenizer " +
                       reftest::quote(d.path() + "/tok") + " --system SYS --ids --first 1 --loss-tokens all 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["loss_mask"].get<std::vector<uint8_t>>(),
            std::vector<uint8_t>(e.tokens.size(), 1));
  r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --tokenizer " +
                       reftest::quote(d.path() + "/tok") + " --ids --loss-tokens prompt");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--loss-tokens 'prompt': expected assistant or all"), std::string::npos) << r.out;
  r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --ids");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--tokenizer"), std::string::npos) << r.out;
  r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --first 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("has 2 samples"), std::string::npos) << r.out;
  // A tokenizer without ChatML tokens and without a chat template cannot tell the
  // assistant's tokens apart: refused. Another chat template is run as it is
  // (layerroute/chat_format.h; tests/layerroute/test_chat_format.cpp).
  tokenizers::ByteTokenizer plain({"<|endoftext|>"});
  plain.save(d.path() + "/plain");
  r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --tokenizer " +
                       reftest::quote(d.path() + "/plain") + " --ids");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("neither a chat template"), std::string::npos) << r.out;
  auto inst = chat_tokenizer();
  inst.set_chat_template("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}");
  inst.save(d.path() + "/inst");
  r = reftest::run_cmd(lol + " layerroute render --data " + reftest::quote(data) + " --tokenizer " +
                       reftest::quote(d.path() + "/inst") + " --first 1 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "[INST] q [/INST][INST] a [/INST]");
}

// Malformed data is refused with the file, line, message and field, never rendered
// silently (transformers' template fails on these too) and never crashes.
TEST(LayerRouteData, MalformedSamplesAreRefusedNamingTheField) {
  auto parse = [](const std::string& line) { return parse_sample(nlohmann::ordered_json::parse(line), "f.jsonl:4"); };
  lol_test::expect_input_error([&] { parse(R"({"messages": [{"role": "user"}, {"role": "assistant", "content": "a"}]})"); },
                               {"f.jsonl:4", "message 0", "'content'", "missing or null"});
  lol_test::expect_input_error(
      [&] { parse(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null}]})"); },
      {"message 1", "'content'"});
  lol_test::expect_input_error(
      [&] { parse(R"({"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": null}, {"role": "assistant", "content": "a"}]})"); },
      {"message 1", "'content'"});
  lol_test::expect_input_error([&] { parse(R"({"messages": [{"from": "human", "value": "q"}]})"); },
                               {"message 0", "no 'role' field", "{\"role\", \"content\"}"});
  lol_test::expect_input_error([&] { parse(R"({"question": null, "answer": "a"})"); }, {"'question'"});
  lol_test::expect_input_error(
      [&] { parse(R"({"tools": ["not a dict"], "question": "q", "answer": "a"})"); }, {"tools[0]", "expected an object"});
  // An assistant with tool calls may leave its content out; "tool_calls": {} is no call.
  EXPECT_EQ(render_chatml(parse(R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"name": "f", "arguments": {}}]}]})"), ""),
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><|im_end|>\n");
  EXPECT_EQ(render_chatml(parse(R"({"messages": [{"role": "assistant", "content": "a", "tool_calls": {}}]})"), ""),
            "<|im_start|>assistant\na<|im_end|>\n");
  // Nesting beyond Python's recursion limit: an error, not a stack overflow.
  std::string deep = std::string(5000, '[') + std::string(5000, ']');
  lol_test::expect_input_error(
      [&] {
        parse(R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": )" + deep +
              "}]}]}");
      },
      {"f.jsonl:4", "'arguments'", "nested deeper than 1000"});
  lol_test::expect_input_error([&] { python_json_dumps(nlohmann::ordered_json::parse(deep)); }, {"nested deeper"});
  // A line that is not JSON says why; an over-long sample is named by file:line.
  test::TempDir d("malformed");
  lol_test::write_text(d.path() + "/bad.jsonl", "{\"question\": \"q\", \"answer\": \"a\"}\n{\"question\": \"q\"\n");
  lol_test::expect_input_error([&] { read_samples(d.path() + "/bad.jsonl"); }, {"bad.jsonl:2", "not valid JSON", "parse error"});
  lol_test::write_text(d.path() + "/long.jsonl", "\n{\"question\": \"q\", \"answer\": \"a\"}\n{\"question\": \"" +
                                                      std::string(300, 'x') + "\", \"answer\": \"a\"}\n");
  auto tok = chat_tokenizer();
  std::vector<Example> ex;
  for (const auto& smp : read_samples(d.path() + "/long.jsonl")) ex.push_back(tokenize_sample(smp, tok, 0, ""));
  lol_test::expect_input_error([&] { require_examples_fit(ex, 128, "train"); }, {"long.jsonl:3 has", "--max-len"});
}

TEST(LayerRouteData, PythonJsonDumps) {
  auto j = nlohmann::ordered_json::parse(
      R"({"z": [1, -2, 2.5, "x\n\"\u00e9\u001f\u007f"], "b": {}, "c": [], "d": null, "e": true,
          "f": 1e15, "f2": 1000000000000000.2, "g": 1e-05, "h": 1e16, "i": 0.0001, "k": 123456789012345.6, "l": -1.5e15,
          "m": 0.1, "n": 1.5e-7, "o": -0.0, "p": 1e300, "q": 123.0})");
  EXPECT_EQ(python_json_dumps(j),
            "{\"z\": [1, -2, 2.5, \"x\\n\\\"\xc3\xa9\\u001f\x7f\"], \"b\": {}, \"c\": [], \"d\": null, \"e\": true, "
            "\"f\": 1000000000000000.0, \"f2\": 1000000000000000.2, \"g\": 1e-05, \"h\": 1e+16, \"i\": 0.0001, \"k\": 123456789012345.6, "
            "\"l\": -1500000000000000.0, \"m\": 0.1, \"n\": 1.5e-07, \"o\": -0.0, \"p\": 1e+300, \"q\": 123.0}");
  // Values built in code (JSON input has none): Python's allow_nan spellings.
  EXPECT_EQ(python_json_dumps(nlohmann::ordered_json::array({std::nan(""), HUGE_VAL, -HUGE_VAL})),
            "[NaN, Infinity, -Infinity]");
}

// With Qwen2's pre-tokenizer "\n\n" is one piece: the role line's "\n" and the
// content's leading "\n" become one token, as when Hugging Face encodes the whole
// rendered string; that token is the first content token.
TEST(LayerRouteData, TokensEqualEncodingTheWholeString) {
  auto tok = tokenizers::load_vocab_merges(tokenizers::test::gpt2_dir() + "/vocab.json",
                                           tokenizers::test::gpt2_dir() + "/merges.txt", tokenizers::kQwen2Pattern);
  for (const char* sp : {"<|im_start|>", "<|im_end|>"}) {
    tokenizers::AddedToken t;
    t.content = sp;
    tok->add_token(t);
  }
  auto s = parse_sample(nlohmann::ordered_json::parse(R"({"question": "q", "answer": "\nHi there"})"), "t:1");
  const auto text = render_chatml(s, "S");
  auto e = tokenize_sample(s, *tok, 0, "S");
  EXPECT_EQ(e.tokens, tok->encode(text));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{e.tokens[size_t(e.prompt_len)]}), "\n\n");
  const auto prompt = tok->decode(std::vector<int32_t>(e.tokens.begin(), e.tokens.begin() + e.prompt_len));
  EXPECT_EQ(prompt.substr(prompt.size() - 21), "<|im_start|>assistant");
  std::vector<int32_t> m;
  for (size_t i = 0; i < e.tokens.size(); ++i)
    if (e.loss_mask[i]) m.push_back(e.tokens[i]);
  EXPECT_EQ(tok->decode(m), "\n\nHi there<|im_end|>");
}

TEST(LayerRouteData, QuestionAnswerAndErrorsNameTheLine) {
  auto s = parse_sample(nlohmann::ordered_json::parse(R"({"question": "1+1?", "answer": "2"})"), "f:3");
  ASSERT_EQ(s.turns.size(), 2u);
  EXPECT_EQ(s.turns[1].role, "assistant");
  auto sg = parse_sample(nlohmann::ordered_json::parse(R"({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]})"), "f:4");
  EXPECT_EQ(sg.turns[0].role, "user");
  try {
    parse_sample(nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"), "f.jsonl:7");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("f.jsonl:7"), std::string::npos);
  }
  EXPECT_THROW(parse_sample(nlohmann::ordered_json::parse(R"({"messages": [{"role": "robot", "content": "x"}]})"), "f:1"), InputError);
  EXPECT_THROW(parse_sample(nlohmann::ordered_json::parse(R"({"text": "x"})"), "f:1"), InputError);
}

TEST(LayerRouteTrain, OnlyGatesAndLoraMoveAndLambdaClosesGates) {
  auto data = test::copy_task(16, 1, 6, 6, 4);
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 5);
  auto before = module_state(*m->base);
  LayerRouteTrainable tr(m, "");
  TrainOptions o;
  o.steps = 12;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.lr = 3e-2;
  o.lambda = 5.0;
  o.progress = false;
  std::vector<TrainLog> logs;
  o.log_every = 1;
  auto last = train_layerroute(tr, data, o, [&](const TrainLog& l) { logs.push_back(l); });
  ASSERT_EQ(logs.size(), 12u);
  EXPECT_EQ(last.step, 12);
  auto after = module_state(*m->base);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i].second, after[i].second)) << before[i].first;
  bool lora_moved = false;
  for (auto& [n, t] : m->lora->peft_tensors())
    if (n.find("lora_B") != std::string::npos) lora_moved = lora_moved || t.abs().max().item<float>() > 0;
  EXPECT_TRUE(lora_moved);
  EXPECT_LT(logs.back().gate_mean, logs.front().gate_mean) << "the gate penalty pushes sigma down";
  EXPECT_EQ(last.layer_sigma.size(), 6u);
  EXPECT_FALSE(m->is_training());
}

// A training stopped by SIGTERM saves a checkpoint; continuing from it gives the
// adapters, gates, moments and logs of the uninterrupted run bit for bit (the batch
// order follows from the step, the rest is in the checkpoint).
TEST(LayerRouteTrain, ResumedTrainingEqualsTheUninterruptedOne) {
  auto data = test::copy_task(10, 4, 6, 6, 4);  // 10 samples, 3 rows a step: epochs end mid-step
  TrainOptions o;
  o.steps = 7;
  o.batch_size = 3;
  o.grad_accum = 1;
  o.lr = 3e-2;
  o.warmup_steps = 2;
  o.progress = false;
  o.log_every = 1;
  auto adapters = [](GatedModel& m) {
    std::vector<torch::Tensor> v{m->gates->weight.clone(), m->gates->bias.clone()};
    for (auto& [n, t] : m->lora->peft_tensors()) v.push_back(t.clone());
    return v;
  };
  GatedModel ref(tiny_base(), LoraConfig{}, GateConfig{}, 5);
  LayerRouteTrainable ref_tr(ref, "");
  std::vector<std::string> ref_log;
  auto ref_last = train_layerroute(ref_tr, data, o, [&](const TrainLog& l) { ref_log.push_back(to_json(l).dump()); });

  TempDir d("lr_resume");
  const std::string state_dir = d / "train_state";
  for (int64_t stop_at : {3, 5}) {
    SCOPED_TRACE(stop_at);
    std::vector<std::string> log;
    GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 5);
    LayerRouteTrainable tr(m, "");
    TrainCheckpoints ck;
    ck.save_every = 2;
    std::vector<int64_t> saved;
    ck.save = [&](const training::Optimizer& opt, const training::TrainerState& st) {
      saved.push_back(st.step);
      training::save_checkpoint(state_dir, tr, opt, st, nlohmann::json::object(), nlohmann::json::object(), 1);
    };
    auto first = train_layerroute(tr, data, o, [&](const TrainLog& l) {
      log.push_back(to_json(l).dump());
      if (l.step == stop_at) std::raise(SIGTERM);  // caught: stop after this step
    }, &ck);
    EXPECT_TRUE(first.interrupted);
    EXPECT_EQ(first.step, stop_at);
    EXPECT_EQ(saved.back(), stop_at);
    EXPECT_EQ(saved.front(), 2) << "--save-every 2";
    training::clear_stop_request();
    // A fresh process: another model instance (other init seed: the checkpoint overrides it).
    GatedModel m2(tiny_base(), LoraConfig{}, GateConfig{}, 99);
    LayerRouteTrainable tr2(m2, "");
    TrainCheckpoints ck2;
    ck2.resume = [&](training::Optimizer& opt) {
      return training::load_checkpoint(training::resolve_checkpoint(state_dir), tr2, opt);
    };
    auto last = train_layerroute(tr2, data, o, [&](const TrainLog& l) { log.push_back(to_json(l).dump()); }, &ck2);
    EXPECT_FALSE(last.interrupted);
    EXPECT_EQ(log, ref_log);
    EXPECT_EQ(to_json(last).dump(), to_json(ref_last).dump());
    auto a = adapters(ref), b = adapters(m2);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
  }
  // A checkpoint from other batch options is refused naming the position.
  GatedModel m3(tiny_base(), LoraConfig{}, GateConfig{}, 5);
  LayerRouteTrainable tr3(m3, "");
  TrainCheckpoints ck3;
  ck3.resume = [&](training::Optimizer& opt) {
    return training::load_checkpoint(training::resolve_checkpoint(state_dir), tr3, opt);
  };
  auto other = o;
  other.batch_size = 2;
  try {
    train_layerroute(tr3, data, other, {}, &ck3);
    ADD_FAILURE() << "resumed with another batch size";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data_position"), std::string::npos) << e.what();
  }
}

// A non-finite loss stops training (exit 3 in the CLI) before the adapters are stepped
// or saved: a NaN gate score would close its gate silently and be written to disk.
TEST(LayerRouteTrain, NonFiniteLossStopsBeforeAnythingIsWritten) {
  auto data = test::copy_task(8, 2, 6, 6, 4);
  auto base = tiny_base();
  {
    torch::NoGradGuard ng;
    for (auto& p : base->named_parameters())
      if (p.key().find("layers.1.mlp.down_proj") != std::string::npos) p.value().fill_(std::nanf(""));
  }
  GatedModel m(base, LoraConfig{}, GateConfig{}, 5);
  LayerRouteTrainable tr(m, "");
  TrainOptions o;
  o.steps = 3;
  o.batch_size = 2;
  o.progress = false;
  int logged = 0;
  try {
    train_layerroute(tr, data, o, [&](const TrainLog&) { ++logged; });
    ADD_FAILURE() << "a NaN loss was trained on";
  } catch (const NonFiniteError& e) {
    EXPECT_NE(std::string(e.what()).find("step 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no adapter was written"), std::string::npos) << e.what();
  }
  EXPECT_EQ(logged, 0);
  for (auto& [n, t] : m->lora->peft_tensors())
    if (n.find("lora_B") != std::string::npos) EXPECT_EQ(t.abs().max().item<float>(), 0.0f) << n << " was stepped";
}

TEST(LayerRouteDecode, GenerationMatchesFullForwardAndSkipsCache) {
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 6);
  randomize_adapters(*m, 41, 2.0);
  std::vector<int64_t> prompt = {5, 9, 13, 2, 7, 30, 11};
  for (GateMode mode : {GateMode::Open, GateMode::Learned}) {
    auto g = generate_gated(*m, prompt, 6, mode, true);
    ASSERT_EQ(g.tokens.size(), 6u);
    // Reference: the gated forward on the prompt decides the same gates; greedy steps
    // with those decisions held (forced via a model whose gate biases encode them).
    torch::NoGradGuard ng;
    GatedOptions go;
    go.mode = mode;
    auto ref = m->forward(torch::tensor(prompt).unsqueeze(0), torch::Tensor(), go);
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(bool(g.open[size_t(i)]), ref.open[0][i].item<bool>()) << i;
    GatedModel fixed(m->base, LoraConfig{}, GateConfig{}, 0);
    for (auto& [n, t] : m->lora->peft_tensors()) (void)n;
    auto pa = m->lora->peft_tensors(), pb = fixed->lora->peft_tensors();
    for (size_t k = 0; k < pa.size(); ++k) pb[k].second.copy_(pa[k].second);
    fixed->gates->weight.zero_();
    for (int64_t i = 0; i < 6; ++i) fixed->gates->bias[i] = g.open[size_t(i)] ? 10.0f : -10.0f;
    std::vector<int64_t> seq = prompt;
    for (size_t t = 0; t < g.tokens.size(); ++t) {
      auto out = fixed->forward(torch::tensor(seq).unsqueeze(0), torch::Tensor(), GatedOptions{});
      EXPECT_EQ(out.logits[0][-1].argmax().item<int64_t>(), g.tokens[t]) << "step " << t;
      seq.push_back(g.tokens[t]);
    }
    int64_t open = 0;
    for (auto o : g.open) open += o;
    EXPECT_EQ(g.executed_layers, open);
    EXPECT_EQ(g.cache_bytes, open * 2 * 2 * 13 * 8 * 4);  // K and V [Hkv=2, P+new=13, hd=8] float32 per open layer
  }
  auto c = generate_gated(*m, prompt, 3, GateMode::Closed, true);
  EXPECT_EQ(c.executed_layers, 0);
  EXPECT_EQ(c.cache_bytes, 0);
  EXPECT_THROW(generate_gated(*m, prompt, 200, GateMode::Open, true), InputError);
}

TEST(LayerRouteEval, ReportIsConsistent) {
  auto data = test::copy_task(6, 3, 6, 6, 4);
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 7);
  randomize_adapters(*m, 43, 2.0);
  EvalOptions o;
  o.timing_samples = 2;
  o.repeats = 2;
  o.new_tokens = 4;
  auto r = evaluate_layerroute(*m, data, o);
  EXPECT_EQ(r.samples, 6);
  EXPECT_EQ(r.timing_pairs, 4);
  EXPECT_EQ(r.pair_ratios.size(), 4u);
  EXPECT_GT(r.ppl_gated, 1.0);
  EXPECT_NEAR(r.ideal_speedup, 6.0 / r.executed_mean, 1e-9);
  double open_sum = 0;
  for (double x : r.layer_open) open_sum += x;
  EXPECT_NEAR(open_sum, r.executed_mean, 1e-9);
  for (int64_t i = 0; i < 6; ++i) {
    const bool bias_open = m->gates->bias[i].item<float>() > 0;
    // A flip is a sample whose decision differs from the bias-only one.
    EXPECT_NEAR(r.nontrivial[size_t(i)], bias_open ? 1.0 - r.layer_open[size_t(i)] : r.layer_open[size_t(i)], 1e-9);
  }
  // Realized / ideal is taken pair by pair against that pair's executed layers.
  ASSERT_EQ(r.pair_executed.size(), 4u);
  std::vector<double> plain, over;
  for (size_t k = 0; k < 4; ++k) {
    plain.push_back(6.0 / double(r.pair_executed[k]));
    over.push_back(r.pair_ratios[k] * double(r.pair_executed[k]) / 6.0);
  }
  EXPECT_NEAR(r.decode_ideal_speedup, median(plain), 1e-12);
  EXPECT_NEAR(r.realized_over_ideal, median(over), 1e-12);
  // The FLOP-based ideal counts the LM head and gate scores, which skipping keeps.
  EXPECT_LT(r.flops_ideal_speedup, r.decode_ideal_speedup);
  EXPECT_GT(r.flops_ideal_speedup, 1.0);
  EXPECT_GT(r.flops_fixed_share, 0.0);
  EXPECT_LT(r.flops_fixed_share, 1.0);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 2.0, 3.0}), 2.5);
}

TEST(LayerRouteEval, PromptDecidedGatesAreTheDecisionsGenerationMakes) {
  // ppl_gated_prompt is measured under the decisions generation holds: each sample's
  // gates decided by generation's prefill over its prompt only (the whole-sample pooling
  // of ppl_gated also sees the answer being scored), and only over the prompt tokens the
  // timed generation keeps (--max-prompt: its last max_prompt tokens).
  auto data = test::copy_task(12, 3, 6, 6, 4);
  for (size_t i = 0; i < data.size(); ++i) data[i].source = i % 3 == 0 ? "b" : "a";
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 7);
  randomize_adapters(*m, 43, 2.0);
  torch::NoGradGuard ng;
  m->gates->bias.zero_();  // decisions by the input term alone: an answer can tip them
  double executed_whole_prompt = 0;
  for (const int64_t keep : {int64_t(256), int64_t(2)}) {
    int differ = 0;
    double ce_sum = 0;
    int64_t targets = 0, executed = 0;
    for (const auto& e : data) {
      ASSERT_GT(e.prompt_len, keep == 2 ? 2 : 0) << "the cut must drop prompt tokens";
      const int64_t T = int64_t(e.tokens.size());
      auto tokens = torch::tensor(std::vector<int64_t>(e.tokens.begin(), e.tokens.end())).unsqueeze(0);
      // Generation's prefill over the prompt tokens it keeps decides; the whole sample is
      // then scored under those decisions.
      const std::vector<int64_t> prompt(e.tokens.begin() + std::max<int64_t>(0, e.prompt_len - keep),
                                        e.tokens.begin() + e.prompt_len);
      const auto gen = generate_gated(*m, prompt, 0, GateMode::Learned, true);
      // The batched forward over the kept prompt alone decides the same (another code path).
      const auto on_prompt =
          m->forward(torch::tensor(prompt).unsqueeze(0), {}, GatedOptions{GateMode::Learned, false, true}).open;
      for (int64_t i = 0; i < m->n_layers(); ++i)
        EXPECT_EQ(on_prompt[0][i].item<bool>(), gen.open[size_t(i)] != 0) << "layer " << i;
      GatedOptions o{GateMode::Learned, false, true};
      o.forced_open = torch::tensor(std::vector<int64_t>(gen.open.begin(), gen.open.end())).unsqueeze(0) != 0;
      const auto out = m->forward(tokens, {}, o);
      for (int64_t i = 0; i < m->n_layers(); ++i)
        EXPECT_EQ(out.open[0][i].item<bool>(), gen.open[size_t(i)] != 0) << "layer " << i;
      differ += !torch::equal(out.open, m->forward(tokens, {}, GatedOptions{GateMode::Learned, false, true}).open);
      // Its cross-entropy over the loss mask, summed as eval sums it.
      auto logp = torch::log_softmax(out.logits[0].slice(0, 0, T - 1), -1);
      for (int64_t t = 0; t + 1 < T; ++t)
        if (e.loss_mask[size_t(t + 1)]) {
          ce_sum -= logp[t][e.tokens[size_t(t + 1)]].item<double>();
          ++targets;
        }
      executed += out.executed_blocks;
    }
    EXPECT_GT(differ, 0) << "the fixture should have samples whose answer changes a decision";
    EvalOptions eo;
    eo.timing_samples = 0;
    eo.max_prompt = keep;
    const auto r = evaluate_layerroute(*m, data, eo);
    EXPECT_NEAR(r.ppl_gated_prompt, std::exp(ce_sum / double(targets)), 1e-4 * r.ppl_gated_prompt) << keep;
    EXPECT_NEAR(r.executed_mean_prompt, double(executed) / double(data.size()), 1e-9) << keep;
    EXPECT_NE(r.ppl_gated_prompt, r.ppl_gated);
    EXPECT_TRUE(r.to_json().contains("ppl_gated_prompt"));
    // Per source: the same counts, split (text and JSON carry both).
    ASSERT_EQ(r.sources.size(), 2u);
    double per_source = 0;
    for (const auto& src : r.sources) per_source += src.executed_mean_prompt * double(src.samples);
    EXPECT_NEAR(per_source, double(executed), 1e-9);
    EXPECT_TRUE(r.to_json().at("sources").at(0).contains("executed_mean_prompt"));
    if (keep == 256) executed_whole_prompt = r.executed_mean_prompt;
    else EXPECT_NE(r.executed_mean_prompt, executed_whole_prompt) << "the cut changes some decisions here";
  }
  // The kept prompt leaves room for --new tokens, timed or not; no room is refused
  // before any work (session 29: only when timing, after the perplexity pass).
  EvalOptions no_room;
  no_room.timing_samples = 0;
  no_room.new_tokens = m->base->config().max_seq_len;
  lol_test::expect_input_error([&] { evaluate_layerroute(*m, data, no_room); },
                               {"--new " + std::to_string(no_room.new_tokens) + " leaves no room for a prompt"});
}

TEST(LayerRouteEval, ForcedGatesReportNoNonTriviality) {
  // Forced gates make no decision: non-triviality is not defined (NaN, null in JSON),
  // and all-closed gates have an infinite ideal speedup, as the generation line says.
  auto data = test::copy_task(4, 3, 6, 6, 4);
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 7);
  EvalOptions o;
  o.timing_samples = 0;
  for (GateMode mode : {GateMode::Open, GateMode::Closed}) {
    o.mode = mode;
    const auto r = evaluate_layerroute(*m, data, o);
    for (double x : r.nontrivial) EXPECT_TRUE(std::isnan(x)) << gate_mode_name(mode);
    EXPECT_TRUE(r.to_json().at("nontrivial").at(0).is_null());
    EXPECT_EQ(r.ppl_gated_prompt, r.ppl_gated);
    if (mode == GateMode::Open) EXPECT_EQ(r.ideal_speedup, 1.0);
    else EXPECT_TRUE(std::isinf(r.ideal_speedup));
  }
  // Timed with every gate closed: the ratio to an infinite ideal is undefined (NaN,
  // null in JSON), not 0% (session 28).
  o.mode = GateMode::Closed;
  o.timing_samples = 1;
  o.repeats = 1;
  o.new_tokens = 1;
  const auto r = evaluate_layerroute(*m, data, o);
  EXPECT_TRUE(std::isnan(r.realized_over_ideal));
  EXPECT_TRUE(r.to_json().at("speedup_over_ideal").is_null());
  EXPECT_TRUE(r.to_json().at("decode_ideal_speedup").is_null());
}

// Paper section 4: "100 held-out samples (50 from each of two evaluation sources)",
// selected by the run's seed.
TEST(LayerRouteEval, HeldOutSelectionTakesEqualSharesPerSource) {
  auto data = test::copy_task(13, 5, 6, 6, 4);
  for (size_t i = 0; i < data.size(); ++i) data[i].source = i % 4 == 1 ? "b" : "a";  // b: 1, 5, 9 (3); a: 10
  auto count = [](const std::vector<Example>& v, const std::string& src) {
    return std::count_if(v.begin(), v.end(), [&](const Example& e) { return e.source == src; });
  };
  auto six = select_heldout(data, 6, 11);
  ASSERT_EQ(six.size(), 6u);
  EXPECT_EQ(count(six, "a"), 3);
  EXPECT_EQ(count(six, "b"), 3);
  for (size_t i = 0; i < six.size(); ++i) EXPECT_EQ(six[i].source, i % 2 ? "b" : "a");  // interleaved
  // A short source gives what it has; the other fills the rest.
  auto eight = select_heldout(data, 8, 11);
  EXPECT_EQ(count(eight, "b"), 3);
  EXPECT_EQ(count(eight, "a"), 5);
  // Distinct samples, reproducible from the seed, different for another seed.
  auto key = [](const std::vector<Example>& v) {
    std::vector<std::vector<int32_t>> k;
    for (const auto& e : v) k.push_back(e.tokens);
    return k;
  };
  auto k8 = key(eight);
  EXPECT_EQ(std::set<std::vector<int32_t>>(k8.begin(), k8.end()).size(), 8u);
  EXPECT_EQ(key(select_heldout(data, 8, 11)), k8);
  EXPECT_NE(key(select_heldout(data, 8, 12)), k8);
  EXPECT_EQ(select_heldout(data, 0, 11).size(), 13u);
  EXPECT_EQ(select_heldout(data, 100, 11).size(), 13u);
  // One source: the first n of the seeded permutation.
  for (auto& e : data) e.source = "";
  EXPECT_EQ(key(select_heldout(data, 4, 11)).size(), 4u);
}

// Paper Table 3 is per evaluation split: each source's perplexities equal those of an
// evaluation of that source's samples alone.
TEST(LayerRouteEval, PerSourcePerplexities) {
  auto data = test::copy_task(6, 3, 6, 6, 4);
  for (size_t i = 0; i < data.size(); ++i) data[i].source = i < 2 ? "tools" : "reasoning";
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 7);
  randomize_adapters(*m, 43, 2.0);
  EvalOptions o;
  o.timing_samples = 0;
  o.batch_size = 3;
  auto r = evaluate_layerroute(*m, data, o);
  ASSERT_EQ(r.sources.size(), 2u);
  EXPECT_EQ(r.sources[0].source, "tools");
  EXPECT_EQ(r.sources[0].samples, 2);
  EXPECT_EQ(r.sources[1].samples, 4);
  for (size_t k = 0; k < 2; ++k) {
    std::vector<Example> part;
    for (const auto& e : data)
      if (e.source == r.sources[k].source) part.push_back(e);
    auto alone = evaluate_layerroute(*m, part, o);
    EXPECT_TRUE(alone.sources.empty());
    EXPECT_NEAR(r.sources[k].ppl_base, alone.ppl_base, 1e-9 * alone.ppl_base);
    EXPECT_NEAR(r.sources[k].ppl_open, alone.ppl_open, 1e-9 * alone.ppl_open);
    EXPECT_NEAR(r.sources[k].ppl_gated, alone.ppl_gated, 1e-9 * alone.ppl_gated);
    EXPECT_NEAR(r.sources[k].executed_mean, alone.executed_mean, 1e-12);
  }
  // The totals lie between the sources'.
  EXPECT_GE(r.ppl_gated, std::min(r.sources[0].ppl_gated, r.sources[1].ppl_gated) * (1 - 1e-9));
  EXPECT_LE(r.ppl_gated, std::max(r.sources[0].ppl_gated, r.sources[1].ppl_gated) * (1 + 1e-9));
  EXPECT_EQ(r.to_json()["sources"].size(), 2u);
}

TEST(LayerRouteEval, SamplesLongerThanTheBaseAreRefusedNamingMaxLen) {
  // tiny_base has 128 positions; sample 2 gets 140 tokens.
  auto data = test::copy_task(4, 5, 6, 6, 4);
  data[2].tokens.resize(140, 7);
  data[2].loss_mask.resize(140, 1);
  GatedModel m(tiny_base(), LoraConfig{}, GateConfig{}, 7);
  for (int pass = 0; pass < 2; ++pass) {
    try {
      if (pass == 0) {
        evaluate_layerroute(*m, data, EvalOptions{});
      } else {
        LayerRouteTrainable tr(m, "");
        TrainOptions o;
        o.steps = 1;
        o.progress = false;
        train_layerroute(tr, data, o, nullptr);
      }
      ADD_FAILURE() << "pass " << pass << ": expected an InputError";
    } catch (const InputError& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find(pass == 0 ? "layerroute eval" : "layerroute train"), std::string::npos) << w;
      EXPECT_NE(w.find("sample 2 has 140 tokens, more than the base model's 128 positions"), std::string::npos) << w;
      EXPECT_NE(w.find("--max-len 128"), std::string::npos) << w;
    }
  }
}

}  // namespace
}  // namespace lol::layerroute::test
