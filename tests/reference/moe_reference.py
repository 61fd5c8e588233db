#!/usr/bin/env python3
"""An independent float64 reference of the Hugging Face mixture-of-experts classes
MixtralForCausalLM (model_type "mixtral"), OlmoeForCausalLM ("olmoe"), Qwen2MoeForCausalLM
("qwen2_moe") and Qwen3MoeForCausalLM ("qwen3_moe") in pure Python (stdlib only), and a check that
`lol hf ppl|generate|info` agrees with it on tiny MoE folders written here.

  python3 tests/reference/moe_reference.py check --lol build/lol --work /tmp/x [--quiet]
  python3 tests/reference/moe_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/, fuzz/, bench/ nor tests/ outside
tests/reference/, from docs/hf.md (sections "Commands", "What is loaded, and what is
refused", "Mixture-of-experts models: Mixtral, OLMoE, Qwen2-MoE, Qwen3-MoE", "Sliding-window
attention"), docs/checkpoint-format.md ("lol info: parameters and FLOPs": the active parameters)
and transformers' modeling_mixtral.py / configuration_mixtral.py, modeling_olmoe.py /
configuration_olmoe.py, modeling_qwen2_moe.py / configuration_qwen2_moe.py,
modeling_qwen3_moe.py / configuration_qwen3_moe.py AS REMEMBERED (not re-read: every point
taken from memory is marked ASSUMED below unless docs/hf.md states it too). The Qwen2-MoE
parts were added by a second reviewer under the same rules (that reviewer read this file,
qwen2_reference.py and the docs above; the format of `hf info`'s `experts` line and of the
active count on its `parameters` line was taken from the output of the lol binary itself,
then checked against the values computed here). It imports qwen2_reference.py
(unchanged) for the float32 RoPE tables as transformers builds them, RMSNorm / SiLU, the
prefill / KV-cached greedy driver of its `Ref` (this file's `MoeRef` supplies its own
weights, block and head), `mean_ce`, the byte-level tokenizer / folder writer (which uses
safetensors_io.write_st), `Checker` and the greedy comparison; olmo_reference.OlmoRef and
qwen3_reference.Qwen3Ref are used only in `selftest`, as independent transcriptions of the
attention of OLMoE's and Qwen3-MoE's parents (qwen2_reference.Ref, on a Qwen2ForCausalLM, is
Qwen2-MoE's).

The reference (float64; RoPE cos/sin tables in float32 as transformers builds them):
  Every class: pre-norm Llama blocks
      h = x + o_proj(attn(input_layernorm(x)));  y = h + FFN(post_attention_layernorm(h))
      RMSNorm: w * x / sqrt(mean(x^2) + rms_norm_eps); rotate-half RoPE; grouped-query
      causal attention (query head a uses kv head a // (H / Hkv)), scale head_dim^-0.5.
  Mixtral (MistralAttention): no biases, no q/k norms; sliding_window W (when not null)
      on every layer: query i sees keys i - W < j <= i (docs/hf.md "Sliding-window").
  OLMoE: q = q_norm(q_proj(x)), k = k_norm(k_proj(x)) with ONE RMSNorm over the whole
      projection (weights [hidden_size] and [num_key_value_heads * head_dim]), before
      the heads are split and RoPE (docs/hf.md; ASSUMED from OlmoeAttention as remembered).
  Qwen3-MoE: per-head q_norm / k_norm (weights [head_dim]) before RoPE (Qwen3Attention).
  Qwen2-MoE (Qwen2Attention, docs/hf.md): q/k/v biases (self_attn.{q,k,v}_proj.bias), no o_proj
      bias, no q/k norms; head_dim d / H (ASSUMED: no head_dim key is written here).
  An MoE FFN (docs/hf.md's equations; MixtralSparseMoeBlock / OlmoeSparseMoeBlock /
  Qwen3MoeSparseMoeBlock), per token x:
      p = softmax(gate x)                                  # [num_experts]
      S = the num_experts_per_tok largest p_e (ties: lower index)
      w_e = p_e / sum_S p, or p_e                          # Mixtral always renormalises;
                                                           # OLMoE / Qwen3-MoE iff norm_topk_prob
      y = sum_{e in S} w_e * down_e(silu(gate_e x) * up_e x)
        + sigmoid(shared_expert_gate . x) * down_s(silu(gate_s x) * up_s x)   # Qwen2-MoE only
      (Qwen2-MoE's renormalisation iff norm_topk_prob, default false; its shared expert,
      mlp.shared_expert.{gate,up,down}_proj of shared_expert_intermediate_size units, runs on
      every token of an MoE layer, gated by mlp.shared_expert_gate.weight [1, d], and is added
      to the routed sum; dense layers have none -- Qwen2MoeDecoderLayer uses Qwen2MoeMLP of
      intermediate_size there, ASSUMED as remembered)
  Tensor names: Mixtral model.layers.{i}.block_sparse_moe.gate.weight [E, d],
      block_sparse_moe.experts.{e}.w1 (gate) / w3 (up) [F, d], w2 (down) [d, F];
      OLMoE / Qwen3-MoE model.layers.{i}.mlp.gate.weight, mlp.experts.{e}.{gate,up,down}_proj;
      Qwen3-MoE dense layers mlp.{gate,up,down}_proj of intermediate_size. Qwen3-MoE layer i is
      an MoE layer iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
      Qwen2-MoE: as Qwen3-MoE (router, experts, dense layers, layer rule), plus
      mlp.shared_expert.{gate,up,down}_proj.weight ([Fs, d], [Fs, d], [d, Fs]) and
      mlp.shared_expert_gate.weight [1, d] in each MoE layer.
  Config defaults (docs/hf.md's table; the eps / theta / tie ones ASSUMED from the config
  classes as remembered):
      Mixtral: num_local_experts 8, num_experts_per_tok 2, num_key_value_heads 8 (null -> H),
          rope_theta 1e6, rms_norm_eps 1e-5, sliding_window null, head_dim = given or d / H.
      OLMoE: num_experts 64, num_experts_per_tok 8, norm_topk_prob false, num_key_value_heads
          = H (missing or null), rms_norm_eps 1e-5, rope_theta 1e4, head_dim d / H.
      Qwen3-MoE: num_experts 128, num_experts_per_tok 8, norm_topk_prob false,
          moe_intermediate_size 768, decoder_sparse_step 1, mlp_only_layers [],
          num_key_value_heads 4 (null -> H), head_dim = given or d / H (not Qwen3's 128),
          rms_norm_eps 1e-6 (ASSUMED), rope_theta 1e4 (ASSUMED).
      Qwen2-MoE: num_experts 60, num_experts_per_tok 4, norm_topk_prob false,
          moe_intermediate_size 1408, shared_expert_intermediate_size 5632, decoder_sparse_step 1,
          mlp_only_layers [], num_key_value_heads 16 (null -> H: ASSUMED), qkv_bias true;
          rms_norm_eps 1e-6, rope_theta 1e4 (ASSUMED from Qwen2MoeConfig as remembered; docs/hf.md's
          general defaults say the same).
      tie_word_embeddings false for all (ASSUMED).
  Parameters (hf info): every stored tensor counted once (transformers' num_parameters()
  counts all experts; the lm_head once, absent when tied). Active parameters per token
  (docs/checkpoint-format.md: all parameters minus the experts a token cannot use): the same
  count less (num_experts - num_experts_per_tok) routed experts (3 F d each) per MoE layer; the
  router, the top-k experts and Qwen2-MoE's shared expert and shared_expert_gate stay, and so do
  the embedding and lm_head (counted as in the parameters). Selftest: a Qwen1.5-MoE-A2.7B-shaped
  config (ASSUMED shape, from memory) gives 14.3 B parameters and 2.69 B active, the published
  "14.3B, 2.7B activated".

Cases (vocab 264 > the byte tokenizer's 259 ids; the qwen2_reference byte-level
tokenizer and its 199-token text; random weights: norm weights 1 + N(0, 0.4), q / k rows
scaled per head (x0.5, x1, x2, x1.4 / x0.6, x1.6) so that per-head and whole-projection q/k
norms differ; router rows of std 2/sqrt(d) so routing is decisive; expert gate rows of mean
0.1 so that gate / up swapped differs):
  M1 mixtral-gqa-f32: 3 layers, hidden 32, 4 heads / 2 kv, 5 experts top-2, F 24, F32:
     hf ppl float64 (--context 9 and 64), float32 64, bfloat16 64 (loose 3e-2); hf generate
     --tokens --ids greedy float64 (two prompts) and float32; hf info --check.
  M1-topk-all: M1's weights with num_experts_per_tok 5 = all experts (no boundary): ppl 64,
     hf info --check.
  M2 mixtral-defaults: no num_local_experts / num_experts_per_tok / num_key_value_heads /
     rope_theta / rms_norm_eps / sliding_window / tie keys (-> 8 experts, top-2, 8 kv heads for
     16 query heads, theta 1e6, eps 1e-5), 2 layers, hidden 64 (head_dim 4), embeddings of std
     0.003 (eps matters): ppl float64 64, float32 64; generate float64; hf info --check.
  M3 mixtral-sliding-tied-hd12: sliding_window 6 on every layer, head_dim 12 != 32/4 (ASSUMED
     read as MistralAttention does), tied embeddings, 4 experts top-3, 2 layers: ppl float64 40,
     generate float64 (prompt 17 + 20 new: across the window), hf info --check.
  O1 olmoe-gqa-norm_topk: 3 layers, hidden 32, 4 heads / 2 kv heads (k_norm [16]), 6 experts
     top-3, norm_topk_prob true: ppl float64 9 / 64, float32 64; generate float64 / float32;
     hf info --check. O1-false: O1's weights with norm_topk_prob false: ppl 64, generate, info.
  O2 olmoe-defaults-bf16: no num_experts / num_experts_per_tok / norm_topk_prob /
     num_key_value_heads / rms_norm_eps / rope_theta keys (-> 64 experts, top-8, false, MHA,
     1e-5, 1e4), hidden 16, 2 layers, F 8, BF16 storage in 2 shards + index, embeddings std
     0.003: ppl float64 / float32 / bfloat16 (3e-2); generate float64; hf info --check.
  Q1 qwen3_moe-mixed: 3 layers, hidden 24, 4 heads / 2 kv, head_dim 8 != 24/4, 6 experts
     top-2, moe_intermediate_size 16, intermediate_size 40, mlp_only_layers [1] (layer 1
     dense), norm_topk_prob true: ppl float64 9 / 64, float32 64; generate float64 / float32;
     hf info --check.
  Q2 qwen3_moe-step2-defaults: 4 layers, decoder_sparse_step 2 (layers 1, 3 MoE; 0, 2 dense),
     no num_experts_per_tok (-> 8 of 12 experts) / norm_topk_prob (-> false) /
     num_key_value_heads (-> 4, of 8 query heads) / head_dim (-> 32/8 = 4) / rms_norm_eps (->
     1e-6) / rope_theta (-> 1e4) / mlp_only_layers keys; hidden 32; embeddings std 0.003, router
     std 0.7/sqrt(d) (the top-8 mass well below 1, so renormalising matters), expert outputs x1.5:
     ppl float64 64, float32 64; generate float64; hf info --check.
  P1 qwen2_moe-mixed: 3 layers, hidden 32, 4 heads / 2 kv (GQA), q/k/v biases of std 0.5,
     6 experts top-2 of moe_intermediate_size 16, a shared expert of 24 (shared_expert_gate rows
     of std 2/sqrt(d), so sigmoid varies from token to token), intermediate_size 40,
     mlp_only_layers [1] (layer 1 dense), norm_topk_prob true, qkv_bias true written: ppl
     float64 9 / 64, float32 64, bfloat16 64 (3e-2); generate float64 (two prompts) / float32;
     hf info --check. P1-false: P1's weights with norm_topk_prob false: ppl float64 64,
     generate float64, hf info --check.
  P2 qwen2_moe-step2-defaults-bf16: 4 layers, decoder_sparse_step 2 (layers 1, 3 MoE), hidden 64,
     16 query heads and no num_key_value_heads (-> 16), 8 experts, no num_experts_per_tok (-> 4)
     / norm_topk_prob (-> false) / qkv_bias (-> true: biases present) / rms_norm_eps (-> 1e-6) /
     rope_theta (-> 1e4) / mlp_only_layers / tie keys; moe 8, shared 12, dense 16 units; BF16 in
     2 shards + index; embeddings std 0.003, router std 0.7/sqrt(d), expert outputs x1.5: ppl
     float64 / float32 64; generate float64; hf info --check.
  defaults through hf info (without --check, which reads config.json only): M1 without
     num_local_experts (-> 8), and with 8 experts without num_experts_per_tok (-> 2), O1 without
     num_experts (-> 64), and with 10 experts without num_experts_per_tok (-> 8), Q1 without
     num_experts (-> 128), without moe_intermediate_size (-> 768), without mlp_only_layers (->
     [], layer 1 MoE), and with decoder_sparse_step 3 dropped (-> 1); P1 without num_experts and
     num_experts_per_tok (-> 60, top-4), without moe_intermediate_size and
     shared_expert_intermediate_size (-> 1408, 5632), and with decoder_sparse_step 3 dropped
     together with mlp_only_layers (-> 1, []: every layer MoE): the printed parameter count =
     num_parameters() of the defaults, the active count and the experts line likewise; hf ppl
     of the original classes' folders (weights of the explicit sizes) exits 2 (not repeated for
     the num_experts_per_tok folders, whose weights fit, nor for Qwen2-MoE's, to save runs).
  Refusals (hf ppl; exit 2; stderr or stdout naming every needle group): num_experts_per_tok
     > experts (each class; num_experts_per_tok); OLMoE clip_qkv 8.0 (clip_qkv); OLMoE
     head_dim 16 != 32/4 (head_dim); Qwen3-MoE use_sliding_window true (use_sliding_window);
     a missing expert tensor in each class (the tensor's stored name); a router of the wrong
     shape (the gate tensor and num_local_experts / num_experts); a Qwen3-MoE expert of the
     wrong width (the tensor and moe_intermediate_size); attention_bias true (each class);
     Mixtral hidden_act gelu (hidden_act); an extra expert tensor beyond num_local_experts
     (its name); a Mixtral folder with OLMoE's tensor names (a block_sparse_moe or mlp.
     tensor); a Qwen3-MoE folder whose dense layer is declared MoE (a layer-1 mlp tensor).
     Qwen2-MoE (P1's folder altered): num_experts_per_tok 7 > 6; use_sliding_window true;
     qkv_bias false (qkv_bias); a missing mlp.shared_expert.down_proj (its name, and its shape
     [32, 24] as "32, 24" / "32 x 24"); a missing shared_expert_gate (its name and [1, 32]); a
     shared_expert_gate of shape [2, 32] (its name); a shared expert up_proj of 26 rows (the
     tensor and shared_expert_intermediate_size); a routed expert of 14 rows (the tensor and
     moe_intermediate_size); a missing routed expert; a missing k_proj bias (its name); dense
     layer 1 declared MoE (a layer-1 mlp tensor); layer 0 without any shared expert tensor (a
     shared_expert name). The folder's own name is blanked out of the message before the
     needles are looked for (refuse-olmoe-clip_qkv's folder name used to answer for clip_qkv).
  hf info --check: exit 0, the architecture, "all tensors present", the printed parameter
     count = transformers' num_parameters() (every expert), the "heads H query, Hkv key/value,
     head_dim hd" line, "rope_theta T, rms_norm_eps E" (defaults included), the attention line
     (full causal, or M3's "sliding window of 6" on every layer), the active parameters per
     token on the parameters line ("parameters N (A active per token)") = active_count, and the
     experts line ("experts  E per layer, top k per token (weights renormalised | softmax
     weights as they are), width F, in M of L layers", plus for Qwen2-MoE ", and a shared expert
     of width Fs (sigmoid-gated)": the number after "shared" = shared_expert_intermediate_size;
     no "shared" for the other classes): all of
     E, k, renormalised, F, M, L and the shared width must match.

Routing near-ties: the reference records the smallest gap at the top-k boundary (between
the k-th and (k+1)-th probability, and of the router logits) over everything it computed
for a case; a float64 comparison needs a probability gap >= 1e-6, a float32 one a logit gap
>= 1e-4 (else the comparison is skipped with a note saying "reseed"); the seeds below were
chosen so that none is skipped. bfloat16 runs are compared within 3e-2 only.
Tolerances as qwen2_reference: summed loss, perplexity / 10 and bits/byte 1e-5 relative;
greedy ids exact (a float32 logit near-tie ends the comparison with a note).
On a disagreement (first 6), the case is re-evaluated under other readings (renormalised or
not, gate / up (w1 / w3) swapped, experts reversed against the router rows, top-k +- 1, a
dense soft mixture over all experts, per-head / whole / no q/k norms, eps, rope_theta, no
window; Qwen2-MoE: no shared expert, the shared expert ungated (weight 1), no q/k/v biases)
and the readings matching lol are named.
Runtime of `check` (2 shared cores, under nice, each lol start ~1.1-1.4 s): about 125 s, 106 lol
runs, 307 comparisons (before Qwen2-MoE: about 80 s, 72 runs, 174 comparisons).
`selftest` (about 60 s of pure Python; `check` does not run it): MoeRef with one expert equals qwen2_reference's
Llama Ref (Mixtral), olmo_reference's OlmoRef with pre-norm placement (OLMoE) and
qwen3_reference's Qwen3Ref with every layer dense (Qwen3-MoE); identical experts with
renormalisation equal the dense FFN; a hand-worked routing example (top-2 of
[0.1, 0.2, 0.3, 0.4] and a tie); cached greedy = recomputation; each wrong reading (no
renormalisation for Mixtral, renormalisation for OLMoE with norm_topk_prob false, per-head
q_norm for OLMoE, w1 / w3 swapped, experts reversed, top-k +- 1, ...) moves each case's loss by
more than 20x the tolerance and changes greedy ids; config defaults; parameter counts; and
the case seeds' routing margins. Qwen2-MoE: every layer dense equals qwen2_reference's Qwen2
Ref (q/k/v biases); 3 identical experts (down / 2, renormalised) plus a shared copy (down)
under a zero shared_expert_gate (sigmoid 0 = 1/2) equal the same Qwen2 Ref, while the
ungated and the forgotten shared expert differ from it by > 1e-3; and P1 / P2's loss moves by
> 20x the tolerance, and their greedy ids change, without the shared expert, with it
ungated, and without the q/k/v biases (the P2 seed 607 was picked from 601..610 for routing
margins and for every reading moving its loss: seed 601's gate / up swap moved the loss sum
by only 7e-6 relative by chance, its logits moved by O(1)). The active count equals the
stored values less the unused experts' tensors, and the Qwen1.5-MoE-A2.7B count above.

ASSUMED (open in the docs, taken from transformers as remembered):
  1. OLMoE's k_norm width is (hidden_size / H) * num_key_value_heads, q_norm's hidden_size.
  2. Qwen3-MoE's rms_norm_eps default 1e-6 and rope_theta 1e4; Mixtral's head_dim key read
     as MistralAttention reads it (given or d / H).
  3. `hf info` prints "parameters N" as for the dense classes (regex `parameters\\s+([\\d,]+)`),
     followed by "(A active per token)" for these classes.
  4. Refusals follow docs/hf.md: exit 2, the message names the field / tensor; for a router or
     expert of the wrong shape both the tensor and the config field are required (docs/hf.md:
     "a shape error names the config fields", and loading errors name the tensor).
  5. `hf ppl` adds no BOS token and predicts every token of a window but the first (docs/hf.md);
     greedy picks the lowest id on an exact tie.
  6. Qwen2-MoE (Qwen2MoeSparseMoeBlock / Qwen2MoeConfig as remembered): the shared expert is a
     SwiGLU Qwen2MoeMLP of shared_expert_intermediate_size; its gate is sigmoid of a bias-free
     Linear(hidden, 1) on the same post_attention_layernorm output the router sees; the gated
     shared output is added after the routed sum; dense layers (mlp_only_layers /
     decoder_sparse_step) have no shared expert; Qwen2MoeAttention has q/k/v biases, no o_proj
     bias and head_dim = hidden_size / num_attention_heads; num_key_value_heads null -> H;
     rms_norm_eps 1e-6; rope_theta 1e4; tie_word_embeddings false.
  7. The experts line and the active count: formats as printed by lol (inspected, not documented
     in docs/hf.md beyond "active parameters per token are baselines::cost_model's
     active_parameters"); what they must say is derived here independently.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time
from operator import mul

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import (Checker, apply_rope, compare_greedy, f32, mean_ce,  # noqa: E402
                             ppl_windows, rmsnorm, silu, write_folder)
from safetensors_io import read_st  # noqa: E402,F401  (write_folder writes through safetensors_io.write_st)

TEXT = q2.TEXT
DIAGNOSE = [6]
DROP = object()
INF = float("inf")
MARGIN_P64 = 1e-6  # float64 comparisons: smallest top-k boundary probability gap
MARGIN_L32 = 1e-4  # float32 comparisons: smallest top-k boundary logit gap
CLASSES = {"MixtralForCausalLM": "mixtral", "OlmoeForCausalLM": "olmoe", "Qwen3MoeForCausalLM": "qwen3_moe",
           "Qwen2MoeForCausalLM": "qwen2_moe"}


def matvec(W, x):
    return [sum(map(mul, row, x)) for row in W]


# ---------------------------------------------------------------- config reading
def moe_params(cfg):
    kind = CLASSES[cfg["architectures"][0]]
    d, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    p = {"kind": kind, "d": d, "H": H, "L": L, "V": cfg["vocab_size"],
         "tied": cfg.get("tie_word_embeddings", False), "mpe": cfg.get("max_position_embeddings", 4096),
         "k": cfg.get("num_experts_per_tok", {"mixtral": 2, "qwen2_moe": 4}.get(kind, 8)), "window": None,
         "Fd": cfg.get("intermediate_size"), "Fs": 0, "bias": False}
    if kind == "mixtral":
        hkv = cfg.get("num_key_value_heads", 8)
        p.update(E=cfg.get("num_local_experts", 8), F=cfg["intermediate_size"], renorm=True,
                 eps=cfg.get("rms_norm_eps", 1e-5), theta=cfg.get("rope_theta", 1e6), qk="none",
                 hd=cfg.get("head_dim") or d // H, window=cfg.get("sliding_window"),
                 moe_layers=[True] * L)
    elif kind == "olmoe":
        hkv = cfg.get("num_key_value_heads")
        p.update(E=cfg.get("num_experts", 64), F=cfg["intermediate_size"], renorm=cfg.get("norm_topk_prob", False),
                 eps=cfg.get("rms_norm_eps", 1e-5), theta=cfg.get("rope_theta", 10000.0), qk="whole",
                 hd=d // H, moe_layers=[True] * L)
    elif kind == "qwen2_moe":
        hkv = cfg.get("num_key_value_heads", 16)
        step = cfg.get("decoder_sparse_step", 1)
        only = cfg.get("mlp_only_layers") or []
        E = cfg.get("num_experts", 60)
        p.update(E=E, F=cfg.get("moe_intermediate_size", 1408), Fs=cfg.get("shared_expert_intermediate_size", 5632),
                 renorm=cfg.get("norm_topk_prob", False), eps=cfg.get("rms_norm_eps", 1e-6),
                 theta=cfg.get("rope_theta", 10000.0), qk="none", hd=cfg.get("head_dim") or d // H,
                 bias=cfg.get("qkv_bias", True),
                 moe_layers=[(i not in only) and E > 0 and (i + 1) % step == 0 for i in range(L)])
    else:
        hkv = cfg.get("num_key_value_heads", 4)
        step = cfg.get("decoder_sparse_step", 1)
        only = cfg.get("mlp_only_layers") or []
        E = cfg.get("num_experts", 128)
        p.update(E=E, F=cfg.get("moe_intermediate_size", 768), renorm=cfg.get("norm_topk_prob", False),
                 eps=cfg.get("rms_norm_eps", 1e-6), theta=cfg.get("rope_theta", 10000.0), qk="per_head",
                 hd=cfg.get("head_dim") or d // H,
                 moe_layers=[(i not in only) and E > 0 and (i + 1) % step == 0 for i in range(L)])
    p["Hkv"] = H if hkv is None else hkv
    return p


def names(kind, i, e=None, what=None):
    """stored tensor names of layer i's FFN: the router (e None, what 'router'), expert e's
    'gate' / 'up' / 'down', or a dense layer's (e None)"""
    pre = "model.layers.%d." % i
    if what == "router":
        return pre + ("block_sparse_moe.gate.weight" if kind == "mixtral" else "mlp.gate.weight")
    if e is None:
        return pre + "mlp.%s_proj.weight" % what
    if e == "shared":  # Qwen2-MoE's shared expert: 'gate' / 'up' / 'down', or 'router' of it (shared_expert_gate)
        return pre + ("mlp.shared_expert_gate.weight" if what == "sgate" else "mlp.shared_expert.%s_proj.weight" % what)
    if kind == "mixtral":
        return pre + "block_sparse_moe.experts.%d.%s.weight" % (e, {"gate": "w1", "up": "w3", "down": "w2"}[what])
    return pre + "mlp.experts.%d.%s_proj.weight" % (e, what)


