// Communicator, bucketed gradient all-reduce and replica check on 2 ranks in one
// process (one thread per rank, loopback TCPStore + Gloo), plus the pure helpers.
#include <gtest/gtest.h>

#include "gloo_required.h"

#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <thread>

#include "distributed/communicator.h"
#include "distributed/data_parallel.h"
#include "distributed/env.h"
#include "distributed/grad_sync.h"
#include "distributed/launcher.h"
#include "distributed/param_check.h"
#include "training/batcher.h"
#include "util/error.h"
#include "../common/test_files.h"

using namespace lol::dist;
using Clock = std::chrono::steady_clock;

namespace {

DistEnv env_for(int rank, int port, int timeout_s = 20) {
  DistEnv e;
  e.rank = rank;
  e.local_rank = rank;
  e.world_size = 2;
  e.local_world_size = 2;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  e.timeout = std::chrono::seconds(timeout_s);
  return e;
}

/// Runs body(rank, comm) on two threads that form one 2-rank group; rethrows the
/// first failure (as a gtest failure) after both finished.
void two_ranks(const std::function<void(int, Communicator&)>& body, int timeout_s = 20) {
  const int port = free_tcp_port();
  std::string errors[2];
  auto run = [&](int r) {
    try {
      auto c = Communicator::connect(env_for(r, port, timeout_s), c10::kCPU);
      body(r, *c);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  };
  std::thread t0(run, 0), t1(run, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

}  // namespace

TEST(Communicator, AllReduceBroadcastAndGatherOnTwoRanks) {
  LOL_REQUIRE_GLOO();
  two_ranks([](int r, Communicator& c) {
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.world_size(), 2);
    EXPECT_EQ(c.backend(), "gloo");
    auto t = torch::tensor({1.0f + r, 10.0f * (r + 1)});
    c.all_reduce(t, ReduceOp::Sum, "sum");
    EXPECT_TRUE(torch::equal(t, torch::tensor({3.0f, 30.0f})));
    auto m = torch::tensor({int64_t(r), int64_t(5 - r)});
    c.all_reduce(m, ReduceOp::Max, "max");
    EXPECT_TRUE(torch::equal(m, torch::tensor({int64_t(1), int64_t(5)})));
    // Non-contiguous input is reduced through a copy and written back.
    auto nc = torch::arange(6, torch::kFloat32).view({2, 3}).t();
    c.all_reduce(nc, ReduceOp::Sum, "non-contiguous");
    EXPECT_TRUE(torch::equal(nc, 2 * torch::arange(6, torch::kFloat32).view({2, 3}).t()));
    auto b = torch::full({3}, float(r + 7));
    c.broadcast(b, 1, "broadcast");
    EXPECT_TRUE(torch::equal(b, torch::full({3}, 8.0f)));
    const auto all = c.all_gather_strings(r == 0 ? "" : std::string("rank one \0 bytes", 16), "strings");
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0], "");
    EXPECT_EQ(all[1], std::string("rank one \0 bytes", 16));
    c.barrier("end");
  });
}

TEST(GradSync, BucketsSplitByDtypeAndSize) {
  std::vector<at::Tensor> p = {torch::zeros({10}), torch::zeros({10}), torch::zeros({10}, torch::kFloat64),
                               torch::zeros({100}), torch::zeros({5})};
  // 40-byte float tensors, 80-byte double, 400-byte float, 20-byte float; cap 100 bytes.
  auto b = make_buckets(p, {true, true, true, true, true}, 100);
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(b[1], (std::vector<size_t>{2}));
  EXPECT_EQ(b[2], (std::vector<size_t>{3}));  // larger than the cap: alone
  EXPECT_EQ(b[3], (std::vector<size_t>{4}));
  b = make_buckets(p, {false, true, false, false, true}, 100);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0], (std::vector<size_t>{1, 4}));
  EXPECT_THROW(make_buckets(p, {true}, 100), std::invalid_argument);
}

TEST(GradSync, ScaledSumOverRanksWithMissingGradients) {
  LOL_REQUIRE_GLOO();
  two_ranks([](int r, Communicator& c) {
    // a: gradient on both ranks; b: only on rank 1; d: on none (stays undefined).
    auto a = torch::zeros({3, 2}, torch::requires_grad());
    auto b = torch::zeros({4}, torch::requires_grad());
    auto d = torch::zeros({2}, torch::requires_grad());
    a.mutable_grad() = torch::full({3, 2}, float(r + 1));
    if (r == 1) b.mutable_grad() = torch::arange(4, torch::kFloat32);
    // Tiny buckets: every parameter in its own all-reduce, several in flight at once.
    all_reduce_gradients(c, {a, b, d}, {true, true, false}, r == 0 ? 0.25 : 0.75, /*bucket_bytes=*/8);
    EXPECT_TRUE(torch::allclose(a.grad(), torch::full({3, 2}, 0.25f * 1 + 0.75f * 2)));
    ASSERT_TRUE(b.grad().defined());
    EXPECT_TRUE(torch::allclose(b.grad(), 0.75f * torch::arange(4, torch::kFloat32)));
    EXPECT_FALSE(d.grad().defined());
  });
}

