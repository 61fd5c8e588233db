// Configuration of the dense decoder-only baseline (paper 4.2, Appendix B.2): a
// Llama/Qwen2 stack of n_layers pre-norm blocks with full causal, sliding-window or
// strided-window attention (the paper's "vanilla", "sliding window" and "strided"
// dense baselines, Appendix C.5).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baselines/attention_layout.h"
#include "baselines/shape.h"

namespace lol::baselines {

/// config.json of a dense model ("architecture": "dense"). Fields of TransformerShape
/// plus the layer count and the attention pattern.
struct DenseConfig : TransformerShape {
  int64_t n_layers = 0;
  std::string attention = "full";  ///< "full" | "sliding" | "strided"
  int64_t window = 0;              ///< W: sliding window / strided window length (tokens)
  int64_t stride = 0;              ///< S: strided window shift between consecutive strided layers
  /// With "sliding" or "strided": the first n_full_prelude and the last n_full_coda
  /// layers use full attention instead (LoL's prelude/coda layout); strided depth l = 1
  /// is the first layer after them.
  int64_t n_full_prelude = 0, n_full_coda = 0;
  /// With "sliding": layer i (between the full prelude and coda) has full attention when
  /// (i + 1) % full_attention_interval == 0 (Gemma 3's pattern: 6); 0 = never.
  int64_t full_attention_interval = 0;
  /// > 0: the RoPE base of the sliding layers, which then use no rope_scaling (Gemma 3's
  /// rope_local_base_freq, 10000); 0 = every layer uses rope_theta and rope_scaling.
  double rope_local_theta = 0;

  // Gemma-family block and embedding (Hugging Face models; written to config.json only
  // when not default, so a Llama-layout model's file does not change).
  std::string activation = "silu";  ///< the FFN gate activation (nn::activation_from_name)
  bool sandwich_norm = false;       ///< nn::BlockShape::sandwich_norm (Gemma 2/3)
  /// false (with sandwich_norm): only the sandwich's output norms, no input norms
  /// (nn::BlockShape::input_norms; OLMo 2/3). Written only when false.
  bool input_norms = true;
  /// Token embeddings multiplied by sqrt(d_model) rounded to the compute dtype (Gemma's
  /// normalizer / Gemma3TextScaledWordEmbedding); the tied LM head uses the unscaled matrix.
  bool scale_embeddings = false;
  /// > 0: attention logit soft-capping (nn::AttentionShape::softcap; Gemma 2).
  double attn_logit_softcap = 0;
  /// > 0: logits -> final_logit_softcap * tanh(logits / final_logit_softcap) (Gemma 2).
  double final_logit_softcap = 0;
  /// > 0: a Hugging Face Gemma 2/3 model's query_pre_attn_scalar, whose attention scale
  /// query_pre_attn_scalar^-1/2 the loader folded into the queries' weights (times
  /// query_fold(): q_norm for Gemma 3, q_proj for Gemma 2), so the forward never reads it;
  /// LoRA on a folded q_proj (LayerRoute) and export do. 0: nothing folded.
  double query_pre_attn_scalar = 0;
  /// The factor the loader multiplied into the queries' weights: attention_multiplier *
  /// sqrt(head_dim) (Granite), sqrt(head_dim / query_pre_attn_scalar) (Gemma 2/3), or 1
  /// when nothing is folded.
  double query_fold() const;

  // Granite's multipliers (Hugging Face GraniteForCausalLM; written to config.json only
  // when set, docs/hf.md "Granite"):
  /// Token embeddings times it at run time (a float64 scalar, as transformers' Python float;
  /// after Gemma's scale_embeddings when both are set). 1: none.
  double embedding_multiplier = 1.0;
  /// The logits divided by it at run time, before final_logit_softcap (Granite's
  /// logits_scaling). 1: none.
  double logits_scaling = 1.0;
  /// Granite's residual_multiplier (each sublayer's output times it before its residual
  /// add), which the loader folded into o_proj and down_proj (weights and biases), so the
  /// forward never reads it; LoRA on o_proj / down_proj (LayerRoute) and export do. 1: none.
  double residual_multiplier = 1.0;
  /// > 0: the attention scale (Granite's attention_multiplier, instead of head_dim^-1/2),
  /// which the loader folded into q_proj (query_fold()). 0: head_dim^-1/2.
  double attention_multiplier = 0;
  /// The logits multiplied by it at run time, before logits_scaling and the soft cap
  /// (Cohere's logit_scale, written only when not 1). 1: none.
  double logit_scale = 1.0;
  /// Whether any of Granite's multipliers is set (embedding_multiplier, logits_scaling or
  /// residual_multiplier not 1, attention_multiplier > 0).
  bool granite_multipliers() const {
    return embedding_multiplier != 1.0 || logits_scaling != 1.0 || residual_multiplier != 1.0 ||
           attention_multiplier > 0;
  }
  /// The factor folded into `target`'s weight ("q_proj": query_fold() unless the fold sits
  /// in q_norm (Gemma 3's qk_norm); "o_proj", "down_proj": residual_multiplier; else 1).
  double weight_fold(const std::string& target) const;
  /// The share of each head's dimensions that RoPE rotates (Phi-3's partial_rotary_factor,
  /// Phi-4-mini: 0.75): the leading rotary_dim() dimensions; 1 = all. Written only when not 1.
  double partial_rotary_factor = 1.0;

