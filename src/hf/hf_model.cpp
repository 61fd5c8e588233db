#include "hf/hf_model.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <torch/nn/module.h>

#include "baselines/flops.h"
#include "core/tensor_io.h"
#include "util/error.h"
#include "util/size_limits.h"

namespace fs = std::filesystem;

namespace lol::hf {

namespace {

std::string shape_str(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

std::string llama_shape_source(const std::string& name, const HfConfig& cfg);

/// The config.json fields that set the shape of a tensor (for error messages), under the
/// names the architecture's config uses (GPT-J's n_embd, n_head, n_inner; Falcon's
/// ffn_hidden_size and key/value heads).
std::string shape_source(const std::string& name, const HfConfig& cfg) {
  std::string fields = llama_shape_source(name, cfg);
  const std::vector<std::pair<std::string, std::string>> renames =
      cfg.is_gptj()     ? std::vector<std::pair<std::string, std::string>>{{"hidden_size", "n_embd"},
                                                                            {"intermediate_size", "n_inner"},
                                                                            {"num_attention_heads", "n_head"},
                                                                            {"num_key_value_heads", "n_head"}}
      : cfg.is_falcon() ? std::vector<std::pair<std::string, std::string>>{{"intermediate_size", "ffn_hidden_size"},
                                                                            {"num_key_value_heads", "num_kv_heads"}}
      : cfg.is_opt()    ? std::vector<std::pair<std::string, std::string>>{{"intermediate_size", "ffn_dim"},
                                                                            {"num_key_value_heads", "num_attention_heads"}}
                        : std::vector<std::pair<std::string, std::string>>{};
  for (const auto& [from, to] : renames)
    for (size_t at = fields.find(from); at != std::string::npos; at = fields.find(from, at + to.size()))
      fields.replace(at, from.size(), to);
  return fields;
}

/// shape_source under the Llama family's field names.
std::string llama_shape_source(const std::string& name, const HfConfig& cfg) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("embed_tokens") || has("lm_head")) return "vocab_size, hidden_size";
  // OLMo's q_norm / k_norm span all heads of the projection.
  if (has("q_norm")) return cfg.qk_norm_across_heads ? "num_attention_heads, head_dim" : "head_dim";
  if (has("k_norm")) return cfg.qk_norm_across_heads ? "num_key_value_heads, head_dim" : "head_dim";
  if (has("q_proj")) return "num_attention_heads, head_dim, hidden_size";
  if (has("k_proj") || has("v_proj")) return "num_key_value_heads, head_dim, hidden_size";
  if (has("o_proj")) return "hidden_size, num_attention_heads, head_dim";
  const char* experts = cfg.is_mixtral() ? "num_local_experts" : "num_experts";
  if (has("mlp.gate.")) return std::string(experts) + ", hidden_size";
  if (has("mlp.shared_expert_gate.")) return "1, hidden_size";
  if (has("mlp.shared_expert.")) return "shared_expert_intermediate_size, hidden_size";
  if (has("mlp.experts.")) return std::string(cfg.is_qwen3_moe() || cfg.is_qwen2_moe() ? "moe_intermediate_size" : "intermediate_size") +
                                  ", hidden_size (" + experts + " experts per layer)";
  if (has("mlp.")) return "intermediate_size, hidden_size";
  return "hidden_size";
}

bool is_rotary_buffer(const std::string& name) { return ends_with(name, "rotary_emb.inv_freq"); }

}  // namespace

int64_t parameter_count(const HfConfig& c) {
  const int64_t n = baselines::cost_model(to_dense_config(c)).parameters;
  // (Cohere's LayerNorms have no bias: the dense model's zero biases are not the folder's;
  // OPT's position table has 2 more rows, its offset.)
  return c.is_cohere() ? n - (c.num_hidden_layers + 1) * c.hidden_size : c.is_opt() ? n + 2 * c.hidden_size : n;
}

baselines::DenseConfig to_dense_config(const HfConfig& h) {
  baselines::DenseConfig c;
  c.vocab_size = h.vocab_size;
  c.d_model = h.hidden_size;
  c.n_layers = h.num_hidden_layers;
  c.n_heads = h.num_attention_heads;
  c.n_kv_heads = h.num_key_value_heads;
  c.head_dim = h.head_dim;
  c.ffn_hidden = h.intermediate_size;
  c.max_seq_len = h.max_position_embeddings;
  c.qkv_bias = h.qkv_bias;
  c.qk_norm = h.qk_norm;
  c.qk_norm_across_heads = h.qk_norm_across_heads;
  c.tie_word_embeddings = h.tie_word_embeddings;
  c.rope_theta = h.rope_theta;
  c.rope_scaling = h.rope_scaling;
  c.norm_eps = h.rms_norm_eps;
  c.attention = h.sliding_window > 0 ? "sliding" : "full";
  c.window = h.sliding_window;
  c.n_full_prelude = h.sliding_window > 0 ? h.full_attention_layers : 0;
  c.stride = 0;
  c.full_attention_interval = h.sliding_window > 0 ? h.full_attention_interval : 0;
  c.rope_local_theta = h.sliding_window > 0 ? h.rope_local_theta : 0;
  c.partial_rotary_factor = h.partial_rotary_factor;
  c.activation = h.activation;
  c.sandwich_norm = h.sandwich_norm;
  c.input_norms = h.input_norms;
  c.scale_embeddings = h.scale_embeddings;
  c.attn_logit_softcap = h.attn_logit_softcapping;
  c.final_logit_softcap = h.final_logit_softcapping;
  c.query_pre_attn_scalar = h.query_pre_attn_scalar;  // folded into the queries by the loader
  if (h.is_granite()) {
    c.embedding_multiplier = h.embedding_multiplier;
    c.logits_scaling = h.logits_scaling;
    c.residual_multiplier = h.residual_multiplier;    // folded into o_proj, down_proj by the loader
    c.attention_multiplier = h.attention_multiplier;  // folded into q_proj by the loader
  }
  if (h.is_gpt2() || h.is_gpt_bigcode()) {  // LayerNorms, learned positions, ungated MLP, biases everywhere
    c.norm = "layernorm";
    c.mlp = "plain";
    c.positions = "learned";
    c.o_bias = c.mlp_bias = true;
  }
  if (h.is_opt()) {  // GPT-2's blocks with separate projections, the ReLU, all biases or none
    c.norm = "layernorm";
    c.mlp = "plain";
    c.positions = "learned";
    c.o_bias = c.mlp_bias = h.qkv_bias;  // enable_bias
  }
  if (h.is_gpt_neox()) {  // LayerNorms, partial RoPE, ungated MLP with biases, parallel blocks
    c.norm = "layernorm";
    c.mlp = "plain";
    c.mlp_bias = true;
    c.o_bias = h.qkv_bias;  // attention_bias: query_key_value and dense alike
    c.parallel_residual = h.parallel_residual;
  }
  if (h.is_stablelm()) {  // Llama's blocks with LayerNorms, partial rotary, Phi's parallel blocks
    c.norm = "layernorm";
    c.parallel_residual = c.shared_input_norm = h.parallel_residual;
  }
  if (h.is_falcon()) {  // LayerNorms, RoPE, ungated MLP, all biases or none, three block layouts
    c.norm = "layernorm";
    c.mlp = "plain";
    c.mlp_bias = c.o_bias = h.qkv_bias;  // bias: query_key_value, dense and the MLP alike
    c.parallel_residual = h.parallel_residual;
    c.shared_input_norm = h.shared_input_norm;
  }
  if (h.is_starcoder2()) {  // Llama's blocks with LayerNorms, an ungated MLP, all biases or none
    c.norm = "layernorm";
    c.mlp = "plain";
    c.mlp_bias = c.o_bias = h.qkv_bias;  // use_bias
  }
  if (h.is_gptj()) {  // Phi's blocks without attention biases (the rotary rows reordered on load)
    c.norm = "layernorm";
    c.mlp = "plain";
    c.mlp_bias = true;
    c.qkv_bias = c.o_bias = false;
    c.parallel_residual = c.shared_input_norm = true;
    c.lm_head_bias = true;
  }
  if (h.is_cohere()) {  // Phi's parallel blocks with Llama's projections and gated MLP, no biases
    c.norm = "layernorm";  // (its biases held at zero: CohereLayerNorm has none)
    c.parallel_residual = c.shared_input_norm = true;
    c.logit_scale = h.logit_scale;
  }
  if (h.is_moe()) {  // Mixtral / OLMoE: every FFN of intermediate_size experts; Qwen3-MoE: its own size and layers
    c.n_experts = h.num_experts;
    c.top_k = h.num_experts_per_tok;
    c.expert_ffn_hidden = h.moe_intermediate_size;
    c.normalize_top_k = h.norm_topk_prob;
    c.moe_layer_step = h.decoder_sparse_step;
    c.dense_ffn_layers = h.mlp_only_layers;
    c.shared_expert_ffn_hidden = h.shared_expert_intermediate_size;
  }
  if (h.is_phi()) {  // GPT-NeoX's blocks with one shared input norm, and lm_head's bias
    c.norm = "layernorm";
    c.mlp = "plain";
    c.mlp_bias = c.o_bias = c.qkv_bias = true;
    c.parallel_residual = c.shared_input_norm = true;
    c.lm_head_bias = true;
  }
  return c;
}

namespace {

/// A dense model of OLMo 2's layout: no input norms, output norms, q/k norms across heads.
bool olmo_layout(const baselines::DenseConfig& c) {
  return !c.input_norms && c.sandwich_norm && c.qk_norm && c.qk_norm_across_heads;
}

}  // namespace

std::string default_architecture(const baselines::DenseConfig& c) {
  if (c.n_experts > 0)
    return c.shared_expert_ffn_hidden > 0 ? kQwen2MoeArch
           : c.qk_norm_across_heads       ? kOlmoeArch
           : c.qk_norm                    ? kQwen3MoeArch
                                          : kMixtralArch;
  if (c.logit_scale != 1.0) return kCohereArch;
  if (c.gpt2_blocks())
    return c.learned_positions()                    ? (c.activation == "relu" || !c.qkv_bias || !c.o_bias ? kOptArch
                                                       : c.n_kv_heads == c.n_heads                     ? kGpt2Arch
                                                                                                       : kGptBigCodeArch)
           : c.mlp == "gated"                       ? kStableLmArch
           : c.lm_head_bias                         ? kPhiArch
           // (Phi's head is untied, GPT-NeoX's attention multi-head: Falcon holds those)
           : c.shared_input_norm                    ? (c.tie_word_embeddings ? kFalconArch : kPhiArch)
           // (sequential blocks sliding on every layer, or with grouped-query attention: StarCoder2's)
           : !c.parallel_residual && (c.attention == "sliding" || (c.n_kv_heads != c.n_heads && c.n_kv_heads != 1))
               ? kStarcoder2Arch
           : c.n_kv_heads != c.n_heads              ? kFalconArch
                                                    : kGptNeoXArch;
  if (olmo_layout(c)) return c.attention == "sliding" ? kOlmo3Arch : kOlmo2Arch;
  if (c.scale_embeddings) return c.qk_norm ? kGemma3Arch : c.sandwich_norm ? kGemma2Arch : kGemmaArch;
  if (c.granite_multipliers()) return kGraniteArch;
  return c.qk_norm ? kQwen3Arch : kQwen2Arch;
}

