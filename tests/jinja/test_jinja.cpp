// The Jinja interpreter (src/jinja): each expected string is what jinja2 3.1 prints for
// the same template with transformers' chat-template settings (trim_blocks,
// lstrip_blocks, loopcontrols; python3-jinja2 on Debian). tests/reference/
// chat_template_reference.py compares many more cases against jinja2 itself.
#include <gtest/gtest.h>

#include "jinja/template.h"

namespace lol::jinja {
namespace {

Value vars(const std::string& json) { return from_json(nlohmann::ordered_json::parse(json)); }

std::string render(const std::string& tmpl, const std::string& json = "{}", uint64_t max_steps = 0) {
  RenderOptions o;
  o.now = 1785024000;  // 2026-07-26 00:00:00 UTC
  if (max_steps > 0) o.max_steps = max_steps;
  return Template(tmpl, "t").render(vars(json), o);
}

void expect_error(const std::string& tmpl, const std::string& fragment, const std::string& json = "{}",
                  uint64_t max_steps = 0) {
  try {
    render(tmpl, json, max_steps);
    ADD_FAILURE() << "no error for: " << tmpl;
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Jinja, WhiteSpaceControlAsTransformersConfiguresIt) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the indentation before it.
  EXPECT_EQ(render("{% if true %}\n  a\n{% endif %}\nb"), "  a\nb");
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(render("x  {% if true %}y{% endif %}"), "x  y") << "lstrip only at the start of a line";
  EXPECT_EQ(render("{{ 'a' }}\n  {% if true %}b{% endif %}"), "a\nb");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif %}"), "a\n  b") << "{%+ keeps the indentation";
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb") << "no trimming after {{ }}";
  EXPECT_EQ(render("a {{- ' b ' -}} c"), "a b c");
  EXPECT_EQ(render("a\n{# note #}\nb"), "a\nb");
  EXPECT_EQ(render("a\n"), "a") << "keep_trailing_newline is off";
  EXPECT_EQ(render("a\r\nb"), "a\nb");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(Jinja, PythonValuesAndOperators) {
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1e-5 }}"),
            "None|True|1.0|0.30000000000000004|1e+20|1e-05");
  EXPECT_EQ(render("{{ [1, 'a', \"it's\", none, {'k': [true]}] }}"), "[1, 'a', \"it's\", None, {'k': [True]}]");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ -7.5 // 2 }}"),
            "3 -4 2 3.5 1024 -4.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }}"), "a1None abab [1, 2]");
  EXPECT_EQ(render("{{ 1 if false }}|{{ 0 or 'x' }}|{{ 1 and 2 }}|{{ not 1 }}|{{ 1 < 2 < 3 }}|{{ 'b' in 'abc' }}"),
            "|x|2|False|True|True");
  EXPECT_EQ(render("{{ -3|abs }} {{ not none is none }}"), "3 False");
  EXPECT_EQ(render("{{ 'a\\tb\\u00e9\\x41' }}"), "a\tb\xc3\xa9" "A");
  EXPECT_EQ(render("{{ 'a' 'b' }}"), "ab");
  EXPECT_EQ(render("{{ '%s=%d' % ('x', 3) }}"), "x=3");
  expect_error("{{ 'a' + 1 }}", "can only concatenate str");
  expect_error("{{ 1 / 0 }}", "division by zero");
}

TEST(Jinja, UndefinedIsEmptyButItsAttributesRaise) {
  EXPECT_EQ(render("[{{ x }}]{{ x is defined }}{{ x|length }}{% for i in x %}no{% endfor %}{{ x ~ 'a' }}"), "[]False0a");
  EXPECT_EQ(render("{{ m.missing is defined }}{{ m['missing'] }}|{{ l[5] is defined }}", R"({"m": {}, "l": [1]})"),
            "False|False");
  expect_error("{{ x.y }}", "'x' is undefined");
  expect_error("{{ m.a.b }}", "has no attribute 'a'", R"({"m": {}})");
  expect_error("{{ x + 1 }}", "'x' is undefined");
}

