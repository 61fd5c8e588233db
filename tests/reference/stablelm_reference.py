#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face StableLM (StableLmForCausalLM, model_type
"stablelm": stablelm-2-1_6b, stablelm-2-zephyr-1_6b, stablelm-3b-4e1t in transformers' native
layout) in pure Python (stdlib only), and a check that `lol hf ppl|generate|info` and
`lol export --hf` agree with it on tiny StableLM folders written here.

  python3 tests/reference/stablelm_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/stablelm_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_stablelm.py / configuration_stablelm.py / modeling_rope_utils.py as
remembered (the 4.38 code stablelm-2 / stablelm-3b-4e1t were converted for, the 4.4x rewrite
that moved the rotary embedding into StableLmModel and reads partial_rotary_factor in the rope
init functions, the 5.x rope_parameters config), docs/hf.md ("StableLM", "Commands", "RoPE
scaling", "Cached decoding", "Export"), docs/baselines.md (the dense-config fields) and the
brief. It imports qwen2_reference.py (the float32 / bfloat16 rounding, log_softmax / argmax /
top-2 gap, Checker, compare_greedy, parse_ids), gpt_neox_reference.py (the GPT-NeoX byte-level
tokenizer: stablelm-3b-4e1t uses GPT-NeoX's tokenizer, <|endoftext|> 0 = bos = eos as in its
config.json; the GELU forms, the float32 RoPE tables, rotate-half, yarn's frequencies,
LayerNorm, f16 / storage rounding, windows / mean_ce) and safetensors_io (write_st / read_st),
all unchanged; the StableLM model, its config reading, the weights, the folder writer, the
cases and the comparisons are this file's. Layout of the file after phi_reference.py.

Rules of the reference (float64 on the stored, float16- / bfloat16-rounded weights; the RoPE
tables in float32 as transformers builds them):
  x_0[t] = embed_tokens[id_t]   (no position embedding, no embedding scale; positions 0..
      within each forward call / hf ppl window)
  per layer (StableLmDecoderLayer), n = input_layernorm(x), a = o_proj(attn(n)):
      use_parallel_residual false (default):  h = x + a;  y = h + mlp(post_attention_layernorm(h))
      use_parallel_residual true:  y = x + a + mlp(n)   (ONE LayerNorm for both branches: the
          layer has no post_attention_layernorm at all)
  attention (StableLmAttention): head_dim hd = hidden_size / num_attention_heads, H query heads,
      KV = num_key_value_heads key / value heads; q = n Wq^T (+ bq) [H hd], k = n Wk^T (+ bk)
      [KV hd], v = n Wv^T (+ bv) [KV hd]: q_proj / k_proj / v_proj are nn.Linear(bias=
      use_qkv_bias); o_proj nn.Linear(bias=False); head j = rows j*hd .. (j+1)*hd - 1;
      query head h attends with key / value head h // G, G = H / KV (repeat_kv: kv head j
      serves query heads j*G .. j*G + G - 1);
      RoPE on the first rd = int(hd * partial_rotary_factor) dims of each q and k head
      (q[..., :rotary_ndims] / q[..., rotary_ndims:]; the other hd - rd pass unchanged),
      rotate-half inside them: for i < rd/2 the pair (i, i + rd/2) turns by position * inv_freq[i];
      inv_freq[i] = float32(1 / float32(base ** float32(2i / rd))) (exponents over rd: the rotary
      embedding is built with dim = rotary_ndims), angle = float32(position * inv_freq[i]),
      cos / sin in float32;
      scores = q.k * hd^-1/2 (math.sqrt(head_dim), not the rotary dims), causal softmax;
      o = heads concatenated; a = o Wo^T
  MLP (StableLmMLP): down_proj(act(gate_proj(m)) * up_proj(m)), all three nn.Linear(bias=False).
  logits = model.norm(x_L) lm_head.weight^T   (lm_head: nn.Linear(bias=False); = embed_tokens
      when tie_word_embeddings)
  LayerNorm (nn.LayerNorm, every norm incl. the final model.norm): (x - mean) / sqrt(var + eps)
      * w + b, var the biased (1/n) variance, eps layer_norm_eps.
  act (hidden_act, ACT2FN): "silu" (default) x sigmoid(x); "gelu" exact (erf); "gelu_new" /
      "gelu_pytorch_tanh" tanh GELU; "gelu_fast" the same with 0.7978845608.
  RoPE scaling (rope_scaling, or rope_parameters' rope_type; the rope init functions take
      dim = rd): "linear": inv_freq / factor (float32; 4.38 divided the positions instead,
      the same for factor 2); "dynamic": plain RoPE within max_position_embeddings (every
      window / generation here stays within it); "yarn": as _compute_yarn_parameters with
      dim = rd, cos / sin times 0.1 ln(factor) + 1.
  StableLmConfig defaults: vocab 50304, num_key_value_heads 32 (an explicit null is not
      replaced: StableLmAttention's H // None fails, so lol must refuse it), hidden_act "silu",
      layer_norm_eps 1e-5, rope_theta 10000, rope_scaling None, partial_rotary_factor 0.25,
      use_qkv_bias false, qk_layernorm false, use_parallel_residual false,
      tie_word_embeddings false, bos 0, eos 0.
  Keys: 4.x partial_rotary_factor / rope_theta / rope_scaling at the top level; 5.x
      rope_parameters {rope_type, rope_theta, partial_rotary_factor, ...}.
  Tensors: model.embed_tokens.weight, model.layers.{i}.input_layernorm.{weight,bias},
      model.layers.{i}.post_attention_layernorm.{weight,bias} (sequential only),
      model.layers.{i}.self_attn.{q,k,v}_proj.weight (+ .bias with use_qkv_bias),
      model.layers.{i}.self_attn.o_proj.weight, model.layers.{i}.mlp.{gate,up,down}_proj.weight,
      model.norm.{weight,bias}, lm_head.weight (untied only).
  num_parameters() = V d (2 untied, 1 tied) + L (2d (1 + sequential) + (H + 2 KV) hd (d + qkv_bias)
      + d H hd + 3 d F) + 2d   (stablelm-2-1_6b 1,644,515,328; stablelm-3b-4e1t 2,795,443,200).

Cases (vocab_size 300 > the tokenizer's 260 ids, max_position_embeddings 64, GPT-NeoX's
byte-level tokenizer as gpt_neox_reference writes it: <|endoftext|> 0 (bos / eos), <|padding|> 1,
byte b = id 2 + b, merges "Ġt" 258 / "he" 259; a text of 335 tokens):
  A stablelm2-like: stablelm-2-1_6b's config.json keys (transformers 4.40: sequential,
    use_qkv_bias true, partial_rotary_factor 0.25, rope_theta 10000, rope_scaling null, silu,
    layer_norm_eps 1e-5, qk_layernorm false, untied), hidden 64, 4 heads / 2 kv heads (G 2,
    head_dim 16 -> 4 rotary dims), 3 layers, intermediate 96; embeddings of std 0.02 (layer 0's
    LayerNorm then tells eps 1e-5 from 1e-6). ppl float64 --context 0 (= 64) and 9, float32 64;
    generate float64 (3 + 30, 40 + 20), float32 (40 + 20), --prompt text, --max-new 30 after
    50 ids (reduced to 14); info --check.
  B stablelm-v5-parallel-tied: transformers 5 layout: "rope_parameters": {"rope_type":
    "default", "rope_theta": 4096, "partial_rotary_factor": 0.5} (not the default 0.25),
    no top-level rope keys, "dtype", use_parallel_residual true (no post_attention_layernorm
    tensors), use_qkv_bias false, tie_word_embeddings true (no lm_head.weight),
    layer_norm_eps 1e-3, 6 heads / 2 kv heads (G 3), hidden 96 (head_dim 16 -> 8 rotary
    dims), 2 layers, intermediate 96. ppl float64 0 / 9, float32; generate float64 / float32;
    info --check.
  C stablelm-linear-partial-gqa: 4.4x keys, rope_scaling {"type": "linear", "factor": 2.0},
    partial_rotary_factor 0.5, hidden 48, 6 heads / 3 kv heads (head_dim 8, 4 rotary dims),
    sequential with q/k/v biases, 2 layers. ppl float64 0 / 9, float32; generate; info.
    stablelm-dynamic-partial: A's weights with {"rope_type": "dynamic", "factor": 2.0}.
    stablelm-yarn-partial: A's weights with {"rope_type": "yarn", "factor": 4.0} (dim = rd).
    stablelm-v5-linear-parallel: B's weights with rope_parameters {"rope_type": "linear",
    "factor": 2, "rope_theta": 4096, "partial_rotary_factor": 0.5}.
    stablelm-v5-dynamic-parallel: B's weights, rope_parameters {"rope_type": "dynamic", ...}.
  Key layouts (ppl float64): stablelm-v5-rope_scaling-key (B's model with rope_scaling
    {"rope_type": "default", "rope_theta": 4096, "partial_rotary_factor": 0.5} instead of
    rope_parameters), stablelm-v4-keys-parallel (B's model with top-level rope_theta 4096 /
    partial_rotary_factor 0.5), stablelm-partial-0.3-truncates (A with 0.3: int(4.8) = 4;
    rounding would give 5, odd), stablelm-tied-stored-head (B with a stored lm_head.weight
    equal to embed_tokens: tolerated, docs/hf.md).
  D stablelm-f16-geglu: F16 storage, gelu_pytorch_tanh gate, sequential with q/k/v biases,
    4 heads / 4 kv heads (head_dim 16, 4 rotary dims), torch_dtype float16: ppl float64,
    generate float64, info --check. stablelm-f16-gelu_fast-key: D with hidden_act gelu_fast
    (ppl float64).
  E stablelm-bf16-parallel-mqa: BF16 storage, parallel, exact gelu gate, 4 heads / 1 kv head
    (multi-query), q/k/v biases, partial 0.5 on head_dim 8, untied: ppl float64 (on the
    bf16-rounded weights), float32, bfloat16; generate float64.
  F stablelm-defaults-only-sizes: config.json with only architectures / model_type / the six
    sizes: StableLmConfig's defaults decide: num_key_value_heads 32 with 32 query heads
    (hidden 256, head_dim 8), partial 0.25 -> 2 rotary dims, base 10000, silu, eps 1e-5,
    sequential, no q/k/v biases, untied; 1 layer. ppl float64 on a shorter text (the first
    ~100 tokens), generate float64, info --check (its stop tokens: the default eos 0 = the
    tokenizer's, ASSUMED).
  stablelm-stop-at-eos: a folder whose greedy continuation reaches <|endoftext|> 0, run without
    --no-stop: the ids up to and including it.
  hf info --check (A, B, C, D, E, F, yarn): exit 0, names StableLmForCausalLM, "all tensors
    present", parameters = num_parameters(); ASSUMED from lol's summary format: see check_info.
  Export (check_export): dense models of StableLM's layout ("norm": "layernorm", "mlp":
    "gated", no o_proj / MLP / lm_head biases) trained 3 steps on a byte corpus (sequential,
    qkv_bias, 4 heads / 2 kv, partial 0.25 on hd 16, silu, untied; parallel with
    shared_input_norm, no qkv bias, 6 heads / 2 kv, partial 0.5 on hd 8, gelu, rope_theta 4096,
    norm_eps 1e-3, tied; lol's defaults: 4 heads / 4 kv, no partial_rotary_factor (lol's 1),
    rope_theta / norm_eps / activation not given), `lol export --hf` with the default --arch:
    StableLmForCausalLM, config.json read with StableLmConfig's rules gives the trained model
    (as the checkpoint's config.json describes it: num_key_value_heads, partial_rotary_factor
    and layer_norm_eps must be written where StableLmConfig's defaults 32 / 0.25 / 1e-5
    differ), the tensors are the checkpoint's bit for bit under the same names (and they are
    StableLmForCausalLM's names for that config), and hf ppl float64 of the export equals this
    reference on the exported tensors; the first model again with --dtype bfloat16: every
    tensor BF16 = the checkpoint's rounded, hf ppl float64 = the reference on them. Refused
    (exit 2 naming the field, no --out folder left): --arch stablelm of a model with o_bias,
    with mlp_bias, a parallel model with its own post_attention_layernorm (shared_input_norm
    false), an RMSNorm model, a plain (ungated) MLP model of Phi's layout.
  Refusals (hf ppl, exit 2, stderr naming the field / tensor): qk_layernorm true,
    model_type "stablelm_epoch", num_key_value_heads null, num_key_value_heads absent with 8
    query heads (the default 32 does not divide 8), num_key_value_heads 3 with 4 heads,
    partial_rotary_factor 0.1875 on hd 16 (3 rotary dims, odd), 0.0625 (1 dim), hidden_act
    relu, quantization_config, rope_scaling longrope, top-level rope_theta 10000 with
    rope_parameters.rope_theta 500, top-level partial_rotary_factor 0.25 with rope_parameters'
    0.5, a missing intermediate_size, hidden 36 with 4 heads (odd head_dim); tensors: a
    post_attention_layernorm in a parallel folder, a missing input_layernorm.bias, a missing
    model.norm.bias, a missing post_attention_layernorm.weight (sequential), an o_proj.bias,
    q_proj.bias with use_qkv_bias false, a missing k_proj.bias with use_qkv_bias true, a
    gate_proj.bias, an lm_head.bias, Phi's self_attn.dense instead of o_proj, k_proj.weight
    [H hd, d] for 2 kv heads, lm_head.weight missing (untied), a stored lm_head.weight that
    differs from embed_tokens with tie true.