namespace {

bool is_gemma_architecture(const std::string& a) { return a == kGemmaArch || a == kGemma2Arch || a == kGemma3Arch; }

/// Whether the sliding layers of `c` (attention "sliding") are written as such: when their
/// window binds (is shorter than max_seq_len), or, for Gemma 3, when their RoPE is their own.
bool exported_sliding(const baselines::DenseConfig& c, const std::string& architecture) {
  return c.window < c.max_seq_len || (architecture == kGemma3Arch && c.rope_local_theta > 0);
}

/// Throws InputError unless the dense model `c` (scaled embeddings, per-head q/k norms at
/// most) computes what transformers' `architecture` (a Gemma one) computes from the
/// config.json that HfConfig::to_json writes for it: Gemma's blocks have no sandwich norms,
/// no q/k norms, no soft-capping and no sliding layers; Gemma 2's have sandwich norms, no
/// q/k norms and slide on every other layer from layer 0 (or none); Gemma 3's have
/// sandwich norms, per-head q/k norms and slide on all but every P-th layer, with unscaled
/// RoPE on the sliding layers.
void check_gemma_layout(const baselines::DenseConfig& c, const std::string& architecture) {
  const std::string as = "export as " + default_architecture(c);
  auto refuse = [&](const std::string& what, const std::string& why) {
    throw InputError("dense model: " + what + ": " + architecture + " " + why + " (" + as + ")");
  };
  if (!c.scale_embeddings)
    refuse("scale_embeddings = false", "multiplies the embeddings by sqrt(hidden_size)");
  if (c.activation == "relu") refuse("activation \"relu\"", "gates its MLP with a GELU (hidden_activation)");
  if (!c.input_norms || c.qk_norm_across_heads)
    refuse("OLMo's blocks (output norms only, q/k norms across heads)", "has input norms and per-head q/k norms");
  if (c.qkv_bias) refuse("qkv_bias = true", "has no projection biases");
  const bool g1 = architecture == kGemmaArch, g3 = architecture == kGemma3Arch;
  if (g1 == c.sandwich_norm)
    refuse(std::string("sandwich_norm = ") + (c.sandwich_norm ? "true" : "false"),
           g1 ? "has no norms on the attention and MLP outputs" : "normalizes the attention and MLP outputs");
  if (g3 != c.qk_norm)
    refuse(std::string("qk_norm = ") + (c.qk_norm ? "true" : "false"),
           g3 ? "normalizes every query and key head" : "has no q_norm / k_norm");
  if (g1 && (c.attn_logit_softcap > 0 || c.final_logit_softcap > 0))
    refuse("logit soft-capping", "has none (Gemma 2 does)");
  if (g1 && c.query_fold() != 1.0)
    refuse("query_pre_attn_scalar = " + std::to_string(c.query_pre_attn_scalar), "scales attention by head_dim^-1/2");
  if (!g3 && c.rope_local_theta > 0)
    refuse("rope_local_theta = " + std::to_string(c.rope_local_theta), "has one RoPE for every layer");
  if (c.attention == "sliding" && exported_sliding(c, architecture)) {
    if (g1) refuse("attention \"sliding\" (window " + std::to_string(c.window) + ")", "has no sliding window");
    if (c.n_full_prelude > 0 || c.n_full_coda > 0)
      refuse("n_full_prelude / n_full_coda > 0", "interleaves its full layers from layer 0 (no leading or trailing block)");
    if (!g3 && c.full_attention_interval != 2)
      refuse("full_attention_interval = " + std::to_string(c.full_attention_interval),
             "slides on layers 0, 2, 4, ... (full_attention_interval 2)");
    if (g3 && c.rope_local_theta == 0 && !c.rope_scaling.is_default())
      refuse("sliding layers with the full layers' scaled RoPE",
             "runs its sliding layers with unscaled RoPE (rope_local_base_freq)");
  }
}

/// The fields every architecture's config takes from the dense model as they are: sizes,
/// heads, positions, the norm epsilon, tied embeddings, the stored dtype.
HfConfig sized_config(const baselines::DenseConfig& c, const std::string& architecture, const std::string& torch_dtype) {
  HfConfig h;
  h.architecture = architecture;
  h.vocab_size = c.vocab_size;
  h.hidden_size = c.d_model;
  h.intermediate_size = c.ffn_hidden;
  h.num_hidden_layers = c.n_layers;
  h.num_attention_heads = c.n_heads;
  h.num_key_value_heads = c.n_kv_heads;
  h.head_dim = c.effective_head_dim();
  h.max_position_embeddings = c.max_seq_len;
  h.rms_norm_eps = c.norm_eps;
  h.tie_word_embeddings = c.tie_word_embeddings;
  h.torch_dtype = torch_dtype;
  return h;
}

/// Refuses exporting `c` as `arch`: "dense model: <what>: <arch> <why> (export as <the
/// default architecture>)".
[[noreturn]] void refuse_export(const baselines::DenseConfig& c, const char* arch, const std::string& what,
                                const std::string& why) {
  const std::string def = default_architecture(c);
  throw InputError("dense model: " + what + ": " + std::string(arch) + " " + why +
                   (def != arch ? " (export as " + def + ")" : std::string()));
}

/// What every LayerNorm architecture (GPT-2, GPT-NeoX, Phi, StableLM, Falcon, GPT-J,
/// StarCoder2) has: LayerNorms, heads of d_model / n_heads, full causal attention (`sliding`:
/// or a window on every layer, StarCoder2), none of the Gemma / OLMo / Qwen3 extras;
/// and an ungated MLP with biases and the exact or tanh GELU (the GPT family, `gated` false)
/// or a gated MLP without biases (StableLM, `gated` true); `zero_biases`: the MLP's biases
/// may be missing (Phi: exported as zeros; Falcon: none at all). InputError naming the field
/// otherwise.
void check_gpt_family_layout(const baselines::DenseConfig& c, const char* arch, bool gated = false,
                             bool zero_biases = false, bool sliding = false, bool relu = false) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, arch, what, why); };
  if (c.norm != "layernorm") refuse("norm \"" + c.norm + "\"", "has LayerNorms (norm \"layernorm\")");
  if (gated && (c.mlp != "gated" || c.mlp_bias))
    refuse("mlp \"" + c.mlp + "\" / mlp_bias", "has a gated MLP without biases");
  if (gated && c.activation == "relu") refuse("activation \"relu\"", "gates its MLP with silu or a GELU");
  if (!gated && (c.mlp != "plain" || (!c.mlp_bias && !zero_biases)))
    refuse("mlp \"" + c.mlp + "\" / mlp_bias", zero_biases ? "has an ungated MLP" : "has an ungated MLP with biases");
  if (!gated && c.activation != "gelu_pytorch_tanh" && c.activation != "gelu" && !(relu && c.activation == "relu"))
    refuse("activation \"" + c.activation + "\"",
           std::string("is written with ") + (relu ? "relu, " : "") + "gelu_new (tanh) or gelu (exact) here");
  if (c.effective_head_dim() * c.n_heads != c.d_model)
    refuse("head_dim = " + std::to_string(c.effective_head_dim()), "has heads of hidden_size / num_attention_heads");
  const bool every_layer_slides = c.attention == "sliding" && c.n_full_prelude == 0 && c.n_full_coda == 0 &&
                                  c.full_attention_interval == 0;
  if (c.attention != "full" && !(c.attention == "sliding" && c.window >= c.max_seq_len) &&
      !(sliding && every_layer_slides))
    refuse("attention \"" + c.attention + "\" (window " + std::to_string(c.window) + ")",
           sliding ? "has full causal attention or a sliding window on every layer" : "has full causal attention");
  if (c.qk_norm || c.sandwich_norm || !c.input_norms || c.scale_embeddings || c.attn_logit_softcap > 0 ||
      c.final_logit_softcap > 0 || c.rope_local_theta > 0 || c.rope_scaling.type == "longrope")
    refuse("q/k norms, sandwich norms, scaled embeddings, soft-capping, a local RoPE or longrope", "has none of them");
}

/// The config of a GPT-family architecture for `c` (check_gpt_family_layout passed): sizes,
/// the GELU, RoPE (GPT-NeoX, Phi) and the parallel blocks.
HfConfig gpt_family_config(const baselines::DenseConfig& c, const char* arch, const std::string& torch_dtype) {
  HfConfig h = sized_config(c, arch, torch_dtype);
  h.qkv_bias = c.qkv_bias;
  h.activation = c.activation;
  h.parallel_residual = c.parallel_residual;
  h.rope_theta = c.rope_theta;
  h.rope_scaling = c.rope_scaling;
  h.partial_rotary_factor = c.partial_rotary_factor;
  return h;
}

/// GPT2LMHeadModel's (or `arch` GPTBigCodeForCausalLM's) config of a dense model of GPT-2's
/// layout (InputError naming what differs otherwise): check_gpt_family_layout's, learned
/// positions, sequential blocks, biases on every projection, no lm_head bias, multi-head
/// attention (GPT-BigCode: or one key/value head).
HfConfig gpt2_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype,
                                const char* arch = kGpt2Arch) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, arch, what, why); };
  check_gpt_family_layout(c, arch);
  if (!c.learned_positions()) refuse("positions \"" + c.positions + "\"", "has learned positions and no RoPE");
  if (c.parallel_residual) refuse("parallel_residual true", "has sequential blocks");
  if (c.lm_head_bias) refuse("lm_head_bias true", "has no lm_head bias");
  if (!c.qkv_bias || !c.o_bias) refuse("qkv_bias / o_bias not both true", "has biases on every projection");
  if (arch == std::string(kGptBigCodeArch)) {
    if (c.n_kv_heads != 1 && c.n_kv_heads != c.n_heads)
      refuse("n_kv_heads = " + std::to_string(c.n_kv_heads), "has one key/value head (multi_query) or one per query head");
  } else if (c.n_kv_heads != c.n_heads) {
    refuse("n_kv_heads = " + std::to_string(c.n_kv_heads), "has multi-head attention");
  }
  return gpt_family_config(c, arch, torch_dtype);
}

