// `lol tokenizer train|encode|decode` (issue 7): train a byte-level BPE on the
// user's text files and write a Hugging Face tokenizer.json; encode text to ids and
// decode ids to text with any tokenizer lol reads ("byte", tokenizer.json,
// vocab.json + merges.txt). See docs/text.md.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <tuple>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "dataset/documents.h"
#include "dataset/text_tokenizer.h"
#include "io/atomic_file.h"
#include "jinja/value.h"
#include "tokenizers/bpe_trainer.h"
#include "tokenizers/chat_template.h"
#include "tokenizers/regex_splitter.h"
#include "util/error.h"

namespace lol::cli {

namespace {

struct TokenizerTrainArgs {
  std::vector<std::string> in, specials{"<|endoftext|>"};
  std::string out, pattern = "gpt2", regex, bos, eos = "<|endoftext|>", pad, text_field = "text",
                   label_field, doc_split = "file";
  int64_t max_bytes_per_label = 0;
  int32_t vocab_size = 4096;
  int64_t min_frequency = 2;
  bool no_progress = false, text_field_given = false, doc_split_given = false, eos_given = false;
};

void run_tokenizer_train(const TokenizerTrainArgs& a) {
  tokenizers::TrainBpeOptions o;
  o.vocab_size = a.vocab_size;
  o.special_tokens = a.specials;
  if (!a.regex.empty()) {
    o.pattern = a.regex;
  } else if (a.pattern == "gpt2") {
    o.pattern = tokenizers::kGpt2Pattern;
  } else if (a.pattern == "qwen2") {
    o.pattern = tokenizers::kQwen2Pattern;
  } else {
    throw InputError("--pattern '" + a.pattern + "': expected gpt2 or qwen2 (or give --regex)");
  }
  o.min_frequency = a.min_frequency;
  o.bos_token = a.bos;
  o.pad_token = a.pad;
  // The default EOS applies only when its token is among the specials.
  const auto listed = [&](const std::string& token) {
    return token.empty() || std::find(a.specials.begin(), a.specials.end(), token) != a.specials.end();
  };
  // A role token given on the command line must be a special token (the library says so
  // too, without the flag's name).
  for (const auto& [flag, token, given] : {std::tuple<const char*, std::string, bool>{"--eos", a.eos, a.eos_given},
                                           {"--bos", a.bos, true},
                                           {"--pad", a.pad, true}})
    if (given && !listed(token)) {
      std::string specials;
      for (const auto& s : a.specials) specials += (specials.empty() ? "" : " ") + s;
      throw InputError(std::string(flag) + " '" + token + "': not one of the --special tokens (" +
                       (specials.empty() ? std::string("none") : specials) + "); list it there too");
    }
  o.eos_token = listed(a.eos) ? a.eos : "";
  o.progress = !a.no_progress;

  data::check_source_flags_apply(a.in, a.text_field_given, a.doc_split_given);
  // Datasets and checkpoints keep their own copy, but a tokenizer folder may be what a
  // later `lol corpus --tokenizer` reads: never replaced silently (as `lol corpus`, `lol data`).
  if (std::filesystem::exists(std::filesystem::path(a.out) / "tokenizer.json"))
    throw InputError("--out " + a.out + ": already holds a tokenizer.json (choose another directory, or remove it)");
  data::DocumentSourceOptions so;
  so.text_field = a.text_field;
  so.label_field = a.label_field;
  so.max_bytes_per_label = a.max_bytes_per_label;
  so.doc_split = data::parse_doc_split(a.doc_split);
  data::DocumentReader reader(a.in, so);
  data::Document doc;
  std::string error_where;
  int64_t documents = 0;  // a document of --doc-split file is read in parts (st.texts counts them)
  auto next_text = [&](std::string& out) {
    if (!reader.next(doc)) return false;
    documents += doc.last ? 1 : 0;
    out.swap(doc.text);
    error_where = doc.where;
    return true;
  };
  tokenizers::TrainBpeStats st;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<tokenizers::BpeTokenizer> tok;
  try {
    tok = tokenizers::train_bpe(next_text, o, &st);
  } catch (const InputError& e) {
    // Errors about a text (invalid UTF-8) name the text index: add where it came from.
    throw InputError(std::string(e.what()) + (error_where.empty() ? "" : " (last document read: " + error_where + ")"));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tok->save(a.out);
  std::cout << "wrote " << a.out << "/tokenizer.json: vocabulary " << tok->vocab_size() << " (" << a.specials.size()
            << " special, 256 bytes, " << st.merges << " merges), trained on " << documents << (documents == 1 ? " document" : " documents")
            << (st.texts != documents ? " (" + std::to_string(st.texts) + " parts)" : std::string()) << ", " << st.bytes
            << " bytes, " << st.unique_words << " unique pre-tokens in " << std::fixed << std::setprecision(1) << secs
            << " s\n";
  if (tok->vocab_size() < a.vocab_size)
    std::cerr << "note: --vocab-size " << a.vocab_size << " asked for " << a.vocab_size - tok->vocab_size()
              << " more ids than the training text gives (" << st.merges << " merges: after them no pair of tokens "
              << "occurs --min-frequency " << a.min_frequency << " times); more text or a lower --min-frequency "
              << "gives more merges\n";
}

struct CodecArgs {
  std::string tokenizer, text, file, ids, jsonl, text_field = "text";
  bool json = false, stats = false, skip_special = false, add_special = false;
  bool text_given = false, file_given = false, ids_given = false;  ///< given, possibly empty
};

/// --jsonl: one JSON array of ids per record of a JSON-lines file (blank lines skipped),
/// to compare with another implementation line by line.
void encode_jsonl(const tokenizers::Tokenizer& tok, const CodecArgs& a) {
  require(data::is_jsonl_file(a.jsonl), "--jsonl " + a.jsonl, "expected a *.jsonl or *.ndjson file");
  data::DocumentSourceOptions so;
  so.text_field = a.text_field;
  data::DocumentReader reader({a.jsonl}, so);
  data::Document doc;
  while (reader.next(doc)) {
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(doc.text, a.add_special);
    } catch (const InputError& e) {
      throw InputError(doc.where + ": " + e.what());
    }
    std::cout << nlohmann::json(ids).dump() << "\n";
  }
}

std::string read_all(std::istream& in) {
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void run_encode(const CodecArgs& a) {
  auto tok = data::open_text_tokenizer(a.tokenizer);
  if (!a.jsonl.empty()) {
    encode_jsonl(*tok, a);
    return;
  }
  std::string text, source;
  if (a.file_given) {
    if (a.file.empty()) throw InputError("--file: empty path (expected a file to encode; --text '' encodes no text)");
    text = io::read_file(a.file);
    source = "--file " + a.file;
  } else if (a.text_given) {  // "" too: the empty text (no ids), not standard input
    text = a.text;
    source = "--text";
  } else {
    text = read_all(std::cin);
    source = "standard input";
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids;
  try {
    ids = tok->encode(text, a.add_special);
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());  // invalid UTF-8: say where the text came from
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.stats) {
    std::cout << ids.size() << " tokens, " << text.size() << " bytes, " << std::fixed << std::setprecision(3)
              << (ids.empty() ? 0.0 : double(text.size()) / double(ids.size())) << " bytes/token, "
              << std::setprecision(1) << (secs > 0 ? double(text.size()) / secs / 1e6 : 0.0) << " MB/s\n";
    return;
  }
  if (a.json) {
    std::cout << nlohmann::json(ids).dump() << "\n";
    return;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
}

void run_decode(const CodecArgs& a) {
  auto tok = data::open_text_tokenizer(a.tokenizer);
  // --ids '' is no ids (the empty text), not standard input.
  const auto ids64 = !a.ids_given ? parse_ids(read_all(std::cin), "standard input") : parse_ids(a.ids, "--ids");
  const std::vector<int32_t> ids(ids64.begin(), ids64.end());
  // As transformers' decode: the folder's clean_up_tokenization_spaces applies.
  const std::string text = tok->decode(ids, a.skip_special);
  std::cout << (tok->clean_up_tokenization_spaces() ? tokenizers::clean_up_tokenization(text) : text);
}

struct ChatArgs {
  std::string tokenizer, template_file, messages, prompt, system, tools, date, template_name;
  std::vector<std::string> vars;
  bool no_generation_prompt = false, ids = false, system_given = false, prompt_given = false, date_given = false;
};

}  // namespace

/// A chat input file (template, messages, tools): at most 64 MiB (chat templates are
/// kilobytes; /dev/zero is not a file), else InputError naming the flag.
std::string read_chat_file(const std::string& path, const std::string& what) {
  constexpr size_t kMax = size_t(64) << 20;
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec)) throw InputError(what + " " + path + ": cannot read the file");
  std::string text(kMax + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (text.size() > kMax) throw InputError(what + " " + path + ": larger than 64 MiB");
  return text;
}

namespace {

/// Counts the members of each JSON object (nlohmann's ordered_json inserts a member
/// with a linear search: an object of 200,000 keys takes minutes to read).
struct MemberCount : nlohmann::json::json_sax_t {
  std::vector<size_t> open;
  size_t most = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open.push_back(0);
    return true;
  }
  bool key(string_t&) override {
    most = std::max(most, ++open.back());
    return true;
  }
  bool end_object() override {
    open.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override { return false; }
};

}  // namespace

nlohmann::ordered_json read_ordered_json(const std::string& path, const std::string& what) {
  const std::string text = read_chat_file(path, what);
  MemberCount count;
  nlohmann::json::sax_parse(text, &count, nlohmann::json::input_format_t::json, /*strict=*/false);
  if (count.most > 10000)
    throw InputError(what + " " + path + ": an object with " + std::to_string(count.most) +
                     " members (at most 10000: chat messages and tool schemas have few)");
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax, and numbers beyond a double (1e400)
    throw InputError(what + " " + path + ": not valid JSON (or a number beyond a double): " + e.what());
  }
}

nlohmann::ordered_json read_messages_file(const std::string& path) {
  auto messages = read_ordered_json(path, "--messages");
  if (!messages.is_array())
    throw InputError("--messages " + path + ": expected a JSON array of message objects "
                     "([{\"role\": \"user\", \"content\": \"...\"}, ...])");
  return messages;
}

tokenizers::ChatTemplateOptions chat_template_options(const std::vector<std::string>& vars, const std::string& date,
                                                      bool date_given) {
  tokenizers::ChatTemplateOptions o;
  for (const auto& v : vars) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError("--var " + v + ": expected NAME=VALUE (VALUE as JSON, e.g. enable_thinking=false, or plain text)");
    const std::string name = v.substr(0, eq), value = v.substr(eq + 1);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(value, nullptr, /*allow_exceptions=*/false);
    o.variables[name] = j.is_discarded() ? nlohmann::ordered_json(value) : j;
  }
  if (!date.empty() || date_given) {
    std::tm tm{};
    // Exactly YYYY-MM-DD, a real day (as Python's datetime: years 1..9999).
    bool shape = date.size() == 10 && date[4] == '-' && date[7] == '-';
    for (size_t k = 0; shape && k < 10; ++k)
      if (k != 4 && k != 7) shape = std::isdigit(static_cast<unsigned char>(date[k])) != 0;
    const int y = shape ? std::atoi(date.substr(0, 4).c_str()) : 0, m = shape ? std::atoi(date.substr(5, 2).c_str()) : 0,
              d = shape ? std::atoi(date.substr(8, 2).c_str()) : 0;
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (!shape || y < 1 || m < 1 || m > 12 || d < 1 || d > days[m - 1])
      throw InputError("--date " + date + ": expected a real day as YYYY-MM-DD");
    tm.tm_year = y - 1900;
    tm.tm_mon = m - 1;
    tm.tm_mday = d;
    tm.tm_isdst = -1;
    o.now = std::mktime(&tm);
  }
  return o;
}

