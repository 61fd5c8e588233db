#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face Cohere (CohereForCausalLM, model_type "cohere":
CohereForAI's Command-R / Command-R 08-2024, Aya 23 / Aya Expanse) in pure Python (stdlib only),
and a check that `lol hf info|ppl|generate`, `lol export --hf --arch cohere` and `lol layerroute
train|eval|merge|generate` agree with it on tiny Cohere folders written here.

  python3 tests/reference/cohere_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/cohere_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/, fuzz/, bench/ nor tests/ outside
tests/reference/, from: the feature's brief; docs/hf.md ("Commands", "What is loaded", "GPT-J",
"StableLM", "Granite", "Cohere Command-R", "Export"), docs/layerroute.md (revised for the
adapter files' new layout: "Files", "The adapter as PEFT's"), docs/baselines.md;
tests/reference/granite_reference.py, gptj_reference.py and qwen2_reference.py (structure and
conventions; qwen2_reference.py's helpers are imported unchanged: the float32 RoPE frequency /
cos / sin tables as transformers builds them (rope_tables, incl. linear scaling and
rope_parameters), SiLU, the prefill / greedy / gated driver of its `Ref`, `mean_ce`, the folder /
byte-tokenizer / safetensors writers, `random_lora`, `design_gates`, `layerroute_eval_ref`,
`compare_eval`, `lr_generate`, `check_merged_weights`, `Checker` and the ppl / greedy
comparisons); and public copies of transformers read with the search tools (CHECKED):
  * huggingface/transformers src/transformers/models/cohere/modeling_cohere.py (a 4.5x copy,
    generated from modular_cohere.py):
      - CohereLayerNorm(hidden_size, eps=1e-5, bias=False): x.to(float32); mean over the last
        dim; variance = mean((x - mean)^2) (biased); (x - mean) * rsqrt(variance + eps);
        weight.to(float32) * x; back to the input dtype. NO bias parameter at all.
      - CohereRotaryEmbedding: ROPE_INIT_FUNCTIONS[rope_type] (rope_scaling "rope_type" or "type",
        else "default"); freqs = inv_freq @ positions in float32; emb =
        torch.repeat_interleave(freqs, 2, dim=-1) ("diff from Llama: we interleave() instead of
        cat()"); cos / sin in float32, times attention_scaling.
      - rotate_half(x): x1 = x[..., ::2]; x2 = x[..., 1::2]; stack([-x2, x1], -1).flatten(-2);
        apply_rotary_pos_emb casts q, k to float32 (q.float()), q*cos + rotate_half(q)*sin, back.
        => for pair i (dims 2i, 2i+1): y[2i] = x[2i] c_i - x[2i+1] s_i; y[2i+1] = x[2i+1] c_i +
        x[2i] s_i, on the WHOLE head.
      - CohereAttention: head_dim = getattr(config, "head_dim", hidden_size // heads); scaling =
        head_dim**-0.5; q/k/v/o_proj nn.Linear(bias=config.attention_bias); grouped-query
        (repeat_kv); use_qk_norm -> CohereLayerNorm over (heads, head_dim) of q / k after the
        projection, before RoPE.
      - CohereMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)), all bias=False.
      - CohereDecoderLayer: residual = x; h = input_layernorm(x); a = self_attn(h); m = mlp(h);
        out = residual + a + m (ONE norm, parallel; no post_attention_layernorm).
      - CohereModel: embed_tokens, layers, norm = CohereLayerNorm(eps=layer_norm_eps); no
        embedding scale.
      - CohereForCausalLM: `_tied_weights_keys = ["lm_head.weight"]`; logits = lm_head(h);
        `logits = logits * self.logit_scale  # main diff from Llama`.
  * configuration_cohere.py (current, a strict dataclass): vocab_size 256000, logit_scale 0.0625,
    num_key_value_heads None -> num_attention_heads, hidden_act "silu", max_position_embeddings
    8192, layer_norm_eps 1e-5, tie_word_embeddings True, attention_bias False, use_qk_norm False,
    rope via rope_parameters with `default_theta = 500000.0` (!); the older PretrainedConfig
    version (seen in a search excerpt of the 4.x file and of Cohere2Config, which copies it) has
    `rope_theta=10000.0, rope_scaling=None` keyword defaults.
Remembered, not re-read: c4ai-command-r-v01's config.json (logit_scale 0.0625, layer_norm_eps
1e-05, rope_theta 8000000, use_qk_norm false, tie_word_embeddings true), Command R+ (use_qk_norm
true, logit_scale 0.8333), Aya 23 8B (logit_scale 0.125, rope_theta 10000); PEFT's LoRA.

The reference (float64; RoPE cos/sin tables in float32 as transformers builds them):
  h0 = embed_tokens[ids]
  per layer:  n = LN(h) (input_layernorm: (h - mean) / sqrt(var + eps) * w, no bias)
              q, k, v = n W^T; interleaved RoPE on each q / k head (pairs (2i, 2i+1) turn by
              angle pos * inv_freq_i); grouped-query attention (query head a uses kv head
              a // (H / Hkv)), causal, scale head_dim^-0.5; a = o_proj(attn)
              m = down(silu(gate(n)) * up(n))
              h = h + a + m
  logits = (LN(h) (model.norm) lm_head^T) * logit_scale   (lm_head = embed_tokens when tied)
  LoRA (LayerRoute adapter files, PEFT's on CohereForCausalLM: docs/layerroute.md "Files" and
      "The adapter as PEFT's"): W' = W + (alpha / r) B A on the Hugging Face weights, folded in
      float64, the q_proj / k_proj lora_B rows in Cohere's own (interleaved) order. The
      alternative reading (the layout of adapters whose layerroute.json has no
      peft_architecture, written before 2026-12-07): the q / k rows in lol's rotate-half
      reordering of each head (new row i <- old row 2i, new row hd/2 + i <- old row 2i + 1,
      docs/hf.md "GPT-J" / "Cohere"), so the delta of Hugging Face row j of a head is row inv[j]
      of B A (inv the inverse permutation).
  LayerRoute gates (docs/layerroute.md): hbar_i = mean of the residual stream entering block i
      (for block 0 the embeddings); s_i = w_i . hbar_i + b_i.

Cases (vocab 264 > the byte tokenizer's 259 ids, hidden 32, intermediate 40, qwen2_reference's
byte-level tokenizer with ChatML specials and its 199-token TEXT; norm weights 1 + N(0, 0.4);
logit_scale far from 1):
  A cohere-gqa-tied-f32: 3 layers, 4 heads of 8, 2 kv heads, tied, logit_scale 0.3, rope_theta
    500, layer_norm_eps 1e-5, use_qk_norm false written: hf ppl float64 --context 9 / 64, float32
    64; hf generate --tokens --ids float64 (two prompts) / float32; hf info --check.
  B cohere-untied-mqa: 2 layers, 1 kv head, untied, logit_scale 2.5, rope_theta 10000,
    layer_norm_eps 1e-3 with embeddings of std 0.05 (so eps matters): ppl float64 / float32,
    generate, info.
  C cohere-defaults: no logit_scale, layer_norm_eps, tie_word_embeddings, num_key_value_heads
    keys (-> 0.0625, 1e-5, tied, MHA); rope_theta 10000 written (see ASSUMED 1); the rows of the
    lowercase letters' embeddings of std 0.004 so that the default eps matters: ppl float64 /
    float32, generate, info.
  D cohere-bf16-shards: BF16 storage in 2 shards + index, untied, GQA, logit_scale 1.7,
    rope_theta 2000: ppl float64 / float32 / bfloat16 (3e-2), generate float64, info --check.
  E cohere-head_dim12: "head_dim": 12 with 4 heads on hidden 32 (q_proj [48, 32], o_proj
    [32, 48]), logit_scale 0.5: ppl float64 / float32, generate float64 / float32, info --check.
  Variants of A's weights (hf ppl float64 each): rope_scaling {"type": "linear", "factor": 2};
    transformers 5's rope_parameters {"rope_type": "linear", "factor": 3, "rope_theta": 777}; no
    rope_theta key (ASSUMED 1: 10000).
  Refusals (hf ppl: exit 2, stderr naming the field / tensor): use_qk_norm true (with q_norm /
    k_norm [heads, head_dim] tensors as Command R+ stores them), attention_bias true (q/k/v/o
    biases stored), hidden_act gelu, logit_scale 0 / -0.3 / null / "0.3" (a string) / 1e999
    (inf), a stored model.layers.0.input_layernorm.bias, a stored model.norm.bias, a Llama
    post_attention_layernorm.weight, a missing mlp.up_proj.weight.
  export: `lol train` (5 steps) of a dense lol model of Cohere's layout ("norm": "layernorm",
    "mlp": "gated", "parallel_residual", "shared_input_norm", tied, GQA, "logit_scale": 0.3):
    lol train learns the LayerNorm biases, and `lol export --hf` must refuse it (exit 2) naming a
    bias tensor; the same checkpoint with every LayerNorm bias set to 0 (model.safetensors
    rewritten here: the same function as Cohere's bias-free norm) must export, by default as
    CohereForCausalLM with logit_scale 0.3 (float32 rounding), Cohere's tensor names / shapes (no
    biases, no post_attention_layernorm, tied: no lm_head), the q/k rows in interleaved order:
    `lol forward` on the checkpoint = the reference on the exported folder (logits within 1e-4 of
    max |logit|), hf ppl of the folder = the reference, hf info --check, `--arch cohere` the same
    config.json, `--arch stablelm` / `qwen2` / `gptj` refused (exit 2; a note if logit_scale is not
    named), every tensor but q / k the checkpoint's bit for bit. A second such model trained
    WITHOUT logit_scale (= 1), biases zeroed, `--arch cohere`: exported (or refused, a note) with
    "logit_scale" 1 in config.json (an absent key would read as CohereConfig's 0.0625), lol
    forward on the checkpoint = the reference on the folder, hf ppl of the folder.
  layerroute on case A's folder, LoRA rank 4 alpha 8 on all seven projections, --system "":
    the adapter files of (0) and (1) as PEFT reads them (check_peft_files): layerroute.json's
        peft_architecture "CohereForCausalLM"; tensors base_model.model.model.layers.{i}.
        {self_attn,mlp}.{proj}.lora_{A,B}.weight for the seven projections of every layer and
        nothing else, lora_A [r, in] / lora_B [out, r] of those nn.Linear modules;
        adapter_config.json's target_modules selecting, by PEFT's rule (an entry matches a module
        path equal to it or ending with "." + entry; a string is fullmatched) over every module of
        CohereForCausalLM (ASSUMED: named_modules() as read / remembered, cohere_modules), exactly
        the modules holding tensors; r / lora_alpha = layerroute.json's rank / alpha, each
        module's rank_pattern / alpha_pattern scale alpha / r; fan_in_fan_out false; peft_type
        LORA, bias none, no rslora / dora / layers_to_transform / modules_to_save;
    (0) `train --lr 0` (LoRA B stays 0) -> merge: every tensor of the source bit for bit (the
        q / k reordering undone exactly);
    (1) `train --steps 3 --lr 0.01` -> merge (CohereForCausalLM, logit_scale kept, merged weights
        = base + PEFT's float64 fold, the q / k lora_B rows in Hugging Face order, within 1e-6
        of max |W'|; the reference also requires the two row readings to differ by > 1e-4 of
        max |W'| on this adapter) -> eval --json (ppl_base / ppl_open / ppl_gated, executed means, layer_open /
        sigma / nontrivial, per source) against the reference with the adapter folded (the
        brief: the merged folder defines the adapter's meaning; the reference on the merged
        weights is the same function up to float32 rounding, also compared), hf ppl of the
        merged folder;
    (2) the same adapter directory with random LoRA tensors (B != 0) and gates designed so that
        decisions differ between samples and between a sample and its prompt: eval --gates
        learned (--max-prompt 256 and 12) / closed, generate (layers run and greedy ids), merge
        (weights, config, gates, hf ppl and hf generate of the merged folder = every layer + LoRA;
        --dtype bfloat16: every value within half a bf16 ulp of the exact fold), eval --adapter
        MERGED; the copy's layerroute.json says peft_architecture CohereForCausalLM, so the random
        tensors are read as PEFT's (q / k rows in Hugging Face order);
    (3) a copy of (2) with peft_architecture removed from layerroute.json: merge reads it in the
        old layout (docs/layerroute.md: Llama's names, which are Cohere's, and lol's row order),
        the merged weights = the fold with the q / k rows read as lol's reordered rows (1e-6).
  hf info (A-E, the export): exit 0, names CohereForCausalLM, "all tensors present", parameters
    = transformers' num_parameters() (no norm biases); "logits times X" where printed (a note if
    not found).
Tolerances: summed losses / perplexities / bits per byte 1e-5 relative (bfloat16 compute 3e-2);
greedy ids exact (after a float32 near-tie, top-2 gap < 1e-4 of max |logit|, the rest is not
compared and a note says so); gate sigmas 1e-5; counts exact.
On a ppl / generate disagreement (first 6) the case is re-evaluated under alternative readings --
rotate-half RoPE pairs (i, i + hd/2), sequential blocks, RMSNorm instead of LayerNorm,
logit_scale ignored / divided / CohereConfig's 0.0625, another eps -- and the readings matching
lol are named; on a LayerRoute disagreement the LoRA on q / k read in lol's reordered row order
(the layout before peft_architecture).
`check` does not run `selftest`: run both. `selftest` checks the interleaved RoPE against the
rotate-half form on permuted rows (1e-12; and that it differs without the permutation), the
LayerNorm against the definition, cached greedy = recomputation, gated open = plain, the
parameter counts and CohereConfig's defaults, and the SENSITIVITY: rotate-half RoPE,
sequential blocks, RMSNorm (mean not subtracted), logit_scale missing each move the summed loss of
cases A-E (100 tokens, context 40) far beyond the 1e-5 tolerance, and LoRA q/k rows read in
lol's reordered order (the old layout) moves the loss, LayerRoute's perplexities and the merged
weights (> 1e-4 of max |W'|); PEFT's rule on Cohere's weights (q / k lora_B rows in Hugging Face
order) = lol's LoRA with B's q / k rows permuted like the loader's (B_lol = P B) on the permuted
rotate-half model, the old reading = lol's LoRA with B as stored (1e-11); peft_selects /
peft_pattern on Cohere's module tree. When written (the brief's lol build):
check 288 checks, 0 disagreements, 76 lol runs, 97 s on 2 cores (lol under nice); selftest 21 s,
smallest relative loss changes: rotate-half RoPE 1.9e-3 (D), sequential blocks 1.2e-3 (C),
RMSNorm 1.8e-3 (C), logit_scale ignored 0.36 (D); layer_norm_eps 1e-6 moves B 2.7e-2, C 4.2e-3
(elsewhere the activations are too large for eps to matter). Revised for the adapter files'
new layout (Hugging Face q / k rows expected; check_peft_files; the old-layout merge (3)):
check 309 checks, 0 disagreements, 77 lol runs, 111 s; selftest 12 s; LoRA q/k rows read in
lol's reordered order move the loss 1.7e-2, LayerRoute's perplexities 0.39, the merged q / k
weights 0.35 of max |W'| (the trained adapter of check(): 2.4e-2). Greedy ids cannot see a
positive logit_scale (argmax).