/// GPTNeoXForCausalLM's config of a dense model of GPT-NeoX's layout (InputError naming
/// what differs otherwise): check_gpt_family_layout's, RoPE (partial or not), q/k/v and
/// o_proj biases both or neither, multi-head attention, parallel or sequential blocks
/// with their own FFN norm, no lm_head bias.
HfConfig gpt_neox_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, kGptNeoXArch, what, why); };
  check_gpt_family_layout(c, kGptNeoXArch);
  if (c.learned_positions()) refuse("positions \"learned\"", "has rotary positions");
  if (c.shared_input_norm) refuse("shared_input_norm true", "has its own FFN input norm (post_attention_layernorm)");
  if (c.lm_head_bias) refuse("lm_head_bias true", "has no embed_out bias");
  if (c.qkv_bias != c.o_bias)
    refuse(std::string("qkv_bias ") + (c.qkv_bias ? "true" : "false") + " with o_bias " + (c.o_bias ? "true" : "false"),
           "has biases on query_key_value and dense together (attention_bias) or on neither");
  if (c.n_kv_heads != c.n_heads) refuse("n_kv_heads = " + std::to_string(c.n_kv_heads), "has multi-head attention");
  return gpt_family_config(c, kGptNeoXArch, torch_dtype);
}

/// PhiForCausalLM's config of a dense model of Phi's layout (InputError naming what
/// differs otherwise): check_gpt_family_layout's, RoPE, parallel blocks with one input
/// norm, untied; grouped-query attention allowed. Phi's biases (every projection and
/// lm_head) that the model lacks are exported as zeros (hf_export).
HfConfig phi_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, kPhiArch, what, why); };
  check_gpt_family_layout(c, kPhiArch, false, true);
  if (c.learned_positions()) refuse("positions \"learned\"", "has rotary positions");
  if (!c.parallel_residual || !c.shared_input_norm)
    refuse("parallel_residual / shared_input_norm not both true", "has parallel blocks with one input_layernorm");
  if (c.tie_word_embeddings) refuse("tie_word_embeddings true", "has an untied lm_head with a bias");
  HfConfig h = gpt_family_config(c, kPhiArch, torch_dtype);
  h.qkv_bias = true;  // (zeros where the model has none)
  return h;
}

/// StableLmForCausalLM's config of a dense model of StableLM's layout (InputError naming
/// what differs otherwise): check_gpt_family_layout's with a gated MLP, RoPE, no o_proj or
/// lm_head bias, sequential blocks or parallel ones with one input norm; grouped-query
/// attention and tied embeddings allowed.
/// CohereForCausalLM's config of a dense model of Cohere's layout (InputError naming what
/// differs otherwise): check_gpt_family_layout's with a gated MLP, parallel blocks with one
/// input_layernorm, RoPE over whole heads, no biases on the projections or lm_head. (The
/// LayerNorms' biases, which Cohere's lack, are checked to be zero by hf_export.)
HfConfig cohere_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, kCohereArch, what, why); };
  check_gpt_family_layout(c, kCohereArch, true);
  if (c.learned_positions()) refuse("positions \"learned\"", "has rotary positions");
  if (!c.parallel_residual || !c.shared_input_norm)
    refuse("parallel_residual / shared_input_norm not both true", "has parallel blocks with one input_layernorm");
  if (c.qkv_bias || c.o_bias || c.lm_head_bias)
    refuse("qkv_bias / o_bias / lm_head_bias true", "has no projection or lm_head biases");
  if (c.partial_rotary_factor != 1.0)
    refuse("partial_rotary_factor " + nlohmann::json(c.partial_rotary_factor).dump(), "rotates whole heads");
  HfConfig h = gpt_family_config(c, kCohereArch, torch_dtype);
  h.logit_scale = c.logit_scale;
  return h;
}

HfConfig stablelm_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, kStableLmArch, what, why); };
  check_gpt_family_layout(c, kStableLmArch, true);
  if (c.learned_positions()) refuse("positions \"learned\"", "has rotary positions");
  if (c.o_bias || c.lm_head_bias) refuse("o_bias / lm_head_bias true", "has no o_proj or lm_head bias");
  if (c.parallel_residual != c.shared_input_norm)
    refuse(std::string("parallel_residual ") + (c.parallel_residual ? "true" : "false") + " with shared_input_norm " +
               (c.shared_input_norm ? "true" : "false"),
           "has sequential blocks or parallel ones with one input_layernorm");
  return gpt_family_config(c, kStableLmArch, torch_dtype);
}

/// FalconForCausalLM's config of a dense model of Falcon's layout (InputError naming what
/// differs otherwise): check_gpt_family_layout's, RoPE over whole heads, biases on q/k/v,
/// o_proj and the MLP or on none, no lm_head bias; sequential blocks with one or all
/// key/value heads, or parallel blocks (one shared input norm or two norms) with any.
/// Written as falcon-7b's layout (multi_query, no new_decoder_architecture) when that holds
/// the model (sequential blocks, or parallel ones with a shared norm and one key/value
/// head), else with new_decoder_architecture (HfConfig::to_json).
HfConfig falcon_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, kFalconArch, what, why); };
  check_gpt_family_layout(c, kFalconArch, false, true);
  if (c.learned_positions()) refuse("positions \"learned\"", "has rotary positions");
  if (c.partial_rotary_factor != 1.0)
    refuse("partial_rotary_factor " + nlohmann::json(c.partial_rotary_factor).dump(), "rotates whole heads");
  if (c.lm_head_bias) refuse("lm_head_bias true", "has no lm_head bias");
  if (c.qkv_bias != c.o_bias || c.qkv_bias != c.mlp_bias)
    refuse(std::string("qkv_bias / o_bias / mlp_bias not all ") + (c.qkv_bias ? "true" : "false"),
           "has biases on query_key_value, dense and the MLP together (bias) or on none");
  if (!c.parallel_residual && c.n_kv_heads != 1 && c.n_kv_heads != c.n_heads)
    refuse("n_kv_heads = " + std::to_string(c.n_kv_heads) + " with sequential blocks",
           "has sequential blocks only with one key/value head (multi_query) or one per query head");
  HfConfig h = gpt_family_config(c, kFalconArch, torch_dtype);
  h.shared_input_norm = c.shared_input_norm;
  h.falcon_new_decoder = c.parallel_residual && !(c.shared_input_norm && c.n_kv_heads == 1);
  return h;
}

/// GPTJForCausalLM's config of a dense model of GPT-J's layout (InputError naming what differs
/// otherwise): check_gpt_family_layout's, parallel blocks with one input norm, RoPE of base
/// 10000 without scaling, no q/k/v or o_proj biases, multi-head attention, untied. The MLP
/// and lm_head biases GPT-J has and the model lacks are written as zeros (hf_export).
HfConfig gptj_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, kGptJArch, what, why); };
  check_gpt_family_layout(c, kGptJArch, false, true);
  if (c.learned_positions()) refuse("positions \"learned\"", "has rotary positions");
  if (!c.parallel_residual || !c.shared_input_norm)
    refuse("parallel_residual / shared_input_norm not both true", "has parallel blocks with one ln_1");
  if (c.qkv_bias || c.o_bias) refuse("qkv_bias / o_bias true", "has no q/k/v_proj or out_proj biases");
  if (c.n_kv_heads != c.n_heads) refuse("n_kv_heads = " + std::to_string(c.n_kv_heads), "has multi-head attention");
  if (c.tie_word_embeddings) refuse("tie_word_embeddings true", "has an untied lm_head with a bias");
  if (c.rope_theta != 10000.0 || !c.rope_scaling.is_default())
    refuse("rope_theta " + nlohmann::json(c.rope_theta).dump() + " / rope_scaling " + c.rope_scaling.describe(),
           "has RoPE of base 10000 without scaling");
  HfConfig h = gpt_family_config(c, kGptJArch, torch_dtype);
  h.shared_input_norm = true;
  return h;
}

/// OPTForCausalLM's config of a dense model of OPT's layout (InputError naming what differs
/// otherwise): check_gpt_family_layout's with the ReLU allowed and the MLP's biases optional,
/// learned positions, sequential blocks, multi-head attention, biases on q/k/v, out_proj and
/// the MLP or on none (enable_bias), no lm_head bias.
HfConfig opt_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, kOptArch, what, why); };
  check_gpt_family_layout(c, kOptArch, false, true, false, true);
  if (!c.learned_positions()) refuse("positions \"" + c.positions + "\"", "has learned positions and no RoPE");
  if (c.parallel_residual) refuse("parallel_residual true", "has sequential blocks");
  if (c.lm_head_bias) refuse("lm_head_bias true", "has no lm_head bias");
  if (c.n_kv_heads != c.n_heads) refuse("n_kv_heads = " + std::to_string(c.n_kv_heads), "has multi-head attention");
  if (c.qkv_bias != c.o_bias || c.qkv_bias != c.mlp_bias)
    refuse(std::string("qkv_bias / o_bias / mlp_bias not all ") + (c.qkv_bias ? "true" : "false"),
           "has biases on q/k/v/out_proj and the MLP together (enable_bias) or on none");
  if (c.norm_eps != 1e-5)
    refuse("norm_eps " + nlohmann::json(c.norm_eps).dump(), "has LayerNorms of epsilon 1e-5 (OPTConfig has no epsilon field)");
  return gpt_family_config(c, kOptArch, torch_dtype);
}

/// Starcoder2ForCausalLM's config of a dense model of StarCoder2's layout (InputError naming
/// what differs otherwise): check_gpt_family_layout's with a window on every layer allowed,
/// sequential blocks, RoPE over whole heads, biases on q/k/v, o_proj and the MLP or on none,
/// no lm_head bias; grouped-query attention and tied embeddings allowed.
HfConfig starcoder2_from_dense_config(const baselines::DenseConfig& c, const std::string& torch_dtype) {
  const auto refuse = [&](const std::string& what, const std::string& why) {
    refuse_export(c, kStarcoder2Arch, what, why);
  };
  check_gpt_family_layout(c, kStarcoder2Arch, false, true, true);
  if (c.learned_positions()) refuse("positions \"learned\"", "has rotary positions");
  if (c.parallel_residual) refuse("parallel_residual true", "has sequential blocks");
  if (c.partial_rotary_factor != 1.0)
    refuse("partial_rotary_factor " + nlohmann::json(c.partial_rotary_factor).dump(), "rotates whole heads");
  if (c.lm_head_bias) refuse("lm_head_bias true", "has no lm_head bias");
  if (c.qkv_bias != c.o_bias || c.qkv_bias != c.mlp_bias)
    refuse(std::string("qkv_bias / o_bias / mlp_bias not all ") + (c.qkv_bias ? "true" : "false"),
           "has biases on q/k/v/o_proj and the MLP together (use_bias) or on none");
  HfConfig h = gpt_family_config(c, kStarcoder2Arch, torch_dtype);
  if (c.attention == "sliding" && c.window < c.max_seq_len) h.sliding_window = c.window;
  return h;
}

}  // namespace

