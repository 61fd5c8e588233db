#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face Phi-1 / Phi-1.5 / Phi-2 (PhiForCausalLM,
model_type "phi", transformers' native layout) in pure Python (stdlib only), and a check that
`lol hf ppl|generate|info` and `lol export --hf` agree with it on tiny Phi folders written here.

  python3 tests/reference/phi_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/phi_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_phi.py / configuration_phi.py / modeling_rope_utils.py as
remembered (the 4.37 code phi-1 / phi-1_5 / phi-2 were converted for, the 4.4x rewrite that
moved the rotary embedding into PhiModel and the 5.x rope_parameters config), docs/hf.md
("Phi-1, Phi-1.5 and Phi-2", "Commands", "RoPE scaling", "Cached decoding", "Export"),
docs/baselines.md (the dense-config fields) and the brief. It imports qwen2_reference.py (the
float32 / bfloat16 rounding, log_softmax / argmax / top-2 gap, Checker, compare_greedy,
parse_ids), gpt2_reference.py (the GPT-2-style byte-level tokenizer: Phi uses GPT-2's / CodeGen's
tokenizer with <|endoftext|> as bos / eos), gpt_neox_reference.py (the GELU forms, the float32
RoPE tables, rotate-half, yarn's frequencies, LayerNorm, f16 / storage rounding, windows /
mean_ce) and safetensors_io (write_st / read_st), all unchanged; the Phi model, its config
reading, the weights, the folder writer, the cases and the comparisons are this file's.

Rules of the reference (float64 on the stored, float16- / bfloat16-rounded weights; the RoPE
tables in float32 as transformers builds them):
  x_0[t] = embed_tokens[id_t]   (no position embedding; positions 0.. within each forward call /
      hf ppl window)
  per layer (PhiDecoderLayer): ONE LayerNorm feeds both branches (parallel block):
      n = input_layernorm(x)
      y = x + dense(attn(n)) + fc2(act(fc1(n)))
  attention (PhiAttention): head_dim hd = hidden_size / num_attention_heads, H query heads and
      KV = num_key_value_heads (null / absent: H) key / value heads;
      q = n Wq^T + bq [H hd], k = n Wk^T + bk [KV hd], v = n Wv^T + bv [KV hd] (q_proj, k_proj,
      v_proj: nn.Linear with bias), head j = rows j*hd .. (j+1)*hd - 1;
      query head h attends with key / value head h // (H / KV) (repeat_kv: kv head j serves
      query heads j*G .. j*G + G - 1);
      RoPE on the first rd = int(hd * partial_rotary_factor) dims of each q and k head (the
      other hd - rd pass unchanged), rotate-half inside them: for i < rd/2 the pair
      (i, i + rd/2) turns by position * inv_freq[i];
      inv_freq[i] = float32(1 / float32(base ** float32(2i / rd))) (exponents over rd),
      angle = float32(position * inv_freq[i]), cos / sin in float32;
      scores = q.k * hd^-1/2, causal softmax; o = heads concatenated; attn = o Wdense^T + bdense
  MLP (PhiMLP): fc2(act(fc1(n))), both nn.Linear with bias.
  logits = final_layernorm(x_L) lm_head.weight^T + lm_head.bias   (lm_head: nn.Linear(bias=True))
  LayerNorm (nn.LayerNorm): (x - mean) / sqrt(var + eps) * w + b, var the biased (1/n) variance,
      eps layer_norm_eps.
  act (hidden_act): "gelu_new" (default) / "gelu_pytorch_tanh" = 0.5 x (1 + tanh(sqrt(2/pi)
      (x + 0.044715 x^3))); "gelu_fast" the same with the constant 0.7978845608; "gelu" =
      0.5 x (1 + erf(x / sqrt 2)).
  RoPE scaling (rope_scaling, or rope_parameters' rope_type; the rope init functions take
      dim = rd): "linear": inv_freq / factor (float32); "dynamic": plain RoPE within
      max_position_embeddings (every window / generation here stays within it); "yarn": as
      _compute_yarn_parameters with dim = rd, cos / sin times 0.1 ln(factor) + 1.
  PhiConfig defaults: num_key_value_heads None (= heads), hidden_act "gelu_new",
      layer_norm_eps 1e-5, rope_theta 10000, rope_scaling None, partial_rotary_factor 0.5,
      qk_layernorm false, tie_word_embeddings false, bos 1, eos 2.
  Keys: 4.x partial_rotary_factor / rope_theta / rope_scaling at the top level; 5.x
      rope_parameters {rope_type, rope_theta, partial_rotary_factor, ...}.
  Tensors: model.embed_tokens.weight, model.layers.{i}.input_layernorm.{weight,bias},
      model.layers.{i}.self_attn.{q_proj,k_proj,v_proj,dense}.{weight,bias},
      model.layers.{i}.mlp.{fc1,fc2}.{weight,bias}, model.final_layernorm.{weight,bias},
      lm_head.weight, lm_head.bias.
  num_parameters() = 2 V d + V + L (2d + (H + 2 KV) hd (d + 1) + d (H hd + 1) + 2 d F + F + d) + 2d
      (phi-2: 2,779,683,840).

