// lol: command-line entry point. Exit codes: 0 success, 1 internal error,
// 2 bad input (lol::InputError or a CLI parse error), 3 non-finite loss (`lol train`),
// 4 out of memory (host or device allocation failed).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/environment.h"
#include "core/runtime.h"
#include "util/error.h"

namespace {

/// CLI11 parses "-1" into an unsigned option by wrapping it to 2^64 - 1 and saturates
/// values beyond it; every unsigned option (type UINT: seeds, counts) and every --threads
/// refuses a negative value, and unsigned options a value above 2^64 - 1, instead. Every
/// number option (INT, UINT, FLOAT) refuses an empty value, which CLI11 reads as 0.
void refuse_negative_counts(CLI::App& app) {
  const CLI::Validator non_negative(
      [](std::string& v) {
        const auto b = v.find_first_not_of(" \t");
        return b != std::string::npos && v[b] == '-' ? "Value " + v + ": expected an integer >= 0" : std::string();
      },
      "", "NON_NEGATIVE");
  const CLI::Validator fits_uint64(
      [](std::string& v) {
        errno = 0;
        const auto b = v.find_first_not_of(" \t");
        if (b == std::string::npos || v[b] == '-') return std::string();  // non_negative's case
        (void)std::strtoull(v.c_str(), nullptr, 0);
        return errno == ERANGE ? "Value " + v + ": expected an integer in [0, 18446744073709551615]" : std::string();
      },
      "", "UINT64");
  // CLI11 converts an empty string to 0 (`--lr ""`, `--lr=$UNSET`): a number option
  // refuses it instead.
  const CLI::Validator not_empty(
      [](std::string& v) { return v.find_first_not_of(" \t") == std::string::npos ? std::string("empty value: expected a number") : std::string(); },
      "", "NOT_EMPTY");
  // --threads: 0 means "all available"; a negative count is a typo, not a request.
  for (CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (is_unsigned || type.rfind("INT", 0) == 0 || type.rfind("FLOAT", 0) == 0 || type.rfind("NUMBER", 0) == 0)
      o->check(not_empty);
    if (is_unsigned || o->check_lname("threads")) o->check(non_negative);
    if (is_unsigned) o->check(fits_uint64);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) refuse_negative_counts(*sub);
}

}  // namespace

// OMP_WAIT_POLICY / OPENBLAS_THREAD_TIMEOUT defaults, set before libgomp and OpenBLAS
// initialise (core/runtime.h).
LOL_THREAD_POOL_DEFAULTS_PREINIT;

/// What a failed allocation asks of the user, whichever command it was.
constexpr const char* kOutOfMemoryAdvice =
    "the command needs more memory than this machine gives it; reduce what it was asked to hold (batch size, "
    "sequence length, model size; for generated data --n or --size)";

/// Under `lol launch` / torchrun (WORLD_SIZE > 1) every rank runs the whole command:
/// only `lol train` divides its work among ranks; any other command would run N times
/// and its ranks would write the same outputs (two `layerroute train` into one --out).
static void refuse_data_parallel_launch(int argc, char** argv) {
  const char* w = std::getenv("WORLD_SIZE");
  if (!w || std::string(w).empty() || std::string(w) == "1") return;
  std::string command;
  for (int i = 1; i < argc && command.empty(); ++i)
    if (argv[i][0] != '-') command = argv[i];
  if (command.empty() || command == "train" || command == "env") return;
  throw lol::InputError("lol " + command + " runs in one process (WORLD_SIZE = " + w +
                        " here, under lol launch or torchrun; only lol train trains data-parallel): run it without a "
                        "launcher");
}

