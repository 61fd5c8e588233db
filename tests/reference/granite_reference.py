#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face Granite (GraniteForCausalLM, model_type
"granite": IBM Granite 3.x dense models) in pure Python (stdlib only), and a check that
`lol hf info|ppl|generate`, `lol export --hf --arch granite` and `lol layerroute
train|eval|merge|generate` agree with it on tiny Granite folders written here.

  python3 tests/reference/granite_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/granite_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/, fuzz/, bench/ nor tests/ outside
tests/reference/, from: the feature's brief; docs/hf.md ("Commands", "What is loaded",
"OLMo 2 and OLMo 3", "Export"), docs/layerroute.md, docs/baselines.md and
docs/checkpoint-format.md ("lol forward output"); tests/reference/qwen2_reference.py and
olmo_reference.py (structure, conventions; qwen2_reference.py's helpers are imported
unchanged: the float32 RoPE tables as transformers builds them, RMSNorm / SiLU, the prefill /
greedy / gated driver of its `Ref`, `mean_ce`, the folder / byte-tokenizer / safetensors
writers, `random_lora`, `design_gates`, `layerroute_eval_ref`, `Checker` and the ppl /
greedy / LayerRoute comparisons); and public copies of transformers read with the search
tools (CHECKED):
  * huggingface/transformers src/transformers/models/granite/modeling_granite.py (a 4.45-era
    copy): GraniteModel.forward `inputs_embeds = inputs_embeds * self.embedding_multiplier`
    (after the embedding lookup, before the layers); GraniteAttention `self.scaling =
    config.attention_multiplier` used as `attn_weights = (q k^T) * self.scaling` (REPLACES
    head_dim^-0.5), `self.head_dim = hidden_size // num_heads` (that version ignores a
    config head_dim), q/k/v AND o_proj with `bias=config.attention_bias`; GraniteMLP
    `down_proj(act_fn(gate_proj(x)) * up_proj(x))`, every projection `bias=config.mlp_bias`;
    GraniteDecoderLayer `h = residual + self_attn(input_layernorm(x)) * residual_multiplier`,
    `y = h + mlp(post_attention_layernorm(h)) * residual_multiplier`; GraniteRMSNorm =
    LlamaRMSNorm (float32 statistics, `weight * x_norm.to(dtype)`); rotate-half RoPE from one
    GraniteRotaryEmbedding (ROPE_INIT_FUNCTIONS, cos/sin in float32); GraniteForCausalLM
    `logits = lm_head(norm(h)); logits = logits / config.logits_scaling`;
    `_tied_weights_keys = ["lm_head.weight"]`.
  * the current modular_granite.py: the same function on Llama's classes (GraniteAttention
    = LlamaAttention with `self.scaling = config.attention_multiplier`; LlamaAttention takes
    `head_dim = getattr(config, "head_dim", hidden_size // heads)`), `logits /
    config.logits_scaling  # main diff with Llama`.
  * configuration_granite.py (current, a strict dataclass): vocab_size 32000, hidden_act
    "silu", max_position_embeddings 2048, rms_norm_eps 1e-6, num_key_value_heads None ->
    num_attention_heads, tie_word_embeddings False, attention_bias False, mlp_bias False,
    embedding_multiplier / logits_scaling / residual_multiplier / attention_multiplier all
    1.0, rope via rope_parameters (older releases: rope_theta 10000, rope_scaling None).
Remembered, not re-read: real Granite 3.x configs (granite-3.0/3.1-2b/8b): embedding_multiplier
12.0, residual_multiplier 0.22, attention_multiplier 0.015625 (= 1 / head_dim, head_dim 64),
logits_scaling 8.0 (2b) / 16.0 (8b), tie_word_embeddings true; PEFT's LoRA (W + alpha/r B A on
the nn.Linear modules of the Hugging Face model).

