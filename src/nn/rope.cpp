#include "nn/rope.h"
#include "nn/vec_math.h"
#include "core/runtime.h"

#include <algorithm>
#include <cmath>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "util/error.h"

namespace lol::nn {

namespace {

/// out[n, h, :] = rotate(x[n, h, :], sign * angle(pos[n])) on contiguous CPU tensors:
/// out1 = x1 c - sign x2 s, out2 = x2 c + sign x1 s, with c and s read from the halves of
/// the rotation table's row (rope_rotation_table), over the table's rotary dimension r;
/// dimensions r.. of a head are copied. sign = -1 is the inverse rotation (the backward
/// of a rotation is its transpose).
template <typename T>
void rotate_cpu(const torch::Tensor& x, const torch::Tensor& pos, const torch::Tensor& table, double sign,
                torch::Tensor& out) {
  const int64_t N = x.size(0), H = x.size(1), hd = x.size(2), r = table.size(2), half = r / 2;
  const T* xp = x.data_ptr<T>();
  const int64_t* pp = pos.data_ptr<int64_t>();
  const T* tp = table.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const T sg = T(sign);
  at::parallel_for(0, N, rows_per_task(H * hd), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* c = tp + pp[n] * 2 * r;    // C's first half: cos
      const T* s = c + r + half;          // S's second half: +sin
      for (int64_t h = 0; h < H; ++h) {
        const T* x1 = xp + (n * H + h) * hd;
        const T* x2 = x1 + half;
        T* o1 = op + (n * H + h) * hd;
        T* o2 = o1 + half;
        for (int64_t i = 0; i < half; ++i) {
          const T a = x1[i], bb = x2[i], ss = sg * s[i];
          o1[i] = a * c[i] - bb * ss;
          o2[i] = bb * c[i] + a * ss;
        }
        std::copy(x1 + r, x1 + hd, o1 + r);
      }
    }
  });
}

bool cpu_kernel_applies(const torch::Tensor& x, const torch::Tensor& table) {
  return cpu_kernel_device(x) && (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64) &&
         table.scalar_type() == x.scalar_type();
}

torch::Tensor rotate_cpu_kernel(const torch::Tensor& x, const torch::Tensor& pos, const torch::Tensor& table,
                                double sign) {
  auto xc = x.contiguous();
  auto pc = pos.contiguous();
  auto out = torch::empty_like(xc);
  if (x.scalar_type() == torch::kFloat32)
    rotate_cpu<float>(xc, pc, table, sign, out);
  else
    rotate_cpu<double>(xc, pc, table, sign, out);
  return out;
}