ASSUMED (not settled by the transformers code read):
  1. A config.json without rope_theta: 10000 (transformers 4.x's CohereConfig default, docs/hf.md);
     transformers 5's CohereConfig has default_theta 500000. Only one variant omits the key.
  2. Refusals (exit 2 naming the field / tensor) of use_qk_norm true, attention_bias true,
     hidden_act other than silu, a logit_scale that is not a positive finite number, stored norm
     biases, post_attention_layernorm and missing tensors are lol's rules (the brief, docs/hf.md);
     transformers would run q/k norms, biases and gelu, and ignore (with a warning) unexpected
     tensors / initialise missing ones randomly.
  3. The reference is the float64 function: transformers' CohereLayerNorm and
     apply_rotary_pos_emb compute in float32 even in a float64 model (`.to(torch.float32)`,
     `q.float()`); those roundings are not modelled (as the other references in this folder).
  4. `hf ppl` adds no BOS and predicts every token of a window but the first (docs/hf.md); greedy
     picks the lowest id on an exact tie; eval --samples 0 takes every held-out sample.
  5. LayerRoute's adapter files are PEFT's on CohereForCausalLM (docs/layerroute.md), the q / k
     lora_B rows in Hugging Face order; the merged folder defines the adapter's meaning (the
     brief), and check() compares both PEFT's fold and the reference on the merged weights.
     PEFT's matching of rank_pattern / alpha_pattern keys (the key equal to the module path, else
     re.match("(.*[.])?KEY$")) is as remembered; lol writes both empty on Cohere.
  6. The dense lol checkpoint's LayerNorm bias tensors are named `<block>.input_layernorm.bias`
     and `model.norm.bias` (docs/baselines.md: "every norm a LayerNorm with a `.bias`"); check()
     zeroes every tensor of the trained checkpoint whose name ends in "norm.bias".
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from operator import mul

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import (Checker, compare_generate, compare_ppl, f32, mean_ce, ppl_windows,  # noqa: E402
                             silu, write_folder)
from safetensors_io import read_st, write_st  # noqa: E402
from gptj_reference import check_peft_files, peft_pattern, peft_selects  # noqa: E402,F401

TEXT = q2.TEXT
DIAGNOSE = [6]
DROP = object()
PROJ = q2.PROJ
ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
LR_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
MAX_PROMPT = 12
ARCH = "CohereForCausalLM"


def matvec(W, x):
    return [sum(map(mul, row, x)) for row in W]


def layernorm(x, w, eps):
    """CohereLayerNorm: (x - mean) / sqrt(var + eps) * w, biased variance, no bias"""
    n = len(x)
    m = sum(x) / n
    c = [v - m for v in x]
    var = sum(v * v for v in c) / n
    r = 1.0 / math.sqrt(var + eps)
    return [wi * v * r for wi, v in zip(w, c)]


def rmsnorm_alt(x, w, eps):
    """the wrong reading 'mean not subtracted' (RMSNorm)"""
    return q2.rmsnorm(x, w, eps)


# ---------------------------------------------------------------- config reading (CohereConfig)
def cohere_params(cfg):
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads")
    if Hkv is None:
        Hkv = H
    hd = cfg.get("head_dim") or d // H
    ls = cfg.get("logit_scale", 0.0625)
    eps = cfg.get("layer_norm_eps", 1e-5)
    return {"d": d, "H": H, "Hkv": Hkv, "hd": hd, "F": cfg["intermediate_size"], "L": cfg["num_hidden_layers"],
            "V": cfg["vocab_size"], "eps": 1e-5 if eps is None else eps,
            "theta": cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)),
            "tied": cfg.get("tie_word_embeddings", True), "mpe": cfg.get("max_position_embeddings", 8192),
            "ls": ls, "attention_bias": cfg.get("attention_bias", False), "qk_norm": cfg.get("use_qk_norm", False)}


