#include "distributed/grad_sync.h"

#include <torch/torch.h>

#include "util/error.h"

namespace lol::dist {

std::vector<std::vector<size_t>> make_buckets(const std::vector<at::Tensor>& params, const std::vector<bool>& present,
                                              int64_t bucket_bytes) {
  if (present.size() != params.size())
    throw std::invalid_argument("make_buckets: present has " + std::to_string(present.size()) + " flags for " +
                                std::to_string(params.size()) + " parameters");
  std::vector<std::vector<size_t>> buckets;
  int64_t bytes = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!present[i]) continue;
    const int64_t b = params[i].numel() * int64_t(params[i].element_size());
    if (buckets.empty() || params[i].scalar_type() != dtype || (bytes > 0 && bytes + b > bucket_bytes)) {
      buckets.emplace_back();
      bytes = 0;
      dtype = params[i].scalar_type();
    }
    buckets.back().push_back(i);
    bytes += b;
  }
  return buckets;
}

void all_reduce_gradients(Communicator& comm, const std::vector<at::Tensor>& params, const std::vector<bool>& present,
                          double scale, int64_t bucket_bytes) {
  torch::NoGradGuard ng;
  const auto buckets = make_buckets(params, present, bucket_bytes);
  std::vector<at::Tensor> flats;
  std::vector<PendingOp> pending;
  flats.reserve(buckets.size());
  pending.reserve(buckets.size());
  for (size_t k = 0; k < buckets.size(); ++k) {
    int64_t n = 0;
    for (size_t i : buckets[k]) n += params[i].numel();
    at::Tensor flat = torch::empty({n}, torch::TensorOptions().dtype(params[buckets[k][0]].scalar_type()).device(comm.device()));
    int64_t off = 0;
    for (size_t i : buckets[k]) {
      const int64_t m = params[i].numel();
      auto slice = flat.narrow(0, off, m);
      const at::Tensor& g = params[i].grad();
      if (g.defined()) slice.copy_(g.reshape({-1}));
      else slice.zero_();
      off += m;
    }
    if (scale != 1.0) flat.mul_(scale);
    flats.push_back(flat);
    pending.push_back(comm.all_reduce_async(flats.back(), "gradient bucket " + std::to_string(k) + " of " +
                                                              std::to_string(buckets.size())));
  }
  for (size_t k = 0; k < buckets.size(); ++k) {
    pending[k].wait();
    int64_t off = 0;
    for (size_t i : buckets[k]) {
      at::Tensor p = params[i];
      const int64_t m = p.numel();
      auto slice = flats[k].narrow(0, off, m).view(p.sizes());
      if (p.grad().defined()) p.mutable_grad().copy_(slice);
      else p.mutable_grad() = slice.to(p.device()).clone();
      off += m;
    }
  }
}

}  // namespace lol::dist