Tolerances: float64 summed loss / bits per byte 1e-8 relative, perplexity 1e-7 (the RoPE tables
are float32; one float32 ulp of noise on every entry moves the loss by far less: selftest fails
above 5e-9; float64 tables instead move it by ~1e-10 .. 1e-9, which this check therefore cannot
tell from transformers' float32 tables); float32 1e-6; bfloat16 5e-3; greedy ids exact (after a
float32 near-tie, top-2 gap < 1e-4 of max |logit|, the rest of that continuation is not
compared, noted). The q / k weights are kept moderate (std 1.2 / sqrt(d), q/k/v biases 0.25):
with sharper attention (2.5 / sqrt(d), biases 0.4) one float32 ulp of RoPE-table noise moved
the yarn case's loss by 8e-9, and lol (whose float32 tables differ from libm's by such ulps)
was 6.6e-9 away there; now the largest ulp-noise effect is 3.2e-9 (yarn) and the float64
tables move a loss by 2e-12 .. 4.6e-10. At the time of writing lol was 7.6e-12 .. 8.8e-10 away
in float64, 4.3e-9 .. 3.2e-8 in float32 and 9e-5 in bfloat16 (264 checks, all agreeing; about
2 minutes on 2 loaded cores).

`selftest` (no lol) checks cached greedy decoding = recomputed full forward, the activation
forms, param counts (stablelm-2-1_6b's 1,644,515,328, stablelm-3b-4e1t's 2,795,443,200), config
reading of the key layouts, the RoPE rule against a direct complex rotation, and the
sensitivity: each alternative reading (parallel read with two norms (the MLP on a second,
default LayerNorm), the MLP on the un-normalized x, sequential instead of parallel and
parallel (one or two norms) instead of sequential, the sequential MLP on input_layernorm(h);
RMSNorm instead of LayerNorm, LayerNorm without mean / bias, without the final norm's bias,
unbiased variance, eps outside the sqrt, another eps; RoPE on all head dims, on the last rd
dims, interleaved pairs, exponents over head_dim, no RoPE, the default share 0.25 / base 10000
instead of the given one; GQA with kv head h mod KV (interleaved) instead of h // G; gate and
up swapped, the other activation; no q/k/v biases; no scale / 1/hd scale / 1/sqrt(rd) scale;
the tied head for an untied model; linear factor ignored / multiplied; yarn over head_dim /
without the attention factor; dynamic read as linear) moves each case's float64 loss by > 20 x
the float64 tolerance (the smallest at the time of writing: LayerNorm eps outside the sqrt on
C, 7.0e-7; eps 1e-6 on F, 7.8e-7; the RoPE-scaling variants repeat A's / B's weights and sweep
only the readings that touch the rotary embedding), and the greedy ids check() compares change
under each in at least one case (the eps / activation readings may not), as they do under
cached decoding that puts every new token at position len(prompt) or restarts the positions at
0. Readings that are the same function for 2 rotary dims (interleaved pairs, exponents over
head_dim) are not swept on F. A selftest run takes about 4 minutes on 2 idle cores (7 on 2
loaded ones; the cases run in 2 processes; `selftest --quick` skips the sweep). On a
disagreement check() prints which alternative reading, if any, lol matches.