# ---------------------------------------------------------------- the model
class MoeRef(q2.Ref):
    """The three classes in float64. Reuses qwen2_reference.Ref's prefill / greedy; weights,
    block and head are this class's. Keyword arguments select alternative readings
    (sensitivity checks and diagnosis):
      renorm: True / False instead of the class's rule; topk: another k
      swap: gate and up of every expert swapped (Mixtral: w1 / w3)
      perm: 'rev' -- router row e drives expert E-1-e; soft: every expert weighted by p_e
      qk: 'none', 'whole', 'per_head' (per-head weights [hd]), 'per_head_sliced' (OLMoE's
          whole-projection weight sliced per head), 'whole_tiled' (Qwen3-MoE's [hd] weight
          tiled over the heads, statistics over the whole projection)
      eps / theta / window: overrides
      shared (Qwen2-MoE): 'gated' (the class: sigmoid(shared_expert_gate x)), 'ungated' (weight 1),
          'none' (no shared expert)
      bias (Qwen2-MoE): False ignores the q/k/v biases"""

    def __init__(self, cfg, weights, renorm=None, topk=None, swap=False, perm=None, soft=False, qk=None,
                 eps=None, theta=None, window="config", shared="gated", bias=None):
        p = moe_params(cfg)
        self.cfg, self.p, self.kind = cfg, p, p["kind"]
        self.d, self.L, self.H, self.Hkv, self.hd, self.V = p["d"], p["L"], p["H"], p["Hkv"], p["hd"], p["V"]
        self.E = p["E"]
        self.k = p["k"] if topk is None else topk
        self.renorm = p["renorm"] if renorm is None else renorm
        self.soft = soft
        self.eps = p["eps"] if eps is None else eps
        self.qk = p["qk"] if qk is None else qk
        self.window = p["window"] if window == "config" else window
        self.shared = shared
        use_bias = p["bias"] if bias is None else bias
        M = {k_: q2.mat(v) for k_, v in weights.items()}
        self.embed = M["model.embed_tokens.weight"]
        self.lm_head = self.embed if p["tied"] else M["lm_head.weight"]
        self.norm = M["model.norm.weight"]
        th = p["theta"] if theta is None else theta
        self.cos, self.sin = q2.rope_tables({"rope_theta": th, "max_position_embeddings": p["mpe"]}, self.hd,
                                            min(p["mpe"], 512))
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            ly = {"in": M[pre + "input_layernorm.weight"], "post": M[pre + "post_attention_layernorm.weight"],
                  "q": M[pre + "self_attn.q_proj.weight"], "k": M[pre + "self_attn.k_proj.weight"],
                  "v": M[pre + "self_attn.v_proj.weight"], "o": M[pre + "self_attn.o_proj.weight"],
                  "q_norm": M.get(pre + "self_attn.q_norm.weight"), "k_norm": M.get(pre + "self_attn.k_norm.weight"),
                  "moe": p["moe_layers"][i]}
            for w in ("q", "k", "v"):  # Qwen2-MoE's q/k/v biases (a missing one is a KeyError: the folder is wrong)
                ly[w + "b"] = M[pre + "self_attn.%s_proj.bias" % w] if use_bias else None
            if ly["moe"] and self.kind == "qwen2_moe":
                g, u, dn = (M[names(self.kind, i, "shared", w)] for w in ("gate", "up", "down"))
                ly["shared"] = (u, g, dn) if swap else (g, u, dn)
                ly["sgate"] = M[names(self.kind, i, "shared", "sgate")][0]  # [1, d] -> its row
            if ly["moe"]:
                ly["router"] = M[names(self.kind, i, what="router")]
                ex = []
                for e in range(self.E):
                    g, u, dn = (M[names(self.kind, i, e, w)] for w in ("gate", "up", "down"))
                    ex.append((u, g, dn) if swap else (g, u, dn))
                if perm == "rev":
                    ex = ex[::-1]
                ly["experts"] = ex
            else:
                ly["dense"] = tuple(M[names(self.kind, i, None, w)] for w in ("gate", "up", "down"))
            self.layers.append(ly)
        self.gates = None
        self.use_lora = False
        self.memo = {}
        self.min_pgap = INF  # smallest top-k boundary probability gap seen
        self.min_lgap = INF  # ... of the router logits
        self.routes = 0

    # -- q / k norms
    def _qk(self, x, w, n):
        hd, eps, how = self.hd, self.eps, self.qk
        if how == "none" or w is None:
            return x
        if how == "whole":
            return rmsnorm(x, w, eps)
        if how == "whole_tiled":
            return rmsnorm(x, w * n, eps)
        out = []
        for a in range(n):
            wa = w if how == "per_head" else w[a * hd:(a + 1) * hd]
            out += rmsnorm(x[a * hd:(a + 1) * hd], wa, eps)
        return out

    @staticmethod
    def expert(ex, x):
        g, u, dn = ex
        return matvec(dn, [silu(a) * b for a, b in zip(matvec(g, x), matvec(u, x))])

    def route(self, logits):
        """(selected experts in descending p, their weights, p); records the boundary margin"""
        E, k = len(logits), self.k
        m = max(logits)
        ex = [math.exp(z - m) for z in logits]
        tot = sum(ex)
        p = [v / tot for v in ex]
        order = sorted(range(E), key=lambda e: (-p[e], e))  # torch.topk: ties -> lower index (docs/hf.md)
        S = order[:k]
        self.routes += 1
        if k < E:
            self.min_pgap = min(self.min_pgap, p[order[k - 1]] - p[order[k]])
            self.min_lgap = min(self.min_lgap, logits[order[k - 1]] - logits[order[k]])
        if self.soft:
            return list(range(E)), p, p
        if self.renorm:
            s = sum(p[e] for e in S)
            return S, [p[e] / s for e in S], p
        return S, [p[e] for e in S], p

    def moe(self, ly, x):
        S, w, _ = self.route(matvec(ly["router"], x))
        y = [0.0] * self.d
        for e, we in zip(S, w):
            y = [a + we * b for a, b in zip(y, self.expert(ly["experts"][e], x))]
        if "shared" in ly and self.shared != "none":  # Qwen2MoeSparseMoeBlock: + sigmoid(gate_s x) shared(x)
            g = 1.0 if self.shared == "ungated" else q2.sigmoid(sum(map(mul, ly["sgate"], x)))
            y = [a + g * b for a, b in zip(y, self.expert(ly["shared"], x))]
        return y

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, Hkv, hd, eps, W = self.H, self.Hkv, self.hd, self.eps, self.window
        rep = H // Hkv
        scale = hd ** -0.5
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = rmsnorm(h, ly["in"], eps)
            q, k, v = matvec(ly["q"], x), matvec(ly["k"], x), matvec(ly["v"], x)
            if ly["qb"] is not None:
                q, k, v = ([a + b for a, b in zip(z, ly[w + "b"])] for z, w in ((q, "q"), (k, "k"), (v, "v")))
            q = self._qk(q, ly["q_norm"], H)
            k = self._qk(k, ly["k_norm"], Hkv)
            c, s = self.cos[pos], self.sin[pos]
            qh = [apply_rope(q[a * hd:(a + 1) * hd], c, s) for a in range(H)]
            kh = [apply_rope(k[a * hd:(a + 1) * hd], c, s) for a in range(Hkv)]
            cache["k"].append(kh)
            cache["v"].append([v[a * hd:(a + 1) * hd] for a in range(Hkv)])
            assert len(cache["k"]) == pos + 1
            lo = 0 if W is None else max(0, pos - W + 1)  # keys j with pos - W < j <= pos
            keys, vals = cache["k"][lo:], cache["v"][lo:]
            att = []
            for a in range(H):
                g = a // rep
                qa = qh[a]
                sc = [sum(map(mul, qa, kk[g])) * scale for kk in keys]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for wgt, vv in zip(e, vals):
                    wgt /= tot
                    o = [oj + wgt * vj for oj, vj in zip(o, vv[g])]
                att.extend(o)
            h2 = [x1 + x2 for x1, x2 in zip(h, matvec(ly["o"], att))]
            x = rmsnorm(h2, ly["post"], eps)
            y = self.moe(ly, x) if ly["moe"] else self.expert(ly["dense"], x)
            out.append([x1 + x2 for x1, x2 in zip(h2, y)])
        return out

    def head(self, h):
        return matvec(self.lm_head, rmsnorm(h, self.norm, self.eps))