The reference (float64; RoPE cos/sin tables in float32 as transformers builds them):
  h0 = embed_tokens[ids] * embedding_multiplier
  per layer (pre-norm, Llama's tensor names):
      x = RMSNorm(h) (input_layernorm), q,k,v = x W^T (+ q/k/v biases with attention_bias),
      rotate-half RoPE on q, k; grouped-query attention (query head a uses kv head
      a // (H / Hkv)), causal, scores = (q . k) * attention_multiplier; o_proj (+ bias)
      h = h + attn * residual_multiplier
      y = h + down(silu(gate(RMSNorm(h))) * up(RMSNorm(h))) * residual_multiplier
  logits = (RMSNorm(y) lm_head^T) / logits_scaling   (lm_head = the UNSCALED embed_tokens
      when tie_word_embeddings)
  LoRA (LayerRoute, PEFT): W' = W + (alpha / r) B A on the Hugging Face projections, folded
      in float64 (so the update of o_proj / down_proj is scaled by residual_multiplier and
      that of q_proj by the attention scale, as transformers + PEFT compute it).
  LayerRoute gates (docs/layerroute.md): hbar_i = mean of the residual stream entering block
      i, which for block 0 is the embedding TIMES embedding_multiplier (transformers'
      hidden_states entering the first layer); s_i = w_i . hbar_i + b_i.

Cases (vocab 264 > the byte tokenizer's 259 ids, hidden 32, intermediate 40, 4 heads of 8,
qwen2_reference's byte-level tokenizer with ChatML specials, its 199-token TEXT; norm weights
1 + N(0, 0.4); multipliers far from 1 so that each, ignored or misapplied, moves the summed
loss by far more than the 1e-5 tolerance -- see `selftest`):
  A granite-gqa-f32: 3 layers, 2 kv heads, untied, F32, embedding_multiplier 3.0,
    residual_multiplier 0.4, attention_multiplier 0.09 (not 8^-0.5 = 0.354), logits_scaling
    2.5, rope_theta 500, eps 1e-5: hf ppl float64 --context 9 / 64, float32 64; hf generate
    --tokens --ids float64 (two prompts) / float32; hf info --check.
  A-head_dim8: A with "head_dim": 8 (= hidden / heads): the same loss.
  B granite-tied-real: 2 layers, 1 kv head, tied, Granite-3.x-like 12.0 / 0.22 / 0.125
    (= 1 / head_dim) / 8.0, rope_theta 10000, eps 1e-5 (o_proj / down_proj weights x100 so
    that the blocks matter against a x12 embedding): ppl float64 / float32, generate, info.
  C granite-defaults: no multiplier keys, no num_key_value_heads / rope_theta / rms_norm_eps
    / tie_word_embeddings keys (-> 1.0 everywhere, attention scale 1.0 NOT head_dim^-0.5, MHA,
    10000, 1e-6, untied), embeddings of std 0.003 so that the default eps matters: ppl
    float64 / float32, generate, info.
  D granite-bf16-shards-mha: BF16 storage in 2 shards + index, MHA ("num_key_value_heads":
    4), multipliers 2.0 / 0.5 / 0.2 / 1.7: ppl float64 / float32 / bfloat16 (3e-2),
    generate float64, info --check.
  Refusals (hf ppl: exit 2, stderr naming the field): attention_bias true (q/k/v/o biases
    present), mlp_bias true (gate/up/down biases present), hidden_act gelu,
    embedding_multiplier 0, residual_multiplier -0.4, attention_multiplier 0, logits_scaling
    0 and -2.5, attention_multiplier 1e999 (overflows to +inf in Python's json; a JSON reader
    may refuse the number itself: a refusal that names the number or config.json instead of
    the field is a note), head_dim 16 != hidden / heads.
  export: `lol train` (5 steps) of a tiny dense lol model, tied, GQA, carrying the four
    multiplier keys (3.0 / 0.4 / 0.09 / 2.5) on a byte-tokenized corpus; `lol export --hf`
    (default arch) must write GraniteForCausalLM with the four multipliers (= the lol
    config's, within float32 rounding), Granite's tensor names / shapes; `lol forward` on the
    checkpoint = the reference on the exported folder (logits within 1e-4 of max |logit|);
    hf ppl of the folder = the reference; hf info --check; `--arch granite` accepted,
    `--arch llama` and `--arch qwen2` refused (exit 2).
  layerroute on case A's folder, LoRA rank 4 alpha 8 on all seven projections, --system "":
    (1) `train --steps 3 --lr 0.01` -> eval --json (ppl_base / ppl_open / ppl_gated,
    executed means, layer_open / sigma / nontrivial, per source) against the reference with
    the adapter's LoRA folded in float64 and its gates (gated numbers only when every gate
    score is >= 1e-4 from the tie), merge (GraniteForCausalLM, the base's multipliers kept,
    merged weights = the float64 fold within 1e-6 of max |W'|), hf ppl of the merged folder;
    (2) the same adapter directory with random LoRA tensors (B != 0) and gates designed so
    that decisions differ between samples and between a sample and its prompt: eval
    --gates learned (--max-prompt 256 and 12) / closed, generate (layers run and greedy
    ids: learned on sample prompts whose gates close a layer and on one that opens all,
    forced open / closed), merge (weights, config, hf ppl and hf generate of the merged
    folder = every layer + LoRA; --dtype bfloat16: every value within half a bf16 ulp of
    the exact fold, multipliers kept), eval --adapter MERGED.
  hf info (A, B, C, D, the export): exit 0, names GraniteForCausalLM, "all tensors present",
    parameters = transformers' num_parameters(); the multipliers where its "block" line
    words them ("embeddings times", "attention scale", "sublayer outputs times", "logits
    divided by"; a note if not found).
Tolerances: summed losses / perplexities / bits per byte 1e-5 relative (bfloat16 compute
3e-2); greedy ids exact (after a float32 near-tie, top-2 gap < 1e-4 of max |logit|, the
rest is not compared and a note says so); gate sigmas 1e-5; counts exact.
On a ppl disagreement (first 6), the case is re-evaluated under alternative readings --
each multiplier ignored, the residual multiplier on one branch only, Llama's head_dim^-0.5
(or both scales), logits multiplied instead of divided, a tied lm_head scaled like the
input embedding, LoRA updates not rescaled by the folds, the first gate pooling the
unscaled embedding -- and the readings matching lol are named.
`check` does not run `selftest` (~30 s of pure Python): run both. `selftest` checks the
reference against qwen2_reference's Llama Ref (multipliers 1, attention_multiplier =
head_dim^-0.5: identical), that lol's load-time folds (q_proj x attention_multiplier
sqrt(head_dim), o_proj / down_proj x residual_multiplier, Llama's scale) give the same
function (1e-14), that each alternative reading moves the summed loss of cases A-D (100
tokens, context 40) by far more than the tolerance (when written: smallest 1.7e-3 relative,
case B's residual multiplier on the MLP only; 1.1e-2 to 4 elsewhere; head_dim^-0.5 instead
of attention_multiplier 1.2e-2 (A), 6.4e-3 (B), 1.2e-2 (C: the default 1.0), 2.7e-2 (D)),
that the LoRA-unscaled and unscaled-gate readings move LayerRoute's perplexities by 2e-1,
cached greedy = recomputation, GraniteConfig's defaults and parameter counts.

ASSUMED (not settled by the transformers code read):
  1. "head_dim" in config.json: equal to hidden_size / num_attention_heads is accepted (the
     same function); different is refused naming head_dim (the brief; transformers releases
     differ: the 4.45 GraniteAttention ignores it, the Llama-based one uses it).
  2. Refusals (exit 2 naming the field) of attention_bias / mlp_bias true, hidden_act other
     than silu, non-positive or non-finite multipliers are lol's rule (the brief, docs/hf.md's
     "fields that change the function and are not implemented are refused"); transformers
     would run the biases and gelu (a zero logits_scaling would give inf / nan logits).
  3. LayerRoute's gate of block 0 reads the embedding times embedding_multiplier (the hidden
     state transformers feeds the first layer); the brief does not say.
  4. `hf ppl` adds no BOS token and predicts every token of a window but the first
     (docs/hf.md); greedy picks the lowest id on an exact tie; eval --samples 0 takes every
     held-out sample (as qwen2_reference / olmo_reference use it).
  5. Multipliers written by `export` are compared within 1e-6 relative (lol may keep them
     in float32); the reference then runs the exported values.
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
from qwen2_reference import (Checker, apply_rope, compare_generate, compare_ppl, f32,  # noqa: E402
                             mean_ce, ppl_windows, rmsnorm, silu, write_folder)
from safetensors_io import read_st, write_st  # noqa: E402

TEXT = q2.TEXT
DIAGNOSE = [6]
DROP = object()
PROJ = q2.PROJ
ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
MULTS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")


def matvec(W, x):
    """qwen2_reference.matvec's sums in the same order (bit for bit), faster"""
    return [sum(map(mul, row, x)) for row in W]


# ---------------------------------------------------------------- config reading (GraniteConfig)
def granite_params(cfg):
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads")
    if Hkv is None:  # missing or null
        Hkv = H
    hd = cfg.get("head_dim") or d // H  # ASSUMED 1 (a different head_dim is refused by lol)

    def m(k):
        v = cfg.get(k)
        return 1.0 if v is None else float(v)
    return {"d": d, "H": H, "Hkv": Hkv, "hd": hd, "F": cfg["intermediate_size"], "L": cfg["num_hidden_layers"],
            "V": cfg["vocab_size"], "eps": cfg.get("rms_norm_eps", 1e-6),
            "theta": cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)),
            "tied": cfg.get("tie_word_embeddings", False), "mpe": cfg.get("max_position_embeddings", 2048),
            "attention_bias": cfg.get("attention_bias", False), "mlp_bias": cfg.get("mlp_bias", False),
            "emb": m("embedding_multiplier"), "res": m("residual_multiplier"), "attn": m("attention_multiplier"),
            "logits": m("logits_scaling")}