ASSUMED (where neither the brief nor transformers decides):
  * hf ppl windows: non-overlapping windows of --context tokens, positions restart at 0 in each
    window, no BOS (docs/hf.md); --context 0 -> min(512, max_position_embeddings).
  * RoPE bases / factors are chosen so the float32 pow / division is exact (10000, 4096 with
    rd 2, 4, 8; factor 2), so torch's powf and libm cannot differ.
  * yarn with partial rotary uses dim = rd (modeling_rope_utils reads partial_rotary_factor);
    no original_max_position_embeddings key is given. transformers 4.38's StableLmConfig
    accepted only linear / dynamic; docs/hf.md accepts the Llama family's types ("as Phi's").
  * StableLmConfig has no head_dim key; none is written.
  * hf info's summary lines are checked in the form lol printed them when this was written
    (see check_info: "heads H query, KV key/value, head_dim hd", "rotary dims rd of hd ...",
    "positions 64, rope_theta ..., layer_norm_eps ...", "rope scaling none" / "linear (factor
    2)", "vocab 300 (tied ...)" / not tied, a "block" line naming sequential / parallel and
    LayerNorms); docs/hf.md does not fix the format.
  * Without eos_token_id in config.json, StableLmConfig's default 0 is the EOS id (the same as
    the tokenizer's eos_token here): hf info's "stop tokens" line lists 0 only.
  * A rope_scaling object that carries rope_theta / partial_rotary_factor counts like
    rope_parameters (transformers 5 reads rope_scaling as rope_parameters).
  * A tied folder's stored lm_head.weight equal to embed_tokens is tolerated, a different one
    refused (docs/hf.md, "Tolerated: ... with tied embeddings an lm_head.weight equal to
    model.embed_tokens.weight"; transformers would re-tie it silently).
  * Refusal messages name the field or tensor (any one of the listed needles).
  * Export: the exported config.json is judged by what StableLmConfig would read from it
    (absent keys -> its defaults); gelu_new / gelu_fast would be accepted for a
    gelu_pytorch_tanh model. A model StableLmForCausalLM cannot hold (o_proj / MLP biases, a
    parallel block with two norms, RMSNorms) must be refused by --arch stablelm, exit 2 naming
    the field.
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
import gpt_neox_reference as nx  # noqa: E402  (tokenizer, GELU forms, RoPE tables, LayerNorm, storage rounding)

_mul = operator.mul
DROP = object()
DIAGNOSE = [6]
TOL = {"float64": 1e-8, "float32": 1e-6, "bfloat16": 5e-3}

TEXT = nx.TEXT
encode = nx.encode
token_bytes = nx.token_bytes
EOT = nx.EOT  # 0, <|endoftext|>

gelu_tanh, gelu_fast, gelu_exact, relu = nx.gelu_tanh, nx.gelu_fast, nx.gelu_exact, nx.relu
inv_freq_f32, yarn_inv_freq, rope_tables, rope_apply = nx.inv_freq_f32, nx.yarn_inv_freq, nx.rope_tables, nx.rope_apply
layernorm, f16, store, windows, mean_ce = nx.layernorm, nx.f16, nx.store, nx.windows, nx.mean_ce


def silu(x):
    if x >= 0.0:
        return x / (1.0 + math.exp(-x))
    e = math.exp(x)
    return x * e / (1.0 + e)


ACTS = {"silu": silu, "gelu": gelu_exact, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh,
        "gelu_fast": gelu_fast, "relu": relu}


def matvec(W, x):
    return [sum(map(_mul, row, x)) for row in W]


# ---------------------------------------------------------------- config (StableLmConfig)
def slm_params(cfg):
    """the model StableLmConfig describes (its defaults for absent keys)"""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    kv = cfg.get("num_key_value_heads", 32)  # StableLmConfig's default; null is not replaced
    # transformers 5 reads a rope_scaling object as rope_parameters; lol refuses disagreeing
    # values, so any one of them decides
    rp = dict(cfg.get("rope_scaling") or {}, **(cfg.get("rope_parameters") or {}))
    share = cfg.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.25))
    base = cfg.get("rope_theta", rp.get("rope_theta", 10000.0))
    rtype = rp.get("rope_type", rp.get("type", "default"))
    scaling = None if rtype == "default" else (rtype, rp.get("factor"))
    return {"V": cfg.get("vocab_size", 50304), "d": d, "L": cfg["num_hidden_layers"], "H": H, "KV": kv, "hd": hd,
            "P": cfg["max_position_embeddings"], "F": cfg["intermediate_size"],
            "rd": int(hd * share), "base": float(base), "scaling": scaling,
            "act": cfg.get("hidden_act", "silu"), "eps": cfg.get("layer_norm_eps", 1e-5),
            "parallel": cfg.get("use_parallel_residual", False), "qkv_bias": cfg.get("use_qkv_bias", False),
            "tied": cfg.get("tie_word_embeddings", False), "qk_ln": cfg.get("qk_layernorm", False),
            "bos": cfg.get("bos_token_id", 0), "eos": cfg.get("eos_token_id", 0)}


def slm_config(**kw):
    """stablelm-2-1_6b's config.json (as transformers 4.40 saved it), tiny sizes; bos / eos are
    the tokenizer's <|endoftext|> (stablelm-2's 100257, stablelm-3b-4e1t's 0)"""
    c = {"_name_or_path": "stabilityai/stablelm-2-1_6b", "architectures": ["StableLmForCausalLM"],
         "attention_dropout": 0.0, "bos_token_id": EOT, "eos_token_id": EOT, "hidden_act": "silu",
         "hidden_dropout": 0.0, "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 96,
         "layer_norm_eps": 1e-05, "max_position_embeddings": 64, "model_type": "stablelm",
         "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
         "partial_rotary_factor": 0.25, "qk_layernorm": False, "rope_scaling": None, "rope_theta": 10000,
         "tie_word_embeddings": False, "torch_dtype": "float32", "transformers_version": "4.40.0",
         "use_cache": True, "use_parallel_residual": False, "use_qkv_bias": True, "vocab_size": 300}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def param_count(cfg):
    """transformers' num_parameters() (a tied lm_head counted once)"""
    p = slm_params(cfg)
    d, F, H, KV, hd = p["d"], p["F"], p["H"], p["KV"], p["hd"]
    per = 2 * d * (1 if p["parallel"] else 2) + (H + 2 * KV) * hd * (d + (1 if p["qkv_bias"] else 0)) \
        + d * H * hd + 3 * d * F
    return p["V"] * d * (1 if p["tied"] else 2) + p["L"] * per + 2 * d


# ---------------------------------------------------------------- weights (StableLmForCausalLM names)
def slm_weights(cfg, seed, emb_std=0.5, qk=1.2, gate=2.5, up=1.5, lnf_std=0.3, head_std=0.3, qkb=0.25):
    """name -> (shape, flat float32-rounded values). LayerNorm weights N(1, 0.3), biases N(0, 0.3);
    q / k rows larger than v's (attention far from uniform); gate pre-activations of a few units"""
    rng = random.Random(seed)
    p = slm_params(cfg)
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
        if not p["parallel"]:
            put(pre + "post_attention_layernorm.weight", [d], 0.3, 1.0)
            put(pre + "post_attention_layernorm.bias", [d], 0.3)
        put(pre + "self_attn.q_proj.weight", [H * hd, d], qk / math.sqrt(d))
        put(pre + "self_attn.k_proj.weight", [KV * hd, d], qk / math.sqrt(d))
        put(pre + "self_attn.v_proj.weight", [KV * hd, d], 1.2 / math.sqrt(d))
        if p["qkv_bias"]:
            put(pre + "self_attn.q_proj.bias", [H * hd], qkb)
            put(pre + "self_attn.k_proj.bias", [KV * hd], qkb)
            put(pre + "self_attn.v_proj.bias", [KV * hd], qkb)
        put(pre + "self_attn.o_proj.weight", [d, H * hd], 1.0 / math.sqrt(H * hd))
        put(pre + "mlp.gate_proj.weight", [F, d], gate / math.sqrt(d))
        put(pre + "mlp.up_proj.weight", [F, d], up / math.sqrt(d))
        put(pre + "mlp.down_proj.weight", [d, F], 1.2 / math.sqrt(F))
    put("model.norm.weight", [d], lnf_std, 1.0)
    put("model.norm.bias", [d], 0.3)
    if not p["tied"]:
        put("lm_head.weight", [V, d], head_std)
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
    nx.write_tokenizer(folder, cfg.get("max_position_embeddings", 64))
    write_st(os.path.join(folder, "model.safetensors"),
             {k: (v[0], v[1], v[2] if len(v) > 2 else dtype) for k, v in T.items()}, {"format": "pt"})