TEST(Jinja, ScopesFollowJinja2) {
  // A set inside a for loop neither leaks nor reaches the next iteration.
  EXPECT_EQ(render("{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}"), "1110");
  EXPECT_EQ(render("{% if true %}{% set c = 5 %}{% endif %}{{ c }}"), "5");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(render("{% for i in [1, 2, 3] if i != 2 %}{{ loop.index }}/{{ loop.length }}{{ i }}{% if not loop.last %},{% endif %}"
                   "{% endfor %}"),
            "1/21,2/23");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
                   "{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{% set t %}x{{ a }}{% endset %}{{ t }}"), "2x1");
  EXPECT_EQ(render("{% macro m(x, y='d') %}<{{ x }}{{ y }}>{% endmacro %}{{ m(1) }}{{ m(2, y='e') }}"), "<1d><2e>");
  expect_error("{% break %}", "outside a for loop");
}

TEST(Jinja, StringMethodsFiltersAndTests) {
  EXPECT_EQ(render("{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}"),
            "a b|a|['a', 'b', '', 'c']|['a', 'b']");
  EXPECT_EQ(render("{{ 'a</think>b</think>c'.split('</think>')[-1] }}|{{ 'héllo'[1:3] }}|{{ [1, 2, 3][::-1] }}"),
            "c|él|[3, 2, 1]");
  EXPECT_EQ(render("{{ 'Hello'.startswith(('x', 'He')) }}|{{ 'a-b'.replace('-', '+') }}|{{ 'hello world'.title() }}"),
            "True|a+b|Hello World");
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1.5, 'é']}|tojson }}"), "{\"b\": 1, \"a\": [1.5, \"é\"]}");
  EXPECT_EQ(render("{{ {'a': [1]}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(', ') }}",
                   R"({"msgs": [{"role": "user", "content": "a"}, {"role": "x", "content": "b"},
                                {"role": "user", "content": "c"}]})"),
            "a, c");
  EXPECT_EQ(render("{{ x|default('d') }}{{ ''|default('e', true) }}{{ [3, 1, 2]|sort }}{{ 'ab'|upper }}{{ 'x'|length }}"),
            "de[1, 2, 3]AB1");
  EXPECT_EQ(render("{{ 1 is number }}{{ 'a' is string }}{{ {} is mapping }}{{ none is none }}{{ 3 is odd }}"),
            "TrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2026");
  expect_error("{{ x|nosuchfilter }}", "no filter named 'nosuchfilter'");
  expect_error("{{ raise_exception('Roles must alternate') }}", "Roles must alternate");
  expect_error("{{ [].append(1) }}", "immutable sandbox");
}

