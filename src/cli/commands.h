// Sub-command registry of the `lol` tool. Each sub-command lives in its own
// src/cli/cmd_<name>.cpp and exposes a register function listed in main.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tokenizers/chat_template.h"

namespace lol::cli {

// Each registers one sub-command (and its own sub-sub-commands) on `app`.
// (filled as sub-commands land)
void register_model_commands(CLI::App& app);
void register_data(CLI::App& app);
void register_paths(CLI::App& app);
void register_train(CLI::App& app);  // train, plot (cmd_train.cpp)
void register_generate(CLI::App& app);  // generate, bench generate (cmd_generate.cpp)
void register_analyze(CLI::App& app);  // analyze routing (cmd_analyze.cpp)
void register_tokenizer(CLI::App& app);  // tokenizer train|encode|decode|chat (cmd_tokenizer.cpp)
/// The chat template options of --var NAME=VALUE (VALUE parsed as JSON, else taken as
/// text) and --date YYYY-MM-DD (strftime_now's day, local midnight; not given = now;
/// given, it must be a real day).
/// Throws InputError naming the flag for a malformed value (cmd_tokenizer.cpp).
tokenizers::ChatTemplateOptions chat_template_options(const std::vector<std::string>& vars, const std::string& date,
                                                      bool date_given = false);
/// The JSON document in `path`, object keys in file order (as Python's json.load);
/// InputError "<what> <path>: not valid JSON: ..." otherwise.
nlohmann::ordered_json read_ordered_json(const std::string& path, const std::string& what);
/// --messages FILE: a JSON array of message objects (InputError naming the flag otherwise).
nlohmann::ordered_json read_messages_file(const std::string& path);
void register_corpus(CLI::App& app);  // corpus (cmd_corpus.cpp)
void register_bench(CLI::App& app);  // bench matmul|train (cmd_bench.cpp)
/// The shared `bench` sub-command (created on first use; cmd_bench.cpp).
CLI::App* bench_command(CLI::App& app);
void register_eval(CLI::App& app);  // eval lm|choice (cmd_eval.cpp)
void register_compare(CLI::App& app);  // compare (cmd_compare.cpp)
void register_launch(CLI::App& app);  // launch (cmd_launch.cpp, issue 14)
void register_hf(CLI::App& app);  // hf info|generate|ppl|bench (cmd_hf.cpp, issue 10)
void register_export(CLI::App& app);  // export --hf (cmd_export.cpp, issue 10)
void register_layerroute(CLI::App& app);  // layerroute train|eval (cmd_layerroute.cpp), merge|render|generate (cmd_layerroute_tools.cpp), issue 11
void register_env(CLI::App& app);  // env (cmd_env.cpp)

}  // namespace lol::cli