# ---------------------------------------------------------------- tiny folders
def _apply(c, kw):
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def _common(arch, mt):
    return {"architectures": [arch], "model_type": mt, "vocab_size": 264, "hidden_size": 32,
            "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 256, "rope_theta": 500.0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
            "attention_dropout": 0.0, "initializer_range": 0.02, "tie_word_embeddings": False, "use_cache": True,
            "torch_dtype": "float32", "bos_token_id": None, "eos_token_id": q2.IM_END,
            "output_router_logits": False}


def mixtral_config(**kw):
    c = _common("MixtralForCausalLM", "mixtral")
    c.update({"num_local_experts": 5, "num_experts_per_tok": 2, "sliding_window": None,
              "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0})
    return _apply(c, kw)


def olmoe_config(**kw):
    c = _common("OlmoeForCausalLM", "olmoe")
    c.update({"num_experts": 6, "num_experts_per_tok": 3, "norm_topk_prob": True, "clip_qkv": None,
              "attention_bias": False, "rope_scaling": None, "router_aux_loss_coef": 0.01,
              "pad_token_id": q2.ENDOFTEXT})
    return _apply(c, kw)


def qwen3moe_config(**kw):
    c = _common("Qwen3MoeForCausalLM", "qwen3_moe")
    c.update({"hidden_size": 24, "head_dim": 8, "intermediate_size": 40, "moe_intermediate_size": 16,
              "num_experts": 6, "num_experts_per_tok": 2, "norm_topk_prob": True, "decoder_sparse_step": 1,
              "mlp_only_layers": [1], "attention_bias": False, "use_sliding_window": False, "sliding_window": 4096,
              "max_window_layers": 28, "rope_scaling": None, "router_aux_loss_coef": 0.001})
    return _apply(c, kw)


def qwen2moe_config(**kw):
    c = _common("Qwen2MoeForCausalLM", "qwen2_moe")
    c.update({"intermediate_size": 40, "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24,
              "num_experts": 6, "num_experts_per_tok": 2, "norm_topk_prob": True, "decoder_sparse_step": 1,
              "mlp_only_layers": [1], "qkv_bias": True, "use_sliding_window": False, "sliding_window": 4096,
              "max_window_layers": 28, "rope_scaling": None, "router_aux_loss_coef": 0.001})
    return _apply(c, kw)


QS = (0.5, 1.0, 2.0, 1.4)  # q head scales (cycled)
KS = (0.6, 1.6)  # k head scales (cycled)


def moe_weights(cfg, seed, embed_std=1.0, router_std=2.0, down_scale=2.0, sgate_std=2.0):
    """random tensors under the class's own names (see the module docstring)"""
    rng = random.Random(seed)
    p = moe_params(cfg)
    kind, d, L, V, H, Hkv, hd, E, F = (p[k] for k in ("kind", "d", "L", "V", "H", "Hkv", "hd", "E", "F"))
    T = {}

    def put(name, shape, gen):
        rows = shape[0]
        cols = shape[1] if len(shape) > 1 else 1
        T[name] = (list(shape), [f32(gen(r)) for r in range(rows) for _ in range(cols)])
    put("model.embed_tokens.weight", [V, d], lambda r: rng.gauss(0, embed_std))
    if not p["tied"]:
        put("lm_head.weight", [V, d], lambda r: rng.gauss(0, 0.2))
    put("model.norm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
    for i in range(L):
        pre = "model.layers.%d." % i
        put(pre + "input_layernorm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
        put(pre + "post_attention_layernorm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
        put(pre + "self_attn.q_proj.weight", [H * hd, d],
            lambda r: rng.gauss(0, 2.5 * QS[(r // hd) % 4] / math.sqrt(d)))
        put(pre + "self_attn.k_proj.weight", [Hkv * hd, d],
            lambda r: rng.gauss(0, 2.5 * KS[(r // hd) % 2] / math.sqrt(d)))
        put(pre + "self_attn.v_proj.weight", [Hkv * hd, d], lambda r: rng.gauss(0, 1.2 / math.sqrt(d)))
        put(pre + "self_attn.o_proj.weight", [d, H * hd], lambda r: rng.gauss(0, 1.2 / math.sqrt(H * hd)))
        if kind == "qwen2_moe":
            for w, n in (("q", H), ("k", Hkv), ("v", Hkv)):
                put(pre + "self_attn.%s_proj.bias" % w, [n * hd], lambda r: rng.gauss(0, 0.5))
        if kind == "olmoe":
            put(pre + "self_attn.q_norm.weight", [H * hd], lambda r: 1 + rng.gauss(0, 0.4))
            put(pre + "self_attn.k_norm.weight", [Hkv * hd], lambda r: 1 + rng.gauss(0, 0.4))
        elif kind == "qwen3_moe":
            put(pre + "self_attn.q_norm.weight", [hd], lambda r: 1.5 + rng.gauss(0, 0.5))
            put(pre + "self_attn.k_norm.weight", [hd], lambda r: 1 + rng.gauss(0, 0.4))
        if p["moe_layers"][i]:
            put(names(kind, i, what="router"), [E, d], lambda r: rng.gauss(0, router_std / math.sqrt(d)))
            for e in range(E):
                put(names(kind, i, e, "gate"), [F, d], lambda r: rng.gauss(0.1, 2.0 / math.sqrt(d)))
                put(names(kind, i, e, "up"), [F, d], lambda r: rng.gauss(0, 1.2 / math.sqrt(d)))
                put(names(kind, i, e, "down"), [d, F], lambda r: rng.gauss(0, down_scale / math.sqrt(F)))
            if kind == "qwen2_moe":
                Fs = p["Fs"]
                put(names(kind, i, "shared", "gate"), [Fs, d], lambda r: rng.gauss(0.1, 2.0 / math.sqrt(d)))
                put(names(kind, i, "shared", "up"), [Fs, d], lambda r: rng.gauss(0, 1.2 / math.sqrt(d)))
                put(names(kind, i, "shared", "down"), [d, Fs], lambda r: rng.gauss(0, down_scale / math.sqrt(Fs)))
                put(names(kind, i, "shared", "sgate"), [1, d], lambda r: rng.gauss(0, sgate_std / math.sqrt(d)))
        else:
            Fd = p["Fd"]
            put(names(kind, i, None, "gate"), [Fd, d], lambda r: rng.gauss(0.1, 2.0 / math.sqrt(d)))
            put(names(kind, i, None, "up"), [Fd, d], lambda r: rng.gauss(0, 1.2 / math.sqrt(d)))
            put(names(kind, i, None, "down"), [d, Fd], lambda r: rng.gauss(0, 1.2 / math.sqrt(Fd)))
    return T


def param_count(cfg):
    """transformers' num_parameters(): every expert, the lm_head once (absent when tied)"""
    p = moe_params(cfg)
    d, H, Hkv, hd, E, F = p["d"], p["H"], p["Hkv"], p["hd"], p["E"], p["F"]
    n = p["V"] * d * (1 if p["tied"] else 2) + d
    for i in range(p["L"]):
        n += 2 * d + (H * hd * d) * 2 + (Hkv * hd * d) * 2
        if p["kind"] == "olmoe":
            n += H * hd + Hkv * hd
        elif p["kind"] == "qwen3_moe":
            n += 2 * hd
        if p["bias"]:
            n += H * hd + 2 * Hkv * hd
        n += (E * d + E * 3 * F * d) if p["moe_layers"][i] else 3 * p["Fd"] * d
        if p["moe_layers"][i] and p["kind"] == "qwen2_moe":
            n += 3 * p["Fs"] * d + d  # the shared expert and its gate [1, d]
    return n


def active_count(cfg):
    """the active parameters per token (docs/hf.md: baselines::cost_model's active_parameters;
    docs/checkpoint-format.md: all parameters minus the experts a token cannot use): every
    parameter counted as param_count counts it (embedding and lm_head included), less the
    num_experts - num_experts_per_tok routed experts each MoE layer leaves unused (the router,
    the top-k experts, Qwen2-MoE's shared expert and its gate stay)"""
    p = moe_params(cfg)
    unused = sum(p["moe_layers"]) * max(0, p["E"] - p["k"]) * 3 * p["F"] * p["d"]
    return param_count(cfg) - unused


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = moe_params(cfg)
    kind, k, E = p["kind"], p["k"], p["E"]
    out = []
    if kind == "mixtral":
        out.append(("routing weights not renormalised", {"renorm": False}))
        out.append(("w1 / w3 swapped (w3 as the gate, w1 as up)", {"swap": True}))
    else:
        out.append(("routing weights %s" % ("not renormalised" if p["renorm"] else "renormalised (norm_topk_prob "
                                                                                   "read as true)"),
                    {"renorm": not p["renorm"]}))
        out.append(("gate_proj / up_proj swapped", {"swap": True}))
    out.append(("experts reversed against the router rows", {"perm": "rev"}))
    if k > 1:
        out.append(("top-k %d instead of %d" % (k - 1, k), {"topk": k - 1}))
    if k < E:
        out.append(("top-k %d instead of %d" % (k + 1, k), {"topk": k + 1}))
        out.append(("a dense soft mixture (every expert weighted by p)", {"soft": True}))
    if kind == "qwen2_moe":
        out += [("no shared expert", {"shared": "none"}),
                ("the shared expert ungated (weight 1)", {"shared": "ungated"}),
                ("no q/k/v biases", {"bias": False})]
    if kind == "olmoe":
        out += [("per-head q/k norms (weights sliced per head)", {"qk": "per_head_sliced"}),
                ("no q_norm / k_norm", {"qk": "none"})]
    elif kind == "qwen3_moe":
        out += [("q/k norms across heads (the [head_dim] weight tiled)", {"qk": "whole_tiled"}),
                ("no q_norm / k_norm", {"qk": "none"})]
    out.append(("rms_norm_eps %g" % (1e-6 if p["eps"] != 1e-6 else 1e-5), {"eps": 1e-6 if p["eps"] != 1e-6 else 1e-5}))
    out.append(("rope_theta %g" % (1e4 if p["theta"] != 1e4 else 1e6), {"theta": 1e4 if p["theta"] != 1e4 else 1e6}))
    if p["window"] is not None and p["window"] < p["mpe"]:
        W = p["window"]
        out += [("no sliding window", {"window": None}), ("W+1 keys", {"window": W + 1})]
    return out


# ---------------------------------------------------------------- the comparisons
class Case:
    models = {}

    def __init__(self, ck, tag, cfg, T, dt="F32", shards=1, wtag=None):
        self.ck, self.tag, self.cfg, self.T, self.dt = ck, tag, cfg, T, dt
        self.wtag = wtag or tag
        write_folder(os.path.join(ck.work, tag), cfg, T, dt, shards)
        self.W = q2.as_weights(T, dt)
        self.model = self.alt({})
        self.diagnosed = [False, False]
        p = moe_params(cfg)
        print("[%s] %s H %d, Hkv %d, hd %d, %d experts top-%d (F %d%s), renorm %s, MoE layers %s, eps %g, theta %g, "
              "window %s, tied %s, %s%s" % (
                  tag, p["kind"], p["H"], p["Hkv"], p["hd"], p["E"], p["k"], p["F"],
                  ", shared F %d, q/k/v biases" % p["Fs"] if p["kind"] == "qwen2_moe" else "", p["renorm"],
                  "".join("M" if m else "D" for m in p["moe_layers"]), p["eps"], p["theta"], p["window"], p["tied"],
                  dt, " in %d shards" % shards if shards > 1 else ""), flush=True)

    def alt(self, kw):
        key = (self.wtag, self.dt, json.dumps(self.cfg, sort_keys=True), json.dumps(kw, sort_keys=True))
        if key not in Case.models:
            Case.models[key] = MoeRef(self.cfg, self.W, **kw)
        return Case.models[key]

    def margin_ok(self, what, dtype):
        m = self.model
        if dtype == "float64" and m.min_pgap < MARGIN_P64:
            self.ck.note("%s: routing near-tie (probability gap %.1e < %.0e at the top-k boundary): not compared; "
                         "reseed" % (what, m.min_pgap, MARGIN_P64))
            return False
        if dtype == "float32" and m.min_lgap < MARGIN_L32:
            self.ck.note("%s: routing near-tie (logit gap %.1e < %.0e at the top-k boundary): not compared; reseed"
                         % (what, m.min_lgap, MARGIN_L32))
            return False
        return True

    def ppl(self, ids, context, dtype="float64", rtol=1e-5):
        ck = self.ck
        what = "%s hf ppl --dtype %s --context %d" % (self.tag, dtype, context)
        tot, cnt = mean_ce(self.model, ppl_windows(ids, context))
        if not self.margin_ok(what, dtype):
            return
        out = os.path.join(ck.work, "ppl_%s_%s_%d.json" % (self.tag, dtype, context))
        nf = len(ck.failures)
        r = ck.run(["hf", "ppl", self.tag, "--data", "text.txt", "--context", context, "--dtype", dtype,
                    "--out", out, "--threads", 1])
        if r.returncode != 0:
            return
        res = json.load(open(out))
        ck.equal("%s hf ppl --context %d: targets" % (self.tag, context), res.get("targets"), cnt)
        ck.close(what + ": loss_sum", res.get("loss_sum"), tot, rtol)
        ck.close(what + ": perplexity", res.get("perplexity"), math.exp(tot / cnt), rtol * 10)
        nbytes = sum(1 if t < 256 else len(q2.SPECIALS[t - 256].encode()) for w in ppl_windows(ids, context)
                     for t in w[1:])
        ck.close(what + ": bits_per_byte", res.get("bits_per_byte"), tot / math.log(2) / nbytes, rtol)
        if len(ck.failures) > nf and DIAGNOSE[0] > 0 and not self.diagnosed[0]:
            DIAGNOSE[0] -= 1
            self.diagnosed[0] = True
            got = res.get("loss_sum")
            print("    reference loss_sum %.10g; lol %r" % (tot, got))
            if isinstance(got, (int, float)):
                for name, kw in alternatives(self.cfg):
                    a, _ = mean_ce(self.alt(kw), ppl_windows(ids, context))
                    print("    alternative %-58s loss_sum %.10g%s" % (name, a, "   <-- lol matches" if abs(
                        a - got) <= max(rtol, 1e-4) * abs(a) else ""))

    def generate(self, prompt, n, dtype="float64"):
        ck = self.ck
        what = "%s hf generate --dtype %s --tokens (%d prompt ids)" % (self.tag, dtype, len(prompt))
        toks, gaps, _, _ = self.model.greedy(prompt, n)
        if not self.margin_ok(what, dtype):
            return
        r = ck.run(["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype,
                    "--threads", 1, "--tokens", ",".join(map(str, prompt))])
        if r.returncode != 0:
            return
        got = q2.parse_ids(r.stdout)
        ok = compare_greedy(ck, what, got, toks, gaps, dtype != "float64")
        if not ok and DIAGNOSE[0] > 0 and not self.diagnosed[1]:
            DIAGNOSE[0] -= 1
            self.diagnosed[1] = True
            print("    prompt    %s\n    reference %s\n    lol       %s" % (prompt, toks, got))
            for name, kw in alternatives(self.cfg):
                if self.alt(kw).greedy(prompt, n)[0] == got:
                    print("    lol matches the reference under: %s" % name)

    def info(self, check=True):
        ck = self.ck
        args = ["hf", "info", self.tag] + (["--check"] if check else [])
        r = ck.run(args, expect_rc=None)
        ck.equal("%s hf info%s exits 0" % (self.tag, " --check" if check else ""), r.returncode, 0)
        if r.returncode != 0:
            return
        out = r.stdout
        arch = self.cfg["architectures"][0]
        ck.equal("%s hf info names %s" % (self.tag, arch), arch in out, True)
        if check:
            ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in out, True)
        m = re.search(r"parameters\s+([\d,]+)", out)
        if m:
            ck.equal("%s hf info parameters (num_parameters(), every expert)" % self.tag,
                     int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            ck.fail("%s: hf info prints no 'parameters N' line" % self.tag)
        check_active(ck, self.tag, out, self.cfg)
        p = moe_params(self.cfg)
        m = re.search(r"heads\s+(\d+) query, (\d+) key/value, head_dim (\d+)", out)
        ck.equal("%s hf info heads (query, key/value, head_dim)" % self.tag,
                 tuple(int(x) for x in m.groups()) if m else None, (p["H"], p["Hkv"], p["hd"]))
        m = re.search(r"rope_theta ([0-9.e+-]+), rms_norm_eps ([0-9.e+-]+)", out)
        ck.equal("%s hf info rope_theta, rms_norm_eps" % self.tag, tuple(float(x) for x in m.groups()) if m else None,
                 (float(p["theta"]), float(p["eps"])))
        m = re.search(r"^attention\s+(.*)$", out, re.M)
        att = m.group(1) if m else ""
        if p["window"] is not None and p["window"] < p["mpe"]:
            ck.equal("%s hf info attention: a sliding window of %d on every layer" % (self.tag, p["window"]),
                     bool(re.search(r"sliding window of %d\b" % p["window"], att)) and
                     ("every layer" in att or "layers 0..%d" % (p["L"] - 1) in att), True)
        else:
            ck.equal("%s hf info attention: full causal" % self.tag, att.startswith("full causal"), True)
        check_experts_line(ck, self.tag, out, self.cfg)


def parse_active(out):
    """hf info's 'parameters N (A active per token)' -> A, or None"""
    m = re.search(r"^parameters\s+[\d,]+\s*\(([\d,]+) active per token\)", out, re.M)
    return int(m.group(1).replace(",", "")) if m else None


def check_active(ck, tag, out, cfg):
    """the active parameters per token on hf info's parameters line = active_count"""
    ck.equal("%s hf info active parameters per token (all but the %d x (%d - %d) unused experts)" % (
        tag, sum(moe_params(cfg)["moe_layers"]), moe_params(cfg)["E"], moe_params(cfg)["k"]),
        parse_active(out), active_count(cfg))


def parse_experts(out):
    """hf info's experts line, as printed by the lol this was written against, e.g.
         experts       5 per layer, top 2 per token (weights renormalised), width 24, in 3 of 3 layers
         experts       12 per layer, top 8 per token (softmax weights as they are), width 8, in 2 of 4 layers
         experts       6 per layer, top 2 per token (weights renormalised), width 16, in 2 of 3 layers, and a
                       shared expert of width 24 (sigmoid-gated)                  (one line)
    -> dict(E, k, renorm (True / False / None: unrecognised), F, moe, L, shared (the number after 'shared'
    in the rest of the line, or None), line)"""
    m = re.search(r"^experts\s+(.*)$", out, re.M)
    if not m:
        return None
    line = m.group(1).strip()
    r = {"line": line}
    for key, pat in (("E", r"(\d+) per layer"), ("k", r"top (\d+) per token"), ("F", r"\bwidth (\d+)"),
                     ("moe", r"\bin (\d+) of \d+ layers"), ("L", r"\bin \d+ of (\d+) layers")):
        mm = re.search(pat, line)
        r[key] = int(mm.group(1)) if mm else None
    mm = re.search(r"top \d+ per token \(([^)]*)\)", line)
    how = mm.group(1).lower() if mm else ""
    r["renorm"] = (False if re.search(r"as they are|not renormali[sz]ed|unnormali[sz]ed", how) else
                   True if re.search(r"renormali[sz]ed", how) else None)
    mm = re.search(r"shared[^\d,;]*?(\d+)|(\d+)[^\d,;]*?shared", line)
    r["shared"] = int(mm.group(1) or mm.group(2)) if mm else None
    return r


def check_experts_line(ck, tag, out, cfg):
    """hf info's experts line: count, top-k, renormalised or not, width, MoE layers (how many, of how many),
    and Qwen2-MoE's shared expert width (no shared expert named for the other classes)"""
    p = moe_params(cfg)
    r = parse_experts(out)
    if r is None:
        ck.fail("%s: hf info prints no 'experts' line" % tag)
        return
    if ck.verbose:
        print("    info: experts %s" % r["line"])
    want = {"E": p["E"], "k": p["k"], "renorm": p["renorm"], "F": p["F"], "moe": sum(p["moe_layers"]), "L": p["L"],
            "shared": p["Fs"] if p["kind"] == "qwen2_moe" else None}
    ck.equal("%s hf info experts line: experts, top-k, renormalised, width, MoE layers, of layers, shared width" % tag,
             tuple(r[k] for k in ("E", "k", "renorm", "F", "moe", "L", "shared")),
             tuple(want[k] for k in ("E", "k", "renorm", "F", "moe", "L", "shared")))


LAST_REFUSAL = [""]


def refusal(ck, tag, cfg, T, groups, why=""):
    """hf ppl of a folder lol must refuse: exit 2, and every needle group (a tuple of
    alternatives) found in stderr / stdout"""
    write_folder(os.path.join(ck.work, tag), cfg, T)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
    # the folder's own name (a tag such as refuse-olmoe-clip_qkv) must not answer for the field or tensor
    msg = (r.stderr + r.stdout).replace(tag, "<folder>")
    LAST_REFUSAL[0] = msg
    missing = [g for g in groups if not any(n in msg for n in g)]
    ck.compared += 1
    if r.returncode != 2 or missing:
        ck.fail("%s%s: expected exit 2 naming %s; got exit %d, output %r" % (
            tag, why, " and ".join("/".join(g) for g in groups), r.returncode, msg.strip()[-500:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:200]))


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, weight seed, moe_weights keyword arguments, storage dtype, shards)"""
    M1 = mixtral_config()
    M2 = mixtral_config(num_hidden_layers=2, hidden_size=64, num_attention_heads=16, intermediate_size=12,
                        num_local_experts=DROP, num_experts_per_tok=DROP, num_key_value_heads=DROP, rope_theta=DROP, rms_norm_eps=DROP,
                        sliding_window=DROP, tie_word_embeddings=DROP, max_position_embeddings=128)
    M3 = mixtral_config(num_hidden_layers=2, head_dim=12, sliding_window=6, tie_word_embeddings=True,
                        num_local_experts=4, num_experts_per_tok=3, rope_theta=1000.0, intermediate_size=20)
    O1 = olmoe_config()
    O2 = olmoe_config(hidden_size=16, num_hidden_layers=2, intermediate_size=8, num_experts=DROP,
                      num_experts_per_tok=DROP, norm_topk_prob=DROP, num_key_value_heads=DROP, rms_norm_eps=DROP,
                      rope_theta=DROP, torch_dtype="bfloat16")
    Q1 = qwen3moe_config()
    P1 = qwen2moe_config()
    P2 = qwen2moe_config(hidden_size=64, num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=DROP,
                         num_experts=8, num_experts_per_tok=DROP, norm_topk_prob=DROP, moe_intermediate_size=8,
                         shared_expert_intermediate_size=12, intermediate_size=16, decoder_sparse_step=2,
                         mlp_only_layers=DROP, qkv_bias=DROP, rms_norm_eps=DROP, rope_theta=DROP,
                         tie_word_embeddings=DROP, torch_dtype="bfloat16", max_position_embeddings=128)
    Q2 = qwen3moe_config(hidden_size=32, num_hidden_layers=4, num_attention_heads=8, head_dim=DROP,
                         num_key_value_heads=DROP, num_experts=12, num_experts_per_tok=DROP, norm_topk_prob=DROP,
                         moe_intermediate_size=8, intermediate_size=20, decoder_sparse_step=2, mlp_only_layers=DROP,
                         rms_norm_eps=DROP, rope_theta=DROP)
    return {"M1": (M1, SEEDS["M1"], {}, "F32", 1), "M2": (M2, SEEDS["M2"], {"embed_std": 0.003}, "F32", 1),
            "M3": (M3, SEEDS["M3"], {"embed_std": 0.3}, "F32", 1), "O1": (O1, SEEDS["O1"], {}, "F32", 1),
            "O2": (O2, SEEDS["O2"], {"embed_std": 0.003}, "BF16", 2), "Q1": (Q1, SEEDS["Q1"], {}, "F32", 1),
            "Q2": (Q2, SEEDS["Q2"], {"embed_std": 0.003, "router_std": 0.7, "down_scale": 3.0}, "F32", 1),
            "P1": (P1, SEEDS["P1"], {}, "F32", 1),
            "P2": (P2, SEEDS["P2"], {"embed_std": 0.003, "router_std": 0.7, "down_scale": 3.0}, "BF16", 2)}


SEEDS = {"M1": 602, "M2": 601, "M3": 601, "O1": 607, "O2": 604, "Q1": 601, "Q2": 613, "P1": 601, "P2": 607}  # routing margins: selftest
PROMPT_A = q2.encode("Hello wor")


def prompts(ids):
    """(prompt, new tokens) of the generate checks"""
    return [(PROMPT_A, 14), (ids[5:22], 20)]


def case_weights(tag):
    cfg, seed, wkw, dt, shards = case_table()[tag]
    return cfg, moe_weights(cfg, seed, **wkw), dt, shards


def _retrying(ck):
    """Checker.run, waiting (up to ~10 min) while the lol binary is missing or busy (relinked)"""
    plain = ck.run

    def run(args, expect_rc=0):
        for attempt in range(40):
            try:
                return plain(args, expect_rc)
            except OSError as e:  # ENOENT, EACCES, ETXTBSY while the binary is rewritten
                print("  (lol not runnable: %s; retrying in 15 s)" % e, flush=True)
                time.sleep(15)
        return plain(args, expect_rc)
    ck.run = run


def check(lol, work, verbose=True):
    t0 = time.time()
    try:
        os.nice(5)
    except OSError:
        pass
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    _retrying(ck)
    ids = q2.encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    (pa, na), (pb, nb) = prompts(ids)

    # M1: Mixtral GQA, F32
    cfg, T1, dt, sh = case_weights("M1")
    c = Case(ck, "mixtral-gqa-f32", cfg, T1, dt, sh)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 3e-2)
    c.generate(pa, na)
    c.generate(pb, nb)
    c.generate(pb, nb, "float32")
    c.info()
    c = Case(ck, "mixtral-topk-all", dict(cfg, num_experts_per_tok=cfg["num_local_experts"]), T1, dt, sh,
             wtag="mixtral-gqa-f32")
    c.ppl(ids, 64)
    c.info()

    # M2: Mixtral defaults (8 experts, top-2, 8 kv heads, theta 1e6, eps 1e-5)
    cfg, T, dt, sh = case_weights("M2")
    c = Case(ck, "mixtral-defaults", cfg, T, dt, sh)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pb, nb)
    c.info()

    # M3: sliding window on every layer, head_dim 12, tied, top-3 of 4
    cfg, T, dt, sh = case_weights("M3")
    c = Case(ck, "mixtral-sliding-tied-hd12", cfg, T, dt, sh)
    c.ppl(ids, 40)
    c.generate(pb, nb)
    c.info()

    # O1: OLMoE GQA, norm_topk_prob true; O1-false: the same weights, norm_topk_prob false
    cfg, TO, dt, sh = case_weights("O1")
    c = Case(ck, "olmoe-gqa-norm_topk", cfg, TO, dt, sh)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pa, na)
    c.generate(pb, nb, "float32")
    c.info()
    c = Case(ck, "olmoe-gqa-norm_topk-false", dict(cfg, norm_topk_prob=False), TO, dt, sh,
             wtag="olmoe-gqa-norm_topk")
    c.ppl(ids, 64)
    c.generate(pb, nb)
    c.info()

    # O2: OLMoE defaults (64 experts, top-8, not renormalised, MHA), BF16 in 2 shards
    cfg, T, dt, sh = case_weights("O2")
    c = Case(ck, "olmoe-defaults-bf16", cfg, T, dt, sh)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 3e-2)
    c.generate(pb, nb)
    c.info()

    # Q1: Qwen3-MoE, head_dim 8 != 24/4, layer 1 dense (mlp_only_layers), norm_topk_prob true
    cfg, TQ, dt, sh = case_weights("Q1")
    c = Case(ck, "qwen3_moe-mixed", cfg, TQ, dt, sh)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pa, na)
    c.generate(pb, nb)
    c.generate(pb, nb, "float32")
    c.info()

    # Q2: Qwen3-MoE decoder_sparse_step 2 and defaults
    cfg, T, dt, sh = case_weights("Q2")
    c = Case(ck, "qwen3_moe-step2-defaults", cfg, T, dt, sh)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pb, nb)
    c.info()

    # P1: Qwen2-MoE GQA, q/k/v biases, layer 1 dense (mlp_only_layers), shared expert, norm_topk_prob true;
    # P1-false: the same weights, norm_topk_prob false
    cfg, TP, dt, sh = case_weights("P1")
    c = Case(ck, "qwen2_moe-mixed", cfg, TP, dt, sh)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 3e-2)
    c.generate(pa, na)
    c.generate(pb, nb)
    c.generate(pb, nb, "float32")
    c.info()
    c = Case(ck, "qwen2_moe-mixed-norm_topk-false", dict(cfg, norm_topk_prob=False), TP, dt, sh,
             wtag="qwen2_moe-mixed")
    c.ppl(ids, 64)
    c.generate(pb, nb)
    c.info()

    # P2: Qwen2-MoE decoder_sparse_step 2 and defaults (top-4, not renormalised, 16 kv heads, q/k/v biases, eps 1e-6,
    # theta 1e4, untied), BF16 in 2 shards
    cfg, T, dt, sh = case_weights("P2")
    c = Case(ck, "qwen2_moe-step2-defaults-bf16", cfg, T, dt, sh)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pb, nb)
    c.info()

    check_default_counts(ck)
    check_refusals(ck)

    dt_ = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt_))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


def check_default_counts(ck):
    """config defaults that set tensor shapes, through `hf info`'s parameter count (hf info without
    --check reads config.json only; the weights, of the explicit sizes, do not fit: hf ppl must refuse)"""
    print("[defaults through hf info's parameter count]", flush=True)
    cM, TM, _, _ = case_weights("M1")
    cO, TO, _, _ = case_weights("O1")
    cQ, TQ, _, _ = case_weights("Q1")
    cP, TP, _, _ = case_weights("P1")
    for tag, cfg, T, drop, refused in (
            ("defaults-mixtral-num_local_experts", cM, TM, ("num_local_experts",), True),
            ("defaults-mixtral-num_experts_per_tok", dict(cM, num_local_experts=8), TM, ("num_experts_per_tok",), False),
            ("defaults-olmoe-num_experts", cO, TO, ("num_experts",), True),
            ("defaults-olmoe-num_experts_per_tok", dict(cO, num_experts=10), TO, ("num_experts_per_tok",), False),
            ("defaults-qwen3_moe-num_experts", cQ, TQ, ("num_experts",), True),
            ("defaults-qwen3_moe-moe_intermediate_size", cQ, TQ, ("moe_intermediate_size",), True),
            ("defaults-qwen3_moe-mlp_only_layers", cQ, TQ, ("mlp_only_layers",), True),
            ("defaults-qwen3_moe-step", dict(cQ, decoder_sparse_step=3, mlp_only_layers=[]), TQ,
             ("decoder_sparse_step",), True),
            # Qwen2-MoE (hf info only, each folder dropping two keys whose defaults the experts line shows apart;
            # P2 runs the qkv_bias / num_experts_per_tok / norm_topk_prob / num_key_value_heads defaults)
            ("defaults-qwen2_moe-num_experts-top_k", cP, TP, ("num_experts", "num_experts_per_tok"), False),
            ("defaults-qwen2_moe-widths", cP, TP, ("moe_intermediate_size", "shared_expert_intermediate_size"), False),
            ("defaults-qwen2_moe-layers", dict(cP, decoder_sparse_step=3), TP, ("mlp_only_layers", "decoder_sparse_step"),
             False)):
        c = {k: v for k, v in cfg.items() if k not in drop}
        write_folder(os.path.join(ck.work, tag), c, T)
        r = ck.run(["hf", "info", tag], expect_rc=None)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        ck.equal("%s: hf info exits 0 and prints parameters = num_parameters() with the default %s" % (
            tag, "/".join(drop)), (r.returncode, int(m.group(1).replace(",", "")) if m else None), (0, param_count(c)))
        check_active(ck, tag, r.stdout, c)
        check_experts_line(ck, tag, r.stdout, c)
        if refused:
            r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
            ck.equal("%s: hf ppl refuses the weights of other sizes (exit 2)" % tag, r.returncode, 2)


def check_refusals(ck):
    print("[refusals]", flush=True)
    cM, TM, _, _ = case_weights("M1")
    cO, TO, _, _ = case_weights("O1")
    cQ, TQ, _, _ = case_weights("Q1")
    EM, EO, EQ = cM["num_local_experts"], cO["num_experts"], cQ["num_experts"]
    # experts per token above the experts
    refusal(ck, "refuse-mixtral-topk", dict(cM, num_experts_per_tok=EM + 1), TM, [("num_experts_per_tok",)])
    refusal(ck, "refuse-olmoe-topk", dict(cO, num_experts_per_tok=EO + 1), TO, [("num_experts_per_tok",)])
    refusal(ck, "refuse-qwen3_moe-topk", dict(cQ, num_experts_per_tok=EQ + 2), TQ, [("num_experts_per_tok",)])
    # OLMoE clip_qkv, head_dim
    refusal(ck, "refuse-olmoe-clip_qkv", dict(cO, clip_qkv=8.0), TO, [("clip_qkv",)])
    refusal(ck, "refuse-olmoe-head_dim", dict(cO, head_dim=16), TO, [("head_dim",)])
    # Qwen3-MoE sliding window
    refusal(ck, "refuse-qwen3_moe-sliding", dict(cQ, use_sliding_window=True, sliding_window=8, max_window_layers=1),
            TQ, [("use_sliding_window",)])
    # a missing expert tensor: named as the folder stores it
    for tag, cfg, T, nm in (("refuse-mixtral-missing-expert", cM, TM, names("mixtral", 1, 3, "up")),
                            ("refuse-olmoe-missing-expert", cO, TO, names("olmoe", 0, 2, "down")),
                            ("refuse-qwen3_moe-missing-expert", cQ, TQ, names("qwen3_moe", 2, 5, "gate"))):
        T2 = dict(T)
        del T2[nm]
        refusal(ck, tag, cfg, T2, [(nm,)])
    # a router of the wrong shape: the tensor and the config field
    d = cM["hidden_size"]
    T2 = dict(TM)
    nm = names("mixtral", 2, what="router")
    T2[nm] = ([EM + 1, d], T2[nm][1] + [0.1] * d)
    refusal(ck, "refuse-mixtral-router-shape", cM, T2, [(nm, "block_sparse_moe.gate"), ("num_local_experts",)])
    T2 = dict(TO)
    nm = names("olmoe", 1, what="router")
    T2[nm] = ([EO - 1, cO["hidden_size"]], T2[nm][1][:-cO["hidden_size"]])
    refusal(ck, "refuse-olmoe-router-shape", cO, T2, [(nm, "mlp.gate.weight"), ("num_experts",)])
    T2 = dict(TQ)
    nm = names("qwen3_moe", 0, what="router")
    T2[nm] = ([EQ + 2, cQ["hidden_size"]], T2[nm][1] + [0.0] * (2 * cQ["hidden_size"]))
    refusal(ck, "refuse-qwen3_moe-router-shape", cQ, T2, [(nm, "mlp.gate.weight"), ("num_experts",)])
    # a Qwen3-MoE expert of the wrong width: the tensor and moe_intermediate_size
    T2 = dict(TQ)
    nm = names("qwen3_moe", 2, 1, "up")
    Fq, dq = cQ["moe_intermediate_size"], cQ["hidden_size"]
    T2[nm] = ([Fq + 2, dq], T2[nm][1] + [0.0] * (2 * dq))
    refusal(ck, "refuse-qwen3_moe-expert-width", cQ, T2, [(nm, "experts.1.up_proj"), ("moe_intermediate_size",)])
    # attention_bias (each class), Mixtral hidden_act
    refusal(ck, "refuse-mixtral-attention_bias", dict(cM, attention_bias=True), TM, [("attention_bias",)])
    refusal(ck, "refuse-olmoe-attention_bias", dict(cO, attention_bias=True), TO, [("attention_bias",)])
    refusal(ck, "refuse-qwen3_moe-attention_bias", dict(cQ, attention_bias=True), TQ, [("attention_bias",)])
    refusal(ck, "refuse-mixtral-hidden_act", dict(cM, hidden_act="gelu"), TM, [("hidden_act",)])
    # an expert beyond num_local_experts (unexpected tensor)
    T2 = dict(TM)
    for w in ("gate", "up", "down"):
        src = names("mixtral", 0, 0, w)
        T2[names("mixtral", 0, EM, w)] = T2[src]
    refusal(ck, "refuse-mixtral-extra-expert", cM, T2, [(names("mixtral", 0, EM, "gate"), names("mixtral", 0, EM, "up"),
                                                         names("mixtral", 0, EM, "down"))])
    # a Mixtral folder with OLMoE's FFN names
    T2 = {}
    for k_, v in TM.items():
        k2 = k_.replace("block_sparse_moe.gate.", "mlp.gate.")
        for a, b in (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")):
            k2 = k2.replace("block_sparse_moe.experts.", "mlp.experts.").replace(".%s.weight" % a, ".%s.weight" % b)
        T2[k2] = v
    refusal(ck, "refuse-mixtral-olmoe-names", cM, T2, [("block_sparse_moe", ".mlp.")])
    # a Qwen3-MoE folder whose dense layer 1 (dense tensors) is declared an MoE layer
    refusal(ck, "refuse-qwen3_moe-dense-layer-as-moe", dict(cQ, mlp_only_layers=[]), TQ,
            [("model.layers.1.mlp.",)])
    check_refusals_qwen2_moe(ck)


def check_refusals_qwen2_moe(ck):
    cP, TP, _, _ = case_weights("P1")
    EP, dP, FP, FsP = cP["num_experts"], cP["hidden_size"], cP["moe_intermediate_size"], \
        cP["shared_expert_intermediate_size"]
    refusal(ck, "refuse-qwen2_moe-topk", dict(cP, num_experts_per_tok=EP + 1), TP, [("num_experts_per_tok",)])
    refusal(ck, "refuse-qwen2_moe-sliding", dict(cP, use_sliding_window=True, sliding_window=8, max_window_layers=1),
            TP, [("use_sliding_window",)])
    refusal(ck, "refuse-qwen2_moe-qkv_bias-false", dict(cP, qkv_bias=False), TP, [("qkv_bias",)])
    # a missing shared expert tensor: its stored name and its shape ([hidden, shared width] for down_proj)
    T2 = dict(TP)
    nm = names("qwen2_moe", 2, "shared", "down")
    del T2[nm]
    refusal(ck, "refuse-qwen2_moe-missing-shared-expert", cP, T2, [(nm,)])
    msg = LAST_REFUSAL[0]
    shape_said = bool(re.search(r"\b%d\s*(,|x|\u00d7|by)\s*%d\b" % (dP, FsP), msg))
    ck.equal("refuse-qwen2_moe-missing-shared-expert: the message gives the shape [%d, %d]" % (dP, FsP),
             shape_said, True)
    T2 = dict(TP)
    nm = names("qwen2_moe", 0, "shared", "sgate")
    del T2[nm]
    refusal(ck, "refuse-qwen2_moe-missing-shared_expert_gate", cP, T2, [(nm,)])
    msg = LAST_REFUSAL[0]
    ck.equal("refuse-qwen2_moe-missing-shared_expert_gate: the message gives the shape [1, %d]" % dP,
             bool(re.search(r"\b1\s*(,|x|\u00d7|by)\s*%d\b" % dP, msg)), True)
    # a shared_expert_gate of the wrong shape ([2, d])
    T2 = dict(TP)
    T2[nm] = ([2, dP], T2[nm][1] + [0.1] * dP)
    refusal(ck, "refuse-qwen2_moe-shared_expert_gate-shape", cP, T2, [(nm, "shared_expert_gate")])
    # a shared expert of the wrong width: the tensor and shared_expert_intermediate_size
    T2 = dict(TP)
    nm = names("qwen2_moe", 0, "shared", "up")
    T2[nm] = ([FsP + 2, dP], T2[nm][1] + [0.0] * (2 * dP))
    refusal(ck, "refuse-qwen2_moe-shared-expert-width", cP, T2,
            [(nm, "shared_expert.up_proj"), ("shared_expert_intermediate_size",)])
    # a routed expert of the wrong width: the tensor and moe_intermediate_size
    T2 = dict(TP)
    nm = names("qwen2_moe", 2, 3, "gate")
    T2[nm] = ([FP - 2, dP], T2[nm][1][:-2 * dP])
    refusal(ck, "refuse-qwen2_moe-expert-width", cP, T2, [(nm, "experts.3.gate_proj"), ("moe_intermediate_size",)])
    # a missing routed expert, a missing q/k/v bias
    T2 = dict(TP)
    nm = names("qwen2_moe", 0, 4, "up")
    del T2[nm]
    refusal(ck, "refuse-qwen2_moe-missing-expert", cP, T2, [(nm,)])
    T2 = dict(TP)
    nm = "model.layers.1.self_attn.k_proj.bias"
    del T2[nm]
    refusal(ck, "refuse-qwen2_moe-missing-k-bias", cP, T2, [(nm,)])
    # the dense layer 1 declared an MoE layer; an MoE layer without its shared expert at all
    refusal(ck, "refuse-qwen2_moe-dense-layer-as-moe", dict(cP, mlp_only_layers=[]), TP, [("model.layers.1.mlp.",)])
    T2 = {k_: v for k_, v in TP.items() if not k_.startswith("model.layers.0.mlp.shared_expert")}
    refusal(ck, "refuse-qwen2_moe-no-shared-expert", cP, T2, [("model.layers.0.mlp.shared_expert",)])


# ---------------------------------------------------------------- selftest
def _maxdiff(A, B):
    return max(abs(a - b) for ra, rb in zip(A, B) for a, b in zip(ra, rb))


def W64(T):
    return {k: (s, v, "F64") for k, (s, v) in T.items()}


def selftest():
    t0 = time.time()
    bad = []
    ids = q2.encode(TEXT)[:24]

    # 1. hand-worked routing: p = [0.1, 0.2, 0.3, 0.4]; top-2 = {3, 2}; renormalised 4/7, 3/7
    cfg = mixtral_config(num_hidden_layers=1, num_local_experts=4)
    m = MoeRef(cfg, W64(moe_weights(cfg, 1)))
    S, w, p = m.route([math.log(v) for v in (0.1, 0.2, 0.3, 0.4)])
    if S != [3, 2] or abs(w[0] - 4 / 7) > 1e-15 or abs(w[1] - 3 / 7) > 1e-15:
        bad.append("routing example (renormalised): %s %s" % (S, w))
    m.renorm = False
    S, w, p = m.route([math.log(v) for v in (0.1, 0.2, 0.3, 0.4)])
    if S != [3, 2] or abs(w[0] - 0.4) > 1e-15 or abs(w[1] - 0.3) > 1e-15:
        bad.append("routing example (not renormalised): %s %s" % (S, w))
    S, w, p = m.route([0.5, 1.0, 1.0, 0.2])  # tie: lower index first
    if S != [1, 2]:
        bad.append("routing tie: %s" % S)
    m.k = 1
    S, w, p = m.route([0.5, 1.0, 1.0, 0.2])
    if S != [1]:
        bad.append("routing tie, top-1: %s" % S)

    # 2. one expert, top-1 (renormalised weight 1): each class equals its parent's dense reference
    #   Mixtral -> qwen2_reference.Ref (Llama)
    c = mixtral_config(num_local_experts=1, num_experts_per_tok=1, num_hidden_layers=2)
    T = moe_weights(c, 11)
    lc = q2.make_config("LlamaForCausalLM", num_hidden_layers=2, intermediate_size=c["intermediate_size"],
                        rope_theta=c["rope_theta"], rms_norm_eps=c["rms_norm_eps"])
    TL = {}
    for k_, v in T.items():
        k2 = k_.replace("block_sparse_moe.experts.0.w1", "mlp.gate_proj").replace(
            "block_sparse_moe.experts.0.w3", "mlp.up_proj").replace("block_sparse_moe.experts.0.w2", "mlp.down_proj")
        if "block_sparse_moe.gate" not in k2:
            TL[k2] = v
    # qwen2_reference.Ref reads config.json from a folder: write one to a temporary place
    tmp = tempfile.mkdtemp(prefix="moe_selftest_")
    try:
        json.dump(lc, open(os.path.join(tmp, "config.json"), "w"))
        ref = q2.Ref(tmp, weights=W64(TL))
        a = ref.prefill(ids, "backbone")[0]
        b = MoeRef(c, W64(T)).prefill(ids)[0]
        dm = _maxdiff(a, b)
        print("  selftest: Mixtral with one expert vs qwen2_reference Llama Ref: max |logit diff| %.1e" % dm)
        if dm > 1e-9:
            bad.append("Mixtral with one expert != Llama reference (%.2e)" % dm)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    #   OLMoE -> olmo_reference.OlmoRef with pre-norm placement (its post_attention_layernorm before the attention,
    #   post_feedforward_layernorm before the MLP)
    import olmo_reference as olr
    c = olmoe_config(num_experts=1, num_experts_per_tok=1, num_hidden_layers=2, norm_topk_prob=True)
    T = moe_weights(c, 12)
    oc = olr.olmo2_config(num_hidden_layers=2, intermediate_size=c["intermediate_size"], rope_theta=c["rope_theta"],
                          rms_norm_eps=c["rms_norm_eps"])
    TO = {}
    for k_, v in T.items():
        k2 = k_.replace("post_attention_layernorm", "post_feedforward_layernorm").replace(
            "input_layernorm", "post_attention_layernorm").replace("mlp.experts.0.", "mlp.")
        if "mlp.gate.weight" not in k2:
            TO[k2] = v
    a = olr.OlmoRef(oc, W64(TO), placement="pre").prefill(ids)[0]
    b = MoeRef(c, W64(T)).prefill(ids)[0]
    dm = _maxdiff(a, b)
    print("  selftest: OLMoE with one expert vs olmo_reference OlmoRef (pre-norm): max |logit diff| %.1e" % dm)
    if dm > 1e-9:
        bad.append("OLMoE with one expert != OlmoRef pre-norm (%.2e)" % dm)
    #   Qwen3-MoE with every layer dense -> qwen3_reference.Qwen3Ref
    import qwen3_reference as q3r
    c = qwen3moe_config(mlp_only_layers=[0, 1, 2])
    T = moe_weights(c, 13)
    qc = q3r.make_config3(hidden_size=24, head_dim=8, num_hidden_layers=3, intermediate_size=c["intermediate_size"],
                          rope_theta=c["rope_theta"], rms_norm_eps=c["rms_norm_eps"])
    a = q3r.Qwen3Ref(weights=W64(T), cfg=qc).prefill(ids, "backbone")[0]
    b = MoeRef(c, W64(T)).prefill(ids)[0]
    dm = _maxdiff(a, b)
    print("  selftest: Qwen3-MoE, every layer dense, vs qwen3_reference Qwen3Ref: max |logit diff| %.1e" % dm)
    if dm > 1e-9:
        bad.append("Qwen3-MoE all dense != Qwen3Ref (%.2e)" % dm)

    #   Qwen2-MoE with every layer dense -> qwen2_reference.Ref on a Qwen2ForCausalLM (q/k/v biases)
    c = qwen2moe_config(mlp_only_layers=[0, 1, 2])
    T = moe_weights(c, 16)
    lc = q2.make_config("Qwen2ForCausalLM", num_hidden_layers=3, intermediate_size=c["intermediate_size"],
                        rope_theta=c["rope_theta"], rms_norm_eps=c["rms_norm_eps"])
    tmp = tempfile.mkdtemp(prefix="moe_selftest_")
    try:
        json.dump(lc, open(os.path.join(tmp, "config.json"), "w"))
        a = q2.Ref(tmp, weights=W64(T)).prefill(ids, "backbone")[0]
        b = MoeRef(c, W64(T)).prefill(ids)[0]
        dm = _maxdiff(a, b)
        print("  selftest: Qwen2-MoE, every layer dense, vs qwen2_reference Qwen2 Ref: max |logit diff| %.1e" % dm)
        if dm > 1e-9:
            bad.append("Qwen2-MoE all dense != Qwen2 Ref (%.2e)" % dm)
        #   Qwen2-MoE, every layer MoE with 3 identical experts (renormalised top-2: the expert itself), the
        #   shared expert a copy of the expert too and shared_expert_gate zero (sigmoid 0 = 1/2): the FFN is
        #   1.5 x the expert = Qwen2 Ref with down_proj scaled by 1.5; a gate row r != 0 instead: the Qwen2
        #   Ref FFN scaled per token by 1 + sigmoid(r . x) differs (not compared here: covered by section 5)
        c = qwen2moe_config(mlp_only_layers=[], num_experts=3, num_experts_per_tok=2, norm_topk_prob=True,
                            moe_intermediate_size=c["intermediate_size"],
                            shared_expert_intermediate_size=c["intermediate_size"])
        T2 = dict(moe_weights(c, 17))
        for i in range(3):
            for w in ("gate", "up", "down"):
                src = T[names("qwen2_moe", i, None, w)]
                if w == "down":
                    half = (src[0], [v * 0.5 for v in src[1]])  # expert = down / 2, shared = down (x 1/2)
                    for e in range(3):
                        T2[names("qwen2_moe", i, e, w)] = half
                    T2[names("qwen2_moe", i, "shared", w)] = src
                else:
                    for e in range(3):
                        T2[names("qwen2_moe", i, e, w)] = src
                    T2[names("qwen2_moe", i, "shared", w)] = src
            T2[names("qwen2_moe", i, "shared", "sgate")] = ([1, c["hidden_size"]], [0.0] * c["hidden_size"])
        for k_ in T:
            if ".mlp." not in k_:
                T2[k_] = T[k_]
        b = MoeRef(c, W64(T2)).prefill(ids)[0]  # y = down/2 (routed, weights sum 1) + 1/2 down = the dense FFN
        dm = _maxdiff(a, b)
        bu = MoeRef(c, W64(T2), shared="ungated").prefill(ids)[0]
        bn = MoeRef(c, W64(T2), shared="none").prefill(ids)[0]
        print("  selftest: Qwen2-MoE, identical experts + half-gated shared copy, vs Qwen2 Ref: max |logit diff| "
              "%.1e (ungated %.1e, no shared expert %.1e)" % (dm, _maxdiff(a, bu), _maxdiff(a, bn)))
        if dm > 1e-9 or _maxdiff(a, bu) < 1e-3 or _maxdiff(a, bn) < 1e-3:
            bad.append("Qwen2-MoE shared expert: gated %.2e (want ~0), ungated %.2e, none %.2e (want > 1e-3)"
                       % (dm, _maxdiff(a, bu), _maxdiff(a, bn)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # 3. identical experts, renormalised: the MoE layer is the dense FFN (routing cannot matter); not renormalised:
    # the FFN scaled by the top-k mass (differs)
    c = qwen3moe_config(mlp_only_layers=[], num_experts=4, num_experts_per_tok=2)
    T = moe_weights(c, 14)
    for i in range(3):
        for e in range(1, 4):
            for w in ("gate", "up", "down"):
                T[names("qwen3_moe", i, e, w)] = T[names("qwen3_moe", i, 0, w)]
    cd = qwen3moe_config(mlp_only_layers=[0, 1, 2], intermediate_size=c["moe_intermediate_size"])
    TD = {k_: v for k_, v in T.items() if ".experts." not in k_ and "mlp.gate.weight" not in k_}
    for i in range(3):
        for w in ("gate", "up", "down"):
            TD[names("qwen3_moe", i, None, w)] = T[names("qwen3_moe", i, 0, w)]
    a = MoeRef(cd, W64(TD)).prefill(ids)[0]
    b = MoeRef(c, W64(T)).prefill(ids)[0]
    bn = MoeRef(c, W64(T), renorm=False).prefill(ids)[0]
    if _maxdiff(a, b) > 1e-9 or _maxdiff(a, bn) < 1e-3:
        bad.append("identical experts: renormalised %.2e (want ~0), not renormalised %.2e (want > 1e-3)"
                   % (_maxdiff(a, b), _maxdiff(a, bn)))

    # 4. cached greedy = recomputation (every class)
    for cfg in (mixtral_config(sliding_window=4), olmoe_config(), qwen3moe_config(), qwen2moe_config()):
        T = W64(moe_weights(cfg, 15))
        toks = MoeRef(cfg, T).greedy(ids[:5], 8)[0]
        seq = list(ids[:5])
        for j in range(8):
            t = q2.argmax_low(MoeRef(cfg, T).prefill(seq)[0][-1])
            if t != toks[j]:
                bad.append("%s: cached greedy step %d: %d != recomputed %d" % (cfg["model_type"], j, toks[j], t))
                break
            seq.append(t)

    # 5. sensitivity: every alternative reading moves each case's loss by > 20x the tolerance, greedy ids change,
    # and the case seeds keep their routing margins
    full = q2.encode(TEXT)
    tab = case_table()
    for tag in ("M1", "M2", "M3", "O1", "O2", "Q1", "Q2", "P1", "P2"):
        cfg, T, dt, _ = case_weights(tag)
        Wt = q2.as_weights(T, dt)
        ctx = 64 if tag not in ("M3",) else 40
        model = MoeRef(cfg, Wt)
        ref, _ = mean_ce(model, ppl_windows(full, ctx))
        if tag in ("M1", "O1", "Q1", "P1"):
            mean_ce(model, ppl_windows(full, 9))
        refg = [model.greedy(pp, n)[0] for pp, n in prompts(full)]
        print("  selftest %-2s loss %.8g; routing margins: probability %.2e, logit %.2e over %d routings" % (
            tag, ref, model.min_pgap, model.min_lgap, model.routes))
        if model.min_pgap < MARGIN_P64 or model.min_lgap < MARGIN_L32:
            bad.append("case %s (seed %d): routing near-tie (probability gap %.1e, logit gap %.1e): reseed"
                       % (tag, tab[tag][1], model.min_pgap, model.min_lgap))
        if any(len(set(r_)) < 4 for r_ in refg):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refg))
        for name, kw in alternatives(cfg):
            alt = MoeRef(cfg, Wt, **kw)
            a, _ = mean_ce(alt, ppl_windows(full, ctx))
            rel = abs(a - ref) / abs(ref)
            print("  selftest %-2s %-60s relative change %.2e" % (tag, name, rel))
            eps_theta = name.startswith(("rms_norm_eps", "rope_theta"))
            if eps_theta and tag not in ("M2", "O2", "Q2", "P2"):
                continue  # the defaults cases test what eps / theta a missing key means
            if rel < 2e-4:
                bad.append("case %s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
            if not eps_theta and all(alt.greedy(pp, n)[0] == r_ for (pp, n), r_ in zip(prompts(full), refg)):
                bad.append("case %s: greedy ids are the same under '%s'" % (tag, name))

    # 6. config defaults as read
    p = moe_params(mixtral_config(num_local_experts=DROP, num_experts_per_tok=DROP, num_key_value_heads=DROP,
                                  rope_theta=DROP, rms_norm_eps=DROP, sliding_window=DROP, num_attention_heads=8))
    if (p["E"], p["k"], p["Hkv"], p["theta"], p["eps"], p["window"], p["renorm"], p["hd"]) != (
            8, 2, 8, 1e6, 1e-5, None, True, 4):
        bad.append("MixtralConfig defaults %s" % p)
    p = moe_params(olmoe_config(num_experts=DROP, num_experts_per_tok=DROP, norm_topk_prob=DROP,
                                num_key_value_heads=DROP, rms_norm_eps=DROP, rope_theta=DROP))
    if (p["E"], p["k"], p["renorm"], p["Hkv"], p["eps"], p["theta"]) != (64, 8, False, 4, 1e-5, 1e4):
        bad.append("OlmoeConfig defaults %s" % p)
    p = moe_params(qwen3moe_config(num_experts=DROP, num_experts_per_tok=DROP, norm_topk_prob=DROP,
                                   moe_intermediate_size=DROP, decoder_sparse_step=DROP, mlp_only_layers=DROP,
                                   num_key_value_heads=DROP, head_dim=DROP, num_attention_heads=8, rms_norm_eps=DROP,
                                   rope_theta=DROP))
    if (p["E"], p["k"], p["renorm"], p["F"], p["moe_layers"], p["Hkv"], p["hd"], p["eps"], p["theta"]) != (
            128, 8, False, 768, [True] * 3, 4, 3, 1e-6, 1e4):
        bad.append("Qwen3MoeConfig defaults %s" % p)
    p = moe_params(qwen2moe_config(num_experts=DROP, num_experts_per_tok=DROP, norm_topk_prob=DROP,
                                   moe_intermediate_size=DROP, shared_expert_intermediate_size=DROP,
                                   decoder_sparse_step=DROP, mlp_only_layers=DROP, num_key_value_heads=DROP,
                                   qkv_bias=DROP, rms_norm_eps=DROP, rope_theta=DROP))
    if (p["E"], p["k"], p["renorm"], p["F"], p["Fs"], p["moe_layers"], p["Hkv"], p["hd"], p["bias"], p["eps"],
            p["theta"]) != (60, 4, False, 1408, 5632, [True] * 3, 16, 8, True, 1e-6, 1e4):
        bad.append("Qwen2MoeConfig defaults %s" % p)
    if moe_params(qwen2moe_config(num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3]))["moe_layers"] != [
            False, True, False, False, False, True]:
        bad.append("Qwen2-MoE decoder_sparse_step 2 / mlp_only_layers [3]")
    if moe_params(qwen3moe_config(num_hidden_layers=6, decoder_sparse_step=3, mlp_only_layers=[5]))["moe_layers"] != [
            False, False, True, False, False, False]:
        bad.append("decoder_sparse_step 3 / mlp_only_layers [5]")
    if moe_params(mixtral_config(num_key_value_heads=None))["Hkv"] != 4:
        bad.append("Mixtral num_key_value_heads null")

    # 7. parameter counts = stored values
    for tag in tab:
        cfg, T, _, _ = case_weights(tag)
        if param_count(cfg) != sum(len(v[1]) for v in T.values()):
            bad.append("%s: param_count %d != stored values %d" % (tag, param_count(cfg),
                                                                  sum(len(v[1]) for v in T.values())))
        # active: the stored values less those of the experts outside the top-k (per MoE layer)
        p = moe_params(cfg)
        per_expert = sum(len(v[1]) for k_, v in T.items() if re.search(r"^model\.layers\.%d\..*experts\.0\." % (
            p["moe_layers"].index(True)), k_))
        want = sum(len(v[1]) for v in T.values()) - sum(p["moe_layers"]) * (p["E"] - p["k"]) * per_expert
        if active_count(cfg) != want:
            bad.append("%s: active_count %d != %d" % (tag, active_count(cfg), want))
    # a hand count: Qwen1.5-MoE-A2.7B's published 14.3 B parameters, 2.7 B active (ASSUMED config from memory:
    # vocab 151936, hidden 2048, 24 layers, 16 heads (MHA), 60 experts top-4 of 1408, shared 5632, untied)
    cq = qwen2moe_config(vocab_size=151936, hidden_size=2048, num_hidden_layers=24, num_attention_heads=16,
                         num_key_value_heads=16, num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
                         shared_expert_intermediate_size=5632, intermediate_size=5632, mlp_only_layers=[])
    n, na = param_count(cq), active_count(cq)
    print("  selftest: Qwen1.5-MoE-A2.7B-shaped config: %.4g parameters, %.4g active" % (n, na))
    if abs(n / 1e9 - 14.3) > 0.05 or abs(na / 1e9 - 2.7) > 0.05:
        bad.append("Qwen1.5-MoE-A2.7B counts %d / %d (published 14.3 B / 2.7 B)" % (n, na))
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny Mixtral / OLMoE / Qwen3-MoE folders, run lol, compare")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    c.add_argument("--quiet", action="store_true", help="print only disagreements, notes and the summary")
    sub.add_parser("selftest", help="the reference's own checks (no lol)")
    a = ap.parse_args()
    if a.cmd == "selftest":
        bad = selftest()
        for b in bad:
            print("FAIL " + b)
        print("selftest: %d failures" % len(bad))
        sys.exit(1 if bad else 0)
    sys.exit(check(a.lol, a.work, not a.quiet))


if __name__ == "__main__":
    main()
