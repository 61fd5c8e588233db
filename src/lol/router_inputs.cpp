#include "lol/router_inputs.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "core/index_tensor.h"
#include "core/runtime.h"
#include "nn/vec_math.h"
#include "util/error.h"

namespace lol {

namespace {

void check_windows(const torch::Tensor& s, const torch::Tensor& e, const RouterWindows& w) {
  const size_t G = w.start.size();
  if (w.len.size() != G || w.k.size() != G || w.doc_first_window.size() != G)
    throw InputError("router_inputs: window tables of different lengths (start " + std::to_string(G) + ", len " +
                     std::to_string(w.len.size()) + ", k " + std::to_string(w.k.size()) + ", doc_first_window " +
                     std::to_string(w.doc_first_window.size()) + ")");
  if (s.dim() != 2) throw InputError("router_inputs: states must be [rows, d_model]");
  if (e.dim() != 1 || e.size(0) != s.size(1))
    throw InputError("router_inputs: depth embedding must be [" + std::to_string(s.size(1)) + "]");
  for (size_t g = 0; g < G; ++g) {
    if (w.len[g] <= 0 || w.start[g] < 0 || w.start[g] + w.len[g] > s.size(0))
      throw InputError("router_inputs: window " + std::to_string(g) + " (rows " + std::to_string(w.start[g]) + " + " +
                       std::to_string(w.len[g]) + ") outside the " + std::to_string(s.size(0)) + " rows");
    const int64_t f = w.doc_first_window[g];
    if (f < 0 || f > int64_t(g) || w.k[size_t(f)] != 0 || w.k[g] != int64_t(g) - f)
      throw InputError("router_inputs: window " + std::to_string(g) + " has k = " + std::to_string(w.k[g]) +
                       " but its document starts at window " + std::to_string(f));
  }
}

/// mu[g] = mean of the window's rows, in double. s [rows, d].
template <typename T>
void window_means(const T* sp, int64_t d, const RouterWindows& w, std::vector<double>& mu) {
  const int64_t G = int64_t(w.start.size());
  mu.assign(size_t(G * d), 0.0);
  at::parallel_for(0, G, std::max<int64_t>(1, nn::rows_per_task(d) / 16), [&](int64_t gb, int64_t ge) {
    for (int64_t g = gb; g < ge; ++g) {
      double* m = mu.data() + g * d;
      for (int64_t t = w.start[size_t(g)]; t < w.start[size_t(g)] + w.len[size_t(g)]; ++t) {
        const T* row = sp + t * d;
        for (int64_t i = 0; i < d; ++i) m[i] += double(row[i]);
      }
      const double inv = 1.0 / double(w.len[size_t(g)]);
      for (int64_t i = 0; i < d; ++i) m[i] *= inv;
    }
  });
}

template <typename T>
void forward_cpu(const torch::Tensor& s, const torch::Tensor& e, const RouterWindows& w, torch::Tensor& r) {
  const int64_t G = int64_t(w.start.size()), d = s.size(1);
  const T* sp = s.data_ptr<T>();
  const T* ep = e.data_ptr<T>();
  T* rp = r.data_ptr<T>();
  std::vector<double> mu;
  window_means<T>(sp, d, w, mu);
  std::vector<double> run(size_t(d), 0.0);  // sum of the document's earlier window means
  for (int64_t g = 0; g < G; ++g) {
    T* out = rp + g * d;
    const int64_t k = w.k[size_t(g)];
    if (k == 0) {
      const T* first = sp + w.start[size_t(g)] * d;
      for (int64_t i = 0; i < d; ++i) {
        out[i] = T(0.5 * (double(ep[i]) + double(first[i])));
        run[size_t(i)] = 0.0;
      }
    } else {
      const double inv = 1.0 / double(k);
      for (int64_t i = 0; i < d; ++i) out[i] = T(run[size_t(i)] * inv);
    }
    const double* m = mu.data() + g * d;
    for (int64_t i = 0; i < d; ++i) run[size_t(i)] += m[i];
  }
}

/// ds [rows, d] (zero outside the windows), de [d] from dr [G, d].
template <typename T>
void backward_cpu(const torch::Tensor& dr, const RouterWindows& w, torch::Tensor& ds, torch::Tensor& de) {
  const int64_t G = int64_t(w.start.size()), d = dr.size(1);
  const T* gp = dr.data_ptr<T>();
  T* dsp = ds.data_ptr<T>();
  T* dep = de.data_ptr<T>();
  // dmu[j] = sum over the document's later windows g > j of dr[g] / k_g (a suffix sum),
  // then every row of window j gets dmu[j] / len_j; a window 0 passes half of dr to the
  // document's first row and half to e^(l).
  std::vector<double> dmu(size_t(G * d), 0.0), suffix(size_t(d), 0.0), dE(size_t(d), 0.0);
  for (int64_t g = G - 1; g >= 0; --g) {
    double* out = dmu.data() + g * d;
    for (int64_t i = 0; i < d; ++i) out[i] = suffix[size_t(i)];
    const int64_t k = w.k[size_t(g)];
    const T* dg = gp + g * d;
    if (k == 0) {
      for (int64_t i = 0; i < d; ++i) {
        suffix[size_t(i)] = 0.0;
        dE[size_t(i)] += 0.5 * double(dg[i]);
      }
    } else {
      const double inv = 1.0 / double(k);
      for (int64_t i = 0; i < d; ++i) suffix[size_t(i)] += double(dg[i]) * inv;
    }
  }
  at::parallel_for(0, G, std::max<int64_t>(1, nn::rows_per_task(d) / 16), [&](int64_t gb, int64_t ge) {
    for (int64_t g = gb; g < ge; ++g) {
      const double inv = 1.0 / double(w.len[size_t(g)]);
      const double* m = dmu.data() + g * d;
      for (int64_t t = w.start[size_t(g)]; t < w.start[size_t(g)] + w.len[size_t(g)]; ++t) {
        T* row = dsp + t * d;
        for (int64_t i = 0; i < d; ++i) row[i] = T(m[i] * inv);
      }
      if (w.k[size_t(g)] == 0) {
        T* first = dsp + w.start[size_t(g)] * d;
        const T* dg = gp + g * d;
        for (int64_t i = 0; i < d; ++i) first[i] += T(0.5 * double(dg[i]));
      }
    }
  });
  for (int64_t i = 0; i < d; ++i) dep[i] = T(dE[size_t(i)]);
}

/// The kernel writes the windows' rows of ds; when they do not cover every row (padding),
/// the rest must be zero.
void zero_uncovered(torch::Tensor& ds, const RouterWindows& w) {
  int64_t covered = 0;
  for (auto n : w.len) covered += n;
  if (covered != ds.size(0)) ds.zero_();
}

struct RouterInputsFunction : public torch::autograd::Function<RouterInputsFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& s, const torch::Tensor& e,
                               const RouterWindows* w) {
    RECORD_FUNCTION("lol::router_inputs", std::vector<c10::IValue>());
    auto sc = s.contiguous(), ec = e.contiguous();
    auto r = torch::empty({int64_t(w->start.size()), s.size(1)}, s.options());
    if (s.scalar_type() == torch::kFloat32)
      forward_cpu<float>(sc, ec, *w, r);
    else
      forward_cpu<double>(sc, ec, *w, r);
    ctx->saved_data["rows"] = s.size(0);
    ctx->saved_data["start"] = w->start;
    ctx->saved_data["len"] = w->len;
    ctx->saved_data["k"] = w->k;
    ctx->saved_data["first"] = w->doc_first_window;
    return r;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_FUNCTION("lol::router_inputs_backward", std::vector<c10::IValue>());
    RouterWindows w;
    w.start = ctx->saved_data["start"].toIntVector();
    w.len = ctx->saved_data["len"].toIntVector();
    w.k = ctx->saved_data["k"].toIntVector();
    w.doc_first_window = ctx->saved_data["first"].toIntVector();
    auto dr = grads[0].contiguous();
    auto ds = torch::empty({ctx->saved_data["rows"].toInt(), dr.size(1)}, dr.options());
    auto de = torch::empty({dr.size(1)}, dr.options());
    zero_uncovered(ds, w);
    if (dr.scalar_type() == torch::kFloat32)
      backward_cpu<float>(dr, w, ds, de);
    else
      backward_cpu<double>(dr, w, ds, de);
    return {ds, de, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor router_inputs_composed(const torch::Tensor& s, const torch::Tensor& depth_embed, const RouterWindows& w) {
  check_windows(s, depth_embed, w);
  const auto dev = s.device();
  const int64_t G = int64_t(w.start.size()), d = s.size(1);
  // Few operations (each is a kernel launch on a GPU, where this path runs): the mean of
  // every window's rows and, for each document's first window (k = 0), its first row, as
  // one segment mean over the gathered rows (segments: the G windows, then one row per
  // first window); then r_g = sum_j coef_(g,j) M_j + f_g e over a short list of (g, j)
  // pairs: the k earlier windows of the document with 1/k, or the first row with 1/2 and
  // f_g = 1/2 for the depth embedding.
  std::vector<int64_t> rows, lens(w.len), target, source;
  std::vector<double> coef;  // coef per pair, then f per window (one upload)
  for (int64_t g = 0; g < G; ++g)
    for (int64_t t = 0; t < w.len[size_t(g)]; ++t) rows.push_back(w.start[size_t(g)] + t);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t k = w.k[size_t(g)];
    if (k == 0) {
      rows.push_back(w.start[size_t(g)]);
      target.push_back(g);
      source.push_back(int64_t(lens.size()));
      lens.push_back(1);
      coef.push_back(0.5);
    }
    for (int64_t j = w.doc_first_window[size_t(g)]; j < g; ++j) {
      target.push_back(g);
      source.push_back(j);
      coef.push_back(1.0 / double(k));
    }
  }
  const int64_t P = int64_t(coef.size());
  for (int64_t g = 0; g < G; ++g) coef.push_back(w.k[size_t(g)] == 0 ? 0.5 : 0.0);
  const auto t = index_tensors({&rows, &lens, &target, &source}, dev);  // one upload on a GPU
  auto host = torch::from_blob(coef.data(), {int64_t(coef.size())}, torch::kFloat64);
  const auto c = dev.is_cpu() ? host.clone() : host.to(dev, /*non_blocking=*/true);
  auto x = s.index_select(0, t[0]).to(torch::kFloat64);
  auto means = at::segment_reduce(x, "mean", t[1], {}, {}, 0, /*unsafe=*/true);  // [segments, d]
  auto r = torch::zeros({G, d}, x.options())
               .index_add_(0, t[2], means.index_select(0, t[3]) * c.narrow(0, 0, P).unsqueeze(1));
  return at::addr(r, c.narrow(0, P, G), depth_embed.to(torch::kFloat64)).to(s.scalar_type());
}

torch::Tensor router_inputs(const torch::Tensor& s, const torch::Tensor& depth_embed, const RouterWindows& w) {
  const bool kernel = cpu_kernel_device(s) && depth_embed.device().is_cpu() &&
                      (s.scalar_type() == torch::kFloat32 || s.scalar_type() == torch::kFloat64) &&
                      depth_embed.scalar_type() == s.scalar_type();
  if (!kernel) return router_inputs_composed(s, depth_embed, w);
  check_windows(s, depth_embed, w);
  return RouterInputsFunction::apply(s, depth_embed, &w);
}

}  // namespace lol
