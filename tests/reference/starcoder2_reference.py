#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face StarCoder2 (Starcoder2ForCausalLM, model_type
"starcoder2": bigcode/starcoder2-3b / -7b / -15b in transformers' native layout) in pure Python
(stdlib only), and a check that `lol hf ppl|generate|info` and `lol export --hf` agree with it on
tiny StarCoder2 folders written here.

  python3 tests/reference/starcoder2_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/starcoder2_reference.py selftest [--quick]   # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_starcoder2.py / configuration_starcoder2.py / modeling_rope_utils.py
and the sliding-window masks (4.38's AttentionMaskConverter with sliding_window, 4.4x's
masking_utils) as remembered, docs/hf.md ("StarCoder2", "Commands", "Sliding-window attention",
"RoPE scaling", "Cached decoding", "Export"), docs/baselines.md (the dense-config fields) and
the brief. It imports qwen2_reference.py (the float32 / bfloat16 rounding, log_softmax / argmax /
top-2 gap, Checker, compare_greedy, parse_ids), gpt_neox_reference.py (the byte-level tokenizer
with <|endoftext|> at id 0 as in StarCoder's tokenizer and starcoder2's config.json bos / eos 0;
the GELU forms, the float32 RoPE tables, rotate-half, yarn's frequencies, LayerNorm, f16 /
storage rounding, windows / mean_ce) and safetensors_io (write_st / read_st), all unchanged; the
StarCoder2 model, its config reading, the weights, the folder writer, the cases and the
comparisons are this file's. Layout of the file after stablelm_reference.py and phi_reference.py,
the window after hf_sliding_reference.py.