/// One autograd node per rotation (instead of ~10 for the composed formula); the
/// gradient is the inverse rotation of the incoming gradient. The table and positions
/// receive no gradient. Off the CPU kernels the gathered factors (views of the table's
/// rows [N, 2, hd]) are saved for the backward, so that it gathers nothing.
struct RotaryFunction : public torch::autograd::Function<RotaryFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& pos,
                               const torch::Tensor& table) {
    RECORD_FUNCTION("lol::rotary", std::vector<c10::IValue>());
    if (cpu_kernel_applies(x, table)) {
      ctx->save_for_backward({pos, table});
      return rotate_cpu_kernel(x, pos, table, 1.0);
    }
    auto [c, s] = rotation_factors(table.index_select(0, pos));
    ctx->save_for_backward({c, s});
    return rotate_with_factors(x, c, s);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::rotary_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    auto g = saved[0].dim() == 1 ? rotate_cpu_kernel(grads[0], saved[0], saved[1], -1.0)
                                 : rotate_with_factors(grads[0], saved[0], saved[1], /*inverse=*/true);
    return {g, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

RopeFrequencies rope_frequencies(int64_t head_dim, double theta, const RopeScaling& s, int64_t seq_len) {
  // transformers computes these in float32 tensors with Python scalars; the same
  // operations in the same order here (a Python `scalar / tensor` is reciprocal * scalar).
  // head_dim here is the rotary dimension (transformers' dim = head_dim * partial factor).
  const double hd = double(head_dim);
  auto pos_freqs = torch::pow(torch::tensor(theta, torch::kFloat32),
                              torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / hd);
  auto inv = pos_freqs.reciprocal();
  RopeFrequencies out;
  if (s.type == "linear") {
    inv = inv / s.factor;
  } else if (s.type == "llama3") {
    const double old_len = double(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
    auto wavelen = inv.reciprocal() * (2 * M_PI);
    auto scaled = torch::where(wavelen > low_wavelen, inv / s.factor, inv);
    auto smooth = (wavelen.reciprocal() * old_len - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    auto medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
    inv = torch::where(medium, smoothed, scaled);
  } else if (s.type == "yarn") {
    auto correction_dim = [&](double rotations) {
      return (hd * std::log(double(s.original_max_position_embeddings) / (rotations * 2 * M_PI))) / (2 * std::log(theta));
    };
    double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, hd - 1);
    if (low == high) high += 0.001;  // transformers: no division by zero
    auto ramp = ((torch::arange(head_dim / 2, torch::kFloat32) - low) / (high - low)).clamp(0, 1);
    auto extrapolation = 1 - ramp;  // share of the original frequency per dimension
    auto interpolated = (pos_freqs * s.factor).reciprocal();
    inv = interpolated * (1 - extrapolation) + inv * extrapolation;
  } else if (s.type == "longrope") {
    s.check_rotary_dim(head_dim, "RoPE", "rope_scaling");
    const auto& ext = s.uses_long_factors(seq_len) ? s.long_factor : s.short_factor;
    auto e = torch::tensor(std::vector<float>(ext.begin(), ext.end()), torch::kFloat32);
    inv = (e * pos_freqs).reciprocal();  // 1.0 / (ext_factors * base ** (arange(0, dim, 2) / dim))
  }
  out.inv_freq = inv;
  out.attention_factor = s.cos_sin_factor();
  return out;
}

std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t head_dim, double theta, const RopeScaling& scaling,
                                                    int64_t positions, int64_t seq_len) {
  auto f = rope_frequencies(head_dim, theta, scaling, seq_len);
  auto p = torch::arange(positions, torch::kInt64).to(torch::kFloat32);
  auto freqs = torch::outer(p, f.inv_freq);  // [positions, hd/2]
  auto c = freqs.cos(), s = freqs.sin();
  if (f.attention_factor != 1.0) {
    c = c * f.attention_factor;
    s = s * f.attention_factor;
  }
  return {c, s};
}

torch::Tensor rope_rotation_table(int64_t head_dim, double theta, const RopeScaling& scaling, int64_t positions,
                                  torch::ScalarType dtype, const torch::Device& device, int64_t seq_len) {
  auto [c, s] = rope_tables(head_dim, theta, scaling, positions, seq_len);
  auto table = torch::stack({torch::cat({c, c}, -1), torch::cat({-s, s}, -1)}, 1);  // [positions, 2, hd]
  return table.to(device, dtype).contiguous();
}

std::pair<torch::Tensor, torch::Tensor> rotation_factors(const torch::Tensor& rows) {
  const int64_t n = rows.size(0), half = rows.size(2) / 2;
  auto f = rows.view({n, 2, 2, half});
  return {f.select(1, 0).unsqueeze(1), f.select(1, 1).unsqueeze(1)};  // [N, 1, 2, half]
}

torch::Tensor rotate_with_factors(const torch::Tensor& x, const torch::Tensor& c, const torch::Tensor& s,
                                  bool inverse) {
  const int64_t hd = x.size(-1), r = 2 * c.size(-1);
  if (r < hd)  // partial rotary: the leading r dimensions rotate, the rest pass
    return torch::cat({rotate_with_factors(x.narrow(-1, 0, r), c, s, inverse), x.narrow(-1, r, hd - r)}, -1);
  auto x4 = x.view({x.size(0), x.size(1), 2, hd / 2});  // [N, heads, 2 halves, half]
  // Forward: [x1 c + x2 (-s), x2 c + x1 s]. Inverse (the transpose):
  // [x1 c + x2 s, x2 c + x1 (-s)] = x C + swap_halves(x S).
  auto y = inverse ? x4 * c + (x4 * s).flip(2) : x4 * c + x4.flip(2) * s;
  return y.reshape(x.sizes());  // a view unless an incoming gradient had an odd layout
}

void check_rope_positions(const RopeScaling& scaling, int64_t positions) {
  const int64_t limit = scaling.position_limit();
  if (limit > 0 && positions > limit)
    throw InputError("RoPE scaling \"" + scaling.type + "\": " + std::to_string(positions) +
                     " positions, more than max_position_embeddings = " + std::to_string(limit) +
                     " (beyond it transformers recomputes the frequencies from the sequence length; not implemented)");
}

RoPE::RoPE(int64_t head_dim, double theta, RopeScaling scaling, int64_t rotary_dim)
    : head_dim_(head_dim), rotary_dim_(rotary_dim > 0 ? rotary_dim : head_dim), theta_(theta),
      scaling_(std::move(scaling)) {
  if (rotary_dim_ % 2 != 0 || rotary_dim_ > head_dim_)
    throw InputError("RoPE: rotary dimension " + std::to_string(rotary_dim_) + ": expected an even number <= head_dim " +
                     std::to_string(head_dim_));
  scaling_.check_rotary_dim(rotary_dim_, "RoPE", "rope_scaling");
}

torch::Tensor& RoPE::ensure(int64_t max_pos, const torch::Device& dev, torch::ScalarType dtype) {
  // transformers' longrope_frequency_update: the call's sequence length picks the factors.
  const bool long_factors = scaling_.uses_long_factors(max_pos);
  auto& table = long_factors ? table_long_ : table_;
  if (table.defined() && table.size(0) >= max_pos && table.device() == dev && table.scalar_type() == dtype) return table;
  check_rope_positions(scaling_, max_pos);
  int64_t n = 256;
  while (n < max_pos) n *= 2;
  if (scaling_.position_limit() > 0) n = std::max(max_pos, std::min(n, scaling_.position_limit()));
  table = rope_rotation_table(rotary_dim_, theta_, scaling_, n, dtype, dev, long_factors ? max_pos : 0);
  return table;
}

torch::Tensor RoPE::apply(const torch::Tensor& x, const torch::Tensor& pos, int64_t pos_bound) {
  if (x.size(0) == 0) return x;
  // The fused CPU kernel indexes the table unchecked: its positions are always read. On
  // the composed path a position beyond the table fails in index_select (c10::Error on the
  // CPU, a device-side assert on a GPU): the bound is the caller's promise. longrope's
  // factors depend on the largest position itself, so it is read there too.
  const bool kernel = cpu_kernel_device(x) && (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64);
  const bool exact = kernel || scaling_.type == "longrope";
  const int64_t max_pos = pos_bound > 0 && !exact ? pos_bound : pos.max().item<int64_t>() + 1;
  return RotaryFunction::apply(x, pos, ensure(max_pos, x.device(), x.scalar_type()));
}

}  // namespace lol::nn