Cases (vocab_size 300 > the tokenizer's 259 ids, max_position_embeddings 64, GPT-2's
byte-level tokenizer as gpt2_reference writes it: ids 0..255 bytes, merges "Ġt" 256 / "he"
257, <|endoftext|> 258 = bos / eos in config.json as phi-2's 50256; a text of 256 tokens):
  A phi2-like: phi-2's config.json keys (transformers 4.37: partial_rotary_factor 0.4,
    rope_theta 10000, rope_scaling null, hidden_act gelu_new, layer_norm_eps 1e-5,
    qk_layernorm false, num_key_value_heads = heads, tie false, resid/embd pdrop), hidden 40,
    4 heads (head_dim 10 -> int(4.0) = 4 rotary dims), 3 layers, intermediate 128;
    embeddings of std 0.02 (layer 0's LayerNorm then tells eps 1e-5 from 1e-6).
    ppl float64 --context 0 (= 64) and 9, float32 64; generate float64 (3 + 30, 40 + 20),
    float32 (40 + 20), --prompt text, --max-new 30 after 50 ids (reduced to 14); info --check.
  B phi-v5-gqa-gelu: transformers 5 layout: "rope_parameters": {"rope_type": "default",
    "rope_theta": 4096, "partial_rotary_factor": 0.25} (not the default 0.5: a reader that
    ignored it would rotate 8 dims), no top-level rope keys, "dtype", 6 heads / 2 key-value
    heads (G = 3), hidden 96 (head_dim 16 -> 4 rotary dims), exact gelu, layer_norm_eps 1e-3,
    2 layers, intermediate 96. ppl float64 0 / 9, float32;
    generate float64 (5 + 30, 40 + 22) / float32; info --check.
  C phi-linear-partial-gqa: 4.4x keys, rope_scaling {"type": "linear", "factor": 2.0},
    partial_rotary_factor 0.5, hidden 32, 4 heads / 2 kv heads (head_dim 8, 4 rotary dims),
    gelu_fast, 2 layers. ppl float64 0 / 9, float32; generate float64 / float32; info.
    phi-dynamic-partial: A's weights with {"rope_type": "dynamic", "factor": 2.0}: plain RoPE.
    phi-linear-mha-partial: A's weights with {"type": "linear", "factor": 2.0}.
    phi-yarn-partial: A's weights with {"rope_type": "yarn", "factor": 4.0} (dim = rd).
    phi-v5-dynamic-gqa: B's weights with rope_parameters {"rope_type": "dynamic", "factor": 2,
    "rope_theta": 4096, "partial_rotary_factor": 0.25}.
  Key layouts (ppl float64): phi-defaults-only-sizes (C's weights, config.json with only
    architectures / model_type / the six sizes: PhiConfig's defaults: 0.5 -> 4 rotary dims,
    10000, gelu_new, 1e-5, kv = heads (C's k/v weights are stored for 2 heads, so this folder
    gets k_proj / v_proj rows for 4 heads: C's rows repeated); hf info --check; stop tokens
    are the default eos 2 (and the tokenizer's 258), ASSUMED), phi-v5-linear-rope_parameters
    (C's model with only rope_parameters {"rope_type": "linear", "factor": 2, "rope_theta":
    10000, "partial_rotary_factor": 0.5}), phi-v5-rope_scaling-key (B's model with
    rope_scaling {"rope_type": "default", "rope_theta": 4096, "partial_rotary_factor": 0.25}
    instead of rope_parameters), phi-partial-0.48-truncates (A with 0.48: int(4.8) = 4;
    rounding would give 5, odd), phi-kv-null (A with "num_key_value_heads": null).
  D phi-f16-tanh: F16 storage, gelu_pytorch_tanh, 4 heads (hd 10, partial 0.4), 2 layers,
    torch_dtype float16: ppl float64, generate float64, info --check.
  E phi-bf16-gqa: BF16 storage, 4 heads / 1 kv head (multi-query), exact gelu, partial 0.5 on
    hd 8: ppl float64 (on the bf16-rounded weights), float32, bfloat16; generate float64.
  phi-stop-at-eos: a folder whose greedy continuation reaches <|endoftext|> 258, run without
    --no-stop: the ids up to and including it.
  hf info --check (A, B, C, D, E, defaults): exit 0, names PhiForCausalLM, "all tensors
    present", parameters = num_parameters(); ASSUMED from lol's summary format: "rotary dims
    rd of hd", rope_theta / layer_norm_eps on the "positions" line, the "rope scaling" line,
    the "vocab" line not tied, the heads line with the kv heads, no RMSNorm / gate claims.
  Export (check_export): dense models of Phi's layout ("norm": "layernorm", "mlp": "plain",
    biases, "parallel_residual", "shared_input_norm", "lm_head_bias") trained 3 steps on a
    byte corpus (4 heads / 4 kv, partial 0.4 on hd 10, gelu_pytorch_tanh, rope_theta 10000;
    6 heads / 2 kv, partial 0.5 on hd 8, exact gelu, rope_theta 4096, norm_eps 1e-3),
    `lol export --hf` with the default --arch: PhiForCausalLM, config.json read with PhiConfig's
    rules gives the trained model, the tensors are the checkpoint's renamed bit for bit
    (o_proj -> dense, up_proj -> fc1, down_proj -> fc2, model.norm -> model.final_layernorm),
    and hf ppl float64 of the export equals this reference on the exported tensors. Such a
    model without o_bias, without qkv_bias, or without mlp_bias and lm_head_bias exports with
    zero biases of those kinds (the same function; hf ppl float64 of the export equals this
    reference on its tensors). (Changed by the main developer after the review: the reviewer's
    version expected those exports to be refused, which lol did then; lol now writes zeros, as
    it does for Qwen2's q/k/v biases, and the docs say so.) Refused (exit 2 naming the field, no
    --out folder left): --arch phi of a GPT-NeoX-layout model (its own post_attention_layernorm:
    shared_input_norm false).
  Refusals (hf ppl, exit 2, stderr naming the field / tensor): qk_layernorm true,
    tie_word_embeddings true, model_type "phi-msft", partial_rotary_factor 0.3 on hd 10 (3
    rotary dims, odd), 0.1 (1 dim), top-level rope_theta 10000 with rope_parameters.rope_theta
    500, top-level partial_rotary_factor 0.4 with rope_parameters' 0.8, hidden_act relu,
    quantization_config, num_key_value_heads 4 with 6 heads, a missing intermediate_size,
    rope_scaling longrope; tensors: missing lm_head.bias, Llama's model.norm.weight instead of
    model.final_layernorm.weight, an extra post_attention_layernorm.weight / .bias, k_proj.weight
    [H hd, d] for 2 kv heads, v_proj.bias [H hd], Llama's self_attn.o_proj instead of dense,
    mlp.up_proj instead of fc1, a missing mlp.fc2.bias, lm_head.bias of vocab - 1.
Tolerances: float64 summed loss / bits per byte 1e-8 relative, perplexity 1e-7 (the RoPE tables
are float32; one float32 ulp of noise on every entry moves the loss by up to ~1e-9, selftest
fails above 5e-9; float64 tables instead move it by 1e-10 .. 2e-9, which this check therefore
cannot tell from transformers' float32 tables); float32 1e-6; bfloat16 5e-3; greedy ids exact (after a float32 near-tie,
top-2 gap < 1e-4 of max |logit|, the rest of that continuation is not compared, noted). At the
time of writing lol was 1e-12 .. 1.1e-9 away in float64 (the float32 RoPE tables: ulps of
torch-vs-libm sin / cos), 3e-9 .. 8e-9 in float32 and 3.3e-4 in bfloat16.

`selftest` (no lol) checks cached greedy decoding = recomputed full forward, the GELU forms,
param counts (phi-2's 2,779,683,840), config reading of the key layouts, the RoPE rule against
a direct complex rotation, and the sensitivity: each alternative reading (two norms: the MLP on
a second, default LayerNorm; the MLP on the un-normalized x; sequential residual; RoPE on all
head dims, on the last rd dims, interleaved pairs, exponents over head_dim, no RoPE, the default
share 0.5 / base 10000 instead of the given one; GQA with kv head h mod KV (interleaved) instead
of h // G; no lm_head bias; no q/k/v / dense biases, no MLP biases; the other GELU form, relu;
no scale / 1/hd scale; LayerNorm without mean / bias, unbiased variance, eps outside the sqrt,
another eps; linear factor ignored / multiplied; yarn over head_dim / without the attention
factor; dynamic read as linear) moves each case's float64 loss by > 20 x the float64
tolerance (the smallest at the time of writing: the other GELU form on E, 2.8e-7; LayerNorm eps
outside the sqrt / eps 1e-6 on C, 7.6e-7; a selftest run takes about 4 minutes), and the greedy ids check() compares change under each in at least one case (the
eps / GELU-form readings may not), as they do under cached decoding that puts every new token
at position len(prompt) or restarts the positions at 0. On a disagreement check() prints which
alternative reading, if any, lol matches.

ASSUMED (where neither the brief nor transformers decides):
  * hf ppl windows: non-overlapping windows of --context tokens, positions restart at 0 in each
    window, no BOS (docs/hf.md); --context 0 -> min(512, max_position_embeddings).
  * RoPE bases / factors are chosen so the float32 pow / division is exact (10000, 4096 with
    rd 4; factor 2), so torch's powf and libm cannot differ.
  * yarn with partial rotary uses dim = rd (modeling_rope_utils reads partial_rotary_factor);
    no original_max_position_embeddings key is given. transformers 4.37-4.44's PhiConfig
    accepted only linear / dynamic; docs/hf.md accepts the Llama family's types.
  * PhiConfig has no head_dim key; none is written (head_dim = hidden_size / heads).
  * hf info's summary lines are checked in the form lol printed them when this was written
    ("heads 4 query, 4 key/value, head_dim 10", "rotary dims 4 of 10 per head ...",
    "positions 64, rope_theta 10000, layer_norm_eps 1e-05", "rope scaling none", "vocab 300
    (separate lm_head)" (no "tied"), "block parallel (... one input_layernorm) LayerNorms ...
    MLP gelu_pytorch_tanh ... biases on q/k/v_proj and dense, lm_head with a bias"); docs/hf.md
    does not fix the format.
  * Without eos_token_id in config.json, PhiConfig's default 2 is an EOS id besides the
    tokenizer's eos_token (258): hf info's "stop tokens" line lists both.
  * A rope_scaling object that carries rope_theta / partial_rotary_factor counts like
    rope_parameters (transformers 5 reads rope_scaling as rope_parameters).
  * Refusal messages name the field or tensor (any one of the listed needles).
  * Export: the exported config.json is judged by what PhiConfig would read from it (absent keys
    -> its defaults); gelu_new / gelu_fast would be accepted for a gelu_pytorch_tanh model.
    A model without shared_input_norm (its own post_attention_layernorm) cannot be written as
    PhiForCausalLM: --arch phi must refuse it (exit 2, naming shared_input_norm or
    post_attention_layernorm).
"""
import argparse
import json
import math
import operator
import os
import random
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402,F401
from qwen2_reference import Checker, argmax_low, bf16, compare_greedy, f32, log_softmax, parse_ids, top2_gap  # noqa
from safetensors_io import read_st, write_st  # noqa: E402
import gpt2_reference as g2  # noqa: E402  (the tokenizer)
import gpt_neox_reference as nx  # noqa: E402  (GELU forms, RoPE tables, LayerNorm, storage rounding)

_mul = operator.mul
DROP = object()
DIAGNOSE = [6]
TOL = {"float64": 1e-8, "float32": 1e-6, "bfloat16": 5e-3}

TEXT = g2.TEXT
encode = g2.encode
token_bytes = g2.token_bytes
EOT = g2.EOT  # 258, <|endoftext|>

gelu_tanh, gelu_fast, gelu_exact, relu = nx.gelu_tanh, nx.gelu_fast, nx.gelu_exact, nx.relu
ACTS = {"gelu": gelu_exact, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "gelu_fast": gelu_fast,
        "relu": relu}
inv_freq_f32, yarn_inv_freq, rope_tables, rope_apply = nx.inv_freq_f32, nx.yarn_inv_freq, nx.rope_tables, nx.rope_apply
layernorm, f16, store, windows, mean_ce = nx.layernorm, nx.f16, nx.store, nx.windows, nx.mean_ce


def matvec(W, x):
    return [sum(map(_mul, row, x)) for row in W]


# ---------------------------------------------------------------- config (PhiConfig)
def phi_params(cfg):
    """the model PhiConfig describes (PhiConfig's defaults for absent keys)"""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    kv = cfg.get("num_key_value_heads")
    if kv is None:
        kv = H
    # transformers 5 reads a rope_scaling object as rope_parameters; lol refuses disagreeing
    # values, so any one of them decides
    rp = dict(cfg.get("rope_scaling") or {}, **(cfg.get("rope_parameters") or {}))
    share = cfg.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.5))
    base = cfg.get("rope_theta", rp.get("rope_theta", 10000.0))
    rtype = rp.get("rope_type", rp.get("type", "default"))
    scaling = None if rtype == "default" else (rtype, rp.get("factor"))
    return {"V": cfg["vocab_size"], "d": d, "L": cfg["num_hidden_layers"], "H": H, "KV": kv, "hd": hd,
            "P": cfg["max_position_embeddings"], "F": cfg["intermediate_size"],
            "rd": int(hd * share), "base": float(base), "scaling": scaling,
            "act": cfg.get("hidden_act", "gelu_new"), "eps": cfg.get("layer_norm_eps", 1e-5),
            "tied": cfg.get("tie_word_embeddings", False), "qk_ln": cfg.get("qk_layernorm", False),
            "bos": cfg.get("bos_token_id", 1), "eos": cfg.get("eos_token_id", 2)}


def phi_config(**kw):
    """phi-2's config.json (as transformers 4.37 saved it), tiny sizes"""
    c = {"_name_or_path": "microsoft/phi-2", "architectures": ["PhiForCausalLM"], "attention_dropout": 0.0,
         "bos_token_id": EOT, "embd_pdrop": 0.0, "eos_token_id": EOT, "hidden_act": "gelu_new",
         "hidden_size": 40, "initializer_range": 0.02, "intermediate_size": 128, "layer_norm_eps": 1e-05,
         "max_position_embeddings": 64, "model_type": "phi", "num_attention_heads": 4,
         "num_hidden_layers": 3, "num_key_value_heads": 4, "partial_rotary_factor": 0.4,
         "qk_layernorm": False, "resid_pdrop": 0.1, "rope_scaling": None, "rope_theta": 10000.0,
         "tie_word_embeddings": False, "torch_dtype": "float32", "transformers_version": "4.37.0",
         "use_cache": True, "vocab_size": 300}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def param_count(cfg):
    """transformers' num_parameters()"""
    p = phi_params(cfg)
    d, F, H, KV, hd = p["d"], p["F"], p["H"], p["KV"], p["hd"]
    per = 2 * d + (H + 2 * KV) * hd * (d + 1) + d * (H * hd + 1) + 2 * d * F + F + d
    return 2 * p["V"] * d + p["V"] + p["L"] * per + 2 * d


# ---------------------------------------------------------------- weights (PhiForCausalLM names)
def phi_weights(cfg, seed, emb_std=0.5, qk=2.5, fc=2.5, lnf_std=0.3, head_bias=0.5, head_std=0.3):
    """name -> (shape, flat float32-rounded values). LayerNorm weights N(1, 0.3), biases N(0, 0.3);
    q / k rows larger than v's (attention far from uniform); MLP pre-activations of a few units;
    lm_head.bias N(0, head_bias)."""
    rng = random.Random(seed)
    p = phi_params(cfg)
    V, d, L, F, H, KV, hd = p["V"], p["d"], p["L"], p["F"], p["H"], p["KV"], p["hd"]
    T = {}

    def put(name, shape, sd, mean=0.0):
        n = 1
        for s_ in shape:
            n *= s_
        T[name] = (list(shape), [f32(rng.gauss(mean, sd)) for _ in range(n)])

    put("model.embed_tokens.weight", [V, d], emb_std)
    for i in range(L):
        pre = "model.layers.%d." % i
        put(pre + "input_layernorm.weight", [d], 0.3, 1.0)
        put(pre + "input_layernorm.bias", [d], 0.3)
        put(pre + "self_attn.q_proj.weight", [H * hd, d], qk / math.sqrt(d))
        put(pre + "self_attn.q_proj.bias", [H * hd], 0.3)
        put(pre + "self_attn.k_proj.weight", [KV * hd, d], qk / math.sqrt(d))
        put(pre + "self_attn.k_proj.bias", [KV * hd], 0.3)
        put(pre + "self_attn.v_proj.weight", [KV * hd, d], 1.2 / math.sqrt(d))
        put(pre + "self_attn.v_proj.bias", [KV * hd], 0.3)
        put(pre + "self_attn.dense.weight", [d, H * hd], 1.0 / math.sqrt(H * hd))
        put(pre + "self_attn.dense.bias", [d], 0.3)
        put(pre + "mlp.fc1.weight", [F, d], fc / math.sqrt(d))
        put(pre + "mlp.fc1.bias", [F], 0.5)
        put(pre + "mlp.fc2.weight", [d, F], 1.2 / math.sqrt(F))
        put(pre + "mlp.fc2.bias", [d], 0.3)
    put("model.final_layernorm.weight", [d], lnf_std, 1.0)
    put("model.final_layernorm.bias", [d], 0.3)
    put("lm_head.weight", [V, d], head_std)
    put("lm_head.bias", [V], head_bias)
    return T


def write_folder(folder, cfg, T, dtype="F32"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    gc = {"_from_model_config": True}
    for k in ("bos_token_id", "eos_token_id"):
        if k in cfg:
            gc[k] = cfg[k]
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(gc, f)
    g2.write_tokenizer(folder, cfg.get("max_position_embeddings", 64))
    write_st(os.path.join(folder, "model.safetensors"),
             {k: (v[0], v[1], v[2] if len(v) > 2 else dtype) for k, v in T.items()}, {"format": "pt"})


# ---------------------------------------------------------------- the model
class PhiRef:
    """PhiForCausalLM in float64. Keyword arguments select alternative readings (sensitivity
    checks and the diagnosis of a disagreement)."""

    def __init__(self, cfg, T, norms="shared", residual="parallel", gqa="block", rd=None, rope_layout="half",
                 expo="rd", base=None, scaling="cfg", yarn_dim=None, yarn_att=True, rope_f64=False,
                 attn_bias=True, mlp_bias=True, head_bias=True, act=None, attn_scale="hf", ln_center=True,
                 ln_bias=True, ln_unbiased=False, ln_eps_out=False, eps=None, decode_pos="hf", ulp_noise=None):
        p = phi_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.KV, self.V, self.P, self.hd = p["d"], p["L"], p["H"], p["KV"], p["V"], p["P"], p["hd"]
        self.G = self.H // self.KV
        self.norms, self.residual, self.gqa = norms, residual, gqa
        self.rd = p["rd"] if rd is None else rd
        self.rope_layout = rope_layout
        self.eps = p["eps"] if eps is None else eps
        self.ln_kw = {"center": ln_center, "bias": ln_bias, "unbiased": ln_unbiased, "eps_out": ln_eps_out}
        self.act = ACTS[act or p["act"]]
        self.scale = {"hf": self.hd ** -0.5, "none": 1.0, "1/hd": 1.0 / self.hd}[attn_scale]
        self.decode_pos = decode_pos
        b = p["base"] if base is None else base
        sc = p["scaling"] if scaling == "cfg" else scaling
        ed = self.hd if expo == "hd" else None
        att = 1.0
        if sc is None or sc[0] == "dynamic":
            inv = inv_freq_f32(b, self.rd, ed)
        elif sc[0] == "linear":
            inv = [f32(v / f32(sc[1])) for v in inv_freq_f32(b, self.rd, ed)]
        elif sc[0] == "yarn":
            inv, att = yarn_inv_freq(b, self.rd, sc[1], self.P, yarn_dim)
            if not yarn_att:
                att = 1.0
        else:
            raise ValueError("rope type %s not in the reference" % (sc,))
        self.cos, self.sin = rope_tables(inv, self.P + 8, att, rope_f64)
        if ulp_noise is not None:  # selftest: every table entry moved by up to one float32 ulp
            rng = random.Random(ulp_noise)

            def nudge(v):
                if v == 0.0:
                    return v
                u = 2.0 ** (math.frexp(v)[1] - 24)
                return v + rng.choice((-u, 0.0, u))
            self.cos = [[nudge(v) for v in row] for row in self.cos]
            self.sin = [[nudge(v) for v in row] for row in self.sin]
        d, F, H, KV, hd = self.d, p["F"], self.H, self.KV, self.hd

        def rows(name, shape=None):
            s, v = T[name][0], T[name][1]
            if shape is not None:
                assert list(s) == list(shape), (name, s, shape)
            return [list(v[i * s[1]:(i + 1) * s[1]]) for i in range(s[0])]

        def lin(name, n_out, n_in, use_bias):
            M = rows(name + ".weight", [n_out, n_in])
            bb = list(T[name + ".bias"][1]) if use_bias else [0.0] * n_out
            assert len(bb) == n_out, name
            return M, bb

        def ln(name):
            return list(T[name + ".weight"][1]), list(T[name + ".bias"][1])
        self.embed = rows("model.embed_tokens.weight", [self.V, d])
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            self.layers.append({"ln": ln(pre + "input_layernorm"),
                                "q": lin(pre + "self_attn.q_proj", H * hd, d, attn_bias),
                                "k": lin(pre + "self_attn.k_proj", KV * hd, d, attn_bias),
                                "v": lin(pre + "self_attn.v_proj", KV * hd, d, attn_bias),
                                "dense": lin(pre + "self_attn.dense", d, H * hd, attn_bias),
                                "fc1": lin(pre + "mlp.fc1", F, d, mlp_bias),
                                "fc2": lin(pre + "mlp.fc2", d, F, mlp_bias)})
        self.lnf = ln("model.final_layernorm")
        self.lm_head = rows("lm_head.weight", [self.V, d])
        self.lm_bias = list(T["lm_head.bias"][1]) if head_bias else [0.0] * self.V
        assert len(self.lm_bias) == self.V
        self.unit_ln = ([1.0] * d, [0.0] * d)
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps, **self.ln_kw)

    def _lin(self, Mb, x):
        M, b = Mb
        return [s + bb for s, bb in zip(matvec(M, x), b)]

    def _mlp(self, ly, m):
        f = [self.act(v) for v in self._lin(ly["fc1"], m)]
        return self._lin(ly["fc2"], f)

    def _kvhead(self, h):
        return h // self.G if self.gqa == "block" else h % self.KV

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, KV, hd, rd = self.H, self.KV, self.hd, self.rd
        out = []
        for t, x in enumerate(X):
            pos = pos0 + t
            n = self._ln(x, ly["ln"])
            q, k, v = self._lin(ly["q"], n), self._lin(ly["k"], n), self._lin(ly["v"], n)
            c, s_ = self.cos[pos], self.sin[pos]
            qh = [rope_apply(q[j * hd:(j + 1) * hd], c, s_, rd, self.rope_layout) for j in range(H)]
            kh = [rope_apply(k[j * hd:(j + 1) * hd], c, s_, rd, self.rope_layout) for j in range(KV)]
            vh = [v[j * hd:(j + 1) * hd] for j in range(KV)]
            cache["k"].append(kh)
            cache["v"].append(vh)
            att = []
            for h in range(H):
                g = self._kvhead(h)
                qa = qh[h]
                sc = [sum(map(_mul, qa, kk[g])) * self.scale for kk in cache["k"]]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for w, vv in zip(e, cache["v"]):
                    w /= tot
                    o = [oj + w * vj for oj, vj in zip(o, vv[g])]
                att.extend(o)
            attn = self._lin(ly["dense"], att)
            if self.residual == "sequential":  # h = x + attn(ln x); y = h + mlp(ln h) (same LayerNorm)
                hmid = [a + x_ for a, x_ in zip(attn, x)]
                mo = self._mlp(ly, self._ln(hmid, ly["ln"]))
                out.append([m_ + h_ for m_, h_ in zip(mo, hmid)])
                continue
            if self.norms == "shared":
                m_in = n
            elif self.norms == "second-default":  # a second LayerNorm, weight 1 / bias 0
                m_in = self._ln(x, self.unit_ln)
            else:  # "none": the MLP on the block input without a norm
                m_in = x
            mo = self._mlp(ly, m_in)
            out.append([m_ + a + x_ for m_, a, x_ in zip(mo, attn, x)])
        return out

    def head(self, h):
        return [s + b for s, b in zip(matvec(self.lm_head, self._ln(h, self.lnf)), self.lm_bias)]

    def prefill(self, tokens):
        key = tuple(tokens)
        if key in self.memo:
            return self.memo[key]
        X = [list(self.embed[t]) for t in tokens]
        caches = []
        for i in range(self.L):
            c = {"k": [], "v": []}
            X = self.block(i, X, 0, c)
            caches.append(c)
        r = ([self.head(h) for h in X], caches)
        self.memo[key] = r
        return r

    def greedy(self, prompt, n):
        """KV-cached greedy decoding (selftest: = recomputing the full forward each step)"""
        logits, caches = self.prefill(prompt)
        caches = [{"k": list(c["k"]), "v": list(c["v"])} for c in caches]
        toks, gaps = [], []
        z = logits[-1]
        pos = len(prompt)
        for _ in range(n):
            t = argmax_low(z)
            toks.append(t)
            gaps.append(top2_gap(z) / max(1.0, max(abs(v) for v in z)))
            if len(toks) == n:
                break
            p_ = {"hf": pos, "stuck": len(prompt), "restart": pos - len(prompt)}[self.decode_pos]
            h = list(self.embed[t])
            for i in range(self.L):
                h = self.block(i, [h], p_, caches[i])[0]
            z = self.head(h)
            pos += 1
        return toks, gaps


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = phi_params(cfg)
    hd, rd, H, KV = p["hd"], p["rd"], p["H"], p["KV"]
    sc = p["scaling"]
    other = "gelu" if ACTS[p["act"]] is not gelu_exact else "gelu_new"
    other_eps = 1e-6 if p["eps"] != 1e-6 else 1e-5
    out = [("two norms: the MLP on a second, default LayerNorm (weight 1, bias 0)", {"norms": "second-default"}),
           ("the MLP on the un-normalized block input", {"norms": "none"}),
           ("sequential residual (MLP on input_layernorm(x + attn))", {"residual": "sequential"}),
           ("RoPE pairs interleaved (2i, 2i+1), GPT-J style", {"rope_layout": "interleaved"}),
           ("no RoPE", {"rope_layout": "none"})]
    if rd < hd:
        if not (sc is not None and sc[0] == "yarn"):
            out.append(("inv_freq exponents over head_dim, not the rotary dims", {"expo": "hd"}))
        out += [("RoPE on all head dims (partial_rotary_factor ignored)", {"rd": hd}),
                ("RoPE on the last rotary dims", {"rope_layout": "last"})]
    dflt = int(hd * 0.5)
    if rd != dflt and dflt % 2 == 0 and dflt >= 2:
        out.append(("partial_rotary_factor 0.5 (the default) instead of the given one", {"rd": dflt}))
    if p["base"] != 10000.0:
        out.append(("RoPE base 10000 (the default) instead of %g" % p["base"], {"base": 10000.0}))
    if KV < H and KV > 1:
        out.append(("GQA: query head h uses kv head h mod KV (interleaved), not h // G", {"gqa": "interleaved"}))
    if sc is not None and sc[0] == "linear":
        out += [("linear scaling ignored", {"scaling": None}),
                ("linear factor multiplied instead of divided", {"scaling": ("linear", 1.0 / sc[1])})]
    if sc is not None and sc[0] == "yarn":
        out += [("yarn scaling ignored", {"scaling": None}),
                ("yarn correction range over head_dim, not the rotary dims", {"yarn_dim": hd}),
                ("yarn without the attention factor", {"yarn_att": False})]
    if sc is not None and sc[0] == "dynamic":
        out.append(("dynamic read as linear (inv_freq / factor)", {"scaling": ("linear", sc[1])}))
    out += [("no lm_head bias", {"head_bias": False}),
            ("no q/k/v / dense biases", {"attn_bias": False}),
            ("no MLP biases", {"mlp_bias": False}),
            ("activation %s" % other, {"act": other}),
            ("activation relu", {"act": "relu"}),
            ("no attention scale", {"attn_scale": "none"}),
            ("attention scale 1/head_dim", {"attn_scale": "1/hd"}),
            ("LayerNorm without the mean subtraction", {"ln_center": False}),
            ("LayerNorm without bias", {"ln_bias": False}),
            ("LayerNorm with the unbiased (n-1) variance", {"ln_unbiased": True}),
            ("LayerNorm eps outside the sqrt", {"ln_eps_out": True}),
            ("layer_norm_eps %g" % other_eps, {"eps": other_eps})]
    if p["eps"] != 1e-5:
        out.append(("layer_norm_eps 1e-5 (the default) instead of %g" % p["eps"], {"eps": 1e-5}))
    return out


DECODE_ALTS = [("cached decoding: every new token at position len(prompt)", {"decode_pos": "stuck"}),
               ("cached decoding: new tokens' positions restart at 0", {"decode_pos": "restart"})]
WEAK = ("activation gelu", "layer_norm_eps", "LayerNorm with the unbiased", "LayerNorm eps outside",
        "yarn without", "RoPE tables")


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, seed, phi_weights keyword arguments)"""
    A = phi_config()
    B = phi_config(_name_or_path=DROP, hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                   num_hidden_layers=2, intermediate_size=96, partial_rotary_factor=DROP, rope_theta=DROP,
                   rope_scaling=DROP, torch_dtype=DROP, dtype="float32", transformers_version="5.0.0",
                   hidden_act="gelu", layer_norm_eps=1e-3,
                   rope_parameters={"rope_type": "default", "rope_theta": 4096.0, "partial_rotary_factor": 0.25})
    C = phi_config(_name_or_path=DROP, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                   num_hidden_layers=2, intermediate_size=64, partial_rotary_factor=0.5, hidden_act="gelu_fast",
                   rope_scaling={"type": "linear", "factor": 2.0}, transformers_version="4.45.0")
    D = phi_config(_name_or_path=DROP, num_hidden_layers=2, hidden_act="gelu_pytorch_tanh", torch_dtype="float16",
                   intermediate_size=96)
    E = phi_config(_name_or_path=DROP, hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
                   num_hidden_layers=2, intermediate_size=64, partial_rotary_factor=0.5, hidden_act="gelu",
                   torch_dtype="bfloat16")
    return {"A": (A, 707, {"emb_std": 0.02}), "B": (B, 712, {}), "C": (C, 703, {}),
            "D": (D, 704, {"emb_std": 0.3}), "E": (E, 705, {"emb_std": 0.3})}


STORAGE = {"D": "F16", "E": "BF16"}


def variant_table():
    """RoPE-scaling configs on the weights of A (multi-head, 4 of 10 dims) / B (GQA, 4 of 8)"""
    A, B = case_table()["A"][0], case_table()["B"][0]
    return {"phi-dynamic-partial": (dict(A, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "A"),
            "phi-linear-mha-partial": (dict(A, rope_scaling={"type": "linear", "factor": 2.0}), "A"),
            "phi-yarn-partial": (dict(A, rope_scaling={"rope_type": "yarn", "factor": 4.0}), "A"),
            "phi-v5-dynamic-gqa": (dict(B, rope_parameters={"rope_type": "dynamic", "factor": 2.0,
                                                            "rope_theta": 4096.0, "partial_rotary_factor": 0.25}),
                                   "B")}


def repeat_kv_weights(T, cfg_from, n_rep):
    """k_proj / v_proj rows of each kv head repeated n_rep times (head j -> heads j*n_rep ..): the
    same model with n_rep times the kv heads"""
    p = phi_params(cfg_from)
    hd, d = p["hd"], p["d"]
    out = dict(T)
    for k, (sh, v) in T.items():
        if re.search(r"self_attn\.[kv]_proj\.", k):
            if len(sh) == 2:
                blocks = [v[j * hd * d:(j + 1) * hd * d] for j in range(sh[0] // hd)]
                out[k] = ([sh[0] * n_rep, sh[1]], [x for b in blocks for _ in range(n_rep) for x in b])
            else:
                blocks = [v[j * hd:(j + 1) * hd] for j in range(sh[0] // hd)]
                out[k] = ([sh[0] * n_rep], [x for b in blocks for _ in range(n_rep) for x in b])
    return out


def key_variants():
    """other config.json layouts: tag -> (config, the case whose weights it uses, weight transform)"""
    tab = case_table()
    A, B, C = tab["A"][0], tab["B"][0], tab["C"][0]
    required = ("architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
                "num_hidden_layers", "num_attention_heads", "max_position_embeddings")
    defaults = {k: C[k] for k in required}  # PhiConfig's defaults for everything else
    v5_linear = {k: v for k, v in C.items() if k not in ("partial_rotary_factor", "rope_theta", "rope_scaling",
                                                         "torch_dtype")}
    v5_linear.update(dtype="float32", transformers_version="5.0.0", rope_parameters={
        "rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0, "partial_rotary_factor": 0.5})
    rs_key = {k: v for k, v in B.items() if k != "rope_parameters"}
    rs_key.update(rope_scaling={"rope_type": "default", "rope_theta": 4096.0, "partial_rotary_factor": 0.25})
    return {"phi-defaults-only-sizes": (defaults, "C", "kv2x"),
            "phi-v5-linear-rope_parameters": (v5_linear, "C", None),
            "phi-v5-rope_scaling-key": (rs_key, "B", None),
            "phi-partial-0.48-truncates": (dict(A, partial_rotary_factor=0.48), "A", None),
            "phi-kv-null": (dict(A, num_key_value_heads=None), "A", None)}


def key_variant_weights(W, src, how):
    if how == "kv2x":
        return repeat_kv_weights(W[src], case_table()[src][0], 2)
    return W[src]


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32"):
        self.ck, self.tag, self.cfg = ck, tag, cfg
        write_folder(os.path.join(ck.work, tag), cfg, T, dtype)
        self.T = store(T, dtype)
        self.model = PhiRef(cfg, self.T)
        self.alts = {}
        p = phi_params(cfg)
        print("[%s] %s storage, layers %d, hidden %d, heads %d / kv %d, rotary dims %d of %d, base %g%s, act %s, "
              "eps %g" % (tag, dtype, p["L"], p["d"], p["H"], p["KV"], p["rd"], p["hd"], p["base"],
                          ", scaling %s" % (p["scaling"],) if p["scaling"] else "", p["act"], p["eps"]), flush=True)

    def alt(self, kw):
        key = json.dumps(kw, sort_keys=True)
        if key not in self.alts:
            self.alts[key] = PhiRef(self.cfg, self.T, **kw)
        return self.alts[key]

    def ppl(self, ids, context, dtype="float64"):
        ck = self.ck
        rtol = TOL[dtype]
        eff = context or min(512, self.model.P)
        out = os.path.join(ck.work, "ppl_%s_%s_%d.json" % (self.tag, dtype, context))
        r = ck.run(["hf", "ppl", self.tag, "--data", "text.txt", "--context", context, "--dtype", dtype,
                    "--out", out, "--threads", 1])
        if r.returncode != 0:
            return None
        res = json.load(open(out))
        wins = windows(ids, eff)
        tot, cnt = mean_ce(self.model, wins)
        nb = sum(token_bytes(t) for w in wins for t in w[1:])
        nf = len(ck.failures)
        what = "%s hf ppl --dtype %s --context %d" % (self.tag, dtype, context)
        ck.equal(what + ": targets", res.get("targets"), cnt)
        ck.close(what + ": loss_sum", res.get("loss_sum"), tot, rtol)
        ck.close(what + ": perplexity", res.get("perplexity"), math.exp(tot / cnt), rtol * 10)
        ck.close(what + ": bits_per_byte", res.get("bits_per_byte"), tot / math.log(2) / nb, rtol)
        got = res.get("loss_sum")
        if len(ck.failures) > nf and DIAGNOSE[0] > 0 and got is not None:
            DIAGNOSE[0] -= 1
            print("    reference loss_sum %.12g; lol %r" % (tot, got))
            for name, kw in alternatives(self.cfg) + [("RoPE tables in float64", {"rope_f64": True})]:
                a, _ = mean_ce(self.alt(kw), wins)
                print("    alternative %-66s loss_sum %.12g%s" % (name, a, "   <-- lol matches" if abs(
                    a - got) <= max(rtol, 1e-6) * abs(a) else ""))
        return got

    def generate(self, prompt, n, dtype="float64", text=None, expect_n=None):
        ck = self.ck
        args = ["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype, "--threads", 1]
        args += ["--prompt", text] if text is not None else ["--tokens", ",".join(map(str, prompt))]
        r = ck.run(args)
        if r.returncode != 0:
            return
        m = n if expect_n is None else expect_n
        toks, gaps = self.model.greedy(prompt, m)
        got = parse_ids(r.stdout)
        what = "%s hf generate --dtype %s %s (%d prompt ids, %d new%s)" % (
            self.tag, dtype, "--prompt" if text is not None else "--tokens", len(prompt), m,
            "" if expect_n is None else ", --max-new %d reduced by max_position_embeddings %d" % (n, self.model.P))
        if expect_n is not None:
            ck.equal(what + ": number of new ids", len(got), m)
        nf = len(ck.failures)
        compare_greedy(ck, what, got, toks, gaps, dtype != "float64")
        if len(ck.failures) > nf and DIAGNOSE[0] > 0:
            DIAGNOSE[0] -= 1
            print("    prompt    %s\n    reference %s\n    lol       %s" % (prompt, toks, got))
            for name, kw in alternatives(self.cfg) + DECODE_ALTS:
                if self.alt(kw).greedy(prompt, m)[0] == got:
                    print("    lol matches the reference under: %s" % name)
            seq = list(prompt)
            for j, t in enumerate(got):
                if argmax_low(self.model.prefill(seq)[0][-1]) != t:
                    print("    lol's id %d (new token %d) is not the argmax of the full forward of its own prefix"
                          % (t, j))
                    break
                seq.append(t)

    def generate_stop(self, prompt, n):
        """without --no-stop: the ids up to and including the first EOS (258)"""
        ck = self.ck
        r = ck.run(["hf", "generate", self.tag, "--ids", "--max-new", n, "--dtype", "float64", "--threads", 1,
                    "--tokens", ",".join(map(str, prompt))])
        if r.returncode != 0:
            return
        toks = self.model.greedy(prompt, n)[0]
        if EOT not in toks:
            ck.note("%s: the reference continuation has no EOS; stop not tested" % self.tag)
        else:
            toks = toks[:toks.index(EOT) + 1]
        ck.equal("%s hf generate (stop at EOS %d, %d prompt ids)" % (self.tag, EOT, len(prompt)),
                 parse_ids(r.stdout), toks)

    def info(self, layout=False):
        ck = self.ck
        r = ck.run(["hf", "info", self.tag, "--check"], expect_rc=None)
        ck.equal("%s hf info --check exits 0" % self.tag, r.returncode, 0)
        if r.returncode != 0:
            return None
        ck.equal("%s hf info names PhiForCausalLM" % self.tag, "PhiForCausalLM" in r.stdout, True)
        ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout, True)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            ck.equal("%s hf info parameters (transformers' num_parameters())" % self.tag,
                     int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            ck.note("%s: hf info prints no parameter count" % self.tag)
        # ASSUMED: hf info's summary lines (keys as lol prints them) describe the model read here
        p = phi_params(self.cfg)
        lines = {}
        for l_ in r.stdout.splitlines():
            mm = re.match(r"(\S+(?: \S+)?)\s{2,}(.*)", l_)
            if mm:
                lines.setdefault(mm.group(1), mm.group(2))
        rot = lines.get("rotary dims")
        ck.equal("%s hf info 'rotary dims' line [ASSUMED]: %r" % (self.tag, rot),
                 (rot or "").startswith("%d of %d" % (p["rd"], p["hd"])), True)
        pos = lines.get("positions", "")
        mb = re.search(r"rope_theta ([\d.e+-]+)", pos)
        me = re.search(r"layer_norm_eps ([\d.e+-]+)", pos)
        ck.equal("%s hf info rope_theta / layer_norm_eps [ASSUMED]: %r" % (self.tag, pos),
                 (float(mb.group(1)) if mb else None, float(me.group(1)) if me else None), (p["base"], p["eps"]))
        ck.equal("%s hf info vocab line: not tied [ASSUMED]: %r" % (self.tag, lines.get("vocab")),
                 "tied" in lines.get("vocab", "") and "untied" not in lines.get("vocab", ""), False)
        sc = lines.get("rope scaling", "")
        if p["scaling"]:
            ck.equal("%s hf info rope scaling line [ASSUMED]: %r" % (self.tag, sc),
                     sc.startswith(p["scaling"][0]) and ("factor %g" % p["scaling"][1]) in sc, True)
        else:
            ck.equal("%s hf info rope scaling none [ASSUMED]" % self.tag, sc, "none")
        hl = lines.get("heads", "")
        heads = re.search(r"(\d+) query, (\d+) key/value, head_dim (\d+)", hl)
        ck.equal("%s hf info heads line (query, key/value, head_dim) [ASSUMED]: %r" % (self.tag, hl),
                 tuple(int(x) for x in heads.groups()) if heads else None, (p["H"], p["KV"], p["hd"]))
        blk = lines.get("block", "")
        want = ("parallel", "one input_layernorm", "LayerNorm",
                "MLP gelu " if p["act"] == "gelu" else "MLP gelu_pytorch_tanh", "biases on q/k/v_proj and dense",
                "lm_head with a bias")
        ck.equal("%s hf info block line names %s [ASSUMED]" % (self.tag, " / ".join(want)),
                 [w in blk + " " for w in want], [True] * len(want))
        if layout:
            claims = (("RMSNorm (rms_norm_eps)", r"rms_?norm"), ("a gated MLP ('MLP gate')", r"\bgate\b"),
                      ("a post_attention_layernorm", r"post_attention"))
            wrong = [w for w, pat in claims if re.search(pat, r.stdout, re.I)]
            ck.equal("%s hf info describes Phi's layout [ASSUMED]: claims of features Phi lacks" % self.tag,
                     wrong, [])
        return r.stdout


def refusal(ck, tag, cfg, T, needles, assumed="", rc=2, dtype="F32"):
    write_folder(os.path.join(ck.work, tag), cfg, T, dtype)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
    ok = r.returncode == rc and any(n in r.stderr for n in needles)
    ck.compared += 1
    if not ok:
        ck.fail("%s%s: expected exit %d naming %s; got exit %d, stderr %r" % (
            tag, assumed, rc, " or ".join(needles), r.returncode, r.stderr.strip()[-400:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("%s refused (exit %d)" % (tag, rc), r.stderr.strip()[:160]))


# ---------------------------------------------------------------- export
EXPORT_BASE = {"architecture": "dense", "n_layers": 2, "qkv_bias": True, "o_bias": True, "mlp_bias": True,
               "norm": "layernorm", "mlp": "plain", "parallel_residual": True, "shared_input_norm": True,
               "lm_head_bias": True, "tie_word_embeddings": False, "max_seq_len": 64}
EXPORT_MODELS = {
    "export-phi-mha": dict(EXPORT_BASE, d_model=40, n_heads=4, n_kv_heads=4, ffn_hidden=64, partial_rotary_factor=0.4,
                           activation="gelu_pytorch_tanh", rope_theta=10000.0, norm_eps=1e-5),
    "export-phi-gqa": dict(EXPORT_BASE, d_model=48, n_heads=6, n_kv_heads=2, ffn_hidden=64, partial_rotary_factor=0.5,
                           activation="gelu", rope_theta=4096.0, norm_eps=1e-3)}


def train_run(ck, tag, model, steps):
    run = "run_" + tag
    rc = {"model": model, "data": {"dir": "data_byte", "seq_len": 32, "batch_size": 2, "packing": "pack"},
          "optim": {"type": "adamw", "lr": 0.05}, "schedule": {"type": "constant"},
          "train": {"steps": steps, "out": run, "progress": False, "threads": 1, "seed": 0}}
    with open(os.path.join(ck.work, run + ".json"), "w") as f:
        json.dump(rc, f, indent=1)
    shutil.rmtree(os.path.join(ck.work, run), ignore_errors=True)
    r = ck.run(["train", "--config", run + ".json", "--no-progress"])
    return run if r.returncode == 0 else None


def check_export(ck):
    """train tiny dense models of Phi's layout for 3 steps, `lol export --hf` (the default --arch):
    config.json must describe the model in PhiConfig's keys, the tensors must be the checkpoint's
    renamed bit for bit, and `hf ppl --dtype float64` of the export must equal this reference on
    the exported tensors"""
    w = ck.work
    print("[export] dense models of Phi's layout -> PhiForCausalLM folders", flush=True)
    with open(os.path.join(w, "train.txt"), "w", encoding="utf-8") as f:
        f.write((TEXT + "\n\n") * 6)
    shutil.rmtree(os.path.join(w, "data_byte"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "train.txt", "--tokenizer", "byte", "--out", "data_byte", "--valid-fraction", 0,
                "--no-progress"])
    if r.returncode != 0:
        return
    ids = list(TEXT.encode("utf-8"))  # lol's byte tokenizer: id = byte
    for tag, m in EXPORT_MODELS.items():
        run = train_run(ck, tag, m, 3)
        if run is None:
            continue
        ckpt = os.path.join(w, run, open(os.path.join(w, run, "latest")).read().strip())
        S = read_st(os.path.join(ckpt, "model.safetensors"))
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", tag])
        if r.returncode != 0:
            continue
        cfg = json.load(open(os.path.join(w, tag, "config.json")))
        E = read_st(os.path.join(w, tag, "model.safetensors"))
        ck.equal("%s: architectures / model_type (the default --arch)" % tag,
                 (cfg.get("architectures"), cfg.get("model_type")), (["PhiForCausalLM"], "phi"))
        d, H, KV, L, F = m["d_model"], m["n_heads"], m["n_kv_heads"], m["n_layers"], m["ffn_hidden"]
        hd = d // H
        try:
            p = phi_params(cfg)
        except (KeyError, TypeError) as e:
            ck.fail("%s: config.json unreadable as PhiConfig: %r" % (tag, e))
            continue
        keys = ("d", "L", "H", "KV", "F", "P", "rd", "base", "scaling", "act", "eps", "tied", "qk_ln")
        got = {k: p[k] for k in keys}
        want = {"d": d, "L": L, "H": H, "KV": KV, "F": F, "P": m["max_seq_len"],
                "rd": int(hd * m["partial_rotary_factor"]), "base": m["rope_theta"], "scaling": None,
                "act": m["activation"], "eps": m["norm_eps"], "tied": False, "qk_ln": False}
        if got["act"] in ("gelu_new", "gelu_fast") and want["act"] == "gelu_pytorch_tanh":
            got["act"] = want["act"]  # the same tanh GELU
        ck.equal("%s: config.json read as PhiConfig (defaults for absent keys)" % tag, got, want)
        ren = {"model.embed_tokens.weight": "model.embed_tokens.weight", "lm_head.weight": "lm_head.weight",
               "lm_head.bias": "lm_head.bias", "model.norm.weight": "model.final_layernorm.weight",
               "model.norm.bias": "model.final_layernorm.bias"}
        for i in range(L):
            a = "model.layers.%d." % i
            for y in ("weight", "bias"):
                ren[a + "input_layernorm." + y] = a + "input_layernorm." + y
                for x, z in (("self_attn.q_proj", "self_attn.q_proj"), ("self_attn.k_proj", "self_attn.k_proj"),
                             ("self_attn.v_proj", "self_attn.v_proj"), ("self_attn.o_proj", "self_attn.dense"),
                             ("mlp.up_proj", "mlp.fc1"), ("mlp.down_proj", "mlp.fc2")):
                    ren[a + x + "." + y] = a + z + "." + y
        want_t = {}
        for k_src, k_dst in ren.items():
            if k_src in S:
                want_t[k_dst] = (S[k_src][0], S[k_src][1])
            else:
                ck.note("%s: the checkpoint has no %s" % (tag, k_src))
        extra = sorted(k for k in S if k not in ren)
        if extra:
            ck.note("%s: checkpoint tensors without a Phi name: %s" % (tag, extra))
        got_t = {k: (v[0], v[1]) for k, v in E.items()}
        ck.equal("%s: tensor names" % tag, sorted(got_t), sorted(want_t))
        diff = sorted(k for k in want_t if k in got_t and got_t[k] != want_t[k])
        ck.equal("%s: tensors = the checkpoint's, renamed bit for bit (names differing)" % tag, diff, [])
        try:
            model = PhiRef(cfg, got_t)
        except (KeyError, AssertionError) as e:
            ck.fail("%s: the exported tensors do not form a PhiForCausalLM: %r" % (tag, e))
            continue
        out = os.path.join(w, "ppl_%s.json" % tag)
        r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", out,
                    "--threads", 1])
        if r.returncode == 0:
            res = json.load(open(out))
            tot, cnt = mean_ce(model, windows(ids, 64))
            ck.equal("%s hf ppl --context 64: targets" % tag, res.get("targets"), cnt)
            ck.close("%s hf ppl --dtype float64 --context 64: loss_sum" % tag, res.get("loss_sum"), tot,
                     TOL["float64"])
            ck.close("%s hf ppl --dtype float64 --context 64: bits_per_byte" % tag, res.get("bits_per_byte"),
                     tot / math.log(2) / cnt, TOL["float64"])
    # models without some of Phi's biases: exported with zero biases (the same function), so
    # the written biases of that kind are all 0 and hf ppl equals this reference on them
    base = dict(EXPORT_MODELS["export-phi-mha"], n_layers=1)
    for tag, model, kinds in (
            ("export-zero-o_bias", dict(base, o_bias=False), ["self_attn.dense.bias"]),
            ("export-zero-qkv_bias", dict(base, qkv_bias=False), ["q_proj.bias", "k_proj.bias", "v_proj.bias"]),
            ("export-zero-mlp_lm_head_bias", dict(base, mlp_bias=False, lm_head_bias=False),
             ["fc1.bias", "fc2.bias", "lm_head.bias"])):
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        run = train_run(ck, tag, model, 1)
        if run is None:
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "phi"])
        if r.returncode != 0:
            continue
        cfg = json.load(open(os.path.join(w, tag, "config.json")))
        E = read_st(os.path.join(w, tag, "model.safetensors"))
        zeros = sorted(k for k in E if any(k.endswith(x) for x in kinds))
        ck.equal("%s: zero biases written (%d tensors)" % (tag, len(zeros)),
                 [k for k in zeros if any(v != 0.0 for v in E[k][1])], [])
        ck.equal("%s: a bias of each missing kind is written" % tag,
                 sorted(x for x in kinds if not any(k.endswith(x) for k in zeros)), [])
        out = os.path.join(w, "ppl_%s.json" % tag)
        r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", out,
                    "--threads", 1])
        if r.returncode == 0:
            tot, cnt = mean_ce(PhiRef(cfg, {k: (v[0], v[1]) for k, v in E.items()}), windows(ids, 64))
            ck.close("%s hf ppl --dtype float64 --context 64: loss_sum" % tag, json.load(open(out)).get("loss_sum"),
                     tot, TOL["float64"])
    # a model PhiForCausalLM cannot hold: export --arch phi refused naming the field, nothing left
    neox = {k: v for k, v in base.items() if k not in ("shared_input_norm", "lm_head_bias")}
    for tag, model, needles in (
            ("export-refuse-neox-layout", neox, ["shared_input_norm", "post_attention_layernorm"]),):
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        run = train_run(ck, tag, model, 1)
        if run is None:
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "phi"], expect_rc=None)
        ck.compared += 1
        left = os.path.exists(os.path.join(w, tag))
        if r.returncode != 2 or not any(n in r.stderr for n in needles) or left:
            ck.fail("%s: expected exit 2 naming %s and no %s folder left; got exit %d (folder left: %s), %r" % (
                tag, " or ".join(needles), tag, r.returncode, left, r.stderr.strip()[-300:]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


# ---------------------------------------------------------------- check
STOP_PROMPT = None


def stop_case():
    """a folder whose greedy continuation reaches <|endoftext|> 258: C's config (without scaling)
    with lm_head.bias[258] raised a little"""
    global STOP_PROMPT
    cfg = dict(case_table()["C"][0], rope_scaling=None)
    T = dict(phi_weights(cfg, 711, emb_std=0.3))
    sh, v = T["lm_head.bias"]
    v = list(v)
    v[EOT] = STOP_BIAS[0]
    T["lm_head.bias"] = (sh, v)
    STOP_PROMPT = encode("Then the ")
    return cfg, T


STOP_BIAS = [6.0]


def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    tab = case_table()
    W = {k: phi_weights(cfg, sd, **kw) for k, (cfg, sd, kw) in tab.items()}

    # A: phi-2's 4.37 config keys, multi-head, 4 of 10 rotary dims, gelu_new
    c = Case(ck, "phi2-like", tab["A"][0], W["A"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[60:100], 20)
    c.generate(ids[60:100], 20, "float32")
    ptext = "Then the thin thrush"
    c.generate(encode(ptext), 25, text=ptext)
    c.generate(ids[100:150], 30, expect_n=64 - 50)
    c.info(layout=True)

    # B: transformers 5's rope_parameters, GQA 6 / 2, exact gelu, base 4096
    c = Case(ck, "phi-v5-gqa-gelu", tab["B"][0], W["B"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:5], 30)
    c.generate(ids[100:140], 22)
    c.generate(ids[100:140], 22, "float32")
    c.info()

    # C: linear scaling with partial rotary, GQA 4 / 2, gelu_fast
    c = Case(ck, "phi-linear-partial-gqa", tab["C"][0], W["C"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:4], 30)
    c.generate(ids[30:70], 20)
    c.generate(ids[30:70], 20, "float32")
    c.info()
    for name, (cfg, src) in variant_table().items():
        c = Case(ck, name, cfg, W[src])
        c.ppl(ids, 0)
        c.generate(ids[10:40], 25)
        if name == "phi-yarn-partial":
            c.info()

    # the same (or default) models under other config.json key layouts
    for tag, (cfg, src, how) in key_variants().items():
        c = Case(ck, tag, cfg, key_variant_weights(W, src, how))
        c.ppl(ids, 0)
        if tag == "phi-defaults-only-sizes":
            c.generate(ids[10:40], 25)
            out = c.info()
            m = re.search(r"^stop tokens\s+(.*)$", out or "", re.M)
            # ASSUMED: without eos_token_id, PhiConfig's default 2 and the tokenizer's eos (258) both stop
            ck.equal("%s hf info stop tokens include config's default eos 2 and the tokenizer's 258 [ASSUMED]"
                     % tag, sorted(set(int(x) for x in re.findall(r"\b\d+\b", m.group(1)))) if m else None,
                     [2, EOT])

    # D: F16, gelu_pytorch_tanh
    c = Case(ck, "phi-f16-tanh", tab["D"][0], W["D"], dtype="F16")
    c.ppl(ids, 0)
    c.generate(ids[30:62], 25)
    c.info()

    # E: BF16, multi-query (1 kv head), exact gelu
    c = Case(ck, "phi-bf16-mqa", tab["E"][0], W["E"], dtype="BF16")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:40], 25)
    c.info()

    # stop at EOS without --no-stop
    cfgS, TS = stop_case()
    c = Case(ck, "phi-stop-at-eos", cfgS, TS)
    c.generate_stop(STOP_PROMPT, 30)

    # refusals
    print("[refusals]", flush=True)
    base = phi_config(num_hidden_layers=2)
    Ts = phi_weights(base, 7)
    refusal(ck, "refuse-qk_layernorm", dict(base, qk_layernorm=True), Ts, ["qk_layernorm"])
    refusal(ck, "refuse-tie_word_embeddings", dict(base, tie_word_embeddings=True), Ts, ["tie_word_embeddings"])
    refusal(ck, "refuse-phi-msft", dict(base, model_type="phi-msft"), Ts, ["phi-msft", "model_type"])
    refusal(ck, "refuse-rotary-odd", dict(base, partial_rotary_factor=0.3), Ts, ["partial_rotary_factor"])
    refusal(ck, "refuse-rotary-one-dim", dict(base, partial_rotary_factor=0.1), Ts, ["partial_rotary_factor"])
    refusal(ck, "refuse-rope_theta-vs-rope_parameters",
            dict(base, rope_parameters={"rope_type": "default", "rope_theta": 500.0}), Ts, ["rope_theta"])
    refusal(ck, "refuse-partial-vs-rope_parameters",
            dict(base, rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.8}), Ts,
            ["partial_rotary_factor"])
    refusal(ck, "refuse-relu", dict(base, hidden_act="relu"), Ts, ["hidden_act"])
    refusal(ck, "refuse-quantization_config", dict(base, quantization_config={"quant_method": "bitsandbytes"}),
            Ts, ["quantization_config"])
    refusal(ck, "refuse-longrope", dict(base, rope_scaling={"rope_type": "longrope", "short_factor": [1.0, 1.0],
                                                            "long_factor": [2.0, 2.0], "factor": 2.0}),
            Ts, ["longrope", "rope_scaling"])
    refusal(ck, "refuse-missing-intermediate_size", phi_config(num_hidden_layers=2, intermediate_size=DROP), Ts,
            ["intermediate_size"])
    cg = dict(tab["B"][0], num_key_value_heads=4)
    refusal(ck, "refuse-kv-heads-not-divisor", cg, phi_weights(cg, 8), ["num_key_value_heads"])
    T = dict(Ts)
    del T["lm_head.bias"]
    refusal(ck, "refuse-missing-lm_head-bias", base, T, ["lm_head.bias"])
    T = dict(Ts)
    T["model.norm.weight"] = T.pop("model.final_layernorm.weight")  # Llama's name for the final norm's weight
    refusal(ck, "refuse-llama-model-norm-weight", base, T, ["model.norm.weight", "model.final_layernorm.weight"])
    T = dict(Ts)
    T["model.layers.1.post_attention_layernorm.weight"] = Ts["model.layers.1.input_layernorm.weight"]
    T["model.layers.1.post_attention_layernorm.bias"] = Ts["model.layers.1.input_layernorm.bias"]
    refusal(ck, "refuse-post_attention_layernorm", base, T, ["post_attention_layernorm"])
    cB = tab["B"][0]
    TB = W["B"]
    T = dict(TB)
    sh, v = T["model.layers.0.self_attn.q_proj.weight"]
    T["model.layers.0.self_attn.k_proj.weight"] = (sh, v)  # [H hd, d] instead of [KV hd, d]
    refusal(ck, "refuse-k_proj-for-query-heads", cB, T, ["model.layers.0.self_attn.k_proj.weight"])
    T = dict(TB)
    T["model.layers.1.self_attn.v_proj.bias"] = TB["model.layers.1.self_attn.q_proj.bias"]
    refusal(ck, "refuse-v_proj-bias-shape", cB, T, ["model.layers.1.self_attn.v_proj.bias"])
    T = {k.replace("self_attn.dense.", "self_attn.o_proj."): v for k, v in Ts.items()}
    refusal(ck, "refuse-llama-o_proj", base, T, ["o_proj", "self_attn.dense"])
    T = {k.replace("mlp.fc1.", "mlp.up_proj."): v for k, v in Ts.items()}
    refusal(ck, "refuse-llama-up_proj", base, T, ["up_proj", "mlp.fc1"])
    T = dict(Ts)
    del T["model.layers.1.mlp.fc2.bias"]
    refusal(ck, "refuse-missing-fc2-bias", base, T, ["model.layers.1.mlp.fc2.bias"])
    T = dict(Ts)
    sh, v = T["lm_head.bias"]
    T["lm_head.bias"] = ([sh[0] - 1], v[:-1])
    refusal(ck, "refuse-lm_head-bias-shape", base, T, ["lm_head.bias"])

    check_export(ck)

    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


# ---------------------------------------------------------------- selftest
def selftest():
    t0 = time.time()
    bad = []
    ids = encode(TEXT)
    print("  selftest: text %d ids, %d bytes" % (len(ids), len(TEXT.encode())))
    for x in (-3.0, -1.0, 0.5, 2.0):
        if abs(gelu_fast(x) - gelu_tanh(x)) > 1e-10:
            bad.append("gelu_fast != gelu_new at %g" % x)
    if abs(gelu_exact(1.0) - 0.8413447460685429) > 1e-12:
        bad.append("exact gelu(1) wrong")
    if abs(gelu_tanh(1.0) - 0.8411919906082768) > 1e-12:
        bad.append("tanh gelu(1) wrong: %r" % gelu_tanh(1.0))
    # phi-2's parameter count (docs/hf.md: 2,779,683,840)
    p2 = phi_config(vocab_size=51200, hidden_size=2560, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=32, intermediate_size=10240, max_position_embeddings=2048)
    if param_count(p2) != 2779683840:
        bad.append("phi-2 param count %d" % param_count(p2))
    if phi_params(p2)["rd"] != 32:
        bad.append("phi-2 rotary dims %d" % phi_params(p2)["rd"])
    for tag, (cfg, sd, wkw) in case_table().items():
        n = sum(len(v[1]) for v in phi_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    tab = case_table()
    want = {"A": (4, 10, 4, 10000.0, "gelu_new"), "B": (4, 16, 2, 4096.0, "gelu"), "C": (4, 8, 2, 10000.0, "gelu_fast"),
            "D": (4, 10, 4, 10000.0, "gelu_pytorch_tanh"), "E": (4, 8, 1, 10000.0, "gelu")}
    for tag, w_ in want.items():
        p = phi_params(tab[tag][0])
        if (p["rd"], p["hd"], p["KV"], p["base"], p["act"]) != w_:
            bad.append("case %s read as %s, not %s" % (tag, (p["rd"], p["hd"], p["KV"], p["base"], p["act"]), w_))
    if phi_params(tab["C"][0])["scaling"] != ("linear", 2.0):
        bad.append("C's scaling")
    # key layouts: the same model as their source (defaults: PhiConfig's)
    kv = key_variants()
    dflt = phi_params(kv["phi-defaults-only-sizes"][0])
    if (dflt["rd"], dflt["base"], dflt["act"], dflt["eps"], dflt["KV"], dflt["scaling"], dflt["tied"], dflt["bos"],
            dflt["eos"]) != (4, 10000.0, "gelu_new", 1e-5, 4, None, False, 1, 2):
        bad.append("PhiConfig defaults read as %s" % dflt)
    for tag, (cfg, src, how) in kv.items():
        if how is None:
            pa, pb = phi_params(cfg), phi_params(tab[src][0])
            if {k: v for k, v in pa.items()} != {k: v for k, v in pb.items()}:
                bad.append("%s: the config reads as %s, not as case %s's %s" % (tag, pa, src, pb))
    # repeating C's kv heads gives the same function under block GQA
    cC = tab["C"][0]
    TC = phi_weights(cC, 703)
    c4 = dict(cC, num_key_value_heads=4)
    a1 = PhiRef(cC, TC).prefill(ids[:20])[0][-1]
    a2 = PhiRef(c4, repeat_kv_weights(TC, cC, 2)).prefill(ids[:20])[0][-1]
    if max(abs(x - y) for x, y in zip(a1, a2)) > 1e-12:
        bad.append("repeat_kv_weights does not keep the function")
    # RoPE: rotate-half equals the complex rotation of (x_i + i x_{i+rd/2}) by pos * inv_freq_i
    inv = inv_freq_f32(10000.0, 4)
    if inv != [1.0, f32(0.01)]:
        bad.append("inv_freq %s" % inv)
    if inv_freq_f32(4096.0, 4) != [1.0, 1.0 / 64]:
        bad.append("inv_freq base 4096 %s" % inv_freq_f32(4096.0, 4))
    cos, sin = rope_tables(inv, 40)
    x = [0.3 * k - 1.0 for k in range(10)]
    y = rope_apply(x, cos[37], sin[37], 4)
    for i in range(2):
        z = complex(x[i], x[i + 2]) * complex(math.cos(37 * inv[i]), math.sin(37 * inv[i]))
        if abs(z.real - y[i]) > 1e-5 or abs(z.imag - y[i + 2]) > 1e-5:
            bad.append("rope pair %d" % i)
    if y[4:] != x[4:]:
        bad.append("rope touched the pass-through dims")
    y = layernorm([1.0, 2.0, 4.0, 7.0], [1.0] * 4, [0.0] * 4, 0.0)
    if abs(sum(y)) > 1e-12 or abs(sum(v * v for v in y) / 4 - 1) > 1e-12:
        bad.append("layernorm")
    # cached greedy = the full forward recomputed each step
    for tag in ("A", "B", "C"):
        cfg, sd, wkw = tab[tag]
        m = PhiRef(cfg, phi_weights(cfg, sd, **wkw))
        pr = ids[60:75]
        toks = m.greedy(pr, 10)[0]
        seq = list(pr)
        for j in range(10):
            t = argmax_low(m.prefill(seq)[0][-1])
            if t != toks[j]:
                bad.append("%s: cached greedy step %d: %d != recomputed %d" % (tag, j, toks[j], t))
                break
            seq.append(t)
    cfgS, TS = stop_case()
    st = PhiRef(cfgS, TS).greedy(STOP_PROMPT, 30)[0]
    print("  selftest: stop case greedy %s" % st)
    if EOT not in st or st.index(EOT) < 2:
        bad.append("the stop case's greedy continuation does not reach EOS %d after a few tokens: %s" % (EOT, st))
    # sensitivity
    gen = {"A": [(ids[:3], 30), (ids[60:100], 20)], "B": [(ids[:5], 30), (ids[100:140], 22)],
           "C": [(ids[:4], 30), (ids[30:70], 20)], "D": [(ids[30:62], 25)], "E": [(ids[10:40], 25)]}
    cases = [(tag, cfg, store(phi_weights(cfg, sd, **wkw), STORAGE.get(tag, "F32")), gen[tag])
             for tag, (cfg, sd, wkw) in sorted(tab.items())]
    for name, (cfg, src) in sorted(variant_table().items()):
        c0, sd, wkw = tab[src]
        cases.append((name, cfg, phi_weights(c0, sd, **wkw), [(ids[10:40], 25)]))
    changed = {}
    wins = windows(ids, 64)
    for tag, cfg, T, g in cases:
        model = PhiRef(cfg, T)
        ref, cnt = mean_ce(model, wins)
        refs = [model.greedy(p_, n)[0] for p_, n in g]
        if any(len(set(r_)) < 4 for r_ in refs):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
        worst = None
        for name, kws in (("RoPE tables +-1 float32 ulp (noise, the largest of 3 draws)",
                           [{"ulp_noise": sd_} for sd_ in (1, 2, 5)]),
                          ("RoPE tables in float64", [{"rope_f64": True}])):
            rel = max(abs(mean_ce(PhiRef(cfg, T, **kw), wins)[0] - ref) / abs(ref) for kw in kws)
            print("  selftest %-22s %-70s relative change %.2e" % (tag, name, rel))
            if "noise" in name and rel > TOL["float64"] / 2:
                bad.append("%s: one float32 ulp in the RoPE tables moves the loss by %.2e, too close to the "
                           "float64 tolerance" % (tag, rel))
        for name, kw in alternatives(cfg):
            alt = PhiRef(cfg, T, **kw)
            a_, _ = mean_ce(alt, wins)
            rel = abs(a_ - ref) / abs(ref)
            worst = rel if worst is None else min(worst, rel)
            if rel < 20 * TOL["float64"]:
                bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
            same = all(alt.greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            key = re.sub(r"activation gelu\S*", "activation gelu (the other form)", name.split(" instead")[0])
            key = re.sub(r"layer_norm_eps \S+", "layer_norm_eps", key)
            key = re.sub(r"RoPE base 10000.*", "RoPE base 10000 (the default)", key)
            changed.setdefault(key, [])
            if not same:
                changed[key].append(tag)
            print("  selftest %-22s %-70s relative change %.2e%s" % (
                tag, name, rel, "  (greedy ids unchanged)" if same else ""))
        print("  selftest %-22s loss %.8g over %d targets (ppl %.4g); smallest relative change %.2e; greedy %s" % (
            tag, ref, cnt, math.exp(ref / cnt), worst, refs))
        for name, kw in DECODE_ALTS:
            same = all(PhiRef(cfg, T, **kw).greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            changed.setdefault(name, [])
            if not same:
                changed[name].append(tag)
    for key, tags in sorted(changed.items()):
        print("  selftest: greedy ids compared by check() change under '%s' in cases %s" % (key, tags))
        if not tags and not key.startswith(WEAK):
            bad.append("no case's greedy ids change under '%s'" % key)
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny Phi folders, run lol, compare with the reference")
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
