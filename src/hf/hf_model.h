// Loading a Hugging Face Qwen2 / Qwen3 / Llama / Mistral / Phi-3 / Gemma / Gemma 2 / Gemma 3 /
// OLMo 2 / OLMo 3 / GPT-2 folder into the project's dense transformer (baselines::DenseModel,
// whose parameter names are exactly the Hugging Face ones, except Phi-3's fused
// projections: phi3_fused_weights; Gemma's norm weights are loaded as 1 + w and Gemma
// 2/3's attention scale is folded into the queries; GPT-2's tensors are renamed, its
// Conv1D weights transposed and c_attn split), issue 10.
// The computed function is that of transformers' Qwen2ForCausalLM / Qwen3ForCausalLM /
// LlamaForCausalLM / MistralForCausalLM / Phi3ForCausalLM (LayerRoute section 4 starts
// from Qwen2.5-0.5B-Instruct).
#pragma once
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "baselines/dense_model.h"
#include "hf/hf_config.h"
#include "hf/hf_files.h"

namespace lol::hf {

/// The dense model configuration of a Hugging Face config: full attention, or "sliding"
/// with window = sliding_window and n_full_prelude = full_attention_layers;
/// max_seq_len = max_position_embeddings, head_dim explicit.
baselines::DenseConfig to_dense_config(const HfConfig& c);

/// Parameters of the model `c` describes (lm_head counted unless tied), as transformers'
/// num_parameters(): baselines::cost_model of to_dense_config(c), less the zero LayerNorm biases
/// the dense model holds for Cohere (whose LayerNorms have none).
int64_t parameter_count(const HfConfig& c);

/// The Hugging Face config of a dense model, for `architecture` (kQwen2Arch, kQwen3Arch,
/// kLlamaArch, kMistralArch, kPhi3Arch, kOlmo2Arch or kOlmo3Arch), weights stored as
/// `torch_dtype` ("float32" | "bfloat16" | "float16"). Throws InputError when the model
/// cannot be expressed in that architecture: strided attention; sliding attention for
/// Llama and OLMo 2, with full layers after the sliding ones (n_full_coda), or with full
/// layers first for Mistral / Phi-3; q/k/v biases except for Qwen2; per-head qk_norm
/// except for Qwen3, and no qk_norm for Qwen3; OLMo's layout (output norms only, q/k
/// norms across heads) for an architecture other than OLMo 2/3, and any other layout for them.
HfConfig from_dense_config(const baselines::DenseConfig& c, const std::string& architecture,
                           const std::string& torch_dtype);

/// The architecture `lol export` and `layerroute merge` write a dense model as when no
/// --arch is given: GPT-2 for GPT-2's blocks with learned positions; with RoPE, StableLM for
/// a gated MLP, Phi for an lm_head bias or an untied shared input norm, Falcon for a tied
/// one, StarCoder2 for sequential blocks with a window on every layer or grouped-query
/// attention (more than one key/value head), Falcon for other grouped-query attention,
/// GPT-NeoX otherwise; OLMo 3 for OLMo's layout with sliding layers, OLMo 2 for
/// it without, the Gemma classes for scaled embeddings, Qwen3 for per-head q/k norms,
/// Qwen2 otherwise.
std::string default_architecture(const baselines::DenseConfig& c);

/// Phi-3's fused weights (transformers' Phi3Attention / Phi3MLP): per layer, the stored
/// tensor (a suffix of "model.layers.N.") and the dense model's parameters whose rows it
/// stacks, in order: qkv_proj = [q_proj; k_proj; v_proj] ([(H + 2 Hkv) hd, d]),
/// gate_up_proj = [gate_proj; up_proj] ([2 F, d]).
struct FusedWeight {
  std::string fused;
  std::vector<std::string> parts;
};
const std::vector<FusedWeight>& phi3_fused_weights();

/// GPT-2's name (GPT2Model's, without "transformer.") of the dense model's parameter `name`:
/// "model.embed_tokens.weight" -> "wte.weight", "model.layers.3.mlp.up_proj.bias" ->
/// "h.3.mlp.c_fc.bias", q_proj / k_proj / v_proj -> "h.{i}.attn.c_attn.*" (stored fused,
/// q rows then k then v); the weights of *_proj are stored transposed ([in, out], Conv1D).
/// Names with no GPT-2 counterpart come back as they are (lm_head.weight).
std::string gpt2_stored_name(const std::string& name);

/// GPT-NeoX's name (GPTNeoXForCausalLM's) of the dense model's parameter `name`:
/// "model.embed_tokens.weight" -> "gpt_neox.embed_in.weight", "lm_head.weight" ->
/// "embed_out.weight", "model.norm.*" -> "gpt_neox.final_layer_norm.*",
/// "model.layers.3.self_attn.o_proj.bias" -> "gpt_neox.layers.3.attention.dense.bias",
/// mlp.up_proj / down_proj -> mlp.dense_h_to_4h / dense_4h_to_h, q_proj / k_proj / v_proj
/// -> "attention.query_key_value.*" (stored fused per head: fuse_grouped_qkv with Hkv = H).
std::string gpt_neox_stored_name(const std::string& name);
/// Phi's name (PhiForCausalLM's) of the dense model's parameter `name`: "model.norm.*" ->
/// "model.final_layernorm.*", self_attn.o_proj -> self_attn.dense, mlp.up_proj / down_proj
/// -> mlp.fc1 / fc2; the other names (q/k/v_proj, input_layernorm, lm_head) are the same.
std::string phi_stored_name(const std::string& name);
/// The dense model's name of Phi's tensor `name` (phi_stored_name reversed), or "" for a
/// name Phi does not have.
std::string phi_parameter_name(const std::string& name);
/// The dense model's name of GPT-NeoX's tensor `name` (gpt_neox_stored_name reversed;
/// query_key_value -> the layer's "model.layers.{i}.self_attn." prefix), or "" for a
/// name GPT-NeoX does not have.
std::string gpt_neox_parameter_name(const std::string& name);
/// Falcon's name (FalconForCausalLM's) of the dense model's parameter `name`:
/// "model.embed_tokens.weight" -> "transformer.word_embeddings.weight", "model.norm.*" ->
/// "transformer.ln_f.*", "model.layers.3." -> "transformer.h.3.", self_attn.o_proj ->
/// self_attention.dense, q_proj / k_proj / v_proj -> "self_attention.query_key_value.*"
/// (stored fused per key/value group: fuse_grouped_qkv), mlp.up_proj / down_proj ->
/// mlp.dense_h_to_4h / dense_4h_to_h; `two_norms` (parallel blocks with ln_attn and
/// ln_mlp): input_layernorm -> ln_attn, post_attention_layernorm -> ln_mlp.
std::string falcon_stored_name(const std::string& name, bool two_norms);
/// The dense model's name of Falcon's tensor `name` (falcon_stored_name reversed;
/// query_key_value -> the layer's "model.layers.{i}.self_attn." prefix), or "" for a name
/// Falcon (with or without `two_norms`) does not have.
std::string falcon_parameter_name(const std::string& name, bool two_norms);
/// A fused q/k/v projection stored per key/value group ([R] or [R, d] with R = Hkv (G + 2)
/// hd, G = H / Hkv query heads per group: group g's G query heads' rows, then its key head's,
/// then its value head's; Falcon's FalconAttention._split_heads, and GPT-NeoX's per-head
/// [q; k; v] with Hkv = H, G = 1) as [q; k; v] (all H query heads' rows, then the Hkv key
/// heads', then the value heads'), and back. Throws InputError unless rows(0) = R.
torch::Tensor split_grouped_qkv(const torch::Tensor& fused, int64_t kv_heads, int64_t group, int64_t head_dim);
/// split_grouped_qkv's inverse: q [H hd, ...], k and v [Hkv hd, ...] fused per group.
torch::Tensor fuse_grouped_qkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t kv_heads,
                               int64_t group, int64_t head_dim);

