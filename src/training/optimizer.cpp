#include "training/optimizer.h"

#include <algorithm>
#include <map>

#include "core/task_parallel.h"
#include "util/error.h"

namespace lol::training {

Optimizer::Optimizer(std::vector<GroupedParam> params, const OptimConfig& cfg) : params_(std::move(params)), cfg_(cfg) {
  std::map<const void*, std::string> seen;
  for (const auto& p : params_) {
    auto [it, fresh] = seen.emplace(p.tensor.unsafeGetTensorImpl(), p.name);
    if (!fresh)
      throw InputError("optimizer: parameters '" + it->second + "' and '" + p.name +
                       "' are the same tensor (each parameter must be listed once)");
    Slot s;
    const bool muon = cfg_.type == "muon" && p.group == ParamGroup::Muon;
    if (muon && p.tensor.dim() != 2)
      throw InputError("optimizer: parameter '" + p.name + "' is in the muon group but is " +
                       std::to_string(p.tensor.dim()) + "-D (Muon needs 2-D matrices)");
    s.algo = muon ? "muon" : "adamw";
    s.weight_decay = p.group == ParamGroup::AdamWNoDecay ? 0.0 : cfg_.weight_decay;
    slots_.push_back(s);
  }
}

void Optimizer::step(double lr_scale, Grouping grouping) {
  torch::NoGradGuard ng;
  // Parameters are updated in groups by the multi-tensor updates. On a GPU a group is
  // every parameter of one device and dtype (AdamW) or of one device, dtype and shape
  // (Muon: one batched Newton-Schulz iteration per shape): a GPU step's host time is its
  // operator calls (docs/benchmarks.md "CUDA"), a few per group instead of a few per
  // parameter. On the CPU each parameter is its own group and the groups run
  // concurrently over the intra-op threads (lol::run_tasks, each with a single-threaded
  // BLAS): there the cost is the arithmetic, and LibTorch's CPU batched products loop
  // over the batch anyway (measured in docs/benchmarks.md).
  std::map<std::string, std::vector<size_t>> groups;
  bool cpu = true;
  for (const auto& gp : params_)
    if (gp.tensor.grad().defined()) cpu = cpu && gp.tensor.device().is_cpu();
  const bool batched = grouping == Grouping::Batched || (grouping == Grouping::Auto && !cpu);
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& p = params_[i].tensor;
    if (!p.grad().defined()) continue;
    Slot& s = slots_[i];
    if (s.algo == "muon" && !s.buf.defined()) s.buf = torch::zeros_like(p, torch::MemoryFormat::Contiguous);
    if (s.algo != "muon" && !s.exp_avg.defined()) {
      s.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Contiguous);
      s.exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Contiguous);
    }
    std::string key = std::to_string(i);
    if (batched) {
      key = s.algo + "|" + p.device().str() + "|" + std::string(c10::toString(p.scalar_type()));
      if (s.algo == "muon")
        for (auto d : p.sizes()) key += "|" + std::to_string(d);
    }
    s.step++;
    groups[key].push_back(i);
  }
  std::vector<const std::vector<size_t>*> list;
  std::vector<int64_t> cost;
  for (const auto& kv : groups) {
    list.push_back(&kv.second);
    int64_t c = 0;  // the balancing estimate: Newton-Schulz FLOPs, or elements for AdamW
    for (size_t i : kv.second) {
      const torch::Tensor& p = params_[i].tensor;
      if (slots_[i].algo == "muon") {
        const int64_t m = std::min(p.size(0), p.size(1)), n = std::max(p.size(0), p.size(1));
        c += cfg_.ns_steps * (4 * m * m * n + 2 * m * m * m);
      } else {
        c += 10 * p.numel();
      }
    }
    cost.push_back(std::max<int64_t>(1, c));
  }
  run_tasks(cost, cpu && !batched, [&](int64_t k) {
    const std::vector<size_t>& idx = *list[size_t(k)];
    std::vector<torch::Tensor> p, g, a, b;
    std::vector<double> wd;
    std::vector<int64_t> steps;
    for (size_t i : idx) {
      const Slot& s = slots_[i];
      p.push_back(params_[i].tensor);
      g.push_back(params_[i].tensor.grad());
      wd.push_back(s.weight_decay);
      steps.push_back(s.step);
      a.push_back(s.algo == "muon" ? s.buf : s.exp_avg);
      if (s.algo != "muon") b.push_back(s.exp_avg_sq);
    }
    if (slots_[idx[0]].algo == "muon") {
      MuonHyper h;
      h.lr = cfg_.effective_muon_lr() * lr_scale;
      h.momentum = cfg_.momentum;
      h.nesterov = cfg_.nesterov;
      h.ns_steps = cfg_.ns_steps;
      h.ns_dtype = cfg_.ns_dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
      muon_update(p, g, a, wd, h);
    } else {
      AdamWHyper h;
      h.lr = cfg_.lr * lr_scale;
      h.beta1 = cfg_.beta1;
      h.beta2 = cfg_.beta2;
      h.eps = cfg_.eps;
      adamw_update(p, g, a, b, steps, wd, h);
    }
  });
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.tensor.mutable_grad() = torch::Tensor();
}