namespace {

bool is_moe_architecture(const std::string& a) {
  return a == kMixtralArch || a == kOlmoeArch || a == kQwen2MoeArch || a == kQwen3MoeArch;
}

/// Throws InputError unless the dense model `c` has the FFNs and blocks of the
/// mixture-of-experts `architecture` (kMixtralArch, kOlmoeArch, kQwen2MoeArch or
/// kQwen3MoeArch): experts in every layer (Mixtral, OLMoE) or in those decoder_sparse_step and
/// mlp_only_layers choose (Qwen2/3-MoE), renormalised weights for Mixtral, a shared expert for
/// Qwen2-MoE and none elsewhere, OLMoE's q/k norms across heads in pre-norm blocks, Qwen3-MoE's
/// per-head ones, Mixtral's and Qwen2-MoE's none; sliding layers only for Mixtral (all).
void check_moe_layout(const baselines::DenseConfig& c, const char* arch) {
  const auto refuse = [&](const std::string& what, const std::string& why) { refuse_export(c, arch, what, why); };
  const std::string a = arch;
  if (c.n_experts == 0) refuse("dense FFNs (n_experts 0)", "has mixture-of-experts FFNs");
  const bool qwen_moe = a == kQwen3MoeArch || a == kQwen2MoeArch;
  if (!qwen_moe && (c.moe_layer_step != 1 || !c.dense_ffn_layers.empty()))
    refuse("dense FFN layers (moe_layer_step " + std::to_string(c.moe_layer_step) + ", " +
               std::to_string(c.dense_ffn_layers.size()) + " dense_ffn_layers)",
           "has experts in every layer");
  if (a == kMixtralArch && !c.normalize_top_k)
    refuse("normalize_top_k false", "renormalises the selected experts' weights");
  const bool per_head = c.qk_norm && !c.qk_norm_across_heads, across = c.qk_norm && c.qk_norm_across_heads;
  if ((a == kMixtralArch || a == kQwen2MoeArch) && c.qk_norm) refuse("qk_norm true", "has no q_norm / k_norm");
  if (a == kQwen2MoeArch && c.shared_expert_ffn_hidden == 0)
    refuse("no shared expert (shared_expert_ffn_hidden 0)", "runs a shared expert in every MoE layer");
  if (a != kQwen2MoeArch && c.shared_expert_ffn_hidden > 0)
    refuse("a shared expert (shared_expert_ffn_hidden " + std::to_string(c.shared_expert_ffn_hidden) + ")",
           "has none");
  if (a == kQwen3MoeArch && !per_head) refuse("no per-head qk_norm", "normalizes every query and key head");
  if (a == kOlmoeArch && !across) refuse("no qk_norm across heads", "normalizes the whole q and k projections");
  if (a == kOlmoeArch && c.effective_head_dim() * c.n_heads != c.d_model)
    refuse("head_dim " + std::to_string(c.effective_head_dim()), "has heads of hidden_size / num_attention_heads");
  if (!c.input_norms || c.sandwich_norm) refuse("sandwich or output-only norms", "has pre-norm blocks");
  if (a != kMixtralArch && c.attention == "sliding" && exported_sliding(c, a))
    refuse("attention \"sliding\" (window " + std::to_string(c.window) + ")", "has no sliding layers here");
}

}  // namespace

HfConfig from_dense_config(const baselines::DenseConfig& c, const std::string& architecture,
                           const std::string& torch_dtype) {
  if (is_moe_architecture(architecture)) check_moe_layout(c, find_architecture(architecture)->cls);
  else if (c.n_experts > 0)
    refuse_export(c, architecture.c_str(), "n_experts " + std::to_string(c.n_experts) + " (mixture-of-experts FFNs)",
                  "has dense FFNs");
  if (architecture != kCohereArch && c.logit_scale != 1.0)
    refuse_export(c, architecture.c_str(), "logit_scale " + nlohmann::json(c.logit_scale).dump(),
                  "does not scale its logits");
  if (architecture == kCohereArch) return cohere_from_dense_config(c, torch_dtype);
  if (architecture != kGraniteArch && c.granite_multipliers())
    refuse_export(c, architecture.c_str(),
                  "Granite's multipliers (embedding_multiplier " + nlohmann::json(c.embedding_multiplier).dump() +
                      ", logits_scaling " + nlohmann::json(c.logits_scaling).dump() + ", residual_multiplier " +
                      nlohmann::json(c.residual_multiplier).dump() + ", attention_multiplier " +
                      nlohmann::json(c.attention_multiplier).dump() + ")",
                  "has none of them");
  if (architecture == kGpt2Arch) return gpt2_from_dense_config(c, torch_dtype);
  if (architecture == kGptBigCodeArch) return gpt2_from_dense_config(c, torch_dtype, kGptBigCodeArch);
  if (architecture == kGptNeoXArch) return gpt_neox_from_dense_config(c, torch_dtype);
  if (architecture == kPhiArch) return phi_from_dense_config(c, torch_dtype);
  if (architecture == kStableLmArch) return stablelm_from_dense_config(c, torch_dtype);
  if (architecture == kFalconArch) return falcon_from_dense_config(c, torch_dtype);
  if (architecture == kGptJArch) return gptj_from_dense_config(c, torch_dtype);
  if (architecture == kStarcoder2Arch) return starcoder2_from_dense_config(c, torch_dtype);
  if (architecture == kOptArch) return opt_from_dense_config(c, torch_dtype);
  const bool gemma = is_gemma_architecture(architecture);
  if (!find_architecture(architecture) || !find_architecture(architecture)->cli)
    throw InputError("architecture \"" + architecture + "\": expected " + architecture_list(true));
  const bool olmo = architecture == kOlmo2Arch || architecture == kOlmo3Arch;
  if (c.gpt2_blocks())
    throw InputError("dense model: GPT-2's / GPT-NeoX's / Phi's / StableLM's / Falcon's / GPT-J's / StarCoder2's layout (norm \"" + c.norm + "\", mlp \"" + c.mlp +
                     "\", positions \"" + c.positions + "\", parallel_residual " +
                     (c.parallel_residual ? "true" : "false") + "): " + architecture +
                     " has RMSNorms, a gated MLP, RoPE and sequential blocks (export as " + default_architecture(c) +
                     ", --arch " +
                     cli_architecture_name(default_architecture(c)) + ")");
  // OLMo's blocks (no input norms, output norms, q/k norms across heads) exist only in
  // OLMo 2/3, and they have no other blocks.
  const std::string blocks = std::string("input_norms ") + (c.input_norms ? "true" : "false") + ", sandwich_norm " +
                             (c.sandwich_norm ? "true" : "false") + ", qk_norm " + (c.qk_norm ? "true" : "false") +
                             ", qk_norm_across_heads " + (c.qk_norm_across_heads ? "true" : "false");
  const bool olmoe = architecture == kOlmoeArch;  // (OLMo's q/k norms in pre-norm blocks: check_moe_layout)
  const bool olmo_like = !olmoe && (!c.input_norms || c.qk_norm_across_heads);
  if (olmo_like && !olmo_layout(c))
    throw InputError("dense model: blocks with " + blocks +
                     ": no Hugging Face architecture has them (OLMo 2/3: input_norms false, sandwich_norm, qk_norm "
                     "and qk_norm_across_heads true; the Llama family: input_norms true, no qk_norm_across_heads)");
  if (olmo && !olmo_like)
    throw InputError("dense model: blocks with " + blocks + ": " + architecture +
                     " has no input norms, RMSNorms on the attention and MLP outputs and q/k norms across heads "
                     "(export as " + default_architecture(c) + ")");
  if (!olmo && olmo_like)
    throw InputError(std::string("dense model: an OLMo-layout model (output norms only, q/k norms across heads): "
                                 "export as ") +
                     (c.attention == "sliding" ? "Olmo3ForCausalLM (--arch olmo3)"
                                               : "Olmo2ForCausalLM or Olmo3ForCausalLM (--arch olmo2 | olmo3)"));
  if (olmo) {
    if (c.activation != "silu" || c.scale_embeddings || c.rope_local_theta > 0 || c.attn_logit_softcap > 0 ||
        c.final_logit_softcap > 0)
      throw InputError("dense model: activation \"" + c.activation +
                       "\" with Gemma's embedding scale, soft-capping or local RoPE: " + architecture +
                       " has none of them (no Hugging Face architecture has them with OLMo's blocks)");
    if (c.qkv_bias)
      throw InputError("dense model: qkv_bias = true: " + architecture +
                       "'s attention_bias adds an o_proj bias too (no Hugging Face architecture has q/k/v biases "
                       "with OLMo's blocks)");
  } else if (gemma) {
    check_gemma_layout(c, architecture);
  } else if (c.activation != "silu" || c.sandwich_norm || c.scale_embeddings || c.full_attention_interval > 0 ||
             c.rope_local_theta > 0 || c.attn_logit_softcap > 0 || c.final_logit_softcap > 0) {
    const std::string def = default_architecture(c);
    throw InputError("dense model: a Gemma-layout model (activation \"" + c.activation + "\", sandwich_norm " +
                     (c.sandwich_norm ? "true" : "false") + ", scale_embeddings " +
                     (c.scale_embeddings ? "true" : "false") + "): " + architecture + " has none of it (" +
                     (is_gemma_architecture(def) ? "export as " + def
                                                 : std::string("no Hugging Face architecture has these blocks without "
                                                               "Gemma's embedding scale")) +
                     ")");
  }
  // Sliding layers export where the architecture has them: Mistral (every layer) and
  // Qwen2 / Qwen3 (layers >= max_window_layers); full ones after them have no field.
  if (gemma && c.attention != "strided") {
    // check_gemma_layout decided
  } else if (c.attention == "sliding" && architecture == kOlmo3Arch) {
    if (c.n_full_coda > 0)
      throw InputError("dense model: n_full_coda = " + std::to_string(c.n_full_coda) + ": lol reads " + architecture +
                       "'s layer_types as full layers first, then sliding ones of which every P-th is full; trailing "
                       "full layers are not written");
  } else if (c.attention == "sliding" && architecture == kOlmo2Arch) {
    throw InputError("dense model: attention \"sliding\" (window " + std::to_string(c.window) + "): " + architecture +
                     " has no sliding window (export as " + kOlmo3Arch + ", --arch olmo3)");
  } else if (c.attention == "sliding") {
    if (architecture == kLlamaArch || architecture == kGraniteArch)
      throw InputError("dense model: attention \"sliding\" (window " + std::to_string(c.window) + "): " + architecture +
                       " has no sliding window (export as " + kMistralArch + ", " + kQwen2Arch + " or " + kQwen3Arch + ")");
    if (c.n_full_coda > 0)
      throw InputError("dense model: n_full_coda = " + std::to_string(c.n_full_coda) +
                       ": Hugging Face configs put full-attention layers before the sliding ones only");
    if ((architecture == kMistralArch || architecture == kPhi3Arch || architecture == kMixtralArch) &&
        c.n_full_prelude > 0)
      throw InputError("dense model: n_full_prelude = " + std::to_string(c.n_full_prelude) + ": " + architecture +
                       " slides every layer (export as " + kQwen2Arch + " or " + kQwen3Arch + ": max_window_layers)");
  } else if (c.attention != "full") {
    throw InputError("dense model: attention \"" + c.attention + "\" (window " + std::to_string(c.window) +
                     "): Hugging Face " + architecture + " models use full causal or sliding-window attention");
  }
  if (architecture != kQwen2Arch && architecture != kQwen2MoeArch && c.qkv_bias)
    throw InputError("dense model: qkv_bias = true: " + architecture + " has no q/k/v-only biases (export as " +
                     std::string(c.n_experts > 0 ? kQwen2MoeArch : kQwen2Arch) + ")");
  if (architecture == kQwen3Arch && !c.qk_norm)  // (Qwen3-MoE: check_moe_layout)
    throw InputError("dense model: qk_norm = false: " + std::string(kQwen3Arch) +
                     " always normalizes q and k (export as " + kQwen2Arch + " or " + kLlamaArch + ")");
  if (architecture != kQwen3Arch && architecture != kQwen3MoeArch && !olmo && !olmoe && !gemma && c.qk_norm)
    throw InputError("dense model: qk_norm = true: " + architecture + " has no q_norm / k_norm (export as " +
                     std::string(kQwen3Arch) + ")");
  if (architecture != kPhi3Arch && (c.partial_rotary_factor != 1.0 || c.rope_scaling.type == "longrope"))
    throw InputError("dense model: " +
                     (c.partial_rotary_factor != 1.0 ? "partial_rotary_factor " + std::to_string(c.partial_rotary_factor)
                                                     : std::string("rope_scaling \"longrope\"")) +
                     ": Hugging Face models compute it as Phi-3 only (export as " + kPhi3Arch + ")");
  if (c.rope_scaling.type == "longrope" &&
      (c.rope_scaling.attention_factor ||
       c.rope_scaling.factor != double(c.max_seq_len) / double(c.rope_scaling.original_max_position_embeddings)))
    throw InputError("dense model: rope_scaling \"longrope\" with factor " + std::to_string(c.rope_scaling.factor) +
                     (c.rope_scaling.attention_factor ? " and an attention_factor" : "") +
                     ": Phi3Config derives the factor as max_seq_len / original_max_position_embeddings = " +
                     std::to_string(double(c.max_seq_len) / double(c.rope_scaling.original_max_position_embeddings)) +
                     " and has no attention_factor");
  HfConfig h = sized_config(c, architecture, torch_dtype);
  h.rope_theta = c.rope_theta;
  h.rope_scaling = c.rope_scaling;
  h.partial_rotary_factor = c.partial_rotary_factor;
  // Qwen2 and Qwen2-MoE always have them (zeros when the model has none)
  h.qkv_bias = architecture == kQwen2Arch || architecture == kQwen2MoeArch;
  h.qk_norm = c.qk_norm;
  h.qk_norm_across_heads = c.qk_norm_across_heads;
  h.sandwich_norm = c.sandwich_norm;
  h.input_norms = c.input_norms;
  if (c.attention == "sliding" && exported_sliding(c, architecture) && c.n_full_prelude < c.n_layers) {
    h.sliding_window = c.window;
    h.full_attention_layers = c.n_full_prelude;
    if (architecture == kOlmo3Arch || gemma) h.full_attention_interval = c.full_attention_interval;
  }
  if (gemma) {
    h.activation = c.activation;
    h.norm_offset = h.scale_embeddings = true;  // the weights are written as w - 1 (hf_export)
    h.attn_logit_softcapping = c.attn_logit_softcap;
    h.final_logit_softcapping = c.final_logit_softcap;
    // The loaded model's scale (hf_export unfolds the queries' weights), else hd's.
    if (architecture != kGemmaArch)
      h.query_pre_attn_scalar = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : double(h.head_dim);
    // Gemma 3's sliding layers: their own RoPE base, or the full layers' (unscaled: checked).
    if (architecture == kGemma3Arch) h.rope_local_theta = c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta;
  }
  if (c.n_experts > 0) {
    h.num_experts = c.n_experts;
    h.num_experts_per_tok = c.top_k;
    h.norm_topk_prob = c.normalize_top_k;
    if (architecture == kQwen3MoeArch || architecture == kQwen2MoeArch) {
      h.shared_expert_intermediate_size = c.shared_expert_ffn_hidden;
      h.moe_intermediate_size = c.effective_expert_ffn();
      h.decoder_sparse_step = c.moe_layer_step;
      h.mlp_only_layers = c.dense_ffn_layers;
    } else {
      h.intermediate_size = c.effective_expert_ffn();  // (Mixtral, OLMoE: the experts' width)
    }
  }
  if (architecture == kGraniteArch) {
    h.embedding_multiplier = c.embedding_multiplier;
    h.logits_scaling = c.logits_scaling;
    h.residual_multiplier = c.residual_multiplier;  // hf_export divides o_proj / down_proj by it
    // The loaded model's scale as it was read, else the one its q_proj computes with
    // (hf_export divides q_proj by query_fold()).
    h.attention_multiplier = c.attention_multiplier > 0
                                 ? c.attention_multiplier
                                 : c.query_fold() / std::sqrt(double(c.effective_head_dim()));
  }
  return h;
}

