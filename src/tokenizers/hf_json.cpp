#include "tokenizers/hf_json.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "tokenizers/byte_tokenizer.h"
#include "tokenizers/byte_unicode.h"
#include "tokenizers/regex_splitter.h"
#include "tokenizers/sentencepiece_bpe.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol::tokenizers {
namespace {

namespace fs = std::filesystem;

bool opt_bool(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return false;
  require(j[key].is_boolean(), where + "." + key, "expected true or false");
  return j[key].get<bool>();
}

std::unordered_map<std::string, int32_t> parse_vocab(const nlohmann::json& v, const std::string& where) {
  require(v.is_object(), where, "expected an object {token: id}");
  require(!v.empty(), where,
          "empty: expected the model's tokens (a byte-level BPE holds at least its 256 byte symbols; "
          "with none, every text would encode to 0 tokens)");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(v.size());
  for (auto it = v.begin(); it != v.end(); ++it) {
    require(it.value().is_number_integer() && it.value().get<int64_t>() >= 0 && it.value().get<int64_t>() < INT32_MAX,
            where + "[\"" + it.key() + "\"]", "expected a non-negative integer id");
    vocab.emplace(it.key(), it.value().get<int32_t>());
  }
  return vocab;
}

std::pair<std::string, std::string> split_merge(const std::string& line, const std::string& where) {
  const std::size_t sp = line.find(' ');
  require(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
          where, "expected \"left right\" (two tokens separated by one space), got \"" + line + "\"");
  return {line.substr(0, sp), line.substr(sp + 1)};
}

std::vector<std::pair<std::string, std::string>> parse_merges(const nlohmann::json& m, const std::string& where) {
  require(m.is_array(), where, "expected an array of \"a b\" strings or [a, b] pairs");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const auto& e = m[i];
    if (e.is_string()) {
      merges.push_back(split_merge(e.get<std::string>(), w));
    } else {
      require(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(), w,
              "expected \"a b\" or [\"a\", \"b\"]");
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
  }
  return merges;
}

// True when the model is the plain byte vocabulary: 256 tokens, id == byte, no merges.
bool is_byte_vocab(const std::unordered_map<std::string, int32_t>& vocab, std::size_t n_merges) {
  if (n_merges != 0 || vocab.size() != 256) return false;
  std::string bytes;
  for (const auto& [tok, id] : vocab) {
    if (!token_to_bytes(tok, bytes) || bytes.size() != 1 || static_cast<unsigned char>(bytes[0]) != id) return false;
  }
  return true;
}

void collect_template(const nlohmann::json& p, const std::string& where, const Tokenizer& tok, bool& any,
                      std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  const std::string type = util::type_at(p, where);
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    require(p.contains("processors") && p["processors"].is_array(), where + ".processors", "expected an array");
    for (std::size_t i = 0; i < p["processors"].size(); ++i)
      collect_template(p["processors"][i], where + ".processors[" + std::to_string(i) + "]", tok, any, prefix, suffix);
    return;
  }
  require(type == "TemplateProcessing", where + ".type",
          "unsupported post-processor \"" + type + "\" (supported: ByteLevel, TemplateProcessing, Sequence)");
  require(!any, where, "more than one TemplateProcessing");
  any = true;
  if (!p.contains("single")) return;
  require(p["single"].is_array(), where + ".single", "expected an array");
  bool seen_a = false;
  for (std::size_t i = 0; i < p["single"].size(); ++i) {
    const auto& item = p["single"][i];
    const std::string w = where + ".single[" + std::to_string(i) + "]";
    if (item.contains("Sequence")) {
      seen_a = true;
      continue;
    }
    require(item.contains("SpecialToken") && item["SpecialToken"].contains("id") &&
                item["SpecialToken"]["id"].is_string(),
            w, "expected {\"SpecialToken\": {\"id\": name}} or {\"Sequence\": {...}}");
    const std::string name = item["SpecialToken"]["id"].get<std::string>();
    std::vector<int32_t> ids;
    if (p.contains("special_tokens") && p["special_tokens"].contains(name) &&
        p["special_tokens"][name].contains("ids")) {
      for (const auto& id : p["special_tokens"][name]["ids"]) {
        const std::string iw = where + ".special_tokens." + name + ".ids";
        require(id.is_number_integer(), iw, "expected integers");
        // encode would put it in front of every text, and decode could not read it back.
        require(id.get<int64_t>() >= 0 && id.get<int64_t>() < tok.vocab_size() && tok.id_to_token(int32_t(id.get<int64_t>())),
                iw, "id " + id.dump() + " is not a token of this tokenizer (expected an id in [0, " +
                        std::to_string(tok.vocab_size()) + ") that the vocabulary or added_tokens define)");
        ids.push_back(id.get<int32_t>());
      }
    } else {
      // Hugging Face refuses such a file ("Missing SpecialToken(s) with id(s)").
      throw InputError(w + ": special token '" + name + "' is not in " + where +
                       ".special_tokens (expected an entry {\"id\": name, \"ids\": [...]} for every SpecialToken)");
    }
    auto& dst = seen_a ? suffix : prefix;
    dst.insert(dst.end(), ids.begin(), ids.end());
  }
}

