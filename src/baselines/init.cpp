#include "baselines/init.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <ATen/CPUGeneratorImpl.h>

namespace lol::baselines {

void init_transformer_weights(torch::nn::Module& m, int64_t layers, uint64_t seed) {
  torch::NoGradGuard ng;
  auto gen = at::detail::createCPUGenerator(seed);
  const double std = 0.02;
  const double out_std = std / std::sqrt(2.0 * std::max<double>(1.0, double(layers)));
  for (auto& p : m.named_parameters()) {
    const std::string& n = p.key();
    auto& t = p.value();
    auto ends_with = [&](const std::string& s) {
      return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    if (ends_with("norm.weight")) {
      t.fill_(1.0);
    } else if (ends_with(".bias")) {
      t.zero_();
    } else {
      const double s = (ends_with("o_proj.weight") || ends_with("down_proj.weight")) ? out_std : std;
      t.copy_(at::normal(0.0, s, t.sizes(), gen).to(t.device(), t.scalar_type()));
    }
  }
}

}  // namespace lol::baselines