c10::ScalarType parse_dtype_name(const std::string& name, const std::string& flag) {
  if (name == "float32" || name == "float" || name == "fp32") return c10::kFloat;
  if (name == "bfloat16" || name == "bf16") return c10::kBFloat16;
  if (name == "float16" || name == "half" || name == "fp16") return c10::kHalf;
  if (name == "float64" || name == "double") return c10::kDouble;
  throw InputError(flag + " \"" + name + "\": expected float32, bfloat16, float16 or float64");
}

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kBFloat16: return "bfloat16";
    case c10::kHalf: return "float16";
    case c10::kDouble: return "float64";
    default: return c10::toString(t);
  }
}

const std::vector<FusedWeight>& phi3_fused_weights() {
  static const std::vector<FusedWeight> kFused = {
      {"self_attn.qkv_proj.weight", {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
      {"mlp.gate_up_proj.weight", {"mlp.gate_proj.weight", "mlp.up_proj.weight"}}};
  return kFused;
}

std::string gpt2_stored_name(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> parts = {
      {"model.embed_tokens.weight", "wte.weight"},   {"model.embed_positions.weight", "wpe.weight"},
      {"model.norm.", "ln_f."},                      {"input_layernorm.", "ln_1."},
      {"post_attention_layernorm.", "ln_2."},        {"self_attn.o_proj.", "attn.c_proj."},
      {"mlp.up_proj.", "mlp.c_fc."},                 {"mlp.down_proj.", "mlp.c_proj."},
      {"self_attn.q_proj.", "attn.c_attn."},         {"self_attn.k_proj.", "attn.c_attn."},
      {"self_attn.v_proj.", "attn.c_attn."}};
  std::string out = name;
  if (out.rfind("model.layers.", 0) == 0) out = "h." + out.substr(13);
  for (const auto& [from, to] : parts)
    if (auto at = out.find(from); at != std::string::npos) out = out.substr(0, at) + to + out.substr(at + from.size());
  return out;
}

namespace {

using NameParts = std::vector<std::pair<std::string, std::string>>;

/// The dense model's names and GPT-NeoX's, one pair per part of a name (gpt_neox_stored_name).
const NameParts& gpt_neox_parts() {
  static const NameParts parts = {
      {"model.embed_tokens.weight", "gpt_neox.embed_in.weight"},
      {"lm_head.weight", "embed_out.weight"},
      {"model.norm.", "gpt_neox.final_layer_norm."},
      {"model.layers.", "gpt_neox.layers."},
      {"self_attn.o_proj.", "attention.dense."},
      {"mlp.up_proj.", "mlp.dense_h_to_4h."},
      {"mlp.down_proj.", "mlp.dense_4h_to_h."}};
  return parts;
}

/// The dense model's names and Phi's (phi_stored_name).
const NameParts& phi_parts() {
  static const NameParts parts = {{"model.norm.", "model.final_layernorm."},
                                  {"self_attn.o_proj.", "self_attn.dense."},
                                  {"mlp.up_proj.", "mlp.fc1."},
                                  {"mlp.down_proj.", "mlp.fc2."}};
  return parts;
}

/// `name` with each `from` part replaced by its `to` (at most once each): the dense
/// model's parts by the stored ones (`forward`) or back.
std::string replace_parts(std::string name, const NameParts& parts, bool forward) {
  for (const auto& [dense, stored] : parts) {
    const std::string& from = forward ? dense : stored;
    const std::string& to = forward ? stored : dense;
    if (auto at = name.find(from); at != std::string::npos) name = name.substr(0, at) + to + name.substr(at + from.size());
  }
  return name;
}

}  // namespace

std::string gpt_neox_stored_name(const std::string& name) {
  std::string out = name;
  for (const char* proj : {"self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj."})
    if (auto at = out.find(proj); at != std::string::npos)
      out = out.substr(0, at) + "attention.query_key_value." + out.substr(at + std::string(proj).size());
  return replace_parts(out, gpt_neox_parts(), true);
}

std::string phi_stored_name(const std::string& name) { return replace_parts(name, phi_parts(), true); }

std::string phi_parameter_name(const std::string& name) {
  const std::string out = replace_parts(name, phi_parts(), false);
  return phi_stored_name(out) == name ? out : "";  // (the dense model's own names are not Phi's)
}

std::string gpt_neox_parameter_name(const std::string& name) {
  if (name.rfind("gpt_neox.", 0) != 0 && name != "embed_out.weight") return "";
  const std::string out = replace_parts(name, gpt_neox_parts(), false);
  if (auto at = out.find("attention.query_key_value."); at != std::string::npos)
    return out.substr(0, at) + "self_attn.";
  return (out.rfind("model.", 0) == 0 || out == "lm_head.weight") && gpt_neox_stored_name(out) == name ? out : "";
}

namespace {

/// The dense model's names and GPT-J's (gptj_stored_name); dots keep ".attn." apart from
/// ".self_attn.".
const NameParts& gptj_parts() {
  static const NameParts parts = {{"model.embed_tokens.weight", "transformer.wte.weight"},
                                  {"model.norm.", "transformer.ln_f."},
                                  {"model.layers.", "transformer.h."},
                                  {".input_layernorm.", ".ln_1."},
                                  {".self_attn.o_proj.", ".attn.out_proj."},
                                  {".self_attn.", ".attn."},
                                  {".mlp.up_proj.", ".mlp.fc_in."},
                                  {".mlp.down_proj.", ".mlp.fc_out."}};
  return parts;
}

}  // namespace

namespace {

/// The dense model's names and StarCoder2's (starcoder2_stored_name).
const NameParts& starcoder2_parts() {
  static const NameParts parts = {{".mlp.up_proj.", ".mlp.c_fc."}, {".mlp.down_proj.", ".mlp.c_proj."}};
  return parts;
}

}  // namespace

std::string starcoder2_stored_name(const std::string& name) { return replace_parts(name, starcoder2_parts(), true); }

std::string starcoder2_parameter_name(const std::string& name) {
  const std::string out = replace_parts(name, starcoder2_parts(), false);
  return starcoder2_stored_name(out) == name ? out : "";
}

std::string gptj_stored_name(const std::string& name) { return replace_parts(name, gptj_parts(), true); }

namespace {

/// The dense model's names and Mixtral's (mixtral_stored_name).
const NameParts& mixtral_parts() {
  static const NameParts parts = {{".mlp.gate.", ".block_sparse_moe.gate."},
                                  {".mlp.experts.", ".block_sparse_moe.experts."},
                                  {".gate_proj.", ".w1."},
                                  {".down_proj.", ".w2."},
                                  {".up_proj.", ".w3."}};
  return parts;
}

}  // namespace

std::string mixtral_stored_name(const std::string& name) { return replace_parts(name, mixtral_parts(), true); }

std::string mixtral_parameter_name(const std::string& stored) {
  const std::string out = replace_parts(stored, mixtral_parts(), false);
  return mixtral_stored_name(out) == stored ? out : "";
}

namespace {

/// The dense model's names and OPT's (opt_stored_name): the final norm before the layers'
/// prefix, the layer's post_attention_layernorm after it (both are "final_layer_norm").
const NameParts& opt_parts() {
  static const NameParts parts = {{"model.embed_tokens.", "model.decoder.embed_tokens."},
                                  {"model.embed_positions.", "model.decoder.embed_positions."},
                                  {"model.norm.", "model.decoder.final_layer_norm."},
                                  {"model.layers.", "model.decoder.layers."},
                                  {".input_layernorm.", ".self_attn_layer_norm."},
                                  {".post_attention_layernorm.", ".final_layer_norm."},
                                  {".self_attn.o_proj.", ".self_attn.out_proj."},
                                  {".mlp.up_proj.", ".fc1."},
                                  {".mlp.down_proj.", ".fc2."}};
  return parts;
}

}  // namespace

std::string opt_stored_name(const std::string& name) { return replace_parts(name, opt_parts(), true); }

std::string opt_parameter_name(const std::string& stored) {
  // OPTModel's state dict (older files) lacks OPTForCausalLM's "model." prefix.
  const std::string name = stored.rfind("decoder.", 0) == 0 ? "model." + stored : stored;
  const std::string out = replace_parts(name, opt_parts(), false);
  return (out.rfind("model.", 0) == 0 || out == "lm_head.weight") && opt_stored_name(out) == name ? out : "";
}

std::string gptj_parameter_name(const std::string& name) {
  const std::string out = replace_parts(name, gptj_parts(), false);
  return (out.rfind("model.", 0) == 0 || out.rfind("lm_head.", 0) == 0) && gptj_stored_name(out) == name ? out : "";
}

double granite_parameter_fold(const baselines::DenseConfig& c, const std::string& name) {
  for (const char* target : {"q_proj", "o_proj", "down_proj"})
    if (ends_with(name, std::string(target) + ".weight") || ends_with(name, std::string(target) + ".bias"))
      return c.weight_fold(target);
  return 1.0;
}

torch::Tensor gptj_rotary_rows(const torch::Tensor& w, int64_t heads, int64_t head_dim, int64_t rotary_dim, bool inverse) {
  std::vector<int64_t> perm(size_t(heads * head_dim));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t base = h * head_dim;
    for (int64_t i = 0; i < head_dim; ++i) perm[size_t(base + i)] = base + i;
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
      perm[size_t(base + i)] = base + 2 * i;
      perm[size_t(base + rotary_dim / 2 + i)] = base + 2 * i + 1;
    }
  }
  if (inverse) {
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
    perm = inv;
  }
  return w.index_select(0, torch::tensor(perm, torch::kInt64).to(w.device()));
}

