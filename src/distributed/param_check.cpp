#include "distributed/param_check.h"

#include <torch/torch.h>

#include <cstring>

namespace lol::dist {

namespace {
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}
}  // namespace

uint64_t tensor_hash(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(torch::kCPU).contiguous();
  uint64_t h = mix(0x243F6A8885A308D3ull, uint64_t(c.scalar_type()));
  for (int64_t s : c.sizes()) h = mix(h, uint64_t(s));
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  const size_t n = size_t(c.numel()) * c.element_size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h, w);
  }
  uint64_t tail = 0;
  if (i < n) std::memcpy(&tail, p + i, n - i);
  return mix(h, tail ^ (uint64_t(n) << 3));
}

nlohmann::json ReplicaCheck::to_json() const {
  return {{"tensors", tensors}, {"mismatched", mismatched}, {"max_rel_diff", max_rel_diff}, {"names", names}};
}

ReplicaCheck check_replicas(Communicator& comm, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                            double tolerance) {
  torch::NoGradGuard ng;
  const int64_t n = int64_t(tensors.size());
  const int world = comm.world_size();
  ReplicaCheck r;
  r.tensors = n;
  // [world, n] hashes, each rank filling its row: a Sum all-reduce gathers them exactly.
  at::Tensor hashes = torch::zeros({world, std::max<int64_t>(n, 1)}, torch::kInt64);
  auto* hp = hashes.data_ptr<int64_t>() + int64_t(comm.rank()) * hashes.size(1);
  for (int64_t i = 0; i < n; ++i) hp[i] = int64_t(tensor_hash(tensors[size_t(i)].second));
  comm.all_reduce(hashes, ReduceOp::Sum, "parameter check: hashes");
  const auto* all = hashes.data_ptr<int64_t>();
  std::vector<int64_t> bad;
  for (int64_t i = 0; i < n; ++i)
    for (int w = 1; w < world; ++w)
      if (all[int64_t(w) * hashes.size(1) + i] != all[i]) {
        bad.push_back(i);
        break;
      }
  if (bad.empty()) return r;
  // Same list on every rank (every rank saw every hash): measure, then resync or fail.
  std::vector<at::Tensor> root_copies;
  at::Tensor diffs = torch::zeros({int64_t(bad.size())}, torch::kFloat64);
  for (size_t k = 0; k < bad.size(); ++k) {
    const at::Tensor& t = tensors[size_t(bad[k])].second;
    at::Tensor root = t.detach().clone();
    comm.broadcast(root, 0, "parameter check: " + tensors[size_t(bad[k])].first);
    const double scale = std::max(1.0, root.abs().max().item<double>());
    diffs[int64_t(k)] = (t.detach().to(torch::kFloat64) - root.to(torch::kFloat64)).abs().max().item<double>() / scale;
    root_copies.push_back(root);
  }
  comm.all_reduce(diffs, ReduceOp::Max, "parameter check: differences");
  r.mismatched = int64_t(bad.size());
  for (size_t k = 0; k < bad.size(); ++k) {
    r.names.push_back(tensors[size_t(bad[k])].first);
    r.max_rel_diff = std::max(r.max_rel_diff, diffs[int64_t(k)].item<double>());
  }
  if (r.max_rel_diff > tolerance) {
    std::string list;
    for (size_t k = 0; k < r.names.size() && k < 5; ++k) list += (k ? ", " : "") + r.names[k];
    if (r.names.size() > 5) list += ", ... (" + std::to_string(r.names.size()) + " in all)";
    throw DistributedError(comm.label() + ": parameter check: the replicas differ from rank 0's beyond tolerance " +
                           std::to_string(tolerance) + " (max relative difference " + std::to_string(r.max_rel_diff) +
                           ") in " + list + ". The ranks no longer train the same model; stopping.");
  }
  for (size_t k = 0; k < bad.size(); ++k) {
    at::Tensor t = tensors[size_t(bad[k])].second;
    t.detach().copy_(root_copies[k]);
  }
  return r;
}

}  // namespace lol::dist