# ---------------------------------------------------------------- the row permutation lol applies to q / k
def half_perm(hd):
    """row r of a rotate-half head <- Cohere (interleaved) row perm[r]: r = i <- 2i, r = hd/2 + i <- 2i + 1"""
    perm = list(range(hd))
    for i in range(hd // 2):
        perm[i] = 2 * i
        perm[hd // 2 + i] = 2 * i + 1
    return perm


def inverse(perm):
    inv = [0] * len(perm)
    for r, p_ in enumerate(perm):
        inv[p_] = r
    return inv


def permute_head_rows(M, hd, perm):
    """a matrix (list of rows, n_heads * hd rows): new row h*hd + r <- old row h*hd + perm[r]"""
    nh = len(M) // hd
    return [M[h * hd + perm[r]] for h in range(nh) for r in range(hd)]


# ---------------------------------------------------------------- the model
class CohereRef(q2.Ref):
    """CohereForCausalLM, float64. Reuses qwen2_reference.Ref's prefill / greedy / gate driver
    (modes backbone / open / gated / forced); weights, block and head are this class's.
    lora: {"layers.{i}.{self_attn|mlp}.{proj}": (A, B)} folded as W + lora_scale B A (PEFT's rule),
    the q / k deltas' rows as they are, in Hugging Face order (lora_rows "hf", the documented
    reading of lol's adapter files) or taken from lol's reordered (rotate-half) order (lora_rows
    "reordered": the alternative, the layout of adapters without peft_architecture).
    deltas: {module: full delta matrix in Hugging Face order} (the reference on merged weights).
    Keyword arguments select alternative readings (sensitivity checks and diagnosis):
      rope "half": rotate-half pairs (i, i + hd/2) instead of interleaved;
      residual "sequential": h2 = h + attn(LN(h)); out = h2 + mlp(LN(h2)) (same norm weight);
      norm "rms": mean not subtracted (x / sqrt(mean(x^2) + eps) * w);
      logit_scale: override (1.0: ignored); ls_div: divide by logit_scale instead;
      eps: override layer_norm_eps."""

    def __init__(self, cfg, weights, lora=None, lora_scale=0.0, gates=None, deltas=None, lora_rows="hf",
                 rope="interleaved", residual="parallel", norm="layernorm", logit_scale=None, ls_div=False, eps=None):
        p = cohere_params(cfg)
        self.cfg, self.p = cfg, p
        self.arch = cfg["architectures"][0]
        self.d, self.L, self.H, self.Hkv, self.hd, self.V = p["d"], p["L"], p["H"], p["Hkv"], p["hd"], p["V"]
        self.eps = p["eps"] if eps is None else eps
        self.ls = p["ls"] if logit_scale is None else logit_scale
        self.ls_div = ls_div
        self.rope, self.residual = rope, residual
        self.norm_fn = layernorm if norm == "layernorm" else rmsnorm_alt
        M = {k: q2.mat(v) for k, v in weights.items()}
        self.embed = M["model.embed_tokens.weight"]
        self.lm_head = self.embed if p["tied"] else M["lm_head.weight"]
        self.norm = M["model.norm.weight"]
        inv = inverse(half_perm(self.hd))
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            ly = {"in_norm": M[pre + "input_layernorm.weight"]}
            for proj in PROJ:
                sub = "self_attn." if proj in ATTN else "mlp."
                W0 = M[pre + sub + proj + ".weight"]
                W = W0
                key = "layers.%d.%s%s" % (i, sub, proj)
                D = None
                if lora and key in lora:
                    A, B = lora[key]
                    D = [[lora_scale * v for v in row] for row in q2.matmul(B, A)]
                    if proj in ("q_proj", "k_proj") and lora_rows == "reordered":
                        D = permute_head_rows(D, self.hd, inv)
                elif deltas and key in deltas:
                    D = deltas[key]
                if D is not None:
                    W = [[w + dv for w, dv in zip(rw, rd)] for rw, rd in zip(W0, D)]
                ly[proj] = W
                ly[proj + "_base"] = W0
            self.layers.append(ly)
        self.gates = gates
        cos, sin = q2.rope_tables(cfg, self.hd, min(p["mpe"], 512))
        h2 = self.hd // 2
        self.cos = [c[:h2] for c in cos]  # per pair i; rope_tables repeats them (cat) for rotate-half
        self.sin = [s[:h2] for s in sin]
        self.use_lora = True
        self.memo = {}

    def _rope(self, x, c, s):
        h2 = len(x) // 2
        y = list(x)
        if self.rope == "half":
            for i in range(h2):
                a, b = x[i], x[i + h2]
                y[i] = a * c[i] - b * s[i]
                y[i + h2] = b * c[i] + a * s[i]
            return y
        for i in range(h2):  # Cohere's rotate_half: stack([-x[1::2], x[::2]]).flatten; repeat_interleave'd cos/sin
            a, b = x[2 * i], x[2 * i + 1]
            y[2 * i] = a * c[i] - b * s[i]
            y[2 * i + 1] = b * c[i] + a * s[i]
        return y

    def _attn(self, ly, sfx, x, pos, cache):
        H, Hkv, hd = self.H, self.Hkv, self.hd
        rep = H // Hkv
        scale = hd ** -0.5
        q, k, v = matvec(ly["q_proj" + sfx], x), matvec(ly["k_proj" + sfx], x), matvec(ly["v_proj" + sfx], x)
        c, s = self.cos[pos], self.sin[pos]
        qh = [self._rope(q[a * hd:(a + 1) * hd], c, s) for a in range(H)]
        kh = [self._rope(k[a * hd:(a + 1) * hd], c, s) for a in range(Hkv)]
        cache["k"].append(kh)
        cache["v"].append([v[a * hd:(a + 1) * hd] for a in range(Hkv)])
        att = []
        for a in range(H):
            g = a // rep
            qa = qh[a]
            sc = [sum(map(mul, qa, kk[g])) * scale for kk in cache["k"]]
            m = max(sc)
            e = [math.exp(z - m) for z in sc]
            tot = sum(e)
            o = [0.0] * hd
            for wgt, vv in zip(e, cache["v"]):
                wgt /= tot
                o = [oj + wgt * vj for oj, vj in zip(o, vv[g])]
            att.extend(o)
        return matvec(ly["o_proj" + sfx], att)

    def _mlp(self, ly, sfx, x):
        gt, up = matvec(ly["gate_proj" + sfx], x), matvec(ly["up_proj" + sfx], x)
        return matvec(ly["down_proj" + sfx], [silu(a) * b for a, b in zip(gt, up)])

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        sfx = "" if self.use_lora else "_base"
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = self.norm_fn(h, ly["in_norm"], self.eps)
            a = self._attn(ly, sfx, x, pos, cache)
            if self.residual == "sequential":
                h2 = [x1 + x2 for x1, x2 in zip(h, a)]
                m = self._mlp(ly, sfx, self.norm_fn(h2, ly["in_norm"], self.eps))
                out.append([x1 + x2 for x1, x2 in zip(h2, m)])
            else:
                m = self._mlp(ly, sfx, x)
                out.append([x1 + x2 + x3 for x1, x2, x3 in zip(h, a, m)])
        return out

    def head(self, h):
        z = matvec(self.lm_head, self.norm_fn(h, self.norm, self.eps))
        ls = self.ls
        return [v / ls for v in z] if self.ls_div else [v * ls for v in z]


def param_count(cfg):
    """transformers' num_parameters() (tied embeddings counted once; LayerNorms without bias)"""
    p = cohere_params(cfg)
    d, F, H, Hkv, hd = p["d"], p["F"], p["H"], p["Hkv"], p["hd"]
    per = H * hd * d + 2 * Hkv * hd * d + d * H * hd + 3 * F * d + d
    if p["attention_bias"]:
        per += (H + 2 * Hkv) * hd + d
    if p["qk_norm"]:
        per += (H + Hkv) * hd
    return p["V"] * d * (1 if p["tied"] else 2) + d + p["L"] * per


# ---------------------------------------------------------------- tiny folders
def _apply(c, kw):
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def cohere_config(**kw):
    c = {"architectures": [ARCH], "model_type": "cohere", "vocab_size": 264, "hidden_size": 32,
         "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 256, "rope_theta": 500.0, "rope_scaling": None, "layer_norm_eps": 1e-5,
         "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu", "use_qk_norm": False,
         "initializer_range": 0.02, "tie_word_embeddings": True, "use_cache": True, "torch_dtype": "float32",
         "bos_token_id": q2.ENDOFTEXT, "eos_token_id": q2.IM_END, "pad_token_id": q2.ENDOFTEXT,
         "logit_scale": 0.3}
    return _apply(c, kw)


def cohere_weights(cfg, seed, embed_std=1.0, lm_std=0.25, branch_gain=1.0, small_rows=(), small_std=0.004):
    """random tensors: norm weights 1 + N(0, 0.4); q / k rows std 2.5 / sqrt(in), v, gate, up
    1.2 / sqrt(in), o_proj / down_proj 1.2 branch_gain / sqrt(in); embedding rows of the ids in
    small_rows of std small_std (so that layer 0's LayerNorm sees a variance near eps)"""
    rng = random.Random(seed)
    p = cohere_params(cfg)
    d, L, V, F, H, Hkv, hd = p["d"], p["L"], p["V"], p["F"], p["H"], p["Hkv"], p["hd"]
    T = {}

    def put(name, shape, std, mean=0.0):
        n = 1
        for s_ in shape:
            n *= s_
        T[name] = (list(shape), [f32(rng.gauss(mean, std)) for _ in range(n)])
    put("model.embed_tokens.weight", [V, d], embed_std)
    if small_rows:
        vals = T["model.embed_tokens.weight"][1]
        for t in small_rows:
            for j in range(d):
                vals[t * d + j] = f32(vals[t * d + j] * small_std / embed_std)
    if not p["tied"]:
        put("lm_head.weight", [V, d], lm_std)
    put("model.norm.weight", [d], 0.4, 1.0)
    for i in range(L):
        pre = "model.layers.%d." % i
        put(pre + "input_layernorm.weight", [d], 0.4, 1.0)
        for nm, o, inn, sd in (("self_attn.q_proj", H * hd, d, 2.5), ("self_attn.k_proj", Hkv * hd, d, 2.5),
                               ("self_attn.v_proj", Hkv * hd, d, 1.2), ("self_attn.o_proj", d, H * hd, 1.2 * branch_gain),
                               ("mlp.gate_proj", F, d, 1.2), ("mlp.up_proj", F, d, 1.2),
                               ("mlp.down_proj", d, F, 1.2 * branch_gain)):
            put(pre + nm + ".weight", [o, inn], sd / math.sqrt(inn))
    return T


def W64(T):
    return {k: (v[0], v[1], "F64") for k, v in T.items()}


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = cohere_params(cfg)
    out = [("rotate-half RoPE pairs (i, i + hd/2) instead of interleaved (2i, 2i+1)", {"rope": "half"}),
           ("sequential blocks (h + attn(LN h), then + mlp(LN h2))", {"residual": "sequential"}),
           ("RMSNorm (mean not subtracted) instead of LayerNorm", {"norm": "rms"}),
           ("logit_scale ignored", {"logit_scale": 1.0}),
           ("logits divided by logit_scale", {"ls_div": True})]
    if p["ls"] != 0.0625:
        out.append(("logit_scale = CohereConfig's default 0.0625", {"logit_scale": 0.0625}))
    out.append(("layer_norm_eps 1e-6" if p["eps"] != 1e-6 else "layer_norm_eps 1e-5",
                {"eps": 1e-6 if p["eps"] != 1e-6 else 1e-5}))
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
        p = cohere_params(cfg)
        print("[%s] H %d, Hkv %d, hd %d, eps %g, theta %g, tied %s, logit_scale %g, %s%s"
              % (tag, p["H"], p["Hkv"], p["hd"], p["eps"], p["theta"], p["tied"], p["ls"], dt,
                 " in %d shards" % shards if shards > 1 else ""), flush=True)

    def alt(self, kw):
        key = (self.wtag, self.dt, json.dumps(self.cfg, sort_keys=True), json.dumps(kw, sort_keys=True))
        if key not in Case.models:
            Case.models[key] = CohereRef(self.cfg, self.W, **kw)
        return Case.models[key]

    def ppl(self, ids, context, dtype="float64", rtol=1e-5):
        nf = len(self.ck.failures)
        compare_ppl(self.ck, self.tag, self.model, ids, context, dtype, rtol, self.tag)
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0 and not self.diagnosed[0]:
            DIAGNOSE[0] -= 1
            self.diagnosed[0] = True
            ref, _ = mean_ce(self.model, ppl_windows(ids, context))
            out = os.path.join(self.ck.work, "ppl_%s_%s_%d.json" % (self.tag, dtype, context))
            try:
                got = json.load(open(out)).get("loss_sum")
            except (OSError, ValueError):
                got = None
            print("    reference loss_sum %.10g; lol %r" % (ref, got))
            if got is not None:
                for name, kw in alternatives(self.cfg):
                    a, _ = mean_ce(self.alt(kw), ppl_windows(ids, context))
                    print("    alternative %-70s loss_sum %.10g%s" % (name, a, "   <-- lol matches" if abs(
                        a - got) <= max(rtol, 1e-4) * abs(a) else ""))

    def generate(self, prompt, n, dtype="float64"):
        nf = len(self.ck.failures)
        compare_generate(self.ck, self.tag, self.model, prompt, n, dtype, self.tag)
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0 and not self.diagnosed[1]:
            DIAGNOSE[0] -= 1
            self.diagnosed[1] = True
            toks = self.model.greedy(prompt, n)[0]
            r = self.ck.run(["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype,
                             "--threads", 1, "--tokens", ",".join(map(str, prompt))], expect_rc=None)
            got = q2.parse_ids(r.stdout) if r.returncode == 0 else None
            print("    prompt    %s\n    reference %s\n    lol       %s" % (prompt, toks, got))
            if got:
                for name, kw in alternatives(self.cfg):
                    if self.alt(kw).greedy(prompt, n)[0] == got:
                        print("    lol matches the reference under: %s" % name)

    def info(self, check=True):
        info(self.ck, self.tag, self.cfg, check)


def info(ck, tag, cfg, check=True):
    r = ck.run(["hf", "info", tag] + (["--check"] if check else []), expect_rc=None)
    ck.equal("%s hf info%s exits 0" % (tag, " --check" if check else ""), r.returncode, 0)
    if r.returncode != 0:
        print("    stderr: %s" % r.stderr.strip()[-300:])
        return
    ck.equal("%s hf info names %s" % (tag, ARCH), ARCH in r.stdout, True)
    if check:
        ck.equal("%s hf info --check: all tensors present" % tag, "all tensors present" in r.stdout, True)
    m = re.search(r"parameters\s+([\d,]+)", r.stdout)
    if m:
        ck.equal("%s hf info parameters (transformers' num_parameters())" % tag, int(m.group(1).replace(",", "")),
                 param_count(cfg))
    else:
        ck.compared += 1
        ck.fail("%s: hf info prints no 'parameters N' line" % tag)
    p = cohere_params(cfg)
    m = re.search(r"logits times ([-+\d.eE]+\d)", r.stdout)
    if m:
        ck.close("%s hf info prints logit_scale ('logits times')" % tag, float(m.group(1)), p["ls"], 1e-5)
    else:
        ck.note("%s: hf info shows no 'logits times X' this check reads" % tag)
    if "parallel" not in r.stdout:
        ck.note("%s: hf info does not say 'parallel'" % tag)


def refusal(ck, tag, cfg, T, needles, assumed="", alt_needles=(), raw_edit=None):
    """hf ppl of a folder lol must refuse: exit 2 with stderr naming one of needles; a refusal
    naming only one of alt_needles is accepted with a note. raw_edit: (regex, replacement) on
    config.json's text (values Python's json cannot write)."""
    folder = os.path.join(ck.work, tag)
    shutil.rmtree(folder, ignore_errors=True)
    write_folder(folder, cfg, T)
    if raw_edit:
        path = os.path.join(folder, "config.json")
        txt = open(path).read()
        txt2 = re.sub(raw_edit[0], raw_edit[1], txt)
        assert txt2 != txt, raw_edit
        open(path, "w").write(txt2)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--threads", 1], expect_rc=None)
    ck.compared += 1
    err = r.stderr.strip()
    bare = err.replace(tag, "FOLDER")  # the folder's name must not count as naming the field
    if r.returncode == 2 and any(n in bare for n in needles):
        if ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, err[:160]))
    elif r.returncode == 2 and any(n in bare for n in alt_needles):
        ck.note("%s: refused (exit 2) without naming %s: %s" % (tag, " or ".join(needles), err[:200]))
    else:
        ck.fail("%s%s: expected exit 2 naming %s; got exit %d, stderr %r" % (
            tag, assumed, " or ".join(needles), r.returncode, err[-400:]))


