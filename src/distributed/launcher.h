// `lol launch`: starts the processes of a data-parallel job on this node with the
// torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT; docs/distributed.md), forwards SIGINT/SIGTERM to them and ends the job
// when one fails.
#pragma once
#include <string>
#include <vector>

namespace lol::dist {

/// Processes one `lol launch` starts at most (one per GPU or CPU share; the bound keeps a
/// typo from exhausting the process table).
constexpr int kMaxLocalProcesses = 1024;

struct LaunchOptions {
  int nproc = 1;           ///< processes on this node
  int nnodes = 1;          ///< nodes in the job (each runs its own `lol launch`)
  int node_rank = 0;       ///< this node, 0..nnodes-1 (node 0 hosts rank 0)
  std::string master_addr = "127.0.0.1";  ///< node 0's address, reachable from every node
  int master_port = 0;     ///< 0 = a free port (single node only)
  int timeout_s = 0;       ///< > 0: LOL_DIST_TIMEOUT for the ranks (seconds)
  int threads = 0;         ///< LOL_NUM_THREADS per rank; 0 = cores / nproc unless already set
  int grace_s = 30;        ///< after a rank failed, seconds before the others get SIGTERM
  std::vector<std::string> command;  ///< program and arguments; "lol" = this executable
};

/// Runs the job and returns the launcher's exit status: 0 when every rank exited with
/// 0, else the status of the first rank that failed (128 + signal when killed).
/// After a failure the other ranks get `grace_s` seconds to notice and exit on their
/// own (their collectives fail with an error), then SIGTERM, then SIGKILL 10 s later.
/// Throws InputError for invalid options (naming the flag).
int launch(const LaunchOptions& opts);

/// The environment of local rank `local_rank` (KEY=VALUE strings added to the
/// launcher's own). Exposed for tests.
std::vector<std::string> rank_environment(const LaunchOptions& opts, int local_rank, int port, int threads);

}  // namespace lol::dist
