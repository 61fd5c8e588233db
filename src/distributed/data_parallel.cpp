#include "distributed/data_parallel.h"

#include <torch/torch.h>

#include <csignal>

#include "distributed/grad_sync.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol::dist {

RankState select_rank_state(const nlohmann::json& pos, const std::string& rng_cpu, const std::string& rng_device,
                            int rank, int world_size, const std::string& where) {
  const bool multi = pos.is_object() && pos.contains("ranks");
  if (!multi) {
    if (world_size > 1)
      throw InputError(where + ": the checkpoint was written by a single-process run; resume it with 1 process "
                       "(data shards of " + std::to_string(world_size) + " processes would not continue its data order)");
    return {pos, rng_cpu, rng_device};
  }
  const auto& ranks = pos["ranks"];
  const int64_t saved = pos.value("world_size", int64_t(-1));
  if (!ranks.is_array() || saved != int64_t(ranks.size()))
    throw InputError(where + ": data_position.ranks must be an array of data_position.world_size entries");
  if (saved != world_size)
    throw InputError(where + ": the checkpoint was written by " + std::to_string(saved) +
                     " data-parallel processes; resume it with the same number (got " + std::to_string(world_size) + ")");
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& x = ranks[r];
    const std::string at = where + ": data_position.ranks[" + std::to_string(r) + "]";
    if (!x.is_object()) throw InputError(at + ": expected an object");
    for (const auto& it : x.items())
      if (it.key() != "position" && it.key() != "rng_cpu" && it.key() != "rng_device" && it.key() != "rank")
        throw InputError(at + ": unknown field '" + it.key() + "' (known fields: position, rng_cpu, rng_device, rank)");
    // Written since session 24: the rank each entry belongs to (entries out of order
    // would give a rank another's data position and random streams).
    if (x.contains("rank") && !(x["rank"].is_number_integer() && x["rank"].get<int64_t>() == int64_t(r)))
      throw InputError(at + ": field 'rank' = " + x["rank"].dump() + ": expected " + std::to_string(r));
  }
  const auto& e = ranks[size_t(rank)];
  if (!e.contains("position") || !e.value("rng_cpu", nlohmann::json()).is_string() ||
      e["rng_cpu"].get<std::string>().empty() || !e.value("rng_device", nlohmann::json()).is_string())
    throw InputError(where + ": data_position.ranks[" + std::to_string(rank) +
                     "] must be {\"position\", \"rng_cpu\", \"rng_device\"} with a non-empty rng_cpu");
  return {e["position"], e["rng_cpu"].get<std::string>(), e["rng_device"].get<std::string>()};
}

std::unique_ptr<DataParallel> DataParallel::from_environment(const c10::Device& device) {
  DistEnv env = read_dist_env();
  if (!env.distributed()) return nullptr;
  auto comm = Communicator::connect(env, rank_device(device, env));
  return std::make_unique<DataParallel>(std::move(comm), env);
}

DataParallel::DataParallel(std::unique_ptr<Communicator> comm, DistEnv env) : comm_(std::move(comm)), env_(std::move(env)) {}

c10::Device DataParallel::rank_device(const c10::Device& requested, const DistEnv& env) {
  if (requested.is_cuda() && !requested.has_index()) return c10::Device(c10::kCUDA, c10::DeviceIndex(env.local_rank));
  return requested;
}

void DataParallel::require_same_config(const nlohmann::json& run_config) {
  const auto all = comm_->all_gather_strings(run_config.dump(), "run configuration");
  std::string differ, first;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) {
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
      if (first.empty())  // the fields that differ, as JSON pointers: "/model/vocab_size = 31 on rank 0, 40 on rank 1"
        first = "; " + util::json_difference(nlohmann::json::parse(all[0]).flatten(),
                                             nlohmann::json::parse(all[r]).flatten(), "on rank 0",
                                             "on rank " + std::to_string(r));
    }
  if (!differ.empty())
    throw InputError(comm_->label() + ": rank(s) " + differ +
                     " were started with a run configuration different from rank 0's" + first +
                     "; every rank must get the same --config and --set values, dataset and environment");
}