def check_refusals(ck, cfgA, TA):
    print("[refusals]", flush=True)
    p = cohere_params(cfgA)
    cq = dict(cfgA, use_qk_norm=True)
    Tq = dict(TA)
    rng = random.Random(630)
    for i in range(p["L"]):
        for nm, nh in (("q_norm", p["H"]), ("k_norm", p["Hkv"])):
            Tq["model.layers.%d.self_attn.%s.weight" % (i, nm)] = ([nh, p["hd"]], [f32(1 + rng.gauss(0, 0.2))
                                                                                   for _ in range(nh * p["hd"])])
    refusal(ck, "refuse-use_qk_norm", cq, Tq, ["use_qk_norm"], " (ASSUMED 2: transformers runs q/k LayerNorms)")
    cb = dict(cfgA, attention_bias=True)
    Tb = dict(TA)
    for i in range(p["L"]):
        for nm, n in (("q_proj", p["H"] * p["hd"]), ("k_proj", p["Hkv"] * p["hd"]), ("v_proj", p["Hkv"] * p["hd"]),
                      ("o_proj", p["d"])):
            Tb["model.layers.%d.self_attn.%s.bias" % (i, nm)] = ([n], [f32(rng.gauss(0, 0.3)) for _ in range(n)])
    refusal(ck, "refuse-attention_bias", cb, Tb, ["attention_bias"], " (ASSUMED 2: transformers adds q/k/v/o biases)")
    refusal(ck, "refuse-hidden_act-gelu", dict(cfgA, hidden_act="gelu"), TA, ["hidden_act"])
    for tag, v in (("0", 0.0), ("neg", -0.3), ("null", None), ("string", "0.3")):
        refusal(ck, "refuse-logit_scale-%s" % tag, dict(cfgA, logit_scale=v), TA, ["logit_scale"])
    # +inf: Python's json reads 1e999 as inf; a JSON reader may refuse the number itself
    refusal(ck, "refuse-logit_scale-inf", cfgA, TA, ["logit_scale"], alt_needles=["1e999", "config.json"],
            raw_edit=(r'"logit_scale": [^,\n]+', '"logit_scale": 1e999'))
    d = p["d"]
    for tag, name in (("refuse-input_layernorm-bias", "model.layers.0.input_layernorm.bias"),
                      ("refuse-norm-bias", "model.norm.bias")):
        Tn = dict(TA)
        Tn[name] = ([d], [0.0] * d)  # even a zero bias: Cohere has none (an unexpected tensor)
        refusal(ck, tag, cfgA, Tn, [name])
    Tp = dict(TA)
    Tp["model.layers.1.post_attention_layernorm.weight"] = ([d], [1.0] * d)
    refusal(ck, "refuse-post_attention_layernorm", cfgA, Tp, ["model.layers.1.post_attention_layernorm.weight",
                                                              "post_attention_layernorm"])
    Tm = {k: v for k, v in TA.items() if k != "model.layers.1.mlp.up_proj.weight"}
    refusal(ck, "refuse-missing-up_proj", cfgA, Tm, ["model.layers.1.mlp.up_proj.weight", "layers.1.mlp.up_proj"])


# ---------------------------------------------------------------- LayerRoute
def cohere_modules(cfg):
    """CohereForCausalLM's named_modules() (as PEFT walks them; ASSUMED from modeling_cohere.py as
    read / remembered, use_qk_norm false): path -> (out_features, in_features) of each nn.Linear,
    None for the others"""
    p = cohere_params(cfg)
    d, F, H, Hkv, hd = p["d"], p["F"], p["H"], p["Hkv"], p["hd"]
    mods = {k: None for k in ("model", "model.embed_tokens", "model.layers", "model.norm", "model.rotary_emb")}
    mods["lm_head"] = (p["V"], d)
    io = {"q_proj": (H * hd, d), "k_proj": (Hkv * hd, d), "v_proj": (Hkv * hd, d), "o_proj": (d, H * hd),
          "gate_proj": (F, d), "up_proj": (F, d), "down_proj": (d, F)}
    for i in range(p["L"]):
        b = "model.layers.%d" % i
        for k in ("", ".self_attn", ".mlp", ".mlp.act_fn", ".input_layernorm"):
            mods[b + k] = None
        for proj, oi in io.items():
            mods["%s.%s%s" % (b, "self_attn." if proj in ATTN else "mlp.", proj)] = oi
    return mods


# PEFT's matching rule and the adapter-file check are gptj_reference.py's (the same reviewer's code).


def all_modules(cfg):
    """the seven projections of every layer, as CohereForCausalLM names them"""
    return ["model.layers.%d.%s%s" % (i, "self_attn." if t in ATTN else "mlp.", t)
            for i in range(cfg["num_hidden_layers"]) for t in LR_TARGETS]


def read_adapter(adapter):
    """(lora {module: (A, B)}, scale alpha / r, gates (W, b)) of an adapter directory"""
    lj = json.load(open(os.path.join(adapter, "layerroute.json")))
    sc = lj["lora"]["alpha"] / lj["lora"]["rank"]
    St = read_st(os.path.join(adapter, "adapter_model.safetensors"))
    lora = {}
    for k in St:
        if k.endswith(".lora_A.weight"):
            mod = k[len("base_model.model.model."):-len(".lora_A.weight")]
            lora[mod] = (q2.mat(St[k]), q2.mat(St[k.replace("lora_A", "lora_B")]))
    G = read_st(os.path.join(adapter, "gates.safetensors"))
    return lora, sc, (q2.mat(G["gates.weight"]), list(G["gates.bias"][1]))


def merged_deltas(cfg, Wbase, folder):
    """{module: merged W - base W} of a merged folder (float64 differences of the stored values)"""
    mT = q2.read_folder_weights(folder)
    out = {}
    for i in range(cfg["num_hidden_layers"]):
        for proj in PROJ:
            sub = "self_attn." if proj in ATTN else "mlp."
            name = "model.layers.%d.%s%s.weight" % (i, sub, proj)
            if name not in mT:
                continue
            A, B = q2.mat(mT[name]), q2.mat(Wbase[name])
            out["layers.%d.%s%s" % (i, sub, proj)] = [[a - b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]
    return out


def gate_margin(model, contexts):
    m = float("inf")
    for toks in contexts:
        _, _, _, sc = model.prefill(toks, "gated")
        m = min([m] + [abs(x) for x in sc])
    return m


def eval_run(ck, adapter, out, gates="learned", mp=256):
    r = ck.run(["layerroute", "eval", "--adapter", adapter, "--data", "held.jsonl", "--samples", 0,
                "--timing-samples", 0, "--gates", gates, "--max-prompt", mp, "--json", out, "--threads", 1])
    return json.load(open(os.path.join(ck.work, out))) if r.returncode == 0 else None


def check_merge_config(ck, tag, cfg, merged):
    mc = json.load(open(os.path.join(ck.work, merged, "config.json")))
    ck.equal("%s merge: architectures / model_type" % tag, (mc.get("architectures"), mc.get("model_type")),
             ([ARCH], "cohere"))
    keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "rope_theta",
            "tie_word_embeddings", "max_position_embeddings", "intermediate_size", "vocab_size")
    ck.equal("%s merge: config.json keeps the base's shape fields" % tag, [mc.get(k) for k in keys],
             [cfg.get(k) for k in keys])
    ck.close("%s merge: logit_scale kept" % tag, mc.get("logit_scale"), cfg["logit_scale"], 1e-7)
    ck.close("%s merge: layer_norm_eps kept (absent = 1e-5)" % tag, mc.get("layer_norm_eps", 1e-5),
             cfg.get("layer_norm_eps", 1e-5), 1e-7)
    ck.equal("%s merge: use_qk_norm / attention_bias not true" % tag,
             (bool(mc.get("use_qk_norm", False)), bool(mc.get("attention_bias", False))), (False, False))
    return mc


def diag_lr(ck, cfg, Wt, lora, sc, gates, samples, res):
    """on a ppl_open / ppl_gated disagreement: does lol match the LoRA on q / k read in lol's
    reordered row order (the layout before peft_architecture)?"""
    ref = q2.layerroute_eval_ref(CohereRef(cfg, Wt, lora=lora, lora_scale=sc, gates=gates), samples)
    bad = [k for k in ("ppl_open", "ppl_gated") if res.get(k) is None or abs(res[k] - ref[k]) > 1e-5 * ref[k]]
    if not bad:
        return
    alt = q2.layerroute_eval_ref(CohereRef(cfg, Wt, lora=lora, lora_scale=sc, gates=gates, lora_rows="reordered"),
                                 samples)
    print("    alternative LoRA q/k rows in lol's reordered order: %s" % ", ".join(
        "%s %.8g%s" % (k, alt[k], " <-- lol" if res.get(k) is not None and abs(res[k] - alt[k]) <= 1e-5 * alt[k]
                       else "") for k in bad))


def random_adapter(cfgA, Wt, samples):
    """random LoRA (rank 4, alpha 8, all seven targets) and gates designed on the held-out
    samples: (PEFT tensors, lora, model with them, gate W, gate b, smallest |s|, prompts)"""
    st, lora = q2.random_lora(cfgA, LR_TARGETS, 4, 13)
    model = CohereRef(cfgA, Wt, lora=lora, lora_scale=8.0 / 4)
    gen_prompts = [samples[0][0][:samples[0][2]], samples[1][0][:samples[1][2]],
                   q2.encode("<|im_start|>user\nseven plus five?<|im_end|>\n<|im_start|>assistant\n"),
                   q2.encode("twelve get_weather")]
    ns = len(samples)
    contexts = ([s_[0] for s_ in samples] + [s_[0][:s_[2]] for s_ in samples] + gen_prompts[2:] +
                [s_[0][:s_[2]][-MAX_PROMPT:] for s_ in samples])
    Wg, bg, margin = q2.design_gates(model, contexts, ["sep", "open", "split"], 17,
                                     pairs=[(k, ns + k) for k in range(ns)], n_primary=ns)
    return st, lora, model, Wg, bg, margin, gen_prompts


def lr_train(ck, base, out, steps, lr):
    shutil.rmtree(os.path.join(ck.work, out), ignore_errors=True)
    r = ck.run(["layerroute", "train", "--base", base, "--data", "train.jsonl", "--out", out, "--steps", steps,
                "--batch", 2, "--accum", 1, "--lr", lr, "--rank", 4, "--alpha", 8, "--targets", ",".join(LR_TARGETS),
                "--max-len", 256, "--system", "", "--threads", 1, "--save-every", 0, "--no-progress"])
    return r.returncode == 0