/// added_tokens and post_processor of tokenizer.json `j`, applied to `tok`.
void add_tokens_and_post_processor(const nlohmann::json& j, const std::string& where, Tokenizer& tok) {
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    require(j["added_tokens"].is_array(), where + ": added_tokens", "expected an array");
    for (std::size_t i = 0; i < j["added_tokens"].size(); ++i) {
      const std::string w = where + ": added_tokens[" + std::to_string(i) + "]";
      AddedToken t = AddedToken::from_json(j["added_tokens"][i], w);
      // The id Hugging Face gives it, whatever the file says (the same for files
      // Hugging Face wrote; a file with gaps or clashes gets the ids HF would use).
      try {
        tok.add_token_as_hf(t);
      } catch (const InputError& e) {
        throw InputError(w + ": " + e.what());
      }
    }
  }

  if (j.contains("post_processor") && !j["post_processor"].is_null()) {
    bool any = false;
    std::vector<int32_t> prefix, suffix;
    collect_template(j["post_processor"], where + ": post_processor", tok, any, prefix, suffix);
    if (any) tok.set_post_processor(j["post_processor"], std::move(prefix), std::move(suffix));
  }
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_hf_json(const nlohmann::json& j, const std::string& where) {
  require(j.is_object(), where, "expected a JSON object (Hugging Face tokenizer.json)");
  require(j.contains("model") && j["model"].is_object(), where + ": model", "missing or not an object");
  const auto& m = j["model"];
  const std::string mw = where + ": model";
  if (m.contains("type")) {
    require(m["type"] == "BPE", mw + ".type",
            "only \"BPE\" is supported, got " + m["type"].dump());
  }
  auto forbid_string = [&](const char* key) {
    if (!m.contains(key) || m[key].is_null()) return;
    require(m[key].is_string() && m[key].get<std::string>().empty(), mw + "." + key,
            "only null or \"\" is supported, got " + m[key].dump());
  };
  forbid_string("continuing_subword_prefix");
  forbid_string("end_of_word_suffix");
  // Byte-level BPE (GPT-2, Qwen2, Llama 3) has a ByteLevel decoder; the SentencePiece
  // conversions (Llama 2, Mistral, Gemma) spell tokens in UTF-8 with byte fallback.
  const bool byte_fallback = opt_bool(m, "byte_fallback", mw);
  // The decoder tells byte-level BPE from SentencePiece-style BPE: ByteLevel, or a
  // Sequence holding only ByteLevel (the same decoding).
  // A step's "type" ("" when absent or not a string: such a step is refused where it is read).
  auto type_of = [](const nlohmann::json& d) {
    const auto it = d.is_object() ? d.find("type") : d.end();
    return it != d.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto is_byte_level_step = [&](const nlohmann::json& d) { return type_of(d) == "ByteLevel"; };
  const nlohmann::json decoder = j.value("decoder", nlohmann::json(nullptr));
  const bool byte_level =
      is_byte_level_step(decoder) ||
      (type_of(decoder) == "Sequence" && decoder.contains("decoders") &&
       decoder["decoders"].is_array() && decoder["decoders"].size() == 1 && is_byte_level_step(decoder["decoders"][0]));
  if (!byte_level) {
    // A ByteLevel pre-tokenizer without a ByteLevel decoder: Hugging Face would decode
    // to the byte-level spellings joined by spaces ("Ġhello Ġworld"), which lol does not.
    const nlohmann::json pre = j.value("pre_tokenizer", nlohmann::json(nullptr));
    bool pre_byte_level = is_byte_level_step(pre);
    if (type_of(pre) == "Sequence" && pre.contains("pretokenizers") &&
        pre["pretokenizers"].is_array())
      for (const auto& step : pre["pretokenizers"]) pre_byte_level = pre_byte_level || is_byte_level_step(step);
    require(!pre_byte_level, where + ": decoder",
            decoder.dump() + " with a ByteLevel pre_tokenizer: expected a ByteLevel decoder (byte-level BPE; "
            "Hugging Face would decode to the byte-level token spellings joined by spaces)");
  }
  require(!(byte_level && byte_fallback), mw + ".byte_fallback",
          "expected false with a ByteLevel decoder (byte-level BPE needs no byte fallback)");
  if (m.contains("dropout") && !m["dropout"].is_null()) {
    require(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0, mw + ".dropout",
            "only null or 0 is supported (BPE dropout is a training-time option)");
  }
  require(m.contains("vocab"), mw + ".vocab", "missing");
  require(m.contains("merges"), mw + ".merges", "missing");
  const auto vocab = parse_vocab(m["vocab"], mw + ".vocab");
  const auto merges = parse_merges(m["merges"], mw + ".merges");
  BpeOptions opts;
  if (m.contains("unk_token") && !m["unk_token"].is_null()) {
    require(m["unk_token"].is_string(), mw + ".unk_token", "expected a string or null");
    opts.unk_token = m["unk_token"].get<std::string>();
  }
  opts.fuse_unk = opt_bool(m, "fuse_unk", mw);
  opts.ignore_merges = opt_bool(m, "ignore_merges", mw);
  opts.byte_level = byte_level;
  opts.byte_fallback = byte_fallback;
  if (!byte_level) {
    auto model = std::make_shared<const BpeModel>(vocab, merges, opts, mw);
    auto tok = std::make_unique<SentencePieceBpeTokenizer>(std::move(model), SentencePiecePipeline::from_json(j, where));
    add_tokens_and_post_processor(j, where, *tok);
    return tok;
  }

  // normalizer
  const nlohmann::json normalizer_json = j.value("normalizer", nlohmann::json(nullptr));
  Normalizer normalizer = Normalizer::from_json(normalizer_json, where + ": normalizer");
  // pre_tokenizer
  PreTokenizer pre = PreTokenizer::from_json(j.value("pre_tokenizer", nlohmann::json(nullptr)), where + ": pre_tokenizer");

  std::unique_ptr<Tokenizer> tok;
  // A 256-byte vocabulary without merges gives one id per byte whatever the splits,
  // unless a step adds a space or removes text (Split with behavior Removed).
  const bool plain_pre = [&] {
    for (const auto& s : pre.steps())
      if (s.add_prefix_space || s.behavior == PreTokenizer::Step::Behavior::kRemoved) return false;
    return true;
  }();
  if (is_byte_vocab(vocab, merges.size()) && plain_pre && normalizer_json.is_null() && opts.unk_token.empty()) {
    tok = std::make_unique<ByteTokenizer>(std::vector<std::string>{});
  } else {
    auto model = std::make_shared<const BpeModel>(vocab, merges, opts, mw);
    tok = std::make_unique<BpeTokenizer>(std::move(model), std::move(pre), std::move(normalizer));
  }

  add_tokens_and_post_processor(j, where, *tok);
  return tok;
}

std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& file) {
  return tokenizer_from_hf_json(io::read_json_file(file), file);
}