# ---------------------------------------------------------------- the model
class GraniteRef(q2.Ref):
    """GraniteForCausalLM, float64. Reuses qwen2_reference.Ref's prefill / greedy / gate
    driver (modes backbone / open / gated / forced); weights, block and head are this
    class's. `self.embed` holds the embedding rows TIMES embedding_multiplier (what enters
    the first block, also what LayerRoute's first gate pools); the tied lm_head is the
    unscaled matrix.
    lora: {"layers.{i}.{self_attn|mlp}.{proj}": (A, B)} folded as W + lora_scale B A.
    Keyword arguments select alternative readings (sensitivity checks and diagnosis):
      emb, res_attn, res_mlp, attn (the score scale), logits: overrides of the multipliers;
      logits_mul: multiply by logits_scaling instead of dividing;
      head_scaled: a tied lm_head that is the SCALED embedding;
      lora_unscaled: LoRA updates of q_proj / o_proj / down_proj NOT rescaled by the folds
          (as if added after folding attention_multiplier sqrt(head_dim) into q_proj and
          residual_multiplier into o_proj / down_proj: HF-space delta / fold factor);
      gate_unscaled: the first gate pools the unscaled embedding;
      eps: override rms_norm_eps."""

    def __init__(self, cfg, weights, lora=None, lora_scale=0.0, gates=None, emb=None, res_attn=None, res_mlp=None,
                 attn=None, logits=None, logits_mul=False, head_scaled=False, lora_unscaled=False,
                 gate_unscaled=False, eps=None):
        p = granite_params(cfg)
        self.cfg, self.p = cfg, p
        self.arch = cfg["architectures"][0]
        self.d, self.L, self.H, self.Hkv, self.hd, self.V = p["d"], p["L"], p["H"], p["Hkv"], p["hd"], p["V"]
        self.eps = p["eps"] if eps is None else eps
        self.emb = p["emb"] if emb is None else emb
        self.res_attn = p["res"] if res_attn is None else res_attn
        self.res_mlp = p["res"] if res_mlp is None else res_mlp
        self.scale = p["attn"] if attn is None else attn
        self.ls = p["logits"] if logits is None else logits
        self.logits_mul = logits_mul
        self.gate_unscaled = gate_unscaled
        M = {k: q2.mat(v) for k, v in weights.items()}
        E = M["model.embed_tokens.weight"]
        self.embed = [[v * self.emb for v in row] for row in E]
        if p["tied"]:
            self.lm_head = self.embed if head_scaled else E
        else:
            self.lm_head = M["lm_head.weight"]
        self.norm = M["model.norm.weight"]
        fold = {"q_proj": p["attn"] * math.sqrt(p["hd"]), "o_proj": p["res"], "down_proj": p["res"]}
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            ly = {"in_norm": M[pre + "input_layernorm.weight"], "post_norm": M[pre + "post_attention_layernorm.weight"]}
            for proj in PROJ:
                sub = "self_attn." if proj in ATTN else "mlp."
                W0 = M[pre + sub + proj + ".weight"]
                W = W0
                key = "layers.%d.%s%s" % (i, sub, proj)
                if lora and key in lora:
                    A, B = lora[key]
                    BA = q2.matmul(B, A)
                    sc = lora_scale / (fold.get(proj, 1.0) if lora_unscaled else 1.0)
                    W = [[w + sc * ba for w, ba in zip(rw, rb)] for rw, rb in zip(W0, BA)]
                ly[proj] = W
                ly[proj + "_base"] = W0
                ly[proj + ".b"] = M.get(pre + sub + proj + ".bias")
            self.layers.append(ly)
        self.gates = gates
        self.cos, self.sin = q2.rope_tables(cfg, self.hd, min(p["mpe"], 512))
        self.use_lora = True
        self.memo = {}

    def gate_score(self, i, X):
        s = q2.Ref.gate_score(self, i, X)
        if i == 0 and self.gate_unscaled:
            W, b = self.gates
            s = (s - b[i]) / self.emb + b[i]
        return s

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        sfx = "" if self.use_lora else "_base"
        H, Hkv, hd, eps, scale = self.H, self.Hkv, self.hd, self.eps, self.scale
        rep = H // Hkv
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = rmsnorm(h, ly["in_norm"], eps)
            q, k, v = matvec(ly["q_proj" + sfx], x), matvec(ly["k_proj" + sfx], x), matvec(ly["v_proj" + sfx], x)
            if ly["q_proj.b"] is not None:
                q = [a + b for a, b in zip(q, ly["q_proj.b"])]
            if ly["k_proj.b"] is not None:
                k = [a + b for a, b in zip(k, ly["k_proj.b"])]
            if ly["v_proj.b"] is not None:
                v = [a + b for a, b in zip(v, ly["v_proj.b"])]
            c, s = self.cos[pos], self.sin[pos]
            qh = [apply_rope(q[a * hd:(a + 1) * hd], c, s) for a in range(H)]
            kh = [apply_rope(k[a * hd:(a + 1) * hd], c, s) for a in range(Hkv)]
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
            ao = matvec(ly["o_proj" + sfx], att)
            if ly["o_proj.b"] is not None:
                ao = [a + b for a, b in zip(ao, ly["o_proj.b"])]
            ra = self.res_attn
            h2 = [x1 + x2 * ra for x1, x2 in zip(h, ao)]
            x = rmsnorm(h2, ly["post_norm"], eps)
            gt, up = matvec(ly["gate_proj" + sfx], x), matvec(ly["up_proj" + sfx], x)
            if ly["gate_proj.b"] is not None:
                gt = [a + b for a, b in zip(gt, ly["gate_proj.b"])]
                up = [a + b for a, b in zip(up, ly["up_proj.b"])]
            dn = matvec(ly["down_proj" + sfx], [silu(a) * b for a, b in zip(gt, up)])
            if ly["down_proj.b"] is not None:
                dn = [a + b for a, b in zip(dn, ly["down_proj.b"])]
            rm = self.res_mlp
            out.append([x1 + x2 * rm for x1, x2 in zip(h2, dn)])
        return out

    def head(self, h):
        z = matvec(self.lm_head, rmsnorm(h, self.norm, self.eps))
        ls = self.ls
        return [v * ls for v in z] if self.logits_mul else [v / ls for v in z]


def param_count(cfg):
    """transformers' num_parameters() (tied embeddings counted once)"""
    p = granite_params(cfg)
    d, F, H, Hkv, hd = p["d"], p["F"], p["H"], p["Hkv"], p["hd"]
    per = H * hd * d + 2 * Hkv * hd * d + d * H * hd + 3 * F * d + 2 * d
    if p["attention_bias"]:
        per += (H + 2 * Hkv) * hd + d
    if p["mlp_bias"]:
        per += 2 * F + d
    return p["V"] * d * (1 if p["tied"] else 2) + d + p["L"] * per


# ---------------------------------------------------------------- tiny folders
def _apply(c, kw):
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def granite_config(**kw):
    c = {"architectures": ["GraniteForCausalLM"], "model_type": "granite", "vocab_size": 264, "hidden_size": 32,
         "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 256, "rope_theta": 500.0, "rope_scaling": None, "rms_norm_eps": 1e-5,
         "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "hidden_act": "silu",
         "initializer_range": 0.02, "tie_word_embeddings": False, "use_cache": True, "torch_dtype": "float32",
         "bos_token_id": q2.ENDOFTEXT, "eos_token_id": q2.IM_END, "pad_token_id": q2.ENDOFTEXT,
         "embedding_multiplier": 3.0, "residual_multiplier": 0.4, "attention_multiplier": 0.09,
         "logits_scaling": 2.5}
    return _apply(c, kw)


