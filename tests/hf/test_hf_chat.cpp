// Chat templates (run as Jinja for --chat; for LayerRoute's ChatML, the default system
// prompt taken from the Jinja source and the refusal of other templates) and stop
// tokens from config.json / generation_config.json.
#include "hf/hf_chat.h"
#include "hf_test_util.h"
#include "tokenizers/byte_tokenizer.h"

namespace lol::hf::test {
namespace {

// Qwen2.5-Instruct's chat template without its tool-call parts, as stored after JSON
// decoding (Jinja string escapes \n kept as two characters).
const char* kQwen25Template = R"({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\n<tools>" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %})";

// Qwen2-Instruct's template (older, one line).
const char* kQwen2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
    "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

// A ChatML template without a default system turn (e.g. a base model's).
const char* kNoSystemTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n'}}{% endfor %}";

const char* kLlamaTemplate = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}";

std::unique_ptr<tokenizers::Tokenizer> chatml_bytes(const std::string& tmpl) {
  auto tok = std::make_unique<tokenizers::ByteTokenizer>(std::vector<std::string>{});
  tok->add_token({"<|endoftext|>", -1});
  tok->add_token({"<|im_start|>", -1});
  tok->add_token({"<|im_end|>", -1});
  tok->set_eos_token("<|im_end|>");
  tok->set_chat_template(tmpl);
  return tok;
}