namespace {

void run_chat(const ChatArgs& a) {
  std::unique_ptr<tokenizers::Tokenizer> tok;
  if (!a.tokenizer.empty()) tok = data::open_text_tokenizer(a.tokenizer);
  if (a.ids && !tok) throw InputError("--ids needs --tokenizer");
  std::string tmpl, where;
  if (!a.template_file.empty()) {
    tmpl = read_chat_file(a.template_file, "--template");
    where = a.template_file;
  } else {
    if (!tok) throw InputError("give --template FILE or --tokenizer DIR (its chat template)");
    where = a.tokenizer + ": chat_template" + (a.template_name.empty() ? "" : " \"" + a.template_name + "\"");
    tmpl = tokenizers::select_chat_template(*tok, a.template_name, !a.tools.empty(), where);
    if (tmpl.empty())
      throw InputError(a.tokenizer + ": the tokenizer has no chat template (tokenizer_config.json \"chat_template\" "
                       "or chat_template.jinja); pass --template FILE");
  }
  nlohmann::ordered_json messages;
  if (!a.messages.empty()) {
    messages = read_messages_file(a.messages);
  } else {
    if (!a.prompt_given && !a.system_given) throw InputError("give --messages FILE.json or --prompt TEXT");
    std::vector<tokenizers::ChatMessage> msgs;
    if (a.system_given) msgs.push_back({"system", a.system});
    if (a.prompt_given) msgs.push_back({"user", a.prompt});  // "" too: an empty user turn
    messages = tokenizers::messages_json(msgs);
  }
  tokenizers::ChatTemplateOptions o = chat_template_options(a.vars, a.date, a.date_given);
  o.add_generation_prompt = !a.no_generation_prompt;
  if (!a.tools.empty()) {
    o.tools = read_ordered_json(a.tools, "--tools");
    if (!o.tools->is_array()) throw InputError("--tools " + a.tools + ": expected a JSON array of tool schemas");
  }
  const std::string text = tokenizers::render_chat_template(tmpl, where, messages, o, tok.get());
  if (!a.ids) {
    std::cout << text << std::flush;
    return;
  }
  // As apply_chat_template(tokenize=True): the template's text holds its own special
  // tokens, so the post-processor adds none.
  const auto ids = tok->encode(text, false);
  for (size_t k = 0; k < ids.size(); ++k) std::cout << (k ? " " : "") << ids[k];
  std::cout << "\n";
}

}  // namespace

