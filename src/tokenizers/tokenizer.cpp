#include "tokenizers/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tokenizers/bpe_model.h"
#include "tokenizers/utf8.h"
#include "util/error.h"

namespace lol::tokenizers {
namespace {

std::string hex_byte(unsigned char c) {
  const char* h = "0123456789abcdef";
  return std::string{h[c >> 4], h[c & 15]};
}

}  // namespace

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& out, bool add_special_tokens,
                              bool continuation) const {
  if (add_special_tokens) out.insert(out.end(), template_prefix_.begin(), template_prefix_.end());
  thread_local std::vector<Segment> segments;
  const std::size_t first = segments.size();  // re-entrancy safe: only our tail is used
  added_.split(text, segments);
  const std::size_t last = segments.size();
  try {
    for (std::size_t k = first; k < last; ++k) {
      const Segment seg = segments[k];
      if (seg.added_id >= 0) {
        out.push_back(seg.added_id);
        continue;
      }
      std::string_view rest = seg.text;
      while (!rest.empty()) {
        const std::size_t bad = find_invalid_utf8(rest);
        const bool first_piece = rest.data() == text.data();
        const bool at_start = first_piece && !continuation;
        const bool prepend = !(first_piece && continuation);  // false: the first piece of a continuation
        if (bad == std::string_view::npos) {
          encode_piece(rest, out, at_start, prepend);
          break;
        }
        if (utf8_policy_ == InvalidUtf8Policy::kThrow) {
          const std::size_t offset = std::size_t(rest.data() - text.data()) + bad;
          throw InputError("tokenizer input: invalid UTF-8 at byte offset " + std::to_string(offset) +
                           " (byte 0x" + hex_byte(static_cast<unsigned char>(rest[bad])) +
                           "); expected valid UTF-8 text");
        }
        if (bad > 0) encode_piece(rest.substr(0, bad), out, at_start, prepend);
        encode_raw_byte(static_cast<uint8_t>(rest[bad]), out);
        rest.remove_prefix(bad + 1);
      }
    }
  } catch (...) {
    segments.resize(first);
    throw;
  }
  segments.resize(first);
  if (add_special_tokens) out.insert(out.end(), template_suffix_.begin(), template_suffix_.end());
}

void Tokenizer::encode_piece(std::string_view text, std::vector<int32_t>& out, bool at_start, bool prepend) const {
  thread_local std::string scratch;  // only this function writes it; it does not recurse
  thread_local std::vector<Segment> segments;
  const std::string_view normalized = normalizer_.apply(text, scratch, prepend);
  if (!added_.has_normalized()) {
    encode_normalized(normalized, out, at_start, !prepend);
    return;
  }
  const std::size_t first = segments.size();
  added_.split(normalized, segments, /*normalized=*/true);
  const std::size_t last = segments.size();
  try {
    for (std::size_t k = first; k < last; ++k) {
      const Segment seg = segments[k];
      if (seg.added_id >= 0) out.push_back(seg.added_id);
      else {
        const bool first = seg.text.data() == normalized.data();
        encode_normalized(seg.text, out, at_start && first, !prepend && first);
      }
    }
  } catch (...) {
    segments.resize(first);
    throw;
  }
  segments.resize(first);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_append(text, ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return decode(ids.data(), ids.size(), skip_special_tokens);
}

bool Tokenizer::skipped_in_decode(int32_t id, bool skip_special_tokens) const {
  if (!skip_special_tokens || added_.empty()) return false;
  const AddedToken* t = added_.find_id(id);
  if (!t) return false;
  std::string scratch;
  const std::string_view text = t->normalized ? normalizer_.apply(t->content, scratch) : t->content;
  const AddedToken* named = text == t->content ? t : added_.find_content(text);
  return named && named->special;
}

std::string Tokenizer::decode_first(int32_t id, bool skip_special_tokens) const {
  auto erase_all = [](std::string& s, const std::string& what) {
    for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at)) s.erase(at, what.size());
  };
  const AddedToken* t = added_.empty() ? nullptr : added_.find_id(id);
  if (first_token_drop_.empty() || (t && skipped_in_decode(id, skip_special_tokens)))
    return decode_inner(&id, 1, skip_special_tokens);
  if (t) {  // its text as written (raw spaces kept), less the replacement, then decoded
    std::string scratch;
    std::string text(t->normalized ? normalizer_.apply(t->content, scratch) : std::string_view(t->content));
    erase_all(text, first_token_drop_);
    std::string out;
    append_added_text(text, out);
    return out;
  }
  // A model token's replacements are spaces by now (the decoder's Replace step).
  std::string s = decode_inner(&id, 1, skip_special_tokens);
  erase_all(s, " ");
  return s;
}

