#include "dataset/corpus.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "dataset/shards.h"
#include "dataset/text_tokenizer.h"
#include "io/atomic_file.h"
#include "io/dir_lock.h"
#include "tokenizers/utf8.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/random.h"

namespace fs = std::filesystem;

namespace lol::data {

namespace {

using util::splitmix64;

struct SplitCounts {
  int64_t documents = 0, tokens = 0, bytes = 0;
  nlohmann::json to_json() const { return {{"documents", documents}, {"tokens", tokens}, {"bytes", bytes}}; }
};

}  // namespace

bool is_valid_document(int64_t index, uint64_t seed, double fraction) {
  const uint64_t h = splitmix64(splitmix64(uint64_t(index)) ^ splitmix64(seed + 0x5851F42D4C957F2Dull));
  return double(h >> 11) * 0x1.0p-53 < fraction;
}

namespace {
/// DocumentSourceOptions::cut_ok for `tok`: the text around a candidate cut encodes to
/// the same ids as one text and as two parts, the second a continuation. The window
/// holds the line before and the line after the cut, widened to whole lines covering
/// the longest added token on each side (a token with newlines in it), each side at most
/// max(4 KiB, that length) bytes, cut at character starts. A local check: it sees what
/// the cut changes near it (an lstrip added token that would take the '\n', a Split
/// step that starts no piece there, so the next step adds a prefix the whole text has
/// not). Text the tokenizer refuses (invalid UTF-8) passes: encoding the part reports it.
std::function<bool(std::string_view, std::size_t)> cut_check(const tokenizers::Tokenizer& tok) {
  std::size_t longest_added = 0;
  for (const auto& t : tok.added_tokens()) longest_added = std::max(longest_added, t.content.size());
  return [&tok, longest_added](std::string_view text, std::size_t cut) {
    const std::size_t span = std::max<std::size_t>(4096, 2 * longest_added);
    auto char_start = [&](std::size_t p) {
      while (p < text.size() && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) ++p;
      return p;
    };
    auto line_start = [&](std::size_t p) {  // of the line holding text[p]
      const std::size_t nl = p == 0 ? std::string_view::npos : text.rfind('\n', p - 1);
      return nl == std::string_view::npos ? std::size_t(0) : nl + 1;
    };
    auto line_end = [&](std::size_t p) {  // the '\n' ending the line holding text[p], or the end
      const std::size_t nl = text.find('\n', p);
      return nl == std::string_view::npos ? text.size() : nl;
    };
    // The '\n' at the cut (at cut - 1 or at cut); the line ending there and the next one.
    const std::size_t nl = text[cut] == '\n' ? cut : cut - 1;
    std::size_t begin = line_start(std::min(nl, cut > longest_added ? cut - longest_added : 0));
    if (cut - begin > span) begin = char_start(cut - span);
    std::size_t end = line_end(std::max(nl + 1, std::min(text.size(), cut + longest_added)));
    if (end - cut > span) end = char_start(cut + span);
    try {
      std::vector<int32_t> parts;
      tok.encode_append(text.substr(begin, cut - begin), parts, false, false);
      tok.encode_append(text.substr(cut, end - cut), parts, false, /*continuation=*/true);
      return parts == tok.encode(text.substr(begin, end - begin));
    } catch (const InputError&) {
      return true;
    }
  };
}
}  // namespace

nlohmann::json build_corpus(const CorpusOptions& o, const std::string& out_dir) {
  if (!(o.valid_fraction >= 0.0 && o.valid_fraction < 1.0))
    throw InputError("--valid-fraction " + std::to_string(o.valid_fraction) + ": expected 0 <= fraction < 1");
  if (o.shard_tokens < 1) throw InputError("--shard-tokens must be >= 1");
  require_no_dataset(out_dir, "--out");
  auto tok = open_text_tokenizer(o.tokenizer);
  std::vector<int32_t> prefix, suffix;
  if (o.add_bos) {
    if (!tok->bos_id()) throw InputError("--bos: tokenizer '" + o.tokenizer + "' has no BOS token");
    prefix.push_back(*tok->bos_id());
  }
  if (o.add_eos) {
    if (!tok->eos_id()) throw InputError("--eos: tokenizer '" + o.tokenizer + "' has no EOS token");
    suffix.push_back(*tok->eos_id());
  }
  DocumentSourceOptions source = o.source;
  source.cut_ok = cut_check(*tok);  // --doc-split file: parts encode as the whole file
  DocumentReader reader(o.files, source);  // checks the inputs before anything is written
  std::unique_ptr<DocumentReader> held_out;
  // A file named twice (in one list, or in both) would repeat its documents, or put
  // them in training and validation both.
  std::vector<std::pair<std::string, std::string>> inputs;  // (flag, file)
  for (const auto& f : o.files) inputs.emplace_back("--in", f);
  for (const auto& f : o.valid_files) inputs.emplace_back("--valid-in", f);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t k = 0; k < i; ++k) {
      std::error_code ec;
      if (!fs::equivalent(inputs[i].second, inputs[k].second, ec)) continue;
      throw InputError(inputs[i].first + " " + inputs[i].second + ": is also an " + inputs[k].first + " file (" +
                       inputs[k].second + "): its documents would be " +
                       (inputs[i].first == inputs[k].first ? "read twice" : "both trained on and held out"));
    }
  if (!o.valid_files.empty()) {
    DocumentSourceOptions vo = source;
    vo.max_bytes_per_label = 0;
    held_out = std::make_unique<DocumentReader>(o.valid_files, vo);
  }
  const io::DirLock lock(out_dir, "--out");  // one writer per dataset directory
  require_no_dataset(out_dir, "--out");  // again: another writer may have finished meanwhile
  tok->save(out_dir);
  const int64_t vocab = tok->vocab_size();

