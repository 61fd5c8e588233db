// `lol corpus` (issue 7): tokenize text / JSONL files into a token-shard dataset for
// `lol train` (data.packing = "pack"). Logic in src/dataset/corpus.h; see docs/text.md.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "dataset/corpus.h"
#include "dataset/documents.h"
#include "util/error.h"

namespace lol::cli {

void register_corpus(CLI::App& app) {
  auto o = std::make_shared<data::CorpusOptions>();
  auto out = std::make_shared<std::string>();
  auto doc_split = std::make_shared<std::string>("blank-line");
  auto no_progress = std::make_shared<bool>(false);
  auto* c = app.add_subcommand("corpus", "Tokenize text or JSONL files into a token-shard dataset (train/valid split)");
  c->add_option("--in", o->files, "Input files: UTF-8 text, or JSON lines (*.jsonl)")->required();
  c->add_option("--tokenizer", o->tokenizer, "'byte', or a tokenizer.json file / directory")->capture_default_str();
  c->add_option("--out", *out, "Output dataset directory")->required();
  auto* tf = c->add_option("--text-field", o->source.text_field, "JSONL field holding the text")->capture_default_str();
  c->add_option("--label-field", o->source.label_field,
                "JSONL field holding a per-document label (e.g. lang), stored as integer ids");
  c->add_option("--max-bytes-per-label", o->source.max_bytes_per_label,
                "Balanced mix: skip documents whose label already has this many text bytes (0 = no cap)")
      ->capture_default_str();
  c->add_option("--valid-in", o->valid_files,
                "Held-out files: all their documents go to the validation split (after the --in files)");
  auto* ds = c->add_option("--doc-split", *doc_split, "Plain text documents: blank-line | line | file")->capture_default_str();
  c->add_option("--valid-fraction", o->valid_fraction, "Expected share of documents held out for validation")
      ->capture_default_str();
  c->add_option("--seed", o->seed, "Seed of the train/validation split")->capture_default_str();
  c->add_flag("--bos", o->add_bos, "Put the tokenizer's BOS token before every document");
  c->add_flag("--eos", o->add_eos, "Put the tokenizer's EOS token after every document");
  c->add_option("--shard-tokens", o->shard_tokens, "Tokens per shard file")->capture_default_str();
  c->add_flag("--no-progress", *no_progress, "No progress bar");
  c->callback([o, out, doc_split, no_progress, tf, ds] {
    std::vector<std::string> all = o->files;
    all.insert(all.end(), o->valid_files.begin(), o->valid_files.end());
    data::check_source_flags_apply(all, tf->count() > 0 && o->source.text_field != "text", ds->count() > 0);
    o->source.doc_split = data::parse_doc_split(*doc_split);
    o->progress = !*no_progress;
    const auto st = data::build_corpus(*o, *out);
    std::cout << "wrote " << *out << ": train " << st["train"]["documents"] << " documents / " << st["train"]["tokens"]
              << " tokens, valid " << st["valid"]["documents"] << " documents / " << st["valid"]["tokens"]
              << " tokens (" << st["token_dtype"].get<std::string>() << ", " << std::fixed << std::setprecision(2)
              << st["bytes_per_token"].get<double>() << " bytes/token)";
    if (st.contains("labels")) std::cout << ", " << st["labels"].size() << " labels";
    std::cout << "\n";
    if (st["train"]["documents"].get<int64_t>() == 0)
      std::cerr << "note: the train split has no document (--valid-fraction " << o->valid_fraction
                << (o->valid_files.empty() ? "" : " and --valid-in") << " took them all): `lol train` needs one; "
                << "lower --valid-fraction\n";
    if (st["valid"]["documents"].get<int64_t>() == 0)
      std::cerr << "note: no document was held out for validation (--valid-fraction " << o->valid_fraction
                << " of " << st["train"]["documents"] << " documents"
                << (o->valid_files.empty() ? "" : "; the --valid-in files hold none")
                << "), so `lol train` skips evaluation and `lol eval lm` has no valid split: raise "
                << (o->valid_files.empty() ? "--valid-fraction or give --valid-in FILES" : "--valid-fraction or give --valid-in files with documents")
                << "\n";
  });
}

}  // namespace lol::cli
