// Streaming documents out of text files (issue 7: corpus preparation and tokenizer
// training on the files a user has). Nothing here holds a whole file in memory:
// files are read line by line (or block by block), and only the current document
// is kept.
//
// File kinds (by extension):
//   *.jsonl, *.ndjson  one JSON object per line, one document per line: the string
//                      field `text_field` is the text, the optional `label_field`
//                      (a string or an integer, written as text) its label. Empty
//                      lines are skipped.
//   anything else      UTF-8 text, cut into documents by DocSplit:
//     kBlankLine  runs of non-blank lines separated by one or more blank lines
//                 (a blank line is empty or holds only spaces, tabs and '\r');
//                 the document is its lines joined with '\n' (no final newline).
//     kLine       every non-blank line is a document (without its '\n').
//     kFile       the whole file is one document, delivered in parts of about
//                 `block_bytes` each (Document::part / Document::last). Parts are
//                 cut next to a '\n' that has a non-whitespace character (not
//                 Unicode White_Space: U+0085, U+00A0, U+3000 ... are whitespace
//                 too) on both sides (after it, else before it): the GPT-2 and Qwen2 pre-tokenizer
//                 regexes never match across such a point, so encoding the parts
//                 one by one gives the tokens of the whole text. With `cut_ok` set
//                 (corpus: the tokenizer's check of the lines around the cut) a
//                 point it refuses is passed over (an lstrip added token that would
//                 take the '\n', a Split step that does not cut there; after 1024
//                 refused points in one part the next one is taken unchecked and
//                 counted: unchecked_cuts()). Text without
//                 such a point for 16 blocks (e.g. CRLF line ends, or every point
//                 refused) is cut after one of the last 64 newlines before a
//                 non-whitespace character that cut_ok accepts, else after the last such
//                 newline (counted: unchecked_cuts()), else at a UTF-8 character
//                 boundary (tokens at an unchecked cut may differ from encoding the
//                 whole text).
// Documents are numbered 0, 1, 2, ... over all files in the order given.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lol::data {

enum class DocSplit { kBlankLine, kLine, kFile };

/// "blank-line" | "line" | "file". Throws lol::InputError naming `flag` and the choices.
DocSplit parse_doc_split(const std::string& s, const std::string& flag = "--doc-split");
const char* doc_split_name(DocSplit s);

/// True for file names read as JSON lines (*.jsonl, *.ndjson, in any letter case).
bool is_jsonl_file(const std::string& path);

/// Refuses options that no input file would use (a typo or a wrong file would otherwise
/// pass silently): --text-field given while no file is JSON lines, --doc-split given
/// while every file is. Throws lol::InputError naming the flag and the files' kind.
void check_source_flags_apply(const std::vector<std::string>& files, bool text_field_given, bool doc_split_given);

struct DocumentSourceOptions {
  std::string text_field = "text";  ///< JSONL: field holding the document text (string)
  std::string label_field;          ///< JSONL: field holding the label ("" = no labels)
  DocSplit doc_split = DocSplit::kBlankLine;  ///< plain text files
  int64_t block_bytes = 1 << 20;    ///< kFile: bytes per part (at least; see above)
  /// kFile: whether the parts text[0, cut) and text[cut, ...) of the buffered text
  /// encode as the whole would (see above); unset: every clean point is taken.
  std::function<bool(std::string_view text, std::size_t cut)> cut_ok;
  /// Balanced mixes (e.g. an equal share of each language): when > 0, a JSONL document
  /// whose label has already reached this many text bytes is skipped (it still uses
  /// up its document index, so splits stay stable). 0 = no cap. Needs label_field.
  int64_t max_bytes_per_label = 0;
};

/// One document (or, with DocSplit::kFile, one part of a document).
struct Document {
  std::string text;   ///< UTF-8 text (validity is checked by the tokenizer, not here)
  std::string label;  ///< label field value ("" when no label field is read)
  std::string where;  ///< "file:line" of the document's first line (kFile: "file:part N")
  int64_t index = 0;  ///< document number over all files, from 0
  int64_t part = 0;   ///< kFile: part number within the document (else 0)
  bool last = true;   ///< kFile: false while more parts of this document follow
};

class DocumentReader {
 public:
  /// Throws lol::InputError naming the file when a file does not exist or is not a
  /// regular file, when label_field is set for a plain-text file, when block_bytes
  /// < 1, or when max_bytes_per_label is negative or set without label_field.
  DocumentReader(std::vector<std::string> files, DocumentSourceOptions options);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  /// Fills `doc` with the next document (part); false at the end of the last file.
  /// Throws lol::InputError naming file:line for a JSONL line that is not an object
  /// or lacks the text field (or the label field) or has it with the wrong type,
  /// and when a file cannot be read.
  bool next(Document& doc);

  /// Bytes of all input files consumed so far / in total (for progress bars).
  int64_t bytes_read() const { return bytes_done_ + file_bytes_; }
  int64_t total_bytes() const { return total_bytes_; }
  const std::vector<std::string>& files() const { return files_; }
  /// Documents skipped so far because their label had reached max_bytes_per_label.
  int64_t skipped_over_cap() const { return skipped_over_cap_; }
  /// kFile with cut_ok: parts cut where cut_ok refused 1024 points in a row or every
  /// point for 16 blocks (the ids next to such a cut may differ from the whole text's).
  int64_t unchecked_cuts() const { return unchecked_cuts_; }

 private:
  bool open_next_file();
  bool next_jsonl(Document& doc);
  bool next_text(Document& doc);
  bool next_part(Document& doc);

  std::vector<std::string> files_;
  DocumentSourceOptions o_;
  std::unique_ptr<std::ifstream> in_;
  int64_t file_index_ = -1;  // file currently open
  int64_t line_no_ = 0;      // lines read from the current file
  int64_t file_bytes_ = 0;   // bytes read from the current file
  int64_t bytes_done_ = 0;   // bytes of the files already finished
  int64_t total_bytes_ = 0;
  int64_t doc_index_ = 0;
  std::map<std::string, int64_t> label_bytes_;  // max_bytes_per_label: text bytes kept per label
  int64_t skipped_over_cap_ = 0;
  int64_t unchecked_cuts_ = 0;
  // kFile state
  std::string carry_;
  int64_t part_ = 0;
  int64_t part_start_ = 0;  ///< kFile: byte offset of the current part within its document
  bool file_eof_ = false;
};

}  // namespace lol::data
