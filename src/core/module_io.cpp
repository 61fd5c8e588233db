#include "core/module_io.h"

#include <set>

#include "util/error.h"

namespace lol {

NamedTensors module_state(const torch::nn::Module& m) {
  NamedTensors out;
  for (const auto& p : m.named_parameters(true)) out.emplace_back(p.key(), p.value());
  for (const auto& b : m.named_buffers(true)) out.emplace_back(b.key(), b.value());
  return out;
}

void save_module(const torch::nn::Module& m, const std::string& path, const std::map<std::string, std::string>& metadata) {
  save_tensors(path, module_state(m), metadata);
}

static std::string shape_str(c10::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void load_module(torch::nn::Module& m, const NamedTensors& tensors, const std::string& where) {
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& [n, t] : tensors) by_name[n] = t;
  std::set<std::string> used;
  torch::NoGradGuard ng;
  auto assign = [&](const std::string& name, torch::Tensor& dst) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw InputError(where + ": missing tensor '" + name + "' (expected shape " + shape_str(dst.sizes()) + ")");
    const auto& src = it->second;
    if (src.sizes() != dst.sizes())
      throw InputError(where + ": tensor '" + name + "' has shape " + shape_str(src.sizes()) + ", expected " +
                       shape_str(dst.sizes()));
    if (dst.is_floating_point() && !src.is_floating_point())
      throw InputError(where + ": tensor '" + name + "' has integer dtype, expected a floating dtype");
    // Checked after the conversion: a finite float64 value can overflow float32.
    const auto conv = src.to(dst.scalar_type());
    if (dst.is_floating_point() && !torch::isfinite(conv).all().item<bool>())
      throw InputError(where + ": tensor '" + name + "' contains NaN or Inf values" +
                       (src.scalar_type() != dst.scalar_type() ? " (after conversion to " +
                                                                     std::string(c10::toString(dst.scalar_type())) + ")"
                                                               : std::string()));
    dst.copy_(conv);
    used.insert(name);
  };
  for (auto& p : m.named_parameters(true)) assign(p.key(), p.value());
  for (auto& b : m.named_buffers(true)) assign(b.key(), b.value());
  for (const auto& [n, t] : tensors)
    if (!used.count(n)) throw InputError(where + ": unexpected tensor '" + n + "' (not part of this model)");
}

void load_module(torch::nn::Module& m, const std::string& path) {
  // Missing or unexpected tensors are named first: a header entry removed by hand also
  // leaves data bytes that belong to no tensor, a less telling message.
  std::string layout_problem;
  load_module(m, load_tensors(path, nullptr, &layout_problem), path);
  if (!layout_problem.empty()) throw InputError(layout_problem);
}

}  // namespace lol