/// GPT-J's name (GPTJForCausalLM's) of the dense model's parameter `name`:
/// "model.embed_tokens.weight" -> "transformer.wte.weight", "model.norm.*" ->
/// "transformer.ln_f.*", "model.layers.3." -> "transformer.h.3.", input_layernorm -> ln_1,
/// self_attn.o_proj -> attn.out_proj, self_attn.{q,k,v}_proj -> attn.{q,k,v}_proj,
/// mlp.up_proj / down_proj -> mlp.fc_in / fc_out; lm_head.* unchanged.
std::string gptj_stored_name(const std::string& name);
/// The dense model's name of GPT-J's tensor `name` (gptj_stored_name reversed), or "".
std::string gptj_parameter_name(const std::string& name);
/// StarCoder2's name (Starcoder2ForCausalLM's) of the dense model's parameter `name`:
/// mlp.up_proj / down_proj -> mlp.c_fc / c_proj; the other names are the dense model's.
std::string starcoder2_stored_name(const std::string& name);
/// The dense model's name of StarCoder2's tensor `name` (starcoder2_stored_name reversed), or "".
std::string starcoder2_parameter_name(const std::string& name);
/// OPT's name (OPTForCausalLM's) of the dense model's parameter `name`: "model." ->
/// "model.decoder.", model.norm -> final_layer_norm, input_layernorm -> self_attn_layer_norm,
/// post_attention_layernorm -> final_layer_norm (in a layer), self_attn.o_proj ->
/// self_attn.out_proj, mlp.up_proj / down_proj -> fc1 / fc2; lm_head.* unchanged. The
/// stored embed_positions has 2 more leading rows (OPT's offset).
std::string opt_stored_name(const std::string& name);
/// The dense model's name of OPT's tensor `stored` (opt_stored_name reversed; OPTModel's
/// names without "model." too), or "".
std::string opt_parameter_name(const std::string& stored);
/// Mixtral's name (MixtralForCausalLM's) of the dense model's parameter `name`: a layer's
/// "mlp.gate." -> "block_sparse_moe.gate.", "mlp.experts.{e}.gate_proj / down_proj / up_proj"
/// -> "block_sparse_moe.experts.{e}.w1 / w2 / w3"; the other names are the dense model's.
std::string mixtral_stored_name(const std::string& name);
/// The dense model's name of Mixtral's tensor `stored` (mixtral_stored_name reversed), or "".
std::string mixtral_parameter_name(const std::string& stored);
/// The factor Granite's loader folds into the dense model's parameter `name` (weight or
/// bias of a layer's q_proj, o_proj or down_proj: DenseConfig::weight_fold of that
/// projection), else 1. The loader multiplies by it, export divides by it (both in float64).
double granite_parameter_fold(const baselines::DenseConfig& c, const std::string& name);