std::string Tokenizer::decode(const int32_t* ids, std::size_t n, bool skip_special_tokens) const {
  if (!first_token_drop_.empty()) {
    std::size_t k = 0;
    while (k < n && skipped_in_decode(ids[k], skip_special_tokens)) ++k;
    if (k == n) return decode_inner(ids, n, skip_special_tokens);  // "" (checks the ids)
    return decode_first(ids[k], skip_special_tokens) + decode_inner(ids + k + 1, n - k - 1, skip_special_tokens);
  }
  std::string out = decode_inner(ids, n, skip_special_tokens);
  std::size_t cut = 0;
  while (cut < std::size_t(decode_strip_spaces_) && cut < out.size() && out[cut] == ' ') ++cut;
  out.erase(0, cut);
  return out;
}

std::string Tokenizer::decode_inner(const int32_t* ids, std::size_t n, bool skip_special_tokens) const {
  std::string out;
  out.reserve(n * 4);
  for (std::size_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    if (const AddedToken* t = added_.empty() ? nullptr : added_.find_id(id)) {
      // As Hugging Face: a normalized token decodes as its normalized content, and is
      // skipped as special only when that string is a special token's content.
      std::string scratch;
      const std::string_view text = t->normalized ? normalizer_.apply(t->content, scratch) : t->content;
      const AddedToken* named = text == t->content ? t : added_.find_content(text);
      if (!(skip_special_tokens && named && named->special)) append_added_text(text, out);
      continue;
    }
    if (id < 0 || !append_model_bytes(id, out)) {
      throw InputError("decode: token id " + std::to_string(id) + " at position " + std::to_string(i) +
                       " is not in the vocabulary (expected an id in [0, " + std::to_string(vocab_size()) +
                       "))");
    }
  }
  return out;
}

std::string DecodeStream::decoded(int32_t id) {
  // An id the tokenizer has no token for (a model vocabulary padded beyond the
  // tokenizer's, as Qwen2's is) prints nothing, as Hugging Face's decode skips it.
  if (!tok_.id_to_token(id)) return "";
  if (tok_.decode_drops_first_token_replacement()) {
    if (first_seen_ || tok_.skipped_in_decode(id, skip_)) return utf8_.push(tok_.decode_inner(&id, 1, skip_));
    first_seen_ = true;
    return utf8_.push(tok_.decode_first(id, skip_));
  }
  std::string bytes = tok_.decode_inner(&id, 1, skip_);
  if (!started_) {  // decode() strips up to decode_strip_spaces() spaces from the start of the text
    std::size_t cut = 0;
    while (cut < bytes.size() && bytes[cut] == ' ' && stripped_ < tok_.decode_strip_spaces()) ++cut, ++stripped_;
    bytes.erase(0, cut);
    started_ = !bytes.empty();
  }
  return utf8_.push(bytes);
}

