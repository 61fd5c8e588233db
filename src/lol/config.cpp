#include "lol/config.h"

#include <algorithm>
#include <set>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"
#include "util/json_fields.h"
#include "util/size_limits.h"

namespace lol {

void LoLConfig::validate(const std::string& w) const {
  using util::check_range;
  check_range(w, "vocab_size", vocab_size, 1, int64_t(1) << 31);
  check_range(w, "d_model", d_model, 1, int64_t(1) << 20);
  check_range(w, "n_heads", n_heads, 1, d_model);
  check_range(w, "n_kv_heads", n_kv_heads, 1, n_heads);
  require(d_model % n_heads == 0, w, "field 'n_heads' = " + std::to_string(n_heads) + ": must divide d_model = " + std::to_string(d_model));
  require(n_heads % n_kv_heads == 0, w, "field 'n_kv_heads' = " + std::to_string(n_kv_heads) + ": must divide n_heads = " + std::to_string(n_heads));
  require(head_dim() % 2 == 0, w, "d_model / n_heads = " + std::to_string(head_dim()) + ": head dimension must be even for RoPE");
  check_range(w, "ffn_hidden", ffn_hidden, 1, int64_t(1) << 24);
  check_range(w, "n_prelude", n_prelude, 0, 1024);
  check_range(w, "n_coda", n_coda, 0, 1024);
  check_range(w, "library_size", library_size, 1, 4096);
  check_range(w, "core_depth", core_depth, 0, 4096);
  check_range(w, "window", window, 1, int64_t(1) << 24);
  check_range(w, "stride", stride, 0, window - 1);
  check_range(w, "max_seq_len", max_seq_len, 1, int64_t(1) << 24);
  // RoPE tables are computed in the model's float type: theta must fit a float.
  // Below 1 the RoPE frequencies grow with the dimension and overflow to NaN logits.
  require(rope_theta >= 1 && rope_theta <= 1e30, w,
          "field 'rope_theta' = " + std::to_string(rope_theta) + ": expected a value in [1, 1e30]");
  require(norm_eps > 0 && norm_eps < 1, w, "field 'norm_eps' must be in (0, 1)");
  require(router_noise_std >= 0 && router_noise_std <= 100, w, "field 'router_noise_std' must be in [0, 100]");
  // The loss-free balancing bias moves by this much per step (u = 1e-3 is Wang et al.'s
  // value; the LoL paper gives none); a rate near float overflow makes the bias infinite
  // after one step.
  require(balance_update_rate >= 0 && balance_update_rate <= 1, w, "field 'balance_update_rate' must be in [0, 1]");
  check_range(w, "prelude_coda_experts", prelude_coda_experts, 0, 4096);
  if (moe_prelude_coda()) {
    check_range(w, "prelude_coda_top_k", prelude_coda_top_k, 1, prelude_coda_experts);
    check_range(w, "prelude_coda_expert_ffn", prelude_coda_expert_ffn, 0, int64_t(1) << 24);
  }
  const double d = double(d_model);
  const double core_block = util::block_parameter_estimate(d, d, d * double(n_kv_heads) / double(n_heads), 1, double(ffn_hidden));
  const double outer_block =
      moe_prelude_coda()
          ? util::block_parameter_estimate(d, d, d * double(n_kv_heads) / double(n_heads), double(prelude_coda_experts),
                                           double(prelude_coda_expert_ffn > 0 ? prelude_coda_expert_ffn : ffn_hidden))
          : core_block;
  util::check_parameter_estimate(w, "the library, prelude and coda blocks, and the embeddings",
                                 double(std::max(library_size, core_depth)) * core_block + double(n_prelude + n_coda) * outer_block +
                                     2.0 * double(vocab_size) * d);
}

nlohmann::json LoLConfig::to_json() const {
  nlohmann::json j = {{"architecture", "lol"},
          {"vocab_size", vocab_size},
          {"d_model", d_model},
          {"n_heads", n_heads},
          {"n_kv_heads", n_kv_heads},
          {"ffn_hidden", ffn_hidden},
          {"n_prelude", n_prelude},
          {"n_coda", n_coda},
          {"library_size", library_size},
          {"core_depth", core_depth},
          {"window", window},
          {"stride", stride},
          {"rope_theta", rope_theta},
          {"norm_eps", norm_eps},
          {"tie_embeddings", tie_embeddings},
          {"untied_router", untied_router},
          {"router_noise_std", router_noise_std},
          {"balance_update_rate", balance_update_rate},
          {"max_seq_len", max_seq_len}};
  if (moe_prelude_coda()) {
    j["prelude_coda_experts"] = prelude_coda_experts;
    j["prelude_coda_top_k"] = prelude_coda_top_k;
    j["prelude_coda_expert_ffn"] = prelude_coda_expert_ffn;
  }
  return j;
}

LoLConfig LoLConfig::from_json(const nlohmann::json& j, const std::string& w) {
  util::JsonFields f(j, w);
  LoLConfig c;
  if (j.is_object() && j.contains("architecture") && j["architecture"].is_string() && j["architecture"] != "lol")
    throw InputError(w + ": field 'architecture' = " + j["architecture"].dump() +
                     ": expected \"lol\" (a " + j["architecture"].get<std::string>() +
                     " model; paths, eval-strategies, analyze routing and bench generate run LoL models only, forward and "
                     "generate every architecture" +
                     (j["architecture"] == "dense"
                          ? std::string("; cached decoding of a dense model: `lol export --hf RUN --out HF_DIR`, then "
                                        "`lol hf generate HF_DIR`")
                          : std::string()) +
                     ")");
  f.get("architecture", std::string("lol"), {"lol"});
  f.get("vocab_size", c.vocab_size);
  f.get("d_model", c.d_model);
  f.get("n_heads", c.n_heads);
  f.get("n_kv_heads", c.n_kv_heads);
  f.get("ffn_hidden", c.ffn_hidden);
  f.get("n_prelude", c.n_prelude);
  f.get("n_coda", c.n_coda);
  f.get("library_size", c.library_size);
  f.get("core_depth", c.core_depth);
  f.get("window", c.window);
  f.get("stride", c.stride);
  f.get("rope_theta", c.rope_theta);
  f.get("norm_eps", c.norm_eps);
  f.get("tie_embeddings", c.tie_embeddings);
  f.get("untied_router", c.untied_router);
  f.get("router_noise_std", c.router_noise_std);
  f.get("balance_update_rate", c.balance_update_rate);
  f.get("max_seq_len", c.max_seq_len);
  f.get("prelude_coda_experts", c.prelude_coda_experts);
  f.get("prelude_coda_top_k", c.prelude_coda_top_k);
  f.get("prelude_coda_expert_ffn", c.prelude_coda_expert_ffn);
  f.reject_unknown();
  c.validate(w);
  return c;
}

LoLConfig LoLConfig::load(const std::string& path) {
  nlohmann::json j = io::read_json_file(path);
  return from_json(j, path);
}

}  // namespace lol