/// The rows [heads * head_dim, ...] of a q or k projection with each head's leading
/// `rotary_dim` rows reordered from GPT-J's interleaved RoPE pairs (2i, 2i + 1) to
/// rotate-half pairs (i, i + rotary_dim / 2): new row i <- old 2i, new row rotary_dim / 2 + i
/// <- old 2i + 1 (the other rows unchanged); `inverse` undoes it. Both q and k reordered
/// alike leave q.k unchanged, and rotate-half RoPE on the new rows equals GPT-J's
/// rotate_every_two RoPE on the old ones (modeling_gptj.py apply_rotary_pos_emb).
torch::Tensor gptj_rotary_rows(const torch::Tensor& w, int64_t heads, int64_t head_dim, int64_t rotary_dim, bool inverse);

/// "float32" | "float" | "bfloat16" | "bf16" | "float16" | "half" | "fp16" | "float64";
/// throws InputError naming `flag` otherwise.
c10::ScalarType parse_dtype_name(const std::string& name, const std::string& flag = "--dtype");
/// "float32", "bfloat16", "float16", "float64".
std::string dtype_name(c10::ScalarType t);

/// Copies every tensor of `files` into `m` (built from to_dense_config(cfg)), converting
/// the stored float dtype (F32/F16/BF16/F64) to the model's. Strict: every parameter
/// must be present exactly once with its shape; an unexpected tensor, a shape
/// mismatch, a non-float dtype or a NaN/Inf value is an InputError naming the shard
/// file and the tensor (and, for shapes, the config fields that set them). Tolerated:
/// rotary "inv_freq" buffers of old Llama checkpoints (recomputed here), and with
/// tied embeddings an lm_head.weight equal to embed_tokens.weight.
void load_hf_weights(baselines::DenseModelImpl& m, const HfConfig& cfg, const WeightFiles& files);

/// Reads dir/config.json and the weights into a new model with `dtype` parameters on
/// `device`, in eval mode. Throws InputError as HfConfig::from_json, find_weight_files
/// and load_hf_weights.
baselines::DenseModel load_hf_model(const std::string& dir, c10::ScalarType dtype = c10::kFloat,
                                    c10::Device device = c10::Device(c10::kCPU), HfConfig* config = nullptr);

}  // namespace lol::hf