# ---------------------------------------------------------------- the model
class SlmRef:
    """StableLmForCausalLM in float64. Keyword arguments select alternative readings
    (sensitivity checks and the diagnosis of a disagreement):
      residual None (the config's) / "sequential" / "parallel";
      par_norm (parallel blocks' MLP input): "shared" (input_layernorm's n), "post" (a
          post_attention_layernorm of x: GPT-NeoX; a default LayerNorm where the folder has none),
          "none" (the un-normalized x);
      seq_norm (sequential blocks' MLP norm): "post" (post_attention_layernorm), "input"
          (input_layernorm reused; also what a parallel folder read as sequential gets)"""

    def __init__(self, cfg, T, residual=None, par_norm="shared", seq_norm="post", gqa="block", rd=None,
                 rope_layout="half", expo="rd", base=None, scaling="cfg", yarn_dim=None, yarn_att=True,
                 rope_f64=False, qkv_bias=True, act=None, gate_up="hf", attn_scale="hf", ln_center=True,
                 ln_bias=True, ln_unbiased=False, ln_eps_out=False, eps=None, final_bias=True, head=None,
                 decode_pos="hf", ulp_noise=None):
        p = slm_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.KV, self.V, self.P, self.hd = p["d"], p["L"], p["H"], p["KV"], p["V"], p["P"], p["hd"]
        self.G = self.H // self.KV
        self.parallel = p["parallel"] if residual is None else residual == "parallel"
        self.par_norm, self.seq_norm, self.gqa = par_norm, seq_norm, gqa
        self.rd = p["rd"] if rd is None else rd
        self.rope_layout = rope_layout
        self.eps = p["eps"] if eps is None else eps
        self.ln_kw = {"center": ln_center, "bias": ln_bias, "unbiased": ln_unbiased, "eps_out": ln_eps_out}
        self.final_bias = final_bias
        self.act = ACTS[act or p["act"]]
        self.gate_up = gate_up
        self.scale = {"hf": self.hd ** -0.5, "none": 1.0, "1/hd": 1.0 / self.hd,
                      "rd": self.rd ** -0.5 if self.rd else 1.0}[attn_scale]
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

        def rows(name, shape):
            s, v = T[name][0], T[name][1]
            assert list(s) == list(shape), (name, s, shape)
            return [list(v[i * s[1]:(i + 1) * s[1]]) for i in range(s[0])]

        def lin(name, n_out, n_in, has_bias):
            M = rows(name + ".weight", [n_out, n_in])
            bb = list(T[name + ".bias"][1]) if has_bias else [0.0] * n_out
            assert len(bb) == n_out, name
            return M, bb

        def ln(name):
            return list(T[name + ".weight"][1]), list(T[name + ".bias"][1])
        self.embed = rows("model.embed_tokens.weight", [self.V, d])
        self.unit_ln = ([1.0] * d, [0.0] * d)
        qb = p["qkv_bias"] and qkv_bias
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            ly = {"ln1": ln(pre + "input_layernorm"),
                  "q": lin(pre + "self_attn.q_proj", H * hd, d, qb),
                  "k": lin(pre + "self_attn.k_proj", KV * hd, d, qb),
                  "v": lin(pre + "self_attn.v_proj", KV * hd, d, qb),
                  "o": rows(pre + "self_attn.o_proj.weight", [d, H * hd]),
                  "gate": rows(pre + "mlp.gate_proj.weight", [F, d]),
                  "up": rows(pre + "mlp.up_proj.weight", [F, d]),
                  "down": rows(pre + "mlp.down_proj.weight", [d, F])}
            has_post = (pre + "post_attention_layernorm.weight") in T
            ly["ln2"] = ln(pre + "post_attention_layernorm") if has_post else None
            self.layers.append(ly)
        self.lnf = ln("model.norm")
        if not final_bias:
            self.lnf = (self.lnf[0], [0.0] * d)
        tied = p["tied"] if head is None else head == "tied"
        self.lm_head = self.embed if tied else rows("lm_head.weight", [self.V, d])
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps, **self.ln_kw)

    def _lin(self, Mb, x):
        M, b = Mb
        return [s + bb for s, bb in zip(matvec(M, x), b)]

    def _mlp(self, ly, m):
        g, u = matvec(ly["gate"], m), matvec(ly["up"], m)
        if self.gate_up == "swapped":
            g, u = u, g
        act = self.act
        return matvec(ly["down"], [act(a) * b for a, b in zip(g, u)])

    def _kvhead(self, h):
        return h // self.G if self.gqa == "block" else h % self.KV

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, KV, hd, rd = self.H, self.KV, self.hd, self.rd
        out = []
        for t, x in enumerate(X):
            pos = pos0 + t
            n = self._ln(x, ly["ln1"])
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
            a = matvec(ly["o"], att)
            if self.parallel:
                if self.par_norm == "shared":
                    m_in = n
                elif self.par_norm == "post":
                    m_in = self._ln(x, ly["ln2"] or self.unit_ln)
                else:
                    m_in = x
                mo = self._mlp(ly, m_in)
                out.append([m_ + a_ + x_ for m_, a_, x_ in zip(mo, a, x)])
            else:
                hmid = [a_ + x_ for a_, x_ in zip(a, x)]
                wb = ly["ln2"] if (self.seq_norm == "post" and ly["ln2"] is not None) else ly["ln1"]
                mo = self._mlp(ly, self._ln(hmid, wb))
                out.append([m_ + h_ for m_, h_ in zip(mo, hmid)])
        return out

    def head(self, h):
        return matvec(self.lm_head, self._ln(h, self.lnf))

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
    p = slm_params(cfg)
    hd, rd, H, KV = p["hd"], p["rd"], p["H"], p["KV"]
    sc = p["scaling"]
    other = {"silu": "gelu"}.get(p["act"], "silu")
    other_eps = 1e-6 if p["eps"] != 1e-6 else 1e-5
    if p["parallel"]:
        out = [("two norms: the MLP on a second, default LayerNorm of x (GPT-NeoX parallel)", {"par_norm": "post"}),
               ("the MLP on the un-normalized block input", {"par_norm": "none"}),
               ("sequential residual (MLP on input_layernorm(x + attn))", {"residual": "sequential"})]
    else:
        out = [("parallel with two norms: y = x + attn(ln1 x) + mlp(ln2 x) (GPT-NeoX)",
                {"residual": "parallel", "par_norm": "post"}),
               ("parallel with one norm: y = x + attn(ln1 x) + mlp(ln1 x) (Phi)", {"residual": "parallel"}),
               ("sequential with the MLP on input_layernorm(h), post_attention_layernorm unused",
                {"seq_norm": "input"})]
    if rd > 2:  # one pair: interleaved = rotate-half
        out.append(("RoPE pairs interleaved (2i, 2i+1), GPT-J style", {"rope_layout": "interleaved"}))
    out.append(("no RoPE", {"rope_layout": "none"}))
    if rd < hd:
        if not (sc is not None and sc[0] == "yarn") and rd > 2:  # one frequency: inv_freq[0] = 1 either way
            out.append(("inv_freq exponents over head_dim, not the rotary dims", {"expo": "hd"}))
        out += [("RoPE on all head dims (partial_rotary_factor ignored)", {"rd": hd}),
                ("RoPE on the last rotary dims", {"rope_layout": "last"})]
    dflt = int(hd * 0.25)
    if rd != dflt and dflt % 2 == 0 and dflt >= 2:
        out.append(("partial_rotary_factor 0.25 (the default) instead of the given one", {"rd": dflt}))
    if p["base"] != 10000.0:
        out.append(("RoPE base 10000 (the default) instead of %g" % p["base"], {"base": 10000.0}))
    if 1 < KV < H:
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
    if p["qkv_bias"]:
        out.append(("no q/k/v biases (use_qkv_bias ignored)", {"qkv_bias": False}))
    if not p["tied"]:
        out.append(("the tied head (embed_tokens) for an untied model", {"head": "tied"}))
    out += [("gate_proj and up_proj swapped: down(act(up x) * gate x)", {"gate_up": "swapped"}),
            ("activation %s" % other, {"act": other}),
            ("no attention scale", {"attn_scale": "none"}),
            ("attention scale 1/head_dim", {"attn_scale": "1/hd"})]
    if rd < hd:
        out.append(("attention scale rotary_dims^-1/2", {"attn_scale": "rd"}))
    out += [("RMSNorm (weight only, no mean, no bias) instead of LayerNorm", {"ln_center": False, "ln_bias": False}),
            ("LayerNorm without the mean subtraction", {"ln_center": False}),
            ("LayerNorm without bias", {"ln_bias": False}),
            ("final model.norm without its bias", {"final_bias": False}),
            ("LayerNorm with the unbiased (n-1) variance", {"ln_unbiased": True}),
            ("LayerNorm eps outside the sqrt", {"ln_eps_out": True}),
            ("layer_norm_eps %g" % other_eps, {"eps": other_eps})]
    if p["eps"] != 1e-5:
        out.append(("layer_norm_eps 1e-5 (the default) instead of %g" % p["eps"], {"eps": 1e-5}))
    return out


DECODE_ALTS = [("cached decoding: every new token at position len(prompt)", {"decode_pos": "stuck"}),
               ("cached decoding: new tokens' positions restart at 0", {"decode_pos": "restart"})]