void DataParallel::broadcast_module(torch::nn::Module& m) {
  torch::NoGradGuard ng;
  for (auto& p : m.named_parameters(true)) {
    at::Tensor t = p.value().detach();
    comm_->broadcast(t, 0, "initial parameter " + p.key());
  }
  for (auto& b : m.named_buffers(true)) {
    at::Tensor t = b.value();
    comm_->broadcast(t, 0, "initial buffer " + b.key());
  }
}

void DataParallel::seed_rank_generators(uint64_t seed, const c10::Device& device) const {
  if (rank() == 0) return;
  uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * uint64_t(rank()));
  s = (s ^ (s >> 30)) * 0xBF58476D1CE4E5B9ull;
  s = (s ^ (s >> 27)) * 0x94D049BB133111EBull;
  torch::manual_seed(s ^ (s >> 31));  // CPU and every CUDA device
  (void)device;
}

int DataParallel::synchronize_step(const std::vector<training::GroupedParam>& params, training::StepTotals& totals,
                                   int local_stop) {
  constexpr int64_t kHead = 6;
  const int64_t n = int64_t(params.size());
  at::Tensor head = torch::zeros({kHead + n}, torch::kFloat64);
  auto* h = head.data_ptr<double>();
  h[0] = totals.loss_sum;
  h[1] = double(totals.targets);
  h[2] = double(totals.tokens);
  h[3] = totals.flops;
  h[4] = local_stop == SIGINT ? 1 : 0;
  h[5] = (local_stop != 0 && local_stop != SIGINT) ? 1 : 0;
  for (int64_t i = 0; i < n; ++i) h[kHead + i] = params[size_t(i)].tensor.grad().defined() ? 1 : 0;
  comm_->all_reduce(head, ReduceOp::Sum, "step totals");
  h = head.data_ptr<double>();
  const int64_t local_targets = totals.targets;
  totals.loss_sum = h[0];
  totals.targets = int64_t(h[1]);
  totals.tokens = int64_t(h[2]);
  totals.flops = h[3];
  std::vector<at::Tensor> tensors;
  std::vector<bool> present;
  tensors.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    tensors.push_back(params[size_t(i)].tensor);
    present.push_back(h[kHead + i] > 0);
  }
  // forward_backward divided this rank's loss by its own targets; rescale so the sum
  // over ranks is the gradient of (global loss sum) / (global targets).
  const double scale = totals.targets > 0 ? double(local_targets) / double(totals.targets) : 1.0 / world_size();
  all_reduce_gradients(*comm_, tensors, present, scale);
  return h[4] > 0 ? SIGINT : (h[5] > 0 ? SIGTERM : 0);
}

at::Tensor DataParallel::sum(const at::Tensor& t, const std::string& what) {
  at::Tensor c = t.detach().clone();
  comm_->all_reduce(c, ReduceOp::Sum, what);
  return c;
}

void DataParallel::sum(std::vector<double>& values, const std::string& what) {
  at::Tensor t = torch::tensor(values, torch::kFloat64);
  comm_->all_reduce(t, ReduceOp::Sum, what);
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[int64_t(i)].item<double>();
}

bool DataParallel::check_due(int64_t step, bool last, bool save) const {
  return last || save || (env_.check_every > 0 && step % env_.check_every == 0);
}

ReplicaCheck DataParallel::check_module(torch::nn::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (auto& p : m.named_parameters(true)) named.emplace_back(p.key(), p.value());
  for (auto& b : m.named_buffers(true)) named.emplace_back(b.key(), b.value());
  return check_replicas(*comm_, named);
}

nlohmann::json DataParallel::gather_rank_states(const nlohmann::json& position, const std::string& rng_cpu,
                                                const std::string& rng_device) {
  const nlohmann::json mine = {{"rank", rank()}, {"position", position}, {"rng_cpu", rng_cpu}, {"rng_device", rng_device}};
  const auto all = comm_->all_gather_strings(mine.dump(), "checkpoint: per-rank data positions");
  nlohmann::json out = position;  // rank 0's (overwritten below) keeps the plain fields readable
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& s : all) ranks.push_back(nlohmann::json::parse(s));
  out = ranks[0]["position"];
  out["world_size"] = world_size();
  out["ranks"] = ranks;
  return out;
}

}  // namespace lol::dist
