#include "distributed/communicator.h"

#include <torch/torch.h>

#include <csignal>
#include <cstdlib>
#include <sstream>

#include <torch/version.h>

// Debian's libtorch (and the official CPU/CUDA builds) compile c10d with Gloo; the
// header only declares ProcessGroupGloo under this macro. LOL_C10D_GLOO: CMake found
// Gloo's headers beside LibTorch's (CMakeLists.txt).
#ifdef LOL_C10D_GLOO
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef LOL_C10D_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "util/clock.h"
#include "util/error.h"
#include "util/leak.h"

namespace lol::dist {

namespace {

using Clock = std::chrono::steady_clock;

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max: return c10d::ReduceOp::MAX;
    case ReduceOp::Min: return c10d::ReduceOp::MIN;
    default: return c10d::ReduceOp::SUM;
  }
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

// LibTorch 2 split c10d's process group into a dispatching ProcessGroup and the
// per-device Backends (Gloo, NCCL) it holds; the collectives used here are the
// Backend's own. LibTorch 1.x's ProcessGroupGloo/NCCL are ProcessGroups.
#if TORCH_VERSION_MAJOR >= 2
using C10dGroup = c10d::Backend;
#else
using C10dGroup = c10d::ProcessGroup;
#endif

struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<C10dGroup> pg;
  bool broken = false;
};

struct PendingOp::Impl {
  Communicator* comm = nullptr;
  c10::intrusive_ptr<c10d::Work> work;
  std::string what;
  Clock::time_point start;
};

PendingOp::PendingOp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PendingOp::PendingOp(PendingOp&&) noexcept = default;
PendingOp& PendingOp::operator=(PendingOp&&) noexcept = default;
PendingOp::~PendingOp() = default;

void PendingOp::wait() {
  if (!impl_ || !impl_->work) return;
  try {
    impl_->work->wait(impl_->comm->timeout());
  } catch (const std::exception& e) {
    util::leak_on_purpose(impl_->work.release());  // the backend may still reference it; never destroy a failed op
    impl_->comm->fail(impl_->what, e, util::seconds_since(impl_->start));
  }
  impl_->work.reset();
}

std::string Communicator::label() const { return "rank " + std::to_string(rank_) + "/" + std::to_string(world_); }

void Communicator::fail(const std::string& what, const std::exception& cause, double seconds) {
  impl_->broken = true;
  std::ostringstream m;
  m.precision(3);
  m << label() << ": " << what << " failed after " << seconds << " s (" << backend_ << ", timeout "
    << double(timeout_.count()) / 1000.0 << " s, LOL_DIST_TIMEOUT): ";
  std::string c = cause.what();
  // c10 errors append a C++ backtrace after the first line; keep the message.
  if (auto nl = c.find("\nException raised from"); nl != std::string::npos) c.resize(nl);
  m << c << ". Another rank exited or stalled (see its own error above); this rank stops too.";
  throw DistributedError(m.str());
}

std::unique_ptr<Communicator> Communicator::connect(const DistEnv& env, const c10::Device& device) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->impl_ = std::make_unique<Impl>();
  c->rank_ = env.rank;
  c->world_ = env.world_size;
  c->timeout_ = env.timeout;
  c->device_ = device;
  c->backend_ = device.is_cuda() ? "nccl" : "gloo";
#ifndef LOL_C10D_NCCL
  if (device.is_cuda())
    throw InputError("distributed training on " + device.str() +
                     " needs c10d's NCCL backend, which this build does not have (configure a CUDA LibTorch with "
                     "-DLOL_CUDA=ON, docs/distributed.md); use train.device = \"cpu\" for Gloo");
#endif
#ifndef LOL_C10D_GLOO
  if (!device.is_cuda())
    throw InputError("distributed training on the CPU needs c10d's Gloo backend, whose headers this build did "
                     "not find beside LibTorch's (Debian: install libgloo-dev and reconfigure; docs/distributed.md)");