WEAK = ("activation", "layer_norm_eps", "LayerNorm with the unbiased", "LayerNorm eps outside",
        "yarn without", "RoPE tables")


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, seed, slm_weights keyword arguments)"""
    A = slm_config()
    B = slm_config(_name_or_path=DROP, hidden_size=96, num_attention_heads=6, num_key_value_heads=2,
                   num_hidden_layers=2, intermediate_size=96, partial_rotary_factor=DROP, rope_theta=DROP,
                   rope_scaling=DROP, torch_dtype=DROP, dtype="float32", transformers_version="5.0.0",
                   layer_norm_eps=1e-3, use_parallel_residual=True, use_qkv_bias=False, tie_word_embeddings=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 4096.0, "partial_rotary_factor": 0.5})
    C = slm_config(_name_or_path=DROP, hidden_size=48, num_attention_heads=6, num_key_value_heads=3,
                   num_hidden_layers=2, intermediate_size=64, partial_rotary_factor=0.5,
                   rope_scaling={"type": "linear", "factor": 2.0}, transformers_version="4.45.0")
    D = slm_config(_name_or_path=DROP, num_hidden_layers=2, num_key_value_heads=4, hidden_act="gelu_pytorch_tanh",
                   torch_dtype="float16")
    E = slm_config(_name_or_path=DROP, hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
                   num_hidden_layers=2, intermediate_size=64, partial_rotary_factor=0.5, hidden_act="gelu",
                   use_parallel_residual=True, torch_dtype="bfloat16")
    F = {"architectures": ["StableLmForCausalLM"], "model_type": "stablelm", "vocab_size": 300, "hidden_size": 256,
         "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 32, "max_position_embeddings": 64}
    return {"A": (A, 801, {"emb_std": 0.02}), "B": (B, 802, {}), "C": (C, 803, {}),
            "D": (D, 804, {"emb_std": 0.3}), "E": (E, 805, {"emb_std": 0.1}), "F": (F, 806, {})}


STORAGE = {"D": "F16", "E": "BF16"}
NAMES = {"A": "stablelm2-like", "B": "stablelm-v5-parallel-tied", "C": "stablelm-linear-partial-gqa",
         "D": "stablelm-f16-geglu", "E": "stablelm-bf16-parallel-mqa", "F": "stablelm-defaults-only-sizes"}


def variant_table():
    """RoPE-scaling configs on the weights of A (sequential, 4 of 16 dims) / B (parallel, 8 of 16)"""
    A, B = case_table()["A"][0], case_table()["B"][0]
    rpB = dict(B["rope_parameters"])
    return {"stablelm-dynamic-partial": (dict(A, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "A"),
            "stablelm-yarn-partial": (dict(A, rope_scaling={"rope_type": "yarn", "factor": 4.0}), "A"),
            "stablelm-v5-linear-parallel": (dict(B, rope_parameters=dict(rpB, rope_type="linear", factor=2.0)), "B"),
            "stablelm-v5-dynamic-parallel": (dict(B, rope_parameters=dict(rpB, rope_type="dynamic", factor=2.0)),
                                             "B")}


def key_variants():
    """other config.json layouts of the same model: tag -> (config, the case whose weights it uses, how)"""
    tab = case_table()
    A, B = tab["A"][0], tab["B"][0]
    rs_key = {k: v for k, v in B.items() if k != "rope_parameters"}
    rs_key.update(rope_scaling={"rope_type": "default", "rope_theta": 4096.0, "partial_rotary_factor": 0.5})
    v4 = {k: v for k, v in B.items() if k not in ("rope_parameters", "dtype")}
    v4.update(rope_theta=4096, partial_rotary_factor=0.5, rope_scaling=None, torch_dtype="float32",
              transformers_version="4.40.0")
    return {"stablelm-v5-rope_scaling-key": (rs_key, "B", None),
            "stablelm-v4-keys-parallel": (v4, "B", None),
            "stablelm-partial-0.3-truncates": (dict(A, partial_rotary_factor=0.3), "A", None),
            "stablelm-tied-stored-head": (B, "B", "stored_head")}


def key_variant_weights(W, src, how):
    if how == "stored_head":
        T = dict(W[src])
        T["lm_head.weight"] = T["model.embed_tokens.weight"]
        return T
    return W[src]


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32"):
        self.ck, self.tag, self.cfg = ck, tag, cfg
        write_folder(os.path.join(ck.work, tag), cfg, T, dtype)
        self.T = store(T, dtype)
        self.model = SlmRef(cfg, self.T)
        self.alts = {}
        p = slm_params(cfg)
        print("[%s] %s storage, layers %d, hidden %d, heads %d / kv %d, rotary dims %d of %d, base %g%s, act %s, "
              "eps %g, %s, qkv bias %s, tied %s" % (
                  tag, dtype, p["L"], p["d"], p["H"], p["KV"], p["rd"], p["hd"], p["base"],
                  ", scaling %s" % (p["scaling"],) if p["scaling"] else "", p["act"], p["eps"],
                  "parallel" if p["parallel"] else "sequential", p["qkv_bias"], p["tied"]), flush=True)

    def alt(self, kw):
        key = json.dumps(kw, sort_keys=True)
        if key not in self.alts:
            self.alts[key] = SlmRef(self.cfg, self.T, **kw)
        return self.alts[key]

    def ppl(self, ids, context, dtype="float64", data="text.txt"):
        ck = self.ck
        rtol = TOL[dtype]
        eff = context or min(512, self.model.P)
        out = os.path.join(ck.work, "ppl_%s_%s_%d.json" % (self.tag, dtype, context))
        r = ck.run(["hf", "ppl", self.tag, "--data", data, "--context", context, "--dtype", dtype,
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
                print("    alternative %-70s loss_sum %.12g%s" % (name, a, "   <-- lol matches" if abs(
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
        """without --no-stop: the ids up to and including the first EOS (0)"""
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
        return check_info(self.ck, self.tag, self.cfg, layout)


def check_info(ck, tag, cfg, layout=False):
    r = ck.run(["hf", "info", tag, "--check"], expect_rc=None)
    ck.equal("%s hf info --check exits 0" % tag, r.returncode, 0)
    if r.returncode != 0:
        return None
    ck.equal("%s hf info names StableLmForCausalLM" % tag, "StableLmForCausalLM" in r.stdout, True)
    ck.equal("%s hf info --check: all tensors present" % tag, "all tensors present" in r.stdout, True)
    m = re.search(r"parameters\s+([\d,]+)", r.stdout)
    if m:
        ck.equal("%s hf info parameters (transformers' num_parameters())" % tag,
                 int(m.group(1).replace(",", "")), param_count(cfg))
    else:
        ck.fail("%s: hf info prints no parameter count" % tag)
    # ASSUMED: hf info's summary lines (keys as lol prints them) describe the model read here
    p = slm_params(cfg)
    lines = {}
    for l_ in r.stdout.splitlines():
        mm = re.match(r"(\S+(?: \S+)?)\s{2,}(.*)", l_)
        if mm:
            lines.setdefault(mm.group(1), mm.group(2))
    rot = lines.get("rotary dims")
    ck.equal("%s hf info 'rotary dims' line [ASSUMED]: %r" % (tag, rot),
             (rot or "").startswith("%d of %d" % (p["rd"], p["hd"])), True)
    pos = lines.get("positions", "")
    mb = re.search(r"rope_theta ([\d.e+-]+)", pos)
    me = re.search(r"layer_norm_eps ([\d.e+-]+)", pos)
    ck.equal("%s hf info rope_theta / layer_norm_eps [ASSUMED]: %r" % (tag, pos),
             (float(mb.group(1)) if mb else None, float(me.group(1)) if me else None), (p["base"], p["eps"]))
    voc = lines.get("vocab", "")
    ck.equal("%s hf info vocab line: tied %s [ASSUMED]: %r" % (tag, p["tied"], voc),
             "tied" in voc and "untied" not in voc and "not tied" not in voc, p["tied"])
    sc = lines.get("rope scaling", "")
    if p["scaling"]:
        ck.equal("%s hf info rope scaling line [ASSUMED]: %r" % (tag, sc),
                 sc.startswith(p["scaling"][0]) and ("factor %g" % p["scaling"][1]) in sc, True)
    else:
        ck.equal("%s hf info rope scaling none [ASSUMED]" % tag, sc, "none")
    hl = lines.get("heads", "")
    heads = re.search(r"(\d+) query, (\d+) key/value, head_dim (\d+)", hl)
    ck.equal("%s hf info heads line (query, key/value, head_dim) [ASSUMED]: %r" % (tag, hl),
             tuple(int(x) for x in heads.groups()) if heads else None, (p["H"], p["KV"], p["hd"]))
    blk = lines.get("block", "")
    kind = "parallel" if p["parallel"] else "sequential"
    ck.equal("%s hf info block line names %s and LayerNorm [ASSUMED]: %r" % (tag, kind, blk),
             (kind in blk, "LayerNorm" in blk, ("parallel" if not p["parallel"] else "sequential") in blk),
             (True, True, False))
    ma = re.search(r"MLP gate (\w+)", blk)
    tanh = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")
    ga = ma.group(1) if ma else None
    ck.equal("%s hf info block line: 'MLP gate <hidden_act>' and q/k/v biases iff use_qkv_bias [ASSUMED]" % tag,
             ("tanh GELU" if ga in tanh else ga, "q/k/v biases" in blk),
             ("tanh GELU" if p["act"] in tanh else p["act"], p["qkv_bias"]))
    if layout:
        claims = (("RMSNorm (rms_norm_eps)", r"rms_?norm"), ("an o_proj / MLP / lm_head bias", r"o_proj.bias|mlp bias"))
        wrong = [w for w, pat in claims if re.search(pat, r.stdout, re.I)]
        ck.equal("%s hf info describes StableLM's layout [ASSUMED]: claims of features StableLM lacks" % tag,
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
EXPORT_BASE = {"architecture": "dense", "n_layers": 2, "norm": "layernorm", "mlp": "gated", "max_seq_len": 64}
EXPORT_MODELS = {
    "export-stablelm2-seq": dict(EXPORT_BASE, d_model=64, n_heads=4, n_kv_heads=2, ffn_hidden=64, qkv_bias=True,
                                 partial_rotary_factor=0.25, activation="silu", rope_theta=10000.0, norm_eps=1e-5,
                                 tie_word_embeddings=False),
    "export-stablelm-parallel-tied": dict(EXPORT_BASE, d_model=48, n_heads=6, n_kv_heads=2, ffn_hidden=64,
                                          parallel_residual=True, shared_input_norm=True, partial_rotary_factor=0.5,
                                          activation="gelu", rope_theta=4096.0, norm_eps=1e-3,
                                          tie_word_embeddings=True),
    # lol's defaults where StableLmConfig's differ: partial_rotary_factor 1 (0.25), kv heads = heads (32),
    # lol's rope_theta / norm_eps: the export must write every one of them
    "export-stablelm-lol-defaults": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=4, ffn_hidden=48)}


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
    """train tiny dense models of StableLM's layout for 3 steps, `lol export --hf` (the default
    --arch): config.json must describe the model in StableLmConfig's keys, the tensors must be the
    checkpoint's bit for bit, and `hf ppl --dtype float64` of the export must equal this reference
    on the exported tensors"""
    w = ck.work
    print("[export] dense models of StableLM's layout -> StableLmForCausalLM folders", flush=True)
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
                 (cfg.get("architectures"), cfg.get("model_type")), (["StableLmForCausalLM"], "stablelm"))
        # the trained model: the checkpoint's own config.json (lol writes its resolved values; fields
        # absent there take docs/baselines.md's defaults: partial_rotary_factor 1, activation silu)
        mc = json.load(open(os.path.join(ckpt, "config.json")))
        for k_, v_ in m.items():
            if k_ != "architecture" and mc.get(k_, v_) != v_:
                ck.fail("%s: the checkpoint's config.json has %s = %r, the run config %r" % (tag, k_, mc.get(k_), v_))
        m = dict(m, **{k_: mc[k_] for k_ in ("rope_theta", "norm_eps", "partial_rotary_factor", "activation")
                       if k_ in mc})
        m.setdefault("partial_rotary_factor", 1.0)
        m.setdefault("activation", "silu")
        for k_ in ("rope_theta", "norm_eps"):
            if k_ not in m:
                ck.fail("%s: the checkpoint's config.json has no %s" % (tag, k_))
                m[k_] = None
        d, H, KV, L, F = m["d_model"], m["n_heads"], m["n_kv_heads"], m["n_layers"], m["ffn_hidden"]
        hd = d // H
        try:
            p = slm_params(cfg)
        except (KeyError, TypeError) as e:
            ck.fail("%s: config.json unreadable as StableLmConfig: %r" % (tag, e))
            continue
        keys = ("d", "L", "H", "KV", "F", "P", "rd", "base", "scaling", "act", "eps", "tied", "qk_ln", "parallel",
                "qkv_bias")
        got = {k: p[k] for k in keys}
        want = {"d": d, "L": L, "H": H, "KV": KV, "F": F, "P": m["max_seq_len"],
                "rd": int(hd * m["partial_rotary_factor"]), "base": m["rope_theta"], "scaling": None,
                "act": m["activation"], "eps": m["norm_eps"], "tied": m.get("tie_word_embeddings", False), "qk_ln": False,
                "parallel": m.get("parallel_residual", False), "qkv_bias": m.get("qkv_bias", False)}
        if got["act"] in ("gelu_new", "gelu_fast") and want["act"] == "gelu_pytorch_tanh":
            got["act"] = want["act"]  # the same tanh GELU
        ck.equal("%s: config.json read as StableLmConfig (defaults for absent keys)" % tag, got, want)
        want_t = {k: (v[0], v[1]) for k, v in S.items()}
        got_t = {k: (v[0], v[1]) for k, v in E.items()}
        ck.equal("%s: tensor names = the checkpoint's" % tag, sorted(got_t), sorted(want_t))
        diff = sorted(k for k in want_t if k in got_t and got_t[k] != want_t[k])
        ck.equal("%s: tensors = the checkpoint's bit for bit (names differing)" % tag, diff, [])
        try:
            model = SlmRef(cfg, got_t)
        except (KeyError, AssertionError) as e:
            ck.fail("%s: the exported tensors do not form a StableLmForCausalLM: %r" % (tag, e))
            continue
        expect_names = set(slm_weights(dict(cfg, vocab_size=p["V"]), 0).keys())
        ck.equal("%s: tensor names = StableLmForCausalLM's for this config" % tag, sorted(got_t), sorted(expect_names))
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
    # --dtype bfloat16: the same config, every tensor the checkpoint's rounded to bfloat16
    tag = "export-stablelm2-seq-bf16"
    run = "run_export-stablelm2-seq"
    if os.path.exists(os.path.join(w, run, "latest")):
        ckpt = os.path.join(w, run, open(os.path.join(w, run, "latest")).read().strip())
        S = read_st(os.path.join(ckpt, "model.safetensors"))
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", tag, "--dtype", "bfloat16"])
        if r.returncode == 0:
            cfg = json.load(open(os.path.join(w, tag, "config.json")))
            E = read_st(os.path.join(w, tag, "model.safetensors"))
            ck.equal("%s: every tensor stored BF16" % tag, sorted(set(v[2] for v in E.values())), ["BF16"])
            ck.equal("%s: tensors = the checkpoint's rounded to bfloat16 (names differing)" % tag,
                     sorted(k for k in S if k not in E or list(E[k][1]) != [bf16(x) for x in S[k][1]]), [])
            ck.equal("%s: config.json reads as the float32 export's model" % tag, slm_params(cfg),
                     slm_params(json.load(open(os.path.join(w, "export-stablelm2-seq", "config.json")))))
            out = os.path.join(w, "ppl_%s.json" % tag)
            r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", out,
                        "--threads", 1])
            if r.returncode == 0:
                tot, cnt = mean_ce(SlmRef(cfg, {k: (v[0], v[1]) for k, v in E.items()}), windows(ids, 64))
                ck.close("%s hf ppl --dtype float64 --context 64: loss_sum" % tag,
                         json.load(open(out)).get("loss_sum"), tot, TOL["float64"])
    # models StableLmForCausalLM cannot hold: export --arch stablelm refused naming the field, nothing left
    base = dict(EXPORT_MODELS["export-stablelm2-seq"], n_layers=1)
    for tag, model, needles in (
            ("export-refuse-o_bias", dict(base, o_bias=True), ["o_bias", "o_proj"]),
            ("export-refuse-mlp_bias", dict(base, mlp_bias=True), ["mlp_bias"]),
            ("export-refuse-parallel-two-norms", dict(base, parallel_residual=True),
             ["shared_input_norm", "post_attention_layernorm", "parallel_residual"]),
            ("export-refuse-rmsnorm", dict(base, norm="rmsnorm", qkv_bias=False), ["norm", "layernorm", "rmsnorm"]),
            ("export-refuse-plain-mlp", dict(base, mlp="plain", parallel_residual=True, shared_input_norm=True),
             ["mlp", "gated"])):
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        run = train_run(ck, tag, model, 1)
        if run is None:
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "stablelm"], expect_rc=None)
        ck.compared += 1
        left = os.path.exists(os.path.join(w, tag))
        if r.returncode != 2 or not any(n in r.stderr for n in needles) or left:
            ck.fail("%s: expected exit 2 naming %s and no %s folder left; got exit %d (folder left: %s), %r" % (
                tag, " or ".join(needles), tag, r.returncode, left, r.stderr.strip()[-300:]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


# ---------------------------------------------------------------- check
STOP_PROMPT = None
STOP_PULL = [0.3]


def stop_case():
    """a folder whose greedy continuation reaches <|endoftext|> 0: C's config (without scaling) with
    lm_head row 0 pulled towards the final LayerNorm's bias direction"""
    global STOP_PROMPT
    cfg = dict(case_table()["C"][0], rope_scaling=None)
    T = dict(slm_weights(cfg, 811, emb_std=0.3))
    sh, v = T["lm_head.weight"]
    d = sh[1]
    lnb = T["model.norm.bias"][1]
    v = list(v)
    for j in range(d):
        v[j] = f32(v[j] + STOP_PULL[0] * lnb[j])
    T["lm_head.weight"] = (sh, v)
    STOP_PROMPT = encode("Then the ")
    return cfg, T


