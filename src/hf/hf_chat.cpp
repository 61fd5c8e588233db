#include "hf/hf_chat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/json_file.h"
#include "util/error.h"

namespace lol::hf {

namespace {

/// Undoes the escapes of a Jinja (Python-style) string literal's body.
std::string jinja_unescape(const std::string& body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char e = body[++i];
    out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;  // \\ \' \" and others: the character
  }
  return out;
}

/// The pieces of text a Jinja template can emit verbatim: the raw text between tags,
/// and every string literal inside {{ ... }} / {% ... %} (escapes undone). Comments
/// {# ... #} are skipped. An unterminated tag or literal ends the scan.
std::vector<std::string> jinja_text_pieces(const std::string& t) {
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = t.size();
  while (i < n) {
    const size_t tag = std::min({t.find("{{", i), t.find("{%", i), t.find("{#", i)});
    if (tag > i) out.push_back(t.substr(i, std::min(tag, n) - i));
    if (tag == std::string::npos) break;
    const char kind = t[tag + 1];
    if (kind == '#') {
      const size_t e = t.find("#}", tag + 2);
      if (e == std::string::npos) break;
      i = e + 2;
      continue;
    }
    const std::string close = kind == '{' ? "}}" : "%}";
    size_t j = tag + 2;
    bool closed = false;
    while (j < n) {
      const char c = t[j];
      if (c == '\'' || c == '"') {
        std::string body;
        size_t k = j + 1;
        for (; k < n && t[k] != c; ++k) {
          body += t[k];
          if (t[k] == '\\' && k + 1 < n) body += t[++k];
        }
        if (k >= n) return out;  // unterminated literal
        out.push_back(jinja_unescape(body));
        j = k + 1;
      } else if (t.compare(j, 2, close) == 0) {
        j += 2;
        closed = true;
        break;
      } else {
        ++j;
      }
    }
    if (!closed) break;
    i = j;
  }
  return out;
}

}  // namespace

std::optional<std::string> chatml_default_system(const std::string& jinja) {
  if (jinja.find("<|im_start|>") == std::string::npos || jinja.find("<|im_end|>") == std::string::npos)
    return std::nullopt;
  // A literal system turn: one piece of emitted text (a string literal or raw text)
  // holding "<|im_start|>system" + newline + text + "<|im_end|>". A turn built from
  // messages[0]['content'] spans several pieces and is skipped.
  const std::string head = "<|im_start|>system\n";
  for (const auto& piece : jinja_text_pieces(jinja)) {
    const size_t at = piece.find(head);
    if (at == std::string::npos) continue;
    const size_t begin = at + head.size();
    const size_t end = piece.find("<|im_end|>", begin);
    if (end == std::string::npos || end == begin) continue;
    return piece.substr(begin, end - begin);
  }
  return std::string();
}

std::string chatml_unsupported_construct(const std::string& jinja) {
  for (const char* filter : {"| trim", "|trim", ".strip(", ".lstrip(", ".rstrip(", ".split("})
    if (jinja.find(filter) != std::string::npos)
      return std::string("it changes the message text (") + filter + ")";
  if (jinja.find("bos_token") != std::string::npos) return "it uses bos_token";
  if (jinja.find("<think>") != std::string::npos) return "it adds a <think> block";
  const std::string header = "<|im_start|>assistant\n";
  for (const auto& piece : jinja_text_pieces(jinja)) {
    const size_t at = piece.find(header);
    if (at != std::string::npos && at + header.size() < piece.size())
      return "its assistant header is followed by more text (\"" + piece.substr(at + header.size(), 20) + "\")";
  }
  return std::string();
}

std::string chatml_system_prompt(const tokenizers::Tokenizer& tok, const std::string& where) {
  if (!tok.token_to_id("<|im_start|>") || !tok.token_to_id("<|im_end|>"))
    throw InputError(where + ": the tokenizer has no <|im_start|>/<|im_end|> tokens: expected a ChatML tokenizer "
                             "(Qwen2/Qwen2.5); ChatML markers would be encoded as plain text");
  const std::string& t = tok.chat_template();
  if (t.empty()) return std::string();
  const auto system = chatml_default_system(t);
  if (!system)
    throw InputError(where + ": chat_template is not ChatML (no <|im_start|>/<|im_end|> turns); only ChatML "
                             "templates (Qwen2/Qwen2.5 instruct) are supported");
  const std::string construct = chatml_unsupported_construct(t);
  if (!construct.empty())
    throw InputError(where + ": chat_template is ChatML, but " + construct +
                     ", which LayerRoute's ChatML rendering (layerroute/data.h) does not reproduce; LayerRoute "
                     "trains on plain ChatML templates (Qwen2/Qwen2.5 instruct)");
  return *system;
}

std::string chat_template_source(const std::string& dir) {
  const auto jinja = std::filesystem::path(dir) / "chat_template.jinja";
  std::error_code ec;
  if (std::filesystem::is_regular_file(jinja, ec)) return jinja.string();
  return (std::filesystem::path(dir) / "tokenizer_config.json").string() + ": chat_template";
}

std::string format_chat(const tokenizers::Tokenizer& tok, const std::vector<tokenizers::ChatMessage>& messages,
                        const tokenizers::ChatTemplateOptions& options, const std::string& where) {
  return format_chat(tok, tokenizers::messages_json(messages), options, where);
}