TEST(ReplicaCheck, IdenticalPassesSmallDriftIsResyncedLargeDriftFails) {
  LOL_REQUIRE_GLOO();
  two_ranks([](int r, Communicator& c) {
    auto w = torch::arange(12, torch::kFloat32).view({3, 4});
    auto bias = torch::tensor({0.5f, -0.25f, 0.0f});
    auto res = check_replicas(c, {{"w", w}, {"bias", bias}});
    EXPECT_EQ(res.tensors, 2);
    EXPECT_EQ(res.mismatched, 0);
    // Rank 1's bias drifts by 1e-6: within tolerance -> rank 0's copy everywhere.
    if (r == 1) bias[1] = bias[1].item<float>() + 1e-6f;
    res = check_replicas(c, {{"w", w}, {"bias", bias}});
    EXPECT_EQ(res.mismatched, 1);
    EXPECT_EQ(res.names, std::vector<std::string>{"bias"});
    EXPECT_GT(res.max_rel_diff, 0.0);
    EXPECT_TRUE(torch::equal(bias, torch::tensor({0.5f, -0.25f, 0.0f})));
    // A real divergence is an error on every rank, naming the tensor.
    if (r == 0) w[0][0] = 100.0f;
    try {
      check_replicas(c, {{"w", w}, {"bias", bias}});
      ADD_FAILURE() << "rank " << r << ": no error for diverged replicas";
    } catch (const DistributedError& e) {
      EXPECT_NE(std::string(e.what()).find("in w."), std::string::npos) << e.what();
    }
  });
}

TEST(Communicator, PeerThatLeavesOrStallsFailsTheOtherWithinTheTimeout) {
  LOL_REQUIRE_GLOO();
  const int port = free_tcp_port();
  std::string err0;
  double waited = 0;
  std::thread t1([&] {
    auto c = Communicator::connect(env_for(1, port, 3), c10::kCPU);
    auto t = torch::ones({4});
    c->all_reduce(t, ReduceOp::Sum, "first");
    // Stall: never join the second all-reduce, then leave after rank 0 gave up.
    std::this_thread::sleep_for(std::chrono::seconds(8));
  });
  {
    auto c = Communicator::connect(env_for(0, port, 3), c10::kCPU);
    auto t = torch::ones({4});
    c->all_reduce(t, ReduceOp::Sum, "first");
    const auto t0 = Clock::now();
    try {
      c->all_reduce(t, ReduceOp::Sum, "second");
    } catch (const DistributedError& e) {
      err0 = e.what();
    }
    waited = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  t1.join();
  EXPECT_NE(err0.find("rank 0/2: all-reduce (second) failed"), std::string::npos) << err0;
  EXPECT_GE(waited, 2.5);
  EXPECT_LT(waited, 7.0) << "the stalled peer was noticed only when it left, not at the timeout";
}

// Rank 0 without its peer gives up after LOL_DIST_TIMEOUT (here 2 s), not twice that
// (the store's own wait for workers returned silently at the timeout and the process
// group then waited a second timeout).
TEST(Communicator, RendezvousWithoutPeersTimesOut) {
  DistEnv e = env_for(0, free_tcp_port(), 2);
  const auto t0 = Clock::now();
  try {
    Communicator::connect(e, c10::kCPU);
    ADD_FAILURE() << "connected without rank 1";
  } catch (const DistributedError& err) {
    EXPECT_NE(std::string(err.what()).find("rendezvous"), std::string::npos) << err.what();
  }
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GE(waited, 1.9);
  EXPECT_LT(waited, 3.5);
}

TEST(Communicator, CpuWithoutGlooIsAnInputError) {
#ifndef LOL_C10D_GLOO
  EXPECT_THROW(Communicator::connect(env_for(0, free_tcp_port(), 1), c10::Device(c10::kCPU)), lol::InputError);
#else
  GTEST_SKIP() << "Gloo build";
#endif
}

TEST(Communicator, CudaWithoutNcclIsAnInputError) {
#ifndef LOL_C10D_NCCL
  EXPECT_THROW(Communicator::connect(env_for(0, free_tcp_port(), 1), c10::Device(c10::kCUDA, 0)), lol::InputError);
#else
  GTEST_SKIP() << "NCCL build";
#endif
}

TEST(DistEnv, ReadsTorchrunVariablesAndNamesBadOnes) {
  auto clear = [] {
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "LOL_DIST_TIMEOUT", "LOL_DIST_CHECK_EVERY"})
      ::unsetenv(v);
  };
  clear();
  EXPECT_FALSE(read_dist_env().distributed());
  ::setenv("WORLD_SIZE", "4", 1);
  try {
    read_dist_env();
    ADD_FAILURE();
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK is not set"), std::string::npos);
  }
  ::setenv("RANK", "3", 1);
  ::setenv("MASTER_ADDR", "10.0.0.1", 1);
  ::setenv("MASTER_PORT", "29400", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("LOL_DIST_TIMEOUT", "7", 1);
  DistEnv e = read_dist_env();
  EXPECT_TRUE(e.distributed());
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 29400);
  EXPECT_EQ(e.timeout, std::chrono::seconds(7));
  EXPECT_EQ(DataParallel::rank_device(c10::Device("cuda"), e), c10::Device("cuda:1"));
  EXPECT_EQ(DataParallel::rank_device(c10::Device("cuda:0"), e), c10::Device("cuda:0"));
  ::setenv("RANK", "4", 1);
  try {
    read_dist_env();
    ADD_FAILURE();
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK = '4'"), std::string::npos) << e.what();
  }
  clear();
}