void register_tokenizer(CLI::App& app) {
  auto* t = app.add_subcommand("tokenizer", "Train byte-level BPE tokenizers; encode and decode text");
  t->require_subcommand(1);

  auto ta = std::make_shared<TokenizerTrainArgs>();
  auto* tr = t->add_subcommand("train", "Train a byte-level BPE on text files and write a Hugging Face tokenizer.json");
  tr->add_option("--in", ta->in, "Input files: UTF-8 text, or JSON lines (*.jsonl) with a text field")->required();
  tr->add_option("--vocab-size", ta->vocab_size, "Vocabulary size, specials and the 256 bytes included")
      ->capture_default_str();
  tr->add_option("--out", ta->out, "Output directory (tokenizer.json, tokenizer_config.json)")->required();
  tr->add_option("--special", ta->specials, "Special tokens (ids 0, 1, ...)")->capture_default_str();
  tr->add_option("--bos", ta->bos, "BOS token (one of --special)");
  auto* eos = tr->add_option("--eos", ta->eos, "EOS token (one of --special; the default applies when listed)")
                  ->capture_default_str();
  tr->add_option("--pad", ta->pad, "PAD token (one of --special)");
  tr->add_option("--pattern", ta->pattern, "Pre-tokenizer regex: gpt2 | qwen2")->capture_default_str();
  tr->add_option("--regex", ta->regex, "Custom pre-tokenizer regex (PCRE2), instead of --pattern")
      ->check(non_empty("PCRE2 pattern"));
  tr->add_option("--min-frequency", ta->min_frequency, "Pairs seen fewer times are never merged")->capture_default_str();
  auto* tf = tr->add_option("--text-field", ta->text_field, "JSONL field holding the text")->capture_default_str();
  tr->add_option("--label-field", ta->label_field, "JSONL field holding a per-document label (with --max-bytes-per-label)");
  tr->add_option("--max-bytes-per-label", ta->max_bytes_per_label,
                 "Balanced mix: skip documents whose label already has this many text bytes (0 = no cap)")
      ->capture_default_str();
  auto* ds =
      tr->add_option("--doc-split", ta->doc_split, "Plain text documents: blank-line | line | file")->capture_default_str();
  tr->add_flag("--no-progress", ta->no_progress, "No progress bar");
  tr->callback([ta, tf, ds, eos] {
    ta->eos_given = eos->count() > 0;
    ta->text_field_given = tf->count() > 0 && ta->text_field != "text";  // the default, spelled out, is harmless
    ta->doc_split_given = ds->count() > 0;
    run_tokenizer_train(*ta);
  });

  auto ea = std::make_shared<CodecArgs>();
  auto* en = t->add_subcommand("encode", "Print the token ids of a text (from --text, --file or stdin)");
  en->add_option("--tokenizer", ea->tokenizer, "'byte', a tokenizer.json file or its directory")->required();
  auto* tx = en->add_option("--text", ea->text, "Text to encode");
  auto* fl = en->add_option("--file", ea->file, "File to encode")->excludes(tx);
  auto* jl = en->add_option("--jsonl", ea->jsonl, "JSON-lines file: print one JSON array of ids per record")
                 ->excludes(tx)
                 ->excludes(fl);
  en->add_option("--text-field", ea->text_field, "With --jsonl: the field holding the text")
      ->capture_default_str()
      ->needs(jl);
  en->add_flag("--add-special-tokens", ea->add_special,
               "Add the post-processor's tokens (e.g. BOS), as Hugging Face's encode does by default");
  en->add_flag("--json", ea->json, "Print a JSON array");
  en->add_flag("--stats", ea->stats, "Print token count, bytes per token and encoding speed instead of ids")
      ->excludes(jl);
  en->callback([ea, tx, fl] {
    ea->text_given = tx->count() > 0;
    ea->file_given = fl->count() > 0;
    run_encode(*ea);
  });

  auto ca = std::make_shared<ChatArgs>();
  auto* ch = t->add_subcommand("chat", "Render a conversation with a Hugging Face chat template (as transformers' "
                                       "apply_chat_template); print the text or, with --ids, its token ids");
  ch->add_option("--tokenizer", ca->tokenizer, "Tokenizer directory or tokenizer.json: its chat template and special tokens");
  auto* tpl = ch->add_option("--template", ca->template_file, "A Jinja chat template file (instead of the tokenizer's)");
  ch->add_option("--chat-template", ca->template_name,
                 "Which of the tokenizer's named templates (default: \"tool_use\" with --tools when there is one, "
                 "else the default)")
      ->excludes(tpl);
  auto* msgs = ch->add_option("--messages", ca->messages, "JSON file: an array of messages ({role, content, ...})");
  auto* cpr = ch->add_option("--prompt", ca->prompt, "One user message (instead of --messages)")->excludes(msgs);
  auto* sys = ch->add_option("--system", ca->system, "A system message before --prompt")->excludes(msgs);
  ch->add_flag("--no-generation-prompt", ca->no_generation_prompt, "add_generation_prompt=False (no assistant turn opened)");
  ch->add_option("--tools", ca->tools, "JSON file: an array of tool schemas, passed as `tools`");
  ch->add_option("--var", ca->vars, "Template variable NAME=VALUE (VALUE as JSON, else text), e.g. enable_thinking=false");
  auto* cdt = ch->add_option("--date", ca->date, "YYYY-MM-DD for strftime_now (default: today)");
  ch->add_flag("--ids", ca->ids, "Print the token ids (needs --tokenizer)");
  ch->callback([ca, sys, cpr, cdt] {
    ca->date_given = cdt->count() > 0;
    ca->system_given = sys->count() > 0;
    ca->prompt_given = cpr->count() > 0;
    run_chat(*ca);
  });

  auto da = std::make_shared<CodecArgs>();
  auto* de = t->add_subcommand("decode", "Print the text of token ids (from --ids or stdin)");
  de->add_option("--tokenizer", da->tokenizer, "'byte', a tokenizer.json file or its directory")->required();
  auto* ids = de->add_option("--ids", da->ids, "Token ids separated by spaces or commas (a JSON array works too)");
  de->add_flag("--skip-special", da->skip_special, "Leave special tokens out");
  de->callback([da, ids] {
    da->ids_given = ids->count() > 0;
    run_decode(*da);
  });
}

}  // namespace lol::cli
