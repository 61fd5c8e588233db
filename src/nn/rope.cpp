#include "nn/rope.h"
#include "nn/vec_math.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

namespace lol::nn {

namespace {

/// out[n, h, :] = rotate(x[n, h, :], sign * angle(pos[n])) on contiguous CPU tensors:
/// out1 = x1 c - sign x2 s, out2 = x2 c + sign x1 s. sign = -1 is the inverse rotation
/// (the backward of a rotation is its transpose).
template <typename T>
void rotate_cpu(const torch::Tensor& x, const torch::Tensor& pos, const torch::Tensor& cos_t,
                const torch::Tensor& sin_t, double sign, torch::Tensor& out) {
  const int64_t N = x.size(0), H = x.size(1), hd = x.size(2), half = hd / 2;
  const T* xp = x.data_ptr<T>();
  const int64_t* pp = pos.data_ptr<int64_t>();
  const T* cp = cos_t.data_ptr<T>();
  const T* sp = sin_t.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const T sg = T(sign);
  at::parallel_for(0, N, rows_per_task(H * hd), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      const T* c = cp + pp[n] * half;
      const T* s = sp + pp[n] * half;
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
      }
    }
  });
}

bool cpu_kernel_applies(const torch::Tensor& x, const torch::Tensor& table) {
  return x.device().is_cpu() && (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kFloat64) &&
         table.scalar_type() == x.scalar_type();
}

/// Composed-operation rotation (any device and dtype): the reference formula.
torch::Tensor rotate_ops(const torch::Tensor& x, const torch::Tensor& pos, const torch::Tensor& cos_t,
                         const torch::Tensor& sin_t, double sign) {
  auto c = cos_t.index_select(0, pos).unsqueeze(1);  // [N, 1, hd/2]
  auto s = sin_t.index_select(0, pos).unsqueeze(1) * sign;
  auto halves = x.chunk(2, -1);
  const auto& x1 = halves[0];
  const auto& x2 = halves[1];
  return torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& pos, const torch::Tensor& cos_t,
                     const torch::Tensor& sin_t, double sign) {
  if (!cpu_kernel_applies(x, cos_t)) return rotate_ops(x, pos, cos_t, sin_t, sign);
  auto xc = x.contiguous();
  auto pc = pos.contiguous();
  auto out = torch::empty_like(xc);
  if (x.scalar_type() == torch::kFloat32)
    rotate_cpu<float>(xc, pc, cos_t, sin_t, sign, out);
  else
    rotate_cpu<double>(xc, pc, cos_t, sin_t, sign, out);
  return out;
}

/// One autograd node per rotation (instead of ~10 for the composed formula); the
/// gradient is the inverse rotation of the incoming gradient. Tables and positions
/// receive no gradient.
struct RotaryFunction : public torch::autograd::Function<RotaryFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& pos,
                               const torch::Tensor& cos_t, const torch::Tensor& sin_t) {
    RECORD_FUNCTION("lol::rotary", std::vector<c10::IValue>());
    ctx->save_for_backward({pos, cos_t, sin_t});
    return rotate(x, pos, cos_t, sin_t, 1.0);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::rotary_backward", std::vector<c10::IValue>());
    auto saved = ctx->get_saved_variables();
    return {rotate(grads[0], saved[0], saved[1], saved[2], -1.0), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

RoPE::RoPE(int64_t head_dim, double theta) : head_dim_(head_dim), theta_(theta) {}

void RoPE::ensure(int64_t max_pos, const torch::Device& dev, torch::ScalarType dtype) {
  if (cos_.defined() && cos_.size(0) >= max_pos && cos_.device() == dev && cos_.scalar_type() == dtype) return;
  int64_t n = 256;
  while (n < max_pos) n *= 2;
  auto idx = torch::arange(0, head_dim_, 2, torch::kInt64).to(torch::kFloat32) / double(head_dim_);
  auto inv_freq = 1.0 / torch::pow(torch::tensor(theta_, torch::kFloat32), idx);
  auto p = torch::arange(n, torch::kInt64).to(torch::kFloat32);
  auto freqs = torch::outer(p, inv_freq);  // [n, hd/2]
  cos_ = freqs.cos().to(dev, dtype).contiguous();
  sin_ = freqs.sin().to(dev, dtype).contiguous();
}

torch::Tensor RoPE::apply(const torch::Tensor& x, const torch::Tensor& pos) {
  if (x.size(0) == 0) return x;
  int64_t max_pos = pos.max().item<int64_t>() + 1;
  ensure(max_pos, x.device(), x.scalar_type());
  return RotaryFunction::apply(x, pos, cos_, sin_);
}

}  // namespace lol::nn