def check_layerroute(ck, cfgA, TA, base):
    print("[layerroute on a Cohere base (case A's folder)]", flush=True)
    w = ck.work
    train, held = q2.lr_data(11)
    for fn, rows in (("train.jsonl", train), ("held.jsonl", held)):
        with open(os.path.join(w, fn), "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    samples = [q2.chatml_ids(s, None) + (s["source"],) for s in held]
    for d_ in ("lr-cohere-zero", "lr-cohere-zero-merged", "lr-cohere-merged", "lr-cohere-rand",
               "lr-cohere-rand-merged", "lr-cohere-rand-merged-bf16", "lr-cohere-rand-legacy",
               "lr-cohere-rand-legacy-merged"):
        shutil.rmtree(os.path.join(w, d_), ignore_errors=True)
    Wt = q2.as_weights(TA, "F32")
    ids = q2.encode(TEXT)

    # (0) lr 0: LoRA B stays 0 -> merge writes the source's tensors bit for bit
    if lr_train(ck, base, "lr-cohere-zero", 1, 0.0):
        check_peft_files(ck, "cohere lr-cohere-zero adapter files", os.path.join(w, "lr-cohere-zero"),
                         cohere_modules(cfgA), ARCH, all_modules(cfgA))
        r = ck.run(["layerroute", "merge", "--adapter", "lr-cohere-zero", "--out", "lr-cohere-zero-merged"])
        if r.returncode == 0:
            mT = q2.read_folder_weights(os.path.join(w, "lr-cohere-zero-merged"))
            src = read_st(os.path.join(w, base, "model.safetensors"))
            diff = sorted(k for k in set(src) | set(mT) if k not in mT or k not in src or
                          list(mT[k][0]) != list(src[k][0]) or mT[k][1] != src[k][1])
            ck.equal("cohere merge of a zero LoRA: every tensor of the source bit for bit (names / shapes / values "
                     "differing)", diff, [])
            for k in diff[:3]:
                if k in mT and k in src and ("q_proj" in k or "k_proj" in k):
                    hd = cohere_params(cfgA)["hd"]
                    got, want = q2.mat(mT[k]), q2.mat(src[k])
                    if got == permute_head_rows(want, hd, half_perm(hd)):
                        print("    %s holds the loader's reordered (rotate-half) rows" % k)
            check_merge_config(ck, "cohere zero-LoRA", cfgA, "lr-cohere-zero-merged")

    # (1) a trained adapter
    if not lr_train(ck, base, "lr-cohere", 3, 0.01):
        return
    check_peft_files(ck, "cohere lr-cohere adapter files", os.path.join(w, "lr-cohere"), cohere_modules(cfgA), ARCH,
                     all_modules(cfgA))
    lora, sc, gates = read_adapter(os.path.join(w, "lr-cohere"))
    ck.equal("cohere layerroute train: LoRA on all seven projections of every layer", len(lora),
             len(LR_TARGETS) * cfgA["num_hidden_layers"])
    model = CohereRef(cfgA, Wt, lora=lora, lora_scale=sc, gates=gates)
    old = CohereRef(cfgA, Wt, lora=lora, lora_scale=sc, gates=gates, lora_rows="reordered")
    sep = max(_maxdiff(model.layers[i][pj], old.layers[i][pj]) / max(abs(v) for row in model.layers[i][pj] for v in row)
              for i in range(cfgA["num_hidden_layers"]) for pj in ("q_proj", "k_proj"))
    ck.equal("cohere trained adapter (reference): its two q / k row readings differ by > 1e-4 of max |W'| (the merge "
             "check can see the row order; %.2e)" % sep, sep > 1e-4, True)
    bmax = max(abs(v) for A, B in lora.values() for row in B for v in row)
    print("  trained adapter: scale %g, max |B| %.3g, gate bias %s" % (sc, bmax, gates[1]))
    ref_model = model
    r = ck.run(["layerroute", "merge", "--adapter", "lr-cohere", "--out", "lr-cohere-merged"])
    if r.returncode == 0:
        check_merge_config(ck, "cohere trained", cfgA, "lr-cohere-merged")
        nf = len(ck.failures)
        q2.check_merged_weights(ck, "cohere trained (PEFT's fold, q/k lora_B rows in Hugging Face order)", model,
                                os.path.join(w, "lr-cohere-merged"))
        if len(ck.failures) > nf:
            alt = CohereRef(cfgA, Wt, lora=lora, lora_scale=sc, gates=gates, lora_rows="reordered")
            mT = q2.read_folder_weights(os.path.join(w, "lr-cohere-merged"))
            for i, ly in enumerate(alt.layers):
                for proj in ("q_proj", "k_proj"):
                    name = "model.layers.%d.self_attn.%s.weight" % (i, proj)
                    want = [v for row in ly[proj] for v in row]
                    dd = max(abs(a - b) for a, b in zip(mT[name][1], want)) / max(abs(v) for v in want)
                    print("    %s vs fold with q/k delta rows in lol's reordered order: %.3g" % (name, dd))
        # the reference on the merged weights (the brief: the merged folder defines the adapter)
        ref_model = CohereRef(cfgA, Wt, deltas=merged_deltas(cfgA, Wt, os.path.join(w, "lr-cohere-merged")),
                              gates=gates)
        compare_ppl(ck, "lr-cohere-merged", model, ids, 64, "float64", 1e-5, "cohere trained merged")
    margin = gate_margin(ref_model, [s[0] for s in samples] + [s[0][:s[2]] for s in samples])
    res = eval_run(ck, "lr-cohere", "lr-cohere-eval.json")
    if res is not None:
        for tag_, m_ in (("merged weights", ref_model), ("float64 fold", model)):
            if tag_ == "float64 fold" and m_ is ref_model:
                continue
            ref = q2.layerroute_eval_ref(m_, samples, "learned", 256)
            if tag_ == "float64 fold":  # the same function up to float32 rounding: perplexities only
                for k in ("ppl_base", "ppl_open", "ppl_gated"):
                    ck.close("cohere trained eval %s (reference: %s)" % (k, tag_), res.get(k), ref[k], 1e-5)
            elif margin >= 1e-4:
                q2.compare_eval(ck, "cohere trained eval --gates learned (reference: %s):" % tag_, res, ref, "learned")
            else:
                ck.note("cohere trained adapter: a gate score within %.1e of the tie: only ppl_base / ppl_open "
                        "compared" % margin)
                for k in ("ppl_base", "ppl_open"):
                    ck.close("cohere trained eval %s" % k, res.get(k), ref[k], 1e-5)
        diag_lr(ck, cfgA, Wt, lora, sc, gates, samples, res)

    # (2) random LoRA (B != 0) and designed gates in a copy of the adapter directory (its
    #     layerroute.json says peft_architecture CohereForCausalLM: the tensors are read as PEFT's,
    #     q / k lora_B rows in Hugging Face order, the reference's default lora_rows "hf")
    shutil.copytree(os.path.join(w, "lr-cohere"), os.path.join(w, "lr-cohere-rand"))
    st, lora, model, Wg, bg, margin, gen_prompts = random_adapter(cfgA, Wt, samples)
    write_st(os.path.join(w, "lr-cohere-rand", "adapter_model.safetensors"), st, {"format": "pt"})
    print("  designed gates: bias %s, smallest |s| %.3g" % (["%.3f" % v for v in bg], margin))
    if margin < 0.01:
        ck.fail("reference: the designed gates leave a score within %.3g of the tie (choose other seeds)" % margin)
    write_st(os.path.join(w, "lr-cohere-rand", "gates.safetensors"),
             {"gates.weight": ([len(Wg), len(Wg[0])], [v for r_ in Wg for v in r_], "F32"),
              "gates.bias": ([len(bg)], bg, "F32")})
    ref_learned = None
    for gates_, mp in (("learned", 256), ("learned", MAX_PROMPT), ("closed", 256)):
        res = eval_run(ck, "lr-cohere-rand", "lr-cohere-rand-%s-%d.json" % (gates_, mp), gates_, mp)
        if res is not None:
            ref = q2.layerroute_eval_ref(model, samples, gates_, max_prompt=mp)
            q2.compare_eval(ck, "cohere random-LoRA eval --gates %s --max-prompt %d:" % (gates_, mp), res, ref, gates_)
            if gates_ == "learned" and mp == 256:
                ref_learned = ref
                diag_lr(ck, cfgA, Wt, lora, 2.0, (Wg, bg), samples, res)
    skip = [k for k, s_ in enumerate(samples) if not all(model.prefill(s_[0][:s_[2]], "gated")[2])]
    allopen = [k for k, s_ in enumerate(samples) if all(model.prefill(s_[0][:s_[2]], "gated")[2])]
    if not skip:
        ck.note("cohere random-LoRA: no sample prompt closes a layer; generation never skips")
    for k in skip[:2] + allopen[:1]:
        q2.lr_generate(ck, model, "lr-cohere-rand", "cohere sample %d prompt" % k, samples[k][0][:samples[k][2]])
    q2.lr_generate(ck, model, "lr-cohere-rand", "cohere prompt 3", gen_prompts[3])
    for gates_ in ("open", "closed"):
        q2.lr_generate(ck, model, "lr-cohere-rand", "cohere sample 0 prompt", gen_prompts[0], gates_)
    r = ck.run(["layerroute", "merge", "--adapter", "lr-cohere-rand", "--out", "lr-cohere-rand-merged"])
    if r.returncode != 0:
        return
    check_merge_config(ck, "cohere random-LoRA", cfgA, "lr-cohere-rand-merged")
    q2.check_merged_weights(ck, "cohere random-LoRA", model, os.path.join(w, "lr-cohere-rand-merged"))
    g = read_st(os.path.join(w, "lr-cohere-rand-merged", "gates.safetensors"))
    ck.equal("cohere random-LoRA merge: gates.safetensors copied", (g["gates.weight"][1], g["gates.bias"][1]),
             ([v for r_ in Wg for v in r_], bg))
    compare_ppl(ck, "lr-cohere-rand-merged", model, ids, 64, "float64", 1e-5, "cohere random-LoRA merged")
    compare_generate(ck, "lr-cohere-rand-merged", model, gen_prompts[3], 10, "float64",
                     "cohere random-LoRA merged (= every layer + LoRA)")
    res = eval_run(ck, "lr-cohere-rand-merged", "lr-cohere-rand-merged-eval.json")
    if res is not None and ref_learned:
        ref = dict(ref_learned)
        ref["ppl_base"] = ref_learned["ppl_open"]  # base = the merged folder (LoRA folded in)
        ref["sources"] = {s: dict(o, ppl_base=o["ppl_open"]) for s, o in ref_learned["sources"].items()}
        q2.compare_eval(ck, "cohere eval --adapter MERGED:", res, ref, "learned")
    r = ck.run(["layerroute", "merge", "--adapter", "lr-cohere-rand", "--out", "lr-cohere-rand-merged-bf16",
                "--dtype", "bfloat16", "--overwrite"])
    if r.returncode == 0:
        q2.check_merged_weights(ck, "cohere random-LoRA", model, os.path.join(w, "lr-cohere-rand-merged-bf16"),
                                "BF16")
        mc = json.load(open(os.path.join(w, "lr-cohere-rand-merged-bf16", "config.json")))
        ck.close("cohere random-LoRA merge --dtype bfloat16: logit_scale kept", mc.get("logit_scale"),
                 cfgA["logit_scale"], 1e-7)

    # (3) the same random adapter without peft_architecture in layerroute.json: read as written
    #     before 2026-12-07 (docs/layerroute.md: Llama's names, which are Cohere's, and lol's row
    #     order), so the merge folds the q / k lora_B rows as lol's reordered rows
    leg = os.path.join(w, "lr-cohere-rand-legacy")
    shutil.copytree(os.path.join(w, "lr-cohere-rand"), leg)
    lj = json.load(open(os.path.join(leg, "layerroute.json")))
    lj.pop("peft_architecture", None)
    json.dump(lj, open(os.path.join(leg, "layerroute.json"), "w"), indent=2)
    r = ck.run(["layerroute", "merge", "--adapter", "lr-cohere-rand-legacy", "--out", "lr-cohere-rand-legacy-merged"])
    if r.returncode == 0:
        old = CohereRef(cfgA, Wt, lora=lora, lora_scale=8.0 / 4, lora_rows="reordered")
        nf = len(ck.failures)
        q2.check_merged_weights(ck, "cohere random-LoRA, layerroute.json without peft_architecture (old layout: q/k "
                                "lora_B rows in lol's reordered order)", old,
                                os.path.join(w, "lr-cohere-rand-legacy-merged"))
        if len(ck.failures) > nf:
            mT = q2.read_folder_weights(os.path.join(w, "lr-cohere-rand-legacy-merged"))
            name = "model.layers.0.self_attn.q_proj.weight"
            want = [v for row in model.layers[0]["q_proj"] for v in row]
            print("    %s vs the fold with rows in Hugging Face order: %.3g" % (
                name, max(abs(a - b) for a, b in zip(mT[name][1], want)) / max(abs(v) for v in want)))


# ---------------------------------------------------------------- export of a dense lol model of Cohere's layout
WORDS = "the quick brown fox jumps over lazy dog pack my box with five dozen liquor jugs sphinx of black quartz".split()
DENSE = {"norm": "layernorm", "mlp": "gated", "parallel_residual": True, "shared_input_norm": True,
         "logit_scale": 0.3, "tie_word_embeddings": True}


def train_dense(ck, name, model, data):
    m = {"architecture": "dense", "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 40, "max_seq_len": 64,
         "n_layers": 2}
    m.update(model)
    cfg = {"model": m, "data": {"dir": data, "seq_len": 32, "batch_size": 4, "packing": "pack"},
           "optim": {"type": "adamw", "lr": 0.01},
           "train": {"steps": 5, "out": name, "device": "cpu", "threads": 1, "seed": 0, "eval_every": 100,
                     "eval_batches": 1, "save_every": 100, "log_every": 100}}
    shutil.rmtree(os.path.join(ck.work, name), ignore_errors=True)
    json.dump(cfg, open(os.path.join(ck.work, name + ".json"), "w"), indent=1)
    r = ck.run(["train", "--config", name + ".json", "--no-progress"])
    return name if r.returncode == 0 else None


def find_checkpoint(run_dir):
    """the newest checkpoint directory (holding config.json + model.safetensors) under a run"""
    best = None
    for root, dirs, files in os.walk(run_dir):
        if "model.safetensors" in files and "config.json" in files:
            if best is None or root > best:
                best = root
    return best


def check_export(ck):
    print("[export of a dense lol model of Cohere's layout]", flush=True)
    rng = random.Random(11)
    with open(os.path.join(ck.work, "cohere_corpus.txt"), "w") as f:
        for _ in range(300):
            f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))) + "\n\n")
    shutil.rmtree(os.path.join(ck.work, "cohere-data"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "cohere_corpus.txt", "--tokenizer", "cohere-gqa-tied-f32/tokenizer.json", "--out",
                "cohere-data", "--valid-fraction", 0.1, "--no-progress"])
    if r.returncode != 0:
        return
    run = train_dense(ck, "cohere-dense", DENSE, "cohere-data")
    if not run:
        return
    for d_ in ("ex-cohere-biased", "ex-cohere", "ex-cohere-arch", "ex-cohere-stablelm", "ex-cohere-qwen2",
               "cohere-dense-zero"):
        shutil.rmtree(os.path.join(ck.work, d_), ignore_errors=True)
    ckpt = find_checkpoint(os.path.join(ck.work, run))
    S = read_st(os.path.join(ckpt, "model.safetensors"))
    biases = sorted(k for k in S if k.endswith("norm.bias"))
    bmax = max([abs(v) for k in biases for v in S[k][1]] or [0.0])
    print("  trained checkpoint %s: LayerNorm bias tensors %s, max |bias| %.3g" % (
        os.path.relpath(ckpt, ck.work), biases[:3] + (["..."] if len(biases) > 3 else []), bmax))
    # (a) the trained model as it is: its LayerNorm biases are learned -> refused naming one
    r = ck.run(["export", "--hf", run, "--out", "ex-cohere-biased"], expect_rc=None)
    ck.compared += 1
    err = r.stderr.strip()
    nonzero = [k for k in biases if any(v != 0.0 for v in S[k][1])]
    if not nonzero:
        ck.note("lol train left every LayerNorm bias at 0: the refusal of learned biases is not exercised")
    elif r.returncode == 2 and any(k in err for k in nonzero):
        line = [l_ for l_ in err.splitlines() if "bias" in l_][0]
        ck.verbose and print("  ok %-60s %s" % ("export of learned LayerNorm biases refused (exit 2)", line[:200]))
    elif r.returncode == 2 and "bias" in err:
        ck.note("export of learned LayerNorm biases: refused (exit 2) without naming the tensor: %s" % err[:200])
    else:
        ck.fail("export of a Cohere-layout model with learned LayerNorm biases (%s ...): expected exit 2 naming "
                "the bias tensor; got exit %d, stderr %r" % (nonzero[:2], r.returncode, err[-300:]))
    # (b) the same checkpoint with zero LayerNorm biases (ASSUMED 6)
    zdir = os.path.join(ck.work, "cohere-dense-zero")
    shutil.copytree(ckpt, zdir)
    Z = {k: (v[0], [0.0] * len(v[1]) if k.endswith("norm.bias") else v[1], v[2]) for k, v in S.items()}
    meta = None
    write_st(os.path.join(zdir, "model.safetensors"), Z, meta)
    r = ck.run(["export", "--hf", "cohere-dense-zero", "--out", "ex-cohere"])
    if r.returncode != 0:
        return
    ex = os.path.join(ck.work, "ex-cohere")
    c = json.load(open(os.path.join(ex, "config.json")))
    ck.equal("export (logit_scale, default --arch): architectures / model_type",
             (c.get("architectures"), c.get("model_type")), ([ARCH], "cohere"))
    ck.close("export config.json logit_scale", c.get("logit_scale"), DENSE["logit_scale"], 1e-6)
    ck.equal("export config.json: tie_word_embeddings (absent = true), num_key_value_heads, hidden_act",
             (c.get("tie_word_embeddings", True), c.get("num_key_value_heads"), c.get("hidden_act", "silu")),
             (True, 2, "silu"))
    ck.equal("export config.json: use_qk_norm / attention_bias false (or absent)",
             (bool(c.get("use_qk_norm", False)), bool(c.get("attention_bias", False))), (False, False))
    ck.equal("export config.json: no head_dim, or hidden / heads", c.get("head_dim") in (None, 8), True)
    T = q2.read_folder_weights(ex)
    V = c.get("vocab_size")
    exp = {"model.embed_tokens.weight": [V, 32], "model.norm.weight": [32]}
    for i in range(2):
        p_ = "model.layers.%d." % i
        exp.update({p_ + "self_attn.q_proj.weight": [32, 32], p_ + "self_attn.k_proj.weight": [16, 32],
                    p_ + "self_attn.v_proj.weight": [16, 32], p_ + "self_attn.o_proj.weight": [32, 32],
                    p_ + "input_layernorm.weight": [32],
                    p_ + "mlp.gate_proj.weight": [40, 32], p_ + "mlp.up_proj.weight": [40, 32],
                    p_ + "mlp.down_proj.weight": [32, 40]})
    ck.equal("export cohere: tensor names and shapes (CohereForCausalLM's: no biases, no post_attention_layernorm, "
             "tied: no lm_head)", sorted((k, list(v[0])) for k, v in T.items()), sorted(exp.items()))
    # q / k rows: the checkpoint's (lol's rotate-half order) put back in interleaved order
    hd = 8
    inv = inverse(half_perm(hd))
    bad = []
    for k in sorted(S):
        if k.endswith(("q_proj.weight", "k_proj.weight")) and k in T:
            want = permute_head_rows(q2.mat(S[k]), hd, inv)
            if q2.mat(T[k]) != want:
                bad.append(k)
    ck.equal("export cohere: q_proj / k_proj = the checkpoint's rows put back in interleaved order (bit for bit; "
             "tensors differing)", bad, [])
    other = sorted(k for k in T if not k.endswith(("q_proj.weight", "k_proj.weight")) and
                   (k not in S or T[k][1] != S[k][1]))
    ck.equal("export cohere: every other tensor = the checkpoint's bit for bit (tensors differing)", other, [])
    model = CohereRef(c, T)
    ids = q2.encode(TEXT)
    toks = ids[:40]
    r = ck.run(["forward", "--model", "cohere-dense-zero", "--tokens", ",".join(map(str, toks)), "--out",
                "cohere-fw.safetensors"])
    if r.returncode == 0:
        lg = read_st(os.path.join(ck.work, "cohere-fw.safetensors"))["logits"]
        Vl = lg[0][-1]
        got = [lg[1][i * Vl:(i + 1) * Vl] for i in range(len(toks))]
        want = model.prefill(toks)[0]
        big = max(1.0, max(abs(v) for row in want for v in row))
        diff = max(abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb)) / big
        if not ck.close("export cohere: max |lol forward(checkpoint) - reference(exported folder)| / max|logit|",
                        diff, 0.0, 0, 1e-4):
            for name, kw in alternatives(c):
                alt = CohereRef(c, T, **kw).prefill(toks)[0]
                dd = max(abs(a - b) for ra, rb in zip(got, alt) for a, b in zip(ra, rb)) / big
                print("    alternative %-70s max diff %.3g%s" % (name, dd, "   <-- lol matches" if dd < 1e-4 else ""))
    compare_ppl(ck, "ex-cohere", model, ids, 40, "float64", 1e-5, "ex-cohere")
    info(ck, "ex-cohere", c)
    r = ck.run(["export", "--hf", "cohere-dense-zero", "--out", "ex-cohere-arch", "--arch", "cohere"])
    if r.returncode == 0:
        c2 = json.load(open(os.path.join(ck.work, "ex-cohere-arch", "config.json")))
        ck.equal("export --arch cohere: the same config.json as the default", c2, c)
    for arch in ("stablelm", "qwen2", "gptj"):
        r = ck.run(["export", "--hf", "cohere-dense-zero", "--out", "ex-cohere-" + arch, "--arch", arch],
                   expect_rc=None)
        ck.compared += 1
        if r.returncode != 2:
            ck.fail("export --arch %s of a model with logit_scale 0.3: exit %d (expected 2: refused)"
                    % (arch, r.returncode))
        elif "logit_scale" not in r.stderr:
            ck.note("export --arch %s refused (exit 2) without naming logit_scale: %s" % (arch, r.stderr.strip()[:200]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("export --arch %s refused (exit 2)" % arch, r.stderr.strip()[:120]))
    check_export_scale1(ck)


def check_export_scale1(ck):
    """a Cohere-layout dense model WITHOUT logit_scale (= 1) written with --arch cohere: the folder
    must say logit_scale 1 (CohereConfig's default 0.0625 would apply to an absent key), or the
    export is refused"""
    model = {k: v for k, v in DENSE.items() if k != "logit_scale"}
    run = train_dense(ck, "cohere-dense-ls1", model, "cohere-data")
    if not run:
        return
    for d_ in ("cohere-dense-ls1-zero", "ex-cohere-ls1"):
        shutil.rmtree(os.path.join(ck.work, d_), ignore_errors=True)
    ckpt = find_checkpoint(os.path.join(ck.work, run))
    S = read_st(os.path.join(ckpt, "model.safetensors"))
    zdir = os.path.join(ck.work, "cohere-dense-ls1-zero")
    shutil.copytree(ckpt, zdir)
    write_st(os.path.join(zdir, "model.safetensors"),
             {k: (v[0], [0.0] * len(v[1]) if k.endswith("norm.bias") else v[1], v[2]) for k, v in S.items()})
    r = ck.run(["export", "--hf", "cohere-dense-ls1-zero", "--out", "ex-cohere-ls1", "--arch", "cohere"],
               expect_rc=None)
    if r.returncode == 2:
        ck.note("export --arch cohere of a model without logit_scale refused (exit 2): %s" % r.stderr.strip()[:200])
        return
    ck.equal("export --arch cohere of a model without logit_scale exits 0 (or 2)", r.returncode, 0)
    if r.returncode != 0:
        return
    ex = os.path.join(ck.work, "ex-cohere-ls1")
    c = json.load(open(os.path.join(ex, "config.json")))
    ck.close("export --arch cohere, no logit_scale in the lol model: config.json logit_scale as CohereConfig reads "
             "it (absent = 0.0625)", c.get("logit_scale", 0.0625), 1.0, 1e-7)
    T = q2.read_folder_weights(ex)
    ids = q2.encode(TEXT)
    toks = ids[:40]
    r = ck.run(["forward", "--model", "cohere-dense-ls1-zero", "--tokens", ",".join(map(str, toks)), "--out",
                "cohere-ls1-fw.safetensors"])
    if r.returncode == 0:
        lg = read_st(os.path.join(ck.work, "cohere-ls1-fw.safetensors"))["logits"]
        Vl = lg[0][-1]
        got = [lg[1][i * Vl:(i + 1) * Vl] for i in range(len(toks))]
        want = CohereRef(c, T).prefill(toks)[0]
        big = max(1.0, max(abs(v) for row in want for v in row))
        diff = max(abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb)) / big
        ck.close("export --arch cohere (logit_scale 1): max |lol forward(checkpoint) - reference(exported folder)| / "
                 "max|logit|", diff, 0.0, 0, 1e-4)
    compare_ppl(ck, "ex-cohere-ls1", CohereRef(c, T), ids, 40, "float64", 1e-5, "ex-cohere-ls1")