std::unique_ptr<BpeTokenizer> load_vocab_merges(const std::string& vocab_json, const std::string& merges_txt,
                                                const std::string& pattern) {
  const auto vocab = parse_vocab(io::read_json_file(vocab_json), vocab_json);
  std::vector<std::pair<std::string, std::string>> merges;
  {
    std::ifstream f(merges_txt, std::ios::binary);
    require(bool(f), merges_txt, "cannot open for reading");
    std::string line;
    for (int64_t ln = 1; std::getline(f, line); ++ln) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      merges.push_back(split_merge(line, merges_txt + ":" + std::to_string(ln)));
    }
  }
  auto model = std::make_shared<const BpeModel>(vocab, merges, BpeOptions{}, vocab_json + " + " + merges_txt);
  auto tok = std::make_unique<BpeTokenizer>(
      std::move(model), pattern.empty() ? PreTokenizer::gpt2() : PreTokenizer::from_pattern(pattern));
  const std::string eot = "<|endoftext|>";
  if (tok->token_to_id(eot)) {
    AddedToken t;
    t.content = eot;
    t.special = true;
    tok->add_token(t);
    tok->set_bos_token(eot);
    tok->set_eos_token(eot);
  }
  return tok;
}

namespace {

// "bos_token": "x" | {"content": "x", ...} | null -> "x" or "".
std::string role_name(const nlohmann::json& cfg, const char* key, const std::string& where) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  require(v.is_object() && v.contains("content") && v["content"].is_string(), where + "." + key,
          "expected a string, {\"content\": string, ...} or null");
  return v["content"].get<std::string>();
}

}  // namespace

