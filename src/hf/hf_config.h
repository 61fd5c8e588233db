// Hugging Face `config.json` of decoder-only Llama-family checkpoints (issue 10):
// Qwen2ForCausalLM (Qwen2 / Qwen2.5, used by LayerRoute section 4),
// Qwen3ForCausalLM, LlamaForCausalLM, MistralForCausalLM, Phi3ForCausalLM, the
// Gemma family's GemmaForCausalLM, Gemma2ForCausalLM and Gemma3ForCausalLM (see kGemmaArch,
// kGemma2Arch, kGemma3Arch and docs/hf.md "Gemma, Gemma 2 and Gemma 3"), and
// Olmo2ForCausalLM / Olmo3ForCausalLM (kOlmo2Arch, kOlmo3Arch), GraniteForCausalLM
// (kGraniteArch), CohereForCausalLM (kCohereArch), and the mixture-of-experts
// MixtralForCausalLM, OlmoeForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM (kMixtralArch,
// kOlmoeArch, kQwen2MoeArch, kQwen3MoeArch). LibTorch-free.
//
// The first five architectures compute the same function on the weights this project's
// dense model holds (pre-norm blocks, RMSNorm, rotate-half RoPE, grouped-query
// attention, SwiGLU MLP); they differ in defaults, in the q/k/v biases (Qwen2
// always has them, Llama and Qwen3 have them, with an o_proj bias, only with
// attention_bias) and in Qwen3's q_norm / k_norm (an RMSNorm over head_dim of every
// query and key head before RoPE).
//
// Features that would change the computed function and that the dense model does
// not implement are refused with an InputError naming config.json and the field,
// never silently ignored: RoPE types other than default, linear, llama3, yarn,
// dynamic and (Phi-3) longrope (nn/rope_scaling.h), partial rotary embeddings outside
// Phi-3, sliding
// layers before full ones in layer_types, attention_bias or mlp_bias on Llama, an
// activation other than SiLU, quantized weights.
//
// Sliding-window layers are read (sliding_window, full_attention_layers): Mistral's
// sliding_window (v0.1: 4096, every layer), Qwen2 / Qwen3's use_sliding_window
// (layers >= max_window_layers), and transformers' layer_types. A layer attending
// within W tokens sees key j from query i iff i - W < j <= i (transformers'
// sliding-window mask); a window of max_position_embeddings or more never binds and
// is read as full attention.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/rope_scaling.h"