Rules of the reference (float64 on the stored, float16- / bfloat16-rounded weights; the RoPE
tables in float32 as transformers builds them):
  x_0[t] = embed_tokens[id_t]   (no position embedding, no embedding scale; embedding_dropout is
      training only; positions 0.. within each forward call / hf ppl window)
  per layer (Starcoder2DecoderLayer), sequential pre-norm:
      h = x + o_proj(attn(input_layernorm(x)));   y = h + mlp(post_attention_layernorm(h))
  attention (Starcoder2Attention): head_dim hd = hidden_size / num_attention_heads, H query
      heads, KV = num_key_value_heads key / value heads; q = n Wq^T + bq [H hd], k = n Wk^T + bk
      [KV hd], v = n Wv^T + bv [KV hd], o = heads Wo^T + bo: q_proj / k_proj / v_proj / o_proj
      are nn.Linear(bias=use_bias); head j = rows j*hd .. (j+1)*hd - 1; query head h attends
      with key / value head h // G, G = H / KV (repeat_kv);
      RoPE over the whole head (rotate-half: for i < hd/2 the pair (i, i + hd/2) turns by
      position * inv_freq[i]); inv_freq[i] = float32(1 / float32(base ** float32(2i / hd))),
      angle = float32(position * inv_freq[i]), cos / sin in float32;
      scores = q.k * hd^-1/2, causal softmax; with sliding_window W, query i sees key j iff
      i - W < j <= i (W keys, its own included; 4.38's `tril(ones, diagonal=-W)` masked out,
      4.4x masking_utils' sliding_window_overlay: kv_idx > q_idx - W), on every layer;
  MLP (Starcoder2MLP): c_proj(act(c_fc(m))), both nn.Linear(bias=use_bias), no gate.
  logits = model.norm(x_L) lm_head.weight^T   (lm_head: nn.Linear(bias=False); = embed_tokens
      when tie_word_embeddings)
  LayerNorm (nn.LayerNorm(hidden_size, eps=norm_epsilon), every norm incl. the final model.norm):
      (x - mean) / sqrt(var + eps) * w + b, var the biased (1/n) variance.
  act (hidden_act, ACT2FN): "gelu_pytorch_tanh" (default) / "gelu_new" tanh GELU; "gelu_fast"
      the same with 0.7978845608; "gelu" exact (erf).
  RoPE scaling (rope_scaling, or rope_parameters' rope_type): "linear": inv_freq / factor
      (float32); "dynamic": plain RoPE within max_position_embeddings (every window / generation
      here stays within it); "yarn": as _compute_yarn_parameters (dim = head_dim), cos / sin
      times 0.1 ln(factor) + 1.
  Starcoder2Config defaults: vocab 49152, num_key_value_heads 2 (no null -> heads fallback:
      an explicit null fails in Starcoder2Attention, so lol must refuse it), hidden_act
      "gelu_pytorch_tanh", norm_epsilon 1e-5, use_bias true, sliding_window None (full),
      rope_theta 10000, rope_scaling None, bos / eos 50256, tie_word_embeddings true
      (PretrainedConfig's default: Starcoder2Config does not take the argument).
  Tensors: model.embed_tokens.weight, model.layers.{i}.{input_layernorm,post_attention_layernorm}
      .{weight,bias}, model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ .bias with use_bias),
      model.layers.{i}.mlp.{c_fc,c_proj}.weight (+ .bias with use_bias), model.norm.{weight,bias},
      lm_head.weight (untied only; tolerated when equal to the embeddings, docs/hf.md).
  num_parameters() = V d (1 tied, 2 untied) + L (4d + (H + 2 KV) hd d + d H hd + 2 d F
      + use_bias ((H + 2 KV) hd + d + F + d)) + 2d   (starcoder2-3b: 3,030,371,328).

Cases (vocab_size 300 > the tokenizer's 260 ids, max_position_embeddings 64, GPT-NeoX-style
byte-level tokenizer as gpt_neox_reference writes it: <|endoftext|> 0 (bos / eos), <|padding|> 1,
byte b = id 2 + b, merges "Ġt" 258 / "he" 259; a text of 335 tokens); head_dim 8 or 16 with
RoPE bases 10000 / 4096 (hd 8) or 65536 (hd 16), for which float32 pow is exact:
  A starcoder2-3b-like: starcoder2-3b's config.json keys (norm_type, mlp_type, dropouts,
    use_bias true, no tie_word_embeddings key -> tied, bos / eos 0, gelu_pytorch_tanh,
    norm_epsilon 1e-5), sliding_window 5 (binding), hidden 32, 4 heads / 2 kv heads (hd 8),
    3 layers, intermediate 96; embeddings of std 0.02 (layer 0's LayerNorm then tells eps 1e-5
    from 1e-6). ppl float64 --context 0 (= 64), 6 (the window cannot bind), 7 (it binds at one
    position), 16; float32 64; generate float64 (3 + 30, 20 + 25: the prompt is longer than W),
    float32 (20 + 25), --prompt text, --max-new 30 after 50 ids (reduced to 14); info --check.
  B starcoder2-nobias-mqa-untied: use_bias false, 4 heads / 1 kv head, untied (stored lm_head),
    exact gelu, norm_epsilon 1e-3, rope_theta 4096, sliding_window 7, 2 layers. ppl float64 0 /
    9, float32; generate float64 / float32; info --check.
  C starcoder2-linear-full-gqa: full attention (sliding_window null), rope_scaling {"type":
    "linear", "factor": 2.0}, 6 heads / 2 kv (G 3), hidden 48, gelu_new, 2 layers, biases,
    tied. ppl 0 / 9 / float32; generate; info.
  D starcoder2-f16-mha-hd16: F16 storage, 2 heads / 2 kv (hd 16), rope_theta 65536, gelu_fast,
    sliding_window 6: ppl float64 0 / 16, generate, info.
  E starcoder2-bf16-untied: BF16 storage, 4 / 2, sliding_window 5, untied, biases: ppl float64
    (on the bf16-rounded weights), float32, bfloat16; generate float64; info.
  F starcoder2-defaults-only-sizes: only architectures / model_type / the six sizes: the
    defaults decide (2 kv heads of 4, tanh GELU, 1e-5, biases, tied, full attention, base
    10000, bos / eos 50256 -- outside this vocabulary, ASSUMED harmless: transformers never
    checks it); 1 layer. ppl on a shorter text, generate, info --check.
  Variants on A's weights: dynamic / yarn / linear scaling with the window (ppl, generate);
    key layouts (ppl float64, the same model as A): transformers 5's rope_parameters + dtype,
    layer_types all "sliding_attention", a stray layer_norm_epsilon 1e-2 (not a
    Starcoder2Config argument: ignored, ASSUMED from the config class), a tied folder's stored
    lm_head equal to the embeddings; full-attention equivalents (against the full-attention
    reference): sliding_window 64 (= positions), 1000, null, absent, layer_types all
    "full_attention" without a window; sliding_window 63 (binds at the last position of a
    64-token window only).
  starcoder2-stop-at-eos: a folder whose greedy continuation reaches <|endoftext|> 0, run without
    --no-stop: the ids up to and including it.
  hf info --check: exit 0, names Starcoder2ForCausalLM, "all tensors present", parameters =
    num_parameters(); ASSUMED from lol's summary format: see check_info (heads / head_dim,
    rope_theta / eps, tied, a line naming the window W for a windowed folder and none for full
    attention).
  Export (check_export): dense models of StarCoder2's layout ("norm": "layernorm", "mlp":
    "plain", sequential, qkv / o / mlp biases all on or all off) trained 3 steps on a byte
    corpus -- W 5 sliding on every layer with 4 heads / 2 kv, biases, tanh GELU, tied; full
    attention with 4 / 2, no biases, exact gelu, untied, rope_theta 4096, norm_eps 1e-3; W 6
    with multi-head attention (num_key_value_heads 4 must be written: the default is 2), exact
    gelu, lol's defaults otherwise (untied); `lol export --hf` with the default --arch and with
    --arch starcoder2 (the same config.json): Starcoder2ForCausalLM, config.json read with
    Starcoder2Config's rules gives the trained model (num_key_value_heads, use_bias,
    tie_word_embeddings, hidden_act, norm_epsilon, sliding_window written where its defaults
    differ), the tensors are the checkpoint's bit for bit (up_proj -> mlp.c_fc, down_proj ->
    mlp.c_proj) and exactly Starcoder2ForCausalLM's names, and hf ppl float64 of the export
    equals this reference on the exported tensors (with a binding window: text windows of 64
    tokens); the first model again with --dtype bfloat16. A 1-layer model with lol's default
    activation (silu) is either refused naming the activation (lol's hf loader implements only
    the GELU forms; transformers' ACT2FN would run silu) or exported with hidden_act "silu" and
    then must load and agree. Refused (exit 2 naming the field, no --out folder left): --arch
    starcoder2 of parallel blocks, partial_rotary_factor 0.5, biases not all-or-none (no o_bias;
    no mlp_bias), a full layer before the sliding ones (n_full_prelude 1), after them
    (n_full_coda 1), interleaved full layers (full_attention_interval 2), a gated MLP, RMSNorm,
    an lm_head bias.
  Refusals (hf ppl, exit 2, stderr naming the field / tensor): num_key_value_heads null, 3 of 4
    heads, absent (2) with 3 heads; partial_rotary_factor 0.5 (top level, rope_parameters);
    sliding_window 0, -1; layer_types [full, sliding], all sliding without a window, all full
    with a window 5, a list of the wrong length (ASSUMED); hidden_act relu; quantization_config;
    rope_scaling longrope; rope_theta vs rope_parameters.rope_theta disagreeing; a missing
    intermediate_size; an odd head_dim; tensors: mlp.up_proj / down_proj instead of c_fc /
    c_proj, an extra mlp.up_proj or mlp.gate_proj beside c_fc, a missing o_proj.bias / c_fc.bias
    / c_proj.bias / k_proj.bias / input_layernorm.bias / model.norm.bias /
    post_attention_layernorm.weight, q_proj.bias or c_proj.bias with use_bias false, an
    lm_head.bias, lm_head.weight missing (untied), a tied folder's lm_head.weight differing from
    the embeddings, k_proj.weight [H hd, d] for 2 kv heads.
Tolerances: float64 summed loss / bits per byte 1e-8 relative, perplexity 1e-7 (the RoPE tables
are float32; one float32 ulp of noise on every entry moves the loss far less: selftest fails
above 5e-9); float32 1e-6; bfloat16 5e-3; greedy ids exact (after a float32 near-tie, top-2
gap < 1e-4 of max |logit|, the rest of that continuation is not compared, noted). The q / k
weights are moderate (std 1.2 / sqrt(d), q/k/v biases 0.25): the largest effect of one float32
ulp of noise on every RoPE-table entry is 1.1e-9 (D), float64 tables move a loss by <= 6.5e-10.
At the time of writing lol was 1.4e-12 .. 2.7e-10 away in float64, 2.8e-10 .. 1.9e-8 in float32
and 2.6e-4 in bfloat16 (318 checks, all agreeing: 132 lol runs, about 3.6 minutes on 2 loaded
cores; selftest about 2 minutes). Mutation: with the reference's windows set to W+1, 86 of the
318 comparisons disagree and the diagnosis names "window W-1 keys" as lol's reading.

`selftest` (no lol) checks cached greedy decoding = recomputed full forward (windows included),
the window rule on hand-made positions, param counts (starcoder2-3b), config reading of the key
layouts, the RoPE rule against a direct complex rotation, GQA block mapping, and the
sensitivity: each alternative reading (window W+1 (flash-attention's window_size=(W, W)), W-1,
no window, the first layer full; a window of 5 in the full-attention cases C / F;
parallel blocks (GPT-NeoX: two norms; Phi: one norm), the MLP on input_layernorm(h); RMSNorm
instead of LayerNorm, LayerNorm without mean / bias, the final norm without bias, unbiased
variance, eps outside the sqrt, another eps; RoPE interleaved pairs, none, on half the head
(partial 0.5); GQA kv head h mod KV; no biases at all, no o_proj / MLP biases (StableLM-like),
no q/k/v biases; the other activation; no scale / 1/hd scale; the tied head for an untied
model; linear factor ignored / multiplied; yarn ignored / without the
attention factor; dynamic as linear; the default base / eps for B) moves each case's float64 loss
(text windows of 64, and of 16 where a window binds) by > 20 x the float64 tolerance (the
smallest at the time of writing: the tanh / exact GELU swap on D, 2.1e-7, and A, 2.2e-7; the
window readings >= 9.8e-4), and the greedy ids check() compares change under each in at least
one case (the eps / activation readings may not; the activation swap changes none), as they do
under cached decoding that puts every new token at position len(prompt), restarts the positions
at 0, or attends to every cached key once generation passes W (the window in prefill only: A, B,
D, E).

ASSUMED (where neither the brief nor transformers decides):
  * hf ppl windows: non-overlapping windows of --context tokens, positions restart at 0 in each
    window, no BOS (docs/hf.md); --context 0 -> min(512, max_position_embeddings).
  * A window W >= max_position_embeddings is full attention (the same function on every
    sequence lol accepts); layer_types (not a Starcoder2Config argument in the releases
    remembered) is accepted when it says one kind on every layer that agrees with
    sliding_window (docs/hf.md), refused otherwise.
  * num_key_value_heads null: Starcoder2Config (unlike MistralConfig) has no "None -> heads"
    fallback as remembered; docs/hf.md says lol refuses it.
  * partial_rotary_factor != 1: modeling_rope_utils would build inv_freq over int(hd * f) dims
    while Starcoder2's apply_rotary_pos_emb rotates whole heads (a shape error): refused (docs).
  * yarn: no original_max_position_embeddings key (= max_position_embeddings), truncated
    correction range (floor / ceil).
  * hf info's summary lines: see check_info; docs/hf.md does not fix the format.
  * Refusal messages name the field or tensor (any one of the listed needles).
  * Export: the exported config.json is judged by what Starcoder2Config would read from it
    (absent keys -> its defaults); gelu_new / gelu_fast are accepted for a gelu_pytorch_tanh
    model.
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
MPE = 64

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


ACTS = {"gelu": gelu_exact, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "gelu_fast": gelu_fast,
        "relu": relu, "silu": silu}
TANH = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")


def matvec(W, x):
    return [sum(map(_mul, row, x)) for row in W]


# ---------------------------------------------------------------- config (Starcoder2Config)
def sc2_params(cfg):
    """the model Starcoder2Config describes (its defaults for absent keys)"""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    kv = cfg.get("num_key_value_heads", 2)  # Starcoder2Config's default; null is not replaced
    # transformers 5 reads a rope_scaling object as rope_parameters; lol refuses disagreeing
    # values, so any one of them decides
    rp = dict(cfg.get("rope_scaling") or {}, **(cfg.get("rope_parameters") or {}))
    base = cfg.get("rope_theta", rp.get("rope_theta", 10000.0))
    rtype = rp.get("rope_type", rp.get("type", "default"))
    scaling = None if rtype == "default" else (rtype, rp.get("factor"))
    P = cfg["max_position_embeddings"]
    W = cfg.get("sliding_window")
    return {"V": cfg.get("vocab_size", 49152), "d": d, "L": cfg["num_hidden_layers"], "H": H, "KV": kv, "hd": hd,
            "P": P, "F": cfg["intermediate_size"], "base": float(base), "scaling": scaling,
            "W": W, "Weff": None if (W is None or W >= P) else W,
            "act": cfg.get("hidden_act", "gelu_pytorch_tanh"), "eps": cfg.get("norm_epsilon", 1e-5),
            "bias": cfg.get("use_bias", True), "tied": cfg.get("tie_word_embeddings", True),
            "bos": cfg.get("bos_token_id", 50256), "eos": cfg.get("eos_token_id", 50256)}


def sc2_config(**kw):
    """starcoder2-3b's config.json (as bigcode published it, transformers 4.37.0.dev0), tiny sizes;
    bos / eos 0 = <|endoftext|> as in the released files; no tie_word_embeddings key"""
    c = {"architectures": ["Starcoder2ForCausalLM"], "attention_dropout": 0.1, "residual_dropout": 0.1,
         "embedding_dropout": 0.1, "bos_token_id": EOT, "eos_token_id": EOT, "hidden_act": "gelu_pytorch_tanh",
         "hidden_size": 32, "initializer_range": 0.018042, "intermediate_size": 96, "max_position_embeddings": MPE,
         "mlp_type": "default", "model_type": "starcoder2", "norm_epsilon": 1e-05, "norm_type": "layer_norm",
         "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2, "rope_theta": 10000,
         "sliding_window": 5, "torch_dtype": "float32", "transformers_version": "4.37.0.dev0", "use_bias": True,
         "use_cache": True, "vocab_size": 300}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def param_count(cfg):
    """transformers' num_parameters() (a tied lm_head counted once)"""
    p = sc2_params(cfg)
    d, F, H, KV, hd = p["d"], p["F"], p["H"], p["KV"], p["hd"]
    per = 4 * d + (H + 2 * KV) * hd * d + d * H * hd + 2 * d * F
    if p["bias"]:
        per += (H + 2 * KV) * hd + d + F + d
    return p["V"] * d * (1 if p["tied"] else 2) + p["L"] * per + 2 * d


# ---------------------------------------------------------------- weights (Starcoder2ForCausalLM names)
def sc2_weights(cfg, seed, emb_std=0.5, qk=1.2, fc=2.5, lnf_std=0.3, head_std=0.3, qkb=0.25, lnf_bias=0.3):
    """name -> (shape, flat float32-rounded values). LayerNorm weights N(1, 0.3), biases N(0, 0.3);
    q / k rows like v's (moderate attention: RoPE-table ulps stay far under the tolerance); MLP
    pre-activations of a few units; biases N(0, 0.25..0.5)"""
    rng = random.Random(seed)
    p = sc2_params(cfg)
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
        put(pre + "self_attn.k_proj.weight", [KV * hd, d], qk / math.sqrt(d))
        put(pre + "self_attn.v_proj.weight", [KV * hd, d], 1.2 / math.sqrt(d))
        put(pre + "self_attn.o_proj.weight", [d, H * hd], 1.0 / math.sqrt(H * hd))
        if p["bias"]:
            put(pre + "self_attn.q_proj.bias", [H * hd], qkb)
            put(pre + "self_attn.k_proj.bias", [KV * hd], qkb)
            put(pre + "self_attn.v_proj.bias", [KV * hd], qkb)
            put(pre + "self_attn.o_proj.bias", [d], 0.3)
        put(pre + "post_attention_layernorm.weight", [d], 0.3, 1.0)
        put(pre + "post_attention_layernorm.bias", [d], 0.3)
        put(pre + "mlp.c_fc.weight", [F, d], fc / math.sqrt(d))
        put(pre + "mlp.c_proj.weight", [d, F], 1.2 / math.sqrt(F))
        if p["bias"]:
            put(pre + "mlp.c_fc.bias", [F], 0.5)
            put(pre + "mlp.c_proj.bias", [d], 0.3)
    put("model.norm.weight", [d], lnf_std, 1.0)
    put("model.norm.bias", [d], lnf_bias)
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
    nx.write_tokenizer(folder, cfg.get("max_position_embeddings", MPE))
    write_st(os.path.join(folder, "model.safetensors"),
             {k: (v[0], v[1], v[2] if len(v) > 2 else dtype) for k, v in T.items()}, {"format": "pt"})


# ---------------------------------------------------------------- the model
class Sc2Ref:
    """Starcoder2ForCausalLM in float64. Keyword arguments select alternative readings
    (sensitivity checks and the diagnosis of a disagreement):
      wins: the window per layer (None: full) instead of the config's;
      decode_window False: cached decoding attends to every cached key (the window only in prefill);
      residual "sequential" / "parallel"; par_norm (parallel): "post" (GPT-NeoX: the MLP on
          post_attention_layernorm(x)), "shared" (Phi: on input_layernorm(x));
      seq_norm "post" / "input" (the MLP on input_layernorm(h));
      qkv_bias / o_bias / mlp_bias False: that kind of bias ignored"""

    def __init__(self, cfg, T, wins=None, decode_window=True, residual="sequential", par_norm="post",
                 seq_norm="post", gqa="block", rd=None, rope_layout="half", base=None, scaling="cfg",
                 yarn_att=True, rope_f64=False, qkv_bias=True, o_bias=True, mlp_bias=True, act=None,
                 attn_scale="hf", ln_center=True, ln_bias=True, ln_unbiased=False, ln_eps_out=False, eps=None,
                 final_bias=True, head=None, decode_pos="hf", ulp_noise=None):
        p = sc2_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.KV, self.V, self.P, self.hd = p["d"], p["L"], p["H"], p["KV"], p["V"], p["P"], p["hd"]
        self.G = self.H // self.KV
        self.wins = [p["Weff"]] * self.L if wins is None else list(wins)
        self.decode_window = decode_window
        self.parallel = residual == "parallel"
        self.par_norm, self.seq_norm, self.gqa = par_norm, seq_norm, gqa
        self.rd = self.hd if rd is None else rd
        self.rope_layout = rope_layout
        self.eps = p["eps"] if eps is None else eps
        self.ln_kw = {"center": ln_center, "bias": ln_bias, "unbiased": ln_unbiased, "eps_out": ln_eps_out}
        self.act = ACTS[act or p["act"]]
        self.scale = {"hf": self.hd ** -0.5, "none": 1.0, "1/hd": 1.0 / self.hd}[attn_scale]
        self.decode_pos = decode_pos
        b = p["base"] if base is None else base
        sc = p["scaling"] if scaling == "cfg" else scaling
        att = 1.0
        if sc is None or sc[0] == "dynamic":
            inv = inv_freq_f32(b, self.rd)
        elif sc[0] == "linear":
            inv = [f32(v / f32(sc[1])) for v in inv_freq_f32(b, self.rd)]
        elif sc[0] == "yarn":
            inv, att = yarn_inv_freq(b, self.rd, sc[1], self.P)
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
        bias = p["bias"]

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
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            self.layers.append({
                "ln1": ln(pre + "input_layernorm"), "ln2": ln(pre + "post_attention_layernorm"),
                "q": lin(pre + "self_attn.q_proj", H * hd, d, bias and qkv_bias),
                "k": lin(pre + "self_attn.k_proj", KV * hd, d, bias and qkv_bias),
                "v": lin(pre + "self_attn.v_proj", KV * hd, d, bias and qkv_bias),
                "o": lin(pre + "self_attn.o_proj", d, H * hd, bias and o_bias),
                "fc": lin(pre + "mlp.c_fc", F, d, bias and mlp_bias),
                "proj": lin(pre + "mlp.c_proj", d, F, bias and mlp_bias)})
        self.lnf = ln("model.norm")
        if not final_bias:
            self.lnf = (self.lnf[0], [0.0] * d)
        tied = p["tied"] if head is None else head == "tied"
        self.lm_head = self.embed if tied else rows("lm_head.weight", [self.V, d])
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps, **self.ln_kw)

    @staticmethod
    def _lin(Mb, x):
        M, b = Mb
        return [s + bb for s, bb in zip(matvec(M, x), b)]

    def _mlp(self, ly, m):
        act = self.act
        return self._lin(ly["proj"], [act(a) for a in self._lin(ly["fc"], m)])

    def _kvhead(self, h):
        return h // self.G if self.gqa == "block" else h % self.KV

    def block(self, i, X, pos0, cache, decoding=False):
        ly = self.layers[i]
        H, KV, hd, rd = self.H, self.KV, self.hd, self.rd
        W = self.wins[i]
        if decoding and not self.decode_window:
            W = None
        out = []
        for t, x in enumerate(X):
            pos = pos0 + t
            n = self._ln(x, ly["ln1"])
            q, k, v = self._lin(ly["q"], n), self._lin(ly["k"], n), self._lin(ly["v"], n)
            c, s_ = self.cos[pos], self.sin[pos]
            qh = [rope_apply(q[j * hd:(j + 1) * hd], c, s_, rd, self.rope_layout) for j in range(H)]
            kh = [rope_apply(k[j * hd:(j + 1) * hd], c, s_, rd, self.rope_layout) for j in range(KV)]
            cache["k"].append(kh)
            cache["v"].append([v[j * hd:(j + 1) * hd] for j in range(KV)])
            n_keys = len(cache["k"])  # the sequence index of this token + 1
            lo = 0 if W is None else max(0, n_keys - W)  # keys j with i - W < j <= i
            keys, vals = cache["k"][lo:], cache["v"][lo:]
            att = []
            for h in range(H):
                g = self._kvhead(h)
                qa = qh[h]
                sc = [sum(map(_mul, qa, kk[g])) * self.scale for kk in keys]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for w, vv in zip(e, vals):
                    w /= tot
                    o = [oj + w * vj for oj, vj in zip(o, vv[g])]
                att.extend(o)
            a = self._lin(ly["o"], att)
            if self.parallel:
                mo = self._mlp(ly, n if self.par_norm == "shared" else self._ln(x, ly["ln2"]))
                out.append([m_ + a_ + x_ for m_, a_, x_ in zip(mo, a, x)])
            else:
                hmid = [a_ + x_ for a_, x_ in zip(a, x)]
                mo = self._mlp(ly, self._ln(hmid, ly["ln2"] if self.seq_norm == "post" else ly["ln1"]))
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
                h = self.block(i, [h], p_, caches[i], decoding=True)[0]
            z = self.head(h)
            pos += 1
        return toks, gaps


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = sc2_params(cfg)
    H, KV, L, W = p["H"], p["KV"], p["L"], p["Weff"]
    sc = p["scaling"]
    out = []
    if W is not None:
        out += [("window W+1 keys (j >= i - W, flash-attention's window_size=(W, W))", {"wins": [W + 1] * L}),
                ("window W-1 keys", {"wins": [W - 1] * L}),
                ("no window (full attention)", {"wins": [None] * L}),
                ("the first layer full, the others sliding", {"wins": [None] + [W] * (L - 1)})]
    else:
        out.append(("a window of 5 (a default window)", {"wins": [5] * L}))
    out += [("parallel with two norms: y = x + attn(ln1 x) + mlp(ln2 x) (GPT-NeoX)", {"residual": "parallel"}),
            ("parallel with one norm: y = x + attn(ln1 x) + mlp(ln1 x) (Phi)",
             {"residual": "parallel", "par_norm": "shared"}),
            ("sequential with the MLP on input_layernorm(h)", {"seq_norm": "input"}),
            ("RMSNorm (weight only, no mean, no bias) instead of LayerNorm", {"ln_center": False, "ln_bias": False}),
            ("LayerNorm without the mean subtraction", {"ln_center": False}),
            ("LayerNorm without bias", {"ln_bias": False}),
            ("final model.norm without its bias", {"final_bias": False}),
            ("LayerNorm with the unbiased (n-1) variance", {"ln_unbiased": True}),
            ("LayerNorm eps outside the sqrt", {"ln_eps_out": True}),
            ("norm_epsilon %g" % (1e-6 if p["eps"] != 1e-6 else 1e-5), {"eps": 1e-6 if p["eps"] != 1e-6 else 1e-5}),
            ("RoPE pairs interleaved (2i, 2i+1), GPT-J style", {"rope_layout": "interleaved"}),
            ("no RoPE", {"rope_layout": "none"}),
            ("RoPE on half of each head (partial_rotary_factor 0.5)", {"rd": p["hd"] // 2})]
    if p["eps"] != 1e-5:
        out.append(("norm_epsilon 1e-5 (the default) instead of %g" % p["eps"], {"eps": 1e-5}))
    if p["base"] != 10000.0:
        out.append(("RoPE base 10000 (the default) instead of %g" % p["base"], {"base": 10000.0}))
    if 1 < KV < H:
        out.append(("GQA: query head h uses kv head h mod KV (interleaved), not h // G", {"gqa": "interleaved"}))
    if p["bias"]:
        out += [("no biases at all (use_bias ignored)", {"qkv_bias": False, "o_bias": False, "mlp_bias": False}),
                ("no o_proj / MLP biases (only q/k/v biases, StableLM / Qwen2-like)",
                 {"o_bias": False, "mlp_bias": False}),
                ("no q/k/v biases", {"qkv_bias": False}),
                ("no MLP biases", {"mlp_bias": False})]
    if not p["tied"]:
        out.append(("the tied head (embed_tokens) for an untied model", {"head": "tied"}))
    if sc is not None and sc[0] == "linear":
        out += [("linear scaling ignored", {"scaling": None}),
                ("linear factor multiplied instead of divided", {"scaling": ("linear", 1.0 / sc[1])})]
    if sc is not None and sc[0] == "yarn":
        out += [("yarn scaling ignored", {"scaling": None}),
                ("yarn without the attention factor", {"yarn_att": False})]
    if sc is not None and sc[0] == "dynamic":
        out.append(("dynamic read as linear (inv_freq / factor)", {"scaling": ("linear", sc[1])}))
    other = "gelu" if p["act"] in TANH else "gelu_pytorch_tanh"
    out += [("activation %s" % other, {"act": other}),
            ("no attention scale", {"attn_scale": "none"}),
            ("attention scale 1/head_dim", {"attn_scale": "1/hd"})]
    return out


DECODE_ALTS = [("cached decoding: every new token at position len(prompt)", {"decode_pos": "stuck"}),
               ("cached decoding: new tokens' positions restart at 0", {"decode_pos": "restart"}),
               ("cached decoding: every cached key, no window", {"decode_window": False})]
WEAK = ("activation", "norm_epsilon", "LayerNorm with the unbiased", "LayerNorm eps outside", "yarn without",
        "RoPE tables", "cached decoding: every cached key")


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, seed, sc2_weights keyword arguments)"""
    A = sc2_config()
    B = sc2_config(num_hidden_layers=2, intermediate_size=64, num_key_value_heads=1, use_bias=False,
                   tie_word_embeddings=False, hidden_act="gelu", norm_epsilon=1e-3, rope_theta=4096.0,
                   sliding_window=7)
    C = sc2_config(hidden_size=48, num_attention_heads=6, num_key_value_heads=2, num_hidden_layers=2,
                   intermediate_size=64, sliding_window=None, rope_scaling={"type": "linear", "factor": 2.0},
                   hidden_act="gelu_new", transformers_version="4.45.0")
    D = sc2_config(num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2, intermediate_size=64,
                   rope_theta=65536, hidden_act="gelu_fast", sliding_window=6, torch_dtype="float16")
    E = sc2_config(num_hidden_layers=2, intermediate_size=64, tie_word_embeddings=False, sliding_window=5,
                   torch_dtype="bfloat16")
    F = {"architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2", "vocab_size": 300, "hidden_size": 32,
         "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": MPE}
    # small embeddings in the tied cases (a tied head on large embeddings repeats the last token)
    return {"A": (A, 901, {"emb_std": 0.02}), "B": (B, 902, {}), "C": (C, 904, {"emb_std": 0.05}),
            "D": (D, 905, {"emb_std": 0.3}), "E": (E, 906, {"emb_std": 0.1}), "F": (F, 906, {"emb_std": 0.05})}


STORAGE = {"D": "F16", "E": "BF16"}
NAMES = {"A": "starcoder2-3b-like", "B": "starcoder2-nobias-mqa-untied", "C": "starcoder2-linear-full-gqa",
         "D": "starcoder2-f16-mha-hd16", "E": "starcoder2-bf16-untied", "F": "starcoder2-defaults-only-sizes"}


def variant_table():
    """RoPE-scaling configs on A's weights (window 5)"""
    A = case_table()["A"][0]
    return {"starcoder2-dynamic-window": (dict(A, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "A"),
            "starcoder2-yarn-window": (dict(A, rope_scaling={"rope_type": "yarn", "factor": 4.0}), "A"),
            "starcoder2-linear-window": (dict(A, rope_scaling={"type": "linear", "factor": 2.0}), "A")}


def key_variants():
    """other config.json layouts of A's model: tag -> (config, how)"""
    A = case_table()["A"][0]
    v5 = {k: v for k, v in A.items() if k not in ("rope_theta", "torch_dtype")}
    v5.update(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, dtype="float32",
              transformers_version="5.0.0")
    return {"starcoder2-v5-rope_parameters": (v5, None),
            "starcoder2-layer_types-all-sliding": (dict(A, layer_types=["sliding_attention"] * 3), None),
            "starcoder2-stray-layer_norm_epsilon": (dict(A, layer_norm_epsilon=1e-2), None),
            "starcoder2-tied-stored-head": (A, "stored_head")}


def full_variants():
    """A's weights, configs whose window never binds: tag -> config"""
    A = case_table()["A"][0]
    return {"starcoder2-w64-full": dict(A, sliding_window=MPE),
            "starcoder2-w1000-full": dict(A, sliding_window=1000),
            "starcoder2-wnull-full": dict(A, sliding_window=None),
            "starcoder2-wabsent-full": sc2_config(sliding_window=DROP),
            "starcoder2-layer_types-all-full": dict(A, sliding_window=None, layer_types=["full_attention"] * 3)}


def key_variant_weights(T, how):
    if how == "stored_head":
        T = dict(T)
        T["lm_head.weight"] = T["model.embed_tokens.weight"]
    return T


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32", model_cfg=None):
        self.ck, self.tag, self.cfg = ck, tag, cfg
        write_folder(os.path.join(ck.work, tag), cfg, T, dtype)
        self.T = store(T, dtype)
        self.mcfg = model_cfg or cfg
        self.model = Sc2Ref(self.mcfg, self.T)
        self.full = Sc2Ref(self.mcfg, self.T, wins=[None] * self.model.L)
        self.alts = {}
        p = sc2_params(cfg)
        print("[%s] %s storage, layers %d, hidden %d, heads %d / kv %d (hd %d), window %s (effective %s), base %g%s, "
              "act %s, eps %g, biases %s, tied %s" % (
                  tag, dtype, p["L"], p["d"], p["H"], p["KV"], p["hd"], p["W"], p["Weff"], p["base"],
                  ", scaling %s" % (p["scaling"],) if p["scaling"] else "", p["act"], p["eps"], p["bias"],
                  p["tied"]), flush=True)

    def alt(self, kw):
        key = json.dumps(kw, sort_keys=True)
        if key not in self.alts:
            self.alts[key] = Sc2Ref(self.mcfg, self.T, **kw)
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
        W = self.model.wins[0]
        if W is not None and W < eff - 1:
            fu, _ = mean_ce(self.full, wins)
            if abs(fu - tot) <= 20 * rtol * abs(tot):
                ck.note("%s: the window changes the summed loss by %.1e only" % (what, abs(fu - tot) / abs(tot)))
        got = res.get("loss_sum")
        if len(ck.failures) > nf and DIAGNOSE[0] > 0 and got is not None:
            DIAGNOSE[0] -= 1
            print("    reference loss_sum %.12g; lol %r" % (tot, got))
            for name, kw in alternatives(self.mcfg) + [("RoPE tables in float64", {"rope_f64": True})]:
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
        W = self.model.wins[0]
        if W is not None and len(prompt) + m > W + 1 and self.full.greedy(prompt, m)[0] == toks:
            ck.note("%s: the same greedy ids under full attention" % what)
        if len(ck.failures) > nf and DIAGNOSE[0] > 0:
            DIAGNOSE[0] -= 1
            print("    prompt    %s\n    reference %s\n    lol       %s" % (prompt, toks, got))
            for name, kw in alternatives(self.mcfg) + DECODE_ALTS:
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


def info_lines(stdout):
    lines = {}
    for l_ in stdout.splitlines():
        mm = re.match(r"(\S+(?: \S+)?)\s{2,}(.*)", l_)
        if mm:
            lines.setdefault(mm.group(1), mm.group(2))
    return lines


def check_info(ck, tag, cfg, layout=False):
    r = ck.run(["hf", "info", tag, "--check"], expect_rc=None)
    ck.equal("%s hf info --check exits 0" % tag, r.returncode, 0)
    if r.returncode != 0:
        return None
    ck.equal("%s hf info names Starcoder2ForCausalLM" % tag, "Starcoder2ForCausalLM" in r.stdout, True)
    ck.equal("%s hf info --check: all tensors present" % tag, "all tensors present" in r.stdout, True)
    m = re.search(r"parameters\s+([\d,]+)", r.stdout)
    if m:
        ck.equal("%s hf info parameters (transformers' num_parameters())" % tag,
                 int(m.group(1).replace(",", "")), param_count(cfg))
    else:
        ck.fail("%s: hf info prints no parameter count" % tag)
    # ASSUMED: hf info's summary lines (keys as lol prints them) describe the model read here
    p = sc2_params(cfg)
    lines = info_lines(r.stdout)
    hl = lines.get("heads", "")
    heads = re.search(r"(\d+) query, (\d+) key/value, head_dim (\d+)", hl)
    ck.equal("%s hf info heads line (query, key/value, head_dim) [ASSUMED]: %r" % (tag, hl),
             tuple(int(x) for x in heads.groups()) if heads else None, (p["H"], p["KV"], p["hd"]))
    pos = lines.get("positions", "")
    mb = re.search(r"rope_theta ([\d.e+-]+)", pos)
    me = re.search(r"(?:layer_norm_eps|norm_epsilon|eps) ([\d.e+-]+)", pos)
    ck.equal("%s hf info rope_theta / norm eps [ASSUMED]: %r" % (tag, pos),
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
    # the window: a line mentioning it names W on every layer; a full-attention folder claims no window
    wl = [l_ for l_ in r.stdout.splitlines() if re.search(r"window|sliding", l_, re.I) and not l_.startswith("folder")]
    if p["Weff"] is not None:
        ok = any(re.search(r"\b%d\b" % p["Weff"], l_) and ("0..%d" % (p["L"] - 1) in l_ or re.search(
            r"every|all layers", l_)) for l_ in wl)
        ck.equal("%s hf info names the window %d on every layer [ASSUMED]: %r" % (tag, p["Weff"], wl), ok, True)
    else:
        ck.equal("%s hf info claims no sliding window [ASSUMED]: %r" % (tag, lines.get("attention")), wl, [])
    blk = lines.get("block", "")
    act = re.search(r"MLP (\w+)", blk)
    act = act.group(1) if act else None
    ck.equal("%s hf info block line: sequential, LayerNorms, ungated MLP <hidden_act>, biases iff use_bias "
             "[ASSUMED]: %r" % (tag, blk),
             ("sequential" in blk, "LayerNorm" in blk, "not gated" in blk, "tanh GELU" if act in TANH else act,
              "no biases" not in blk and "biases" in blk),
             (True, True, True, "tanh GELU" if p["act"] in TANH else p["act"], p["bias"]))
    if layout:
        claims = (("RMSNorm", r"rms_?norm"), ("a gated MLP", r"(?<!not )\bgated|gate_proj"),
                  ("parallel blocks", r"parallel"))
        wrong = [w for w, pat in claims if re.search(pat, r.stdout, re.I)]
        ck.equal("%s hf info describes StarCoder2's layout [ASSUMED]: claims of features StarCoder2 lacks" % tag,
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
EXPORT_BASE = {"architecture": "dense", "n_layers": 2, "norm": "layernorm", "mlp": "plain", "max_seq_len": MPE}
EXPORT_MODELS = {
    # starcoder2-3b's layout: a window on every layer, grouped kv, biases everywhere, tanh GELU, tied
    "export-sc2-window-gqa-bias": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=2, ffn_hidden=64,
                                       attention="sliding", window=5, qkv_bias=True, o_bias=True, mlp_bias=True,
                                       activation="gelu_pytorch_tanh", rope_theta=10000.0, norm_eps=1e-5,
                                       tie_word_embeddings=True),
    # full attention, grouped kv, no biases, exact gelu, untied: every Starcoder2Config default differs
    "export-sc2-full-gqa-nobias-untied": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=2, ffn_hidden=48,
                                              activation="gelu", rope_theta=4096.0, norm_eps=1e-3,
                                              tie_word_embeddings=False),
    # a window with multi-head attention (kv 4: not the default 2), biases, exact gelu, lol's
    # rope_theta / norm_eps / tie defaults
    "export-sc2-window-mha": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=4, ffn_hidden=48,
                                  attention="sliding", window=6, qkv_bias=True, o_bias=True, mlp_bias=True,
                                  activation="gelu"),
    # lol's default activation (silu): refused naming it, or exported with hidden_act "silu"
    # (transformers' ACT2FN runs it) that must then load and agree
    "export-sc2-silu": dict(EXPORT_BASE, n_layers=1, d_model=32, n_heads=4, n_kv_heads=2, ffn_hidden=48,
                            attention="sliding", window=5, qkv_bias=True, o_bias=True, mlp_bias=True)}


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


def renamed(S):
    """the checkpoint's tensors under Starcoder2ForCausalLM's names"""
    out = {}
    for k, v in S.items():
        k2 = k.replace(".mlp.up_proj.", ".mlp.c_fc.").replace(".mlp.down_proj.", ".mlp.c_proj.")
        out[k2] = (v[0], v[1])
    return out


def export_ppl(ck, tag, cfg, E, ids, what=""):
    out = os.path.join(ck.work, "ppl_%s.json" % tag)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", MPE, "--dtype", "float64", "--out", out,
                "--threads", 1])
    if r.returncode != 0:
        return
    try:
        model = Sc2Ref(cfg, E)
    except (KeyError, AssertionError) as e:
        ck.fail("%s: the exported tensors do not form a Starcoder2ForCausalLM: %r" % (tag, e))
        return
    res = json.load(open(out))
    wins = windows(ids, MPE)
    tot, cnt = mean_ce(model, wins)
    ck.equal("%s hf ppl --context %d: targets" % (tag, MPE), res.get("targets"), cnt)
    ck.close("%s hf ppl --dtype float64 --context %d: loss_sum%s" % (tag, MPE, what), res.get("loss_sum"), tot,
             TOL["float64"])
    ck.close("%s hf ppl --dtype float64 --context %d: bits_per_byte" % (tag, MPE), res.get("bits_per_byte"),
             tot / math.log(2) / cnt, TOL["float64"])
    if model.wins[0] is not None:
        fu, _ = mean_ce(Sc2Ref(cfg, E, wins=[None] * model.L), wins)
        if abs(fu - tot) <= 20 * TOL["float64"] * abs(tot):
            ck.note("%s: the window changes the exported model's loss by %.1e only" % (tag, abs(fu - tot) / tot))


def check_export(ck):
    """train tiny dense models of StarCoder2's layout for 3 steps, `lol export --hf` (the default
    --arch and --arch starcoder2): config.json must describe the model in Starcoder2Config's keys,
    the tensors must be the checkpoint's bit for bit under StarCoder2's names, and `hf ppl --dtype
    float64` of the export must equal this reference on the exported tensors"""
    w = ck.work
    print("[export] dense models of StarCoder2's layout -> Starcoder2ForCausalLM folders", flush=True)
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
        mc = json.load(open(os.path.join(ckpt, "config.json")))
        for k_, v_ in m.items():
            if k_ != "architecture" and mc.get(k_, v_) != v_:
                ck.fail("%s: the checkpoint's config.json has %s = %r, the run config %r" % (tag, k_, mc.get(k_), v_))
        # the trained model: the checkpoint's config.json (lol writes its resolved values; fields absent
        # there take docs/baselines.md's defaults: activation silu, untied, no biases, full attention)
        m = dict(m, **{k_: mc[k_] for k_ in ("rope_theta", "norm_eps", "activation", "tie_word_embeddings")
                       if k_ in mc})
        m.setdefault("activation", "silu")
        for k_ in ("rope_theta", "norm_eps"):
            if k_ not in m:
                ck.fail("%s: the checkpoint's config.json has no %s" % (tag, k_))
                m[k_] = None
        for arch in (None, "starcoder2"):
            out_tag = tag if arch is None else tag + "-arch"
            shutil.rmtree(os.path.join(w, out_tag), ignore_errors=True)
            args = ["export", "--hf", run, "--out", out_tag] + (["--arch", arch] if arch else [])
            r = ck.run(args, expect_rc=None)
            how = "the default --arch" if arch is None else "--arch starcoder2"
            if m["activation"] == "silu" and r.returncode != 0:
                # lol's default activation: refusing it (hf info refuses hidden_act silu) is acceptable
                ck.compared += 1
                if r.returncode != 2 or not re.search(r"activation|hidden_act|silu", r.stderr) or \
                        os.path.exists(os.path.join(w, out_tag)):
                    ck.fail("%s (%s): a silu model: expected an export or exit 2 naming the activation, nothing "
                            "left; got exit %d, %r" % (tag, how, r.returncode, r.stderr.strip()[-300:]))
                elif ck.verbose:
                    print("  ok %-60s %s" % ("%s (%s) refused (exit 2)" % (tag, how), r.stderr.strip()[:160]))
                continue
            if r.returncode != 0:
                ck.fail("%s (%s): export exit %d: %s" % (tag, how, r.returncode, r.stderr.strip()[-400:]))
                continue
            cfg = json.load(open(os.path.join(w, out_tag, "config.json")))
            E = read_st(os.path.join(w, out_tag, "model.safetensors"))
            ck.equal("%s (%s): architectures / model_type" % (tag, how),
                     (cfg.get("architectures"), cfg.get("model_type")), (["Starcoder2ForCausalLM"], "starcoder2"))
            d, H, KV, L, F = m["d_model"], m["n_heads"], m["n_kv_heads"], m["n_layers"], m["ffn_hidden"]
            try:
                p = sc2_params(cfg)
            except (KeyError, TypeError) as e:
                ck.fail("%s: config.json unreadable as Starcoder2Config: %r" % (tag, e))
                continue
            keys = ("d", "L", "H", "KV", "F", "P", "base", "scaling", "act", "eps", "tied", "bias", "Weff")
            got = {k: p[k] for k in keys}
            want = {"d": d, "L": L, "H": H, "KV": KV, "F": F, "P": m["max_seq_len"], "base": m["rope_theta"],
                    "scaling": None, "act": m["activation"], "eps": m["norm_eps"],
                    "tied": m.get("tie_word_embeddings", False), "bias": m.get("qkv_bias", False),
                    "Weff": m.get("window") if m.get("attention") == "sliding" else None}
            if got["act"] in TANH and want["act"] in TANH:
                got["act"] = want["act"]  # the same tanh GELU
            bad_keys = [k for k in ("partial_rotary_factor",) if k in cfg and cfg[k] not in (1, 1.0, None)]
            ck.equal("%s (%s): config.json read as Starcoder2Config (defaults for absent keys)" % (tag, how),
                     got, want)
            if bad_keys:
                ck.fail("%s (%s): config.json has %s" % (tag, how, {k: cfg[k] for k in bad_keys}))
            if "layer_types" in cfg:
                ck.equal("%s (%s): layer_types says the window's kind on every layer" % (tag, how),
                         cfg["layer_types"], ["sliding_attention" if want["Weff"] else "full_attention"] * L)
            want_t = renamed(S)
            got_t = {k: (v[0], v[1]) for k, v in E.items()}
            ck.equal("%s (%s): tensor names = the checkpoint's (up/down_proj -> c_fc/c_proj)" % (tag, how),
                     sorted(got_t), sorted(want_t))
            diff = sorted(k for k in want_t if k in got_t and got_t[k] != want_t[k])
            ck.equal("%s (%s): tensors = the checkpoint's bit for bit (names differing)" % (tag, how), diff, [])
            expect_names = set(sc2_weights(dict(cfg, vocab_size=p["V"]), 0).keys())
            ck.equal("%s (%s): tensor names = Starcoder2ForCausalLM's for this config" % (tag, how),
                     sorted(got_t), sorted(expect_names))
            if arch is None:
                export_ppl(ck, out_tag, cfg, got_t, ids)
            else:
                ck.equal("%s: --arch starcoder2 writes the default export's config.json" % tag,
                         cfg, json.load(open(os.path.join(w, tag, "config.json"))) if os.path.exists(
                             os.path.join(w, tag, "config.json")) else None)
    # --dtype bfloat16: the same config, every tensor the checkpoint's rounded to bfloat16
    tag = "export-sc2-window-gqa-bias-bf16"
    run = "run_export-sc2-window-gqa-bias"
    if os.path.exists(os.path.join(w, run, "latest")):
        ckpt = os.path.join(w, run, open(os.path.join(w, run, "latest")).read().strip())
        S = renamed(read_st(os.path.join(ckpt, "model.safetensors")))
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", tag, "--dtype", "bfloat16"])
        if r.returncode == 0:
            cfg = json.load(open(os.path.join(w, tag, "config.json")))
            E = read_st(os.path.join(w, tag, "model.safetensors"))
            ck.equal("%s: every tensor stored BF16" % tag, sorted(set(v[2] for v in E.values())), ["BF16"])
            ck.equal("%s: tensors = the checkpoint's rounded to bfloat16 (names differing)" % tag,
                     sorted(k for k in S if k not in E or list(E[k][1]) != [bf16(x) for x in S[k][1]]), [])
            ck.equal("%s: config.json reads as the float32 export's model" % tag, sc2_params(cfg),
                     sc2_params(json.load(open(os.path.join(w, "export-sc2-window-gqa-bias", "config.json")))))
            export_ppl(ck, tag, cfg, {k: (v[0], v[1]) for k, v in E.items()}, ids, " (bf16 weights)")
    # models Starcoder2ForCausalLM cannot hold: export --arch starcoder2 refused naming the field, nothing left
    base = dict(EXPORT_MODELS["export-sc2-window-gqa-bias"], n_layers=2)
    for tag, model, needles in (
            ("export-refuse-parallel", dict(base, parallel_residual=True), ["parallel_residual", "parallel"]),
            ("export-refuse-parallel-shared-norm", dict(base, parallel_residual=True, shared_input_norm=True),
             ["parallel_residual", "parallel", "shared_input_norm"]),
            ("export-refuse-partial-rotary", dict(base, partial_rotary_factor=0.5), ["partial_rotary_factor"]),
            ("export-refuse-no-o_bias", dict(base, o_bias=False), ["o_bias", "bias"]),
            ("export-refuse-no-mlp_bias", dict(base, mlp_bias=False), ["mlp_bias", "bias"]),
            ("export-refuse-qkv_bias-only", dict(base, o_bias=False, mlp_bias=False), ["bias"]),
            ("export-refuse-full-prelude", dict(base, n_full_prelude=1), ["n_full_prelude", "full"]),
            ("export-refuse-full-coda", dict(base, n_full_coda=1), ["n_full_coda", "full"]),
            ("export-refuse-full-interval", dict(base, full_attention_interval=2),
             ["full_attention_interval", "full"]),
            ("export-refuse-gated-mlp", dict(base, mlp="gated", mlp_bias=False, o_bias=False, qkv_bias=False),
             ["mlp", "gated"]),
            ("export-refuse-rmsnorm", dict(base, norm="rmsnorm"), ["norm", "layernorm", "rmsnorm"]),
            ("export-refuse-lm_head_bias", dict(base, tie_word_embeddings=False, lm_head_bias=True),
             ["lm_head_bias", "lm_head"])):
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        run = train_run(ck, tag, model, 1)
        if run is None:
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "starcoder2"], expect_rc=None)
        ck.compared += 1
        left = os.path.exists(os.path.join(w, tag))
        if r.returncode != 2 or not any(n in r.stderr for n in needles) or left:
            ck.fail("%s: expected exit 2 naming %s and no %s folder left; got exit %d (folder left: %s), %r" % (
                tag, " or ".join(needles), tag, r.returncode, left, r.stderr.strip()[-300:]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


# ---------------------------------------------------------------- check
STOP_PROMPT = None
STOP_PULL = [0.6]


def stop_case():
    """a folder whose greedy continuation reaches <|endoftext|> 0: E's config (untied, window 5)
    with lm_head row 0 pulled towards the final LayerNorm's bias direction"""
    global STOP_PROMPT
    cfg = dict(case_table()["E"][0], torch_dtype="float32")
    T = dict(sc2_weights(cfg, 911, emb_std=0.3))
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
    W = {k: sc2_weights(cfg, sd, **kw) for k, (cfg, sd, kw) in tab.items()}

    # A: starcoder2-3b's keys: window 5 on every layer, GQA 4 / 2, biases, tied, tanh GELU
    c = Case(ck, NAMES["A"], tab["A"][0], W["A"])
    for ctx in (0, 6, 7, 16):
        c.ppl(ids, ctx)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[60:80], 25)
    c.generate(ids[60:80], 25, "float32")
    ptext = "Then the thin thrush"
    c.generate(encode(ptext), 25, text=ptext)
    c.generate(ids[100:150], 30, expect_n=MPE - 50)
    c.info(layout=True)

    # B: no biases, multi-query, untied, exact gelu, eps 1e-3, base 4096, window 7
    c = Case(ck, NAMES["B"], tab["B"][0], W["B"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:5], 30)
    c.generate(ids[100:130], 22)
    c.generate(ids[100:130], 22, "float32")
    c.info(layout=True)

    # C: full attention, linear scaling, GQA 6 / 2
    c = Case(ck, NAMES["C"], tab["C"][0], W["C"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:4], 30)
    c.generate(ids[30:60], 20)
    c.generate(ids[30:60], 20, "float32")
    c.info()
    for name, (cfg, src) in variant_table().items():
        c = Case(ck, name, cfg, W[src])
        c.ppl(ids, 0)
        c.generate(ids[10:30], 25)
        if name == "starcoder2-yarn-window":
            c.info()

    # the same model as A under other config.json key layouts
    for tag, (cfg, how) in key_variants().items():
        c = Case(ck, tag, cfg, key_variant_weights(W["A"], how), model_cfg=tab["A"][0])
        c.ppl(ids, 0)
    # windows that never bind: full attention (A's weights)
    for tag, cfg in full_variants().items():
        c = Case(ck, tag, cfg, W["A"])
        if c.model.wins != [None] * c.model.L:
            ck.fail("%s: the reference reads a window %s" % (tag, c.model.wins))
        c.ppl(ids, 0)
        if tag == "starcoder2-w64-full":
            c.generate(ids[:3], 40)
            c.info()
    # a window of 63 under 64 positions binds at the last position of a 64-token text window
    c = Case(ck, "starcoder2-w63", dict(tab["A"][0], sliding_window=MPE - 1), W["A"])
    c.ppl(ids, 0)

    # D: F16, multi-head (kv 2 of 2), head_dim 16, gelu_fast, window 6
    c = Case(ck, NAMES["D"], tab["D"][0], W["D"], dtype="F16")
    c.ppl(ids, 0)
    c.ppl(ids, 16)
    c.generate(ids[30:50], 25)
    c.info()

    # E: BF16, untied, window 5
    c = Case(ck, NAMES["E"], tab["E"][0], W["E"], dtype="BF16")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:30], 25)
    c.info()

    # F: only the sizes: Starcoder2Config's defaults
    c = Case(ck, NAMES["F"], tab["F"][0], W["F"])
    c.ppl(encode(short_text()), 0, data="short.txt")
    c.generate(ids[10:30], 20)
    out = c.info()
    m = re.search(r"^stop tokens\s+(.*)$", out or "", re.M)
    if m:
        # ASSUMED: the default eos 50256 (outside this vocabulary) and the tokenizer's eos 0 stop
        got = sorted(set(int(x) for x in re.findall(r"\b\d+\b", m.group(1))))
        ck.equal("%s hf info stop tokens include the tokenizer's eos 0 [ASSUMED]: %r" % (NAMES["F"], m.group(1)),
                 EOT in got, True)

    # stop at EOS without --no-stop
    cfgS, TS = stop_case()
    c = Case(ck, "starcoder2-stop-at-eos", cfgS, TS)
    c.generate_stop(STOP_PROMPT, 30)

    # refusals
    print("[refusals]", flush=True)
    base = sc2_config(num_hidden_layers=2, intermediate_size=32)  # 4 heads / 2 kv, hd 8, W 5, biases, tied
    Ts = sc2_weights(base, 7)
    nob = dict(base, use_bias=False, tie_word_embeddings=False)
    Tn = sc2_weights(nob, 8)
    refusal(ck, "refuse-kv-null", dict(base, num_key_value_heads=None), Ts, ["num_key_value_heads"])
    refusal(ck, "refuse-kv-heads-not-divisor", dict(base, num_key_value_heads=3), Ts, ["num_key_value_heads"])
    c3 = sc2_config(num_hidden_layers=1, intermediate_size=32, hidden_size=24, num_attention_heads=3,
                    num_key_value_heads=DROP)
    refusal(ck, "refuse-kv-absent-default-2-of-3-heads", c3, sc2_weights(dict(c3, num_key_value_heads=3), 9),
            ["num_key_value_heads"])
    refusal(ck, "refuse-partial_rotary_factor", dict(base, partial_rotary_factor=0.5), Ts, ["partial_rotary_factor"])
    refusal(ck, "refuse-partial-in-rope_parameters",
            dict(base, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
            Ts, ["partial_rotary_factor"])
    refusal(ck, "refuse-sliding_window-0", dict(base, sliding_window=0), Ts, ["sliding_window"])
    refusal(ck, "refuse-sliding_window-negative", dict(base, sliding_window=-1), Ts, ["sliding_window"])
    refusal(ck, "refuse-layer_types-mixed",
            dict(base, layer_types=["full_attention", "sliding_attention"]), Ts, ["layer_types"])
    refusal(ck, "refuse-layer_types-sliding-without-window",
            dict(base, sliding_window=None, layer_types=["sliding_attention"] * 2), Ts,
            ["layer_types", "sliding_window"])
    refusal(ck, "refuse-layer_types-full-with-window", dict(base, layer_types=["full_attention"] * 2), Ts,
            ["layer_types", "sliding_window"])
    refusal(ck, "refuse-layer_types-length", dict(base, layer_types=["sliding_attention"] * 3), Ts,
            ["layer_types"], " (ASSUMED: transformers' layer_type_validation raises on a length mismatch)")
    refusal(ck, "refuse-relu", dict(base, hidden_act="relu"), Ts, ["hidden_act"])
    refusal(ck, "refuse-quantization_config", dict(base, quantization_config={"quant_method": "bitsandbytes"}),
            Ts, ["quantization_config"])
    refusal(ck, "refuse-longrope", dict(base, rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 4,
                                                            "long_factor": [2.0] * 4, "factor": 2.0}),
            Ts, ["longrope", "rope_scaling"])
    refusal(ck, "refuse-rope_theta-vs-rope_parameters",
            dict(base, rope_parameters={"rope_type": "default", "rope_theta": 500.0}), Ts, ["rope_theta"])
    refusal(ck, "refuse-missing-intermediate_size", sc2_config(num_hidden_layers=2, intermediate_size=DROP), Ts,
            ["intermediate_size"])
    c36 = dict(base, hidden_size=36)
    refusal(ck, "refuse-head-dim-odd", c36, sc2_weights(c36, 11), ["num_attention_heads", "hidden_size", "head_dim"])
    T = {k.replace("mlp.c_fc.", "mlp.up_proj.").replace("mlp.c_proj.", "mlp.down_proj."): v for k, v in Ts.items()}
    refusal(ck, "refuse-llama-mlp-names", base, T, ["up_proj", "down_proj", "c_fc", "c_proj"])
    T = dict(Ts)
    T["model.layers.0.mlp.up_proj.weight"] = Ts["model.layers.0.mlp.c_fc.weight"]
    refusal(ck, "refuse-extra-up_proj", base, T, ["model.layers.0.mlp.up_proj.weight"])
    T = dict(Ts)
    T["model.layers.1.mlp.gate_proj.weight"] = Ts["model.layers.1.mlp.c_fc.weight"]
    refusal(ck, "refuse-extra-gate_proj", base, T, ["model.layers.1.mlp.gate_proj.weight"])
    for name in ("model.layers.0.self_attn.o_proj.bias", "model.layers.1.mlp.c_fc.bias",
                 "model.layers.1.mlp.c_proj.bias", "model.layers.0.self_attn.k_proj.bias",
                 "model.layers.0.input_layernorm.bias", "model.norm.bias",
                 "model.layers.1.post_attention_layernorm.weight"):
        T = dict(Ts)
        del T[name]
        refusal(ck, "refuse-missing-" + name.replace("model.", "").replace("layers.", "l"), base, T, [name])
    T = dict(Tn)
    T["model.layers.0.self_attn.q_proj.bias"] = ([32], [0.1] * 32)
    refusal(ck, "refuse-q_proj-bias-without-use_bias", nob, T, ["model.layers.0.self_attn.q_proj.bias"])
    T = dict(Tn)
    T["model.layers.1.mlp.c_proj.bias"] = ([32], [0.1] * 32)
    refusal(ck, "refuse-c_proj-bias-without-use_bias", nob, T, ["model.layers.1.mlp.c_proj.bias"])
    T = dict(Tn)
    T["lm_head.bias"] = ([300], [0.1] * 300)
    refusal(ck, "refuse-lm_head-bias", nob, T, ["lm_head.bias"])
    T = dict(Tn)
    del T["lm_head.weight"]
    refusal(ck, "refuse-untied-no-lm_head", nob, T, ["lm_head.weight"])
    T = dict(Ts)
    T["lm_head.weight"] = Tn["lm_head.weight"]
    refusal(ck, "refuse-tied-lm_head-differs", base, T, ["lm_head"],
            " (ASSUMED: docs' 'a tied folder may store an lm_head.weight equal to the embeddings (refused when "
            "it differs)')")
    T = dict(Ts)
    T["model.layers.0.self_attn.k_proj.weight"] = Ts["model.layers.0.self_attn.q_proj.weight"]  # [H hd, d]
    refusal(ck, "refuse-k_proj-for-query-heads", base, T, ["model.layers.0.self_attn.k_proj.weight"])

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
# the RoPE-scaling variants repeat A's weights: only the readings that touch the rotary embedding are swept
ROPE_WORDS = ("RoPE", "linear", "yarn", "dynamic")


