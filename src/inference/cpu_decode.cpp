#include "inference/cpu_decode.h"
#include "core/runtime.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "inference/blas.h"
#include "nn/activation.h"

namespace lol::inference {

namespace {

template <typename T>
class Kernels final : public CpuDecoder {
 public:
  explicit Kernels(const PackedModel& w) : w_(w) {}

  void block(const PackedBlock& b, const PackedFiLM* film, const torch::Tensor& xt, torch::Tensor& yt,
             const DecodeToken* toks, const double* alpha, KVCache& cache) override {
    const auto& c = w_.cfg;
    const int64_t n = xt.size(0), d = c.d_model, H = c.n_heads, Hkv = c.n_kv_heads, hd = w_.head_dim();
    const int64_t G = H / Hkv, QKV = (H + 2 * Hkv) * hd, cap = cache.capacity();
    const int64_t F = b.is_moe() ? 0 : b.w_down.size(1);
    const int64_t GU = b.gated_mlp ? 2 * F : F;  // gate | up rows, or up's alone (an ungated MLP)
    const T* x = xt.data_ptr<T>();
    T* y = yt.data_ptr<T>();
    h_.resize(n * d);
    qkv_.resize(n * QKV);
    att_.resize(n * H * hd);
    a_.resize(n * d);
    gu_.resize(n * GU);
    // 1. attention input: RMSNorm (+ FiLM; none in OLMo 2's blocks) or LayerNorm, q/k/v
    if (b.ln1.defined()) {
      for (int64_t r = 0; r < n; ++r)
        norm(x + r * d, d, b.ln1.data_ptr<T>(), ptr(b.ln1_b), film ? film->attn_gamma.data_ptr<T>() : nullptr,
             film ? film->attn_beta.data_ptr<T>() : nullptr, h_.data() + r * d);
    }
    blas::rows_times_wt(b.ln1.defined() ? h_.data() : x, n, d, b.w_qkv.data_ptr<T>(), QKV, qkv_.data(),
                        b.b_qkv.defined() ? b.b_qkv.data_ptr<T>() : nullptr);
    // 2. RoPE, cache write, attention over the segment's cached keys
    T* K = cache.k.data_ptr<T>();
    T* V = cache.v.data_ptr<T>();
    const int64_t rd = w_.rotary_dim();
    const T scale = T(1.0 / std::sqrt(double(hd)));
    for (int64_t r = 0; r < n; ++r) {
      const DecodeToken& tk = toks[r];
      T* q = qkv_.data() + r * QKV;
      T* k = q + H * hd;
      const T* v = k + Hkv * hd;
      if (b.q_norm.defined()) {  // before RoPE: each head's RMSNorm (Qwen3), or one over all heads (OLMo 2)
        const int64_t qw = b.q_norm.size(0), kw = b.k_norm.size(0);
        for (int64_t i = 0; i < H * hd; i += qw) norm(q + i, qw, b.q_norm.data_ptr<T>(), nullptr, nullptr, nullptr, q + i);
        for (int64_t i = 0; i < Hkv * hd; i += kw) norm(k + i, kw, b.k_norm.data_ptr<T>(), nullptr, nullptr, nullptr, k + i);
      }
      if (b.rope) {  // (GPT-2: positions were added to the embeddings)
        // Each row's sequence length (its position + 1) picks longrope's factors; table
        // row p: [cos, cos, -sin, sin] over the rotary dimensions.
        const T* cos = w_.rope_table_for(b.local_rope, tk.pos + 1).template data_ptr<T>() + tk.pos * 2 * rd;
        const T* sin = cos + rd + rd / 2;
        rope(q, H, cos, sin);
        rope(k, Hkv, cos, sin);
      }
      const int64_t first = std::min(tk.first, tk.base), nk = tk.base + (tk.visible ? 1 : 0) - first;
      T* out = att_.data() + r * H * hd;
      if (nk == 0) {
        std::fill(out, out + H * hd, T(0));
        continue;
      }
      scores_.resize(G * nk);
      for (int64_t j = 0; j < Hkv; ++j) {
        T* Kj = K + ((tk.row * Hkv + j) * cap) * hd;
        T* Vj = V + ((tk.row * Hkv + j) * cap) * hd;
        if (tk.visible) {
          std::copy(k + j * hd, k + (j + 1) * hd, Kj + tk.base * hd);
          std::copy(v + j * hd, v + (j + 1) * hd, Vj + tk.base * hd);
        }
        // scores [G, nk] (row-major) = q_g . K_i * scale: column-major [nk, G] = K^T' q
        blas::gemm(true, false, nk, G, hd, scale, Kj + first * hd, hd, q + j * G * hd, hd, T(0), scores_.data(), nk);
        if (b.attn_softcap > 0) {  // Gemma 2's soft-capping of the scaled scores
          const T cap = T(b.attn_softcap);
          for (int64_t i = 0; i < G * nk; ++i) scores_[size_t(i)] = cap * std::tanh(scores_[size_t(i)] / cap);
        }
        for (int64_t g = 0; g < G; ++g) softmax(scores_.data() + g * nk, nk);
        // out [G, hd] (row-major) = P [G, nk] V [nk, hd]: column-major [hd, G] = V' P'
        blas::gemm(false, false, hd, G, nk, T(1), Vj + first * hd, hd, scores_.data(), nk, T(0), out + j * G * hd, hd);
      }
    }
    // 3. o_proj (+ bias; and its sandwich norm), the FFN's input norm (+ FiLM), FFN, residual
    blas::rows_times_wt(att_.data(), n, H * hd, b.w_o.data_ptr<T>(), d, a_.data(), ptr(b.b_o));
    if (b.ln_attn_out.defined())
      for (int64_t r = 0; r < n; ++r)
        norm(a_.data() + r * d, d, b.ln_attn_out.data_ptr<T>(), nullptr, nullptr, nullptr, a_.data() + r * d);
    // The FFN reads x + a, or x in a parallel block (GPT-NeoX), or ln1(x) itself, still in
    // h_, with a shared input norm (Phi, StableLM).
    if (!b.shared_input_norm) {
      for (int64_t r = 0; r < n; ++r) {
        T* hm = h_.data() + r * d;
        const T* xr = x + r * d;
        const T* ar = a_.data() + r * d;
        for (int64_t i = 0; i < d; ++i) hm[i] = b.parallel_residual ? xr[i] : xr[i] + ar[i];
        if (b.ln2.defined())
          norm(hm, d, b.ln2.data_ptr<T>(), ptr(b.ln2_b), film ? film->ffn_gamma.data_ptr<T>() : nullptr,
               film ? film->ffn_beta.data_ptr<T>() : nullptr, hm);
      }
    }
    if (b.is_moe()) {
      moe_ffn(b, n, d);  // h_ <- the experts' weighted sum
    } else {
      blas::rows_times_wt(h_.data(), n, d, b.w_gate_up.data_ptr<T>(), GU, gu_.data(), ptr(b.b_gate_up));
      act_.resize(n * F);
      for (int64_t r = 0; r < n; ++r) {
        const T* g = gu_.data() + r * GU;  // gate, then up (gated); up alone (ungated: GPT-2's c_fc)
        T* o = act_.data() + r * F;
        switch (b.act) {
          case nn::Activation::SiLU: activate(g, F, GU, o, [](T v) { return v / (T(1) + std::exp(-v)); }); break;
          case nn::Activation::GeluTanh: {  // LibTorch's gelu(approximate="tanh") formula
            const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
            activate(g, F, GU, o, [&](T v) { return T(0.5) * v * (T(1) + std::tanh(beta * (v + kappa * v * v * v))); });
            break;
          }
          case nn::Activation::Gelu:
            activate(g, F, GU, o, [](T v) { return v * T(0.5) * (T(1) + std::erf(v * T(M_SQRT1_2))); });
            break;
          case nn::Activation::ReLU: activate(g, F, GU, o, [](T v) { return v < T(0) ? T(0) : v; }); break;  // (NaN stays NaN)
        }
      }
      blas::rows_times_wt(act_.data(), n, F, b.w_down.data_ptr<T>(), d, h_.data(), ptr(b.b_down));  // h_ <- mlp
    }
    if (b.ln_ffn_out.defined())
      for (int64_t r = 0; r < n; ++r)
        norm(h_.data() + r * d, d, b.ln_ffn_out.data_ptr<T>(), nullptr, nullptr, nullptr, h_.data() + r * d);
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = x + r * d;
      const T* ar = a_.data() + r * d;
      const T* mr = h_.data() + r * d;
      T* yr = y + r * d;
      if (alpha) {
        const T al = T(alpha[r]);
        for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] + al * (ar[i] + mr[i]);
      } else {
        for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] + (ar[i] + mr[i]);
      }
    }
  }

 private:
  /// The MoE FFN (nn::SparseMoE, block_step's moe_ffn) of the n normalised rows in h_,
  /// written back into h_: per row, p = softmax(gate h) over the E experts, the top_k
  /// experts of p + b (ties: the lower index), weights p_e (renormalised with
  /// moe_normalize), sum of w_e down_e(silu(gate_e h) * up_e h); plus sigmoid(shared_gate h)
  /// times the shared expert with one (Qwen2-MoE).
  void moe_ffn(const PackedBlock& b, int64_t n, int64_t d) {
    const int64_t E = b.moe_gate.size(0), k = b.top_k;
    const T* bias = b.moe_bias.data_ptr<T>();
    moe_out_.assign(size_t(n * d), T(0));
    probs_.resize(size_t(E));
    order_.resize(size_t(E));
    part_.resize(size_t(d));
    for (int64_t r = 0; r < n; ++r) {
      const T* hr = h_.data() + r * d;
      blas::rows_times_wt(hr, 1, d, b.moe_gate.data_ptr<T>(), E, probs_.data());
      softmax(probs_.data(), E);
      for (int64_t e = 0; e < E; ++e) order_[size_t(e)] = e;
      std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), [&](int64_t a, int64_t c) {
        const T va = probs_[size_t(a)] + bias[a], vc = probs_[size_t(c)] + bias[c];
        return va > vc || (va == vc && a < c);
      });
      T sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += probs_[size_t(order_[size_t(j)])];
      T* out = moe_out_.data() + r * d;
      // out += wt * down(silu(gate h) * up h) for the expert of weights gate_up [2 Fe, d], down [d, Fe].
      const auto add_expert = [&](const torch::Tensor& gate_up, const torch::Tensor& down, T wt) {
        const int64_t Fe = down.size(1);
        gu_.resize(size_t(2 * Fe));
        act_.resize(size_t(Fe));
        blas::rows_times_wt(hr, 1, d, gate_up.data_ptr<T>(), 2 * Fe, gu_.data());
        activate(gu_.data(), Fe, 2 * Fe, act_.data(), [](T v) { return v / (T(1) + std::exp(-v)); });
        blas::rows_times_wt(act_.data(), 1, Fe, down.data_ptr<T>(), d, part_.data());
        for (int64_t i = 0; i < d; ++i) out[i] += wt * part_[size_t(i)];
      };
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = order_[size_t(j)];
        add_expert(b.expert_gate_up[size_t(e)], b.expert_down[size_t(e)],
                   b.moe_normalize ? probs_[size_t(e)] / sum : probs_[size_t(e)]);
      }
      if (b.shared_gate.defined()) {
        T g = 0;
        blas::rows_times_wt(hr, 1, d, b.shared_gate.data_ptr<T>(), 1, &g);
        add_expert(b.shared_gate_up, b.shared_down, T(1) / (T(1) + std::exp(-g)));
      }
    }
    h_.swap(moe_out_);
  }
  /// out = w * RMSNorm(x) over n values (d for the block's norms, hd for Qwen3's per-head
  /// q_norm / k_norm, H hd or Hkv hd for OLMo 2's), then gamma * . + beta; out may be x.
  /// With `bias`: the LayerNorm w * (x - mean) / sqrt(var + eps) + bias (biased variance;
  /// the LayerNorm architectures, no FiLM). The sums in double, as the forward's CPU kernel
  /// (nn/rmsnorm.cpp), so huge activations do not overflow them.
  void norm(const T* x, int64_t n, const T* w, const T* bias, const T* gamma, const T* beta, T* out) const {
    if (bias) {
      double s = 0, ss = 0;
      for (int64_t i = 0; i < n; ++i) s += double(x[i]);
      const double mean = s / double(n);
      for (int64_t i = 0; i < n; ++i) ss += (double(x[i]) - mean) * (double(x[i]) - mean);
      const T rn = T(1.0 / std::sqrt(ss / double(n) + w_.cfg.norm_eps)), mu = T(mean);
      for (int64_t i = 0; i < n; ++i) out[i] = w[i] * ((x[i] - mu) * rn) + bias[i];
      return;
    }
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
    const T rn = T(1.0 / std::sqrt(ss / double(n) + w_.cfg.norm_eps));
    for (int64_t i = 0; i < n; ++i) {
      const T v = w[i] * (x[i] * rn);
      out[i] = gamma ? gamma[i] * v + beta[i] : v;
    }
  }
  /// o[i] = act(gate[i]) * up[i] for a gated MLP (row gu = gate | up, GU = 2F), or act(up[i])
  /// for an ungated one (GU = F).
  template <typename Act>
  static void activate(const T* gu, int64_t F, int64_t GU, T* o, Act act) {
    if (GU == 2 * F) {
      for (int64_t i = 0; i < F; ++i) o[i] = act(gu[i]) * gu[F + i];
    } else {
      for (int64_t i = 0; i < F; ++i) o[i] = act(gu[i]);
    }
  }
  /// The data of an optional tensor (a bias), or nullptr.
  static const T* ptr(const torch::Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; }
  /// Rotate-half RoPE in place on the leading rotary_dim() dimensions of `heads` heads
  /// of x [heads, hd] (the others pass: partial rotary).
  void rope(T* x, int64_t heads, const T* cos, const T* sin) const {
    const int64_t hd = w_.head_dim(), half = w_.rotary_dim() / 2;
    for (int64_t h = 0; h < heads; ++h) {
      T* a = x + h * hd;
      for (int64_t i = 0; i < half; ++i) {
        const T x1 = a[i], x2 = a[i + half];
        a[i] = x1 * cos[i] - x2 * sin[i];
        a[i + half] = x2 * cos[i] + x1 * sin[i];
      }
    }
  }
  static void softmax(T* s, int64_t n) {
    T mx = s[0];
    for (int64_t i = 1; i < n; ++i) mx = std::max(mx, s[i]);
    T z = 0;
    for (int64_t i = 0; i < n; ++i) z += s[i] = std::exp(s[i] - mx);
    const T inv = T(1) / z;
    for (int64_t i = 0; i < n; ++i) s[i] *= inv;
  }

  const PackedModel& w_;
  std::vector<T> h_, qkv_, att_, a_, gu_, act_, scores_, moe_out_, probs_, part_;
  std::vector<int64_t> order_;
};

}  // namespace

std::unique_ptr<CpuDecoder> CpuDecoder::create(const PackedModel& w) {
  if (!w.embed.is_cpu() || !cpu_kernels_enabled()) return nullptr;
  if (w.embed.scalar_type() == torch::kFloat32) return std::make_unique<Kernels<float>>(w);
  if (w.embed.scalar_type() == torch::kFloat64) return std::make_unique<Kernels<double>>(w);
  return nullptr;
}

}  // namespace lol::inference