namespace lol::hf {

/// Architectures this loader reads (config.json "architectures"[0]).
inline constexpr const char* kQwen2Arch = "Qwen2ForCausalLM";
inline constexpr const char* kLlamaArch = "LlamaForCausalLM";
inline constexpr const char* kQwen3Arch = "Qwen3ForCausalLM";
/// Mistral (v0.1-v0.3, Mistral-Nemo): Llama's computation; every layer attends within
/// sliding_window tokens (v0.1: 4096; v0.2 and later: null, full attention).
inline constexpr const char* kMistralArch = "MistralForCausalLM";
/// Phi-3 / Phi-4 (Phi-3-mini-4k, Phi-3-medium, Phi-4): Llama's computation with q/k/v
/// stored as one self_attn.qkv_proj and gate/up as one mlp.gate_up_proj (split on
/// load, fused on export); sliding_window (Phi-3-mini-4k: 2047) on every layer; longrope
/// (the 128k variants, Phi-3.5, Phi-4-mini) with the top-level original_max_position_embeddings
/// (default 4096), and partial_rotary_factor (Phi-4-mini: 0.75).
inline constexpr const char* kPhi3Arch = "Phi3ForCausalLM";
/// Gemma (gemma-2b/7b, CodeGemma; model_type "gemma"): Llama's block with GeGLU
/// (tanh-approximated GELU), RMSNorm weights stored as offsets from 1 (x (1 + w)),
/// embeddings times sqrt(hidden_size), head_dim 256 and tied embeddings by default.
inline constexpr const char* kGemmaArch = "GemmaForCausalLM";
/// Gemma 3 text models (gemma-3-270m, gemma-3-1b; model_type "gemma3_text"): Gemma's
/// embeddings, norms and GeGLU, plus sandwich norms (nn/block.h), q_norm / k_norm, the
/// attention scale query_pre_attn_scalar^-1/2, sliding layers with full attention every
/// sliding_window_pattern-th layer (or layer_types), and an unscaled RoPE of base
/// rope_local_base_freq on the sliding layers; soft-capping as Gemma 2 when set (default none).
inline constexpr const char* kGemma3Arch = "Gemma3ForCausalLM";
/// Gemma 2 (gemma-2-2b/9b/27b; model_type "gemma2"): Gemma 3's block without q/k norms,
/// with attention and final logit soft-capping (defaults 50 and 30) and a sliding window
/// on every other layer (0, 2, 4, ...), one RoPE for all layers.
inline constexpr const char* kGemma2Arch = "Gemma2ForCausalLM";
/// OLMo 2 (OLMo-2-0425-1B, OLMo-2-1124-7B/13B, OLMo-2-0325-32B; model_type "olmo2"):
/// Llama's SwiGLU and RoPE with the norms moved to the sublayer outputs (no input norms:
/// h = x + post_attention_layernorm(attn(x)), y = h + post_feedforward_layernorm(mlp(h)))
/// and q_norm / k_norm over the whole q and k projections ([H hd] and [Hkv hd]).
inline constexpr const char* kOlmo2Arch = "Olmo2ForCausalLM";
/// OLMo 3 (Olmo-3-7B, -32B; model_type "olmo3"): OLMo 2's blocks with sliding-window
/// layers, by default all but every fourth (layer_types), window sliding_window (default
/// 4096); one RoPE, its scaling included, for every layer.
inline constexpr const char* kOlmo3Arch = "Olmo3ForCausalLM";
/// Gemma 3 with a vision tower (gemma-3-4b, -12b, -27b; model_type "gemma3"): its
/// text_config is read as Gemma3ForCausalLM (absent keys: Gemma3TextConfig's defaults)
/// and only the language model's weights are loaded (HfConfig::multimodal_text).
inline constexpr const char* kGemma3VisionArch = "Gemma3ForConditionalGeneration";
/// GPT-2 (gpt2, gpt2-medium/large/xl, distilgpt2, models trained with nanoGPT and saved
/// by transformers; model_type "gpt2"): pre-norm blocks with LayerNorms (weight and
/// bias), learned absolute position embeddings (wpe) and no RoPE, multi-head attention
/// with q/k/v (one Conv1D c_attn, stored [in, out]) and output biases, an ungated GELU
/// MLP (c_fc, c_proj) with biases, tied embeddings; the config's n_embd / n_layer /
/// n_head / n_positions / n_inner / layer_norm_epsilon / activation_function names.
inline constexpr const char* kGpt2Arch = "GPT2LMHeadModel";
/// GPT-BigCode (bigcode/starcoder, starcoderbase, santacoder, tiny_starcoder; model_type
/// "gpt_bigcode"): GPT-2's blocks, names and config keys with nn.Linear weights (stored
/// [out, in], not Conv1D) and multi-query attention (multi_query, default true): c_attn holds
/// the query rows, then one key head's, then one value head's; without multi_query, per head
/// [q; k; v] (hf::split_grouped_qkv). Tanh GELU by default.
inline constexpr const char* kGptBigCodeArch = "GPTBigCodeForCausalLM";
/// GPT-NeoX (Pythia 14m-12b, gpt-neox-20b, and models trained with EleutherAI's GPT-NeoX;
/// model_type "gpt_neox"): LayerNorms with biases, rotate-half RoPE on the leading
/// rotary_pct of each head (Pythia: 0.25), multi-head attention with q/k/v in one
/// query_key_value stored per head ([q_h; k_h; v_h] for h = 0..H-1) and a dense (o_proj)
/// projection, both with biases (attention_bias), an ungated GELU MLP with biases
/// (dense_h_to_4h, dense_4h_to_h), parallel blocks (use_parallel_residual, default true:
/// y = x + attn(ln1 x) + mlp(ln2 x)) and an untied head (embed_out).
inline constexpr const char* kGptNeoXArch = "GPTNeoXForCausalLM";
/// Phi-1, Phi-1.5 and Phi-2 (model_type "phi", transformers' native layout): GPT-NeoX's
/// parallel blocks with one LayerNorm for both sublayers (y = x + attn(ln x) + mlp(ln x)),
/// q_proj / k_proj / v_proj and dense (o_proj) with biases, partial rotary
/// (partial_rotary_factor, default 0.5; Phi-2: 0.4), an ungated MLP fc1 / fc2 with biases,
/// final_layernorm, and an untied lm_head with a bias.
inline constexpr const char* kPhiArch = "PhiForCausalLM";
/// StableLM (stablelm-2-1_6b / -12b, stablelm-3b-4e1t, stablelm-zephyr; model_type
/// "stablelm"): Llama's names, grouped-query attention and gated MLP (hidden_act, default
/// SiLU) with LayerNorms (weight and bias), q/k/v biases with use_qkv_bias, no o_proj or
/// MLP biases, partial rotary (partial_rotary_factor, default 0.25), and with
/// use_parallel_residual Phi's parallel blocks (one input_layernorm, no
/// post_attention_layernorm).
inline constexpr const char* kStableLmArch = "StableLmForCausalLM";
/// Falcon (falcon-7b / -40b / -180b, Falcon2-11B; model_type "falcon"; RoPE models only):
/// LayerNorms with biases, rotate-half RoPE on whole heads, q/k/v stored as one
/// query_key_value grouped per key/value head ([q of the group's H/Hkv heads; k; v] for each
/// of the Hkv groups: multi_query's single group and the per-head [q; k; v] of the oldest
/// files are its special cases), a dense (o_proj) projection, an ungated MLP
/// (dense_h_to_4h, dense_4h_to_h; exact GELU by default), biases on all four or none
/// (bias), tied embeddings by default; parallel blocks with one input_layernorm (falcon-7b,
/// Falcon2-11B: num_ln_in_parallel_attn 1) or with ln_attn and ln_mlp (falcon-40b /
/// -180b: new_decoder_architecture), or sequential ones (parallel_attn false). ALiBi
/// (falcon-rw) is refused.
inline constexpr const char* kFalconArch = "FalconForCausalLM";
/// GPT-J (EleutherAI/gpt-j-6b and its fine-tunes; model_type "gptj"): Phi's parallel blocks
/// with one LayerNorm (ln_1) for both branches, q/k/v_proj and out_proj without biases, an
/// ungated MLP (fc_in, fc_out) with biases, an untied lm_head with a bias, GPT-2's config
/// names (n_embd, n_layer, n_head, n_positions, n_inner) and RoPE on the leading rotary_dim
/// dimensions of each head in interleaved pairs (2i, 2i + 1) with base 10000. lol reorders
/// the rotary rows of q_proj and k_proj on load (pair (2i, 2i + 1) -> (i, i + rotary_dim/2),
/// undone by export), which computes the same attention with rotate-half RoPE.
inline constexpr const char* kGptJArch = "GPTJForCausalLM";
/// StarCoder2 (bigcode/starcoder2-3b / -7b / -15b; model_type "starcoder2"): Llama's names and
/// sequential blocks with LayerNorms (weight and bias), grouped-query attention, rotate-half
/// RoPE over whole heads, an ungated MLP (mlp.c_fc, mlp.c_proj; tanh GELU by default), biases
/// on q/k/v/o_proj and the MLP with use_bias (default true), every layer attending within
/// sliding_window tokens when it is set, tied embeddings by default.
inline constexpr const char* kStarcoder2Arch = "Starcoder2ForCausalLM";

/// Granite 3.x dense models (ibm-granite/granite-3.0-2b / -8b, granite-3.1 / 3.2 / 3.3,
/// their -instruct variants; model_type "granite"): Llama's blocks, names and keys with four
/// multipliers: embeddings times embedding_multiplier, attention scores times
/// attention_multiplier (instead of head_dim^-1/2), each sublayer's output times
/// residual_multiplier before its residual add, logits divided by logits_scaling (all 1.0
/// by default). lol folds the attention and residual multipliers into q_proj, o_proj and
/// down_proj on load (undone by export) and applies the other two at run time.
inline constexpr const char* kGraniteArch = "GraniteForCausalLM";

/// Cohere Command-R (CohereForAI/c4ai-command-r-v01, -08-2024, Aya 23 / Aya Expanse; model_type
/// "cohere"): Phi's parallel blocks, y = x + attn(ln x) + mlp(ln x), with one
/// input_layernorm per layer that is a LayerNorm without a bias (final norm likewise,
/// layer_norm_eps, default 1e-5), Llama's q/k/v/o_proj and gated MLP (gate_proj, up_proj,
/// down_proj; no biases), RoPE on whole heads in interleaved pairs (2i, 2i + 1), logits times
/// logit_scale (default 0.0625), tied embeddings by default. lol reorders the q_proj / k_proj
/// rows to rotate-half pairs on load (as GPT-J's; undone by export) and holds zero norm
/// biases. use_qk_norm (Command R+'s per-head LayerNorms of q and k) is refused.
inline constexpr const char* kCohereArch = "CohereForCausalLM";
/// OPT (facebook/opt-125m, opt-1.3b ... opt-66b, and models fine-tuned from them; model_type
/// "opt"): GPT-2's pre-norm blocks with LayerNorms (weight and bias, epsilon 1e-5: OPTConfig
/// has none), learned absolute positions stored with OPT's offset (embed_positions
/// [max_position_embeddings + 2, hidden]: position p reads row p + 2), separate
/// q/k/v/out_proj and an ungated MLP (fc1, fc2) of ffn_dim with the ReLU (activation_function)
/// and biases (enable_bias, default true), tied embeddings; names under "model.decoder."
/// ("decoder." in older files). Refused: do_layer_norm_before false and word_embed_proj_dim
/// other than hidden_size (opt-350m's post-norm blocks and project_in / project_out),
/// _remove_final_layer_norm, layer_norm_elementwise_affine false.
inline constexpr const char* kOptArch = "OPTForCausalLM";

/// Mixtral (mistralai/Mixtral-8x7B-v0.1, -8x22B and their -Instruct variants; model_type
/// "mixtral"): Mistral's attention (sliding_window, default null: full attention) with every
/// FFN a sparse mixture of num_local_experts (default 8) SwiGLU experts of intermediate_size
/// units, num_experts_per_tok (default 2) per token, their softmax weights renormalised over
/// the selected experts; stored as block_sparse_moe.gate and block_sparse_moe.experts.{e}.w1
/// (gate), w3 (up), w2 (down). rope_theta 1e6 and rms_norm_eps 1e-5 by default.
inline constexpr const char* kMixtralArch = "MixtralForCausalLM";
/// OLMoE (allenai/OLMoE-1B-7B-0924, -0125 and -Instruct; model_type "olmoe"): Llama's pre-norm
/// blocks with OLMo 2's q_norm / k_norm over the whole q and k projections, and every FFN a
/// sparse mixture of num_experts (default 64) SwiGLU experts of intermediate_size units,
/// num_experts_per_tok (default 8) per token, weighted by their softmax probabilities
/// (renormalised only with norm_topk_prob); stored as mlp.gate and mlp.experts.{e}.*_proj.
/// clip_qkv is refused.
inline constexpr const char* kOlmoeArch = "OlmoeForCausalLM";
/// Qwen3-MoE (Qwen/Qwen3-30B-A3B, Qwen3-235B-A22B, Qwen3-Coder-30B-A3B; model_type
/// "qwen3_moe"): Qwen3's attention (per-head q_norm / k_norm; head_dim hidden_size / heads
/// when absent) with sparse-mixture FFNs of num_experts (default 128) SwiGLU experts of
/// moe_intermediate_size (default 768) units, num_experts_per_tok (default 8) per token,
/// renormalised with norm_topk_prob (default false; the released models set true), on layer
/// i when (i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers (the others: a
/// dense MLP of intermediate_size). use_sliding_window is refused.
inline constexpr const char* kQwen3MoeArch = "Qwen3MoeForCausalLM";
/// Qwen2-MoE (Qwen/Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B and their -Chat / -Instruct variants;
/// model_type "qwen2_moe"): Qwen2's attention (q/k/v biases, qkv_bias true) with Qwen3-MoE's
/// sparse layers (num_experts 60, num_experts_per_tok 4, moe_intermediate_size 1408,
/// norm_topk_prob false, decoder_sparse_step, mlp_only_layers by default) plus a shared expert
/// of shared_expert_intermediate_size (5632) units that every token runs, weighted by
/// sigmoid(shared_expert_gate x). use_sliding_window and qkv_bias false are refused.
inline constexpr const char* kQwen2MoeArch = "Qwen2MoeForCausalLM";

/// One architecture this loader reads: its class (config.json "architectures"[0]), its
/// model_type, and its name on the command line (--arch; null for a class lol reads but does
/// not write: Gemma 3 with a vision tower).
struct ArchitectureInfo {
  const char* cls;
  const char* model_type;
  const char* cli;
};

/// Every architecture, in the order help texts and errors list them (llama.cpp's one table
/// of architectures: from_json, --arch, export and the error messages read it).
const std::vector<ArchitectureInfo>& architectures();
/// The row of class `cls`, or null.
const ArchitectureInfo* find_architecture(const std::string& cls);
/// The classes as an error message lists them: "\"A\", \"B\" or \"C\""; `writable_only`:
/// those with a command-line name (the ones export writes).
std::string architecture_list(bool writable_only = false);

struct HfConfig {
  std::string architecture = kQwen2Arch;  ///< one of the k...Arch names above
  int64_t vocab_size = 0;                 ///< V: rows of embed_tokens / lm_head
  int64_t hidden_size = 0;                ///< d_model
  int64_t intermediate_size = 0;          ///< F: SwiGLU hidden width
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;        ///< H
  int64_t num_key_value_heads = 0;        ///< Hkv (H % Hkv == 0)
  int64_t head_dim = 0;                   ///< hd; hidden_size / H unless config.json says otherwise (Qwen3: 128 when absent)
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  nn::RopeScaling rope_scaling;           ///< "rope_scaling" / "rope_parameters" (default: none)
  double partial_rotary_factor = 1.0;     ///< RoPE on the leading rotary_dim() dims (Phi-3 only)
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;       ///< lm_head shares embed_tokens (no lm_head.weight tensor)
  bool qkv_bias = false;                  ///< q/k/v projections have biases (always for Qwen2)
  bool qk_norm = false;                   ///< q_norm / k_norm weights [head_dim] per layer (always for Qwen3)
  /// q_norm / k_norm over the whole projection, weights [H head_dim] / [Hkv head_dim] (OLMo 2/3)
  bool qk_norm_across_heads = false;
  /// false: no input_layernorm / FFN input norm, only the sublayers' output norms (OLMo 2/3;
  /// sandwich_norm is then set too, nn/block.h)
  bool input_norms = true;
  /// W > 0: layers full_attention_layers .. num_hidden_layers - 1 attend within W tokens
  /// (see the file comment); 0: every layer has full attention.
  int64_t sliding_window = 0;
  int64_t full_attention_layers = 0;      ///< leading full-attention layers when sliding_window > 0
  /// > 0 (with sliding_window): layer i >= full_attention_layers has full attention when
  /// (i + 1) % full_attention_interval == 0 (Gemma 3: sliding_window_pattern, 6).
  int64_t full_attention_interval = 0;
  std::string activation = "silu";        ///< the MLP gate's ACT2FN name (nn/activation.h)
  // Gemma family:
  bool norm_offset = false;               ///< RMSNorm weights stored as w for x (1 + w) (Gemma)
  bool scale_embeddings = false;          ///< embeddings times sqrt(hidden_size) (Gemma)
  bool sandwich_norm = false;             ///< pre/post_feedforward_layernorm (Gemma 3; nn/block.h)
  double query_pre_attn_scalar = 0;       ///< > 0: attention scale query_pre_attn_scalar^-1/2 (Gemma 3)
  double rope_local_theta = 0;            ///< > 0: sliding layers' unscaled RoPE base (Gemma 3)
  double attn_logit_softcapping = 0;      ///< > 0: attention scores cap * tanh(s / cap) (Gemma 2)
  double final_logit_softcapping = 0;     ///< > 0: logits cap * tanh(l / cap) (Gemma 2)
  /// The text model of a Gemma3ForConditionalGeneration folder: weights stored under
  /// "language_model.model." (or "model.language_model."), the vision tower's skipped.
  bool multimodal_text = false;
  std::string torch_dtype;                ///< stored dtype: "float32" | "bfloat16" | "float16" | "" (absent)
  std::vector<int64_t> bos_token_id;      ///< empty: none
  std::vector<int64_t> eos_token_id;      ///< empty: none (may list several ids)
  /// GPT-NeoX's parallel blocks (use_parallel_residual; nn::BlockShape::parallel_residual).
  bool parallel_residual = false;
  /// Parallel blocks with one input_layernorm for both branches (Falcon's parallel_attn
  /// without ln_attn / ln_mlp; Phi and StableLM's parallel blocks are read from their
  /// architecture; nn::BlockShape::shared_input_norm).
  bool shared_input_norm = false;
  // Granite (kGraniteArch; GraniteConfig's defaults):
  double embedding_multiplier = 1.0;      ///< embeddings times it
  double logits_scaling = 1.0;            ///< logits divided by it
  double residual_multiplier = 1.0;       ///< each sublayer's output times it before the residual add
  double attention_multiplier = 1.0;      ///< the attention scale (Granite only; others: head_dim^-1/2)
  double logit_scale = 0.0625;            ///< logits times it (Cohere only; CohereConfig's default)
  /// Falcon's new_decoder_architecture (read for `hf info`; export chooses its own layout).
  bool falcon_new_decoder = false;
  /// empty: none; written back by export (a derived folder keeps its source's, which OLMo's
  /// config classes would otherwise default to 1).
  std::vector<int64_t> pad_token_id;
  // Mixture-of-experts FFNs (kMixtralArch, kOlmoeArch, kQwen3MoeArch; baselines::DenseConfig's
  // n_experts, top_k, expert_ffn_hidden, normalize_top_k, moe_layer_step, dense_ffn_layers):
  int64_t num_experts = 0;              ///< E experts per MoE layer (Mixtral: num_local_experts); 0: dense FFNs
  int64_t num_experts_per_tok = 0;      ///< k experts per token
  int64_t moe_intermediate_size = 0;    ///< hidden units of each expert (Qwen3-MoE; 0: intermediate_size)
  bool norm_topk_prob = false;          ///< the selected weights renormalised (Mixtral: always)
  int64_t decoder_sparse_step = 1;      ///< Qwen3-MoE: layer i is an MoE layer when (i + 1) % step == 0 ...
  std::vector<int64_t> mlp_only_layers; ///< ... and i is not listed here
  int64_t shared_expert_intermediate_size = 0;  ///< Qwen2-MoE's shared expert; 0: none

