// A model configuration's size must fit the 64-bit integer counts (parameters, active
// and effective parameters per token) that `lol info`, the FLOPs planner and the
// checkpoint code compute: each range check of a field alone lets products of several
// large fields (layers x experts x d_model x ffn_hidden) overflow.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <string>

#include "util/error.h"

namespace lol::util {

/// Parameters of one transformer block, estimated in floating point (attention
/// projections of width `q_dim` for queries and outputs and `kv_dim` for keys and
/// values, `experts` gated MLPs of width `ffn`, norms).
inline double block_parameter_estimate(double d_model, double q_dim, double kv_dim, double experts, double ffn) {
  return 2 * d_model * q_dim + 2 * d_model * kv_dim + experts * 3 * d_model * ffn + 2 * d_model;
}

/// Throws InputError("<where>: about N parameters (<what>): more than 2^53 ...") when
/// `estimate` exceeds 2^53 (9.0e15, where 64-bit counts of parameters per token and
/// their FLOPs stop being exact; 4000x the largest models trained today).
inline void check_parameter_estimate(const std::string& where, const std::string& what, double estimate) {
  if (estimate <= 0x1p53) return;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", estimate);
  throw InputError(where + ": about " + buf + " parameters (" + what +
                   "): more than 2^53 = 9.0e15, beyond what the parameter and FLOP counts hold exactly; "
                   "expected a smaller model (fewer layers, experts, d_model or ffn_hidden)");
}

/// Throws InputError("<where>: <what> need about X GiB, more than the Y GiB of memory
/// this machine has ...") when `bytes` exceed the physical memory (sysconf), so that a
/// model that cannot be allocated is refused before minutes of allocation end in the
/// kernel's out-of-memory kill. No check when the memory size is unknown.
inline void require_fits_in_memory(const std::string& where, const std::string& what, double bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;
  const double memory = double(pages) * double(page);
  if (bytes <= memory) return;
  char buf[160];
  std::snprintf(buf, sizeof buf, " need about %.1f GiB, more than the %.1f GiB of memory this machine has", bytes / 0x1p30,
                memory / 0x1p30);
  throw InputError(where + ": " + what + buf + " (expected a smaller model: fewer layers, experts, d_model or ffn_hidden)");
}

}  // namespace lol::util