def sensitivity_cases():
    """(tag, config, source case, greedy prompts, text ids, all alternatives?)"""
    ids = encode(TEXT)
    gen = {"A": [(ids[:3], 30), (ids[60:80], 25)], "B": [(ids[:5], 30), (ids[100:130], 22)],
           "C": [(ids[:4], 30), (ids[30:60], 20)], "D": [(ids[30:50], 25)], "E": [(ids[10:30], 25)],
           "F": [(ids[10:30], 20)]}
    tab = case_table()
    out = [(tag, tab[tag][0], tag, gen[tag], encode(short_text()) if tag == "F" else ids, True)
           for tag in sorted(tab)]
    for name, (cfg, src) in sorted(variant_table().items()):
        out.append((name, cfg, src, [(ids[10:30], 25)], ids, False))
    return out


def sensitivity(i):
    """one case of selftest's sweep: (printed lines, failures, {reading: [tag] if the greedy ids change})"""
    tag, cfg, src, g, tids, every = sensitivity_cases()[i]
    c0, sd, wkw = case_table()[src]
    T = store(sc2_weights(c0, sd, **wkw), STORAGE.get(src, "F32"))
    lines, bad, changed = [], [], {}
    model = Sc2Ref(cfg, T)
    ctxs = [64] + ([16] if model.wins[0] is not None else [])
    ref = {}
    for ctx in ctxs:
        ref[ctx] = mean_ce(model, windows(tids, ctx))[0]
    refs = [model.greedy(p_, n)[0] for p_, n in g]
    if any(len(set(r_)) < 4 for r_ in refs):
        bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
    for name, kws in (("RoPE tables +-1 float32 ulp (noise, the largest of 3 draws)",
                       [{"ulp_noise": sd_} for sd_ in (1, 2, 5)]),
                      ("RoPE tables in float64", [{"rope_f64": True}])):
        rel = max(abs(mean_ce(Sc2Ref(cfg, T, **kw), windows(tids, 64))[0] - ref[64]) / abs(ref[64]) for kw in kws)
        lines.append("  selftest %-28s %-78s relative change %.2e" % (tag, name, rel))
        if "noise" in name and rel > TOL["float64"] / 2:
            bad.append("%s: one float32 ulp in the RoPE tables moves the loss by %.2e, too close to the "
                       "float64 tolerance" % (tag, rel))
    alts = alternatives(cfg)
    if not every:
        alts = [(n_, kw) for n_, kw in alts if any(w_ in n_ for w_ in ROPE_WORDS)]
    worst = None
    for name, kw in alts:
        alt = Sc2Ref(cfg, T, **kw)
        rel = max(abs(mean_ce(alt, windows(tids, ctx))[0] - ref[ctx]) / abs(ref[ctx]) for ctx in ctxs)
        worst = rel if worst is None else min(worst, rel)
        if rel < 20 * TOL["float64"]:
            bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
        same = all(alt.greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
        key = re.sub(r"activation \S+", "activation (the other one)", name.split(" instead")[0])
        key = re.sub(r"norm_epsilon \S+", "norm_epsilon", key)
        key = re.sub(r"RoPE base 10000.*", "RoPE base 10000 (the default)", key)
        changed.setdefault(key, [])
        if not same:
            changed[key].append(tag)
        lines.append("  selftest %-28s %-78s relative change %.2e%s" % (
            tag, name, rel, "  (greedy ids unchanged)" if same else ""))
    lines.append("  selftest %-28s loss %.8g (context 64); smallest relative change %s; greedy %s" % (
        tag, ref[64], "%.2e" % worst if worst is not None else "-", refs))
    for name, kw in DECODE_ALTS:
        same = all(Sc2Ref(cfg, T, **kw).greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
        changed.setdefault(name, [])
        if not same:
            changed[name].append(tag)
    return lines, bad, changed


def selftest(quick=False):
    t0 = time.time()
    bad = []
    ids = encode(TEXT)
    print("  selftest: text %d ids, %d bytes" % (len(ids), len(TEXT.encode())))
    for x in (-3.0, -1.0, 0.5, 2.0):
        if abs(gelu_fast(x) - gelu_tanh(x)) > 1e-10:
            bad.append("gelu_fast != gelu_new at %g" % x)
    if abs(gelu_exact(1.0) - 0.8413447460685429) > 1e-12:
        bad.append("exact gelu(1)")
    # starcoder2-3b (config.json: 49152 / 3072 / 12288 / 30 layers / 24 heads / 2 kv heads, tied)
    s3 = {"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
          "num_attention_heads": 24, "num_key_value_heads": 2, "max_position_embeddings": 16384,
          "sliding_window": 4096}
    if param_count(s3) != 3030371328:
        bad.append("starcoder2-3b param count %d" % param_count(s3))
    tab = case_table()
    for tag, (cfg, sd, wkw) in tab.items():
        n = sum(len(v[1]) for v in sc2_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    want = {"A": (2, 8, 5, 10000.0, "gelu_pytorch_tanh", 1e-5, True, True),
            "B": (1, 8, 7, 4096.0, "gelu", 1e-3, False, False),
            "C": (2, 8, None, 10000.0, "gelu_new", 1e-5, True, True),
            "D": (2, 16, 6, 65536.0, "gelu_fast", 1e-5, True, True),
            "E": (2, 8, 5, 10000.0, "gelu_pytorch_tanh", 1e-5, True, False),
            "F": (2, 8, None, 10000.0, "gelu_pytorch_tanh", 1e-5, True, True)}
    for tag, w_ in want.items():
        p = sc2_params(tab[tag][0])
        got = (p["KV"], p["hd"], p["Weff"], p["base"], p["act"], p["eps"], p["bias"], p["tied"])
        if got != w_:
            bad.append("case %s read as %s, not %s" % (tag, got, w_))
    if sc2_params(tab["C"][0])["scaling"] != ("linear", 2.0):
        bad.append("C's scaling")
    dF = sc2_params(tab["F"][0])
    if (dF["scaling"], dF["bos"], dF["eos"], dF["W"]) != (None, 50256, 50256, None):
        bad.append("Starcoder2Config defaults read as %s" % dF)
    pA = sc2_params(tab["A"][0])
    for tag, (cfg, how) in key_variants().items():
        if sc2_params(cfg) != pA:
            bad.append("%s: the config reads as %s, not as A's %s" % (tag, sc2_params(cfg), pA))
    for tag, cfg in full_variants().items():
        if sc2_params(cfg)["Weff"] is not None:
            bad.append("%s: a window that binds" % tag)
    # inv_freq: the bases used are exact in float32
    if inv_freq_f32(10000.0, 8) != [1.0, f32(0.1), f32(0.01), f32(0.001)]:
        bad.append("inv_freq base 10000 %s" % inv_freq_f32(10000.0, 8))
    if inv_freq_f32(4096.0, 8) != [1.0, 0.125, 1.0 / 64, 1.0 / 512]:
        bad.append("inv_freq base 4096 %s" % inv_freq_f32(4096.0, 8))
    if inv_freq_f32(65536.0, 16) != [2.0 ** (-2 * j) for j in range(8)]:
        bad.append("inv_freq base 65536 %s" % inv_freq_f32(65536.0, 16))
    inv = inv_freq_f32(10000.0, 8)
    cos, sin = rope_tables(inv, 40)
    x = [0.3 * k - 1.0 for k in range(8)]
    y = rope_apply(x, cos[37], sin[37], 8)
    for i in range(4):
        z = complex(x[i], x[i + 4]) * complex(math.cos(37 * inv[i]), math.sin(37 * inv[i]))
        if abs(z.real - y[i]) > 1e-5 or abs(z.imag - y[i + 4]) > 1e-5:
            bad.append("rope pair %d" % i)
    y = layernorm([1.0, 2.0, 4.0, 7.0], [1.0] * 4, [0.0] * 4, 0.0)
    if abs(sum(y)) > 1e-12 or abs(sum(v * v for v in y) / 4 - 1) > 1e-12:
        bad.append("layernorm")
    # the window on hand-made positions (A's model with W 2 / 7 against full attention)
    cA, sdA, wA = tab["A"]
    TA = sc2_weights(cA, sdA, **wA)
    seq = ids[:8]
    lf = Sc2Ref(cA, TA, wins=[None] * 3).prefill(seq)[0]
    l2 = Sc2Ref(cA, TA, wins=[2] * 3).prefill(seq)[0]
    l7 = Sc2Ref(cA, TA, wins=[7] * 3).prefill(seq)[0]
    if max(abs(a - b) for a, b in zip(lf[1], l2[1])) > 1e-12:
        bad.append("window 2 differs from full attention at position 1 (keys 0, 1)")
    if max(abs(a - b) for a, b in zip(lf[2], l2[2])) < 1e-6:
        bad.append("window 2 equals full attention at position 2")
    if max(abs(a - b) for p_ in range(7) for a, b in zip(lf[p_], l7[p_])) > 1e-12:
        bad.append("window 7 differs from full attention before position 7")
    if max(abs(a - b) for a, b in zip(lf[7], l7[7])) < 1e-6:
        bad.append("window 7 equals full attention at position 7")
    # GQA block mapping: C with its kv heads repeated G times as a multi-head model is the same function
    cC, sdC, _ = tab["C"]
    TC = sc2_weights(cC, sdC)
    c6 = dict(cC, num_key_value_heads=6)
    TC6 = dict(TC)
    hd = sc2_params(cC)["hd"]
    for k, (sh, v) in TC.items():
        if re.search(r"self_attn\.[kv]_proj\.", k):
            per = hd * (sh[1] if len(sh) == 2 else 1)
            blocks = [v[j * per:(j + 1) * per] for j in range(len(v) // per)]
            TC6[k] = ([sh[0] * 3] + list(sh[1:]), [x_ for b_ in blocks for _ in range(3) for x_ in b_])
    a1 = Sc2Ref(cC, TC).prefill(ids[:20])[0][-1]
    a2 = Sc2Ref(c6, TC6).prefill(ids[:20])[0][-1]
    if max(abs(u - v) for u, v in zip(a1, a2)) > 1e-12:
        bad.append("repeating kv heads (block GQA) does not keep the function")
    # a tied folder's stored head equal to embed_tokens is the same function
    TAh = key_variant_weights(TA, "stored_head")
    if Sc2Ref(cA, TA).prefill(ids[:10])[0] != Sc2Ref(dict(cA, tie_word_embeddings=False), TAh).prefill(ids[:10])[0]:
        bad.append("a stored head equal to embed_tokens changes the function")
    # cached greedy = the full forward recomputed each step (the window drops keys while decoding)
    for tag in ("A", "B", "D", "E"):
        cfg, sd, wkw = tab[tag]
        m = Sc2Ref(cfg, store(sc2_weights(cfg, sd, **wkw), STORAGE.get(tag, "F32")))
        pr = ids[60:63]
        toks = m.greedy(pr, 14)[0]
        seq = list(pr)
        for j in range(14):
            t = argmax_low(m.prefill(seq)[0][-1])
            if t != toks[j]:
                bad.append("%s: cached greedy step %d: %d != recomputed %d" % (tag, j, toks[j], t))
                break
            seq.append(t)
    cfgS, TS = stop_case()
    st = Sc2Ref(cfgS, TS).greedy(STOP_PROMPT, 30)[0]
    print("  selftest: stop case greedy %s" % st)
    if EOT not in st or st.index(EOT) < 2:
        bad.append("the stop case's greedy continuation does not reach EOS %d after a few tokens: %s" % (EOT, st))
    if quick:
        print("  selftest (quick): %.1f s" % (time.time() - t0))
        return bad
    changed = {}
    n_cases = len(sensitivity_cases())
    procs = max(1, min(2, os.cpu_count() or 1))
    if procs > 1:
        import multiprocessing
        with multiprocessing.Pool(procs) as pool:
            results = list(pool.imap(sensitivity, range(n_cases)))
    else:
        results = [sensitivity(i) for i in range(n_cases)]
    for lines, bad_, ch in results:
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
    c = sub.add_parser("check", help="build tiny StarCoder2 folders, run lol, compare with the reference")
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