def granite_weights(cfg, seed, embed_std=1.0, lm_std=0.25, branch_gain=1.0, biases=False, mlp_biases=False):
    """random tensors: norm weights 1 + N(0, 0.4); q / k rows std 2.5 / sqrt(in), v, gate,
    up 1.2 / sqrt(in), o_proj / down_proj 1.2 branch_gain / sqrt(in); biases when asked"""
    rng = random.Random(seed)
    p = granite_params(cfg)
    d, L, V, F, H, Hkv, hd = p["d"], p["L"], p["V"], p["F"], p["H"], p["Hkv"], p["hd"]
    T = {}

    def put(name, shape, std, mean=0.0):
        n = 1
        for s_ in shape:
            n *= s_
        T[name] = (list(shape), [f32(rng.gauss(mean, std)) for _ in range(n)])
    put("model.embed_tokens.weight", [V, d], embed_std)
    if not p["tied"]:
        put("lm_head.weight", [V, d], lm_std)
    put("model.norm.weight", [d], 0.4, 1.0)
    for i in range(L):
        pre = "model.layers.%d." % i
        put(pre + "input_layernorm.weight", [d], 0.4, 1.0)
        put(pre + "post_attention_layernorm.weight", [d], 0.4, 1.0)
        for nm, o, inn, sd in (("self_attn.q_proj", H * hd, d, 2.5), ("self_attn.k_proj", Hkv * hd, d, 2.5),
                               ("self_attn.v_proj", Hkv * hd, d, 1.2), ("self_attn.o_proj", d, H * hd, 1.2 * branch_gain),
                               ("mlp.gate_proj", F, d, 1.2), ("mlp.up_proj", F, d, 1.2),
                               ("mlp.down_proj", d, F, 1.2 * branch_gain)):
            put(pre + nm + ".weight", [o, inn], sd / math.sqrt(inn))
            if (biases and nm.startswith("self_attn")) or (mlp_biases and nm.startswith("mlp")):
                put(pre + nm + ".bias", [o], 0.3)
    return T


