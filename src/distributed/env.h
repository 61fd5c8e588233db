// The launch environment of a data-parallel job, in torchrun's conventions
// (docs/distributed.md): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, plus lol's own LOL_DIST_TIMEOUT (seconds) and
// LOL_DIST_CHECK_EVERY (steps between parameter-equality checks).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace lol::dist {

struct DistEnv {
  int rank = 0;              ///< global rank, 0..world_size-1
  int world_size = 1;        ///< processes in the job (all nodes)
  int local_rank = 0;        ///< rank on this node (selects cuda:LOCAL_RANK)
  int local_world_size = 1;  ///< processes on this node
  std::string master_addr = "127.0.0.1";  ///< host of rank 0's TCPStore
  int master_port = 29500;   ///< port of rank 0's TCPStore
  /// Longest wait of any collective or of the rendezvous before the job fails.
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};
  int64_t check_every = 100;  ///< optimizer steps between parameter-equality checks (0 = only at saves/end)
  bool distributed() const { return world_size > 1; }
};

/// Reads the variables above. Without WORLD_SIZE (or with WORLD_SIZE=1) the result is
/// a single-process environment and nothing else is required. Otherwise RANK,
/// MASTER_ADDR and MASTER_PORT are required; LOCAL_RANK defaults to RANK and
/// LOCAL_WORLD_SIZE to WORLD_SIZE. Throws InputError naming the variable and the
/// expected value for missing, non-numeric or out-of-range values.
DistEnv read_dist_env();

/// Parses a decimal integer environment value; throws InputError naming `name`.
int64_t parse_env_int(const std::string& name, const std::string& value, int64_t lo, int64_t hi);

/// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, then close).
/// Throws std::runtime_error when no socket can be bound.
int free_tcp_port();

}  // namespace lol::dist