# ---------------------------------------------------------------- the cases
LOWER = list(range(97, 123))


def case_table():
    """tag -> (config, weight seed, cohere_weights keyword arguments, storage dtype, shards)"""
    A = cohere_config()
    B = cohere_config(num_hidden_layers=2, num_key_value_heads=1, tie_word_embeddings=False, rope_theta=10000.0,
                      logit_scale=2.5, layer_norm_eps=1e-3)
    C = cohere_config(num_key_value_heads=DROP, layer_norm_eps=DROP, tie_word_embeddings=DROP, logit_scale=DROP,
                      rope_scaling=DROP, use_qk_norm=DROP, attention_bias=DROP, rope_theta=10000.0,
                      num_hidden_layers=2)
    D = cohere_config(tie_word_embeddings=False, torch_dtype="bfloat16", logit_scale=1.7, rope_theta=2000.0,
                      num_hidden_layers=2)
    E = cohere_config(head_dim=12, tie_word_embeddings=False, logit_scale=0.5, num_hidden_layers=2)
    return {"A": (A, 701, {"embed_std": 2.0, "branch_gain": 2.0}, "F32", 1),
            "B": (B, 702, {"embed_std": 0.05, "branch_gain": 1.0, "lm_std": 0.25}, "F32", 1),
            "C": (C, 703, {"embed_std": 6.0, "branch_gain": 8.0, "small_rows": LOWER}, "F32", 1),
            "D": (D, 704, {"embed_std": 0.5, "branch_gain": 2.0, "lm_std": 0.5}, "BF16", 2),
            "E": (E, 705, {"embed_std": 0.5, "branch_gain": 2.0, "lm_std": 0.8}, "F32", 1)}