  bool is_qwen2() const { return architecture == kQwen2Arch; }
  bool is_qwen3() const { return architecture == kQwen3Arch; }
  bool is_mistral() const { return architecture == kMistralArch; }
  /// int(head_dim * partial_rotary_factor), as transformers truncates it: the rotated
  /// leading dimensions of each head (head_dim unless Phi-3 sets a partial factor).
  int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
  bool is_phi3() const { return architecture == kPhi3Arch; }
  bool is_gemma() const { return architecture == kGemmaArch; }
  bool is_gemma2() const { return architecture == kGemma2Arch; }
  bool is_gemma3() const { return architecture == kGemma3Arch; }
  /// Whether layer i (0-based) has full attention: every layer without a window, else the
  /// full_attention_layers leading ones and, with full_attention_interval P > 0, those with
  /// (i + 1) % P == 0 (baselines::DenseConfig::layer_attention's rule).
  bool layer_is_full(int64_t i) const {
    return sliding_window == 0 || i < full_attention_layers ||
           (full_attention_interval > 0 && (i + 1) % full_attention_interval == 0);
  }
  bool is_olmo2() const { return architecture == kOlmo2Arch; }
  bool is_gpt2() const { return architecture == kGpt2Arch; }
  bool is_olmo3() const { return architecture == kOlmo3Arch; }
  bool is_gpt_neox() const { return architecture == kGptNeoXArch; }
  bool is_phi() const { return architecture == kPhiArch; }
  bool is_stablelm() const { return architecture == kStableLmArch; }
  bool is_falcon() const { return architecture == kFalconArch; }
  bool is_gptj() const { return architecture == kGptJArch; }
  bool is_starcoder2() const { return architecture == kStarcoder2Arch; }
  bool is_gpt_bigcode() const { return architecture == kGptBigCodeArch; }
  bool is_granite() const { return architecture == kGraniteArch; }
  bool is_cohere() const { return architecture == kCohereArch; }
  bool is_opt() const { return architecture == kOptArch; }
  bool is_mixtral() const { return architecture == kMixtralArch; }
  bool is_olmoe() const { return architecture == kOlmoeArch; }
  bool is_qwen3_moe() const { return architecture == kQwen3MoeArch; }
  bool is_qwen2_moe() const { return architecture == kQwen2MoeArch; }
  /// Whether the FFNs are sparse mixtures of experts (num_experts > 0).
  bool is_moe() const { return num_experts > 0; }
  /// Whether layer i (0-based) has a mixture-of-experts FFN (Qwen3-MoE's rule; every layer of
  /// Mixtral and OLMoE).
  bool is_moe_layer(int64_t i) const;
  /// config.json "model_type" of the architecture (its row of architectures(); "llama"
  /// for an unknown class).
  std::string model_type() const;

