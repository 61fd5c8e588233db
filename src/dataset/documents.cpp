#include "dataset/documents.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tokenizers/utf8.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::data {

DocSplit parse_doc_split(const std::string& s, const std::string& flag) {
  if (s == "blank-line") return DocSplit::kBlankLine;
  if (s == "line") return DocSplit::kLine;
  if (s == "file") return DocSplit::kFile;
  throw InputError(flag + ": '" + s + "': expected blank-line, line or file");
}

const char* doc_split_name(DocSplit s) {
  switch (s) {
    case DocSplit::kBlankLine: return "blank-line";
    case DocSplit::kLine: return "line";
    case DocSplit::kFile: return "file";
  }
  return "?";
}

namespace {

/// The file name's extension in lower case (data.JSONL too), dot included.
std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

bool is_jsonl_file(const std::string& path) {
  const std::string ext = lower_extension(path);
  return ext == ".jsonl" || ext == ".ndjson";
}

void check_source_flags_apply(const std::vector<std::string>& files, bool text_field_given, bool doc_split_given) {
  size_t jsonl = 0;
  for (const auto& f : files) jsonl += is_jsonl_file(f);
  if (files.empty()) return;
  if (text_field_given && jsonl == 0)
    throw InputError("--text-field applies to JSON lines files (*.jsonl, *.ndjson), and none of the " +
                     std::to_string(files.size()) + " input file(s) is one (plain text is cut into documents by --doc-split)");
  if (doc_split_given && jsonl == files.size())
    throw InputError("--doc-split applies to plain text files, and every input file is JSON lines (one document per "
                     "line: see --text-field)");
}

namespace {

bool is_blank(const std::string& line) {
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

bool is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// A well-formed UTF-8 character that is not Unicode White_Space starts at text[pos]
// (the pre-tokenizers' \s is White_Space: U+0085, U+00A0, U+3000, ... included).
bool non_space_starts_at(std::string_view text, std::size_t pos) {
  return pos < text.size() && tokenizers::utf8_sequence_length(text, pos) > 0 &&
         !tokenizers::whitespace_starts_at(text, pos);
}

// A clean cut point: the '\n' at text[pos] has a non-White_Space character on both sides.
bool clean_newline(std::string_view text, std::size_t pos) {
  return pos > 0 && !tokenizers::whitespace_ends_at(text, pos) && non_space_starts_at(text, pos + 1);
}

}  // namespace

DocumentReader::DocumentReader(std::vector<std::string> files, DocumentSourceOptions options)
    : files_(std::move(files)), o_(std::move(options)) {
  if (files_.empty()) throw InputError("--in: no input files given");
  if (o_.block_bytes < 1) throw InputError("document reader: block_bytes must be >= 1");
  if (o_.max_bytes_per_label < 0)
    throw InputError("--max-bytes-per-label " + std::to_string(o_.max_bytes_per_label) + ": expected >= 0 (0 = no cap)");
  if (o_.max_bytes_per_label > 0 && o_.label_field.empty())
    throw InputError("--max-bytes-per-label needs --label-field (the label whose documents are capped)");
  for (const auto& f : files_) {
    std::error_code ec;
    if (fs::is_directory(f, ec))
      throw InputError(f + ": is a directory (expected a .txt or .jsonl file; pass its files, e.g. " + f + "/*.txt)");
    if (!fs::is_regular_file(f, ec))
      throw InputError(f + (fs::exists(f, ec) ? ": not a regular file" : ": no such file") +
                       " (expected a .txt or .jsonl file)");
    if (!o_.label_field.empty() && !is_jsonl_file(f))
      throw InputError(f + ": --label-field '" + o_.label_field +
                       "' needs JSON lines input (*.jsonl); plain text files carry no labels");
    total_bytes_ += int64_t(fs::file_size(f, ec));
    // A *.json file of JSON records is read as plain text (JSON lines files are named
    // *.jsonl or *.ndjson): its braces and field names would become training text.
    if (lower_extension(f) == ".json") {
      std::ifstream in(f, std::ios::binary);
      char c = 0;
      while (in.get(c) && is_space_byte(c)) {
      }
      if (in && (c == '{' || c == '['))
        std::fprintf(stderr, "note: %s is read as plain text, JSON syntax and all (JSON lines files are named *.jsonl "
                             "or *.ndjson: rename it to read one document per line)\n", f.c_str());
    }
  }
}

DocumentReader::~DocumentReader() = default;

bool DocumentReader::open_next_file() {
  if (in_) {
    bytes_done_ += file_bytes_;
    in_.reset();
  }
  file_bytes_ = 0;
  line_no_ = 0;
  carry_.clear();
  part_ = 0;
  file_eof_ = false;
  if (file_index_ + 1 >= int64_t(files_.size())) {
    file_index_ = int64_t(files_.size());
    return false;
  }
  ++file_index_;
  in_ = std::make_unique<std::ifstream>(files_[file_index_], std::ios::binary);
  if (!*in_) throw InputError(files_[file_index_] + ": cannot open for reading");
  return true;
}

bool DocumentReader::next(Document& doc) {
  if (file_index_ < 0 && !open_next_file()) return false;
  while (file_index_ < int64_t(files_.size())) {
    const std::string& path = files_[file_index_];
    bool got = false;
    if (is_jsonl_file(path)) got = next_jsonl(doc);
    else if (o_.doc_split == DocSplit::kFile) got = next_part(doc);
    else got = next_text(doc);
    if (got) return true;
    if (in_->bad()) throw InputError(path + ": read error");
    if (!open_next_file()) return false;
  }
  return false;
}

bool DocumentReader::next_jsonl(Document& doc) {
  const std::string& path = files_[file_index_];
  std::string line;
  while (std::getline(*in_, line)) {
    ++line_no_;
    file_bytes_ += int64_t(line.size()) + (in_->eof() ? 0 : 1);
    if (is_blank(line)) continue;
    const std::string where = path + ":" + std::to_string(line_no_);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(where + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw InputError(where + ": expected a JSON object per line");
    auto it = j.find(o_.text_field);
    if (it == j.end() || !it->is_string())
      throw InputError(where + ": field '" + o_.text_field + "' must be a string (the document text; see --text-field)");
    doc.text = it->get<std::string>();
    doc.label.clear();
    if (!o_.label_field.empty()) {
      auto lt = j.find(o_.label_field);
      if (lt == j.end() || !(lt->is_string() || lt->is_number_integer()))
        throw InputError(where + ": field '" + o_.label_field + "' must be a string or an integer (see --label-field)");
      doc.label = lt->is_string() ? lt->get<std::string>() : std::to_string(lt->get<int64_t>());
      if (doc.label.empty()) throw InputError(where + ": field '" + o_.label_field + "' is empty");
    }
    doc.where = where;
    doc.index = doc_index_++;
    if (o_.max_bytes_per_label > 0) {
      int64_t& kept = label_bytes_[doc.label];
      if (kept >= o_.max_bytes_per_label) {
        ++skipped_over_cap_;
        continue;
      }
      kept += int64_t(doc.text.size());
    }
    doc.part = 0;
    doc.last = true;
    return true;
  }
  return false;
}

bool DocumentReader::next_text(Document& doc) {
  const std::string& path = files_[file_index_];
  std::string line;
  doc.text.clear();
  doc.label.clear();
  bool in_doc = false, cr = false;  // cr: the previous line ended "\r\n"
  while (std::getline(*in_, line)) {
    ++line_no_;
    file_bytes_ += int64_t(line.size()) + (in_->eof() ? 0 : 1);
    if (is_blank(line)) {
      if (in_doc) break;  // kBlankLine: the document ends here
      continue;
    }
    if (!in_doc) {
      in_doc = true;
      doc.where = path + ":" + std::to_string(line_no_);
    } else {
      doc.text += cr ? "\r\n" : "\n";
    }
    // A CRLF file's line ends are kept inside a document, and its last one dropped as
    // an LF file's is (documents ended in a stray '\r').
    cr = !line.empty() && line.back() == '\r';
    if (cr) line.pop_back();
    doc.text += line;
    if (o_.doc_split == DocSplit::kLine) break;
  }
  if (!in_doc) return false;
  doc.index = doc_index_++;
  doc.part = 0;
  doc.last = true;
  return true;
}

bool DocumentReader::next_part(Document& doc) {
  const std::string& path = files_[file_index_];
  // Read until the buffer holds at least block_bytes and a cut point past that
  // (or the file ends).
  std::size_t cut = std::string::npos;
  std::size_t search_from = 0;
  constexpr int kMaxRefusedCuts = 1024;
  int refused = 0;
  const std::size_t block = std::size_t(o_.block_bytes);
  while (true) {
    if (carry_.size() >= block) {
      // A '\n' with a non-whitespace character on both sides, at or after block_bytes - 1:
      // the cut after it, else before it, unless cut_ok refuses both.
      std::size_t pos = std::max(search_from, block - 1);
      while ((pos = carry_.find('\n', pos)) != std::string::npos && pos + 1 < carry_.size()) {
        if (clean_newline(carry_, pos)) {
          for (const std::size_t c : {pos + 1, pos})
            if (!o_.cut_ok || o_.cut_ok(carry_, c)) {
              cut = c;
              break;
            }
          if (cut != std::string::npos) break;
          // A check that refuses this many points in a row refuses them all (the text
          // is one pre-tokenizer piece): cut here unchecked rather than check on.
          if (++refused >= kMaxRefusedCuts) {
            cut = pos + 1;
            ++unchecked_cuts_;
            break;
          }
        }
        ++pos;
      }
      if (cut != std::string::npos) break;
      search_from = carry_.size() - 1;
      // No clean cut in 16 blocks (e.g. CRLF line ends): cut after any newline
      // before a non-whitespace character, then at a UTF-8 character boundary.
      if (carry_.size() >= 16 * block) {
        // The last 64 such newlines with cut_ok's check (CRLF text), then unchecked.
        if (o_.cut_ok) {
          int checked = 0;
          for (std::size_t p = carry_.size() - 1; p > 0 && cut == std::string::npos && checked < 64; --p)
            if (carry_[p - 1] == '\n' && non_space_starts_at(carry_, p) && ++checked && o_.cut_ok(carry_, p)) cut = p;
          if (cut == std::string::npos) ++unchecked_cuts_;
        }
        for (std::size_t p = carry_.size() - 1; p > 0 && cut == std::string::npos; --p)
          if (carry_[p - 1] == '\n' && non_space_starts_at(carry_, p)) cut = p;
        for (std::size_t p = carry_.size() - 1; p > 0 && cut == std::string::npos; --p)
          if ((static_cast<unsigned char>(carry_[p]) & 0xC0) != 0x80) cut = p;
        if (cut != std::string::npos) break;
      }
    }
    if (file_eof_) break;
    std::string chunk(std::max<std::size_t>(block, 4096), '\0');
    in_->read(chunk.data(), std::streamsize(chunk.size()));
    const auto n = in_->gcount();
    if (in_->bad()) throw InputError(path + ": read error");
    file_bytes_ += int64_t(n);
    carry_.append(chunk.data(), std::size_t(n));
    if (n < std::streamsize(chunk.size())) file_eof_ = true;
  }
  // An empty file is one empty document (numbered like any other; corpus counts it
  // among the skipped empty documents, as an empty JSONL text).
  if (carry_.empty() && part_ > 0) return false;  // previous part was the last one
  if (cut == std::string::npos) {
    doc.text.swap(carry_);
    carry_.clear();
    doc.last = true;
  } else {
    doc.text.assign(carry_, 0, cut);
    carry_.erase(0, cut);
    doc.last = false;
  }
  doc.label.clear();
  // The document starts at the file's first line; a later part is named by the byte
  // offset where it starts within the document.
  if (part_ == 0) part_start_ = 0;
  doc.where = path + ":1" +
              (part_ > 0 ? " (the part from byte offset " + std::to_string(part_start_) + ")" : std::string());
  part_start_ += int64_t(doc.text.size());
  doc.part = part_;
  if (part_ == 0) doc.index = doc_index_++;
  else doc.index = doc_index_ - 1;
  ++part_;
  if (doc.last) carry_.clear();
  return true;
}

}  // namespace lol::data