def rope_variants():
    return [("linear2", {"rope_scaling": {"type": "linear", "factor": 2.0}}),
            ("v5-rope_parameters-linear", {"rope_theta": DROP, "rope_scaling": DROP,
                                           "rope_parameters": {"rope_type": "linear", "factor": 3.0,
                                                               "rope_theta": 777.0}}),
            ("no-rope_theta", {"rope_theta": DROP})]


def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    _nice(ck)
    ids = q2.encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    pr = q2.encode("<|im_start|>user\nJump, fox: 12 dozen jugs?<|im_end|>\n")
    pr9 = q2.encode("Hello wor")
    tab = case_table()

    def make(tag, key):
        cfg, sd, wkw, dt, sh = tab[key]
        return Case(ck, tag, cfg, cohere_weights(cfg, sd, **wkw), dt, shards=sh)

    c = make("cohere-gqa-tied-f32", "A")
    cfgA, TA = c.cfg, c.T
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr9, 12)
    c.generate(pr, 12, "float32")
    c.info()
    for vtag, change in rope_variants():
        cv = Case(ck, "cohere-A-" + vtag, _apply(dict(cfgA), change), TA, "F32", wtag="A")
        cv.ppl(ids, 64)

    c = make("cohere-untied-mqa", "B")
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr, 12, "float32")
    c.info()

    c = make("cohere-defaults", "C")
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr9, 12)
    c.info()

    c = make("cohere-bf16-shards", "D")
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 3e-2)
    c.generate(pr, 12)
    c.info()

    c = make("cohere-head_dim12", "E")
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr, 12, "float32")
    c.info()

    check_refusals(ck, cfgA, TA)
    check_export(ck)
    check_layerroute(ck, cfgA, TA, "cohere-gqa-tied-f32")

    dt_ = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt_))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


def _nice(ck):
    """run lol under `nice -n 10` (lol also gets OMP_NUM_THREADS=1)"""
    def run(args, expect_rc=0):
        cmd = ["nice", "-n", "10", ck.lol] + [str(a) for a in args]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        t = time.time()
        r = subprocess.run(cmd, cwd=ck.work, capture_output=True, text=True, env=env)
        ck.lol_seconds += time.time() - t
        ck.calls += 1
        ck.last_cmd = "cd %s && %s" % (ck.work, " ".join(q2._q(c_) for c_ in cmd))
        if expect_rc is not None and r.returncode != expect_rc:
            ck.fail("exit status %d (expected %d): %s" % (r.returncode, expect_rc, r.stderr.strip()[-600:]))
        return r
    ck.run = run


# ---------------------------------------------------------------- self-checks
def _maxdiff(A, B):
    return max(abs(a - b) for ra, rb in zip(A, B) for a, b in zip(ra, rb))


class _Tally:
    """a stand-in for Checker in selftest: counts check_peft_files' comparisons that fail"""

    def __init__(self):
        self.compared, self.failed = 0, []

    def equal(self, what, got, want):
        self.compared += 1
        if got != want:
            self.failed.append(what)


def selftest_peft_files(modules, arch, St, target_modules, rank, alpha, want_modules):
    """check_peft_files on an adapter directory written here as docs/layerroute.md describes it
    (no failure), and on wrong files (each detected): lol's own target names where the class's
    differ, a target selecting a container, a rank_pattern / alpha_pattern changing a module's
    scale, fan_in_fan_out true, no peft_architecture, a lora_B of a wrong shape"""
    import tempfile
    bad = []
    lj = {"lora": {"rank": rank, "alpha": alpha}, "peft_architecture": arch}
    ac = {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": target_modules,
          "rank_pattern": {}, "alpha_pattern": {}, "fan_in_fan_out": False, "bias": "none"}
    first = sorted(want_modules)[0]
    last = first.rsplit(".", 1)[1]
    variants = [("as documented", {}, {}, None)]
    if "fc_out" in target_modules:
        variants.append(("lol's names (down_proj for fc_out)", {"target_modules": [
            "down_proj" if t == "fc_out" else t for t in target_modules]}, {}, None))
    variants += [("a target selecting a parent container", {"target_modules": list(target_modules) + [
                     first.split(".")[-2]]}, {}, None),
                 ("rank_pattern doubling %s's rank" % last, {"rank_pattern": {last: 2 * rank}}, {}, None),
                 ("alpha_pattern doubling %s's alpha" % last, {"alpha_pattern": {last: 2 * alpha}}, {}, None),
                 ("fan_in_fan_out true", {"fan_in_fan_out": True}, {}, None),
                 ("no peft_architecture", {}, {"peft_architecture": None}, None),
                 ("a lora_B transposed", {}, {}, first)]
    with tempfile.TemporaryDirectory() as d:
        for name, acx, ljx, transpose in variants:
            S = dict(St)
            if transpose:
                k = "base_model.model.%s.lora_B.weight" % transpose
                S[k] = (list(reversed(S[k][0])), S[k][1], "F32")
            write_st(os.path.join(d, "adapter_model.safetensors"), S)
            json.dump(dict(ac, **acx), open(os.path.join(d, "adapter_config.json"), "w"))
            lj2 = dict(lj, **ljx)
            if lj2["peft_architecture"] is None:
                del lj2["peft_architecture"]
            json.dump(lj2, open(os.path.join(d, "layerroute.json"), "w"))
            t = _Tally()
            check_peft_files(t, "selftest", d, modules, arch, want_modules)
            print("  selftest: check_peft_files on %-48s %d of %d comparisons fail" % (name, len(t.failed), t.compared))
            if (name == "as documented") != (not t.failed):
                bad.append("check_peft_files on %s: %d failing comparisons %s" % (name, len(t.failed), t.failed))
    return bad