  ShardWriter train(out_dir, "train", vocab, o.shard_tokens), valid(out_dir, "valid", vocab, o.shard_tokens);
  SplitCounts counts[2];
  std::map<std::string, int64_t> label_ids;
  std::vector<std::string> label_names;
  std::vector<SplitCounts> label_counts[2];
  int64_t skipped_empty = 0;
  const bool labelled = !o.source.label_field.empty();

  const int64_t total_bytes = reader.total_bytes() + (held_out ? held_out->total_bytes() : 0);
  ProgressBar bar("corpus", total_bytes, o.progress);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t n_docs = 0, bytes_before = 0;
  // Reads every document of `r` into the splits (held_out: all to validation).
  auto consume = [&](DocumentReader& r, bool all_valid) {
    Document doc;
    std::vector<int32_t> ids;
    int64_t doc_bytes = 0;
    while (r.next(doc)) {
      if (doc.part == 0) {
        ids = prefix;
        doc_bytes = 0;
      }
      // Text corpora are UTF-8 whatever the tokenizer: a byte tokenizer would otherwise
      // train on the bytes of another encoding (a Latin-1 file) without a word.
      const std::size_t bad = tokenizers::find_invalid_utf8(doc.text);
      if (bad != std::string::npos) {
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(doc.text[bad]));
        // doc_bytes: the bytes of the document's earlier parts (--doc-split file).
        throw InputError(doc.where + ": invalid UTF-8 at byte offset " + std::to_string(doc_bytes + int64_t(bad)) +
                         " of the document (byte " +
                         byte + "); expected UTF-8 text (convert the file, e.g. iconv -f latin1 -t utf-8)");
      }
      try {
        // A later part of a --doc-split file document continues the text (no ▁ prepended).
        tok->encode_append(doc.text, ids, /*add_special_tokens=*/false, /*continuation=*/doc.part > 0);
      } catch (const InputError& e) {
        throw InputError(doc.where + ": " + e.what());
      }
      doc_bytes += int64_t(doc.text.size());
      if (!doc.last) continue;
      ++n_docs;
      if (ids.size() == prefix.size()) {  // nothing but the optional BOS
        ++skipped_empty;
        continue;
      }
      ids.insert(ids.end(), suffix.begin(), suffix.end());
      int64_t label = -1;
      if (labelled) {
        auto it = label_ids.find(doc.label);
        if (it == label_ids.end()) {
          it = label_ids.emplace(doc.label, int64_t(label_names.size())).first;
          label_names.push_back(doc.label);
          label_counts[0].emplace_back();
          label_counts[1].emplace_back();
        }
        label = it->second;
      }
      const int s = (all_valid || is_valid_document(doc.index, o.seed, o.valid_fraction)) ? 1 : 0;
      (s ? valid : train).add(ids, {}, {}, 0, label);
      for (SplitCounts* c : {&counts[s], labelled ? &label_counts[s][std::size_t(label)] : nullptr}) {
        if (!c) continue;
        c->documents += 1;
        c->tokens += int64_t(ids.size());
        c->bytes += doc_bytes;
      }
      if ((n_docs & 63) == 0)
        bar.update(bytes_before + r.bytes_read(), std::to_string(n_docs) + " docs, " +
                                                      std::to_string(counts[0].tokens + counts[1].tokens) + " tokens");
    }
    bytes_before += r.total_bytes();
  };
  consume(reader, false);
  if (held_out) consume(*held_out, true);
  bar.update(total_bytes);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bar.finish(std::to_string(n_docs) + " docs, " + std::to_string(counts[0].tokens + counts[1].tokens) + " tokens");
  if (counts[0].documents + counts[1].documents == 0)
    throw InputError("--in: the input files hold no non-empty document");
  const int64_t unchecked_cuts = reader.unchecked_cuts() + (held_out ? held_out->unchecked_cuts() : 0);
  if (unchecked_cuts > 0)
    std::fprintf(stderr,
                 "note: --doc-split file: %lld part boundaries were cut where the tokenizer's check refused every point "
                 "near them (e.g. a Split pre-tokenizer step whose pattern never matches, so the text is one piece); "
                 "the ids next to them may differ from encoding the whole file by a token\n",
                 (long long)unchecked_cuts);

  nlohmann::json splits = nlohmann::json::object();
  auto train_files = train.finish(), valid_files = valid.finish();
  if (!train_files.empty()) splits["train"] = train_files;
  if (!valid_files.empty()) splits["valid"] = valid_files;

  nlohmann::json stats = {{"train", counts[0].to_json()},
                          {"valid", counts[1].to_json()},
                          {"skipped_empty_documents", skipped_empty},
                          {"skipped_over_label_cap", reader.skipped_over_cap()},
                          {"unchecked_part_cuts", unchecked_cuts},
                          {"token_dtype", vocab <= 65536 ? "uint16" : "uint32"},
                          {"bytes_per_token", double(counts[0].bytes + counts[1].bytes) /
                                                  double(std::max<int64_t>(1, counts[0].tokens + counts[1].tokens))},
                          {"seconds", secs}};
  nlohmann::json meta = {{"source", "lol corpus"},
                         {"inputs", o.files},
                         {"valid_inputs", o.valid_files},
                         {"max_bytes_per_label", o.source.max_bytes_per_label},
                         {"tokenizer_spec", o.tokenizer},
                         {"doc_split", doc_split_name(o.source.doc_split)},
                         {"text_field", o.source.text_field},
                         {"valid_fraction", o.valid_fraction},
                         {"seed", o.seed},
                         {"bos", o.add_bos},
                         {"eos", o.add_eos}};
  if (labelled) {
    meta["label_field"] = o.source.label_field;
    meta["labels"] = label_names;
    nlohmann::json per = nlohmann::json::object();
    for (std::size_t i = 0; i < label_names.size(); ++i)
      per[label_names[i]] = {{"id", int64_t(i)},
                             {"train", label_counts[0][i].to_json()},
                             {"valid", label_counts[1][i].to_json()}};
    stats["labels"] = per;
  }
  nlohmann::json info = {{"format", "lol-dataset"}, {"version", 1},       {"task", "text"},
                         {"vocab_size", vocab},     {"tokenizer", "tokenizer.json"}, {"splits", splits},
                         {"stats", stats},          {"meta", meta}};
  write_dataset_info(out_dir, info, lock.found_earlier_writer());
  return stats;
}

}  // namespace lol::data