  /// Parses a config.json document; `where` names the file in errors. Throws
  /// InputError for an unsupported architecture or feature (see the file comment),
  /// a missing required size field, a wrong type, or inconsistent sizes
  /// (e.g. num_attention_heads % num_key_value_heads != 0, odd head_dim).
  static HfConfig from_json(const nlohmann::json& j, const std::string& where);
  /// Reads `dir`/config.json (see from_json).
  static HfConfig load_dir(const std::string& dir);

  /// The config.json document of this model, in the layout transformers writes for
  /// the architecture (Qwen2 / Qwen3: use_sliding_window, sliding_window and
  /// max_window_layers, set so that no layer slides without a window; Mistral:
  /// sliding_window, null without one;
  /// Llama / Qwen3: attention_bias;
  /// head_dim whenever it is not hidden_size / heads, and always for Qwen3).
  nlohmann::ordered_json to_json() const;
};

/// The architecture class of a command-line name (architectures()' cli column: "qwen2" ->
/// kQwen2Arch, "gpt_neox" -> kGptNeoXArch, "falcon" -> kFalconArch, ...). Throws
/// InputError("<flag> \"<name>\": expected qwen2, ..., stablelm or falcon") otherwise.
std::string architecture_from_name(const std::string& name, const std::string& flag = "--arch");
/// The command-line name of an architecture class (architecture_from_name's inverse:
/// kGptNeoXArch -> "gpt_neox"); an unknown class comes back as it is.
std::string cli_architecture_name(const std::string& architecture);

/// config.json's "pad_token_id" when it is one id >= 0, else empty: kept for export only,
/// so any other value (older Llama conversions write -1) is dropped rather than refused.
std::vector<int64_t> pad_token_id_of(const nlohmann::json& config);

/// Ids of a token-id field that is null, an integer or a list of integers
/// (config.json / generation_config.json "eos_token_id"). Throws InputError naming
/// `where` and `key` otherwise.
std::vector<int64_t> token_id_list(const nlohmann::json& j, const std::string& key, const std::string& where);

}  // namespace lol::hf