TEST(HfChat, DefaultSystemFromTemplate) {
  EXPECT_EQ(chatml_default_system(kQwen25Template),
            std::optional<std::string>("You are Qwen, created by Alibaba Cloud. You are a helpful assistant."));
  EXPECT_EQ(chatml_default_system(kQwen2Template), std::optional<std::string>("You are a helpful assistant."));
  EXPECT_EQ(chatml_default_system(kNoSystemTemplate), std::optional<std::string>(""));
  EXPECT_EQ(chatml_default_system(kLlamaTemplate), std::nullopt);
  EXPECT_EQ(chatml_default_system(""), std::nullopt);
  // Escapes inside the default text are undone.
  EXPECT_EQ(chatml_default_system("{{ '<|im_start|>system\\nLine 1\\nLine 2<|im_end|>\\n' }}"),
            std::optional<std::string>("Line 1\nLine 2"));
  // Quotes and braces inside the literal (Qwen2.5-Math's \boxed{}, an apostrophe in a
  // double-quoted literal, an escaped quote) belong to the default text.
  EXPECT_EQ(chatml_default_system(
                R"({%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n' }}{%- endif %}{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %})"),
            std::optional<std::string>("Please reason step by step, and put your final answer within \\boxed{}."));
  EXPECT_EQ(chatml_default_system(R"({{ "<|im_start|>system\nYou're a helpful assistant.<|im_end|>\n" }})"),
            std::optional<std::string>("You're a helpful assistant."));
  EXPECT_EQ(chatml_default_system(R"({{ '<|im_start|>system\nIt\'s {me}.<|im_end|>\n' }})"),
            std::optional<std::string>("It's {me}."));
  // Raw template text between tags is emitted too; comments are not.
  EXPECT_EQ(chatml_default_system("{# <|im_start|>system\nnot this<|im_end|> #}{% if messages[0]['role'] != "
                                  "'system' %}<|im_start|>system\nRaw default.<|im_end|>\n{% endif %}"),
            std::optional<std::string>("Raw default."));
}

TEST(HfChat, SystemPromptNeedsAChatMLTokenizer) {
  EXPECT_EQ(chatml_system_prompt(*chatml_bytes(kQwen2Template), "t"), "You are a helpful assistant.");
  EXPECT_EQ(chatml_system_prompt(*chatml_bytes(""), "t"), "") << "no template: no default system turn";
  lol_test::expect_input_error([&] { chatml_system_prompt(*chatml_bytes(kLlamaTemplate), "dir/tokenizer_config.json"); },
                               {"dir/tokenizer_config.json", "not ChatML"});
  tokenizers::ByteTokenizer plain(std::vector<std::string>{});
  lol_test::expect_input_error([&] { chatml_system_prompt(plain, "dir"); }, {"dir", "no <|im_start|>/<|im_end|> tokens"});
}

std::string format(const tokenizers::Tokenizer& tok, const std::vector<tokenizers::ChatMessage>& msgs, bool gen,
                   nlohmann::ordered_json vars = nlohmann::ordered_json::object()) {
  tokenizers::ChatTemplateOptions o;
  o.add_generation_prompt = gen;
  o.variables = std::move(vars);
  return format_chat(tok, msgs, o, "t");
}

TEST(HfChat, FormatsAsTransformersWould) {
  const std::vector<tokenizers::ChatMessage> msgs = {{"user", "Hi"}};
  // transformers' apply_chat_template(msgs, add_generation_prompt=True) on each template:
  EXPECT_EQ(format(*chatml_bytes(kQwen25Template), msgs, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(format(*chatml_bytes(kQwen2Template), msgs, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(format(*chatml_bytes(kNoSystemTemplate), msgs, false), "<|im_start|>user\nHi<|im_end|>\n");
  // A template without an add_generation_prompt branch opens no assistant turn, even
  // when asked to (transformers renders the template as written).
  EXPECT_EQ(format(*chatml_bytes(kNoSystemTemplate), msgs, true), "<|im_start|>user\nHi<|im_end|>\n");
  // An explicit system message replaces the default.
  EXPECT_EQ(format(*chatml_bytes(kQwen25Template), {{"system", "S"}, {"user", "Q"}}, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n");
  // The turn markers encode as single special tokens.
  auto tok = chatml_bytes(kQwen25Template);
  const auto ids = tok->encode(format(*tok, msgs, true));
  EXPECT_EQ(ids.front(), *tok->token_to_id("<|im_start|>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok->token_to_id("<|im_end|>")), 2);
}

// Templates other than plain ChatML run as written (session 42: they were refused).
TEST(HfChat, AnyTemplateRunsAsJinja) {
  const std::vector<tokenizers::ChatMessage> msgs = {{"user", "Hi"}};
  EXPECT_EQ(format(*chatml_bytes(kLlamaTemplate), msgs, true), "[INST] Hi [/INST]");
  // The tokenizer's special tokens are template variables (transformers' special_tokens_map).
  EXPECT_EQ(format(*chatml_bytes("{{ eos_token }}|{{ bos_token }}|{{ messages[0].content|trim }}"), {{"user", " x "}},
                   true),
            "<|im_end|>||x");
  // The generation prompt of Qwen3's template, with and without thinking.
  const std::string qwen3_tail = kQwen2Template + std::string(
      "{%- if add_generation_prompt and enable_thinking is defined and enable_thinking is false %}"
      "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}");
  EXPECT_EQ(format(*chatml_bytes(qwen3_tail), msgs, true, {{"enable_thinking", false}}),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(format(*chatml_bytes(qwen3_tail), msgs, true).find("<think>"), std::string::npos);
  // What the template raises, and no template, are errors naming where.
  expect_input_error([&] { format(*chatml_bytes(""), msgs, true); }, {"t: the tokenizer has no chat template"});
  expect_input_error(
      [&] {
        format(*chatml_bytes("{% if messages[0].role != 'system' %}{{ raise_exception('System first') }}{% endif %}"),
               msgs, true);
      },
      {"t line 1", "System first"});
  expect_input_error([&] { format(*chatml_bytes("{% for m in messages %}"), msgs, true); }, {"t line 1", "endfor"});
}

TEST(HfChat, ChatMLRenderingOfLayerRouteRefusesOtherTemplates) {
  const std::vector<tokenizers::ChatMessage> msgs = {{"user", "Hi"}};
  tokenizers::ByteTokenizer plain(std::vector<std::string>{});
  plain.set_chat_template(kQwen25Template);
  expect_input_error([&] { chatml_system_prompt(plain, "cfg"); }, {"no <|im_start|>"});
  // ChatML templates that render something else than plain ChatML (found by the fifteenth
  // pass: they were rendered as plain ChatML): content trimmed, a BOS token first, a
  // <think> block or other text after the generation prompt (Qwen3, QwQ).
  const std::string qwen2 = kQwen2Template;
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = qwen2;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  for (const auto& [t, why] : std::vector<std::pair<std::string, std::string>>{
           {with("message['content']", "message['content'] | trim"), "(| trim)"},
           {"{{ bos_token }}" + qwen2, "bos_token"},
           {with("'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n'"), "<think>"},
           {with("'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\nSure'"), "followed by more text (\"Sure\")"},
           {with("message['content']", "message['content'].split('</think>')[-1]"), "(.split()"}}) {
    EXPECT_NE(chatml_unsupported_construct(t), "") << t;
    expect_input_error([&] { chatml_system_prompt(*chatml_bytes(t), "cfg"); }, {"cfg: chat_template is ChatML, but", why});
  }
  EXPECT_EQ(chatml_unsupported_construct(kQwen2Template), "");
  EXPECT_EQ(chatml_unsupported_construct(kQwen25Template), "");
}

TEST(HfChat, StopTokensFromAllSources) {
  TempDir d("stop");
  HfConfig c;
  c.eos_token_id = {151645};
  auto tok = chatml_bytes(kQwen25Template);  // EOS <|im_end|> = 258
  EXPECT_EQ(stop_tokens(d.path(), c, nullptr), std::vector<int64_t>{151645});
  write_text(d / "generation_config.json", R"({"bos_token_id": 151643, "eos_token_id": [151645, 151643]})");
  EXPECT_EQ(stop_tokens(d.path(), c, tok.get()), (std::vector<int64_t>{151645, 151643, 258}));
  write_text(d / "generation_config.json", R"({"eos_token_id": [1.5]})");
  expect_input_error([&] { stop_tokens(d.path(), c, nullptr); }, {"generation_config.json", "eos_token_id"});
}

// generation_config.json's sampling as transformers' generate() reads it: Qwen2.5-Instruct's
// file, GenerationConfig's defaults for absent fields, greedy without do_sample (the
// penalty kept), and the values transformers refuses.
TEST(HfChat, GenerationSamplingDefaults) {
  TempDir d("gencfg");
  EXPECT_FALSE(generation_sampling_defaults(d.path()).has_value());
  write_text(d / "generation_config.json",
             R"({"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
                 "repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8, "top_k": 20,
                 "transformers_version": "4.37.0"})");
  auto o = generation_sampling_defaults(d.path());
  ASSERT_TRUE(o.has_value());
  EXPECT_DOUBLE_EQ(o->temperature, 0.7);
  EXPECT_EQ(o->top_k, 20);
  EXPECT_DOUBLE_EQ(o->top_p, 0.8);
  EXPECT_DOUBLE_EQ(o->repetition_penalty, 1.05);
  write_text(d / "generation_config.json", R"({"do_sample": true, "top_p": null})");
  o = generation_sampling_defaults(d.path());
  EXPECT_DOUBLE_EQ(o->temperature, 1.0);
  EXPECT_EQ(o->top_k, 50) << "absent: GenerationConfig's default";
  EXPECT_DOUBLE_EQ(o->top_p, 1.0);
  EXPECT_DOUBLE_EQ(o->repetition_penalty, 1.0);
  write_text(d / "generation_config.json", R"({"do_sample": true, "top_k": null, "top_p": 0})");
  o = generation_sampling_defaults(d.path());
  EXPECT_EQ(o->top_k, 0) << "null: None, no top-k step";
  EXPECT_EQ(o->top_p, 0.0) << "transformers accepts 0 (the most likely token)";
  write_text(d / "generation_config.json", R"({"temperature": 0.7, "top_k": 20, "repetition_penalty": 1.1})");
  o = generation_sampling_defaults(d.path());
  EXPECT_EQ(o->temperature, 0.0) << "greedy without do_sample";
  EXPECT_EQ(o->top_k, 0);
  EXPECT_DOUBLE_EQ(o->repetition_penalty, 1.1);
  for (const char* bad : {R"({"do_sample": "yes"})", R"({"do_sample": true, "temperature": 0})",
                          R"({"do_sample": true, "top_k": 2.5})", R"({"do_sample": true, "top_p": 1.5})",
                          R"({"repetition_penalty": 0})", R"({"repetition_penalty": "1.1"})",
                          R"({"repetition_penalty": 1e39})", R"({"do_sample": true, "top_k": 1e20})", R"([1])"}) {
    SCOPED_TRACE(bad);
    write_text(d / "generation_config.json", bad);
    expect_input_error([&] { generation_sampling_defaults(d.path()); }, {"generation_config.json"});
  }
}

// Fields transformers' generate() would apply and lol does not are named (session 27:
// min_p, no_repeat_ngram_size and max_new_tokens were silently ignored).
TEST(HfChat, GenerationConfigFieldsLolDoesNotApplyAreListed) {
  TempDir d("gencfg_unapplied");
  EXPECT_TRUE(generation_config_unapplied(d.path()).empty()) << "no file";
  write_text(d / "generation_config.json",
             R"({"do_sample": true, "temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05,
                 "eos_token_id": [2], "bos_token_id": 1, "transformers_version": "4.37.0", "typical_p": 1.0,
                 "num_beams": 1, "no_repeat_ngram_size": 0, "min_p": null})");
  EXPECT_TRUE(generation_config_unapplied(d.path()).empty()) << "defaults, nulls and implemented fields";
  write_text(d / "generation_config.json",
             R"({"do_sample": true, "min_p": 0.99, "no_repeat_ngram_size": 1, "max_new_tokens": 2, "num_beams": 4,
                 "typical_p": 0.5})");
  const auto f = generation_config_unapplied(d.path());
  EXPECT_EQ(f, (std::vector<std::string>{"field 'max_new_tokens' = 2", "field 'num_beams' = 4",
                                         "field 'typical_p' = 0.5", "field 'min_p' = 0.99",
                                         "field 'no_repeat_ngram_size' = 1"}));
}

}  // namespace
}  // namespace lol::hf::test