#endif
  // A peer that exits closes its sockets: writing to them must be an error (exit 4,
  // naming the peer), not SIGPIPE killing this rank (status 141).
  std::signal(SIGPIPE, SIG_IGN);
  const auto t0 = Clock::now();
  const std::string where = c->label() + ": rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port);
  try {
    c10d::TCPStoreOptions so;
    so.port = uint16_t(env.master_port);
    so.isServer = env.rank == 0;
    so.numWorkers = size_t(env.world_size);
    // Not the store's own wait for workers: on timeout it returns without an error and the
    // process group then waits the whole timeout again (rank 0 failed after 2T + 1 s).
    // Every rank instead announces itself and waits for all others within what is left of
    // LOL_DIST_TIMEOUT (below), whichever backend follows.
    so.waitWorkers = false;
    so.timeout = env.timeout;
    try {
      c->impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    } catch (const std::exception& e) {
      // Rank 0 cannot host the rendezvous: a bad flag, not a failed peer (exit 2, not 4).
      const std::string what = e.what();
      if (env.rank == 0 && (what.find("Address already in use") != std::string::npos || what.find("errno: 98") != std::string::npos))
        throw InputError(where + ": port " + std::to_string(env.master_port) +
                         " is in use (another job or program listens there); choose another --master-port (MASTER_PORT)");
      throw;
    }
    std::vector<std::string> joined;
    for (int r = 0; r < env.world_size; ++r) joined.push_back("lol/joined/" + std::to_string(r));
    c->impl_->store->set(joined[size_t(env.rank)], std::vector<uint8_t>{1});
    const auto left = env.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    c->impl_->store->wait(joined, std::max(left, std::chrono::milliseconds(1)));
    if (!device.is_cuda()) {
#ifdef LOL_C10D_GLOO
      auto opts = c10d::ProcessGroupGloo::Options::create(env.timeout);
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (is_loopback(env.master_addr))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      opts->threads = 2;
      c->impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(c->impl_->store, env.rank, env.world_size, opts);
#endif
    } else {
#ifdef LOL_C10D_NCCL
      // Without async error handling a NCCL collective with a dead peer blocks forever.
      ::setenv("NCCL_ASYNC_ERROR_HANDLING", "1", /*overwrite=*/0);
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = env.timeout;
      c->impl_->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(c->impl_->store, env.rank, env.world_size, opts);
#endif
    }
  } catch (const DistributedError&) {
    throw;
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    std::string cause = e.what();
    if (auto nl = cause.find("\nException raised from"); nl != std::string::npos) cause.resize(nl);
    c->impl_->broken = true;
    throw DistributedError(where + " failed after " + std::to_string(util::seconds_since(t0)) + " s: " + cause +
                           " (is every rank started with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE?)");
  }
  return c;
}

Communicator::~Communicator() {
  if (impl_ && impl_->broken) {
    // Tearing down a group whose peer died can block in the backend's destructor; the
    // process is about to exit with an error, so leak it instead.
    util::leak_on_purpose(impl_->pg.release());
    util::leak_on_purpose(impl_->store.release());
  }
}

void Communicator::all_reduce(at::Tensor& t, ReduceOp op, const std::string& what) {
  at::Tensor buf = (t.device() == device_ && t.is_contiguous()) ? t : t.to(device_).contiguous();
  std::vector<at::Tensor> v{buf};
  c10d::AllreduceOptions o;
  o.reduceOp = to_c10d(op);
  const auto t0 = Clock::now();
  try {
    impl_->pg->allreduce(v, o)->wait(timeout_);
  } catch (const std::exception& e) {
    fail("all-reduce (" + what + ")", e, util::seconds_since(t0));
  }
  if (!buf.is_same(t)) t.copy_(buf);
}

PendingOp Communicator::all_reduce_async(at::Tensor& t, const std::string& what) {
  if (t.device() != device_ || !t.is_contiguous())
    throw InputError(label() + ": all_reduce_async(" + what + ") needs a contiguous tensor on " + device_.str());
  auto impl = std::make_unique<PendingOp::Impl>();
  impl->comm = this;
  impl->what = "all-reduce (" + what + ")";
  impl->start = Clock::now();
  std::vector<at::Tensor> v{t};
  try {
    impl->work = impl_->pg->allreduce(v);
  } catch (const std::exception& e) {
    fail(impl->what, e, 0.0);
  }
  return PendingOp(std::move(impl));
}

void Communicator::broadcast(at::Tensor& t, int root, const std::string& what) {
  at::Tensor buf = (t.device() == device_ && t.is_contiguous()) ? t : t.to(device_).contiguous();
  std::vector<at::Tensor> v{buf};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  const auto t0 = Clock::now();
  try {
    impl_->pg->broadcast(v, o)->wait(timeout_);
  } catch (const std::exception& e) {
    fail("broadcast (" + what + ")", e, util::seconds_since(t0));
  }
  if (!buf.is_same(t)) t.copy_(buf);
}

std::vector<std::string> Communicator::all_gather_strings(const std::string& s, const std::string& what) {
  const auto opts = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  at::Tensor lengths = torch::zeros({world_}, opts);
  lengths.index_put_({rank_}, int64_t(s.size()));
  all_reduce(lengths, ReduceOp::Sum, what + ": lengths");
  const auto len_cpu = lengths.cpu();
  int64_t longest = 1;
  for (int r = 0; r < world_; ++r) longest = std::max(longest, len_cpu[r].item<int64_t>());
  // A [world, longest] byte matrix, each rank filling its own row: a Sum all-reduce
  // is an all-gather that every backend supports for every shape.
  at::Tensor mine = torch::zeros({world_, longest}, torch::kUInt8);
  std::memcpy(mine[rank_].data_ptr<uint8_t>(), s.data(), s.size());
  at::Tensor all = mine.to(device_);
  all_reduce(all, ReduceOp::Sum, what);
  const auto host = all.cpu().contiguous();
  std::vector<std::string> out(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r)
    out[size_t(r)].assign(reinterpret_cast<const char*>(host[r].data_ptr<uint8_t>()), size_t(len_cpu[r].item<int64_t>()));
  return out;
}

void Communicator::barrier(const std::string& what) {
  // A one-element all-reduce: unlike ProcessGroup::barrier it honours the timeout on
  // every backend.
  at::Tensor t = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt32).device(device_));
  all_reduce(t, ReduceOp::Sum, "barrier: " + what);
}

}  // namespace lol::dist