std::string format_chat(const tokenizers::Tokenizer& tok, const nlohmann::ordered_json& messages,
                        const tokenizers::ChatTemplateOptions& options, const std::string& where) {
  const std::string tmpl = tokenizers::select_chat_template(tok, options.template_name, options.tools.has_value(), where);
  if (tmpl.empty())
    throw InputError(where + ": the tokenizer has no chat template (tokenizer_config.json \"chat_template\" or "
                             "chat_template.jinja), which --chat and --messages need (without them, --prompt is "
                             "used as plain text)");
  return tokenizers::render_chat_template(
      tmpl, options.template_name.empty() ? where : where + " \"" + options.template_name + "\"", messages, options, &tok);
}

void add_chatml_stop(const tokenizers::Tokenizer* tok, std::vector<int64_t>& stops) {
  const auto im_end = tok ? tok->token_to_id("<|im_end|>") : std::nullopt;
  if (im_end && std::find(stops.begin(), stops.end(), *im_end) == stops.end()) stops.push_back(*im_end);
}

std::vector<int64_t> stop_tokens(const std::string& dir, const HfConfig& cfg, const tokenizers::Tokenizer* tok) {
  std::vector<int64_t> out;
  auto add = [&](int64_t id) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  for (int64_t id : cfg.eos_token_id) add(id);
  const std::string gen = dir + "/generation_config.json";
  if (std::filesystem::exists(gen)) {
    const auto j = io::read_json_file(gen);
    require(j.is_object(), gen, "expected a JSON object");
    for (int64_t id : token_id_list(j, "eos_token_id", gen)) add(id);
  }
  if (tok && tok->eos_id()) add(*tok->eos_id());
  return out;
}

std::optional<inference::SamplingOptions> generation_sampling_defaults(const std::string& dir) {
  const std::string path = dir + "/generation_config.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  const auto j = io::read_json_file(path);
  require(j.is_object(), path, "expected a JSON object");
  // transformers: an absent field takes GenerationConfig's default; a null one is kept as
  // None, which turns its logits processor off.
  // Throws naming the field and its value (or "absent": the default was refused) unless ok.
  auto ensure = [&](bool ok, const char* key, const std::string& expected) {
    if (ok) return;
    const std::string value = j.contains(key) ? j.at(key).dump() : std::string("absent");
    throw InputError(path + ": field '" + key + "' = " + value + ": " + expected);
  };
  auto number = [&](const char* key, double absent, double null) {
    if (!j.contains(key)) return absent;
    const auto& v = j.at(key);
    if (v.is_null()) return null;
    ensure(v.is_number(), key, "expected a number");
    return v.get<double>();
  };
  bool do_sample = false;
  if (j.contains("do_sample") && !j.at("do_sample").is_null()) {
    ensure(j.at("do_sample").is_boolean(), "do_sample", "expected true or false");
    do_sample = j.at("do_sample").get<bool>();
  }
  inference::SamplingOptions o;
  o.repetition_penalty = number("repetition_penalty", 1.0, 1.0);
  ensure(inference::valid_repetition_penalty(o.repetition_penalty), "repetition_penalty",
         "expected a value > 0 that float32 holds (1 = off)");
  if (!do_sample) return o;  // greedy: transformers ignores the sampling fields then
  o.temperature = number("temperature", 1.0, 1.0);
  ensure(o.temperature > 0 && std::isfinite(o.temperature), "temperature",
         "expected a finite value > 0 with do_sample = true (greedy is do_sample = false)");
  const double top_k = number("top_k", 50, 0);
  ensure(top_k >= 0 && top_k == std::floor(top_k) && top_k < 1e15, "top_k", "expected an integer >= 0 (0 or null = off)");
  o.top_k = int64_t(top_k);
  o.top_p = number("top_p", 1.0, 1.0);
  ensure(o.top_p >= 0 && o.top_p <= 1, "top_p", "expected 0 <= top_p <= 1");
  return o;
}

std::vector<std::string> generation_config_unapplied(const std::string& dir) {
  const std::string path = dir + "/generation_config.json";
  std::vector<std::string> out;
  if (!std::filesystem::exists(path)) return out;
  const auto j = io::read_json_file(path);
  if (!j.is_object()) return out;
  // transformers' GenerationConfig defaults of the fields that change what generate()
  // does and that lol does not implement (null: None).
  static const std::vector<std::pair<const char*, nlohmann::json>> fields = {
      {"max_length", nullptr},  // listed whenever set: --max-new decides
      {"max_new_tokens", nullptr},
      {"min_length", 0},
      {"min_new_tokens", nullptr},
      {"num_beams", 1},
      {"num_beam_groups", 1},
      {"num_return_sequences", 1},
      {"penalty_alpha", nullptr},
      {"typical_p", 1.0},
      {"min_p", nullptr},
      {"epsilon_cutoff", 0.0},
      {"eta_cutoff", 0.0},
      {"diversity_penalty", 0.0},
      {"encoder_repetition_penalty", 1.0},
      {"no_repeat_ngram_size", 0},
      {"bad_words_ids", nullptr},
      {"force_words_ids", nullptr},
      {"forced_bos_token_id", nullptr},
      {"forced_eos_token_id", nullptr},
      {"suppress_tokens", nullptr},
      {"begin_suppress_tokens", nullptr},
      {"sequence_bias", nullptr},
      {"exponential_decay_length_penalty", nullptr},
      {"guidance_scale", nullptr},
      {"stop_strings", nullptr},
      {"max_time", nullptr},
      {"dola_layers", nullptr},
      {"renormalize_logits", false},
  };
  for (const auto& [key, def] : fields) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    const bool is_default = !def.is_null() && (it->is_number() && def.is_number()
                                                   ? it->get<double>() == def.get<double>()
                                                   : *it == def);
    if (!is_default) out.push_back(std::string("field '") + key + "' = " + it->dump());
  }
  return out;
}

}  // namespace lol::hf