TEST(Launcher, RankEnvironmentFollowsTorchrun) {
  LaunchOptions o;
  o.nproc = 2;
  o.nnodes = 3;
  o.node_rank = 2;
  o.master_addr = "node0";
  o.timeout_s = 9;
  const auto env = rank_environment(o, 1, 1234, 4);
  auto has = [&](const std::string& kv) { return std::find(env.begin(), env.end(), kv) != env.end(); };
  EXPECT_TRUE(has("RANK=5"));
  EXPECT_TRUE(has("WORLD_SIZE=6"));
  EXPECT_TRUE(has("LOCAL_RANK=1"));
  EXPECT_TRUE(has("LOCAL_WORLD_SIZE=2"));
  EXPECT_TRUE(has("MASTER_ADDR=node0"));
  EXPECT_TRUE(has("MASTER_PORT=1234"));
  EXPECT_TRUE(has("LOL_DIST_TIMEOUT=9"));
  EXPECT_TRUE(has("LOL_NUM_THREADS=4"));
  o.command = {"true"};
  o.master_port = 0;  // several nodes need an agreed port
  try {
    launch(o);
    ADD_FAILURE() << "no error without --master-port";
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--master-port is required"), std::string::npos) << e.what();
  }
}

TEST(Shard, InterleavedDisjointAndEqualLength) {
  const std::vector<int64_t> order = {9, 3, 7, 1, 5, 0, 2};
  using lol::training::Shard;
  using lol::training::shard_order;
  EXPECT_EQ(shard_order(order, Shard{0, 2}, true), (std::vector<int64_t>{9, 7, 5}));
  EXPECT_EQ(shard_order(order, Shard{1, 2}, true), (std::vector<int64_t>{3, 1, 0}));
  EXPECT_EQ(shard_order(order, Shard{0, 2}, false), (std::vector<int64_t>{9, 7, 5, 2}));
  EXPECT_EQ(shard_order(order, Shard{0, 1}, true), order);
}

TEST(RankState, SelectsTheRankAndRefusesAnotherWorldSize) {
  const nlohmann::json single = {{"epoch", 1}, {"index", 2}, {"offset", 0}};
  auto s = select_rank_state(single, "aa", "", 0, 1, "ck");
  EXPECT_EQ(s.position, single);
  EXPECT_EQ(s.rng_cpu, "aa");
  EXPECT_THROW(select_rank_state(single, "aa", "", 0, 2, "ck"), lol::InputError);
  nlohmann::json multi = single;
  multi["world_size"] = 2;
  multi["ranks"] = {{{"position", single}, {"rng_cpu", "r0"}, {"rng_device", ""}},
                    {{"position", {{"epoch", 1}, {"index", 3}, {"offset", 0}}}, {"rng_cpu", "r1"}, {"rng_device", ""}}};
  s = select_rank_state(multi, "ignored", "", 1, 2, "ck");
  EXPECT_EQ(s.position["index"], 3);
  EXPECT_EQ(s.rng_cpu, "r1");
  try {
    select_rank_state(multi, "", "", 0, 3, "ck/trainer_state.json");
    ADD_FAILURE();
  } catch (const lol::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("written by 2 data-parallel processes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(select_rank_state(multi, "", "", 0, 1, "ck"), lol::InputError);
  multi["ranks"][1]["rng_cpu"] = "";  // an emptied generator state would resume silently not bit-exact
  EXPECT_THROW(select_rank_state(multi, "ignored", "", 1, 2, "ck"), lol::InputError);
  multi["ranks"][1]["rng_cpu"] = "r1";
  // Entries carry their rank (entries swapped by hand are refused); unknown keys are refused.
  multi["ranks"][0]["rank"] = 0;
  multi["ranks"][1]["rank"] = 1;
  EXPECT_EQ(select_rank_state(multi, "", "", 1, 2, "ck").rng_cpu, "r1");
  std::swap(multi["ranks"][0], multi["ranks"][1]);
  lol_test::expect_input_error([&] { select_rank_state(multi, "", "", 0, 2, "ck"); },
                               {"ck: data_position.ranks[0]: field 'rank' = 1: expected 0"});
  std::swap(multi["ranks"][0], multi["ranks"][1]);
  multi["ranks"][1]["epoch"] = 99;
  lol_test::expect_input_error([&] { select_rank_state(multi, "", "", 0, 2, "ck"); },
                               {"data_position.ranks[1]: unknown field 'epoch'"});
}