namespace {

/// transformers' Llama-family fast tokenizers (LlamaTokenizerFast, CodeLlama, Gemma)
/// rebuild the post-processor from tokenizer_config.json when they load
/// (update_post_processor): `single` = [BOS if add_bos_token (default true)] $A [EOS if
/// add_eos_token (default false)], whatever tokenizer.json's post_processor says.
void apply_llama_bos_eos(Tokenizer& tok, const nlohmann::json& cfg, const std::string& config_file) {
  static const char* kClasses[] = {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                   "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"};
  const auto cls = cfg.find("tokenizer_class");
  if (cls == cfg.end() || !cls->is_string() ||
      std::none_of(std::begin(kClasses), std::end(kClasses), [&](const char* c) { return *cls == c; }))
    return;
  const auto flag = [&](const char* key, bool fallback) {
    const auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return fallback;
    require(it->is_boolean(), config_file + ": " + key, "expected true or false");
    return it->get<bool>();
  };
  const bool add_bos = flag("add_bos_token", true), add_eos = flag("add_eos_token", false);
  nlohmann::json single = nlohmann::json::array(), pair = nlohmann::json::array(), specials = nlohmann::json::object();
  std::vector<int32_t> prefix, suffix;
  const auto special = [&](const char* flag, const char* role, std::optional<int32_t> id, int type_id,
                           nlohmann::json& seq, std::vector<int32_t>* ids) {
    require(id.has_value(), config_file + ": " + flag,
            std::string("true, but the tokenizer has no ") + role + " (as transformers refuses)");
    const std::string name = *tok.id_to_token(*id);
    seq.push_back({{"SpecialToken", {{"id", name}, {"type_id", type_id}}}});
    specials[name] = {{"id", name}, {"ids", {*id}}, {"tokens", {name}}};
    if (ids) ids->push_back(*id);
  };
  for (int part = 0; part < 2; ++part) {
    nlohmann::json& seq = part == 0 ? single : pair;
    for (int type_id = 0; type_id <= part; ++type_id) {
      if (add_bos) special("add_bos_token", "bos_token", tok.bos_id(), type_id, seq, part == 0 ? &prefix : nullptr);
      seq.push_back({{"Sequence", {{"id", type_id == 0 ? "A" : "B"}, {"type_id", type_id}}}});
      if (add_eos) special("add_eos_token", "eos_token", tok.eos_id(), type_id, seq, part == 0 ? &suffix : nullptr);
    }
  }
  tok.set_post_processor({{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}},
                         std::move(prefix), std::move(suffix));
}

}  // namespace

