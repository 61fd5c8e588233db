#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face OLMo 2 (Olmo2ForCausalLM, model_type
"olmo2") and OLMo 3 (Olmo3ForCausalLM, model_type "olmo3") in pure Python (stdlib only), and
a check that `lol hf ppl|generate|info` agrees with it on tiny OLMo folders written here.

  python3 tests/reference/olmo_reference.py check --lol PATH/TO/lol --work /tmp/x [--cpu 0]
  python3 tests/reference/olmo_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside
tests/reference/, from transformers' modeling_olmo2.py / modular_olmo2.py /
configuration_olmo2.py and modular_olmo3.py as remembered (the OLMo 3 RoPE and layer-type
points re-read in public copies of transformers, see "version differences"), and the
feature's brief. It imports qwen2_reference.py (unchanged) for the float32 RoPE tables as
transformers builds them (default, linear, llama3, yarn, dynamic), RMSNorm / SiLU, the
prefill / greedy driver of its `Ref` (this file's `OlmoRef` supplies its own weights, block
and head), `mean_ce`, the folder / tokenizer / safetensors writers, `Checker` and the ppl /
greedy comparisons (summed CE, perplexity, bits/byte within 1e-5 relative; greedy ids exact
except after a float32 near-tie).

The reference (float64; RoPE cos/sin tables in float32 as transformers builds them):
  Olmo2DecoderLayer (no input_layernorm: the norms sit on the sublayer OUTPUTS):
      h = x + post_attention_layernorm(self_attn(x))
      y = h + post_feedforward_layernorm(mlp(h))
  Olmo2Attention (LlamaAttention's projections, bias = attention_bias on q, k, v AND o):
      q = q_norm(q_proj(x)), k = k_norm(k_proj(x)), v = v_proj(x), where q_norm is ONE
      RMSNorm over the whole projection (weight [num_attention_heads * head_dim]) and k_norm
      one over [num_key_value_heads * head_dim] (not Qwen3's per-head norms); then viewed as
      heads (head a = elements a hd .. a hd + hd - 1), rotate-half RoPE on q and k,
      grouped-query attention (query head a uses kv head a // (H / Hkv)), scale
      head_dim^-0.5, causal softmax, o_proj.
  Olmo2RMSNorm: x / sqrt(mean(x^2) + eps) * w (float32 statistics, (w * x_norm) cast to the
      input dtype: the same function in float64), eps = rms_norm_eps for every norm (q_norm,
      k_norm, the two per-layer norms, model.norm).
  MLP: down_proj(silu(gate_proj(x)) * up_proj(x)), no biases.
  logits = model.norm(h) . lm_head^T (lm_head = model.embed_tokens when tie_word_embeddings).
  Tensors per layer: self_attn.{q,k,v,o}_proj.weight, self_attn.q_norm.weight,
      self_attn.k_norm.weight, post_attention_layernorm.weight, post_feedforward_layernorm.weight,
      mlp.{gate,up,down}_proj.weight; model.embed_tokens.weight, model.norm.weight,
      lm_head.weight (absent when tied).
  Olmo2Config defaults: rms_norm_eps 1e-5, rope_theta 10000, num_key_value_heads = H when
      missing or null, tie_word_embeddings false, attention_bias false, hidden_act silu,
      max_position_embeddings 2048, head_dim = hidden_size / H unless config.json has one
      (LlamaAttention's getattr(config, "head_dim", ...)).
  OLMo 3 = OLMo 2 plus sliding-window layers. Olmo3Config: sliding_window 4096, layer_types
      default ["sliding_attention" if (i + 1) % 4 != 0 else "full_attention"] (layers 3, 7, ...
      full). A sliding layer lets query i see keys j with i - W < j <= i (masking_utils'
      sliding overlay kv_idx > q_idx - W). ONE rotary embedding (rope_scaling included) for
      every layer, sliding or full (Olmo3Model.rotary_emb, a Gemma2RotaryEmbedding).

Version differences found while writing this (public copies of transformers):
  * modular_olmo3.py's comment says "RoPE scaling is not applied to sliding window attention
    layers", but its Olmo3Model (4.57 and the current main) builds one rotary_emb from the
    config and passes the same cos / sin to every layer; the OLMo 3 report describes YaRN on the
    full-attention layers only. The reference follows the code (ASSUMED, case F-olmo3-yarn);
    a diagnosis names the "scaling on the full layers only" reading when lol matches it.
  * A development copy of modular_olmo3 (the OLMo authors' fork) had per-head q/k norms and the
    default pattern i % 4 != 0 (layers 0, 4, ... full); the released code has whole-projection
    norms and (i + 1) % 4. Both are alternatives the check names on a disagreement.
  * Olmo2RMSNorm was LlamaRMSNorm (w * x_norm.to(dtype)) in 4.47 and (w * x_norm).to(dtype)
    later: different only in bfloat16 / float16 rounding.
  * Older OlmoConfig validated rope_scaling as {"type": linear|dynamic, "factor"} only; the
    generic transformers reading (q2.rope_tables) is used for linear and yarn here.

Cases (vocab 264 > the byte tokenizer's 259 ids, hidden 32, intermediate 40, the
qwen2_reference byte-level tokenizer, a 199-token text; norm weights 1 + N(0, 0.4) (q_norm /
k_norm included) so that a missing or misplaced norm shows; q_proj / k_proj rows scaled per
head (x0.5, x1, x2, x1.4 / x0.6, x1.6) so that per-head and whole-projection norms differ):
  A olmo2-gqa-f32: 3 layers, 4 heads / 2 kv heads, rope_theta 500, eps 1e-5 given, F32: hf ppl
    float64 --context 9 and 64, float32 64; hf generate --tokens --ids greedy float64 (two
    prompts) / float32; hf info --check.
  A-linear: A's weights with rope_scaling {"rope_type": "linear", "factor": 2}: ppl 64.
  A-head_dim-null: "head_dim": null -> hidden / heads (ASSUMED; or a refusal naming head_dim).
  A-clip_qkv: OLMo 1's "clip_qkv": 0.3 (binding if applied) in an olmo2 folder: Olmo2Config
    drops it and Olmo2Attention never clips, so the loss must be A's (or a refusal naming it).
  B olmo2-defaults-bf16: no num_key_value_heads / rope_theta / rms_norm_eps /
    tie_word_embeddings keys (-> MHA, 10000, 1e-5, untied), BF16 storage in 2 shards + index,
    embeddings of std 0.003 (eps matters: the reference with 1e-6 is printed); ppl float64 /
    float32 / bfloat16 (3e-2); generate float64; hf info --check.
  C olmo2-tied-mqa: tie_word_embeddings true (no lm_head tensor), 1 kv head (k_norm width 8 =
    head_dim, q_norm width 32), "num_key_value_heads": 1: ppl float64 64; generate
    float64; hf info --check.
  D olmo3-sw5-default-types: 5 layers, no layer_types (-> S S S F S), sliding_window 5,
    max_position_embeddings 64: ppl float64 --context 7 and 40, float32 40; generate float64
    with prompts of 3 and 17 ids (+30 / +25: across the window many times), float32 17; hf info
    --check (the window line names 5).
  D2 olmo3-layer_types-alt: 4 layers, explicit [S, F, S, F], sliding_window 6: ppl 40,
    generate float64. D3 olmo3-layer_types-irregular: [F, S, S, F] with window 4 (transformers
    runs any list; docs/hf.md refuses patterns other than full-first or every-P-th): agreement
    or a refusal naming layer_types (a note). D4 olmo3-window-absent: D without sliding_window
    (4096 > 64 positions: never binds): ppl 40. D5 olmo3-window-null: D with "sliding_window":
    null (transformers cannot build the sliding mask): a refusal naming sliding_window, or full
    attention (a note).
  E olmo2-head_dim16: hidden 32, 4 heads / 2 kv heads, head_dim 16 (q_proj [64, 32], q_norm
    [64], o_proj [32, 64]): ppl float64 40 and generate float64 / float32.
  F olmo3-yarn: OLMo-3-7B's form of rope_scaling (yarn, factor 4, original 16 of 64 positions,
    attention_factor 1.2, beta_fast 32, beta_slow 1), 4 layers default types, window 6: ppl
    float64 40, generate float64; applied to every layer (ASSUMED, see above).
  F-rope_parameters: F with transformers 5's "rope_parameters" (rope_theta inside) instead of
    rope_theta + rope_scaling: ppl 40.
  Refusals (hf ppl, exit 2, stderr naming what is wrong): a folder with an extra
    model.layers.0.input_layernorm.weight (names input_layernorm); layer 1's q_norm of
    per-head shape [head_dim] (names q_norm); layer 0's k_norm of width H hd in a GQA folder
    (names k_norm); "attention_bias": true with q/k/v/o bias tensors present (names
    attention_bias or a bias tensor; transformers would compute it: ASSUMED from docs/hf.md,
    as Llama's); a folder without model.layers.1.post_feedforward_layernorm.weight (names
    post_feedforward_layernorm); "hidden_act": "gelu" (names hidden_act); an olmo3
    layer_types list of the wrong length (names layer_types).
  hf info --check (A, B, C, D, E): exit 0, names the architecture, "all tensors present", a
    printed parameter count = transformers' num_parameters(); for olmo3 (D, and D2 without
    --check) a line about the sliding layers naming W, and the layers it excepts ("every layer
    but 3") = the full ones.
LayerRoute and export (added by a second reviewer, same rules; check_layerroute_olmo /
check_export_olmo):
  * layerroute train on case A's folder (3 steps, all seven LoRA targets, rank 4, --system ""),
    eval --json (ppl_base / ppl_open / ppl_gated / executed_mean against OlmoRef with the
    adapter's LoRA folded in float64 and its gates: ChatML without a system turn, pooled over
    the assistant tokens), merge (Olmo2ForCausalLM, the base's tensor names, weights = the
    float64 fold within 1e-6 of max |W'|, hf ppl float64 of the merged folder = the reference),
    generate --gates learned (layers run and greedy ids); a merged pad_token_id that changed is
    a note (Olmo2Config's default for an absent one is 1).
  * layerroute train on case D's folder (sliding layers, window 5; refused until session 46,
    when LayerRoute learned sliding windows: changed by the main developer) and on D4 (no
    sliding_window: 4096 > 64 positions, never binds): trains, and eval's perplexities = the
    reference.
  * lol train of tiny dense OLMo-layout models (input_norms false, sandwich_norm, qk_norm
    across heads) on a byte-tokenized corpus, then lol export --hf: (1) a sliding model with
    n_full_prelude 1 and full_attention_interval 3 exports by default as Olmo3ForCausalLM with
    Olmo3Config's keys and Olmo3's tensor names / shapes; `lol forward` on the checkpoint equals
    the reference on the exported folder (1e-4), and `lol hf ppl` must read the folder back
    (transformers runs any layer_types list; ASSUMED: writing a folder lol itself refuses is a
    defect, an export refusal would also be accepted); (2) a Llama-block model with
    qk_norm_across_heads: export must refuse (exit 2) or write a folder that hf info --check
    loads (Qwen3's q_norm is [head_dim], so the default Qwen3 export cannot hold it).
On a disagreement (first 8), the case is re-evaluated under other readings -- per-head q/k
norms, no k_norm, no q/k norms, q/k norms after RoPE, pre-norm placement (Llama's), eps 1e-6,
another rope_theta, rope_scaling ignored or only on full layers, full attention / W+1 keys /
flipped, all-sliding or i % 4 layer types -- and the readings matching lol are named.
`check` does not run `selftest` (about 15 s of pure Python): run both. `selftest` checks the
reference against qwen2_reference's Llama Ref (pre-norm, no
q/k norm reading), the invariances that identify the whole-projection and output norms
(scaling all of q_proj, o_proj or down_proj leaves the function unchanged, scaling one q head
does not), that each alternative moves case A's / D's / F's loss by far more than the
tolerance (printed), that the window binds where it should, cached greedy = recomputation,
Olmo2Config / Olmo3Config defaults as read, and parameter counts. When written, case A's
summed loss (100 tokens, context 40) moved by 1.3e-2 (per-head q/k norms), 7.7e-3 (pre-norm
placement) and 2.1e-2 (no k_norm) relative: 500 to 2000 times the 1e-5 tolerance.
`--cpu N` runs lol under `taskset -c N` (lol also gets --threads 1 and OMP_NUM_THREADS=1).

ASSUMED rules (the spec or transformers versions leave them open):
  1. OLMo 3: one RoPE, scaling included, for every layer (the code, not its comment).
  2. head_dim: config.json's value when present and not null, else hidden_size / heads.
  3. Olmo3 sliding_window null with sliding layers: refused (naming sliding_window) or run
     as full attention -- both accepted (transformers fails building the mask).
  4. Refusals of attention_bias true, hidden_act gelu, an irregular layer_types pattern (a note
     only) follow docs/hf.md's rules (fields that change the function and are not implemented
     are refused; loading is strict), not transformers, which would run them.
  5. `hf ppl` adds no BOS token and predicts every token of a window but the first (docs/hf.md);
     greedy picks the lowest id on an exact tie.
"""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from operator import mul

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import (Checker, apply_rope, compare_generate, compare_ppl, f32,  # noqa: E402
                             mean_ce, ppl_windows, rmsnorm, silu, write_folder)

TEXT = q2.TEXT
DIAGNOSE = [8]
DROP = object()


def matvec(W, x):
    """qwen2_reference.matvec's sums in the same order (bit for bit), faster"""
    return [sum(map(mul, row, x)) for row in W]


# ---------------------------------------------------------------- config reading
def olmo_params(cfg):
    mt = cfg.get("model_type")
    o3 = mt == "olmo3"
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    L = cfg["num_hidden_layers"]
    Hkv = cfg.get("num_key_value_heads")
    if Hkv is None:  # missing or null
        Hkv = H
    hd = cfg.get("head_dim") or d // H
    if o3:
        lt = cfg.get("layer_types")
        if lt is None:
            lt = ["sliding_attention" if (i + 1) % 4 != 0 else "full_attention" for i in range(L)]
        W = cfg.get("sliding_window", 4096)
    else:
        lt, W = ["full_attention"] * L, None
    rs = cfg.get("rope_scaling")
    if rs is None and isinstance(cfg.get("rope_parameters"), dict) and \
            cfg["rope_parameters"].get("rope_type", "default") != "default":
        rs = cfg["rope_parameters"]
    theta = cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    return {"o3": o3, "d": d, "H": H, "Hkv": Hkv, "hd": hd, "F": cfg["intermediate_size"], "L": L,
            "V": cfg["vocab_size"], "eps": cfg.get("rms_norm_eps", 1e-5), "theta": theta,
            "tied": cfg.get("tie_word_embeddings", False), "mpe": cfg.get("max_position_embeddings", 2048),
            "bias": cfg.get("attention_bias", False), "layer_types": list(lt), "window": W, "rope_scaling": rs}


# ---------------------------------------------------------------- the model
class OlmoRef(q2.Ref):
    """Olmo2ForCausalLM / Olmo3ForCausalLM, float64. Reuses qwen2_reference.Ref's prefill /
    greedy; weights, block and head are this class's. Keyword arguments select alternative
    readings (sensitivity checks and diagnosis):
      qk: 'whole' (transformers), 'per_head' (each head normalised on its own, with its slice
          of the weight), 'no_k' (k_norm skipped), 'none', 'after_rope' (whole norms after RoPE)
      placement: 'post' (transformers), 'pre' (Llama: post_attention_layernorm before the
          attention, post_feedforward_layernorm before the MLP, outputs unnormalised)
      rope: 'all' (transformers: one RoPE, scaling included, on every layer), 'full_only'
          (scaling on full layers, plain RoPE on sliding ones), 'noscale'
      window / layer_types / eps / theta: overrides
      clip: OLMo 1's clip_qkv (q, k, v clamped to [-clip, clip] after the projections), which
          Olmo2Attention does not apply (a diagnosis reading only)."""

    def __init__(self, cfg, weights, qk="whole", placement="post", rope="all", window="config", layer_types=None,
                 eps=None, theta=None, clip=None):
        p = olmo_params(cfg)
        self.clip = clip
        self.cfg, self.p = cfg, p
        self.d, self.L, self.H, self.Hkv, self.hd, self.V = p["d"], p["L"], p["H"], p["Hkv"], p["hd"], p["V"]
        self.eps = p["eps"] if eps is None else eps
        self.qk, self.placement = qk, placement
        M = {k: q2.mat(v) for k, v in weights.items()}
        self.embed = M["model.embed_tokens.weight"]
        self.lm_head = self.embed if p["tied"] else M["lm_head.weight"]
        self.norm = M["model.norm.weight"]
        lt = layer_types or p["layer_types"]
        W = p["window"] if window == "config" else window
        th = p["theta"] if theta is None else theta
        mpe = p["mpe"]
        npos = min(mpe, 512)
        rs = None if rope == "noscale" else p["rope_scaling"]
        scaled = q2.rope_tables({"rope_theta": th, "rope_scaling": rs, "max_position_embeddings": mpe}, self.hd, npos)
        plain = scaled if rs is None else q2.rope_tables({"rope_theta": th, "max_position_embeddings": mpe}, self.hd,
                                                         npos)
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            sliding = lt[i] == "sliding_attention"
            tab = plain if (rope == "full_only" and sliding) else scaled
            ly = {"q": M[pre + "self_attn.q_proj.weight"], "k": M[pre + "self_attn.k_proj.weight"],
                  "v": M[pre + "self_attn.v_proj.weight"], "o": M[pre + "self_attn.o_proj.weight"],
                  "q_norm": M[pre + "self_attn.q_norm.weight"], "k_norm": M[pre + "self_attn.k_norm.weight"],
                  "post_attn": M[pre + "post_attention_layernorm.weight"],
                  "post_ff": M[pre + "post_feedforward_layernorm.weight"],
                  "gate": M[pre + "mlp.gate_proj.weight"], "up": M[pre + "mlp.up_proj.weight"],
                  "down": M[pre + "mlp.down_proj.weight"], "cos": tab[0], "sin": tab[1],
                  "window": W if sliding else None}
            for nm in ("q", "k", "v", "o"):
                ly[nm + "_b"] = M.get(pre + "self_attn.%s_proj.bias" % nm) if p["bias"] else None
            self.layers.append(ly)
        self.gates = None
        self.use_lora = False
        self.memo = {}

    def _norm_heads(self, x, w, n):
        """the q_norm / k_norm step on a projection x of n heads"""
        hd, eps = self.hd, self.eps
        if self.qk == "per_head":
            out = []
            for a in range(n):
                out += rmsnorm(x[a * hd:(a + 1) * hd], w[a * hd:(a + 1) * hd], eps)
            return out
        return rmsnorm(x, w, eps)

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, Hkv, hd, eps, W = self.H, self.Hkv, self.hd, self.eps, ly["window"]
        rep = H // Hkv
        scale = hd ** -0.5
        qk, pre_norm = self.qk, self.placement == "pre"
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = rmsnorm(h, ly["post_attn"], eps) if pre_norm else h
            q, k, v = matvec(ly["q"], x), matvec(ly["k"], x), matvec(ly["v"], x)
            if ly["q_b"] is not None:
                q = [a + b for a, b in zip(q, ly["q_b"])]
                k = [a + b for a, b in zip(k, ly["k_b"])]
                v = [a + b for a, b in zip(v, ly["v_b"])]
            if self.clip is not None:
                cl = self.clip
                q, k, v = ([min(cl, max(-cl, u)) for u in z] for z in (q, k, v))
            if qk in ("whole", "per_head"):
                q = self._norm_heads(q, ly["q_norm"], H)
                k = self._norm_heads(k, ly["k_norm"], Hkv)
            elif qk == "no_k":
                q = rmsnorm(q, ly["q_norm"], eps)
            c, s = ly["cos"][pos], ly["sin"][pos]
            qh = [apply_rope(q[a * hd:(a + 1) * hd], c, s) for a in range(H)]
            kh = [apply_rope(k[a * hd:(a + 1) * hd], c, s) for a in range(Hkv)]
            if qk == "after_rope":
                qf = rmsnorm([u for z in qh for u in z], ly["q_norm"], eps)
                qh = [qf[a * hd:(a + 1) * hd] for a in range(H)]
                kf = rmsnorm([u for z in kh for u in z], ly["k_norm"], eps)
                kh = [kf[a * hd:(a + 1) * hd] for a in range(Hkv)]
            cache["k"].append(kh)
            cache["v"].append([v[a * hd:(a + 1) * hd] for a in range(Hkv)])
            assert len(cache["k"]) == pos + 1
            lo = 0 if W is None else max(0, pos - W + 1)  # keys j: pos - W < j <= pos
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
            ao = matvec(ly["o"], att)
            if ly["o_b"] is not None:
                ao = [a + b for a, b in zip(ao, ly["o_b"])]
            if not pre_norm:
                ao = rmsnorm(ao, ly["post_attn"], eps)
            h2 = [x1 + x2 for x1, x2 in zip(h, ao)]
            x = rmsnorm(h2, ly["post_ff"], eps) if pre_norm else h2
            mo = matvec(ly["down"], [silu(a_) * b_ for a_, b_ in zip(matvec(ly["gate"], x), matvec(ly["up"], x))])
            if not pre_norm:
                mo = rmsnorm(mo, ly["post_ff"], eps)
            out.append([x1 + x2 for x1, x2 in zip(h2, mo)])
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


def olmo2_config(**kw):
    c = {"architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "vocab_size": 264, "hidden_size": 32,
         "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 256, "rope_theta": 500.0, "rope_scaling": None, "rms_norm_eps": 1e-5,
         "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu", "initializer_range": 0.02,
         "tie_word_embeddings": False, "use_cache": True, "torch_dtype": "float32",
         "bos_token_id": None, "eos_token_id": q2.IM_END, "pad_token_id": q2.ENDOFTEXT}
    return _apply(c, kw)


def olmo3_config(**kw):
    c = olmo2_config(architectures=["Olmo3ForCausalLM"], model_type="olmo3", num_hidden_layers=5,
                     max_position_embeddings=64, rope_theta=1000.0, sliding_window=5)
    return _apply(c, kw)


QS = (0.5, 1.0, 2.0, 1.4)  # q head scales (cycled)
KS = (0.6, 1.6)  # k head scales (cycled)


def olmo_weights(cfg, seed, embed_std=0.3, biases=False):
    """random tensors: norm weights (q_norm, k_norm included) 1 + N(0, 0.4); q / k rows of
    std 2.5 / sqrt(d) times a per-head factor (QS, KS) so that per-head and whole-projection
    norms differ by far; biases (q, k, v, o) when asked"""
    rng = random.Random(seed)
    p = olmo_params(cfg)
    d, L, V, F, H, Hkv, hd = p["d"], p["L"], p["V"], p["F"], p["H"], p["Hkv"], p["hd"]
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
        put(pre + "self_attn.q_proj.weight", [H * hd, d],
            lambda r: rng.gauss(0, 2.5 * QS[(r // hd) % 4] / math.sqrt(d)))
        put(pre + "self_attn.k_proj.weight", [Hkv * hd, d],
            lambda r: rng.gauss(0, 2.5 * KS[(r // hd) % 2] / math.sqrt(d)))
        put(pre + "self_attn.v_proj.weight", [Hkv * hd, d], lambda r: rng.gauss(0, 1.2 / math.sqrt(d)))
        put(pre + "self_attn.o_proj.weight", [d, H * hd], lambda r: rng.gauss(0, 1.2 / math.sqrt(H * hd)))
        put(pre + "self_attn.q_norm.weight", [H * hd], lambda r: 1 + rng.gauss(0, 0.4))
        put(pre + "self_attn.k_norm.weight", [Hkv * hd], lambda r: 1 + rng.gauss(0, 0.4))
        if biases:
            for nm, n in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd), ("o", d)):
                put(pre + "self_attn.%s_proj.bias" % nm, [n], lambda r: rng.gauss(0, 0.3))
        put(pre + "post_attention_layernorm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
        put(pre + "post_feedforward_layernorm.weight", [d], lambda r: 1 + rng.gauss(0, 0.4))
        put(pre + "mlp.gate_proj.weight", [F, d], lambda r: rng.gauss(0.1, 2.0 / math.sqrt(d)))
        put(pre + "mlp.up_proj.weight", [F, d], lambda r: rng.gauss(0, 1.2 / math.sqrt(d)))
        put(pre + "mlp.down_proj.weight", [d, F], lambda r: rng.gauss(0, 1.2 / math.sqrt(F)))
    return T


def param_count(cfg):
    """transformers' num_parameters() (tied embeddings counted once)"""
    p = olmo_params(cfg)
    d, F, H, Hkv, hd = p["d"], p["F"], p["H"], p["Hkv"], p["hd"]
    per = H * hd * d + 2 * Hkv * hd * d + d * H * hd + 3 * F * d + 2 * d + (H + Hkv) * hd
    if p["bias"]:
        per += (H + 2 * Hkv) * hd + d
    return p["V"] * d * (1 if p["tied"] else 2) + d + p["L"] * per


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = olmo_params(cfg)
    out = [("per-head q/k norms (Qwen3-like, weight sliced per head)", {"qk": "per_head"}),
           ("no k_norm", {"qk": "no_k"}),
           ("no q_norm / k_norm", {"qk": "none"}),
           ("q/k norms after RoPE", {"qk": "after_rope"}),
           ("pre-norm placement (Llama: norms on the sublayer inputs)", {"placement": "pre"}),
           ("rms_norm_eps 1e-6", {"eps": 1e-6}),
           ("rope_theta 1e4" if p["theta"] != 10000.0 else "rope_theta 5e5",
            {"theta": 1e4 if p["theta"] != 10000.0 else 5e5})]
    if cfg.get("clip_qkv") is not None:
        out.append(("clip_qkv applied (OLMo 1)", {"clip": cfg["clip_qkv"]}))
    if p["rope_scaling"]:
        out.append(("rope_scaling ignored", {"rope": "noscale"}))
        if p["o3"]:
            out.append(("rope_scaling on the full layers only (plain RoPE on sliding ones)", {"rope": "full_only"}))
    if p["o3"]:
        lt = p["layer_types"]
        if "sliding_attention" in lt and p["window"] is not None and p["window"] < p["mpe"]:
            W = p["window"]
            out += [("full attention in the sliding layers", {"window": None}),
                    ("W+1 keys", {"window": W + 1}), ("W-1 keys", {"window": max(1, W - 1)})]
            flipped = ["full_attention" if t == "sliding_attention" else "sliding_attention" for t in lt]
            out.append(("layer types flipped %s" % "".join("S" if t[0] == "s" else "F" for t in flipped),
                        {"layer_types": flipped}))
            out.append(("every layer sliding", {"layer_types": ["sliding_attention"] * p["L"]}))
            alt4 = ["sliding_attention" if i % 4 != 0 else "full_attention" for i in range(p["L"])]
            if alt4 != lt:
                out.append(("layer types i % 4 != 0 slide (layers 0, 4, ... full)", {"layer_types": alt4}))
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
        p = olmo_params(cfg)
        print("[%s] %s H %d, Hkv %d, hd %d, eps %g, theta %g, rope_scaling %s, layers %s, window %s, tied %s, %s%s"
              % (tag, cfg["model_type"], p["H"], p["Hkv"], p["hd"], p["eps"], p["theta"], p["rope_scaling"],
                 "".join("S" if t[0] == "s" else "F" for t in p["layer_types"]), p["window"], p["tied"], dt,
                 " in %d shards" % shards if shards > 1 else ""), flush=True)

    def alt(self, kw):
        key = (self.wtag, self.dt, json.dumps(self.cfg, sort_keys=True), json.dumps(kw, sort_keys=True))
        if key not in Case.models:
            Case.models[key] = OlmoRef(self.cfg, self.W, **kw)
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
                    print("    alternative %-62s loss_sum %.10g%s" % (name, a, "   <-- lol matches" if abs(
                        a - got) <= max(rtol, 1e-4) * abs(a) else ""))

    def generate(self, prompt, n, dtype="float64"):
        nf = len(self.ck.failures)
        compare_generate(self.ck, self.tag, self.model, prompt, n, dtype, self.tag)
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0 and not self.diagnosed[1]:
            DIAGNOSE[0] -= 1
            self.diagnosed[1] = True
            toks, _, _, _ = self.model.greedy(prompt, n)
            r = self.ck.run(["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype,
                             "--threads", 1, "--tokens", ",".join(map(str, prompt))], expect_rc=None)
            got = q2.parse_ids(r.stdout) if r.returncode == 0 else None
            print("    prompt    %s\n    reference %s\n    lol       %s" % (prompt, toks, got))
            if got:
                for name, kw in alternatives(self.cfg):
                    a, _, _, _ = self.alt(kw).greedy(prompt, n)
                    if a == got:
                        print("    lol matches the reference under: %s" % name)

    def info(self, check=True, window=None):
        args = ["hf", "info", self.tag] + (["--check"] if check else [])
        r = self.ck.run(args, expect_rc=None)
        self.ck.equal("%s hf info%s exits 0" % (self.tag, " --check" if check else ""), r.returncode, 0)
        if r.returncode != 0:
            return
        arch = self.cfg["architectures"][0]
        self.ck.equal("%s hf info names %s" % (self.tag, arch), arch in r.stdout, True)
        if check:
            self.ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout,
                          True)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            self.ck.equal("%s hf info parameters (transformers' num_parameters())" % self.tag,
                          int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            self.ck.note("%s: hf info prints no parameter count" % self.tag)
        if window is None:
            return
        lines = [l_ for l_ in r.stdout.splitlines() if ("slid" in l_.lower() or "window" in l_.lower())
                 and self.tag not in l_]
        self.ck.compared += 1
        if not lines:
            self.ck.fail("%s: hf info prints no line about the sliding layers (window %d)" % (self.tag, window))
            return
        for l_ in lines:
            print("    info: %s" % l_.strip())
        self.ck.equal("%s hf info's sliding line names the window %d" % (self.tag, window),
                      any(re.search(r"\b%d\b" % window, l_) for l_ in lines), True)
        lt = olmo_params(self.cfg)["layer_types"]
        sl = [i for i, t in enumerate(lt) if t == "sliding_attention"]
        fl = [i for i, t in enumerate(lt) if t != "sliding_attention"]
        txt = " ".join(lines)
        m = re.search(r"\bbut\s+([\d,\s]+)", txt)  # "on every layer but 3, 7": the full layers
        if m:
            self.ck.equal("%s hf info's sliding line: the layers it excepts are the full ones %s" % (self.tag, fl),
                          [int(x) for x in re.findall(r"\d+", m.group(1))], fl)
        elif not all(i in set(int(x) for x in re.findall(r"\d+", txt)) for i in sl):
            self.ck.note("%s: hf info's sliding line(s) do not list the sliding layers %s by index (format?)"
                         % (self.tag, sl))


def refusal(ck, tag, cfg, T, needles, assumed="", rc=2):
    write_folder(os.path.join(ck.work, tag), cfg, T)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
    ok = r.returncode == rc and any(n in r.stderr for n in needles)
    ck.compared += 1
    if not ok:
        ck.fail("%s%s: expected exit %d naming %s; got exit %d, stderr %r" % (
            tag, assumed, rc, " or ".join(needles), r.returncode, r.stderr.strip()[-400:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("%s refused (exit %d)" % (tag, rc), r.stderr.strip()[:160]))


def accepted_or_refused(ck, tag, cfg, T, ids, context, needles, why, model_kw=None, alt_note=None):
    """a setting that transformers runs but docs/hf.md may refuse, or one where transformers
    fails: lol may refuse it (exit 2 naming one of needles: a note) or run it, and then must
    compute the reference's reading (OlmoRef(cfg, **model_kw))"""
    write_folder(os.path.join(ck.work, tag), cfg, T)
    out = os.path.join(ck.work, "ppl_%s_float64_%d.json" % (tag, context))
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", context, "--dtype", "float64", "--out", out,
                "--threads", 1], expect_rc=None)
    model = OlmoRef(cfg, q2.as_weights(T, "F32"), **(model_kw or {}))
    if r.returncode == 0:
        res = json.load(open(out))
        tot, cnt = mean_ce(model, ppl_windows(ids, context))
        ck.equal("%s hf ppl --context %d: targets" % (tag, context), res.get("targets"), cnt)
        ok = ck.close("%s hf ppl --dtype float64 --context %d: loss_sum (%s)" % (tag, context, why),
                      res.get("loss_sum"), tot)
        if ok and alt_note:
            ck.note("%s: accepted, %s" % (tag, alt_note))
        got = res.get("loss_sum")
        if not ok and got is not None:
            for name, kw in alternatives(cfg):
                a, _ = mean_ce(OlmoRef(cfg, q2.as_weights(T, "F32"), **dict(model_kw or {}, **kw)),
                               ppl_windows(ids, context))
                if abs(a - got) <= 1e-4 * abs(a):
                    print("    lol matches the reference under: %s" % name)
        return
    ck.compared += 1
    if r.returncode == 2 and any(n in r.stderr for n in needles):
        ck.note("%s: refused (%s) -- %s" % (tag, r.stderr.strip()[:200], why))
        if ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))
    else:
        ck.fail("%s: expected exit 0 with the reference's loss or a refusal (exit 2 naming %s); got exit %d, "
                "stderr %r" % (tag, " or ".join(needles), r.returncode, r.stderr.strip()[-400:]))


# ---------------------------------------------------------------- LayerRoute and export (second reviewer)
LR_SAMPLES = [{"question": "hi %d" % i, "answer": "ok %d" % (i * 7)} for i in range(8)]
LR_TARGETS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"


def fold_adapter(T, adapter):
    """T (name -> (shape, vals)) with the adapter's LoRA folded in float64 (W + alpha/r B A), and
    the gates (W [L][d], b [L]) of `adapter`"""
    from safetensors_io import read_st
    lj = json.load(open(os.path.join(adapter, "layerroute.json")))
    sc = lj["lora"]["alpha"] / lj["lora"]["rank"]
    A = read_st(os.path.join(adapter, "adapter_model.safetensors"))
    F = {k: (list(v[0]), list(v[1])) for k, v in T.items()}
    for k in A:
        if not k.endswith(".lora_A.weight"):
            continue
        mod = k[len("base_model.model."):-len(".lora_A.weight")]
        ba = q2.matmul(q2.mat(A[k.replace("lora_A", "lora_B")]), q2.mat(A[k]))
        shape, vals = F[mod + ".weight"]
        c = shape[1]
        F[mod + ".weight"] = (shape, [v + sc * ba[i // c][i % c] for i, v in enumerate(vals)])
    G = read_st(os.path.join(adapter, "gates.safetensors"))
    return F, (q2.mat(G["gates.weight"]), list(G["gates.bias"][1]))


def lr_reference(cfg, T, F, gates, samples):
    """LayerRoute eval's pooled assistant-token perplexities (backbone, open, gated: each sample's
    gates from the mean of its whole sequence) and mean executed layers; no system turn; the
    smallest |gate score| (a float32 near-tie makes the gated numbers unreliable)"""
    W = lambda X: {k: (s, v, "F64") for k, (s, v) in X.items()}  # noqa: E731
    bb, ad = OlmoRef(cfg, W(T)), OlmoRef(cfg, W(F))
    ad.gates = gates
    out, margin = {}, float("inf")
    for key, model, mode in (("ppl_base", bb, "backbone"), ("ppl_open", ad, "open"), ("ppl_gated", ad, "gated")):
        tot = cnt = 0.0
        ex = []
        for s in samples:
            toks, mask, _ = q2.chatml_ids(s, None)
            logits, _, opens, scores = model.prefill(toks, mode)
            ex.append(sum(opens))
            if scores:
                margin = min(margin, min(abs(x) for x in scores))
            for j in range(len(toks) - 1):
                if mask[j + 1]:
                    tot -= q2.log_softmax(logits[j])[toks[j + 1]]
                    cnt += 1
        out[key] = math.exp(tot / cnt)
        if mode == "gated":
            out["executed_mean"] = sum(ex) / len(ex)
    return out, margin, ad


def check_layerroute_olmo(ck, cfgA, TA, cfgD):
    """LayerRoute on an OLMo 2 base (case A's folder): train, eval against the reference (LoRA
    folded in float64, gates from the adapter), merge (an Olmo2ForCausalLM folder of the folded
    weights that hf ppl reads), generate; an OLMo 3 base with sliding layers is refused, one
    whose window never binds (D4) trains and evaluates."""
    import shutil
    print("[layerroute on OLMo]", flush=True)
    data = os.path.join(ck.work, "lr_olmo.jsonl")
    with open(data, "w") as f:
        for s_ in LR_SAMPLES:
            f.write(json.dumps(s_) + "\n")
    train = ["--data", "lr_olmo.jsonl", "--steps", 3, "--batch", 2, "--accum", 1, "--lr", 0.01, "--system", "",
             "--max-len", 64, "--rank", 4, "--targets", LR_TARGETS, "--threads", 1, "--no-progress"]
    for d_ in ("lr-olmo2", "lr-olmo2-merged", "lr-olmo3", "lr-olmo3-full"):
        shutil.rmtree(os.path.join(ck.work, d_), ignore_errors=True)
    r = ck.run(["layerroute", "train", "--base", "olmo2-gqa-f32", "--out", "lr-olmo2"] + train)
    if r.returncode != 0:
        return
    F, gates = fold_adapter(TA, os.path.join(ck.work, "lr-olmo2"))
    ref, margin, model = lr_reference(cfgA, TA, F, gates, LR_SAMPLES)
    r = ck.run(["layerroute", "eval", "--adapter", "lr-olmo2", "--data", "lr_olmo.jsonl", "--samples", 0,
                "--timing-samples", 0, "--json", "lr-olmo2-eval.json", "--threads", 1])
    if r.returncode == 0:
        res = json.load(open(os.path.join(ck.work, "lr-olmo2-eval.json")))
        keys = ("ppl_base", "ppl_open") + (("ppl_gated",) if margin > 1e-4 else ())
        for k in keys:
            ck.close("olmo2 layerroute eval %s" % k, res.get(k), ref[k], 1e-5)
        if margin > 1e-4:
            ck.close("olmo2 layerroute eval executed_mean", res.get("executed_mean"), ref["executed_mean"], 0, 1e-9)
        else:
            ck.note("olmo2 layerroute: a gate score within %.1e of 0: gated numbers not compared" % margin)
    # merge: an Olmo2ForCausalLM folder holding the folded weights
    r = ck.run(["layerroute", "merge", "--adapter", "lr-olmo2", "--out", "lr-olmo2-merged"])
    if r.returncode == 0:
        mdir = os.path.join(ck.work, "lr-olmo2-merged")
        mc = json.load(open(os.path.join(mdir, "config.json")))
        ck.equal("olmo2 layerroute merge: architectures / model_type", (mc.get("architectures"), mc.get("model_type")),
                 (["Olmo2ForCausalLM"], "olmo2"))
        mT = q2.read_folder_weights(mdir)
        ck.equal("olmo2 layerroute merge: tensor names = the base's", sorted(mT), sorted(TA))
        worst = 0.0
        for k, (shape, want) in F.items():
            if k in mT:
                sc = max(abs(v) for v in want) or 1.0
                worst = max(worst, max(abs(a - b) for a, b in zip(mT[k][1], want)) / sc)
        ck.close("olmo2 layerroute merge: max |merged - float64 fold| / max |W'|", worst, 0.0, 0, 1e-6)
        if mc.get("pad_token_id") != cfgA.get("pad_token_id"):
            ck.note("olmo2 layerroute merge: pad_token_id %r -> %r (Olmo2Config's default for an absent key is 1)"
                    % (cfgA.get("pad_token_id"), mc.get("pad_token_id")))
        ids = q2.encode(TEXT)
        compare_ppl(ck, "lr-olmo2-merged", OlmoRef(cfgA, {k: (s_, v, "F64") for k, (s_, v) in F.items()}), ids, 64,
                    "float64", 1e-5, "olmo2-merged")
    if margin > 1e-4:
        q2.lr_generate(ck, model, "lr-olmo2", "olmo2", q2.encode("ok 1 hi"), "learned")
    # OLMo 3: its sliding layers (window 5, binding on these samples) run under LayerRoute
    # since session 46 (they were refused before): eval = the reference with the window;
    # a window that never binds (no sliding_window key: 4096 > 64) trains as well.
    def train_and_eval(base, cfg, adapter, tag):
        """layerroute train on `base`, then eval's perplexities against the reference"""
        r = ck.run(["layerroute", "train", "--base", base, "--out", adapter] + train)
        if r.returncode != 0:
            return
        TB = {k: (v[0], v[1]) for k, v in q2.read_folder_weights(os.path.join(ck.work, base)).items()}
        FB, gb = fold_adapter(TB, os.path.join(ck.work, adapter))
        refb, mb, _ = lr_reference(cfg, TB, FB, gb, LR_SAMPLES)
        r = ck.run(["layerroute", "eval", "--adapter", adapter, "--data", "lr_olmo.jsonl", "--samples", 0,
                    "--timing-samples", 0, "--json", adapter + "-eval.json", "--threads", 1])
        if r.returncode == 0:
            res = json.load(open(os.path.join(ck.work, adapter + "-eval.json")))
            for k in ("ppl_base", "ppl_open") + (("ppl_gated",) if mb > 1e-4 else ()):
                ck.close("%s layerroute eval %s" % (tag, k), res.get(k), refb[k], 1e-5)

    train_and_eval("olmo3-sw5-default-types", cfgD, "lr-olmo3", "olmo3 (sliding window 5)")
    train_and_eval("olmo3-window-absent", {k: v for k, v in cfgD.items() if k != "sliding_window"}, "lr-olmo3-full",
                   "olmo3 (window never binds)")


WORDS = "the quick brown fox jumps over lazy dog pack my box with five dozen liquor jugs sphinx of black quartz".split()
OLMO_DENSE = {"input_norms": False, "sandwich_norm": True, "qk_norm": True, "qk_norm_across_heads": True}


def train_dense(ck, name, model):
    """a 5-step `lol train` of a tiny dense model (byte tokenizer data in olmo-data); returns the run dir or None"""
    import shutil
    m = {"architecture": "dense", "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 40, "max_seq_len": 64,
         "n_layers": 3}
    m.update(model)
    cfg = {"model": m, "data": {"dir": "olmo-data", "seq_len": 32, "batch_size": 4, "packing": "pack"},
           "optim": {"type": "adamw", "lr": 0.01},
           "train": {"steps": 5, "out": name, "device": "cpu", "threads": 1, "seed": 0, "eval_every": 100,
                     "eval_batches": 1, "save_every": 100, "log_every": 100}}
    shutil.rmtree(os.path.join(ck.work, name), ignore_errors=True)
    json.dump(cfg, open(os.path.join(ck.work, name + ".json"), "w"))
    r = ck.run(["train", "--config", name + ".json", "--no-progress"])
    return name if r.returncode == 0 else None


def check_export_olmo(ck):
    """`lol export --hf` of OLMo-layout dense checkpoints: what is written must be a folder the
    Hugging Face loader (lol's own included) reads, computing the checkpoint's function."""
    import shutil
    from safetensors_io import read_st
    print("[export of OLMo-layout dense checkpoints]", flush=True)
    rng = random.Random(11)
    with open(os.path.join(ck.work, "olmo_corpus.txt"), "w") as f:
        for _ in range(300):
            f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))) + "\n\n")
    shutil.rmtree(os.path.join(ck.work, "olmo-data"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "olmo_corpus.txt", "--tokenizer", "olmo2-gqa-f32/tokenizer.json", "--out",
                "olmo-data", "--valid-fraction", 0.1, "--no-progress"])
    if r.returncode != 0:
        return
    ids = q2.encode(TEXT)
    # 1. OLMo 3 layout: a full first layer, then a full layer every 3rd (n_full_prelude 1 + interval 3)
    run = train_dense(ck, "olmo-dense-mix", dict(OLMO_DENSE, n_layers=6, attention="sliding", window=6,
                                                 n_full_prelude=1, full_attention_interval=3))
    if run:
        shutil.rmtree(os.path.join(ck.work, "ex-olmo-mix"), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", "ex-olmo-mix"])
        if r.returncode == 0:
            ex = os.path.join(ck.work, "ex-olmo-mix")
            c = json.load(open(os.path.join(ex, "config.json")))
            ck.equal("export (OLMo layout, sliding): default architecture", (c.get("architectures"),
                     c.get("model_type")), (["Olmo3ForCausalLM"], "olmo3"))
            need = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                    "num_key_value_heads", "max_position_embeddings", "rope_theta", "rms_norm_eps",
                    "tie_word_embeddings", "attention_bias", "sliding_window", "layer_types")
            ck.equal("export olmo3 config.json: Olmo3Config keys present", [k for k in need if k not in c], [])
            T = q2.read_folder_weights(ex)
            exp = {"model.embed_tokens.weight": [259, 32], "lm_head.weight": [259, 32], "model.norm.weight": [32]}
            for i in range(6):
                p_ = "model.layers.%d." % i
                exp.update({p_ + "self_attn.q_proj.weight": [32, 32], p_ + "self_attn.k_proj.weight": [16, 32],
                            p_ + "self_attn.v_proj.weight": [16, 32], p_ + "self_attn.o_proj.weight": [32, 32],
                            p_ + "self_attn.q_norm.weight": [32], p_ + "self_attn.k_norm.weight": [16],
                            p_ + "post_attention_layernorm.weight": [32],
                            p_ + "post_feedforward_layernorm.weight": [32], p_ + "mlp.gate_proj.weight": [40, 32],
                            p_ + "mlp.up_proj.weight": [40, 32], p_ + "mlp.down_proj.weight": [32, 40]})
            ck.equal("export olmo3: tensor names and shapes (Olmo3ForCausalLM's)",
                     sorted((k, list(v[0])) for k, v in T.items()), sorted(exp.items()))
            # the written folder computes the checkpoint's function: lol forward on the checkpoint
            # against the reference on the exported folder
            toks = ids[:40]
            r = ck.run(["forward", "--model", run, "--tokens", ",".join(map(str, toks)), "--out",
                        "olmo-mix-fw.safetensors"])
            if r.returncode == 0:
                lg = read_st(os.path.join(ck.work, "olmo-mix-fw.safetensors"))["logits"]
                V = lg[0][-1]
                got = [lg[1][i * V:(i + 1) * V] for i in range(len(toks))]
                want = OlmoRef(c, T).prefill(toks)[0]
                ck.close("export olmo3: max |lol forward(checkpoint) - reference(exported folder)| logits",
                         max(abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb)), 0.0, 0, 1e-4)
            # and lol itself reads back what it wrote (transformers runs any layer_types list)
            compare_ppl(ck, "ex-olmo-mix", OlmoRef(c, T), ids, 40, "float64", 1e-5, "ex-olmo-mix")
        elif r.returncode != 2:
            ck.fail("export of an OLMo 3 layout: exit %d" % r.returncode)
    # 2. Llama blocks (input norms) with q/k norms across heads: no Hugging Face architecture has
    # them. Whatever export writes must load (Qwen3's q_norm is [head_dim]): refused, or readable.
    run = train_dense(ck, "olmo-dense-across", {"qk_norm": True, "qk_norm_across_heads": True})
    if run:
        shutil.rmtree(os.path.join(ck.work, "ex-across"), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", "ex-across"], expect_rc=None)
        ck.compared += 1
        if r.returncode == 0:
            r2 = ck.run(["hf", "info", "ex-across", "--check"], expect_rc=None)
            if r2.returncode != 0:
                ck.fail("export of a Llama-block model with qk_norm_across_heads exited 0 but wrote a folder that "
                        "does not load (expected a refusal, exit 2): %s" % r2.stderr.strip()[-300:],
                        "cd %s && lol export --hf %s --out ex-across && lol hf info ex-across --check"
                        % (ck.work, run))
        elif r.returncode != 2:
            ck.fail("export of a Llama-block model with qk_norm_across_heads: exit %d (expected 0 or 2): %s"
                    % (r.returncode, r.stderr.strip()[-300:]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("Llama blocks + q/k norms across heads: export refused", r.stderr.strip()[:120]))



# ---------------------------------------------------------------- self-checks
def _maxdiff(A, B):
    return max(abs(a - b) for ra, rb in zip(A, B) for a, b in zip(ra, rb))


def _scaled(T, name_part, factor, rows=None):
    """a copy of T with every tensor whose name contains name_part times factor (only rows
    in `rows` when given)"""
    out = dict(T)
    for name, (shape, vals) in T.items():
        if name_part in name:
            c = shape[1] if len(shape) > 1 else 1
            out[name] = (shape, [v * factor if (rows is None or (k // c) in rows) else v for k, v in enumerate(vals)])
    return out


def selftest():
    bad = []
    t0 = time.time()
    ids = q2.encode("Hello, olmo two! Sphinx of quartz.")

    def W(T):
        return {k: (s, v, "F64") for k, (s, v) in T.items()}

    # 1. the pre-norm, no-q/k-norm reading = qwen2_reference's Llama Ref on mapped weights
    import tempfile
    import shutil
    tmp = tempfile.mkdtemp(prefix="olmo_selftest_")
    cfg = olmo2_config(max_position_embeddings=64)
    T = olmo_weights(cfg, 5)
    lcfg = q2.make_config("LlamaForCausalLM", num_hidden_layers=3, max_position_embeddings=64, rope_theta=500.0,
                          rms_norm_eps=1e-5)
    LT = {}
    for name, tv in T.items():
        if "q_norm" in name or "k_norm" in name:
            continue
        LT[name.replace("post_attention_layernorm", "input_layernorm").replace(
            "post_feedforward_layernorm", "post_attention_layernorm")] = tv
    write_folder(tmp, lcfg, LT)
    llama = q2.Ref(tmp, weights=W(LT))
    la = llama.prefill(ids)[0]
    lb = OlmoRef(cfg, W(T), qk="none", placement="pre").prefill(ids)[0]
    if _maxdiff(la, lb) > 1e-12:
        bad.append("OlmoRef(pre-norm, no q/k norms) != Llama Ref on the mapped weights (%.2e)" % _maxdiff(la, lb))
    shutil.rmtree(tmp, ignore_errors=True)

    # 2. invariances that identify the whole-projection q/k norms and the output norms (eps 1e-30:
    # the norms are then exactly scale-invariant up to rounding)
    base = OlmoRef(cfg, W(T), eps=1e-30).prefill(ids)[0]
    hd = 8
    for what, T2, kw, same in (
            ("all of q_proj x7", _scaled(T, "q_proj", 7.0), {}, True),
            ("all of k_proj x0.2", _scaled(T, "k_proj", 0.2), {}, True),
            ("q head 1 x7 (whole-projection norm: changes the function)", _scaled(T, "q_proj", 7.0,
                                                                                 set(range(hd, 2 * hd))), {}, False),
            ("q head 1 x7 under the per-head reading", _scaled(T, "q_proj", 7.0, set(range(hd, 2 * hd))),
             {"qk": "per_head"}, True),
            ("o_proj x5 (post_attention_layernorm on the output)", _scaled(T, "o_proj", 5.0), {}, True),
            ("down_proj x0.3 (post_feedforward_layernorm on the output)", _scaled(T, "down_proj", 0.3), {}, True),
            ("o_proj x5 under pre-norm placement", _scaled(T, "o_proj", 5.0), {"placement": "pre"}, False)):
        ref = base if not kw else OlmoRef(cfg, W(T), eps=1e-30, **kw).prefill(ids)[0]
        got = OlmoRef(cfg, W(T2), eps=1e-30, **kw).prefill(ids)[0]
        dmax = _maxdiff(ref, got)
        if same and dmax > 1e-9:
            bad.append("invariance: %s changes the logits by %.2e" % (what, dmax))
        if not same and dmax < 1e-3:
            bad.append("%s leaves the logits unchanged (%.2e)" % (what, dmax))

    # 3. sensitivity: every alternative moves the loss by far more than the tolerance (case A, D, F)
    text_ids = q2.encode(TEXT)[:100]
    cases = case_table()
    for tag in ("A", "B", "C", "D", "E", "F"):
        c, seed, wkw, dt = cases[tag]
        Wt = q2.as_weights(olmo_weights(c, seed, **wkw), dt)
        ctx = 40
        ref, _ = mean_ce(OlmoRef(c, Wt), ppl_windows(text_ids, ctx))
        worst = None
        for name, kw in alternatives(c):
            a, _ = mean_ce(OlmoRef(c, Wt, **kw), ppl_windows(text_ids, ctx))
            rel = abs(a - ref) / abs(ref)
            worst = rel if worst is None else min(worst, rel)
            if tag in ("A", "D", "F") and (tag == "A" or "eps" not in name):
                print("  selftest %-2s %-66s relative change %.2e" % (tag, name, rel))
            if "eps" in name and tag != "B":
                continue  # eps matters for small activations only: case B
            if "theta" in name and tag != "A":
                continue
            if rel < 2e-4:  # 20x the float64 tolerance
                bad.append("case %s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
        print("  selftest %-2s loss %.8g; smallest relative change under an alternative %.2e" % (tag, ref, worst))
    # greedy ids of the generate checks tell the window / layer-type readings apart
    full = q2.encode(TEXT)
    for tag, prompts in (("D", ((full[:3], 30), (full[5:22], 25))), ("F", ((full[5:22], 25),))):
        c, seed, wkw, dt = cases[tag]
        Wt = q2.as_weights(olmo_weights(c, seed, **wkw), dt)
        refs = [OlmoRef(c, Wt).greedy(pp, n)[0] for pp, n in prompts]
        if any(len(set(r_)) < 4 for r_ in refs):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
        for name, kw in alternatives(c):
            if "eps" in name:
                continue
            if all(OlmoRef(c, Wt, **kw).greedy(pp, n)[0] == r_ for (pp, n), r_ in zip(prompts, refs)):
                bad.append("case %s: greedy ids are the same under '%s'" % (tag, name))

    # the clip_qkv diagnosis reading binds on case A's weights
    cA, sA, _, _ = cases["A"]
    WA = q2.as_weights(olmo_weights(cA, sA), "F32")
    a0, _ = mean_ce(OlmoRef(cA, WA), ppl_windows(text_ids, 40))
    a1, _ = mean_ce(OlmoRef(cA, WA, clip=0.3), ppl_windows(text_ids, 40))
    print("  selftest A  clip_qkv 0.3 applied (OLMo 1)%s relative change %.2e" % (" " * 37, abs(a1 - a0) / a0))
    if abs(a1 - a0) < 2e-4 * a0:
        bad.append("clip_qkv 0.3 barely changes case A's loss")

    # 4. the window: W 2 = full attention at positions 0..1, differs at 2; cached greedy = recomputed
    c = olmo3_config(num_hidden_layers=2, sliding_window=2, layer_types=["sliding_attention"] * 2)
    Wc = W(olmo_weights(c, 7))
    w2 = OlmoRef(c, Wc).prefill(ids[:6])[0]
    wf = OlmoRef(c, Wc, window=None).prefill(ids[:6])[0]
    if max(abs(a - b) for a, b in zip(w2[1], wf[1])) > 1e-12 or max(abs(a - b) for a, b in zip(w2[2], wf[2])) < 1e-6:
        bad.append("window 2: positions 0..1 must equal full attention and position 2 differ")
    c = olmo3_config(sliding_window=3)
    Wc = W(olmo_weights(c, 8))
    toks = OlmoRef(c, Wc).greedy(ids[:5], 8)[0]
    seq = list(ids[:5])
    for j in range(8):
        t = q2.argmax_low(OlmoRef(c, Wc).prefill(seq)[0][-1])
        if t != toks[j]:
            bad.append("cached greedy step %d: %d != recomputed %d" % (j, toks[j], t))
            break
        seq.append(t)

    # 5. config defaults
    pd = olmo_params(olmo2_config(num_key_value_heads=DROP, rope_theta=DROP, rms_norm_eps=DROP,
                                  tie_word_embeddings=DROP, max_position_embeddings=DROP, attention_bias=DROP))
    if (pd["Hkv"], pd["theta"], pd["eps"], pd["tied"], pd["mpe"], pd["bias"], pd["hd"], pd["window"]) != (
            4, 10000.0, 1e-5, False, 2048, False, 8, None):
        bad.append("Olmo2Config defaults %s" % pd)
    if olmo_params(olmo2_config(num_key_value_heads=None))["Hkv"] != 4:
        bad.append("num_key_value_heads null")
    p3 = olmo_params(olmo3_config(num_hidden_layers=8, sliding_window=DROP))
    if p3["layer_types"] != (["sliding_attention"] * 3 + ["full_attention"]) * 2 or p3["window"] != 4096:
        bad.append("Olmo3Config defaults %s %s" % (p3["layer_types"], p3["window"]))
    if olmo_params(olmo2_config(head_dim=16))["hd"] != 16:
        bad.append("head_dim from config.json")

    # 6. parameter counts
    for c in (olmo2_config(), olmo2_config(tie_word_embeddings=True, num_key_value_heads=1), olmo3_config(),
              olmo2_config(head_dim=16), olmo2_config(attention_bias=True)):
        Tt = olmo_weights(c, 1, biases=c.get("attention_bias", False))
        if param_count(c) != sum(len(v[1]) for v in Tt.values()):
            bad.append("param_count %d != stored values %d" % (param_count(c), sum(len(v[1]) for v in Tt.values())))
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


# ---------------------------------------------------------------- the cases
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "attention_factor": 1.2,
        "beta_fast": 32, "beta_slow": 1}


def case_table():
    """tag -> (config, weight seed, olmo_weights keyword arguments, storage dtype)"""
    A = olmo2_config()
    B = olmo2_config(num_key_value_heads=DROP, rope_theta=DROP, rms_norm_eps=DROP, tie_word_embeddings=DROP,
                     torch_dtype="bfloat16")
    C = olmo2_config(tie_word_embeddings=True, num_key_value_heads=1, rope_theta=10000.0)
    D = olmo3_config()
    E = olmo2_config(num_hidden_layers=2, head_dim=16, max_position_embeddings=64, rope_theta=2000.0)
    F = olmo3_config(num_hidden_layers=4, sliding_window=6, rope_theta=500.0, rope_scaling=dict(YARN))
    return {"A": (A, 501, {}, "F32"), "B": (B, 502, {"embed_std": 0.003}, "BF16"),
            "C": (C, 503, {"embed_std": 0.3}, "F32"), "D": (D, 504, {}, "F32"), "E": (E, 505, {}, "F32"),
            "F": (F, 506, {}, "F32")}


def check(lol, work, verbose=True, cpu=None):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    if cpu is not None:
        _pin(ck, cpu)
    ids = q2.encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    pr = q2.encode("<|im_start|>user\nJump, fox: 12 dozen jugs?<|im_end|>\n")
    pr9 = q2.encode("Hello wor")
    tab = case_table()

    # A: olmo2 GQA, F32, given fields
    cfgA, sd, wkw, dt = tab["A"]
    TA = olmo_weights(cfgA, sd, **wkw)
    c = Case(ck, "olmo2-gqa-f32", cfgA, TA, dt)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr9, 12)
    c.generate(pr, 12, "float32")
    c.info()
    c = Case(ck, "olmo2-A-linear", dict(cfgA, rope_scaling={"rope_type": "linear", "factor": 2.0}), TA, wtag="A")
    c.ppl(ids, 64)
    # "head_dim": null (transformers versions differ: getattr(...) or hidden / heads, or a failure)
    accepted_or_refused(ck, "olmo2-A-head_dim-null", dict(cfgA, head_dim=None), TA, ids, 64, ("head_dim",),
                        "ASSUMED: a null head_dim is hidden_size / num_attention_heads")
    # an OLMo 1 key in an OLMo 2 folder: Olmo2Config drops clip_qkv and Olmo2Attention never clips
    accepted_or_refused(ck, "olmo2-A-clip_qkv", dict(cfgA, clip_qkv=0.3), TA, ids, 64, ("clip_qkv",),
                        "Olmo2Attention does not clip: clip_qkv is ignored")

    # B: defaults, BF16 in 2 shards, small embeddings (eps matters)
    cfgB, sd, wkw, dt = tab["B"]
    TB = olmo_weights(cfgB, sd, **wkw)
    c = Case(ck, "olmo2-defaults-bf16", cfgB, TB, dt, shards=2)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 3e-2)
    c.generate(pr, 12)
    c.info()
    ref, _ = mean_ce(c.model, ppl_windows(ids, 64))
    e6, _ = mean_ce(c.alt({"eps": 1e-6}), ppl_windows(ids, 64))
    print("  reference with eps 1e-6 instead of Olmo2Config's 1e-5: loss_sum %.8g vs %.8g (rel %.1e)"
          % (e6, ref, abs(e6 - ref) / ref))
    if abs(e6 - ref) < 1e-3 * ref:
        ck.note("olmo2-defaults-bf16: the default eps barely matters (%.1e)" % (abs(e6 - ref) / ref))

    # C: tied, MQA
    cfgC, sd, wkw, dt = tab["C"]
    c = Case(ck, "olmo2-tied-mqa", cfgC, olmo_weights(cfgC, sd, **wkw), dt)
    c.ppl(ids, 64)
    c.generate(pr, 12)
    c.info()

    # D: olmo3, default layer types over 5 layers (S S S F S), window 5
    cfgD, sd, wkw, dt = tab["D"]
    TD = olmo_weights(cfgD, sd, **wkw)
    c = Case(ck, "olmo3-sw5-default-types", cfgD, TD, dt)
    c.ppl(ids, 7)
    c.ppl(ids, 40)
    c.ppl(ids, 40, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[5:22], 25)
    c.generate(ids[5:22], 25, "float32")
    c.info(window=5)
    # D2: explicit layer_types S F S F (a full layer every 2nd), window 6
    cfgD2 = olmo3_config(num_hidden_layers=4, sliding_window=6,
                         layer_types=["sliding_attention", "full_attention"] * 2)
    TD2 = olmo_weights(cfgD2, 514)
    c = Case(ck, "olmo3-layer_types-alt", cfgD2, TD2)
    c.ppl(ids, 40)
    c.generate(ids[5:22], 25)
    c.info(check=False, window=6)
    # D3: an irregular list F S S F (transformers runs it; docs/hf.md refuses other patterns)
    cfgD3 = dict(cfgD2, sliding_window=4, layer_types=["full_attention", "sliding_attention", "sliding_attention",
                                                       "full_attention"])
    accepted_or_refused(ck, "olmo3-layer_types-irregular", cfgD3, TD2, ids, 40, ("layer_types",),
                        "transformers runs any layer_types list (docs/hf.md refuses patterns other than full-first "
                        "or every-P-th)")
    # D4: no sliding_window key: 4096 > 64 positions, never binds
    c = Case(ck, "olmo3-window-absent", {k: v for k, v in cfgD.items() if k != "sliding_window"}, TD, wtag="D")
    c.ppl(ids, 40)
    # D5: "sliding_window": null with sliding layers
    accepted_or_refused(ck, "olmo3-window-null", dict(cfgD, sliding_window=None), TD, ids, 40, ("sliding_window",),
                        "ASSUMED: transformers cannot build the sliding mask without a window", {"window": None},
                        "run as full attention (transformers fails on a null window)")

    # E: head_dim 16 != hidden / heads
    cfgE, sd, wkw, dt = tab["E"]
    c = Case(ck, "olmo2-head_dim16", cfgE, olmo_weights(cfgE, sd, **wkw), dt)
    c.ppl(ids, 40)
    c.generate(pr, 12)
    c.generate(pr, 12, "float32")
    c.info()

    # F: olmo3 with yarn (OLMo-3-7B's form), one RoPE for every layer (ASSUMED)
    cfgF, sd, wkw, dt = tab["F"]
    TF = olmo_weights(cfgF, sd, **wkw)
    c = Case(ck, "olmo3-yarn", cfgF, TF, dt)
    c.ppl(ids, 40)
    c.generate(ids[5:22], 25)
    # the same in transformers 5's form: rope_parameters (with rope_theta inside)
    cfgF5 = {k: v for k, v in cfgF.items() if k not in ("rope_theta", "rope_scaling")}
    cfgF5["rope_parameters"] = dict(YARN, rope_theta=500.0)
    c = Case(ck, "olmo3-yarn-rope_parameters", cfgF5, TF, dt, wtag="F")
    c.ppl(ids, 40)

    # refusals
    print("[refusals]", flush=True)
    p = olmo_params(cfgA)
    d, H, Hkv, hd = p["d"], p["H"], p["Hkv"], p["hd"]
    T = dict(TA)
    T["model.layers.0.input_layernorm.weight"] = ([d], [1.0] * d)
    refusal(ck, "refuse-input_layernorm", cfgA, T, ["input_layernorm"])
    T = dict(TA)
    T["model.layers.1.self_attn.q_norm.weight"] = ([hd], [1.0] * hd)
    refusal(ck, "refuse-q_norm-per-head-shape", cfgA, T, ["q_norm"])
    T = dict(TA)
    T["model.layers.0.self_attn.k_norm.weight"] = ([H * hd], [1.0] * (H * hd))
    refusal(ck, "refuse-k_norm-width", cfgA, T, ["k_norm"])
    cfgb = dict(cfgA, attention_bias=True)
    refusal(ck, "refuse-attention_bias", cfgb, olmo_weights(cfgb, 520, biases=True), ["attention_bias", ".bias"],
            " (ASSUMED: refused as Llama's attention_bias; transformers adds q/k/v/o biases)")
    T = dict(TA)
    del T["model.layers.1.post_feedforward_layernorm.weight"]
    refusal(ck, "refuse-missing-post_ff", cfgA, T, ["post_feedforward_layernorm"])
    refusal(ck, "refuse-hidden_act-gelu", dict(cfgA, hidden_act="gelu"), TA, ["hidden_act"],
            " (ASSUMED: docs/hf.md refuses hidden_act other than silu)")
    refusal(ck, "refuse-olmo3-layer_types-length", dict(cfgD, layer_types=["sliding_attention"] * 3), TD,
            ["layer_types"], " (transformers' layer_type_validation)")

    # LayerRoute on OLMo bases, and export of OLMo-layout dense checkpoints
    check_layerroute_olmo(ck, cfgA, TA, cfgD)
    check_export_olmo(ck)

    dt_ = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt_))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


def _pin(ck, cpu):
    """run lol under `taskset -c CPU` (when taskset exists)"""
    from shutil import which
    if which("taskset") is None:
        return

    def run(args, expect_rc=0):
        lol = ck.lol
        env = dict(os.environ, OMP_NUM_THREADS="1")
        cmd = ["taskset", "-c", str(cpu), lol] + [str(a) for a in args]
        t = time.time()
        r = subprocess.run(cmd, cwd=ck.work, capture_output=True, text=True, env=env)
        ck.lol_seconds += time.time() - t
        ck.calls += 1
        ck.last_cmd = "cd %s && %s" % (ck.work, " ".join(q2._q(c_) for c_ in cmd))
        if expect_rc is not None and r.returncode != expect_rc:
            ck.fail("exit status %d (expected %d): %s" % (r.returncode, expect_rc, r.stderr.strip()[-600:]))
        return r
    ck.run = run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny OLMo 2 / OLMo 3 folders, run lol, compare with the reference")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    c.add_argument("--quiet", action="store_true", help="print only disagreements and the summary")
    c.add_argument("--cpu", type=int, default=None, help="run lol under taskset -c CPU")
    sub.add_parser("selftest", help="the reference's own checks (no lol)")
    a = ap.parse_args()
    if a.cmd == "selftest":
        bad = selftest()
        for b in bad:
            print("FAIL " + b)
        print("selftest: %d failures" % len(bad))
        sys.exit(1 if bad else 0)
    sys.exit(check(a.lol, a.work, not a.quiet, a.cpu))


if __name__ == "__main__":
    main()
