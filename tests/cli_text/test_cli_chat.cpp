// `lol tokenizer chat`: a conversation rendered with a chat template as transformers'
// apply_chat_template renders it (expected strings: jinja2 3.1 with transformers'
// settings), its token ids, and the errors of bad input (exit 2 naming the problem).
#include <filesystem>

#include "model/file_test_util.h"
#include "tokenizers/byte_tokenizer.h"

namespace {

using reftest::quote;
using reftest::run_lol;
using reftest::TempDir;

// A Llama-3.1-style template: BOS, a dated system turn, tools as indented JSON, header tokens.
const char* kTemplate = R"({{- bos_token }}
{%- set date_string = strftime_now("%d %b %Y") %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message.role not in ['user', 'assistant'] %}
        {{- raise_exception("Unknown role: " + message.role) }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)";

TEST(CliChat, RendersAsApplyChatTemplate) {
  TempDir d("cli_chat");
  lol::tokenizers::ByteTokenizer tok(std::vector<std::string>{});
  for (const char* t : {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})
    tok.add_token({t, -1});
  tok.set_bos_token("<|begin_of_text|>");
  tok.set_eos_token("<|eot_id|>");
  tok.set_chat_template(kTemplate);
  tok.save(d / "tok");
  reftest::write_text(d / "msgs.json", R"([{"role": "system", "content": " Be brief. "},
                                            {"role": "user", "content": "Hé \"there\"\n"}])");
  reftest::write_text(d / "tools.json", R"([{"name": "f", "parameters": {"b": 1, "a": [true, null]}}])");
  reftest::write_text(d / "bad_role.json", R"([{"role": "tool", "content": "x"}])");
  reftest::write_text(d / "t.jinja", "{{ greeting }}, {{ n + 1 }}{% if add_generation_prompt %}!{% endif %}");
  const std::string tk = " --tokenizer " + quote(d / "tok");
  const std::string expected =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nToday Date: 26 Jul 2026\n\n"
      "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHé \"there\"<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  auto r = run_lol("tokenizer chat" + tk + " --messages " + quote(d / "msgs.json") + " --date 2026-07-26");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, expected);
  // Tools as json.dumps(indent=4) keeps key order; no generation prompt.
  r = run_lol("tokenizer chat" + tk + " --prompt hi --tools " + quote(d / "tools.json") +
              " --date 2026-01-02 --no-generation-prompt");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nToday Date: 02 Jan 2026\n\n"
            "{\n    \"name\": \"f\",\n    \"parameters\": {\n        \"b\": 1,\n        \"a\": [\n            true,\n"
            "            null\n        ]\n    }\n}\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
  // --ids: the rendered text's ids, the special tokens as single ids, no BOS added twice.
  r = run_lol("tokenizer chat" + tk + " --messages " + quote(d / "msgs.json") + " --date 2026-07-26 --ids");
  EXPECT_EQ(r.code, 0) << r.out;
  std::string ids;
  const auto enc = tok.encode(expected);
  for (size_t k = 0; k < enc.size(); ++k) ids += (k ? " " : "") + std::to_string(enc[k]);
  EXPECT_EQ(r.out, ids + "\n");
  EXPECT_EQ(enc.front(), *tok.token_to_id("<|begin_of_text|>"));
  // --template with --var (JSON values, else text).
  r = run_lol("tokenizer chat --template " + quote(d / "t.jinja") + " --prompt x --var greeting=Hello --var n=41");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "Hello, 42!");
  // The template's own exception, a bad --var, no template: exit 2 naming the problem.
  r = run_lol("tokenizer chat" + tk + " --messages " + quote(d / "bad_role.json"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("Unknown role: tool"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chat_template line 21"), std::string::npos) << r.out;
  r = run_lol("tokenizer chat --template " + quote(d / "t.jinja") + " --prompt x --var =3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("NAME=VALUE"), std::string::npos) << r.out;
  r = run_lol("tokenizer chat --tokenizer byte --prompt x");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no chat template"), std::string::npos) << r.out;
  r = run_lol("tokenizer chat" + tk + " --prompt x --date 2026-13-01");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--date"), std::string::npos) << r.out;
}

// Named templates (tokenizer_config.json's list form, additional_chat_templates/NAME.jinja):
// transformers picks "tool_use" when tools are given and it exists, else "default";
// --chat-template names one; save() writes the list form back.
TEST(CliChat, NamedTemplatesAsTransformersPicksThem) {
  TempDir d("cli_chat_named");
  lol::tokenizers::ByteTokenizer tok(std::vector<std::string>{});
  tok.set_chat_template("D:{{ messages[0].content }}");
  tok.set_named_chat_template("tool_use", "T:{{ tools|length }}");
  tok.save(d / "tok");
  const auto cfg = nlohmann::json::parse(reftest::read_text(d / "tok/tokenizer_config.json"));
  ASSERT_TRUE(cfg["chat_template"].is_array()) << cfg.dump();
  EXPECT_EQ(cfg["chat_template"][0]["name"], "default");
  std::filesystem::create_directories(d / "tok/additional_chat_templates");
  reftest::write_text(d / "tok/additional_chat_templates/rag.jinja", "R:{{ messages|length }}");
  reftest::write_text(d / "tools.json", R"([{"name": "f"}, {"name": "g"}])");
  const std::string c = "tokenizer chat --tokenizer " + quote(d / "tok") + " --prompt hi";
  auto r = run_lol(c);
  EXPECT_EQ(r.out, "D:hi");
  r = run_lol(c + " --tools " + quote(d / "tools.json"));
  EXPECT_EQ(r.out, "T:2");
  r = run_lol(c + " --tools " + quote(d / "tools.json") + " --chat-template default");
  EXPECT_EQ(r.out, "D:hi");
  r = run_lol(c + " --chat-template rag");
  EXPECT_EQ(r.out, "R:1");
  r = run_lol(c + " --chat-template nope");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no chat template named \"nope\" (the tokenizer has: default, rag, tool_use)"),
            std::string::npos)
      << r.out;
  // Only named templates and none applies: transformers' "no default" error, naming them.
  lol::tokenizers::ByteTokenizer only(std::vector<std::string>{});
  only.set_named_chat_template("rag", "x");
  only.save(d / "only");
  r = run_lol("tokenizer chat --tokenizer " + quote(d / "only") + " --prompt hi");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no default chat template, only named ones (rag)"), std::string::npos) << r.out;
}

}  // namespace