void apply_tokenizer_config(Tokenizer& tok, const std::string& config_file) {
  const nlohmann::json cfg = io::read_json_file(config_file);
  require(cfg.is_object(), config_file, "expected a JSON object");
  if (cfg.contains("added_tokens_decoder") && !cfg["added_tokens_decoder"].is_null()) {
    const auto& d = cfg["added_tokens_decoder"];
    require(d.is_object(), config_file + ": added_tokens_decoder", "expected an object {id: token}");
    std::vector<std::pair<int64_t, AddedToken>> entries;
    for (auto it = d.begin(); it != d.end(); ++it) {
      const std::string w = config_file + ": added_tokens_decoder[\"" + it.key() + "\"]";
      int64_t id = -1;
      try {
        std::size_t used = 0;
        id = std::stoll(it.key(), &used);
        if (used != it.key().size()) id = -1;
      } catch (...) {
      }
      require(id >= 0 && id < INT32_MAX, w, "expected a non-negative integer key");
      nlohmann::json e = it.value();
      require(e.is_object(), w, "expected an object");
      e["id"] = id;
      entries.emplace_back(id, AddedToken::from_json(e, w));
    }
    // As transformers: in id order, tokens the tokenizer lacks are added and get the id
    // Hugging Face `tokenizers` assigns (the key when the file is consistent; InternLM2
    // lists ids that the vocabulary gives to other strings).
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [id, t] : entries) {
      try {
        tok.add_token_as_hf(t);
      } catch (const InputError& ex) {
        throw InputError(config_file + ": added_tokens_decoder[\"" + std::to_string(id) + "\"]: " + ex.what());
      }
    }
  }
  auto role = [&](const char* key, void (Tokenizer::*set)(std::string_view)) {
    const std::string name = role_name(cfg, key, config_file);
    if (name.empty()) return;
    require(tok.token_to_id(name).has_value(), config_file + ": " + key,
            "'" + name + "' is not in the vocabulary or the added tokens");
    AddedToken t;
    t.content = name;
    t.special = true;
    tok.add_token(t);  // no-op when already an added token
    (tok.*set)(name);
  };
  role("bos_token", &Tokenizer::set_bos_token);
  role("eos_token", &Tokenizer::set_eos_token);
  role("pad_token", &Tokenizer::set_pad_token);
  apply_llama_bos_eos(tok, cfg, config_file);
  // Special tokens' text encoded as ordinary text: not implemented, refused rather than ignored.
  if (cfg.contains("split_special_tokens"))
    require(cfg["split_special_tokens"] == false || cfg["split_special_tokens"].is_null(),
            config_file + ": split_special_tokens", "true is not supported (expected false: special tokens' text is "
                                                    "matched as the special token)");
  if (cfg.contains("clean_up_tokenization_spaces") && !cfg["clean_up_tokenization_spaces"].is_null()) {
    const auto& c = cfg["clean_up_tokenization_spaces"];
    require(c.is_boolean(), config_file + ": clean_up_tokenization_spaces",
            "expected true or false, got " + c.dump().substr(0, 40));
    tok.set_clean_up_tokenization_spaces(c.get<bool>());
  }
  // A string, or (transformers) a list of named templates, of which apply_chat_template
  // uses "default" when no name is asked for; null: none.
  if (cfg.contains("chat_template")) {
    const auto& t = cfg["chat_template"];
    const std::string bad = "expected a string or a list of {\"name\", \"template\"} objects";
    if (t.is_string()) {
      tok.set_chat_template(t.get<std::string>());
    } else if (t.is_array()) {
      for (const auto& e : t) {
        require(e.is_object() && e.contains("name") && e["name"].is_string() && e.contains("template") &&
                    e["template"].is_string(),
                config_file + ": chat_template", bad);
        const std::string name = e["name"].get<std::string>();
        if (name == "default") tok.set_chat_template(e["template"].get<std::string>());
        else tok.set_named_chat_template(name, e["template"].get<std::string>());
      }
    } else {
      require(t.is_null(), config_file + ": chat_template", bad + ", got " + t.dump().substr(0, 40));
    }
  }
}

namespace {

/// vocab.json + merges.txt are read as GPT-2's byte-level BPE. transformers builds the
/// pipeline from tokenizer_config.json's tokenizer_class (Qwen2Tokenizer: NFC and single
/// digits) and add_prefix_space: a folder that asks for another one is refused.
void require_gpt2_class(const fs::path& dir) {
  const fs::path cfg_path = dir / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(cfg_path, ec)) return;
  const auto cfg = io::read_json_file(cfg_path.string());
  if (!cfg.is_object()) return;  // apply_tokenizer_config names the problem
  const auto cls = cfg.find("tokenizer_class");
  if (cls != cfg.end() && cls->is_string() && *cls != "GPT2Tokenizer" && *cls != "GPT2TokenizerFast")
    throw InputError(cfg_path.string() + ": tokenizer_class " + cls->dump() +
                     ": vocab.json + merges.txt are read as GPT-2's byte-level BPE, and transformers builds " +
                     cls->get<std::string>() +
                     "'s own pipeline from them (expected GPT2Tokenizer, or the folder's tokenizer.json)");
  const auto aps = cfg.find("add_prefix_space");
  if (aps != cfg.end() && aps->is_boolean() && aps->get<bool>())
    throw InputError(cfg_path.string() + ": add_prefix_space true is not supported for vocab.json + merges.txt "
                     "(expected false, or a tokenizer.json whose ByteLevel pre_tokenizer sets it)");
}