def selftest():
    bad = []
    t0 = time.time()
    ids = q2.encode("Hello, cohere! Sphinx of quartz.")
    tab = case_table()

    # 1. interleaved RoPE = rotate-half RoPE on q / k rows permuted per head (lol's load-time reordering)
    for tag in ("A", "E"):
        c, seed, wkw, dt, _ = tab[tag]
        T = cohere_weights(c, seed, **wkw)
        hd = cohere_params(c)["hd"]
        perm = half_perm(hd)
        TP = {}
        for k, (s_, v) in T.items():
            if k.endswith(("q_proj.weight", "k_proj.weight")):
                Mx = permute_head_rows(q2.mat((s_, v)), hd, perm)
                TP[k] = (s_, [x for row in Mx for x in row])
            else:
                TP[k] = (s_, v)
        a = CohereRef(c, W64(T)).prefill(ids)[0]
        b = CohereRef(c, W64(TP), rope="half").prefill(ids)[0]
        b2 = CohereRef(c, W64(T), rope="half").prefill(ids)[0]
        big = max(abs(v) for row in a for v in row)
        print("  selftest %s: interleaved vs rotate-half on permuted rows: max rel diff %.2e (unpermuted: %.2e)"
              % (tag, _maxdiff(a, b) / big, _maxdiff(a, b2) / big))
        if _maxdiff(a, b) > 1e-12 * big:
            bad.append("%s: interleaved RoPE != rotate-half on permuted rows (%.2e)" % (tag, _maxdiff(a, b)))
        if _maxdiff(a, b2) < 1e-3 * big:
            bad.append("%s: rotate-half on unpermuted rows equals the interleaved form" % tag)
        # and the inverse permutation undoes it
        v0 = q2.mat(T["model.layers.0.self_attn.q_proj.weight"])
        if permute_head_rows(permute_head_rows(v0, hd, perm), hd, inverse(perm)) != v0:
            bad.append("inverse permutation does not undo the permutation")
    # interleaved rotation = complex rotation of (x_2i + i x_2i+1) by pos * inv_freq_i (float64 angles)
    c = tab["A"][0]
    m = CohereRef(c, W64(cohere_weights(c, 1)))
    x = [math.sin(3.0 * j + 1) for j in range(8)]
    pos = 7
    base = 500.0
    y = m._rope(x, [math.cos(pos * base ** (-2 * i / 8)) for i in range(4)],
                [math.sin(pos * base ** (-2 * i / 8)) for i in range(4)])
    for i in range(4):
        z = complex(x[2 * i], x[2 * i + 1]) * complex(math.cos(pos * base ** (-2 * i / 8)),
                                                      math.sin(pos * base ** (-2 * i / 8)))
        if abs(z.real - y[2 * i]) > 1e-14 or abs(z.imag - y[2 * i + 1]) > 1e-14:
            bad.append("interleaved RoPE != complex rotation at pair %d" % i)
    # the LayerNorm against its definition
    w = [1.0 + 0.1 * j for j in range(5)]
    xv = [3.0, -1.0, 2.5, 0.0, 7.0]
    mu = sum(xv) / 5
    var = sum((v - mu) ** 2 for v in xv) / 5
    want = [wi * (v - mu) / math.sqrt(var + 1e-5) for wi, v in zip(w, xv)]
    if max(abs(a_ - b_) for a_, b_ in zip(layernorm(xv, w, 1e-5), want)) > 1e-14:
        bad.append("layernorm != definition")

    # 2. sensitivity: every alternative moves the summed loss by far more than the tolerance
    text_ids = q2.encode(TEXT)[:100]
    sens = {}
    for tag in ("A", "B", "C", "D", "E"):
        c, seed, wkw, dt, _ = tab[tag]
        Wt = q2.as_weights(cohere_weights(c, seed, **wkw), dt)
        ref, cnt = mean_ce(CohereRef(c, Wt), ppl_windows(text_ids, 40))
        for name, kw in alternatives(c):
            alt, _ = mean_ce(CohereRef(c, Wt, **kw), ppl_windows(text_ids, 40))
            rel = abs(alt - ref) / abs(ref)
            sens[(tag, name)] = rel
            print("  selftest %s %-72s relative change %.2e" % (tag, name, rel))
            if "eps" in name and tag not in ("B", "C"):
                continue  # eps matters for small activations only: cases B and C
            if rel < 2e-4:  # 20x the 1e-5 tolerance
                bad.append("case %s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
        print("  selftest %s loss %.8g (mean %.4f nats, ln V = %.4f)" % (tag, ref, ref / cnt,
                                                                       math.log(c["vocab_size"])))
    pr = q2.encode("<|im_start|>user\nJump, fox: 12 dozen jugs?<|im_end|>\n")
    for tag in ("A", "B", "C", "D", "E"):
        c, seed, wkw, dt, _ = tab[tag]
        Wt = q2.as_weights(cohere_weights(c, seed, **wkw), dt)
        toks = CohereRef(c, Wt).greedy(pr, 12)[0]
        if len(set(toks)) < 3:
            bad.append("case %s: greedy continuation %s too repetitive" % (tag, toks))
        same = [name for name, kw in alternatives(c) if "eps" not in name and
                CohereRef(c, Wt, **kw).greedy(pr, 12)[0] == toks]
        print("  selftest %s greedy %s; alternatives with the same ids: %s" % (tag, toks, same or "none"))

    # 3. LoRA as PEFT's files on CohereForCausalLM: q / k lora_B rows in Hugging Face order (the
    #    documented reading, lora_rows "hf") vs lol's reordered order (the layout before
    #    peft_architecture, lora_rows "reordered"); fold = low-rank path
    cA, sA, wA, _, _ = tab["A"]
    TA = cohere_weights(cA, sA, **wA)
    WA = q2.as_weights(TA, "F32")
    st, lora = q2.random_lora(cA, LR_TARGETS, 4, 13)
    wins = ppl_windows(text_ids, 40)
    m0, _ = mean_ce(CohereRef(cA, WA, lora=lora, lora_scale=2.0), wins)
    m1, _ = mean_ce(CohereRef(cA, WA, lora=lora, lora_scale=2.0, lora_rows="reordered"), wins)
    mb, _ = mean_ce(CohereRef(cA, WA), wins)
    print("  selftest A+LoRA loss %.8g (base %.8g); q/k LoRA rows read in lol's reordered order: relative change %.2e"
          % (m0, mb, abs(m1 - m0) / m0))
    if abs(m1 - m0) < 2e-4 * m0:
        bad.append("LoRA q/k row order moves the loss by only %.2e" % (abs(m1 - m0) / m0))
    if abs(m0 - mb) < 1e-3 * mb:
        bad.append("random LoRA barely changes the loss")
    hd = 8
    inv = inverse(half_perm(hd))
    xx = [math.sin(j + 1.0) for j in range(32)]
    for rows in ("hf", "reordered"):
        g = CohereRef(cA, WA, lora=lora, lora_scale=2.0, lora_rows=rows)
        for proj, sub in (("o_proj", "self_attn"), ("q_proj", "self_attn"), ("k_proj", "self_attn")):
            A_, B_ = lora["layers.1.%s.%s" % (sub, proj)]
            basev = matvec(g.layers[1][proj + "_base"], xx)
            lowr = matvec(B_, matvec(A_, xx))
            if proj != "o_proj" and rows == "reordered":  # HF row j of head h gets reordered row inv[j]
                lowr = [lowr[h * hd + inv[r]] for h in range(len(lowr) // hd) for r in range(hd)]
            want = [u + 2.0 * v for u, v in zip(basev, lowr)]
            if max(abs(u - v) for u, v in zip(matvec(g.layers[1][proj], xx), want)) > 1e-12:
                bad.append("LoRA fold (rows %s) of %s != W x + s %sB A x" % (
                    rows, proj, "P^-1 " if rows == "reordered" and proj != "o_proj" else ""))
    # against lol's model (q / k rows permuted to rotate-half pairs, rotate-half RoPE), where a LoRA
    # acts on the permuted rows as stored (lora_rows "hf" = as is): PEFT's rule on the Hugging Face
    # weights (documented) = lol's LoRA with B's q / k rows permuted like the loader's (B_lol = P B);
    # the old reading = lol's LoRA with B as stored
    perm = half_perm(hd)
    TP = {}
    for k, (s_, v) in TA.items():
        if k.endswith(("q_proj.weight", "k_proj.weight")):
            Mx = permute_head_rows(q2.mat((s_, v)), hd, perm)
            TP[k] = (s_, [x_ for row in Mx for x_ in row])
        else:
            TP[k] = (s_, v)
    lora_lol = {k: (A_, permute_head_rows(B_, hd, perm) if k.endswith(("q_proj", "k_proj")) else B_)
                for k, (A_, B_) in lora.items()}
    for reading, rows, lo in (("documented (B_lol = P B)", "hf", lora_lol), ("old (B_lol = B)", "reordered", lora)):
        la = CohereRef(cA, W64(TA), lora=lora, lora_scale=2.0, lora_rows=rows).prefill(ids)[0]
        lb = CohereRef(cA, W64(TP), lora=lo, lora_scale=2.0, lora_rows="hf", rope="half").prefill(ids)[0]
        print("  selftest: LoRA %s reading on Cohere's weights vs lol's LoRA on the permuted rotate-half model: "
              "max diff %.2e" % (reading, _maxdiff(la, lb)))
        if _maxdiff(la, lb) > 1e-11:
            bad.append("LoRA %s reading != lol's LoRA on the permuted rotate-half model (%.2e)"
                       % (reading, _maxdiff(la, lb)))
    # the two readings' merged weights are far apart at check_merged_weights' 1e-6
    g0 = CohereRef(cA, WA, lora=lora, lora_scale=2.0)
    g1 = CohereRef(cA, WA, lora=lora, lora_scale=2.0, lora_rows="reordered")
    sep = max(_maxdiff(g0.layers[i][pj], g1.layers[i][pj]) / max(abs(v) for row in g0.layers[i][pj] for v in row)
              for i in range(cA["num_hidden_layers"]) for pj in ("q_proj", "k_proj"))
    print("  selftest: the two q / k row readings' merged weights differ by %.2e of max |W'|" % sep)
    if sep < 1e-4:
        bad.append("the two q / k row readings' merged weights differ by only %.2e" % sep)
    # PEFT's target_modules / pattern rules on Cohere's module tree
    mods = cohere_modules(cA)
    if sorted(m for m in mods if peft_selects(m, LR_TARGETS)) != sorted(all_modules(cA)):
        bad.append("peft_selects(LR_TARGETS) on Cohere's modules")
    if [m for m in mods if peft_selects(m, ["proj", "_proj"])] or \
            len([m for m in mods if peft_selects(m, ["mlp"])]) != cA["num_hidden_layers"]:
        bad.append("peft_selects matches inside a name / misses a container")
    if sorted(m for m in mods if peft_selects(m, r"model\.layers\.\d+\.self_attn\.[qk]_proj")) != sorted(
            m for m in all_modules(cA) if m.endswith(("q_proj", "k_proj"))):
        bad.append("peft_selects with a regular expression")
    if (peft_pattern({"q_proj": 8}, "model.layers.1.self_attn.q_proj", 4),
            peft_pattern({"_proj": 8}, "model.layers.1.self_attn.q_proj", 4)) != (8, 4):
        bad.append("peft_pattern")
    if sum(v is not None for v in mods.values()) != 7 * cA["num_hidden_layers"] + 1:
        bad.append("cohere_modules: Linear modules")
    bad += selftest_peft_files(mods, ARCH, st, list(LR_TARGETS), 4, 8.0, all_modules(cA))

    # LayerRoute: designed gates; the row-order reading moves the compared numbers
    _, held = q2.lr_data(11)
    samples = [q2.chatml_ids(s_, None) + (s_["source"],) for s_ in held]
    _, lora, gmodel, Wg, bg, margin, _ = random_adapter(cA, WA, samples)
    ref = q2.layerroute_eval_ref(gmodel, samples)
    print("  selftest LayerRoute (A, random LoRA, designed gates, smallest |s| %.3g): ppl_open %.8g ppl_gated %.8g "
          "layer_open %s" % (margin, ref["ppl_open"], ref["ppl_gated"], ref["layer_open"]))
    if margin < 0.01:
        bad.append("designed gates within %.3g of the tie" % margin)
    alt = q2.layerroute_eval_ref(CohereRef(cA, WA, lora=lora, lora_scale=2.0, gates=(Wg, bg),
                                           lora_rows="reordered"), samples)
    moved = max(abs(alt[k] - ref[k]) / ref[k] for k in ("ppl_open", "ppl_gated", "ppl_gated_prompt"))
    print("  selftest LayerRoute LoRA q/k rows read in lol's reordered order: largest relative change %.2e" % moved)
    if moved < 2e-4:
        bad.append("LayerRoute: the q/k row-order reading changes the perplexities by only %.2e" % moved)

    # 4. cached greedy = recomputation; gated driver with all gates open = the plain forward
    c, seed, wkw, dt, _ = tab["B"]
    Wt = W64(cohere_weights(c, seed, **wkw))
    toks = CohereRef(c, Wt).greedy(ids[:5], 8)[0]
    seq = list(ids[:5])
    for j in range(8):
        t = q2.argmax_low(CohereRef(c, Wt).prefill(seq)[0][-1])
        if t != toks[j]:
            bad.append("cached greedy step %d: %d != recomputed %d" % (j, toks[j], t))
            break
        seq.append(t)
    gm = CohereRef(cA, WA, gates=([[0.0] * 32 for _ in range(3)], [1.0, 1.0, 1.0]))
    if _maxdiff(gm.prefill(ids, "gated")[0], CohereRef(cA, WA).prefill(ids)[0]) > 0:
        bad.append("gated prefill with open gates != plain prefill")

    # 5. config defaults (CohereConfig) and parameter counts
    pd = cohere_params(tab["C"][0])
    if (pd["Hkv"], pd["eps"], pd["tied"], pd["ls"], pd["hd"]) != (4, 1e-5, True, 0.0625, 8):
        bad.append("CohereConfig defaults %s" % pd)
    if cohere_params(cohere_config(num_key_value_heads=None))["Hkv"] != 4:
        bad.append("num_key_value_heads null")
    for c in (cohere_config(), tab["B"][0], tab["C"][0], tab["E"][0]):
        Tt = cohere_weights(c, 1)
        if param_count(c) != sum(len(v[1]) for v in Tt.values()):
            bad.append("param_count %d != stored values %d" % (param_count(c), sum(len(v[1]) for v in Tt.values())))
    # c4ai-command-r-v01 (remembered config: V 256000, d 8192, F 22528, 40 layers, 64 heads, 64 kv heads, tied)
    cr = cohere_config(vocab_size=256000, hidden_size=8192, intermediate_size=22528, num_hidden_layers=40,
                       num_attention_heads=64, num_key_value_heads=64)
    print("  selftest: command-r-v01-like parameter count %d" % param_count(cr))
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny Cohere folders, run lol, compare with the reference")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    c.add_argument("--quiet", action="store_true", help="print only disagreements and the summary")
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
