// Error types shared by every part of lol.
//
// lol::InputError is thrown for bad user input (files, configs, command-line
// values). Its message names the file, the field and the expected value; the CLI
// prints it and exits with code 2. lol::NonFiniteError (NaN/Inf where a model must
// produce finite numbers) exits with code 3. Anything else is an internal error (exit 1).
#pragma once
#include <stdexcept>
#include <string>

namespace lol {

/// Bad input from the user: a malformed file, an unknown or out-of-range config
/// field, an invalid command-line value. The CLI maps it to exit code 2.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

/// A model computed NaN or Inf where finite numbers are required (logits, a loss, router
/// probabilities): its activations overflowed the compute dtype, usually because the
/// weights are huge or damaged. The message names what was being computed. The CLI
/// exits with code 3 (as for a non-finite training loss).
class NonFiniteError : public std::runtime_error {
 public:
  explicit NonFiniteError(const std::string& what) : std::runtime_error(what) {}
};

/// Throws InputError(where + ": " + what) when cond is false.
inline void require(bool cond, const std::string& where, const std::string& what) {
  if (!cond) throw InputError(where + ": " + what);
}

}  // namespace lol