/// GPT2Tokenizer's add_bos_token (tokenizer_config.json, default false; OPT's folders set
/// it: "OPT adds </s> to the beginning of every prompt"): transformers' GPT2Converter builds
/// the fast tokenizer of a vocab.json + merges.txt folder with the post-processor
/// single = BOS:0 $A:0, pair = BOS:0 $A:0 $B:1.
void apply_gpt2_add_bos(Tokenizer& tok, const fs::path& cfg_path) {
  std::error_code ec;
  if (!fs::is_regular_file(cfg_path, ec)) return;
  const auto cfg = io::read_json_file(cfg_path.string());
  const auto it = cfg.find("add_bos_token");
  if (it == cfg.end() || it->is_null()) return;
  require(it->is_boolean(), cfg_path.string() + ": add_bos_token", "expected true or false");
  if (!it->get<bool>()) return;
  require(tok.bos_id().has_value(), cfg_path.string() + ": add_bos_token",
          "true, but the tokenizer has no bos_token (as transformers refuses)");
  const std::string bos = *tok.id_to_token(*tok.bos_id());
  const auto special = [&](int type_id) { return nlohmann::json{{"SpecialToken", {{"id", bos}, {"type_id", type_id}}}}; };
  const auto sequence = [](const char* id, int type_id) {
    return nlohmann::json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  tok.set_post_processor({{"type", "TemplateProcessing"},
                          {"single", {special(0), sequence("A", 0)}},
                          {"pair", {special(0), sequence("A", 0), sequence("B", 1)}},
                          {"special_tokens", {{bos, {{"id", bos}, {"ids", {*tok.bos_id()}}, {"tokens", {bos}}}}}}},
                         {*tok.bos_id()}, {});
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir_or_file) {
  std::error_code ec;
  const fs::path p(dir_or_file);
  std::unique_ptr<Tokenizer> tok;
  fs::path dir;
  bool vocab_merges = false;  // (GPT-2's pipeline from vocab.json + merges.txt)
  if (fs::is_regular_file(p, ec)) {
    tok = load_hf_tokenizer_json(p.string());
    dir = p.parent_path();
  } else if (fs::is_directory(p, ec)) {
    dir = p;
    if (fs::is_regular_file(p / "tokenizer.json", ec)) {
      tok = load_hf_tokenizer_json((p / "tokenizer.json").string());
    } else if (fs::is_regular_file(p / "vocab.json", ec) && fs::is_regular_file(p / "merges.txt", ec)) {
      require_gpt2_class(p);
      tok = load_vocab_merges((p / "vocab.json").string(), (p / "merges.txt").string());
      vocab_merges = true;
    } else {
      throw InputError(dir_or_file + ": no tokenizer found (expected tokenizer.json, or vocab.json + merges.txt)");
    }
  } else {
    throw InputError(dir_or_file + ": no such file or directory (expected a tokenizer directory or tokenizer.json)");
  }
  const fs::path cfg = dir / "tokenizer_config.json";
  if (fs::is_regular_file(cfg, ec)) apply_tokenizer_config(*tok, cfg.string());
  // (after the config: its bos_token names the token)
  if (vocab_merges) apply_gpt2_add_bos(*tok, cfg);
  // transformers >= 4.47 saves the template beside the config as chat_template.jinja,
  // and loads that file in preference to a chat_template of tokenizer_config.json.
  const fs::path jinja = dir / "chat_template.jinja";
  if (fs::is_regular_file(jinja, ec)) tok->set_chat_template(io::read_file(jinja.string()));
  // ... and its other named templates as additional_chat_templates/NAME.jinja.
  const fs::path extra = dir / "additional_chat_templates";
  if (fs::is_directory(extra, ec))
    for (const auto& e : fs::directory_iterator(extra, ec))
      if (e.is_regular_file(ec) && e.path().extension() == ".jinja")
        tok->set_named_chat_template(e.path().stem().string(), io::read_file(e.path().string()));
  return tok;
}

}  // namespace lol::tokenizers