  // GPT-2's block and positions (Hugging Face GPT2LMHeadModel; written only when not default):
  std::string norm = "rmsnorm";    ///< "rmsnorm" | "layernorm" (every norm, the final one too, with a bias)
  std::string mlp = "gated";       ///< "gated" | "plain": down_proj(act(up_proj x)), no gate_proj
  bool o_bias = false;             ///< o_proj has a bias
  bool mlp_bias = false;           ///< the MLP projections have biases
  /// "rope" | "learned": absolute position embeddings model.embed_positions.weight
  /// [max_seq_len, d_model] added to the token embeddings, and no rotary embedding.
  std::string positions = "rope";
  bool learned_positions() const { return positions == "learned"; }
  /// GPT-NeoX's parallel blocks (Pythia; nn::BlockShape::parallel_residual): the FFN reads
  /// the block input through post_attention_layernorm, y = x + attn(ln1 x) + mlp(ln2 x).
  /// Written only when true.
  bool parallel_residual = false;
  /// Phi-1/1.5/2's parallel blocks (nn::BlockShape::shared_input_norm): one input_layernorm
  /// for the attention and the FFN, y = x + attn(ln x) + mlp(ln x); needs parallel_residual.
  /// Written only when true.
  bool shared_input_norm = false;
  /// lm_head has a bias [vocab_size] (Phi); needs untied embeddings. Written only when true.
  bool lm_head_bias = false;
  /// Whether any of GPT-2's / GPT-NeoX's / Phi's switches is set (norm, mlp, o_bias,
  /// mlp_bias, positions, parallel_residual, shared_input_norm, lm_head_bias): blocks no
  /// Llama-family architecture has.
  bool gpt2_blocks() const {
    return norm != "rmsnorm" || mlp != "gated" || o_bias || mlp_bias || learned_positions() || parallel_residual ||
           shared_input_norm || lm_head_bias;
  }

  // Mixture-of-experts FFNs (Hugging Face MixtralForCausalLM, OlmoeForCausalLM,
  // Qwen2MoeForCausalLM, Qwen3MoeForCausalLM; docs/hf.md "Mixture-of-experts models"; written only when
  // n_experts > 0). An MoE layer's FFN is nn::SparseMoE: a router [n_experts, d_model] and
  // n_experts SwiGLU experts of expert_ffn_hidden units, top_k of them per token.
  int64_t n_experts = 0;            ///< E experts per MoE layer; 0: every FFN is dense
  int64_t top_k = 0;                ///< k experts per token (1 <= k <= E with experts)
  int64_t expert_ffn_hidden = 0;    ///< hidden units of each expert (0 = ffn_hidden)
  /// The selected experts' weights renormalised to sum 1 (nn::MoEShape::normalize_top_k;
  /// Mixtral, Qwen3-MoE's norm_topk_prob).
  bool normalize_top_k = false;
  /// Layer i has an MoE FFN when (i + 1) % moe_layer_step == 0 and i is not in
  /// dense_ffn_layers (Qwen3-MoE's decoder_sparse_step and mlp_only_layers); the others
  /// have a dense FFN of ffn_hidden units.
  int64_t moe_layer_step = 1;
  std::vector<int64_t> dense_ffn_layers;
  /// > 0: each MoE layer's shared expert of that many hidden units, weighted by
  /// sigmoid(shared_expert_gate x) (Qwen2-MoE's shared_expert_intermediate_size); 0: none.
  int64_t shared_expert_ffn_hidden = 0;
  /// Whether layer i (0-based) has an MoE FFN (see moe_layer_step).
  bool is_moe_layer(int64_t i) const;
  /// expert_ffn_hidden, or ffn_hidden when 0.
  int64_t effective_expert_ffn() const { return expert_ffn_hidden > 0 ? expert_ffn_hidden : ffn_hidden; }
  /// The nn::Block shape of a dense-FFN layer (TransformerShape::block_shape plus the
  /// activation, sandwich norms and GPT-2's LayerNorms, MLP and biases).
  nn::BlockShape dense_block_shape() const;
  /// The nn::Block shape of layer i: dense_block_shape(), with an MoE FFN on MoE layers.
  nn::BlockShape layer_block_shape(int64_t i) const;
  /// int(head_dim * partial_rotary_factor), as transformers truncates it (even, >= 2 once validated).
  int64_t rotary_dim() const;
  /// Whether layer i uses the sliding layers' RoPE (rope_local_theta > 0 and a sliding layer).
  bool local_rope(int64_t layer) const;

  /// Attention pattern of layer i (0-based).
  LayerAttention layer_attention(int64_t layer) const;

  /// Strict parse: unknown keys and invalid values are InputErrors naming `where`, the
  /// field and the allowed range. The "architecture" key is allowed (must be "dense").
  static DenseConfig from_json(const nlohmann::json& j, const std::string& where);
  /// Every field, with "architecture": "dense".
  nlohmann::json to_json() const;
  /// Throws InputError for invalid values (see from_json).
  void validate(const std::string& where) const;
};

}  // namespace lol::baselines
