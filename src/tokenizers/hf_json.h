// Hugging Face `tokenizers` file formats (issue 10): tokenizer.json, and the
// older vocab.json + merges.txt pair, plus tokenizer_config.json.
//
// Supported subset of tokenizer.json (anything else throws lol::InputError naming
// the file and the field):
//   normalizer      null | NFC | NFKC | NFD | NFKD | Prepend | Replace(String) |
//                   Sequence of them (tokenizers/normalizer.h)
//   pre_tokenizer   ByteLevel | Split(Regex|String, Isolated) | Sequence of them,
//                   with exactly one ByteLevel step, last (byte-level BPE); null or
//                   Metaspace (SentencePiece-style BPE, sentencepiece_bpe.h)
//   post_processor  null | ByteLevel | TemplateProcessing | Sequence of them
//                   (TemplateProcessing: the "single" template's special tokens)
//   decoder         ByteLevel, or the SentencePiece-style decoders
//   model           BPE without continuing_subword_prefix / end_of_word_suffix /
//                   dropout; merges as "a b" strings or [a, b]
//   added_tokens    all fields (content, id, special, lstrip, rstrip, single_word,
//                   normalized); ids assigned as Hugging Face does on load
//                   (Tokenizer::hf_added_token_id), not as listed
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizers/bpe_tokenizer.h"
#include "tokenizers/tokenizer.h"

namespace lol::tokenizers {

/// Builds a tokenizer from a parsed tokenizer.json; `where` (the file name) prefixes
/// error messages. A BPE whose vocabulary is exactly the 256 byte characters with
/// id == byte and no merges comes back as a ByteTokenizer, anything else as a
/// BpeTokenizer.
std::unique_ptr<Tokenizer> tokenizer_from_hf_json(const nlohmann::json& j, const std::string& where);

/// Reads a tokenizer.json file (see tokenizer_from_hf_json).
std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& file);

/// GPT-2 style vocab.json ({token: id}) + merges.txt (optional "#version" line, then
/// one "left right" merge per line), with pre-tokenizer pattern `pattern`
/// (GPT-2's by default). "<|endoftext|>", when in the vocabulary, becomes a special
/// added token and the BOS/EOS token (GPT-2's convention). Throws lol::InputError
/// naming the file and line/field.
std::unique_ptr<BpeTokenizer> load_vocab_merges(const std::string& vocab_json, const std::string& merges_txt,
                                                const std::string& pattern = "");

/// Applies tokenizer_config.json: "added_tokens_decoder" entries missing from the
/// tokenizer are added; "bos_token"/"eos_token"/"pad_token" (string or
/// {"content": ...}) set the roles (a token only in the model vocabulary becomes a
/// special added token); "chat_template" (string) is kept. Throws lol::InputError
/// naming the file and field.
void apply_tokenizer_config(Tokenizer& tok, const std::string& config_file);

/// Loads a tokenizer from a directory or a file:
///   dir/tokenizer.json, else dir/vocab.json + dir/merges.txt (then
///   dir/tokenizer_config.json when present); a path to a .json file is read as
///   tokenizer.json (its directory's tokenizer_config.json is applied too).
/// Throws lol::InputError naming what was looked for when nothing fits.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir_or_file);

}  // namespace lol::tokenizers