torch::Tensor split_grouped_qkv(const torch::Tensor& fused, int64_t kv_heads, int64_t group, int64_t head_dim) {
  const int64_t rows = kv_heads * (group + 2) * head_dim;
  if (fused.dim() < 1 || fused.size(0) != rows)
    throw InputError("query_key_value: " + std::to_string(fused.dim() ? fused.size(0) : 0) +
                     " rows, expected (H + 2 Hkv) hd = " + std::to_string(rows));
  std::vector<int64_t> grouped = {kv_heads, group + 2, head_dim}, q_rows = {kv_heads * group * head_dim},
                       kv_rows = {kv_heads * head_dim};
  for (int64_t i = 1; i < fused.dim(); ++i) {
    grouped.push_back(fused.size(i));
    q_rows.push_back(fused.size(i));
    kv_rows.push_back(fused.size(i));
  }
  const auto g = fused.reshape(grouped);  // [Hkv, G + 2, hd, ...]
  return torch::cat({g.narrow(1, 0, group).reshape(q_rows), g.select(1, group).reshape(kv_rows),
                     g.select(1, group + 1).reshape(kv_rows)},
                    0);
}

torch::Tensor fuse_grouped_qkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t kv_heads,
                               int64_t group, int64_t head_dim) {
  std::vector<int64_t> qs = {kv_heads, group, head_dim}, kvs = {kv_heads, 1, head_dim};
  for (int64_t i = 1; i < q.dim(); ++i) {
    qs.push_back(q.size(i));
    kvs.push_back(q.size(i));
  }
  auto rows = q.sizes().vec();
  rows[0] = kv_heads * (group + 2) * head_dim;
  return torch::cat({q.reshape(qs), k.reshape(kvs), v.reshape(kvs)}, 1).reshape(rows);  // [Hkv, G + 2, hd, ...]
}

namespace {

/// The dense model's names and Falcon's (falcon_stored_name); the norms of two-norm blocks.
const NameParts& falcon_parts() {
  static const NameParts parts = {{"model.embed_tokens.weight", "transformer.word_embeddings.weight"},
                                  {"model.norm.", "transformer.ln_f."},
                                  {"model.layers.", "transformer.h."},
                                  {"self_attn.o_proj.", "self_attention.dense."},
                                  {"mlp.up_proj.", "mlp.dense_h_to_4h."},
                                  {"mlp.down_proj.", "mlp.dense_4h_to_h."}};
  return parts;
}
const NameParts& falcon_norm_parts() {
  static const NameParts parts = {{"input_layernorm.", "ln_attn."}, {"post_attention_layernorm.", "ln_mlp."}};
  return parts;
}

}  // namespace

std::string falcon_stored_name(const std::string& name, bool two_norms) {
  std::string out = name;
  for (const char* proj : {"self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj."})
    if (auto at = out.find(proj); at != std::string::npos)
      out = out.substr(0, at) + "self_attention.query_key_value." + out.substr(at + std::string(proj).size());
  out = replace_parts(out, falcon_parts(), true);
  return two_norms ? replace_parts(out, falcon_norm_parts(), true) : out;
}

std::string falcon_parameter_name(const std::string& name, bool two_norms) {
  std::string out = replace_parts(name, falcon_parts(), false);
  if (two_norms) out = replace_parts(out, falcon_norm_parts(), false);
  if (out.rfind("model.", 0) != 0 && out != "lm_head.weight") return "";
  if (auto at = out.find("self_attention.query_key_value."); at != std::string::npos) {
    const std::string layer = out.substr(0, at) + "self_attn.";
    const std::string suffix = out.substr(at + std::string("self_attention.query_key_value.").size());
    return falcon_stored_name(layer + "q_proj." + suffix, two_norms) == name ? layer : "";
  }
  return falcon_stored_name(out, two_norms) == name ? out : "";
}