SHORT_TEXT_LINES = 2


def short_text():
    return "\n".join(TEXT.split("\n")[:SHORT_TEXT_LINES]) + "\n"


def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    with open(os.path.join(ck.work, "short.txt"), "w", encoding="utf-8") as f:
        f.write(short_text())
    tab = case_table()
    W = {k: slm_weights(cfg, sd, **kw) for k, (cfg, sd, kw) in tab.items()}

    # A: stablelm-2-1_6b's keys: sequential, q/k/v biases, GQA 4 / 2, 4 of 16 rotary dims, silu
    c = Case(ck, NAMES["A"], tab["A"][0], W["A"])
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

    # B: transformers 5's rope_parameters, parallel (one norm), no biases, tied, GQA 6 / 2, base 4096
    c = Case(ck, NAMES["B"], tab["B"][0], W["B"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:5], 30)
    c.generate(ids[100:140], 22)
    c.generate(ids[100:140], 22, "float32")
    c.info(layout=True)

    # C: linear scaling with partial rotary, GQA 6 / 3
    c = Case(ck, NAMES["C"], tab["C"][0], W["C"])
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
        if name in ("stablelm-yarn-partial", "stablelm-v5-linear-parallel"):
            c.info()

    # the same models under other config.json key layouts
    for tag, (cfg, src, how) in key_variants().items():
        c = Case(ck, tag, cfg, key_variant_weights(W, src, how))
        c.ppl(ids, 0)

    # D: F16, GeGLU (tanh), sequential with biases
    c = Case(ck, NAMES["D"], tab["D"][0], W["D"], dtype="F16")
    c.ppl(ids, 0)
    c.generate(ids[30:62], 25)
    c.info()
    # the same model with gelu_fast (transformers' FastGELU: the tanh form with 0.7978845608)
    c = Case(ck, "stablelm-f16-gelu_fast-key", dict(tab["D"][0], hidden_act="gelu_fast"), W["D"], dtype="F16")
    c.ppl(ids, 0)

    # E: BF16, parallel, multi-query, exact GELU gate
    c = Case(ck, NAMES["E"], tab["E"][0], W["E"], dtype="BF16")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:40], 25)
    c.info()

    # F: only the sizes: StableLmConfig's defaults (32 kv heads for 32 query heads, 0.25, ...)
    c = Case(ck, NAMES["F"], tab["F"][0], W["F"])
    c.ppl(encode(short_text()), 0, data="short.txt")
    c.generate(ids[10:30], 20)
    out = c.info()
    m = re.search(r"^stop tokens\s+(.*)$", out or "", re.M)
    # ASSUMED: without eos_token_id, StableLmConfig's default 0 (= the tokenizer's eos) stops
    ck.equal("%s hf info stop tokens: the default eos 0 = the tokenizer's [ASSUMED]" % NAMES["F"],
             sorted(set(int(x) for x in re.findall(r"\b\d+\b", m.group(1)))) if m else None, [EOT])

    # stop at EOS without --no-stop
    cfgS, TS = stop_case()
    c = Case(ck, "stablelm-stop-at-eos", cfgS, TS)
    c.generate_stop(STOP_PROMPT, 30)

    # refusals
    print("[refusals]", flush=True)
    base = slm_config(num_hidden_layers=2, hidden_size=32, intermediate_size=32)  # 4 heads / 2 kv, hd 8 -> 2 dims
    Ts = slm_weights(base, 7)
    par = dict(base, use_parallel_residual=True, use_qkv_bias=False)
    Tp = slm_weights(par, 8)
    refusal(ck, "refuse-qk_layernorm", dict(base, qk_layernorm=True), Ts, ["qk_layernorm"])
    refusal(ck, "refuse-stablelm_epoch", dict(base, model_type="stablelm_epoch"), Ts, ["stablelm_epoch", "model_type"])
    refusal(ck, "refuse-kv-null", dict(base, num_key_value_heads=None), Ts, ["num_key_value_heads"])
    c8 = slm_config(num_hidden_layers=2, hidden_size=64, intermediate_size=32, num_attention_heads=8,
                    num_key_value_heads=DROP, partial_rotary_factor=0.25)
    refusal(ck, "refuse-kv-absent-default-32-of-8-heads", c8, slm_weights(dict(c8, num_key_value_heads=8), 9),
            ["num_key_value_heads"])
    c3 = dict(base, num_key_value_heads=3)
    refusal(ck, "refuse-kv-heads-not-divisor", c3, Ts, ["num_key_value_heads"])
    c16 = slm_config(num_hidden_layers=2, intermediate_size=32)  # hd 16
    T16 = slm_weights(c16, 10)
    refusal(ck, "refuse-rotary-odd", dict(c16, partial_rotary_factor=0.1875), T16, ["partial_rotary_factor"])
    refusal(ck, "refuse-rotary-one-dim", dict(c16, partial_rotary_factor=0.0625), T16, ["partial_rotary_factor"])
    refusal(ck, "refuse-relu", dict(base, hidden_act="relu"), Ts, ["hidden_act"])
    refusal(ck, "refuse-quantization_config", dict(base, quantization_config={"quant_method": "bitsandbytes"}),
            Ts, ["quantization_config"])
    refusal(ck, "refuse-longrope", dict(base, rope_scaling={"rope_type": "longrope", "short_factor": [1.0],
                                                            "long_factor": [2.0], "factor": 2.0}),
            Ts, ["longrope", "rope_scaling"])
    refusal(ck, "refuse-rope_theta-vs-rope_parameters",
            dict(base, rope_parameters={"rope_type": "default", "rope_theta": 500.0}), Ts, ["rope_theta"])
    refusal(ck, "refuse-partial-vs-rope_parameters",
            dict(c16, rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}), T16,
            ["partial_rotary_factor"])
    refusal(ck, "refuse-missing-intermediate_size", {k: v for k, v in base.items() if k != "intermediate_size"}, Ts, ["intermediate_size"])
    c36 = dict(base, hidden_size=36)
    refusal(ck, "refuse-head-dim-odd", c36, slm_weights(c36, 11), ["num_attention_heads", "hidden_size", "head_dim"])
    T = dict(Tp)
    T["model.layers.1.post_attention_layernorm.weight"] = Tp["model.layers.1.input_layernorm.weight"]
    T["model.layers.1.post_attention_layernorm.bias"] = Tp["model.layers.1.input_layernorm.bias"]
    refusal(ck, "refuse-post_attention_layernorm-in-parallel", par, T, ["post_attention_layernorm"])
    T = dict(Ts)
    del T["model.layers.0.input_layernorm.bias"]
    refusal(ck, "refuse-missing-input_layernorm-bias", base, T, ["model.layers.0.input_layernorm.bias"])
    T = dict(Tp)
    del T["model.layers.1.input_layernorm.bias"]
    refusal(ck, "refuse-missing-input_layernorm-bias-parallel", par, T, ["model.layers.1.input_layernorm.bias"])
    T = dict(Ts)
    del T["model.norm.bias"]
    refusal(ck, "refuse-missing-model-norm-bias", base, T, ["model.norm.bias"])
    T = dict(Ts)
    del T["model.layers.1.post_attention_layernorm.weight"]
    refusal(ck, "refuse-missing-post_attention_layernorm", base, T, ["model.layers.1.post_attention_layernorm.weight"])
    T = dict(Ts)
    T["model.layers.0.self_attn.o_proj.bias"] = ([32], [0.1] * 32)
    refusal(ck, "refuse-o_proj-bias", base, T, ["model.layers.0.self_attn.o_proj.bias"])
    T = dict(Tp)
    T["model.layers.0.self_attn.q_proj.bias"] = ([32], [0.1] * 32)
    refusal(ck, "refuse-q_proj-bias-without-use_qkv_bias", par, T, ["model.layers.0.self_attn.q_proj.bias"])
    T = dict(Ts)
    del T["model.layers.1.self_attn.k_proj.bias"]
    refusal(ck, "refuse-missing-k_proj-bias", base, T, ["model.layers.1.self_attn.k_proj.bias"])
    T = dict(Ts)
    T["model.layers.0.mlp.gate_proj.bias"] = ([32], [0.1] * 32)
    refusal(ck, "refuse-gate_proj-bias", base, T, ["model.layers.0.mlp.gate_proj.bias"])
    T = dict(Ts)
    T["lm_head.bias"] = ([300], [0.1] * 300)
    refusal(ck, "refuse-lm_head-bias", base, T, ["lm_head.bias"])
    T = {k.replace("self_attn.o_proj.", "self_attn.dense."): v for k, v in Ts.items()}
    refusal(ck, "refuse-phi-dense", base, T, ["self_attn.dense", "o_proj"])
    T = dict(Ts)
    T["model.layers.0.self_attn.k_proj.weight"] = Ts["model.layers.0.self_attn.q_proj.weight"]  # [H hd, d]
    refusal(ck, "refuse-k_proj-for-query-heads", base, T, ["model.layers.0.self_attn.k_proj.weight"])
    T = dict(Ts)
    del T["lm_head.weight"]
    refusal(ck, "refuse-untied-no-lm_head", base, T, ["lm_head.weight"])
    T = dict(Tp)
    refusal(ck, "refuse-tied-lm_head-differs", dict(par, tie_word_embeddings=True), T, ["lm_head"],
            " (ASSUMED: docs' 'with tied embeddings an lm_head.weight equal to model.embed_tokens.weight')")

    check_export(ck)

    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