NamedTensors Optimizer::state() const {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Slot& s = slots_[i];
    const std::string& n = params_[i].name;
    if (s.step == 0) continue;
    if (s.algo == "muon") {
      out.emplace_back(n + ".momentum_buffer", s.buf);
    } else {
      out.emplace_back(n + ".exp_avg", s.exp_avg);
      out.emplace_back(n + ".exp_avg_sq", s.exp_avg_sq);
    }
    out.emplace_back(n + ".step", torch::full({1}, s.step, torch::kInt64));
  }
  return out;
}

void Optimizer::load_state(const NamedTensors& state, const std::string& where) {
  std::map<std::string, torch::Tensor> by;
  for (const auto& [n, t] : state) by[n] = t;
  size_t used = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    Slot& s = slots_[i];
    const std::string& n = params_[i].name;
    const torch::Tensor& p = params_[i].tensor;
    auto it = by.find(n + ".step");
    s = Slot{s.algo, s.weight_decay, {}, {}, {}, 0};
    if (it == by.end()) continue;
    if (it->second.numel() != 1 || it->second.scalar_type() != torch::kInt64)
      throw InputError(where + ": tensor '" + n + ".step' must be one int64");
    s.step = it->second.item<int64_t>();
    if (s.step < 0)
      throw InputError(where + ": tensor '" + n + ".step' = " + std::to_string(s.step) + ": expected >= 0");
    ++used;
    auto take = [&](const std::string& suffix) {
      auto jt = by.find(n + suffix);
      if (jt == by.end())
        throw InputError(where + ": missing tensor '" + n + suffix + "' (the parameter is updated by " + s.algo + ")");
      if (jt->second.sizes() != p.sizes())
        throw InputError(where + ": tensor '" + n + suffix + "' has the wrong shape for parameter '" + n + "'");
      ++used;
      auto t = jt->second.to(p.device(), p.scalar_type()).contiguous().clone();
      if (!torch::isfinite(t).all().item<bool>())
        throw InputError(where + ": tensor '" + n + suffix + "' contains NaN or Inf values");
      if (suffix == ".exp_avg_sq" && (t < 0).any().item<bool>())
        throw InputError(where + ": tensor '" + n + suffix + "' has negative values (a second moment is >= 0)");
      return t;
    };
    if (s.algo == "muon") {
      s.buf = take(".momentum_buffer");
    } else {
      s.exp_avg = take(".exp_avg");
      s.exp_avg_sq = take(".exp_avg_sq");
    }
  }
  if (used != by.size()) {
    for (const auto& [n, t] : by) {
      bool known = false;
      for (size_t i = 0; i < params_.size() && !known; ++i) {
        const std::string& pn = params_[i].name;
        if (n.compare(0, pn.size(), pn) == 0) {
          const std::string suffix = n.substr(pn.size());
          known = suffix == ".step" || (slots_[i].algo == "muon" ? suffix == ".momentum_buffer"
                                                                  : suffix == ".exp_avg" || suffix == ".exp_avg_sq");
        }
      }
      if (!known) throw InputError(where + ": unexpected tensor '" + n + "' (not state of this model's optimizer)");
    }
  }
}

}  // namespace lol::training