namespace {

// The fused weight stored as `name` ("model.layers.3.self_attn.qkv_proj.weight"), or null.
const FusedWeight* fused_weight(const std::string& name) {
  for (const auto& fw : phi3_fused_weights())
    if (ends_with(name, fw.fused)) return &fw;
  return nullptr;
}

// The fused weight that holds parameter `name` ("model.layers.3.self_attn.k_proj.weight"), or null.
const FusedWeight* fused_holder(const std::string& name) {
  for (const auto& fw : phi3_fused_weights())
    for (const auto& p : fw.parts)
      if (ends_with(name, p)) return &fw;
  return nullptr;
}

/// Gemma stores every RMSNorm weight w for x_normalized (1 + w) (GemmaRMSNorm,
/// Gemma3RMSNorm: 1 + w in float32): the dense model holds 1 + w, computed in the compute
/// dtype. Gemma 2/3's attention scale query_pre_attn_scalar^-1/2 (instead of hd^-1/2) is
/// folded into the queries (RoPE is linear; soft-capping follows the scaling): into
/// q_norm, whose output they are (Gemma 3), else into q_proj (Gemma 2):
/// weight *= sqrt(hd / query_pre_attn_scalar).
/// Granite's attention_multiplier and residual_multiplier, folded into the weights whose
/// outputs they scale (the same function; RoPE is linear): q_proj *= attention_multiplier *
/// sqrt(head_dim) (the dense model scales by head_dim^-1/2), o_proj and down_proj *=
/// residual_multiplier; computed in float64, stored in the model's dtype.
void granite_weights_to_dense(std::map<std::string, torch::Tensor>& params, const HfConfig& cfg) {
  if (!cfg.is_granite()) return;
  const auto dense = to_dense_config(cfg);
  for (auto& [name, p] : params)
    if (const double f = granite_parameter_fold(dense, name); f != 1.0)
      p.copy_((p.to(torch::kFloat64) * f).to(p.scalar_type()));
}

void gemma_weights_to_dense(std::map<std::string, torch::Tensor>& params, const HfConfig& cfg) {
  if (!cfg.norm_offset) return;
  const double q_scale = cfg.query_pre_attn_scalar > 0 ? std::sqrt(double(cfg.head_dim) / cfg.query_pre_attn_scalar) : 1.0;
  const std::string scaled = cfg.qk_norm ? "self_attn.q_norm.weight" : "self_attn.q_proj.weight";
  for (auto& [name, p] : params) {
    if (ends_with(name, "norm.weight")) p.add_(1.0);
    if (q_scale != 1.0 && ends_with(name, scaled)) p.mul_(q_scale);
  }
}

/// GPT2LMHeadModel's tensor `name` (without "transformer.") as the dense model's:
/// `to` the parameter (or, for c_attn, the layer's prefix "model.layers.{i}.self_attn."
/// with split set), `transpose` for Conv1D weights (stored [in, out]). nullopt: a name
/// GPT-2 does not have (refused as unexpected).
struct Gpt2Name {
  std::string to;
  bool transpose = false, split = false;
};
std::optional<Gpt2Name> gpt2_name(const std::string& name) {
  static const std::map<std::string, std::string> top = {{"wte.weight", "model.embed_tokens.weight"},
                                                         {"wpe.weight", "model.embed_positions.weight"},
                                                         {"ln_f.weight", "model.norm.weight"},
                                                         {"ln_f.bias", "model.norm.bias"},
                                                         {"lm_head.weight", "lm_head.weight"}};
  if (auto it = top.find(name); it != top.end()) return Gpt2Name{it->second};
  if (name.rfind("h.", 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return std::nullopt;
  const std::string layer = name.substr(2, dot - 2), rest = name.substr(dot + 1);
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const std::string p = "model.layers." + layer + ".";
  static const std::map<std::string, std::pair<std::string, bool>> in_layer = {
      {"ln_1.weight", {"input_layernorm.weight", false}},       {"ln_1.bias", {"input_layernorm.bias", false}},
      {"ln_2.weight", {"post_attention_layernorm.weight", false}}, {"ln_2.bias", {"post_attention_layernorm.bias", false}},
      {"attn.c_proj.weight", {"self_attn.o_proj.weight", true}},  {"attn.c_proj.bias", {"self_attn.o_proj.bias", false}},
      {"mlp.c_fc.weight", {"mlp.up_proj.weight", true}},          {"mlp.c_fc.bias", {"mlp.up_proj.bias", false}},
      {"mlp.c_proj.weight", {"mlp.down_proj.weight", true}},      {"mlp.c_proj.bias", {"mlp.down_proj.bias", false}}};
  if (auto it = in_layer.find(rest); it != in_layer.end()) return Gpt2Name{p + it->second.first, it->second.second};
  if (rest == "attn.c_attn.weight") return Gpt2Name{p + "self_attn.", true, true};
  if (rest == "attn.c_attn.bias") return Gpt2Name{p + "self_attn.", false, true};
  return std::nullopt;
}


/// A Gemma3ForConditionalGeneration tensor's name in the text model: "language_model.model.X"
/// (the Hub's files) or "model.language_model.X" (saved by transformers >= 4.52) -> "model.X",
/// "language_model.lm_head.weight" -> "lm_head.weight"; nullopt for the vision tower and the
/// multimodal projector (not loaded); other names unchanged (refused later as unexpected).
std::optional<std::string> multimodal_text_name(const std::string& name) {
  for (const char* skip : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."})
    if (name.rfind(skip, 0) == 0) return std::nullopt;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"language_model.model.", "model."},
                                 {"model.language_model.", "model."},
                                 {"language_model.lm_head.", "lm_head."}})
    if (name.rfind(from, 0) == 0) return to + name.substr(from.size());
  return name;
}

}  // namespace

namespace {

/// Falcon's parallel blocks with ln_attn and ln_mlp (not one shared input_layernorm).
bool falcon_two_norms(const HfConfig& cfg) { return cfg.parallel_residual && !cfg.shared_input_norm; }

/// The name `cfg`'s files store the dense model's parameter `name` under (q/k/v of the GPT
/// family and Falcon: the fused tensor's); `gpt2_prefix`: "transformer." when the GPT-2
/// file's names carry it.
std::string stored_name(const HfConfig& cfg, const std::string& name, const std::string& gpt2_prefix) {
  if (cfg.is_gpt2() || cfg.is_gpt_bigcode()) return gpt2_prefix + gpt2_stored_name(name);
  if (cfg.is_gpt_neox()) return gpt_neox_stored_name(name);
  if (cfg.is_phi()) return phi_stored_name(name);
  if (cfg.is_falcon()) return falcon_stored_name(name, falcon_two_norms(cfg));
  if (cfg.is_gptj()) return gptj_stored_name(name);
  if (cfg.is_starcoder2()) return starcoder2_stored_name(name);
  if (cfg.is_opt()) return opt_stored_name(name);
  if (cfg.is_mixtral()) return mixtral_stored_name(name);
  return name;
}

}  // namespace

