// `lol launch` (issue 14, docs/distributed.md): starts N data-parallel processes on
// this node with torchrun's environment, e.g. `lol launch --nproc 2 -- lol train --config C`.
#include <memory>

#include "cli/commands.h"
#include "distributed/launcher.h"

namespace lol::cli {

void register_launch(CLI::App& app) {
  auto o = std::make_shared<dist::LaunchOptions>();
  auto* l = app.add_subcommand("launch", "Start the processes of a data-parallel job on this node (docs/distributed.md)");
  l->add_option("--nproc", o->nproc, "Processes on this node (one per GPU, or a share of the CPU cores)")
      ->required()
      ->check(CLI::Range(1, dist::kMaxLocalProcesses));
  l->add_option("--nnodes", o->nnodes, "Nodes in the job; run one `lol launch` per node")->capture_default_str();
  l->add_option("--node-rank", o->node_rank, "This node's index, 0..nnodes-1 (node 0 hosts rank 0)")->capture_default_str();
  l->add_option("--master-addr", o->master_addr, "Node 0's address, reachable from every node")->capture_default_str();
  l->add_option("--master-port", o->master_port, "Rank 0's TCPStore port (default: a free port; required with --nnodes > 1)");
  l->add_option("--timeout", o->timeout_s,
                "Seconds any collective may wait before the job fails (sets LOL_DIST_TIMEOUT; default 600)")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  l->add_option("--threads", o->threads, "Threads per process (LOL_NUM_THREADS; default cores / nproc)");
  l->add_option("--grace", o->grace_s, "After a rank failed, seconds before the others get SIGTERM")
      ->capture_default_str()
      ->check(CLI::Range(0, 7 * 24 * 3600));
  l->add_option("command", o->command, "The command each process runs, after `--` (\"lol\" = this program)")->required();
  l->footer("Example: lol launch --nproc 2 -- lol train --config configs/maze_demo.json\n"
            "Each process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.\n"
            "Exit status: 0 when every rank succeeded, else the first failed rank's status (2 bad input, "
            "4 a peer failed or timed out).");
  l->callback([o] {
    const int rc = dist::launch(*o);
    if (rc != 0) {
      std::fflush(nullptr);
      std::exit(rc);
    }
  });
}

}  // namespace lol::cli