def W64(T):
    return {k: (v[0], v[1], "F64") for k, v in T.items()}


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = granite_params(cfg)
    hd = p["hd"]
    out = []
    if p["emb"] != 1.0:
        out.append(("embedding_multiplier ignored", {"emb": 1.0}))
    if p["res"] != 1.0:
        out += [("residual_multiplier ignored", {"res_attn": 1.0, "res_mlp": 1.0}),
                ("residual_multiplier on the attention branch only", {"res_mlp": 1.0}),
                ("residual_multiplier on the MLP branch only", {"res_attn": 1.0})]
    if abs(p["attn"] - hd ** -0.5) > 1e-9:
        out.append(("attention scale head_dim^-0.5 (Llama's) instead of attention_multiplier", {"attn": hd ** -0.5}))
    if p["attn"] != 1.0:
        out.append(("attention scale 1.0 (attention_multiplier ignored)", {"attn": 1.0}))
        out.append(("attention scale attention_multiplier * head_dim^-0.5 (both)", {"attn": p["attn"] * hd ** -0.5}))
    if p["logits"] != 1.0:
        out += [("logits_scaling ignored", {"logits": 1.0}), ("logits multiplied by logits_scaling",
                                                               {"logits_mul": True})]
    if p["tied"] and p["emb"] != 1.0:
        out.append(("tied lm_head = the embedding times embedding_multiplier", {"head_scaled": True}))
    out.append(("rms_norm_eps 1e-6" if p["eps"] != 1e-6 else "rms_norm_eps 1e-5",
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
        p = granite_params(cfg)
        print("[%s] H %d, Hkv %d, hd %d, eps %g, theta %g, tied %s, multipliers emb %g res %g attn %g logits %g, %s%s"
              % (tag, p["H"], p["Hkv"], p["hd"], p["eps"], p["theta"], p["tied"], p["emb"], p["res"], p["attn"],
                 p["logits"], dt, " in %d shards" % shards if shards > 1 else ""), flush=True)

    def alt(self, kw):
        key = (self.wtag, self.dt, json.dumps(self.cfg, sort_keys=True), json.dumps(kw, sort_keys=True))
        if key not in Case.models:
            Case.models[key] = GraniteRef(self.cfg, self.W, **kw)
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
    ck.equal("%s hf info names GraniteForCausalLM" % tag, "GraniteForCausalLM" in r.stdout, True)
    if check:
        ck.equal("%s hf info --check: all tensors present" % tag, "all tensors present" in r.stdout, True)
    m = re.search(r"parameters\s+([\d,]+)", r.stdout)
    if m:
        ck.equal("%s hf info parameters (transformers' num_parameters())" % tag, int(m.group(1).replace(",", "")),
                 param_count(cfg))
    else:
        ck.compared += 1
        ck.fail("%s: hf info prints no 'parameters N' line" % tag)
    # the multipliers as hf info words them (lol's own format: a note when it is not found)
    p = granite_params(cfg)
    found = []
    for what, pat, want in (("embedding_multiplier", r"embeddings times ([-+\d.eE]+\d)", p["emb"]),
                            ("attention_multiplier", r"attention scale ([-+\d.eE]+\d)", p["attn"]),
                            ("residual_multiplier", r"sublayer outputs times ([-+\d.eE]+\d)", p["res"]),
                            ("logits_scaling", r"logits divided by ([-+\d.eE]+\d)", p["logits"])):
        m = re.search(pat, r.stdout)
        if m:
            found.append(what)
            ck.close("%s hf info prints %s" % (tag, what), float(m.group(1)), want, 1e-6)
    if len(found) < 4:
        ck.note("%s: hf info shows %s of the four multipliers in a form this check reads" % (tag, found or "none"))


def refusal(ck, tag, cfg, T, needles, assumed="", alt_needles=()):
    """hf ppl of a folder lol must refuse: exit 2 with stderr naming one of needles; a refusal
    naming only one of alt_needles is accepted with a note"""
    write_folder(os.path.join(ck.work, tag), cfg, T)
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


# ---------------------------------------------------------------- LayerRoute
LR_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
MAX_PROMPT = 12


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


def gate_margin(model, contexts):
    """the smallest |s_i| the gated prefill of these contexts meets"""
    m = float("inf")
    for toks in contexts:
        _, _, _, sc = model.prefill(toks, "gated")
        m = min([m] + [abs(x) for x in sc])
    return m


def eval_run(ck, adapter, out, gates="learned", mp=256):
    r = ck.run(["layerroute", "eval", "--adapter", adapter, "--data", "held.jsonl", "--samples", 0,
                "--timing-samples", 0, "--gates", gates, "--max-prompt", mp, "--json", out, "--threads", 1])
    return json.load(open(os.path.join(ck.work, out))) if r.returncode == 0 else None


def check_merge(ck, tag, model, cfg, merged):
    """a merged folder: GraniteForCausalLM, the base's multipliers, the float64 fold"""
    mdir = os.path.join(ck.work, merged)
    mc = json.load(open(os.path.join(mdir, "config.json")))
    ck.equal("%s merge: architectures / model_type" % tag, (mc.get("architectures"), mc.get("model_type")),
             (["GraniteForCausalLM"], "granite"))
    keys = MULTS + ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "rope_theta",
                    "rms_norm_eps", "tie_word_embeddings", "max_position_embeddings")
    ck.equal("%s merge: config.json keeps the base's multipliers and shape fields" % tag,
             [mc.get(k) for k in keys], [cfg.get(k) for k in keys])
    q2.check_merged_weights(ck, tag, model, mdir)
    mT = q2.read_folder_weights(mdir)
    want_e = [v for row in model.embed for v in row]
    got_e = mT.get("model.embed_tokens.weight")
    ck.close("%s merge: max |embed_tokens - base's| (not scaled by embedding_multiplier)" % tag,
             None if got_e is None else max(abs(a * model.emb - b) for a, b in zip(got_e[1], want_e)) / model.emb,
             0.0, 0, 1e-7)
    return mc


def random_adapter(cfgA, Wt, samples):
    """random LoRA (rank 4, alpha 8, all seven targets) and gates designed on the held-out
    samples: (PEFT tensors, lora, model with them, gate W, gate b, smallest |s|, prompts)"""
    st, lora = q2.random_lora(cfgA, LR_TARGETS, 4, 13)
    model = GraniteRef(cfgA, Wt, lora=lora, lora_scale=8.0 / 4)
    gen_prompts = [samples[0][0][:samples[0][2]], samples[1][0][:samples[1][2]],
                   q2.encode("<|im_start|>user\nseven plus five?<|im_end|>\n<|im_start|>assistant\n"),
                   q2.encode("twelve get_weather")]
    ns = len(samples)
    contexts = ([s_[0] for s_ in samples] + [s_[0][:s_[2]] for s_ in samples] + gen_prompts[2:] +
                [s_[0][:s_[2]][-MAX_PROMPT:] for s_ in samples])
    Wg, bg, margin = q2.design_gates(model, contexts, ["sep", "open", "split"], 17,
                                     pairs=[(k, ns + k) for k in range(ns)], n_primary=ns)
    return st, lora, model, Wg, bg, margin, gen_prompts


def check_layerroute(ck, cfgA, TA):
    print("[layerroute on a Granite base (case A's folder)]", flush=True)
    w = ck.work
    base = "granite-gqa-f32"
    train, held = q2.lr_data(11)
    for fn, rows in (("train.jsonl", train), ("held.jsonl", held)):
        with open(os.path.join(w, fn), "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    samples = [q2.chatml_ids(s, None) + (s["source"],) for s in held]
    longest = max(len(s[0]) for s in samples + [q2.chatml_ids(s, None) + ("",) for s in train])
    assert longest < 200, longest
    for d_ in ("lr-granite", "lr-granite-merged", "lr-granite-rand", "lr-granite-rand-merged",
               "lr-granite-rand-merged-bf16"):
        shutil.rmtree(os.path.join(w, d_), ignore_errors=True)
    r = ck.run(["layerroute", "train", "--base", base, "--data", "train.jsonl", "--out", "lr-granite", "--steps", 3,
                "--batch", 2, "--accum", 1, "--lr", 0.01, "--rank", 4, "--alpha", 8, "--targets", ",".join(LR_TARGETS),
                "--max-len", 256, "--system", "", "--threads", 1, "--save-every", 0, "--no-progress"])
    if r.returncode != 0:
        return
    Wt = q2.as_weights(TA, "F32")
    ids = q2.encode(TEXT)
    # (1) the trained adapter as it is
    lora, sc, gates = read_adapter(os.path.join(w, "lr-granite"))
    ck.equal("granite layerroute train: LoRA on all seven projections of every layer", len(lora),
             len(LR_TARGETS) * cfgA["num_hidden_layers"])
    model = GraniteRef(cfgA, Wt, lora=lora, lora_scale=sc, gates=gates)
    bmax = max(abs(v) for A, B in lora.values() for row in B for v in row)
    print("  trained adapter: scale %g, max |B| %.3g, gate bias %s" % (sc, bmax, gates[1]))
    margin = gate_margin(model, [s[0] for s in samples] + [s[0][:s[2]] for s in samples])
    res = eval_run(ck, "lr-granite", "lr-granite-eval.json")
    if res is not None:
        ref = q2.layerroute_eval_ref(model, samples, "learned", 256)
        if margin >= 1e-4:
            q2.compare_eval(ck, "granite trained eval --gates learned:", res, ref, "learned")
        else:
            ck.note("granite trained adapter: a gate score within %.1e of the tie: only ppl_base / ppl_open compared"
                    % margin)
            for k in ("ppl_base", "ppl_open"):
                ck.close("granite trained eval %s" % k, res.get(k), ref[k], 1e-5)
        diag_lr(ck, cfgA, Wt, lora, sc, gates, samples, res)
    r = ck.run(["layerroute", "merge", "--adapter", "lr-granite", "--out", "lr-granite-merged"])
    if r.returncode == 0:
        check_merge(ck, "granite trained", model, cfgA, "lr-granite-merged")
        compare_ppl(ck, "lr-granite-merged", model, ids, 64, "float64", 1e-5, "granite trained merged")

    # (2) random LoRA (B != 0) and designed gates in a copy of the adapter directory
    shutil.copytree(os.path.join(w, "lr-granite"), os.path.join(w, "lr-granite-rand"))
    st, lora, model, Wg, bg, margin, gen_prompts = random_adapter(cfgA, Wt, samples)
    write_st(os.path.join(w, "lr-granite-rand", "adapter_model.safetensors"), st, {"format": "pt"})
    print("  designed gates: bias %s, smallest |s| %.3g" % (["%.3f" % v for v in bg], margin))
    if margin < 0.01:
        ck.fail("reference: the designed gates leave a score within %.3g of the tie (choose other seeds)" % margin)
    write_st(os.path.join(w, "lr-granite-rand", "gates.safetensors"),
             {"gates.weight": ([len(Wg), len(Wg[0])], [v for r_ in Wg for v in r_], "F32"),
              "gates.bias": ([len(bg)], bg, "F32")})
    ref_learned = None
    for gates_, mp in (("learned", 256), ("learned", MAX_PROMPT), ("closed", 256)):
        res = eval_run(ck, "lr-granite-rand", "lr-granite-rand-%s-%d.json" % (gates_, mp), gates_, mp)
        if res is not None:
            ref = q2.layerroute_eval_ref(model, samples, gates_, max_prompt=mp)
            q2.compare_eval(ck, "granite random-LoRA eval --gates %s --max-prompt %d:" % (gates_, mp), res, ref, gates_)
            if gates_ == "learned" and mp == 256:
                ref_learned = ref
                diag_lr(ck, cfgA, Wt, lora, 2.0, (Wg, bg), samples, res)
    # generation: a prompt whose gates close a layer (real skipping in the cached decoder), one
    # that opens every layer, forced open / closed gates
    skip = [k for k, s_ in enumerate(samples) if not all(model.prefill(s_[0][:s_[2]], "gated")[2])]
    allopen = [k for k, s_ in enumerate(samples) if all(model.prefill(s_[0][:s_[2]], "gated")[2])]
    if not skip:
        ck.note("granite random-LoRA: no sample prompt closes a layer; generation never skips")
    for k in skip[:2] + allopen[:1]:
        q2.lr_generate(ck, model, "lr-granite-rand", "granite sample %d prompt" % k, samples[k][0][:samples[k][2]])
    q2.lr_generate(ck, model, "lr-granite-rand", "granite prompt 3", gen_prompts[3])
    for gates_ in ("open", "closed"):
        q2.lr_generate(ck, model, "lr-granite-rand", "granite sample 0 prompt", gen_prompts[0], gates_)
    r = ck.run(["layerroute", "merge", "--adapter", "lr-granite-rand", "--out", "lr-granite-rand-merged"])
    if r.returncode != 0:
        return
    check_merge(ck, "granite random-LoRA", model, cfgA, "lr-granite-rand-merged")
    g = read_st(os.path.join(w, "lr-granite-rand-merged", "gates.safetensors"))
    ck.equal("granite random-LoRA merge: gates.safetensors copied", (g["gates.weight"][1], g["gates.bias"][1]),
             ([v for r_ in Wg for v in r_], bg))
    compare_ppl(ck, "lr-granite-rand-merged", model, ids, 64, "float64", 1e-5, "granite random-LoRA merged")
    compare_generate(ck, "lr-granite-rand-merged", model, gen_prompts[3], 10, "float64",
                     "granite random-LoRA merged (= every layer + LoRA)")
    res = eval_run(ck, "lr-granite-rand-merged", "lr-granite-rand-merged-eval.json")
    if res is not None and ref_learned:
        ref = dict(ref_learned)
        ref["ppl_base"] = ref_learned["ppl_open"]  # base = the merged folder (LoRA folded in)
        ref["sources"] = {s: dict(o, ppl_base=o["ppl_open"]) for s, o in ref_learned["sources"].items()}
        q2.compare_eval(ck, "granite eval --adapter MERGED:", res, ref, "learned")
    r = ck.run(["layerroute", "merge", "--adapter", "lr-granite-rand", "--out", "lr-granite-rand-merged-bf16",
                "--dtype", "bfloat16", "--overwrite"])
    if r.returncode == 0:
        q2.check_merged_weights(ck, "granite random-LoRA", model, os.path.join(w, "lr-granite-rand-merged-bf16"),
                                "BF16")
        mc = json.load(open(os.path.join(w, "lr-granite-rand-merged-bf16", "config.json")))
        ck.equal("granite random-LoRA merge --dtype bfloat16: multipliers kept", [mc.get(k) for k in MULTS],
                 [cfgA[k] for k in MULTS])


def diag_lr(ck, cfg, Wt, lora, sc, gates, samples, res):
    """on a ppl_open / ppl_gated disagreement: the LoRA / gate readings lol matches"""
    ref = q2.layerroute_eval_ref(GraniteRef(cfg, Wt, lora=lora, lora_scale=sc, gates=gates), samples)
    bad = [k for k in ("ppl_open", "ppl_gated") if res.get(k) is None or abs(res[k] - ref[k]) > 1e-5 * ref[k]]
    if not bad:
        return
    for name, kw in (("LoRA updates not rescaled by the folds (added to the folded q/o/down)", {"lora_unscaled": True}),
                     ("first gate pooling the unscaled embedding", {"gate_unscaled": True})):
        alt = q2.layerroute_eval_ref(GraniteRef(cfg, Wt, lora=lora, lora_scale=sc, gates=gates, **kw), samples)
        print("    alternative %-70s %s" % (name, ", ".join(
            "%s %.8g%s" % (k, alt[k], " <-- lol" if res.get(k) is not None and abs(res[k] - alt[k]) <= 1e-5 * alt[k]
                           else "") for k in bad)))


# ---------------------------------------------------------------- export of a dense lol model with multipliers
WORDS = "the quick brown fox jumps over lazy dog pack my box with five dozen liquor jugs sphinx of black quartz".split()
DENSE_MULTS = {"embedding_multiplier": 3.0, "residual_multiplier": 0.4, "attention_multiplier": 0.09,
               "logits_scaling": 2.5}


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


def check_export(ck):
    print("[export of a dense lol model with the Granite multipliers]", flush=True)
    rng = random.Random(11)
    with open(os.path.join(ck.work, "granite_corpus.txt"), "w") as f:
        for _ in range(300):
            f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))) + "\n\n")
    shutil.rmtree(os.path.join(ck.work, "granite-data"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "granite_corpus.txt", "--tokenizer", "granite-gqa-f32/tokenizer.json", "--out",
                "granite-data", "--valid-fraction", 0.1, "--no-progress"])
    if r.returncode != 0:
        return
    run = train_dense(ck, "granite-dense", dict(DENSE_MULTS, tie_word_embeddings=True), "granite-data")
    if not run:
        return
    ids = q2.encode(TEXT)
    for d_ in ("ex-granite", "ex-granite-arch", "ex-granite-llama", "ex-granite-qwen2"):
        shutil.rmtree(os.path.join(ck.work, d_), ignore_errors=True)
    r = ck.run(["export", "--hf", run, "--out", "ex-granite"])
    if r.returncode != 0:
        return
    ex = os.path.join(ck.work, "ex-granite")
    c = json.load(open(os.path.join(ex, "config.json")))
    ck.equal("export (multipliers, default --arch): architectures / model_type",
             (c.get("architectures"), c.get("model_type")), (["GraniteForCausalLM"], "granite"))
    for k, v in DENSE_MULTS.items():
        ck.close("export config.json %s" % k, c.get(k), v, 1e-6)
    ck.equal("export config.json: tie_word_embeddings, num_key_value_heads, hidden_act",
             (c.get("tie_word_embeddings"), c.get("num_key_value_heads"), c.get("hidden_act", "silu")),
             (True, 2, "silu"))
    ck.equal("export config.json: attention_bias / mlp_bias false (or absent)",
             (bool(c.get("attention_bias", False)), bool(c.get("mlp_bias", False))), (False, False))
    ck.equal("export config.json: no head_dim, or hidden / heads", c.get("head_dim") in (None, 8), True)
    T = q2.read_folder_weights(ex)
    V = c.get("vocab_size")
    exp = {"model.embed_tokens.weight": [V, 32], "model.norm.weight": [32]}
    for i in range(2):
        p_ = "model.layers.%d." % i
        exp.update({p_ + "self_attn.q_proj.weight": [32, 32], p_ + "self_attn.k_proj.weight": [16, 32],
                    p_ + "self_attn.v_proj.weight": [16, 32], p_ + "self_attn.o_proj.weight": [32, 32],
                    p_ + "input_layernorm.weight": [32], p_ + "post_attention_layernorm.weight": [32],
                    p_ + "mlp.gate_proj.weight": [40, 32], p_ + "mlp.up_proj.weight": [40, 32],
                    p_ + "mlp.down_proj.weight": [32, 40]})
    ck.equal("export granite: tensor names and shapes (GraniteForCausalLM's, tied: no lm_head)",
             sorted((k, list(v[0])) for k, v in T.items()), sorted(exp.items()))
    model = GraniteRef(c, T)
    toks = ids[:40]
    r = ck.run(["forward", "--model", run, "--tokens", ",".join(map(str, toks)), "--out", "granite-fw.safetensors"])
    if r.returncode == 0:
        lg = read_st(os.path.join(ck.work, "granite-fw.safetensors"))["logits"]
        Vl = lg[0][-1]
        got = [lg[1][i * Vl:(i + 1) * Vl] for i in range(len(toks))]
        want = model.prefill(toks)[0]
        big = max(1.0, max(abs(v) for row in want for v in row))
        diff = max(abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb)) / big
        if not ck.close("export granite: max |lol forward(checkpoint) - reference(exported folder)| / max|logit|",
                        diff, 0.0, 0, 1e-4):
            for name, kw in alternatives(c):
                alt = GraniteRef(c, T, **kw).prefill(toks)[0]
                dd = max(abs(a - b) for ra, rb in zip(got, alt) for a, b in zip(ra, rb)) / big
                print("    alternative %-70s max diff %.3g%s" % (name, dd, "   <-- lol matches" if dd < 1e-4 else ""))
    compare_ppl(ck, "ex-granite", model, ids, 40, "float64", 1e-5, "ex-granite")
    info(ck, "ex-granite", c)
    r = ck.run(["export", "--hf", run, "--out", "ex-granite-arch", "--arch", "granite"])
    if r.returncode == 0:
        c2 = json.load(open(os.path.join(ck.work, "ex-granite-arch", "config.json")))
        ck.equal("export --arch granite: the same config.json as the default", c2, c)
    for arch in ("llama", "qwen2"):
        r = ck.run(["export", "--hf", run, "--out", "ex-granite-" + arch, "--arch", arch], expect_rc=None)
        ck.compared += 1
        if r.returncode != 2:
            ck.fail("export --arch %s of a model with Granite multipliers: exit %d (expected 2: refused)"
                    % (arch, r.returncode))
        elif ck.verbose:
            print("  ok %-60s %s" % ("export --arch %s refused (exit 2)" % arch, r.stderr.strip()[:120]))


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, weight seed, granite_weights keyword arguments, storage dtype)"""
    A = granite_config()
    B = granite_config(num_hidden_layers=2, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=10000.0,
                       embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.125,
                       logits_scaling=8.0)
    C = granite_config(num_key_value_heads=DROP, rope_theta=DROP, rms_norm_eps=DROP, tie_word_embeddings=DROP,
                       embedding_multiplier=DROP, residual_multiplier=DROP, attention_multiplier=DROP,
                       logits_scaling=DROP, rope_scaling=DROP, num_hidden_layers=2)
    D = granite_config(num_key_value_heads=4, torch_dtype="bfloat16", embedding_multiplier=2.0,
                       residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=1.7, rope_theta=2000.0)
    return {"A": (A, 601, {"embed_std": 0.5, "branch_gain": 3.0, "lm_std": 1.0}, "F32"),
            "B": (B, 602, {"embed_std": 1.0, "branch_gain": 100.0}, "F32"),
            "C": (C, 603, {"embed_std": 0.003, "branch_gain": 3.0, "lm_std": 0.6}, "F32"),
            "D": (D, 604, {"embed_std": 0.5, "branch_gain": 3.0, "lm_std": 0.6}, "BF16")}


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

    cfgA, sd, wkw, dt = tab["A"]
    TA = granite_weights(cfgA, sd, **wkw)
    c = Case(ck, "granite-gqa-f32", cfgA, TA, dt)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr9, 12)
    c.generate(pr, 12, "float32")
    c.info()
    c = Case(ck, "granite-A-head_dim8", dict(cfgA, head_dim=8), TA, dt, wtag="A")
    c.ppl(ids, 64)

    cfgB, sd, wkw, dt = tab["B"]
    c = Case(ck, "granite-tied-real", cfgB, granite_weights(cfgB, sd, **wkw), dt)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr, 12, "float32")
    c.info()

    cfgC, sd, wkw, dt = tab["C"]
    c = Case(ck, "granite-defaults", cfgC, granite_weights(cfgC, sd, **wkw), dt)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr9, 12)
    c.info()

    cfgD, sd, wkw, dt = tab["D"]
    c = Case(ck, "granite-bf16-shards-mha", cfgD, granite_weights(cfgD, sd, **wkw), dt, shards=2)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 3e-2)
    c.generate(pr, 12)
    c.info()

    print("[refusals]", flush=True)
    cb = dict(cfgA, attention_bias=True)
    refusal(ck, "refuse-attention_bias", cb, granite_weights(cb, 620, biases=True), ["attention_bias"],
            " (ASSUMED 2: transformers adds q/k/v/o biases)")
    cm = dict(cfgA, mlp_bias=True)
    refusal(ck, "refuse-mlp_bias", cm, granite_weights(cm, 621, mlp_biases=True), ["mlp_bias"],
            " (ASSUMED 2: transformers adds gate/up/down biases)")
    refusal(ck, "refuse-hidden_act-gelu", dict(cfgA, hidden_act="gelu"), TA, ["hidden_act"])
    for k, v in (("embedding_multiplier", 0.0), ("residual_multiplier", -0.4), ("attention_multiplier", 0.0),
                 ("logits_scaling", 0.0), ("logits_scaling", -2.5)):
        refusal(ck, "refuse-%s-%g" % (k, v), dict(cfgA, **{k: v}), TA, [k])
    # +inf: Python's json reads 1e999 as inf; a JSON reader may refuse the number itself
    tag = "refuse-attention_multiplier-inf"
    write_folder(os.path.join(ck.work, tag), cfgA, TA)
    path = os.path.join(ck.work, tag, "config.json")
    txt = open(path).read()
    txt2 = re.sub(r'"attention_multiplier": [^,\n]+', '"attention_multiplier": 1e999', txt)
    assert txt2 != txt
    open(path, "w").write(txt2)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--threads", 1], expect_rc=None)
    ck.compared += 1
    if r.returncode == 2 and "attention_multiplier" in r.stderr.replace(tag, "FOLDER"):
        if verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))
    elif r.returncode == 2:
        ck.note("%s: refused (exit 2) without naming attention_multiplier: %s" % (tag, r.stderr.strip()[:200]))
    else:
        ck.fail("%s: expected exit 2 (a non-finite attention_multiplier); got exit %d, stderr %r"
                % (tag, r.returncode, r.stderr.strip()[-300:]))
    refusal(ck, "refuse-head_dim16", dict(cfgA, head_dim=16), granite_weights(dict(cfgA, head_dim=16), 622),
            ["head_dim"], " (ASSUMED 1)")

    check_export(ck)
    check_layerroute(ck, cfgA, TA)

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


def selftest():
    import tempfile
    bad = []
    t0 = time.time()
    ids = q2.encode("Hello, granite! Sphinx of quartz.")
    tab = case_table()

    # 1. all multipliers 1 and attention_multiplier = head_dim^-0.5: qwen2_reference's Llama Ref
    tmp = tempfile.mkdtemp(prefix="granite_selftest_")
    cfg = granite_config(embedding_multiplier=1.0, residual_multiplier=1.0, attention_multiplier=8 ** -0.5,
                         logits_scaling=1.0, max_position_embeddings=64)
    T = granite_weights(cfg, 5)
    lcfg = q2.make_config("LlamaForCausalLM", num_hidden_layers=3, max_position_embeddings=64, rope_theta=500.0,
                          rms_norm_eps=1e-5)
    write_folder(tmp, lcfg, T)
    la = q2.Ref(tmp, weights=W64(T)).prefill(ids)[0]
    lb = GraniteRef(cfg, W64(T)).prefill(ids)[0]
    print("  selftest: Granite(multipliers 1, scale head_dim^-0.5) vs qwen2_reference Llama Ref: max diff %.2e"
          % _maxdiff(la, lb))
    if _maxdiff(la, lb) > 1e-12:
        bad.append("GraniteRef(multipliers 1) != Llama Ref (%.2e)" % _maxdiff(la, lb))
    shutil.rmtree(tmp, ignore_errors=True)

    # 2. the function lol computes after its load-time folds (q_proj x attention_multiplier sqrt(hd),
    #    o_proj / down_proj x residual_multiplier, Llama's scale, no residual multiplier) is Granite's
    cA, sA, wA, _ = tab["A"]
    TA = granite_weights(cA, sA, **wA)
    p = granite_params(cA)
    fq, fr = p["attn"] * math.sqrt(p["hd"]), p["res"]
    TF = {}
    for k, (s_, v) in TA.items():
        f = fq if "q_proj" in k else (fr if ("o_proj" in k or "down_proj" in k) else 1.0)
        TF[k] = (s_, [x * f for x in v])
    a = GraniteRef(cA, W64(TA)).prefill(ids)[0]
    b = GraniteRef(cA, W64(TF), attn=p["hd"] ** -0.5, res_attn=1.0, res_mlp=1.0).prefill(ids)[0]
    if _maxdiff(a, b) > 1e-10:
        bad.append("the folded form differs from Granite's function by %.2e" % _maxdiff(a, b))
    print("  selftest: lol's folded form vs Granite's function: max diff %.2e" % _maxdiff(a, b))

    # 3. sensitivity: every alternative moves the summed loss by far more than the tolerance
    text_ids = q2.encode(TEXT)[:100]
    for tag in ("A", "B", "C", "D"):
        c, seed, wkw, dt = tab[tag]
        Wt = q2.as_weights(granite_weights(c, seed, **wkw), dt)
        ref, cnt = mean_ce(GraniteRef(c, Wt), ppl_windows(text_ids, 40))
        worst = None
        for name, kw in alternatives(c):
            alt, _ = mean_ce(GraniteRef(c, Wt, **kw), ppl_windows(text_ids, 40))
            rel = abs(alt - ref) / abs(ref)
            print("  selftest %s %-72s relative change %.2e" % (tag, name, rel))
            if "eps" in name and tag != "C":
                continue  # eps matters for small activations only: case C's embeddings
            worst = rel if worst is None else min(worst, rel)
            if rel < 2e-4:  # 20x the 1e-5 tolerance
                bad.append("case %s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
        print("  selftest %s loss %.8g (mean %.4f nats, ln V = %.4f); smallest relative change %.2e"
              % (tag, ref, ref / cnt, math.log(c["vocab_size"]), worst))
    # greedy ids of the generate checks tell the readings apart
    pr = q2.encode("<|im_start|>user\nJump, fox: 12 dozen jugs?<|im_end|>\n")
    for tag in ("A", "B", "C", "D"):
        c, seed, wkw, dt = tab[tag]
        Wt = q2.as_weights(granite_weights(c, seed, **wkw), dt)
        toks = GraniteRef(c, Wt).greedy(pr, 12)[0]
        if len(set(toks)) < 3:
            bad.append("case %s: greedy continuation %s too repetitive" % (tag, toks))
        same = [name for name, kw in alternatives(c) if "eps" not in name and
                GraniteRef(c, Wt, **kw).greedy(pr, 12)[0] == toks]
        print("  selftest %s greedy %s; alternatives with the same ids: %s" % (tag, toks, same or "none"))

    # 4. LoRA: the updates of q_proj / o_proj / down_proj scaled as transformers + PEFT compute them
    st, lora = q2.random_lora(cA, LR_TARGETS, 4, 13)
    WA = q2.as_weights(TA, "F32")
    wins = ppl_windows(text_ids, 40)
    m0, _ = mean_ce(GraniteRef(cA, WA, lora=lora, lora_scale=2.0), wins)
    m1, _ = mean_ce(GraniteRef(cA, WA, lora=lora, lora_scale=2.0, lora_unscaled=True), wins)
    mb, _ = mean_ce(GraniteRef(cA, WA), wins)
    print("  selftest A+LoRA loss %.8g (base %.8g); LoRA updates not rescaled by the folds: relative change %.2e"
          % (m0, mb, abs(m1 - m0) / m0))
    if abs(m1 - m0) < 2e-4 * m0:
        bad.append("LoRA-unscaled reading moves the loss by only %.2e" % (abs(m1 - m0) / m0))
    if abs(m0 - mb) < 1e-3 * mb:
        bad.append("random LoRA barely changes the loss")
    # the fold of LoRA into W = the unfolded low-rank path (Ref's fold vs x A^T B^T added)
    g = GraniteRef(cA, WA, lora=lora, lora_scale=2.0)
    x = [math.sin(j + 1.0) for j in range(32)]
    A_, B_ = lora["layers.1.self_attn.o_proj"]
    base = matvec(g.layers[1]["o_proj_base"], x)
    lowr = matvec(B_, matvec(A_, x))
    want = [u + 2.0 * v for u, v in zip(base, lowr)]
    if max(abs(u - v) for u, v in zip(matvec(g.layers[1]["o_proj"], x), want)) > 1e-12:
        bad.append("LoRA fold != W x + s B A x")

    # LayerRoute: the designed gates tell the readings of the first gate and of the LoRA scale apart
    _, held = q2.lr_data(11)
    samples = [q2.chatml_ids(s_, None) + (s_["source"],) for s_ in held]
    _, lora, gmodel, Wg, bg, margin, _ = random_adapter(cA, WA, samples)
    ref = q2.layerroute_eval_ref(gmodel, samples)
    print("  selftest LayerRoute (A, random LoRA, designed gates, smallest |s| %.3g): ppl_open %.8g ppl_gated %.8g "
          "layer_open %s" % (margin, ref["ppl_open"], ref["ppl_gated"], ref["layer_open"]))
    for name, kw in (("first gate pooling the unscaled embedding", {"gate_unscaled": True}),
                     ("LoRA updates not rescaled by the folds", {"lora_unscaled": True})):
        alt = q2.layerroute_eval_ref(GraniteRef(cA, WA, lora=lora, lora_scale=2.0, gates=(Wg, bg), **kw), samples)
        moved = max(abs(alt[k] - ref[k]) / ref[k] for k in ("ppl_open", "ppl_gated", "ppl_gated_prompt"))
        print("  selftest LayerRoute %-48s largest relative change %.2e, layer_open %s" % (name, moved,
                                                                                         alt["layer_open"]))
        if moved < 2e-4 and alt["layer_open"] == ref["layer_open"]:
            bad.append("LayerRoute: the reading '%s' changes nothing the check compares" % name)

    # 5. cached greedy = recomputation; gated driver with all gates open = the plain forward
    c, seed, wkw, dt = tab["B"]
    Wt = W64(granite_weights(c, seed, **wkw))
    toks = GraniteRef(c, Wt).greedy(ids[:5], 8)[0]
    seq = list(ids[:5])
    for j in range(8):
        t = q2.argmax_low(GraniteRef(c, Wt).prefill(seq)[0][-1])
        if t != toks[j]:
            bad.append("cached greedy step %d: %d != recomputed %d" % (j, toks[j], t))
            break
        seq.append(t)
    gm = GraniteRef(cA, WA, gates=([[0.0] * 32 for _ in range(3)], [1.0, 1.0, 1.0]))
    if _maxdiff(gm.prefill(ids, "gated")[0], GraniteRef(cA, WA).prefill(ids)[0]) > 0:
        bad.append("gated prefill with open gates != plain prefill")

    # 6. config defaults (GraniteConfig)
    pd = granite_params(tab["C"][0])
    if (pd["Hkv"], pd["theta"], pd["eps"], pd["tied"], pd["emb"], pd["res"], pd["attn"], pd["logits"], pd["hd"]) != (
            4, 10000.0, 1e-6, False, 1.0, 1.0, 1.0, 1.0, 8):
        bad.append("GraniteConfig defaults %s" % pd)
    if granite_params(granite_config(num_key_value_heads=None))["Hkv"] != 4:
        bad.append("num_key_value_heads null")

    # 7. parameter counts = the stored values
    for c in (granite_config(), tab["B"][0], tab["C"][0], granite_config(attention_bias=True, mlp_bias=True)):
        Tt = granite_weights(c, 1, biases=c.get("attention_bias", False), mlp_biases=c.get("mlp_bias", False))
        if param_count(c) != sum(len(v[1]) for v in Tt.values()):
            bad.append("param_count %d != stored values %d" % (param_count(c), sum(len(v[1]) for v in Tt.values())))
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny Granite folders, run lol, compare with the reference")
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