# the RoPE-scaling variants repeat their source case's weights: only the readings that touch
# the rotary embedding are swept on them
ROPE_WORDS = ("RoPE", "inv_freq", "partial_rotary_factor", "linear", "yarn", "dynamic")


def sensitivity_cases():
    """(tag, config, source case, greedy prompts, text ids, all alternatives?)"""
    ids = encode(TEXT)
    gen = {"A": [(ids[:3], 30), (ids[60:100], 20)], "B": [(ids[:5], 30), (ids[100:140], 22)],
           "C": [(ids[:4], 30), (ids[30:70], 20)], "D": [(ids[30:62], 25)], "E": [(ids[10:40], 25)],
           "F": [(ids[10:30], 20)]}
    tab = case_table()
    out = [(tag, tab[tag][0], tag, gen[tag], encode(short_text()) if tag == "F" else ids, True)
           for tag in sorted(tab)]
    for name, (cfg, src) in sorted(variant_table().items()):
        out.append((name, cfg, src, [(ids[10:40], 25)], ids, False))
    return out


def sensitivity(i):
    """one case of selftest's sweep: (printed lines, failures, {reading: [tag] if the greedy ids change})"""
    tag, cfg, src, g, tids, every = sensitivity_cases()[i]
    c0, sd, wkw = case_table()[src]
    T = store(slm_weights(c0, sd, **wkw), STORAGE.get(src, "F32"))
    lines, bad, changed = [], [], {}
    wins = windows(tids, 64)
    model = SlmRef(cfg, T)
    ref, cnt = mean_ce(model, wins)
    refs = [model.greedy(p_, n)[0] for p_, n in g]
    if any(len(set(r_)) < 4 for r_ in refs):
        bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
    worst = None
    for name, kws in (("RoPE tables +-1 float32 ulp (noise, the largest of 3 draws)",
                       [{"ulp_noise": sd_} for sd_ in (1, 2, 5)]),
                      ("RoPE tables in float64", [{"rope_f64": True}])):
        rel = max(abs(mean_ce(SlmRef(cfg, T, **kw), wins)[0] - ref) / abs(ref) for kw in kws)
        lines.append("  selftest %-30s %-74s relative change %.2e" % (tag, name, rel))
        if "noise" in name and rel > TOL["float64"] / 2:
            bad.append("%s: one float32 ulp in the RoPE tables moves the loss by %.2e, too close to the "
                       "float64 tolerance" % (tag, rel))
    alts = alternatives(cfg)
    if not every:
        alts = [(n_, kw) for n_, kw in alts if any(w_ in n_ for w_ in ROPE_WORDS)]
    for name, kw in alts:
        alt = SlmRef(cfg, T, **kw)
        a_, _ = mean_ce(alt, wins)
        rel = abs(a_ - ref) / abs(ref)
        worst = rel if worst is None else min(worst, rel)
        if rel < 20 * TOL["float64"]:
            bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
        same = all(alt.greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
        key = re.sub(r"activation \S+", "activation (the other one)", name.split(" instead")[0])
        key = re.sub(r"layer_norm_eps \S+", "layer_norm_eps", key)
        key = re.sub(r"RoPE base 10000.*", "RoPE base 10000 (the default)", key)
        changed.setdefault(key, [])
        if not same:
            changed[key].append(tag)
        lines.append("  selftest %-30s %-74s relative change %.2e%s" % (
            tag, name, rel, "  (greedy ids unchanged)" if same else ""))
    lines.append("  selftest %-30s loss %.8g over %d targets (ppl %.4g); smallest relative change %.2e; greedy %s" % (
        tag, ref, cnt, math.exp(ref / cnt), worst, refs))
    for name, kw in DECODE_ALTS:
        same = all(SlmRef(cfg, T, **kw).greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
        changed.setdefault(name, [])
        if not same:
            changed[name].append(tag)
    return lines, bad, changed


# ---------------------------------------------------------------- selftest
def selftest(quick=False):
    t0 = time.time()
    bad = []
    ids = encode(TEXT)
    print("  selftest: text %d ids, %d bytes" % (len(ids), len(TEXT.encode())))
    for x in (-3.0, -1.0, 0.5, 2.0):
        if abs(gelu_fast(x) - gelu_tanh(x)) > 1e-10:
            bad.append("gelu_fast != gelu_new at %g" % x)
        if abs(silu(x) - x / (1.0 + math.exp(-x))) > 1e-15:
            bad.append("silu at %g" % x)
    if silu(-800.0) != -0.0 and abs(silu(-800.0)) > 1e-300:
        bad.append("silu(-800)")
    # parameter counts of the released models
    s2 = slm_config(vocab_size=100352, hidden_size=2048, num_hidden_layers=24, num_attention_heads=32,
                    num_key_value_heads=32, intermediate_size=5632, max_position_embeddings=4096)
    if param_count(s2) != 1644515328:
        bad.append("stablelm-2-1_6b param count %d" % param_count(s2))
    if slm_params(s2)["rd"] != 16:
        bad.append("stablelm-2-1_6b rotary dims %d" % slm_params(s2)["rd"])
    s3 = {"vocab_size": 50304, "hidden_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 32,
          "intermediate_size": 6912, "max_position_embeddings": 4096}  # stablelm-3b-4e1t: the defaults otherwise
    if param_count(s3) != 2795443200:
        bad.append("stablelm-3b-4e1t param count %d" % param_count(s3))
    if slm_params(s3)["rd"] != 20:
        bad.append("stablelm-3b-4e1t rotary dims %d" % slm_params(s3)["rd"])
    tab = case_table()
    for tag, (cfg, sd, wkw) in tab.items():
        n = sum(len(v[1]) for v in slm_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    want = {"A": (4, 16, 2, 10000.0, "silu", False, True, False), "B": (8, 16, 2, 4096.0, "silu", True, False, True),
            "C": (4, 8, 3, 10000.0, "silu", False, True, False),
            "D": (4, 16, 4, 10000.0, "gelu_pytorch_tanh", False, True, False),
            "E": (4, 8, 1, 10000.0, "gelu", True, True, False), "F": (2, 8, 32, 10000.0, "silu", False, False, False)}
    for tag, w_ in want.items():
        p = slm_params(tab[tag][0])
        got = (p["rd"], p["hd"], p["KV"], p["base"], p["act"], p["parallel"], p["qkv_bias"], p["tied"])
        if got != w_:
            bad.append("case %s read as %s, not %s" % (tag, got, w_))
    if slm_params(tab["C"][0])["scaling"] != ("linear", 2.0):
        bad.append("C's scaling")
    dF = slm_params(tab["F"][0])
    if (dF["eps"], dF["scaling"], dF["bos"], dF["eos"], dF["qk_ln"]) != (1e-5, None, 0, 0, False):
        bad.append("StableLmConfig defaults read as %s" % dF)
    for tag, (cfg, src, how) in key_variants().items():
        pa, pb = slm_params(cfg), slm_params(tab[src][0])
        if pa != pb:
            bad.append("%s: the config reads as %s, not as case %s's %s" % (tag, pa, src, pb))
    # RoPE: rotate-half equals the complex rotation of (x_i + i x_{i+rd/2}) by pos * inv_freq_i
    inv = inv_freq_f32(10000.0, 4)
    if inv != [1.0, f32(0.01)]:
        bad.append("inv_freq %s" % inv)
    if inv_freq_f32(4096.0, 8) != [1.0, 0.125, 1.0 / 64, 1.0 / 512]:
        bad.append("inv_freq base 4096 %s" % inv_freq_f32(4096.0, 8))
    cos, sin = rope_tables(inv, 40)
    x = [0.3 * k - 1.0 for k in range(16)]
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
    # GQA block mapping: C with its kv heads repeated G times as a multi-head model is the same function
    cC, sdC, _ = tab["C"]
    TC = slm_weights(cC, sdC)
    c6 = dict(cC, num_key_value_heads=6)
    TC6 = dict(TC)
    hd = slm_params(cC)["hd"]
    for k, (sh, v) in TC.items():
        if re.search(r"self_attn\.[kv]_proj\.", k):
            per = hd * (sh[1] if len(sh) == 2 else 1)
            blocks = [v[j * per:(j + 1) * per] for j in range(len(v) // per)]
            TC6[k] = ([sh[0] * 2] + list(sh[1:]), [x_ for b_ in blocks for _ in range(2) for x_ in b_])
    a1 = SlmRef(cC, TC).prefill(ids[:20])[0][-1]
    a2 = SlmRef(c6, TC6).prefill(ids[:20])[0][-1]
    if max(abs(u - v) for u, v in zip(a1, a2)) > 1e-12:
        bad.append("repeating kv heads (block GQA) does not keep the function")
    # the tied-with-stored-head variant is the same function
    cB, sdB, _ = tab["B"]
    TB = slm_weights(cB, sdB)
    TBh = key_variant_weights({"B": TB}, "B", "stored_head")
    if SlmRef(cB, TB).prefill(ids[:10])[0] != SlmRef(cB, TBh, head="untied").prefill(ids[:10])[0]:
        bad.append("a stored head equal to embed_tokens changes the function")
    # cached greedy = the full forward recomputed each step
    for tag in ("A", "B", "C", "E"):
        cfg, sd, wkw = tab[tag]
        m = SlmRef(cfg, slm_weights(cfg, sd, **wkw))
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
    st = SlmRef(cfgS, TS).greedy(STOP_PROMPT, 30)[0]
    print("  selftest: stop case greedy %s" % st)
    if EOT not in st or st.index(EOT) < 2:
        bad.append("the stop case's greedy continuation does not reach EOS %d after a few tokens: %s" % (EOT, st))
    if quick:
        print("  selftest (quick): %.1f s" % (time.time() - t0))
        return bad
    # sensitivity (the cases in 2 processes)
    changed = {}
    n_cases = len(sensitivity_cases())
    procs = max(1, min(2, os.cpu_count() or 1))
    if procs > 1:
        import multiprocessing
        with multiprocessing.Pool(procs) as pool:
            results = pool.imap(sensitivity, range(n_cases))
            for lines, bad_, ch in results:
                print("\n".join(lines), flush=True)
                bad.extend(bad_)
                for k, v in ch.items():
                    changed.setdefault(k, []).extend(v)
    else:
        for i in range(n_cases):
            lines, bad_, ch = sensitivity(i)
            print("\n".join(lines), flush=True)
            bad.extend(bad_)
            for k, v in ch.items():
                changed.setdefault(k, []).extend(v)
    for key, tags in sorted(changed.items()):
        print("  selftest: greedy ids compared by check() change under '%s' in cases %s" % (key, tags))
        if not tags and not key.startswith(WEAK):
            bad.append("no case's greedy ids change under '%s'" % key)
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny StableLM folders, run lol, compare with the reference")
    c.add_argument("--lol", default="build/lol")
    c.add_argument("--work", required=True)
    c.add_argument("--quiet", action="store_true", help="print only disagreements and the summary")
    s = sub.add_parser("selftest", help="the reference's own checks (no lol)")
    s.add_argument("--quick", action="store_true", help="skip the sensitivity sweep")
    a = ap.parse_args()
    if a.cmd == "selftest":
        bad = selftest(a.quick)
        for b in bad:
            print("FAIL " + b)
        print("selftest: %d failures" % len(bad))
        sys.exit(1 if bad else 0)
    sys.exit(check(a.lol, a.work, not a.quiet))


if __name__ == "__main__":
    main()