void load_hf_weights(baselines::DenseModelImpl& m, const HfConfig& cfg, const WeightFiles& files) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> params;
  for (auto& p : m.named_parameters()) params[p.key()] = p.value();
  std::map<std::string, std::string> loaded;  // name -> file it came from
  std::string gpt2_prefix;                    // "transformer." when the GPT-2 file's names carry it
  torch::Tensor stored_head;                  // lm_head.weight of a tied checkpoint, if any
  std::string stored_head_file, stored_head_name;
  for_each_weight(files, [&](const io::SafetensorsFile& f, const io::TensorEntry& stored) {
    const std::string w = f.path() + ": tensor '" + stored.name + "'";
    if (is_rotary_buffer(stored.name)) return;
    // A tensor with no parameter of this model (e.g. biases the architecture lacks).
    const auto unexpected = [&] {
      return InputError(w + ": unexpected tensor (not a parameter of " + cfg.architecture + " with " +
                        std::to_string(cfg.num_hidden_layers) + " layers" + (cfg.qkv_bias ? "" : ", no q/k/v biases") +
                        ")");
    };
    // Records that `name` was read from this file; a second copy of it is refused.
    const auto claim = [&](const std::string& name) {
      if (loaded.count(name)) throw InputError(w + ": also stored in " + loaded[name]);
      loaded[name] = f.path();
    };
    io::TensorEntry e = stored;
    if (cfg.multimodal_text) {  // the language model's tensors under their text-model names
      const auto text = multimodal_text_name(stored.name);
      if (!text) return;  // the vision tower and the projector
      e.name = *text;
    }
    // GPT-2's causal-mask buffers of older files (attn.bias [1, 1, n, n], attn.masked_bias),
    // stored as float, bool or uint8: not parameters, skipped whatever their dtype.
    if ((cfg.is_gpt2() || cfg.is_gpt_bigcode()) &&
        (ends_with(e.name, ".attn.bias") || ends_with(e.name, ".attn.masked_bias") || e.name == "transformer.bias" ||
         e.name == "bias"))
      return;  // (GPT-BigCode's: the model-level causal mask "bias" of older files)
    if (cfg.is_gpt_neox() && (ends_with(e.name, ".attention.bias") || ends_with(e.name, ".attention.masked_bias")))
      return;  // (GPT-NeoX's, likewise)
    if (cfg.is_gptj() && (ends_with(e.name, ".attn.bias") || ends_with(e.name, ".attn.masked_bias") ||
                          ends_with(e.name, ".attn.embed_positions")))
      return;  // (GPT-J's causal-mask and sin / cos buffers of older files)
    const bool float_type = e.dtype == io::DType::F32 || e.dtype == io::DType::BF16 || e.dtype == io::DType::F16 ||
                            e.dtype == io::DType::F64;
    if (!float_type) throw InputError(w + ": dtype " + io::dtype_name(e.dtype) + ": expected F32, BF16, F16 or F64");
    // Converted to the compute dtype before the check: a finite F64 value can overflow it.
    auto read = [&] {
      torch::Tensor t = to_tensor(f, e).to(params.at("model.embed_tokens.weight").scalar_type());
      if (!torch::isfinite(t).all().item<bool>())
        throw InputError(w + ": contains NaN or Inf values (in the compute dtype " +
                         std::string(c10::toString(t.scalar_type())) + ")");
      return t;
    };
    if (cfg.is_phi() || cfg.is_gptj() || cfg.is_starcoder2() || cfg.is_opt() || cfg.is_mixtral()) {  // their own names
      const std::string to = cfg.is_phi()          ? phi_parameter_name(e.name)
                             : cfg.is_gptj()       ? gptj_parameter_name(e.name)
                             : cfg.is_starcoder2() ? starcoder2_parameter_name(e.name)
                             : cfg.is_mixtral()    ? mixtral_parameter_name(e.name)
                                                   : opt_parameter_name(e.name);
      if (to.empty()) throw unexpected();
      e.name = to;
    }
    if (cfg.is_opt() && e.name == "model.embed_positions.weight") {
      // OPT's table has 2 leading rows (its offset: position p reads row p + 2; rows 0
      // and 1 serve padding positions only, which lol never computes): rows 2.. loaded.
      auto& dst = params.at(e.name);
      claim(e.name);
      const torch::Tensor t = read();
      const std::vector<int64_t> want = {dst.size(0) + 2, dst.size(1)};
      if (t.sizes() != c10::IntArrayRef(want))
        throw InputError(w + ": shape " + shape_str(t.sizes()) + ", expected " + shape_str(want) +
                         " from config.json (max_position_embeddings + 2 (OPT's position offset), hidden_size)");
      dst.copy_(t.narrow(0, 2, dst.size(0)));
      return;
    }
    if (cfg.is_gpt2() || cfg.is_gpt_bigcode() || cfg.is_gpt_neox() || cfg.is_falcon()) {
      // The GPT family's names: GPT-2's (with or without GPT2LMHeadModel's "transformer."
      // prefix; Conv1D weights stored [in, out]), GPT-NeoX's or Falcon's; q/k/v stored as
      // one tensor (c_attn: q rows, then k, then v; query_key_value: per head for GPT-NeoX,
      // per key/value group for Falcon).
      std::string n = e.name;
      std::optional<Gpt2Name> g;
      if (cfg.is_gpt2() || cfg.is_gpt_bigcode()) {
        const bool prefixed = e.name.rfind("transformer.", 0) == 0;
        if (prefixed) {
          gpt2_prefix = "transformer.";
          n = e.name.substr(12);
        }
        g = gpt2_name(n);
        if (g && cfg.is_gpt_bigcode()) g->transpose = false;  // (nn.Linear: stored [out, in])
      } else if (const std::string to = cfg.is_falcon() ? falcon_parameter_name(n, falcon_two_norms(cfg))
                                                         : gpt_neox_parameter_name(n);
                 !to.empty()) {
        g = Gpt2Name{to, false, ends_with(to, "self_attn.")};
      } else {
        throw unexpected();
      }
      if (g && g->split) {
        const bool weight = ends_with(n, ".weight");
        const std::string suffix = weight ? ".weight" : ".bias";
        if (!params.count(g->to + "q_proj" + suffix)) throw unexpected();
        claim(e.name);
        const torch::Tensor t = read();
        const int64_t d = cfg.hidden_size, kv = cfg.num_key_value_heads, fused_rows = (cfg.num_attention_heads + 2 * kv) * cfg.head_dim;
        std::vector<int64_t> want = {fused_rows};
        if (weight) want = cfg.is_gpt2() ? std::vector<int64_t>{d, fused_rows} : std::vector<int64_t>{fused_rows, d};
        if (t.sizes() != c10::IntArrayRef(want))
          throw InputError(w + ": shape " + shape_str(t.sizes()) + ", expected " + shape_str(want) + " from config.json (" +
                           (cfg.is_gpt2()     ? std::string("n_embd") + (weight ? ", 3 n_embd: Conv1D [in, out]" : " times 3")
                            : cfg.is_gpt_bigcode() ? std::string(kv == 1 ? "n_embd + 2 head_dim (multi_query)" : "3 n_embd") +
                                                         (weight ? ", n_embd" : "")
                            : cfg.is_falcon() ? std::string("(num_attention_heads + 2 key/value heads) head_dim") +
                                                    (weight ? ", hidden_size" : "") + "; key/value heads " +
                                                    std::to_string(kv) + " from new_decoder_architecture, multi_query and num_kv_heads"
                                              : std::string("3 hidden_size") + (weight ? ", hidden_size" : "")) +
                           ")");
        // [q; k; v] rows: GPT-2's as stored; GPT-NeoX's per head and Falcon's per group reordered
        const auto rows = cfg.is_gpt2() ? (weight ? t.t() : t)
                                        : split_grouped_qkv(t, kv, cfg.num_attention_heads / kv, cfg.head_dim);
        int64_t at = 0;
        for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
          auto& dst = params.at(g->to + proj + suffix);
          dst.copy_(rows.narrow(0, at, dst.size(0)));
          at += dst.size(0);
          loaded[g->to + proj + suffix] = f.path();
        }
        return;
      }
      if (g) {
        e.name = g->to;
        if (g->transpose) {  // checked and copied as [out, in]
          auto it = params.find(e.name);
          if (it == params.end()) throw unexpected();
          claim(e.name);
          const torch::Tensor t = read();
          const std::vector<int64_t> want = it->second.t().sizes().vec();  // (a copy: t() is a temporary)
          if (t.sizes() != c10::IntArrayRef(want))
            throw InputError(w + ": shape " + shape_str(t.sizes()) + ", expected " + shape_str(want) +
                             " from config.json (n_embd, n_inner: Conv1D weights are stored [in, out])");
          it->second.copy_(t.t());
          return;
        }
      }
    }
    if (cfg.is_phi3()) {
      // Phi3ForCausalLM has no separate projections: transformers would ignore them and
      // leave the fused matrix random.
      if (fused_holder(e.name))
        throw InputError(w + ": unexpected tensor (" + cfg.architecture +
                         " stores self_attn.qkv_proj and mlp.gate_up_proj, fused; separate projections are "
                         "Llama's layout: set architectures to LlamaForCausalLM)");
      // The fused projections: the rows of q, k, v (gate, up) one after the other.
      if (const FusedWeight* fw = fused_weight(e.name)) {
        const std::string layer = e.name.substr(0, e.name.size() - fw->fused.size());
        if (params.count(layer + fw->parts[0])) {
          claim(e.name);
          const torch::Tensor t = read();
          int64_t rows = 0;
          for (const auto& p : fw->parts) rows += params.at(layer + p).size(0);
          const std::vector<int64_t> want = {rows, params.at(layer + fw->parts[0]).size(1)};
          if (t.sizes() != c10::IntArrayRef(want))
            throw InputError(w + ": shape " + shape_str(t.sizes()) + ", expected " + shape_str(want) +
                             " from config.json (" +
                             (fw->parts.size() == 3 ? "(num_attention_heads + 2 num_key_value_heads) head_dim, hidden_size"
                                                    : "2 intermediate_size, hidden_size") +
                             ")");
          int64_t at = 0;
          for (const auto& p : fw->parts) {
            auto& dst = params.at(layer + p);
            dst.copy_(t.narrow(0, at, dst.size(0)));
            at += dst.size(0);
            loaded[layer + p] = f.path();
          }
          return;
        }
      }
    }
    // (CohereLayerNorm has no bias: the model's LayerNorm biases stay zero, below.)
    if (cfg.is_cohere() && ends_with(e.name, "norm.bias")) throw unexpected();
    auto it = params.find(e.name);
    if (it == params.end() && !(e.name == "lm_head.weight" && cfg.tie_word_embeddings)) throw unexpected();
    claim(e.name);
    const torch::Tensor t = read();
    const auto want = it != params.end() ? it->second.sizes() : params.at("model.embed_tokens.weight").sizes();
    if (t.sizes() != want)
      throw InputError(w + ": shape " + shape_str(t.sizes()) + ", expected " + shape_str(want) +
                       " from config.json (" +
                       (cfg.is_gpt2() || cfg.is_gpt_bigcode() ? std::string("n_embd, n_inner, n_positions, vocab_size")
                                                              : shape_source(e.name, cfg)) +
                       ")");
    if (it == params.end()) {
      stored_head = t;
      stored_head_file = f.path();
      stored_head_name = stored.name;
      return;
    }
    it->second.copy_(t);
  });
  if (cfg.is_cohere())  // LayerNorms without a bias: zero biases compute the same function
    for (auto& [name, p] : params)
      if (ends_with(name, "norm.bias")) {
        p.zero_();
        loaded[name] = "(none: " + cfg.architecture + "'s LayerNorms have no bias)";
      }
  for (const auto& [name, p] : params)
    if (!loaded.count(name)) {
      // Phi-3 stores q/k/v and gate/up fused: name the tensor the folder lacks.
      const FusedWeight* fw = cfg.is_phi3() ? fused_holder(name) : nullptr;
      std::string missing = stored_name(cfg, name, gpt2_prefix);
      if (fw)
        for (const auto& p : fw->parts)
          if (ends_with(name, p)) missing = name.substr(0, name.size() - p.size()) + fw->fused;
      // (GPT-NeoX's query_key_value holds q, k and v: named, as Phi-3's, "fused")
      const bool fused = fw || missing.find("query_key_value") != std::string::npos;
      auto shape = cfg.is_gpt2() && ends_with(name, "_proj.weight") ? p.t().sizes().vec() : p.sizes().vec();
      if (cfg.is_opt() && name == "model.embed_positions.weight") shape[0] += 2;  // (OPT's offset rows)
      throw InputError(files.dir + ": missing tensor '" + missing + "'" +
                       (!fused ? " (shape " + shape_str(shape) + ", expected by "
                               : " (fused, expected by ") +
                       cfg.architecture + (cfg.tie_word_embeddings ? ", tied embeddings" : "") + ")" +
                       (cfg.multimodal_text ? " (stored as language_model." + missing + " in a " + kGemma3VisionArch + " folder)"
                                            : std::string()));
    }
  if (stored_head.defined()) {
    const auto emb = params.at("model.embed_tokens.weight");
    if (!torch::equal(stored_head.to(emb.scalar_type()), emb.cpu()))
      throw InputError(stored_head_file + ": tensor '" + stored_head_name + "' differs from " +
                       stored_name(cfg, "model.embed_tokens.weight", gpt2_prefix) +
                       " although config.json has tie_word_embeddings = true");
  }
  gemma_weights_to_dense(params, cfg);
  granite_weights_to_dense(params, cfg);
  if (cfg.is_gptj() || cfg.is_cohere())  // interleaved RoPE pairs -> rotate-half pairs (gptj_rotary_rows)
    for (int64_t i = 0; i < cfg.num_hidden_layers; ++i)
      for (const char* proj : {"q_proj", "k_proj"}) {
        auto& p = params.at("model.layers." + std::to_string(i) + ".self_attn." + proj + ".weight");
        p.copy_(gptj_rotary_rows(p, p.size(0) / cfg.head_dim, cfg.head_dim, cfg.rotary_dim(), false));
      }
}

baselines::DenseModel load_hf_model(const std::string& dir, c10::ScalarType dtype, c10::Device device,
                                    HfConfig* config) {
  const HfConfig cfg = HfConfig::load_dir(dir);
  const WeightFiles files = find_weight_files(dir);
  // Refused before allocating: a config.json that declares more weights than the files
  // can hold (each value takes at least 2 bytes: F16/BF16), or more than this machine's memory.
  const std::string config_path = (fs::path(dir) / "config.json").string();
  uintmax_t stored_bytes = 0;
  for (const auto& shard : files.shards) {
    // A damaged file is named as such before its size is compared with config.json's.
    const std::string path = (fs::path(dir) / shard).string();
    const uintmax_t size = fs::file_size(path);
    unsigned char head[8] = {};
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(head), 8);
    uint64_t header = 0;
    for (int b = 7; b >= 0; --b) header = (header << 8) | head[b];
    if (!in || size < 8 || header > size - 8)
      throw InputError(path + ": not a safetensors file (" +
                       (size < 8 ? std::to_string(size) + " bytes, less than the 8-byte header length"
                                 : "its header length " + std::to_string(header) + " exceeds the file's " +
                                       std::to_string(size) + " bytes") +
                       ")");
    stored_bytes += size;
  }
  const int64_t parameters = parameter_count(cfg);
  const double head = cfg.tie_word_embeddings ? 0.0 : double(cfg.vocab_size) * double(cfg.hidden_size);
  const double needed = 2.0 * (double(parameters) - head);
  if (needed > double(stored_bytes)) {
    char buf[200];
    std::snprintf(buf, sizeof buf, ": declares %.4g parameters besides lm_head, at least %.4g bytes as 16-bit floats, "
                  "but the weight files hold %.4g bytes", needed / 2, needed, double(stored_bytes));
    throw InputError(config_path + buf + " (expected the config.json of these weights: vocab_size " +
                     std::to_string(cfg.vocab_size) + ", hidden_size " + std::to_string(cfg.hidden_size) +
                     ", intermediate_size " + std::to_string(cfg.intermediate_size) + ", num_hidden_layers " +
                     std::to_string(cfg.num_hidden_layers) + ")");
  }
  util::require_fits_in_memory(config_path, "the model's float32 weights", 4.0 * double(parameters));
  baselines::DenseModel m(to_dense_config(cfg));
  m->to(dtype);
  load_hf_weights(*m, cfg, files);
  m->to(device);
  m->eval();
  if (config) *config = cfg;
  return m;
}

}  // namespace lol::hf