// Found by tests/reference/chat_template_reference.py (jinja2 3.1 as the oracle).
TEST(Jinja, AgreesWithJinja2WhereItOnceDidNot) {
  // repr escapes what Python's str.isprintable() refuses.
  EXPECT_EQ(render("{{ ['\\u200b', '\\xa0', '\\x85', '\\U0001F600', '\\ue000'] }}"),
            "['\\u200b', '\\xa0', '\\x85', '\xf0\x9f\x98\x80', '\\ue000']");
  // select / selectattr / map of None or false: nothing, not an error.
  EXPECT_EQ(render("{{ z|selectattr('role')|list }}{{ false|select('odd')|list }}{{ none|map('upper')|list }}",
                   R"({"z": null})"),
            "[][][]");
  EXPECT_EQ(render("{{ '-'.join('xyz') }}|{{ ' a  b '.split(none, 1) }}|{{ ' a  b '.rsplit(none, 1) }}"),
            "x-y-z|['a', 'b ']|[' a', 'b']");
  // round is Python's round(): ties to even on the exact binary value; an int stays an int.
  EXPECT_EQ(render("{{ 2.5|round }} {{ -2.5|round }} {{ 2.675|round(2) }} {{ 3|round }} {{ 2.5|round(0, 'ceil') }}"),
            "2.0 -2.0 2.67 3 3.0");
  expect_error("{{ missing|int }}", "'missing' is undefined");
  EXPECT_EQ(render("{{ \"o'neil-x\"|title }} {{ \"o'neil-x\".title() }} {{ '0x1A'|int }} {{ '0x1A'|int(base=16) }} "
                   "{{ ' 1_000 '|int }} {{ '1e3'|int }} {{ 'inf'|float }}"),
            "O'neil-X O'Neil-X 0 26 1000 1000 inf");
  EXPECT_EQ(render("[{{ m|attr('role') }}]{{ m|attr('items') is callable }}", R"({"m": {"role": "user"}})"), "[]True");
  // for-else: jinja2 runs else unless an iteration reached the end of the body.
  EXPECT_EQ(render("{% for y in [1, 2] %}{% break %}{% else %}else{% endfor %}done"), "elsedone");
  EXPECT_EQ(render("{% for y in [1, 2] %}{{ y }}{% if y == 2 %}{% break %}{% endif %}{% else %}else{% endfor %}"), "12");
  // An unknown filter inside an if branch fails only when the branch runs.
  EXPECT_EQ(render("{% if false %}{{ 1|nosuchfilter }}{% endif %}ok"), "ok");
  expect_error("{% if true %}{{ 1|nosuchfilter }}{% endif %}", "no filter named 'nosuchfilter'");
  EXPECT_EQ(render("[{{ (true)[1:] }}]{{ 0.1 is odd }}{{ '' % undef }}{{ '%s' % [1] }}"), "[]False[1]");
  EXPECT_EQ(render("{% macro f() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, k=3) }}"), "(1, 2){'k': 3}");
  EXPECT_EQ(render("{{ 'ab'.center(6, '*') }}|{{ '-5'.zfill(4) }}|{{ 'a=b=c'.rpartition('=') }}|{{ '{}+{x}'.format(1, x='y') }}"),
            "**ab**|-005|('a=b', '=', 'c')|1+y");
  EXPECT_EQ(render("{{ '<a & \"b\">'|e }}|{{ 'hello world foo'|truncate(9) }}|{{ '%s-%s'|format('a', 1) }}"),
            "&lt;a &amp; &#34;b&#34;&gt;|hello...|a-1");
}

// Found by tests/reference/chat_template_abuse.py: every template's work and memory are
// bounded, deep values are refused instead of overflowing the stack.
TEST(Jinja, HostileTemplatesAreBoundedErrors) {
  std::string chain = "{{ 1";
  for (int k = 0; k < 5000; ++k) chain += "+1";
  expect_error(chain + " }}", "chained or nested deeper");
  expect_error("{% set ns = namespace(s=[1]) %}{% for i in range(3000) %}{% set ns.s = [ns.s] %}{% endfor %}{{ ns.s }}",
               "nested deeper than 1000");
  // Empty loop bodies count (a smaller budget than the default 10 million keeps the test short).
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
               "rendering passed 100000 steps", "{}", 100000);
  expect_error("{% set s = 'a' * 30000000 %}{% set l = [s, s, s] %}", "a value passed");
  expect_error("{{ '99999999999999999999999'|int }}", "integer overflow");
  expect_error("{{ (-9223372036854775807 - 1)|abs }}", "integer overflow");
  expect_error("{{ '\\U00110000' }}", "not a Unicode scalar value");
  EXPECT_EQ(render("{{ range(100000)|map('string')|unique|list|length }}|{{ 2.5|round(-400) }}|{{ 'a\\x0bb'.splitlines() }}"),
            "100000|0.0|['a', 'b']");
  EXPECT_EQ(render("{{ strftime_now('%d%z%Z') }}|{{ 1|nonsense if false else 2 }}"), "26|2");
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  expect_error("a\n{% if x %}", "t line 2");
  expect_error("{% if x %}{% endfor %}", "unknown tag 'endfor'");
  expect_error("{{ 'a' ", "not closed");
  expect_error("{% include 'x' %}", "not supported");
  expect_error("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}", "nested deeper");
}

}  // namespace
}  // namespace lol::jinja