/// `--name=` (an empty value written with '='), where `name` is an option of the
/// subcommand being parsed that takes a value: CLI11 reads the argument after it as the
/// value (`--system= --no-progress` trained with the system prompt "--no-progress"), so
/// it becomes `--name` followed by an empty argument, as `--name ''` is read. Left alone:
/// flags (`--json=` stays CLI11's), an argument that is the value of the option before
/// it (`--text --a=`), and everything after a bare `--`. Number options refuse an empty
/// value (refuse_negative_counts).
static std::vector<std::string> split_empty_equals_values(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args;
  CLI::App* cur = &app;  // the subcommand the arguments so far selected
  auto takes_value = [&](const std::string& a, std::size_t name_end) {
    if (a.size() <= 2 || a.compare(0, 2, "--") != 0) return false;
    const CLI::Option* o = cur->get_option_no_throw(a.substr(0, name_end));
    return o != nullptr && !o->get_positional() && o->get_items_expected_max() > 0;
  };
  bool options_ended = false, is_value = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool value_of_previous = is_value;
    is_value = false;
    if (i == 0 || options_ended || value_of_previous) {
      args.push_back(a);
      continue;
    }
    if (a == "--") options_ended = true;
    if (!a.empty() && a[0] != '-')
      for (CLI::App* sub : cur->get_subcommands([](CLI::App*) { return true; }))
        if (sub->check_name(a)) {
          cur = sub;
          break;
        }
    const auto eq = a.find('=');
    if (eq != std::string::npos && eq + 1 == a.size() && takes_value(a, eq)) {
      args.push_back(a.substr(0, eq));
      args.emplace_back();
      continue;
    }
    // `--name VALUE`: the next argument is a value, whatever it looks like.
    is_value = eq == std::string::npos && takes_value(a, a.size());
    args.push_back(a);
  }
  return args;
}

int main(int argc, char** argv) {
  CLI::App app{"lol: Library of Layers and LayerRoute transformers in C++ (LibTorch)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lol ") + lol::kLolVersion);
  try {
    lol::init_runtime();  // reads LOL_NUM_THREADS and LOL_CPU_KERNELS
  } catch (const lol::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  lol::cli::register_model_commands(app);
  lol::cli::register_data(app);
  lol::cli::register_paths(app);
  lol::cli::register_train(app);
  lol::cli::register_generate(app);
  lol::cli::register_analyze(app);
  lol::cli::register_tokenizer(app);
  lol::cli::register_corpus(app);
  lol::cli::register_bench(app);
  lol::cli::register_eval(app);
  lol::cli::register_compare(app);
  lol::cli::register_launch(app);
  lol::cli::register_hf(app);
  lol::cli::register_export(app);
  lol::cli::register_layerroute(app);
  lol::cli::register_env(app);
  refuse_negative_counts(app);
  try {
    refuse_data_parallel_launch(argc, argv);
    std::vector<std::string> args = split_empty_equals_values(app, argc, argv);
    std::vector<char*> arg_ptrs;
    for (std::string& a : args) arg_ptrs.push_back(a.data());
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const lol::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const lol::NonFiniteError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user named that cannot be created or read (a file where a directory is
    // expected, no permission): an input problem, named by its path.
    std::string what = e.what();
    const std::string prefix = "filesystem error: ";
    if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
    if (const auto bracket = what.find(" ["); bracket != std::string::npos) what = what.substr(0, bracket);
    std::cerr << "error: " << (e.path1().empty() ? std::string() : e.path1().string() + ": ") << what << "\n";
    return 2;
  } catch (const std::bad_alloc& e) {
    std::cerr << "error: out of memory (" << e.what() << "): " << kOutOfMemoryAdvice << "\n";
    return 4;
  } catch (const std::exception& e) {
    // LibTorch reports failed allocations as c10::Error ("DefaultCPUAllocator: can't allocate
    // memory", "CUDA out of memory"); they are a resource limit, not a bug of ours.
    const std::string m = e.what();
    if (m.find("can't allocate memory") != std::string::npos || m.find("out of memory") != std::string::npos) {
      std::cerr << "error: out of memory: " << m.substr(0, m.find('\n'))
                << "\n" << kOutOfMemoryAdvice << "\n";
      return 4;
    }
    std::cerr << "internal error: " << m << "\n";
    return 1;
  }
  // Output that did not reach its destination (a full disk behind `> file`, a closed
  // pipe) is a failed command, not a success with a truncated result.
  std::cout.flush();
  const bool cout_failed = !std::cout;
  if (cout_failed || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno;
    std::cerr << "error: writing to standard output failed" << (err ? std::string(": ") + std::strerror(err) : "")
              << "\n";
    return 2;
  }
  return 0;
}