std::string clean_up_tokenization(std::string_view text) {
  static const std::pair<std::string_view, std::string_view> kPasses[] = {
      {" .", "."},       {" ?", "?"},       {" !", "!"},       {" ,", ","},       {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string s(text), out;
  for (const auto& [from, to] : kPasses) {  // Python's str.replace, one pass each
    out.clear();
    std::size_t pos = 0;
    for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
      out.append(s, pos, hit - pos).append(to);
    out.append(s, pos, std::string::npos);
    s.swap(out);
  }
  return s;
}

std::string DecodeStream::cleaned(std::string text) {
  if (!clean_up_) return text;
  // Every clean-up match starts with ' ' and holds only ' ', '\'', 'n', 'v', 'r' before
  // its last byte: no match (in any pass) spans a byte outside that set, so the text up
  // to such a byte cleans the same alone as inside the whole. What was pending is all
  // such bytes, so only the new text is searched (constant work per id).
  const std::size_t held = pending_.size();
  pending_ += text;
  std::size_t cut = pending_.size();
  while (cut > held && std::string_view(" 'nvr").find(pending_[cut - 1]) != std::string_view::npos) --cut;
  if (cut == held) return "";
  std::string ready = clean_up_tokenization(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  return ready;
}

std::string DecodeStream::push(int32_t id) { return cleaned(decoded(id)); }

std::string DecodeStream::finish() {
  std::string rest = utf8_.finish();
  if (!clean_up_) return rest;
  rest = clean_up_tokenization(pending_ + rest);
  pending_.clear();
  return rest;
}

int32_t Tokenizer::vocab_size() const {
  return std::max(model_vocab_size(), added_.max_id() + 1);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = added_.find_content(token)) return t->id;
  return model_token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = added_.find_id(id)) return t->content;
  return model_id_to_token(id);
}

int32_t Tokenizer::add_token(AddedToken token) { return add_token_checked(std::move(token), false); }

int32_t Tokenizer::add_token_as_hf(AddedToken token) {
  token.id = hf_added_token_id(token.content);
  return add_token_checked(std::move(token), true);
}

int32_t Tokenizer::add_token_checked(AddedToken token, bool allow_model_id_of_other_string) {
  if (const AddedToken* t = added_.find_content(token.content)) {
    if (token.id < 0 || token.id == t->id) return t->id;
  }
  const auto model_id = model_token_to_id(token.content);
  if (token.id < 0) {
    token.id = model_id ? *model_id : vocab_size();
  } else {
    // One id, one string (Hugging Face gives an added token the model's id of its content, else a new one).
    const std::string who = "added token '" + token.content + "'";
    require(!model_id || *model_id == token.id, who,
            "id " + std::to_string(token.id) + ": this string is the model vocabulary's id " +
                std::to_string(*model_id) + "; expected that id");
    const auto model_token = model_id_to_token(token.id);
    require(allow_model_id_of_other_string || !model_token || *model_token == token.content, who,
            "id " + std::to_string(token.id) + " is the model vocabulary's '" + model_token.value_or("") +
                "'; expected an id the model vocabulary does not use, or that string's own id");
  }
  const int64_t id_limit = int64_t(vocab_size()) + kMaxVocabIdGap;
  require(token.id < id_limit, "added token '" + token.content + "'",
          "id " + std::to_string(token.id) + ": expected < " + std::to_string(id_limit) + " (vocabulary size " +
              std::to_string(vocab_size()) + " + " + std::to_string(kMaxVocabIdGap) +
              "; ids far beyond the vocabulary size are refused)");
  added_.add(token, token.normalized ? normalizer_.apply(token.content) : token.content);
  return token.id;
}

int32_t Tokenizer::hf_added_token_id(std::string_view content) const {
  if (const AddedToken* t = added_.find_content(content)) return t->id;
  if (const auto id = model_token_to_id(content)) return *id;
  const int32_t model_size = model_entry_count();
  // The largest id of an added token the model lacks: Hugging Face's maximum leaves out
  // added tokens that took the model's id of their content (with gaps in the ids such
  // an id can exceed the entry count). Only scanned when some id reaches the entry count.
  int32_t max_id = -1;
  if (added_.max_id() >= model_size)
    for (const AddedToken& t : added_.tokens())
      if (t.id > max_id && !model_token_to_id(t.content)) max_id = t.id;
  if (max_id < 0) return model_size;
  return (max_id >= model_size || model_size == 0) ? max_id + 1 : model_size;
}

std::optional<int32_t> Tokenizer::role_id(std::string_view token, const char* role) const {
  if (token.empty()) return std::nullopt;
  const auto id = token_to_id(token);
  require(id.has_value(), std::string(role) + " token '" + std::string(token) + "'",
          "not in the vocabulary or the added tokens");
  return id;
}

void Tokenizer::set_bos_token(std::string_view token) { bos_ = role_id(token, "bos"); }
void Tokenizer::set_eos_token(std::string_view token) { eos_ = role_id(token, "eos"); }
void Tokenizer::set_pad_token(std::string_view token) { pad_ = role_id(token, "pad"); }

void Tokenizer::set_post_processor(nlohmann::json original, std::vector<int32_t> prefix,
                                   std::vector<int32_t> suffix) {
  post_processor_json_ = std::move(original);
  template_prefix_ = std::move(prefix);
  template_suffix_ = std::move(suffix);
}

nlohmann::ordered_json Tokenizer::to_hf_json() const {
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  std::vector<AddedToken> sorted = added_.tokens();
  std::stable_sort(sorted.begin(), sorted.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (const AddedToken& t : sorted) added.push_back(t.to_json());
  j["added_tokens"] = std::move(added);
  j["normalizer"] = nlohmann::ordered_json::parse(normalizer_.json().dump());
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = nullptr;
  j["decoder"] = nullptr;
  j["model"] = nullptr;
  fill_hf_json(j);
  if (post_processor_json_.is_null()) {
    j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                           {"use_regex", false}};
  } else {
    j["post_processor"] = nlohmann::ordered_json::parse(post_processor_json_.dump());
  }
  return j;
}

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  require(bool(f), path.string(), "cannot open for writing");
  f.write(text.data(), std::streamsize(text.size()));
  f.close();
  require(!f.fail(), path.string(), "write failed (disk full?)");
}

}  // namespace

