// `lol env`: the environment a run's numbers depend on besides its config and seeds
// (core/environment.h): versions, CPU, the BLAS and ATen kernels chosen for it, threads,
// and the settings read from environment variables. `lol train` writes the same record
// to <run>/environment.jsonl at every start.
#include <iostream>

#include "cli/commands.h"
#include "core/environment.h"
#include "core/runtime.h"

namespace lol::cli {

namespace {

struct EnvArgs {
  std::string device = "cpu";
  bool json = false;
};

}  // namespace

void register_env(CLI::App& app) {
  auto a = std::make_shared<EnvArgs>();
  auto* e = app.add_subcommand(
      "env", "Print the environment results depend on: versions, CPU, BLAS/ATen kernels, threads (as in environment.jsonl of a run)");
  e->add_option("--device", a->device, "cpu | cuda[:N]")->capture_default_str();
  e->add_flag("--json", a->json, "One JSON object (the record `lol train` writes to environment.jsonl)");
  e->callback([a] {
    const auto env = runtime_environment(parse_device(a->device));
    if (a->json)
      std::cout << env.dump(1) << "\n";
    else
      std::cout << format_environment(env);
  });
}

}  // namespace lol::cli
