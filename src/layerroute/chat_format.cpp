#include "layerroute/chat_format.h"

#include <algorithm>

#include "hf/hf_chat.h"
#include "tokenizers/chat_template.h"
#include "util/error.h"

namespace lol::layerroute {

namespace {

std::string sample_name(const Sample& s) { return s.where.empty() ? std::string("sample") : s.where; }

// The sample's messages with the format's system message first when it has none.
nlohmann::ordered_json conversation(const nlohmann::ordered_json& messages, const ChatFormat& f) {
  nlohmann::ordered_json out = messages;
  const bool has_system = !out.empty() && out[0].is_object() && out[0].value("role", std::string()) == "system";
  if (!has_system && !f.system.empty())
    out.insert(out.begin(), nlohmann::ordered_json{{"role", "system"}, {"content", f.system}});
  return out;
}

std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools, bool generation_prompt,
                   const ChatFormat& f, const std::string& sample) {
  tokenizers::ChatTemplateOptions o;
  o.add_generation_prompt = generation_prompt;
  if (!tools.is_null()) o.tools = tools;
  o.now = kChatTemplateDate;
  try {
    return tokenizers::render_chat_template(tools.is_null() ? f.jinja : f.jinja_tools, f.where, messages, o, f.tok);
  } catch (const InputError& e) {
    throw InputError(sample + ": " + e.what());
  }
}

// Length of the common prefix of two sequences (token ids or bytes).
template <class Seq>
size_t common_prefix(const Seq& a, const Seq& b) {
  return size_t(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Byte offsets [begin, end) in `text` of the assistant messages' tokens (see the header).
// Spans starting at or after byte `limit` are not looked for (they lie past the cut:
// each costs a rendering of the conversation so far).
std::vector<std::pair<size_t, size_t>> assistant_spans(const nlohmann::ordered_json& msgs, const Sample& s,
                                                       const ChatFormat& f, const std::string& text,
                                                       const std::string& name, size_t limit, bool* stopped) {
  auto refuse = [&](size_t i, const std::string& what, const std::string& advice) {
    throw InputError(name + ": the chat template (" + f.where + ") " + what + ", so the tokens of assistant message " +
                     std::to_string(i) + " cannot be located in the whole conversation" + advice);
  };
  auto is_prefix = [&](const std::string& part) { return text.compare(0, part.size(), part) == 0; };
  std::vector<std::pair<size_t, size_t>> spans;
  nlohmann::ordered_json upto = nlohmann::ordered_json::array();
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    const bool assistant = m.is_object() && m.value("role", std::string()) == "assistant";
    if (!assistant) {
      upto.push_back(m);
      continue;
    }
    // Start: where the answer begins after the generation prompt. A generation prompt
    // that the whole conversation does not repeat (DeepSeek-R1's "<think>\n") counts up
    // to where the two part, provided the turns before are rendered alike.
    const std::string prompt = render(upto, s.tool_schemas, true, f, name);
    size_t a = prompt.size(), history_end = std::string::npos;
    if (!is_prefix(prompt)) {
      const std::string history = render(upto, s.tool_schemas, false, f, name);
      history_end = history.size();
      a = common_prefix(prompt, text);
      if (!is_prefix(history) || a < history.size())
        refuse(i, "renders the messages before an assistant message differently once it follows (a template that "
                  "rewrites earlier turns, or moves the system prompt into the last user turn)", "");
    }
    if (a >= limit) {
      *stopped = true;
      break;
    }
    upto.push_back(m);
    const std::string turn = render(upto, s.tool_schemas, false, f, name);
    if (!is_prefix(turn) || turn.size() < a)
      refuse(i, "renders an assistant message differently once later messages follow (e.g. it drops the "
                "reasoning of earlier turns)", "; split the conversation into one sample per assistant turn");
    const std::string* content = m.contains("content") && m["content"].is_string() &&
                                         !m["content"].get_ref<const std::string&>().empty()
                                     ? &m["content"].get_ref<const std::string&>()
                                     : nullptr;
    // An unrepeated generation prompt that the answer happens to begin like ("<think>\n"
    // and an answer "<th>..."): the answer starts no later than its own text, when the
    // template writes it verbatim after the turns before.
    if (history_end != std::string::npos && content) {
      const size_t at = text.find(*content, history_end);
      if (at != std::string::npos && at < a && at + content->size() <= turn.size()) a = at;
    }
    // End: the turn's rendering without the white space that ends it, but not before the
    // end of the message's own text when it is there verbatim (an answer's trailing
    // white space is the assistant's).
    size_t floor = a, b = turn.size();
    if (content && content->size() <= b - a) {
      const size_t at = text.rfind(*content, b - content->size());
      if (at != std::string::npos && at >= a) floor = at + content->size();
    }
    while (b > floor && is_space(text[b - 1])) --b;
    if (b > a) spans.emplace_back(a, b);
  }
  return spans;
}

Example tokenize_with_template(const Sample& s, const tokenizers::Tokenizer& tok, const ChatFormat& f,
                               int64_t max_len) {
  const std::string name = sample_name(s);
  const auto msgs = conversation(s.messages, f);
  const std::string text = render(msgs, s.tool_schemas, false, f, name);
  Example e;
  e.source = s.source;
  e.where = s.where;
  e.tokens = tok.encode(text);
  e.loss_mask.assign(e.tokens.size(), 0);
  // Each token's bytes, when the tokens decode back to the text piece by piece (byte-level
  // BPE): a token is assistant when it holds a byte of a span.
  std::vector<size_t> end_of(e.tokens.size());
  std::string joined;
  for (size_t t = 0; t < e.tokens.size(); ++t) {
    joined += tok.decode_inner(&e.tokens[t], 1);
    end_of[t] = joined.size();
  }
  const bool exact = joined == text;
  const size_t limit = exact && max_len > 0 && int64_t(e.tokens.size()) > max_len ? end_of[size_t(max_len) - 1]
                                                                                   : std::string::npos;
  bool stopped = false;
  const auto spans = assistant_spans(msgs, s, f, text, name, limit, &stopped);
  if (exact) {
    for (const auto& [a, b] : spans) {
      size_t t = size_t(std::upper_bound(end_of.begin(), end_of.end(), a) - end_of.begin());  // first token ending past a
      e.prompt_len = int64_t(t);
      for (; t < e.tokens.size() && (t == 0 ? 0 : end_of[t - 1]) < b; ++t) e.loss_mask[t] = 1;
    }
    // The last assistant message begins past the cut: its prompt is the whole cut.
    if (stopped) e.prompt_len = max_len;
    return e;
  }
  // Otherwise (a normalizer or a Metaspace prefix changes the bytes): the tokens of the
  // text up to a span's start are those where encoding that prefix agrees with the
  // whole; the first token where they part, and every one up to the last token that
  // encoding the text up to the span's end does not reproduce, are assistant.
  for (const auto& [a, b] : spans) {
    const size_t first = common_prefix(tok.encode(std::string_view(text).substr(0, a)), e.tokens);
    const auto before_end = tok.encode(std::string_view(text).substr(0, b));
    size_t end = common_prefix(before_end, e.tokens);
    if (end < before_end.size()) end = std::min(end + 1, e.tokens.size());  // token `end` holds bytes on both sides
    for (size_t t = first; t < end; ++t) e.loss_mask[t] = 1;
    e.prompt_len = int64_t(first);
  }
  return e;
}

}  // namespace

ChatFormat chat_format_for(const tokenizers::Tokenizer& tok, const std::string& where, const std::string& system_flag) {
  ChatFormat f;
  f.where = where;
  f.tok = &tok;
  const std::string& t = tok.chat_template();
  const bool chatml_tokens = tok.token_to_id("<|im_start|>") && tok.token_to_id("<|im_end|>");
  const auto chatml_system = t.empty() ? std::optional<std::string>("") : hf::chatml_default_system(t);
  if (chatml_tokens && chatml_system && hf::chatml_unsupported_construct(t).empty()) {
    f.system = system_flag == "auto" ? *chatml_system : system_flag;
    return f;
  }
  f.jinja = tokenizers::select_chat_template(tok, "", false, where);
  if (f.jinja.empty())
    throw InputError(where + ": the tokenizer has neither a chat template (tokenizer_config.json \"chat_template\" "
                             "or chat_template.jinja) nor the ChatML tokens <|im_start|>/<|im_end|>: LayerRoute "
                             "cannot tell the assistant's tokens from the prompt's");
  f.jinja_tools = tokenizers::select_chat_template(tok, "", true, where);
  f.system = system_flag == "auto" ? std::string() : system_flag;
  return f;
}

std::string render_sample(const Sample& s, const ChatFormat& f) {
  if (f.chatml()) return render_chatml(s, f.system);
  return render(conversation(s.messages, f), s.tool_schemas, false, f, sample_name(s));
}

Example tokenize_sample(const Sample& s, const tokenizers::Tokenizer& tok, int64_t max_len, const ChatFormat& f,
                        LossTokens loss) {
  if (f.chatml()) return tokenize_sample(s, tok, max_len, f.system, loss);
  Example e = tokenize_with_template(s, tok, f, max_len);
  cut_example(e, max_len, loss);
  return e;
}

std::string generation_prompt(const std::string& user, const std::optional<std::string>& system, const ChatFormat& f) {
  const std::string sys = system.value_or(f.system);
  if (f.chatml()) {
    Sample s;
    s.turns.push_back({"user", user});
    return render_chatml(s, sys) + "<|im_start|>assistant\n";
  }
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  if (!sys.empty()) msgs.push_back({{"role", "system"}, {"content", sys}});
  msgs.push_back({{"role", "user"}, {"content", user}});
  return render(msgs, nullptr, true, f, "--prompt");
}

std::optional<int32_t> turn_end_token(const tokenizers::Tokenizer& tok, const ChatFormat& f) {
  Sample s;
  s.turns = {{"user", "Hi"}, {"assistant", "Hello"}};
  s.messages = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hello"}}};
  Example e;
  try {
    e = tokenize_sample(s, tok, 0, f);
  } catch (const InputError&) {
    return std::nullopt;  // a template that needs more than one exchange: no stop token of its own
  }
  for (size_t i = e.tokens.size(); i-- > 0;) {
    if (!e.loss_mask[i]) continue;
    for (const auto& a : tok.added_tokens())
      if (a.id == e.tokens[i]) return a.id;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace lol::layerroute