nlohmann::ordered_json Tokenizer::to_hf_config_json() const {
  nlohmann::ordered_json cfg;
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  auto role = [&](const char* key, const std::optional<int32_t>& id) {
    if (id) cfg[key] = *id_to_token(*id);
    else cfg[key] = nullptr;
  };
  role("bos_token", bos_);
  role("eos_token", eos_);
  role("pad_token", pad_);
  cfg["clean_up_tokenization_spaces"] = clean_up_spaces_;
  nlohmann::ordered_json dec = nlohmann::ordered_json::object();
  for (const AddedToken& t : added_.tokens()) {
    nlohmann::ordered_json e = t.to_json();
    e.erase("id");
    dec[std::to_string(t.id)] = std::move(e);
  }
  cfg["added_tokens_decoder"] = std::move(dec);
  if (named_chat_templates_.empty()) {
    if (!chat_template_.empty()) cfg["chat_template"] = chat_template_;
  } else {  // transformers' list form: {"name", "template"} objects, "default" first
    auto list = nlohmann::ordered_json::array();
    if (!chat_template_.empty()) list.push_back({{"name", "default"}, {"template", chat_template_}});
    for (const auto& [name, t] : named_chat_templates_) list.push_back({{"name", name}, {"template", t}});
    cfg["chat_template"] = std::move(list);
  }
  return cfg;
}

void Tokenizer::save(const std::string& dir) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec, dir, "cannot create directory: " + ec.message());
  write_file(fs::path(dir) / "tokenizer.json", to_hf_json().dump(2) + "\n");
  write_file(fs::path(dir) / "tokenizer_config.json", to_hf_config_json().dump(2) + "\n");
}

}  // namespace lol::tokenizers
