#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face Falcon (FalconForCausalLM, model_type
"falcon": tiiuae falcon-7b / falcon-40b / falcon-11B and their fine-tunes in transformers'
native layout) in pure Python (stdlib only), and a check that `lol hf ppl|generate|info` and
`lol export --hf --arch falcon` agree with it on tiny Falcon folders written here.

  python3 tests/reference/falcon_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/falcon_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_falcon.py / configuration_falcon.py / modeling_rope_utils.py as
remembered (FalconConfig's keys and defaults, FalconAttention._split_heads for the three qkv
layouts, FalconDecoderLayer's forward with num_ln_in_parallel_attn, the rotary embedding over
whole heads), the published falcon-7b / falcon-40b / falcon-11B config.json files as
remembered, docs/hf.md ("Commands", "GPT-NeoX (Pythia)", "Phi-1, Phi-1.5 and Phi-2", "RoPE
scaling", "Export", "Cached decoding"), docs/baselines.md (the dense-config fields used for
export) and the feature's brief. It imports qwen2_reference.py (the float32 / bfloat16
rounding, log_softmax / argmax / top-2 gap, Checker, compare_greedy, parse_ids,
bytes_to_unicode and its RoPE tables for every rope type, used here with dim = head_dim),
gpt_neox_reference.py (the GELU forms, LayerNorm, rotate-half, the float32 inv_freq / yarn
helpers used to cross-check the tables, f16 / storage rounding, windows / mean_ce) and
safetensors_io (write_st / read_st), all unchanged; the Falcon model, its config reading, the
weights, the tokenizer files, the folder writer, the cases and the comparisons are this file's.

Rules of the reference (float64 on the stored, float16- / bfloat16-rounded weights; the RoPE
tables in float32 as transformers builds them):
  x_0[t] = transformer.word_embeddings[id_t]  (no position embedding; positions 0.. within each
      forward call / hf ppl window)
  heads: H = num_attention_heads, hd = hidden_size / H; key/value heads KV:
      new_decoder_architecture true -> num_kv_heads (null / absent: H);
      else multi_query true (the default) -> 1;  else num_kv_heads (must be H).
  query_key_value (FalconLinear = nn.Linear) [(H + 2 KV) hd, d], rows grouped: viewed as
      [KV, G + 2, hd] with G = H / KV, group g holds query heads g G .. g G + G - 1, then key
      head g, then value head g (new arch: view(-1, G + 2, hd); old multi_query: one group,
      all queries then k then v; old multi-head: per head [q, k, v], view(H, 3, hd)).
      Query head h attends with kv head h // G. Bias (bias true) split likewise.
  RoPE (rotate-half) on the whole head: for i < hd/2 the pair (i, i + hd/2) turns by
      position * inv_freq[i]; inv_freq[i] = float32(1 / float32(rope_theta ** float32(2i / hd))),
      angle float32(position * inv_freq[i]), cos / sin in float32; rope_scaling as
      modeling_rope_utils (linear: inv_freq / factor; dynamic: plain within
      max_position_embeddings; yarn; llama3) with dim = hd.
  scores = q.k * hd^-1/2, causal softmax; o = heads concatenated; attn = o dense^T (+ bias)
  mlp(m) = dense_4h_to_h(act(dense_h_to_4h(m)))  (+ biases when bias true)
  block (FalconDecoderLayer), LayerNorms with weight and bias, eps layer_norm_epsilon:
      parallel_attn true, and (new arch with num_ln_in_parallel_attn 2, null -> 2 for the new
          arch):  y = x + attn(ln_attn(x)) + mlp(ln_mlp(x))
      parallel_attn true otherwise (old arch; new arch with num_ln 1):
          n = input_layernorm(x);  y = x + attn(n) + mlp(n)
      parallel_attn false (old arch only):  h = x + attn(input_layernorm(x));
          y = h + mlp(post_attention_layernorm(h))
  logits = ln_f(x_L) lm_head^T, lm_head = word_embeddings when tie_word_embeddings (default
      true), else lm_head.weight [V, d] (no bias).
  LayerNorm: (x - mean) / sqrt(var + eps) * w + b, var the biased (1/n) variance.
  act (activation): "gelu" (default) = 0.5 x (1 + erf(x / sqrt 2)); "gelu_new" /
      "gelu_pytorch_tanh" = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); "gelu_fast" the
      same with 0.7978845608.
  FalconConfig defaults: num_kv_heads null (= H), layer_norm_epsilon 1e-5, alibi false,
      new_decoder_architecture false, multi_query true, parallel_attn true, bias false,
      max_position_embeddings 2048, rope_theta 10000, rope_scaling null, bos / eos 11,
      ffn_hidden_size null (= 4 hidden_size), activation "gelu", num_ln_in_parallel_attn null,
      tie_word_embeddings true. lol requires vocab_size, hidden_size, num_hidden_layers and
      num_attention_heads (the brief; transformers would default them).
  Tensors: transformer.word_embeddings.weight, transformer.h.{i}.self_attention.
      {query_key_value,dense}.{weight,bias}, .mlp.{dense_h_to_4h,dense_4h_to_h}.{weight,bias},
      .input_layernorm / .post_attention_layernorm / .ln_attn / .ln_mlp .{weight,bias},
      transformer.ln_f.{weight,bias}, lm_head.weight.
  num_parameters() = V d (x2 untied) + L (2 d n_ln + (H + 2 KV) hd (d + b) + d (d + b)
      + F (d + b) + d (F + b)) + 2 d   (b = 1 with bias; falcon-7b: 6,921,720,704).

Cases (vocab_size 300 > the tokenizer's 270 ids; a Falcon-style byte-level tokenizer.json
written here: ids 0..10 Falcon's >>TITLE<< .. >>MIDDLE<< added special tokens, 11
<|endoftext|> (bos / eos), bytes b = 12 + b, merges "Ġt" 268 and "he" 269, ByteLevel
pre-tokenizer with GPT-2's regex; gpt_neox_reference's text of 335 tokens, 368 bytes):
  A falcon-7b-like: falcon-7b's config.json keys (transformers 4.27: no max_position_embeddings
    -> 2048, no rope_theta, auto_map, apply_residual_connection_post_layernorm false,
    multi_query true, parallel_attn true, bias false, no tie key -> tied, no lm_head tensor),
    hidden 32, 4 heads (hd 8), 1 kv head, 3 layers, ffn 4 d = 128, gelu; embeddings of std
    0.005 (layer 0's LayerNorm then tells eps 1e-5 from 1e-6) with ln_f weights of std 60 (the
    tied logits a few units). ppl float64 --context 0 (= 512: one window) and 9, float32 64;
    generate float64 (3 + 30, 40 + 20), float32, --prompt text; info --check.
  B falcon-40b-like: falcon-40b's keys (new_decoder_architecture true, num_kv_heads 2 of 4
    heads, no num_ln_in_parallel_attn -> 2: ln_attn / ln_mlp, no multi_query key), hidden 32,
    2 layers, tied with a stored lm_head.weight equal to the embeddings. ppl 0 / 9 / float32,
    generate float64 / float32, info.
  C falcon-11B-like: new arch, num_ln_in_parallel_attn 1 (one input_layernorm), 6 heads / 2 kv
    (G 3), hidden 48, ffn_hidden_size 96 (not 4 d), rope_theta 65536, max_position_embeddings
    80, untied (lm_head.weight), 2 layers. ppl 0 (= 80) / 9 / float32, generate float64 /
    float32, --max-new 40 after 50 ids (reduced to 30), info.
  D falcon-old-seq-mha-bias-bf16: old arch, multi_query false, parallel_attn false
    (input_layernorm / post_attention_layernorm), bias true, untied, gelu_new, BF16 storage,
    4 heads (per head [q, k, v]), 2 layers, ffn 64. ppl float64 / float32 / bfloat16, generate
    float64, info.
  E falcon-old-seq-mqa-f16: old arch, multi_query true, parallel_attn false, tied with a stored
    lm_head equal to the embeddings, gelu_pytorch_tanh, layer_norm_epsilon 1e-3, F16 storage:
    ppl float64, generate float64, info.
  F falcon-new-mha-bias: new arch with num_kv_heads absent (= heads, G 1), num_ln 2, bias
    true, gelu_fast, untied: ppl float64 0 / 9, generate float64, info.
  RoPE scaling: falcon-linear (A's weights, rope_scaling {"type": "linear", "factor": 2}:
    ppl, generate, info), falcon-dynamic (B's, {"rope_type": "dynamic", "factor": 2}: plain),
    falcon-yarn (C's, {"rope_type": "yarn", "factor": 4}), falcon-llama3 (A's, {"rope_type":
    "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
    "original_max_position_embeddings": 64}: one frequency kept, one smoothed, two divided).
  Key layouts (ppl float64 of the same model as the case named): falcon-defaults-only-sizes
    (A's weights, config.json with architectures / model_type / the four required sizes:
    FalconConfig's defaults give A's model; info: stop tokens 11), falcon-7b-saved-by-4.4x (A
    with every key as a recent save writes it: num_kv_heads 4 = heads (ignored: multi_query),
    max_position_embeddings 2048, rope_theta, rope_scaling null, ffn_hidden_size 128,
    activation, num_ln_in_parallel_attn null, tie true), falcon-mq-ignores-num_kv_heads (A with
    num_kv_heads 2: multi_query still gives 1 kv head), falcon-num_ln-1-old-arch (A with
    num_ln_in_parallel_attn 1), falcon-40b-num_ln-2-explicit (B with 2), falcon-40b-legacy-
    keys-equal (B with n_embed / n_head / n_layer / n_head_kv equal to the modern keys),
    falcon-seq-num_ln-2-ignored (D with num_ln_in_parallel_attn 2: sequential blocks do not
    read it, ASSUMED), falcon-v5-rope_parameters (C with rope_parameters {"rope_type":
    "default", "rope_theta": 65536} instead of rope_theta, ASSUMED: transformers 5's layout).
  falcon-stop-at-eos: a folder whose greedy continuation reaches <|endoftext|> 11, run
    without --no-stop: the ids up to and including it.
  Refusals (hf ppl, exit 2, stderr naming the field / tensor): alibi true,
    quantization_config, each required size missing (4), hidden 36 / 4 heads (hd 9, odd),
    hidden 30 / 4 heads (not divisible), old multi-head with num_kv_heads 2 of 4, new arch with
    num_kv_heads 3 of 4, new arch with parallel_attn false, num_ln_in_parallel_attn 2 with the
    old arch parallel, num_ln_in_parallel_attn 3 (new arch), activation relu,
    partial_rotary_factor 0.5, rope_scaling longrope, n_embed without hidden_size, n_head /
    n_layer / n_head_kv differing from the modern key, n_head_kv without num_kv_heads; tensors:
    a tied model's stored lm_head different from the embeddings, q/k/v / dense / MLP biases with
    bias false, a missing bias with bias true, a missing lm_head (untied), query_key_value of
    3 d rows in a multi_query folder, of (H + 2) hd rows in a 2-kv new-arch folder, ln_mlp in a
    num_ln 1 folder, post_attention_layernorm in a parallel old-arch folder, a missing
    ln_mlp.bias, input_layernorm instead of ln_attn in a two-norm folder.
  Export (check_export): dense models trained 3 steps on a byte corpus ("norm": "layernorm",
    "mlp": "plain", RoPE on whole heads), `lol export --hf --arch falcon`: parallel + shared
    norm + 1 kv head, no biases, tied, gelu (-> falcon-7b's layout); parallel with two norms, 2
    of 4 kv heads, tanh, untied (-> new arch, num_ln 2); parallel + shared norm, 2 of 6 kv
    heads, biases (-> new arch, num_ln 1); parallel + shared norm, 4 of 4 kv heads (-> new arch,
    num_ln 1, num_kv_heads 4); sequential multi-head with biases, untied, tanh (-> old arch,
    parallel_attn false, multi_query false); sequential with 1 kv head, tied (-> old arch,
    multi_query true, parallel_attn false). config.json read with FalconConfig's rules gives the
    trained model and the layout the brief names; the tensors are the checkpoint's renamed bit
    for bit with query_key_value grouped as above (biases likewise), and hf ppl float64 of the
    export equals this reference on the exported tensors. Refused (exit 2 naming the field, no
    --out folder left): sequential with 2 of 4 kv heads, biases on q/k/v only, partial rotary
    0.5, a gated MLP.
  hf info --check (A, B, C, D, E, F, linear, defaults): exit 0, names FalconForCausalLM, "all
    tensors present", parameters = num_parameters(); ASSUMED from lol's summary format for
    GPT-NeoX / Phi (lines checked only when printed, a note otherwise): "heads H query, KV
    key/value, head_dim hd", rope_theta / layer_norm_eps on the "positions" line, "rope
    scaling", "vocab ... tied", "block" naming parallel / sequential.
Tolerances: float64 summed loss / bits per byte 1e-8 relative, perplexity 1e-7; float32 1e-6;
bfloat16 5e-3; greedy ids exact (after a float32 near-tie, top-2 gap < 1e-4 of max |logit|,
the rest of that continuation is not compared, noted). The RoPE tables are float32 (as
transformers'); selftest checks that one float32 ulp of noise on every entry stays below half
the float64 tolerance (1.0e-9 .. 3.4e-9 on these cases). At the time of writing lol was at most
7.3e-10 away in float64 (summed loss; 1e-11 .. 3e-11 on the exports), 4e-9 in float32 and 5.2e-4
in bfloat16; check: 285 checks, 113 lol runs, about 2.5 minutes here (selftest about 3 minutes).

`selftest` (no lol) checks the tokenizer rule, the GELU forms, falcon-7b's parameter count,
config reading (defaults, kv heads, norms), cached greedy = recomputed full forward, the RoPE
tables against the gpt_neox helpers and a direct complex rotation, the stop case, and the
sensitivity: each alternative reading (q/k/v as three contiguous blocks [q | k | v]; k and v
swapped in the group; query head h on kv head h mod KV instead of h // G; sequential instead of
parallel and back; ln_attn / ln_mlp swapped; ln_attn for both branches; the MLP on the
un-normalized x; interleaved RoPE; no RoPE; RoPE on half the head; the default base instead of
the given; linear ignored / multiplied; yarn / llama3 ignored; yarn without the attention factor;
dynamic read as linear; no attention / MLP biases; the other GELU form, relu; no scale / 1/hd;
LayerNorm without mean / bias, unbiased variance, eps outside the sqrt, another eps; the tied
head for an untied model) moves each case's float64 loss by > 20 x the float64 tolerance, and
the greedy ids check() compares change under each in at least one case (the eps / GELU-form
readings may not), as they do under cached decoding that puts every new token at position
len(prompt) or restarts the positions at 0.

ASSUMED (where neither the brief nor transformers as remembered decides):
  * hf ppl windows: non-overlapping windows of --context tokens, positions restart at 0 in each
    window, no BOS (docs/hf.md); --context 0 -> min(512, max_position_embeddings).
  * RoPE bases and head dims are chosen so that float32 pow is exact (10000 and 65536 with
    hd 8: 1, 10, 100, 1000 / 1, 16, 256, 4096), so torch's powf and libm cannot differ.
  * Falcon's real tokenizer.json uses a Sequence of Punctuation / ByteLevel / Digits
    pre-tokenizers; the folders here use a plain ByteLevel one (the tokenizer is not under test).
  * A multi_query old-arch config with num_kv_heads other than 1 (FalconConfig saves
    num_kv_heads = heads) is read with 1 kv head, as FalconAttention does (brief: multi_query
    true -> 1).
  * num_ln_in_parallel_attn 2 with sequential blocks (parallel_attn false) is ignored as
    FalconDecoderLayer ignores it (the brief refuses values only for parallel blocks).
  * transformers 5's rope_parameters {"rope_type", "rope_theta"} is read as for lol's other
    architectures (docs/hf.md "What is loaded").
  * Legacy keys equal to their modern keys are accepted (the brief refuses only an absent or
    different modern key).
  * Refusal messages name the field or tensor (any one of the listed needles); a new-arch
    num_kv_heads that does not divide the heads is refused (transformers' view fails).
  * hf info's summary lines follow the format lol printed for GPT-NeoX / Phi (checked only
    when the line is printed).
  * Export: the exported config.json is judged by what FalconConfig would read from it (absent
    keys -> its defaults); gelu_new / gelu_fast / gelu_pytorch_tanh count as one tanh GELU; a
    tied export may omit lm_head.weight or store it equal to the embeddings. Refusal messages of
    export name one of the listed fields.
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
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import Checker, argmax_low, compare_greedy, f32, log_softmax, parse_ids, top2_gap  # noqa
from safetensors_io import read_st, write_st  # noqa: E402
import gpt_neox_reference as nx  # noqa: E402  (GELU forms, LayerNorm, rotate-half, storage rounding)

_mul = operator.mul
DROP = object()
DIAGNOSE = [6]
TOL = {"float64": 1e-8, "float32": 1e-6, "bfloat16": 5e-3}

gelu_tanh, gelu_fast, gelu_exact, relu = nx.gelu_tanh, nx.gelu_fast, nx.gelu_exact, nx.relu
ACTS = {"gelu": gelu_exact, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "gelu_fast": gelu_fast,
        "relu": relu}
layernorm, f16, store, windows, mean_ce, rope_apply = nx.layernorm, nx.f16, nx.store, nx.windows, nx.mean_ce, \
    nx.rope_apply


def matvec(W, x):
    return [sum(map(_mul, row, x)) for row in W]


# ---------------------------------------------------------------- tokenizer (Falcon-style byte-level BPE)
SPECIALS = [">>TITLE<<", ">>ABSTRACT<<", ">>INTRODUCTION<<", ">>SUMMARY<<", ">>COMMENT<<", ">>ANSWER<<",
            ">>QUESTION<<", ">>DOMAIN<<", ">>PREFIX<<", ">>SUFFIX<<", ">>MIDDLE<<", "<|endoftext|>"]
EOT = 11
BYTE0 = 12
T_ID, HE_ID = 268, 269
TEXT = nx.TEXT


def encode(text):
    """ids under write_tokenizer's tokenizer: specials first, then bytes (id 12 + b), the merges
    by rank: 'Ġt' (a space followed by 't', kept together by GPT-2's ' ?\\p{L}+'), then 'he'"""
    out = []
    parts = re.split("(%s)" % "|".join(re.escape(s) for s in SPECIALS), text)
    for part in parts:
        if part in SPECIALS:
            out.append(SPECIALS.index(part))
            continue
        b = list(part.encode("utf-8"))
        m = []
        i = 0
        while i < len(b):
            if b[i] == 0x20 and i + 1 < len(b) and b[i + 1] == ord("t"):
                m.append(T_ID)
                i += 2
            else:
                m.append(BYTE0 + b[i])
                i += 1
        i = 0
        while i < len(m):
            if m[i] == BYTE0 + ord("h") and i + 1 < len(m) and m[i + 1] == BYTE0 + ord("e"):
                out.append(HE_ID)
                i += 2
            else:
                out.append(m[i])
                i += 1
    return out


def token_bytes(t):
    if BYTE0 <= t < BYTE0 + 256:
        return 1
    if t in (T_ID, HE_ID):
        return 2
    return len(SPECIALS[t].encode())


def write_tokenizer(folder, npos):
    b2u = q2.bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[b2u[b]] = BYTE0 + b
    vocab[b2u[0x20] + "t"] = T_ID
    vocab["he"] = HE_ID

    def added(i, s):
        return {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [added(i, s) for i, s in enumerate(SPECIALS)],
           "normalizer": None, "pre_tokenizer": dict(bl), "post_processor": dict(bl), "decoder": dict(bl),
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": vocab, "merges": [b2u[0x20] + " t", "h e"]}}
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    tc = {"add_prefix_space": False, "eos_token": "<|endoftext|>", "model_max_length": npos,
          "tokenizer_class": "PreTrainedTokenizerFast",
          "added_tokens_decoder": {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                            "single_word": False, "special": True}
                                   for i, s in enumerate(SPECIALS)}}
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=1)


# ---------------------------------------------------------------- config (FalconConfig)
def falcon_params(cfg):
    """the model FalconConfig describes (its defaults for absent keys; FalconAttention's kv rule;
    FalconDecoderLayer's norms)"""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = d // H
    new = bool(cfg.get("new_decoder_architecture", False))
    mq = bool(cfg.get("multi_query", True))
    nkv = cfg.get("num_kv_heads")
    if nkv is None:
        nkv = H
    KV = nkv if new else (1 if mq else nkv)
    parallel = bool(cfg.get("parallel_attn", True))
    nln = cfg.get("num_ln_in_parallel_attn")
    if nln is None and new:
        nln = 2
    if not parallel:
        norms = "seq"
    elif new and nln == 2:
        norms = "two"
    else:
        norms = "one"
    rp = dict(cfg.get("rope_scaling") or {}, **(cfg.get("rope_parameters") or {}))
    base = cfg.get("rope_theta", rp.get("rope_theta", 10000.0))
    rtype = rp.get("rope_type", rp.get("type", "default"))
    scaling = None if rtype == "default" else {k: v for k, v in rp.items() if k not in ("rope_theta", "type")}
    if scaling is not None:
        scaling["rope_type"] = rtype
    F = cfg.get("ffn_hidden_size")
    if F is None:
        F = 4 * d
    return {"V": cfg["vocab_size"], "d": d, "L": cfg["num_hidden_layers"], "H": H, "KV": KV, "hd": hd,
            "new": new, "mq": mq, "parallel": parallel, "nln": nln, "norms": norms,
            "bias": bool(cfg.get("bias", False)), "eps": cfg.get("layer_norm_epsilon", 1e-5),
            "P": cfg.get("max_position_embeddings", 2048), "base": float(base), "scaling": scaling,
            "F": F, "act": cfg.get("activation", "gelu"), "tied": cfg.get("tie_word_embeddings", True),
            "alibi": cfg.get("alibi", False), "bos": cfg.get("bos_token_id", 11), "eos": cfg.get("eos_token_id", 11)}


def falcon_config(**kw):
    """falcon-7b's config.json (as transformers 4.27 / the Hub file has it), tiny sizes"""
    c = {"alibi": False, "apply_residual_connection_post_layernorm": False, "architectures": ["FalconForCausalLM"],
         "attention_dropout": 0.0,
         "auto_map": {"AutoConfig": "configuration_falcon.FalconConfig",
                      "AutoModel": "modeling_falcon.FalconModel",
                      "AutoModelForCausalLM": "modeling_falcon.FalconForCausalLM"},
         "bias": False, "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0, "hidden_size": 32,
         "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon", "multi_query": True,
         "new_decoder_architecture": False, "num_attention_heads": 4, "num_hidden_layers": 3,
         "parallel_attn": True, "torch_dtype": "float32", "transformers_version": "4.27.4", "use_cache": True,
         "vocab_size": 300}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def norm_names(norms):
    return {"seq": ("input_layernorm", "post_attention_layernorm"), "two": ("ln_attn", "ln_mlp"),
            "one": ("input_layernorm",)}[norms]


def param_count(cfg):
    """transformers' num_parameters(): a tied lm_head counted once"""
    p = falcon_params(cfg)
    d, F, H, KV, hd = p["d"], p["F"], p["H"], p["KV"], p["hd"]
    b = 1 if p["bias"] else 0
    qkv = (H + 2 * KV) * hd
    per = 2 * d * len(norm_names(p["norms"])) + qkv * (d + b) + d * (d + b) + F * (d + b) + d * (F + b)
    return p["V"] * d * (1 if p["tied"] else 2) + p["L"] * per + 2 * d


# ---------------------------------------------------------------- weights (FalconForCausalLM names)
def falcon_weights(cfg, seed, emb_std=0.5, qk=2.5, fc=2.5, lnf_mean=1.0, lnf_std=0.3, head_std=0.3):
    """name -> (shape, flat float32-rounded values). LayerNorm weights N(1, 0.3), biases N(0, 0.3);
    the q and k rows of query_key_value larger than the v rows; MLP pre-activations of a few
    units"""
    rng = random.Random(seed)
    p = falcon_params(cfg)
    V, d, L, F, H, KV, hd = p["V"], p["d"], p["L"], p["F"], p["H"], p["KV"], p["hd"]
    G = H // KV
    T = {}

    def put(name, shape, sd, mean=0.0, row_sd=None):
        n = 1
        for s_ in shape:
            n *= s_
        if row_sd is None:
            vals = [f32(rng.gauss(mean, sd)) for _ in range(n)]
        else:
            vals = [f32(rng.gauss(0.0, row_sd(j // shape[1]))) for j in range(n)]
        T[name] = (list(shape), vals)

    def qkv_sd(r):
        kind = (r // hd) % (G + 2)
        return (qk if kind <= G else 1.2) / math.sqrt(d)

    put("transformer.word_embeddings.weight", [V, d], emb_std)
    for i in range(L):
        pre = "transformer.h.%d." % i
        for nm in norm_names(p["norms"]):
            put(pre + nm + ".weight", [d], 0.3, 1.0)
            put(pre + nm + ".bias", [d], 0.3)
        put(pre + "self_attention.query_key_value.weight", [(H + 2 * KV) * hd, d], 0, row_sd=qkv_sd)
        if p["bias"]:
            put(pre + "self_attention.query_key_value.bias", [(H + 2 * KV) * hd], 0.3)
        put(pre + "self_attention.dense.weight", [d, H * hd], 1.0 / math.sqrt(d))
        if p["bias"]:
            put(pre + "self_attention.dense.bias", [d], 0.3)
        put(pre + "mlp.dense_h_to_4h.weight", [F, d], fc / math.sqrt(d))
        if p["bias"]:
            put(pre + "mlp.dense_h_to_4h.bias", [F], 0.5)
        put(pre + "mlp.dense_4h_to_h.weight", [d, F], 1.2 / math.sqrt(F))
        if p["bias"]:
            put(pre + "mlp.dense_4h_to_h.bias", [d], 0.3)
    put("transformer.ln_f.weight", [d], lnf_std, lnf_mean)
    put("transformer.ln_f.bias", [d], 0.3)
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
    write_tokenizer(folder, cfg.get("max_position_embeddings", 2048))
    write_st(os.path.join(folder, "model.safetensors"),
             {k: (v[0], v[1], v[2] if len(v) > 2 else dtype) for k, v in T.items()}, {"format": "pt"})


# ---------------------------------------------------------------- RoPE tables
def falcon_rope(base, scaling, P, dim, npos):
    """cos, sin [npos][dim / 2] in float32 as modeling_rope_utils builds them (qwen2_reference's
    tables with dim = head_dim; the halves: cat(c, c) in transformers)"""
    rc = {"rope_theta": base, "max_position_embeddings": P, "rope_scaling": dict(scaling) if scaling else None}
    cos, sin = q2.rope_tables(rc, dim, npos)
    return [c[:dim // 2] for c in cos], [s[:dim // 2] for s in sin]


# ---------------------------------------------------------------- the model
class FalconRef:
    """FalconForCausalLM in float64. Keyword arguments select alternative readings (sensitivity
    checks and the diagnosis of a disagreement)."""

    def __init__(self, cfg, T, qkv="grouped", kvmap="div", residual="cfg", norms="cfg", rd=None,
                 rope_layout="half", base=None, scaling="cfg", rope_f64=False, attn_bias=True, mlp_bias=True,
                 act=None, attn_scale="hf", ln_center=True, ln_bias=True, ln_unbiased=False, ln_eps_out=False,
                 eps=None, head=None, decode_pos="hf", ulp_noise=None):
        p = falcon_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.KV, self.V, self.P, self.hd = p["d"], p["L"], p["H"], p["KV"], p["V"], p["P"], \
            p["hd"]
        self.G = self.H // self.KV
        self.qkv, self.kvmap = qkv, kvmap
        self.parallel = p["parallel"] if residual == "cfg" else residual == "parallel"
        self.norm_read = norms
        self.rd = self.hd if rd is None else rd
        self.rope_layout = rope_layout
        self.eps = p["eps"] if eps is None else eps
        self.ln_kw = {"center": ln_center, "bias": ln_bias, "unbiased": ln_unbiased, "eps_out": ln_eps_out}
        self.act = ACTS[act or p["act"]]
        self.scale = {"hf": self.hd ** -0.5, "none": 1.0, "1/hd": 1.0 / self.hd}[attn_scale]
        self.decode_pos = decode_pos
        b = p["base"] if base is None else base
        sc = p["scaling"] if scaling == "cfg" else scaling
        npos = min(self.P, 600) + 8
        if rope_f64:  # alternative: the tables in float64 (default / linear only)
            inv = [1.0 / b ** (j / self.rd) for j in range(0, self.rd, 2)]
            if sc is not None and sc["rope_type"] == "linear":
                inv = [v / sc["factor"] for v in inv]
            self.cos, self.sin = nx.rope_tables(inv, npos, 1.0, True)
        else:
            self.cos, self.sin = falcon_rope(b, sc, self.P, self.rd, npos)
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

        def lin(name, n_out, n_in, use_bias):
            M = rows(name + ".weight", [n_out, n_in])
            bb = list(T[name + ".bias"][1]) if (use_bias and p["bias"]) else [0.0] * n_out
            assert len(bb) == n_out, name
            return M, bb

        def ln(name):
            return list(T[name + ".weight"][1]), list(T[name + ".bias"][1])
        self.embed = rows("transformer.word_embeddings.weight", [self.V, d])
        self.layers = []
        for i in range(self.L):
            pre = "transformer.h.%d." % i
            ly = {"qkv": lin(pre + "self_attention.query_key_value", (H + 2 * KV) * hd, d, attn_bias),
                  "dense": lin(pre + "self_attention.dense", d, H * hd, attn_bias),
                  "up": lin(pre + "mlp.dense_h_to_4h", F, d, mlp_bias),
                  "down": lin(pre + "mlp.dense_4h_to_h", d, F, mlp_bias)}
            for nm in norm_names(p["norms"]):
                ly[nm] = ln(pre + nm)
            self.layers.append(ly)
        self.lnf = ln("transformer.ln_f")
        tied = p["tied"] if head is None else head == "tied"
        self.lm_head = self.embed if tied else rows("lm_head.weight", [self.V, d])
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps, **self.ln_kw)

    def _lin(self, Mb, x):
        M, b = Mb
        return [s + bb for s, bb in zip(matvec(M, x), b)]

    def _mlp(self, ly, m):
        return self._lin(ly["down"], [self.act(v) for v in self._lin(ly["up"], m)])

    def _split(self, qkv):
        H, KV, G, hd = self.H, self.KV, self.G, self.hd
        if self.qkv == "blocks":  # alternative: [q (H hd) | k (KV hd) | v (KV hd)]
            qh = [qkv[j * hd:(j + 1) * hd] for j in range(H)]
            kh = [qkv[(H + j) * hd:(H + j + 1) * hd] for j in range(KV)]
            vh = [qkv[(H + KV + j) * hd:(H + KV + j + 1) * hd] for j in range(KV)]
            return qh, kh, vh
        qh, kh, vh = [], [], []
        for g in range(KV):  # view(KV, G + 2, hd): G query heads, then k, then v
            o = g * (G + 2) * hd
            qh += [qkv[o + j * hd:o + (j + 1) * hd] for j in range(G)]
            ki, vi = (G, G + 1) if self.qkv == "grouped" else (G + 1, G)  # "kv_swapped": alternative
            kh.append(qkv[o + ki * hd:o + (ki + 1) * hd])
            vh.append(qkv[o + vi * hd:o + (vi + 1) * hd])
        return qh, kh, vh

    def _kvhead(self, h):
        return h // self.G if self.kvmap == "div" else h % self.KV

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, hd, rd = self.H, self.hd, self.rd
        norms = self.p["norms"]
        out = []
        for t, x in enumerate(X):
            pos = pos0 + t
            if norms == "two":
                la, lm = (ly["ln_attn"], ly["ln_mlp"])
                if self.norm_read == "swap":
                    la, lm = lm, la
                elif self.norm_read == "attn-both":
                    lm = la
                a_in = self._ln(x, la)
                m_norm = lm
            else:
                a_in = self._ln(x, ly["input_layernorm"])
                m_norm = ly["post_attention_layernorm"] if norms == "seq" else ly["input_layernorm"]
            qh, kh, vh = self._split(self._lin(ly["qkv"], a_in))
            c, s_ = self.cos[pos], self.sin[pos]
            qh = [rope_apply(q, c, s_, rd, self.rope_layout) for q in qh]
            kh = [rope_apply(k, c, s_, rd, self.rope_layout) for k in kh]
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
            if self.parallel:
                if self.norm_read == "mlp-on-x":
                    m_in = x
                elif norms == "one" and self.norm_read == "cfg":
                    m_in = a_in
                else:
                    m_in = self._ln(x, m_norm)
                mo = self._mlp(ly, m_in)
                out.append([m_ + a + x_ for m_, a, x_ in zip(mo, attn, x)])
            else:
                hmid = [a + x_ for a, x_ in zip(attn, x)]
                mo = self._mlp(ly, self._ln(hmid, m_norm))
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
    p = falcon_params(cfg)
    H, KV, hd = p["H"], p["KV"], p["hd"]
    sc = p["scaling"]
    other = "gelu" if ACTS[p["act"]] is not gelu_exact else "gelu_new"
    other_eps = 1e-6 if p["eps"] != 1e-6 else 1e-5
    out = []
    if KV > 1:  # with one group, [q | k | v] blocks are the grouped layout
        out.append(("q/k/v as three contiguous blocks [q | k | v]", {"qkv": "blocks"}))
    out.append(("k and v swapped within each group", {"qkv": "kv_swapped"}))
    if 1 < KV < H:
        out.append(("query head h uses kv head h mod KV, not h // G", {"kvmap": "mod"}))
    if p["parallel"]:
        out.append(("sequential instead of parallel", {"residual": "sequential"}))
        if p["norms"] == "two":
            out += [("ln_attn / ln_mlp swapped", {"norms": "swap"}),
                    ("ln_attn for both branches (one norm)", {"norms": "attn-both"})]
        out.append(("the MLP on the un-normalized block input", {"norms": "mlp-on-x"}))
    else:
        out.append(("parallel instead of sequential (post_attention_layernorm on x)", {"residual": "parallel"}))
    out += [("RoPE pairs interleaved (2i, 2i+1), GPT-J style", {"rope_layout": "interleaved"}),
            ("no RoPE", {"rope_layout": "none"}),
            ("RoPE on half of each head (partial_rotary_factor 0.5)", {"rd": hd // 2})]
    if p["base"] != 10000.0:
        out.append(("RoPE base 10000 (the default) instead of %g" % p["base"], {"base": 10000.0}))
    if sc is not None:
        t = sc["rope_type"]
        if t != "dynamic":
            out.append(("%s scaling ignored" % t, {"scaling": None}))
        if t == "linear":
            out.append(("linear factor multiplied instead of divided",
                        {"scaling": {"rope_type": "linear", "factor": 1.0 / sc["factor"]}}))
        if t == "yarn":
            out.append(("yarn without the attention factor", {"scaling": dict(sc, attention_factor=1.0)}))
        if t == "dynamic":
            out.append(("dynamic read as linear (inv_freq / factor)",
                        {"scaling": {"rope_type": "linear", "factor": sc["factor"]}}))
    if p["bias"]:
        out += [("no query_key_value / dense biases", {"attn_bias": False}),
                ("no MLP biases", {"mlp_bias": False})]
    out += [("activation %s" % other, {"act": other}),
            ("activation relu", {"act": "relu"}),
            ("no attention scale", {"attn_scale": "none"}),
            ("attention scale 1/head_dim", {"attn_scale": "1/hd"}),
            ("LayerNorm without the mean subtraction", {"ln_center": False}),
            ("LayerNorm without bias", {"ln_bias": False}),
            ("LayerNorm with the unbiased (n-1) variance", {"ln_unbiased": True}),
            ("LayerNorm eps outside the sqrt", {"ln_eps_out": True}),
            ("layer_norm_epsilon %g" % other_eps, {"eps": other_eps})]
    if p["eps"] != 1e-5:
        out.append(("layer_norm_epsilon 1e-5 (the default) instead of %g" % p["eps"], {"eps": 1e-5}))
    if not p["tied"]:
        out.append(("tied head (word_embeddings) instead of lm_head", {"head": "tied"}))
    return out


DECODE_ALTS = [("cached decoding: every new token at position len(prompt)", {"decode_pos": "stuck"}),
               ("cached decoding: new tokens' positions restart at 0", {"decode_pos": "restart"})]
WEAK = ("activation gelu", "layer_norm_epsilon", "LayerNorm with the unbiased", "LayerNorm eps outside",
        "yarn without", "RoPE tables")


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, seed, falcon_weights keyword arguments)"""
    A = falcon_config()
    B = falcon_config(auto_map=DROP, multi_query=DROP, new_decoder_architecture=True, num_kv_heads=2,
                      num_hidden_layers=2)
    C = falcon_config(auto_map=DROP, apply_residual_connection_post_layernorm=DROP, new_decoder_architecture=True,
                      num_kv_heads=2, num_attention_heads=6, hidden_size=48, num_ln_in_parallel_attn=1,
                      ffn_hidden_size=96, rope_theta=65536.0, max_position_embeddings=80, num_hidden_layers=2,
                      tie_word_embeddings=False, activation="gelu", rope_scaling=None,
                      transformers_version="4.41.0")
    D = falcon_config(auto_map=DROP, multi_query=False, parallel_attn=False, bias=True, tie_word_embeddings=False,
                      activation="gelu_new", ffn_hidden_size=64, num_hidden_layers=2, torch_dtype="bfloat16")
    E = falcon_config(auto_map=DROP, parallel_attn=False, tie_word_embeddings=True, activation="gelu_pytorch_tanh",
                      layer_norm_epsilon=1e-3, ffn_hidden_size=64, num_hidden_layers=2, torch_dtype="float16")
    F = falcon_config(auto_map=DROP, new_decoder_architecture=True, bias=True, activation="gelu_fast",
                      tie_word_embeddings=False, ffn_hidden_size=64, num_hidden_layers=2)
    return {"A": (A, 807, {"emb_std": 0.005, "lnf_mean": 0.0, "lnf_std": 60.0}), "B": (B, 802, {}),
            "C": (C, 803, {}), "D": (D, 804, {"qk": 1.5}), "E": (E, 805, {"emb_std": 0.3}),
            "F": (F, 806, {"emb_std": 0.01})}


CASE_TAGS = {"A": "falcon-7b-like", "B": "falcon-40b-like", "C": "falcon-11B-like",
             "D": "falcon-old-seq-mha-bias-bf16", "E": "falcon-old-seq-mqa-f16", "F": "falcon-new-mha-bias"}
STORAGE = {"D": "BF16", "E": "F16"}
STORED_HEAD = ("B", "E")  # tied with a stored lm_head.weight equal to the embeddings


def variant_table():
    """RoPE-scaling configs on the weights of A (1 kv head, P 2048) / B (new arch) / C"""
    tab = case_table()
    A, B, C = tab["A"][0], tab["B"][0], tab["C"][0]
    return {"falcon-linear": (dict(A, rope_scaling={"type": "linear", "factor": 2.0}), "A"),
            "falcon-dynamic": (dict(B, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "B"),
            "falcon-yarn": (dict(C, rope_scaling={"rope_type": "yarn", "factor": 4.0}), "C"),
            "falcon-llama3": (dict(A, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 64}), "A")}


VARIANT_PROMPT = {"falcon-linear": (10, 40), "falcon-dynamic": (10, 40), "falcon-yarn": (120, 160),
                  "falcon-llama3": (30, 70)}


def key_variants():
    """the same models under other config.json layouts: tag -> (config, the case whose weights and
    reference it shares)"""
    tab = case_table()
    A, B, C, D = tab["A"][0], tab["B"][0], tab["C"][0], tab["D"][0]
    required = ("architectures", "model_type", "vocab_size", "hidden_size", "num_hidden_layers",
                "num_attention_heads")
    defaults = {k: A[k] for k in required}
    saved = {k: v for k, v in A.items() if k not in ("auto_map", "apply_residual_connection_post_layernorm")}
    saved.update(num_kv_heads=4, max_position_embeddings=2048, rope_theta=10000.0, rope_scaling=None,
                 ffn_hidden_size=128, activation="gelu", num_ln_in_parallel_attn=None, tie_word_embeddings=True,
                 transformers_version="4.44.0")
    legacy = dict(B, n_embed=32, n_head=4, n_layer=2, n_head_kv=2)
    v5 = {k: v for k, v in C.items() if k not in ("rope_theta", "rope_scaling", "torch_dtype")}
    v5.update(dtype="float32", transformers_version="5.0.0",
              rope_parameters={"rope_type": "default", "rope_theta": 65536.0})
    return {"falcon-defaults-only-sizes": (defaults, "A"),
            "falcon-7b-saved-by-4.4x": (saved, "A"),
            "falcon-mq-ignores-num_kv_heads": (dict(A, num_kv_heads=2), "A"),
            "falcon-num_ln-1-old-arch": (dict(A, num_ln_in_parallel_attn=1), "A"),
            "falcon-40b-num_ln-2-explicit": (dict(B, num_ln_in_parallel_attn=2), "B"),
            "falcon-40b-legacy-keys-equal": (legacy, "B"),
            "falcon-seq-num_ln-2-ignored": (dict(D, num_ln_in_parallel_attn=2), "D"),
            "falcon-v5-rope_parameters": (v5, "C")}


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32", stored_head=False):
        self.ck, self.tag, self.cfg = ck, tag, cfg
        F = dict(T)
        if stored_head:
            F["lm_head.weight"] = F["transformer.word_embeddings.weight"]
        write_folder(os.path.join(ck.work, tag), cfg, F, dtype)
        self.T = store(T, dtype)
        self.model = FalconRef(cfg, self.T)
        self.alts = {}
        p = falcon_params(cfg)
        print("[%s] %s storage, layers %d, hidden %d, heads %d / kv %d (hd %d), %s arch, %s, norms %s, bias %s, "
              "base %g%s, act %s, eps %g, tied %s%s" % (
                  tag, dtype, p["L"], p["d"], p["H"], p["KV"], p["hd"], "new" if p["new"] else "old",
                  "parallel" if p["parallel"] else "sequential", "/".join(norm_names(p["norms"])), p["bias"],
                  p["base"], ", scaling %s" % (p["scaling"],) if p["scaling"] else "", p["act"], p["eps"],
                  p["tied"], ", stored lm_head" if stored_head else ""), flush=True)

    def alt(self, kw):
        key = json.dumps(kw, sort_keys=True)
        if key not in self.alts:
            self.alts[key] = FalconRef(self.cfg, self.T, **kw)
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
                try:
                    a, _ = mean_ce(self.alt(kw), wins)
                except (ValueError, KeyError, AssertionError):
                    continue
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
        """without --no-stop: the ids up to and including the first EOS (11)"""
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

    def info(self):
        ck = self.ck
        r = ck.run(["hf", "info", self.tag, "--check"], expect_rc=None)
        ck.equal("%s hf info --check exits 0" % self.tag, r.returncode, 0)
        if r.returncode != 0:
            print("    stderr: %s" % r.stderr.strip()[-400:])
            return None
        ck.equal("%s hf info names FalconForCausalLM" % self.tag, "FalconForCausalLM" in r.stdout, True)
        ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout, True)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            ck.equal("%s hf info parameters (transformers' num_parameters())" % self.tag,
                     int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            ck.note("%s: hf info prints no parameter count" % self.tag)
        # ASSUMED: the summary lines in the form lol printed for GPT-NeoX / Phi; checked when printed
        p = falcon_params(self.cfg)
        lines = {}
        for l_ in r.stdout.splitlines():
            mm = re.match(r"(\S+(?: \S+)?)\s{2,}(.*)", l_)
            if mm:
                lines.setdefault(mm.group(1), mm.group(2))
        hl = lines.get("heads")
        if hl is not None:
            heads = re.search(r"(\d+) query, (\d+) key/value, head_dim (\d+)", hl)
            ck.equal("%s hf info heads line (query, key/value, head_dim) [ASSUMED]: %r" % (self.tag, hl),
                     tuple(int(x) for x in heads.groups()) if heads else None, (p["H"], p["KV"], p["hd"]))
        else:
            ck.note("%s: hf info prints no 'heads' line" % self.tag)
        pos = lines.get("positions")
        if pos is not None:
            mp = re.match(r"(\d+)", pos)
            mb = re.search(r"rope_theta ([\d.e+-]+)", pos)
            me = re.search(r"layer_norm_eps\w* ([\d.e+-]+)", pos)
            ck.equal("%s hf info positions / rope_theta / layer_norm_eps [ASSUMED]: %r" % (self.tag, pos),
                     (int(mp.group(1)) if mp else None, float(mb.group(1)) if mb else None,
                      float(me.group(1)) if me else None), (p["P"], p["base"], p["eps"]))
        else:
            ck.note("%s: hf info prints no 'positions' line" % self.tag)
        sc = lines.get("rope scaling")
        if sc is not None:
            if p["scaling"]:
                ck.equal("%s hf info rope scaling line [ASSUMED]: %r" % (self.tag, sc),
                         sc.startswith(p["scaling"]["rope_type"]) and ("factor %g" % p["scaling"]["factor"]) in sc,
                         True)
            else:
                ck.equal("%s hf info rope scaling none [ASSUMED]" % self.tag, sc, "none")
        voc = lines.get("vocab")
        if voc is not None:
            ck.equal("%s hf info vocab line: tied %s [ASSUMED]: %r" % (self.tag, p["tied"], voc),
                     "tied" in voc and "untied" not in voc, p["tied"])
        blk = lines.get("block")
        if blk is not None:
            word = "parallel" if p["parallel"] else "sequential"
            ck.equal("%s hf info block line names %s [ASSUMED]: %r" % (self.tag, word, blk), word in blk, True)
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


def refusals(ck):
    print("[refusals]", flush=True)
    tab = case_table()
    A, B, C, D = tab["A"][0], tab["B"][0], tab["C"][0], tab["D"][0]
    base = dict(A, num_hidden_layers=2)
    Ts = falcon_weights(base, 7)
    refusal(ck, "refuse-alibi", dict(base, alibi=True), Ts, ["alibi"])
    refusal(ck, "refuse-quantization_config", dict(base, quantization_config={"quant_method": "bitsandbytes"}), Ts,
            ["quantization_config"])
    for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"):
        refusal(ck, "refuse-missing-" + k, falcon_config(**dict({"num_hidden_layers": 2}, **{k: DROP})), Ts, [k])
    c36 = dict(base, hidden_size=36)
    refusal(ck, "refuse-head_dim-odd", c36, falcon_weights(c36, 7), ["head_dim", "hidden_size", "num_attention_heads"])
    c30 = dict(base, hidden_size=30)
    refusal(ck, "refuse-heads-not-dividing-hidden", c30, Ts, ["head_dim", "hidden_size", "num_attention_heads"])
    cm = dict(base, multi_query=False)
    Tm = falcon_weights(cm, 7)
    refusal(ck, "refuse-old-mha-num_kv_heads-2", dict(cm, num_kv_heads=2), Tm, ["num_kv_heads"])
    TB = falcon_weights(B, 8)
    refusal(ck, "refuse-new-arch-kv-3-of-4", dict(B, num_kv_heads=3), TB, ["num_kv_heads"],
            " (ASSUMED: transformers' view fails)")
    refusal(ck, "refuse-new-arch-sequential", dict(B, parallel_attn=False), TB,
            ["parallel_attn", "new_decoder_architecture"])
    refusal(ck, "refuse-num_ln-2-old-arch-parallel", dict(base, num_ln_in_parallel_attn=2), Ts,
            ["num_ln_in_parallel_attn"])
    refusal(ck, "refuse-num_ln-3", dict(B, num_ln_in_parallel_attn=3), TB, ["num_ln_in_parallel_attn"])
    refusal(ck, "refuse-activation-relu", dict(base, activation="relu"), Ts, ["activation"])
    refusal(ck, "refuse-partial_rotary_factor", dict(base, partial_rotary_factor=0.5), Ts, ["partial_rotary_factor"])
    refusal(ck, "refuse-longrope", dict(base, rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 4,
                                                            "long_factor": [2.0] * 4, "factor": 2.0}),
            Ts, ["longrope", "rope_scaling"])
    legacy = {k: v for k, v in base.items() if k != "hidden_size"}
    legacy["n_embed"] = 32
    refusal(ck, "refuse-legacy-n_embed-only", legacy, Ts, ["n_embed", "hidden_size"])
    refusal(ck, "refuse-legacy-n_head-differs", dict(base, n_head=2), Ts, ["n_head"])
    refusal(ck, "refuse-legacy-n_layer-differs", dict(base, n_layer=3), Ts, ["n_layer"])
    refusal(ck, "refuse-legacy-n_head_kv-differs", dict(B, n_head_kv=1), TB, ["n_head_kv"])
    nokv = {k: v for k, v in B.items() if k != "num_kv_heads"}
    nokv["n_head_kv"] = 2
    refusal(ck, "refuse-legacy-n_head_kv-only", nokv, TB, ["n_head_kv", "num_kv_heads"])
    # tensors
    T = dict(Ts)
    T["lm_head.weight"] = ([base["vocab_size"], 32], [f32(0.1 * math.sin(j)) for j in range(base["vocab_size"] * 32)])
    refusal(ck, "refuse-tied-lm_head-differs", base, T, ["lm_head"])
    T = dict(falcon_weights(dict(base, bias=True), 7))
    refusal(ck, "refuse-biases-with-bias-false", base, T,
            ["query_key_value.bias", "dense.bias", "dense_h_to_4h.bias", "dense_4h_to_h.bias"])
    TD = falcon_weights(D, 9)
    T = dict(TD)
    del T["transformer.h.1.mlp.dense_4h_to_h.bias"]
    refusal(ck, "refuse-missing-bias", D, T, ["transformer.h.1.mlp.dense_4h_to_h.bias"])
    TC = falcon_weights(C, 10)
    T = dict(TC)
    del T["lm_head.weight"]
    refusal(ck, "refuse-untied-no-lm_head", C, T, ["lm_head.weight"])
    T = dict(Ts)
    T["transformer.h.0.self_attention.query_key_value.weight"] = Tm["transformer.h.0.self_attention.query_key_value.weight"]
    refusal(ck, "refuse-mq-qkv-of-3d-rows", base, T, ["transformer.h.0.self_attention.query_key_value.weight"])
    T = dict(TB)
    T["transformer.h.1.self_attention.query_key_value.weight"] = Ts["transformer.h.1.self_attention.query_key_value.weight"]
    refusal(ck, "refuse-new-arch-qkv-of-1-kv-head", B, T, ["transformer.h.1.self_attention.query_key_value.weight"])
    T = dict(TC)
    T["transformer.h.0.ln_mlp.weight"] = TC["transformer.h.0.input_layernorm.weight"]
    T["transformer.h.0.ln_mlp.bias"] = TC["transformer.h.0.input_layernorm.bias"]
    refusal(ck, "refuse-ln_mlp-in-num_ln-1-folder", C, T, ["ln_mlp"])
    T = dict(Ts)
    T["transformer.h.1.post_attention_layernorm.weight"] = Ts["transformer.h.1.input_layernorm.weight"]
    T["transformer.h.1.post_attention_layernorm.bias"] = Ts["transformer.h.1.input_layernorm.bias"]
    refusal(ck, "refuse-post_attention_layernorm-in-parallel", base, T, ["post_attention_layernorm"])
    T = dict(TB)
    del T["transformer.h.0.ln_mlp.bias"]
    refusal(ck, "refuse-missing-ln_mlp-bias", B, T, ["transformer.h.0.ln_mlp.bias"])
    T = {k.replace(".ln_attn.", ".input_layernorm."): v for k, v in TB.items()}
    refusal(ck, "refuse-input_layernorm-in-two-norm-folder", B, T, ["ln_attn", "input_layernorm"])


# ---------------------------------------------------------------- export
EXPORT_BASE = {"architecture": "dense", "n_layers": 2, "norm": "layernorm", "mlp": "plain", "max_seq_len": 64,
               "qkv_bias": False, "o_bias": False, "mlp_bias": False}
EXPORT_MODELS = {
    # tag: (dense model, the layout expected: (new_arch, multi_query effective kv 1, parallel, norms))
    "export-falcon-7b-layout": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=1, ffn_hidden=128,
                                    parallel_residual=True, shared_input_norm=True, activation="gelu",
                                    tie_word_embeddings=True, rope_theta=10000.0, norm_eps=1e-5),
    "export-falcon-40b-layout": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=2, ffn_hidden=64,
                                     parallel_residual=True, activation="gelu_pytorch_tanh",
                                     tie_word_embeddings=False, rope_theta=65536.0, norm_eps=1e-3),
    "export-falcon-11b-layout-bias": dict(EXPORT_BASE, d_model=48, n_heads=6, n_kv_heads=2, ffn_hidden=96,
                                          parallel_residual=True, shared_input_norm=True, activation="gelu",
                                          qkv_bias=True, o_bias=True, mlp_bias=True,
                                          tie_word_embeddings=False, rope_theta=10000.0, norm_eps=1e-5),
    "export-falcon-parallel-shared-mha": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=4, ffn_hidden=64,
                                              parallel_residual=True, shared_input_norm=True, activation="gelu",
                                              tie_word_embeddings=True, rope_theta=10000.0, norm_eps=1e-5),
    "export-falcon-seq-mha-bias": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=4, ffn_hidden=64,
                                       activation="gelu_pytorch_tanh", qkv_bias=True, o_bias=True, mlp_bias=True,
                                       tie_word_embeddings=False, rope_theta=10000.0, norm_eps=1e-5),
    "export-falcon-seq-mqa": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=1, ffn_hidden=64,
                                  activation="gelu", tie_word_embeddings=True, rope_theta=65536.0, norm_eps=1e-5)}


def expected_layout(m):
    """(new_decoder_architecture, kv heads, parallel_attn, norms) the brief names for a dense model"""
    H, KV = m["n_heads"], m["n_kv_heads"]
    if not m.get("parallel_residual"):
        return (False, KV, False, "seq")
    if m.get("shared_input_norm") and KV == 1:
        return (False, 1, True, "one")
    return (True, KV, True, "one" if m.get("shared_input_norm") else "two")


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


def expected_export_tensors(ck, tag, m, S):
    """the Falcon tensors a dense checkpoint S must export to"""
    d, H, KV, L = m["d_model"], m["n_heads"], m["n_kv_heads"], m["n_layers"]
    hd, G = d // H, H // KV
    new, kv, par, norms = expected_layout(m)
    ren = {"model.embed_tokens.weight": "transformer.word_embeddings.weight",
           "model.norm.weight": "transformer.ln_f.weight", "model.norm.bias": "transformer.ln_f.bias"}
    if not m["tie_word_embeddings"]:
        ren["lm_head.weight"] = "lm_head.weight"
    nmap = {"seq": (("input_layernorm", "input_layernorm"), ("post_attention_layernorm", "post_attention_layernorm")),
            "two": (("input_layernorm", "ln_attn"), ("post_attention_layernorm", "ln_mlp")),
            "one": (("input_layernorm", "input_layernorm"),)}[norms]
    for i in range(L):
        a, b = "model.layers.%d." % i, "transformer.h.%d." % i
        for x, y in nmap:
            for z in ("weight", "bias"):
                ren[a + x + "." + z] = b + y + "." + z
        for x, y in (("self_attn.o_proj", "self_attention.dense"), ("mlp.up_proj", "mlp.dense_h_to_4h"),
                     ("mlp.down_proj", "mlp.dense_4h_to_h")):
            for z in ("weight", "bias"):
                ren[a + x + "." + z] = b + y + "." + z
    want = {}
    for k_src, k_dst in ren.items():
        if k_src in S:
            want[k_dst] = (S[k_src][0], S[k_src][1])
        elif not (k_src.endswith(".bias") and ("o_proj" in k_src or "mlp." in k_src) and not m["qkv_bias"]):
            ck.note("%s: the checkpoint has no %s" % (tag, k_src))
    for i in range(L):
        a, b = "model.layers.%d.self_attn." % i, "transformer.h.%d.self_attention.query_key_value." % i
        if not all(a + x + "_proj.weight" in S for x in "qkv"):
            ck.note("%s: the checkpoint has no q/k/v projections of layer %d" % (tag, i))
            continue
        rows, bias = [], []
        q, k, v = (S[a + x + "_proj.weight"][1] for x in "qkv")
        for g in range(KV):
            rows += q[g * G * hd * d:(g + 1) * G * hd * d] + k[g * hd * d:(g + 1) * hd * d] + \
                v[g * hd * d:(g + 1) * hd * d]
        want[b + "weight"] = ([(H + 2 * KV) * hd, d], rows)
        if m["qkv_bias"]:
            qb, kb, vb = (S[a + x + "_proj.bias"][1] for x in "qkv")
            for g in range(KV):
                bias += qb[g * G * hd:(g + 1) * G * hd] + kb[g * hd:(g + 1) * hd] + vb[g * hd:(g + 1) * hd]
            want[b + "bias"] = ([(H + 2 * KV) * hd], bias)
    return want


def check_export(ck):
    """train tiny dense models of Falcon's layouts for 3 steps, `lol export --hf --arch falcon`:
    config.json must describe the model in FalconConfig's keys with the layout the brief names,
    query_key_value must be the checkpoint's q/k/v rows grouped per kv head, the other tensors
    renamed bit for bit, and `hf ppl --dtype float64` of the export must equal this reference on
    the exported tensors"""
    w = ck.work
    print("[export] dense models of Falcon's layouts -> FalconForCausalLM folders", flush=True)
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
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "falcon"])
        if r.returncode != 0:
            continue
        cfg = json.load(open(os.path.join(w, tag, "config.json")))
        E = read_st(os.path.join(w, tag, "model.safetensors"))
        ck.equal("%s: architectures / model_type" % tag, (cfg.get("architectures"), cfg.get("model_type")),
                 (["FalconForCausalLM"], "falcon"))
        d, H, KV, L, F = m["d_model"], m["n_heads"], m["n_kv_heads"], m["n_layers"], m["ffn_hidden"]
        try:
            p = falcon_params(cfg)
        except (KeyError, TypeError) as e:
            ck.fail("%s: config.json unreadable as FalconConfig: %r" % (tag, e))
            continue
        new, kv, par, norms = expected_layout(m)
        keys = ("d", "L", "H", "KV", "F", "P", "base", "scaling", "eps", "tied", "bias", "new", "parallel",
                "norms", "alibi")
        got = {k: p[k] for k in keys}
        got["act"] = "tanh" if ACTS.get(p["act"]) in (gelu_tanh, gelu_fast) else p["act"]
        want = {"d": d, "L": L, "H": H, "KV": kv, "F": F, "P": m["max_seq_len"], "base": m["rope_theta"],
                "scaling": None, "eps": m["norm_eps"], "tied": m["tie_word_embeddings"], "bias": m["qkv_bias"],
                "new": new, "parallel": par, "norms": norms, "alibi": False,
                "act": "tanh" if m["activation"] == "gelu_pytorch_tanh" else m["activation"]}
        ck.equal("%s: config.json read as FalconConfig (defaults for absent keys)" % tag, got, want)
        if not new and par:
            ck.equal("%s: falcon-7b's layout (multi_query true, new_decoder_architecture false)" % tag,
                     (p["mq"], p["new"]), (True, False))
        if not par:
            ck.equal("%s: sequential: multi_query = (kv heads == 1), new_decoder_architecture false" % tag,
                     (p["mq"], p["new"]), (KV == 1, False))
        if new:
            ck.equal("%s: new arch: num_kv_heads, num_ln_in_parallel_attn" % tag,
                     (cfg.get("num_kv_heads"), p["nln"]), (KV, 1 if norms == "one" else 2))
        want_t = expected_export_tensors(ck, tag, m, S)
        got_t = {k: (v[0], v[1]) for k, v in E.items()}
        if m["tie_word_embeddings"] and "lm_head.weight" in got_t:
            ck.equal("%s: a tied export's stored lm_head.weight equals the embeddings" % tag,
                     got_t["lm_head.weight"] == got_t.get("transformer.word_embeddings.weight"), True)
            del got_t["lm_head.weight"]
        ck.equal("%s: tensor names" % tag, sorted(got_t), sorted(want_t))
        diff = sorted(k for k in want_t if k in got_t and got_t[k] != want_t[k])
        ck.equal("%s: tensors = the checkpoint's, query_key_value grouped per kv head (names differing)" % tag,
                 diff, [])
        if diff and any("query_key_value.weight" in k for k in diff):
            k = next(k for k in diff if "query_key_value.weight" in k)
            i = int(k.split(".")[2])
            blocks = [v for x in "qkv" for v in S["model.layers.%d.self_attn.%s_proj.weight" % (i, x)][1]]
            if got_t[k][1] == blocks:
                print("    %s: query_key_value holds q, k, v as three contiguous blocks (not grouped)" % tag)
        try:
            model = FalconRef(cfg, got_t)
        except (KeyError, AssertionError) as e:
            ck.fail("%s: the exported tensors do not form a FalconForCausalLM: %r" % (tag, e))
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
    # models FalconForCausalLM cannot hold: refused naming the field, nothing left
    base = dict(EXPORT_MODELS["export-falcon-seq-mha-bias"], n_layers=1)
    for tag, model, needles in (
            ("export-refuse-seq-gqa", dict(base, n_kv_heads=2), ["n_kv_heads"]),
            ("export-refuse-qkv-bias-only", dict(base, o_bias=False, mlp_bias=False), ["qkv_bias", "o_bias", "mlp_bias"]),
            ("export-refuse-partial-rotary", dict(base, partial_rotary_factor=0.5), ["partial_rotary_factor"]),
            ("export-refuse-gated-mlp", dict(base, mlp="gated", qkv_bias=False, o_bias=False, mlp_bias=False),
             ["mlp", "gate"])):
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        run = train_run(ck, tag, model, 1)
        if run is None:
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "falcon"], expect_rc=None)
        ck.compared += 1
        left = os.path.exists(os.path.join(w, tag))
        if r.returncode != 2 or not any(n in r.stderr for n in needles) or left:
            ck.fail("%s: expected exit 2 naming %s and no %s folder left; got exit %d (folder left: %s), %r" % (
                tag, " or ".join(needles), tag, r.returncode, left, r.stderr.strip()[-300:]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


# ---------------------------------------------------------------- check
STOP_PROMPT = encode("Then the ")
STOP_PULL = [2.5]


def stop_case():
    """a folder whose greedy continuation reaches <|endoftext|> 11: D's layout in F32 with
    lm_head row 11 pulled towards ln_f's bias direction"""
    cfg = dict(case_table()["D"][0], torch_dtype="float32")
    T = dict(falcon_weights(cfg, 812))
    sh, v = T["lm_head.weight"]
    d = sh[1]
    lnb = T["transformer.ln_f.bias"][1]
    v = list(v)
    for j in range(d):
        v[EOT * d + j] = f32(v[EOT * d + j] + STOP_PULL[0] * lnb[j])
    T["lm_head.weight"] = (sh, v)
    return cfg, T


def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    tab = case_table()
    W = {k: falcon_weights(cfg, sd, **kw) for k, (cfg, sd, kw) in tab.items()}

    def case(k, tag=None, cfg=None):
        return Case(ck, tag or CASE_TAGS[k], cfg or tab[k][0], W[k], STORAGE.get(k, "F32"), k in STORED_HEAD)

    # A: falcon-7b's config keys: multi-query, parallel, one norm, tied, no biases
    c = case("A")
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[60:100], 20)
    c.generate(ids[60:100], 20, "float32")
    ptext = "Then the thin thrush"
    c.generate(encode(ptext), 25, text=ptext)
    c.info()

    # B: falcon-40b's: new arch, 4 heads / 2 kv, ln_attn + ln_mlp, tied with a stored lm_head
    c = case("B")
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:5], 30)
    c.generate(ids[120:160], 22)
    c.generate(ids[120:160], 22, "float32")
    c.info()

    # C: falcon-11B's: new arch, num_ln 1, 6 heads / 2 kv, rope_theta, max_position_embeddings 80, untied
    c = case("C")
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:4], 30)
    c.generate(ids[30:70], 20)
    c.generate(ids[30:70], 20, "float32")
    c.generate(ids[100:150], 40, expect_n=80 - 50)
    c.info()

    # D: old arch, sequential, multi-head, biases, untied, gelu_new, BF16
    c = case("D")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:40], 25)
    c.info()

    # E: old arch, sequential, multi-query, tied with a stored lm_head, tanh GELU, eps 1e-3, F16
    c = case("E")
    c.ppl(ids, 0)
    c.generate(ids[30:62], 25)
    c.info()

    # F: new arch with kv = heads (per head [q, k, v]), two norms, biases, gelu_fast, untied
    c = case("F")
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.generate(ids[10:40], 25)
    c.info()

    # RoPE scaling
    for name, (cfg, src) in variant_table().items():
        c = Case(ck, name, cfg, W[src], STORAGE.get(src, "F32"), src in STORED_HEAD)
        c.ppl(ids, 0)
        a, b = VARIANT_PROMPT[name]
        c.generate(ids[a:b], 25)
        if name == "falcon-linear":
            c.info()

    # the same models under other config.json layouts
    for tag, (cfg, src) in key_variants().items():
        c = Case(ck, tag, cfg, W[src], STORAGE.get(src, "F32"), src in STORED_HEAD)
        c.ppl(ids, 0)
        if tag == "falcon-defaults-only-sizes":
            c.generate(ids[10:40], 25)
            out = c.info()
            m = re.search(r"^stop tokens\s+(.*)$", out or "", re.M)
            ck.equal("%s hf info stop tokens: FalconConfig's default eos 11 (= the tokenizer's)" % tag,
                     sorted(set(int(x) for x in re.findall(r"\b\d+\b", m.group(1)))) if m else None, [EOT])

    # stop at EOS without --no-stop
    cfgS, TS = stop_case()
    c = Case(ck, "falcon-stop-at-eos", cfgS, TS)
    c.generate_stop(STOP_PROMPT, 30)

    refusals(ck)
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
    pieces = re.findall(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+", TEXT)
    if "".join(pieces) != TEXT:
        bad.append("pre-tokenizer pieces do not cover the text")
    if [t for pc in pieces for t in encode(pc)] != ids:
        bad.append("encoding piece by piece differs from the whole-text rule")
    if [t - BYTE0 + 2 if BYTE0 <= t < BYTE0 + 256 else {T_ID: 258, HE_ID: 259}[t] for t in ids] != nx.encode(TEXT):
        bad.append("the encoding differs from gpt_neox_reference's (same merges, other ids)")
    if encode("a<|endoftext|>>>TITLE<<") != [BYTE0 + ord("a"), EOT, 0]:
        bad.append("specials: %s" % encode("a<|endoftext|>>>TITLE<<"))
    print("  selftest: text %d ids (%d 'Ġt', %d 'he'), %d bytes" % (len(ids), ids.count(T_ID), ids.count(HE_ID),
                                                                      len(TEXT.encode())))
    for x in (-3.0, -1.0, 0.5, 2.0):
        if abs(gelu_fast(x) - gelu_tanh(x)) > 1e-10:
            bad.append("gelu_fast != gelu_new at %g" % x)
    if abs(gelu_exact(1.0) - 0.8413447460685429) > 1e-12:
        bad.append("exact gelu(1) wrong")
    # falcon-7b: 6,921,720,704 parameters (published)
    f7 = falcon_config(vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71)
    if param_count(f7) != 6921720704:
        bad.append("falcon-7b param count %d" % param_count(f7))
    f40 = falcon_config(vocab_size=65024, hidden_size=8192, num_hidden_layers=60, num_attention_heads=128,
                        new_decoder_architecture=True, num_kv_heads=8)
    print("  selftest: falcon-7b %d parameters, falcon-40b %d" % (param_count(f7), param_count(f40)))
    tab = case_table()
    for tag, (cfg, sd, wkw) in tab.items():
        n = sum(len(v[1]) for v in falcon_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    want = {"A": (1, "one", False, True, 2048, 128, 10000.0), "B": (2, "two", True, True, 2048, 128, 10000.0),
            "C": (2, "one", True, False, 80, 96, 65536.0), "D": (4, "seq", False, False, 2048, 64, 10000.0),
            "E": (1, "seq", False, True, 2048, 64, 10000.0), "F": (4, "two", True, False, 2048, 64, 10000.0)}
    for tag, w_ in want.items():
        p = falcon_params(tab[tag][0])
        got = (p["KV"], p["norms"], p["new"], p["tied"], p["P"], p["F"], p["base"])
        if got != w_:
            bad.append("case %s read as %s, not %s" % (tag, got, w_))
    kv = key_variants()
    for tag, (cfg, src) in kv.items():
        pa, pb = falcon_params(cfg), falcon_params(tab[src][0])
        if tag == "falcon-seq-num_ln-2-ignored":
            pa = dict(pa, nln=pb["nln"])
        if tag == "falcon-num_ln-1-old-arch":
            pa = dict(pa, nln=pb["nln"])
        if tag == "falcon-40b-num_ln-2-explicit":
            pb = dict(pb, nln=2)
        if tag == "falcon-7b-saved-by-4.4x" or tag == "falcon-defaults-only-sizes":
            pa, pb = dict(pa, bos=11, eos=11), dict(pb, bos=11, eos=11)
        if pa != pb:
            bad.append("%s: the config reads as %s, not as case %s's %s" % (tag, pa, src, pb))
    # RoPE: qwen2_reference's tables = the gpt_neox helpers' (default, linear, yarn) and the
    # complex rotation
    for base, sc in ((10000.0, None), (65536.0, None), (10000.0, {"rope_type": "linear", "factor": 2.0}),
                     (65536.0, {"rope_type": "yarn", "factor": 4.0})):
        cos, sin = falcon_rope(base, sc, 80, 8, 90)
        if sc is None:
            inv, att = nx.inv_freq_f32(base, 8), 1.0
        elif sc["rope_type"] == "linear":
            inv, att = [f32(v / 2.0) for v in nx.inv_freq_f32(base, 8)], 1.0
        else:
            inv, att = nx.yarn_inv_freq(base, 8, 4.0, 80)
        c2, s2 = nx.rope_tables(inv, 90, att)
        if (cos, sin) != (c2, s2):
            bad.append("RoPE tables (base %g, %s) differ between the two helpers" % (base, sc))
    if nx.inv_freq_f32(10000.0, 8) != [f32(v) for v in (1.0, 0.1, 0.01, 0.001)]:
        bad.append("inv_freq 10000 / 8 not exact")
    if nx.inv_freq_f32(65536.0, 8) != [1.0, 1.0 / 16, 1.0 / 256, 1.0 / 4096]:
        bad.append("inv_freq 65536 / 8 not exact")
    inv = nx.inv_freq_f32(10000.0, 8)
    cos, sin = falcon_rope(10000.0, None, 80, 8, 40)
    x = [0.3 * k - 1.0 for k in range(8)]
    y = rope_apply(x, cos[37], sin[37], 8)
    for i in range(4):
        z = complex(x[i], x[i + 4]) * complex(math.cos(37 * inv[i]), math.sin(37 * inv[i]))
        if abs(z.real - y[i]) > 1e-5 or abs(z.imag - y[i + 4]) > 1e-5:
            bad.append("rope pair %d" % i)
    # llama3 on A: one frequency kept, one smoothed, two divided by 8
    l3 = falcon_params(variant_table()["falcon-llama3"][0])["scaling"]
    _, s3 = falcon_rope(10000.0, l3, 2048, 8, 3)
    inv3 = [math.asin(v) for v in s3[1]]
    ratio = [a / b for a, b in zip(inv3, inv)]
    if not (abs(ratio[0] - 1) < 1e-6 and 1 / 8 + 1e-3 < ratio[1] < 1 - 1e-3 and abs(ratio[2] - 1 / 8) < 1e-6
            and abs(ratio[3] - 1 / 8) < 1e-6):
        bad.append("llama3 frequencies of the falcon-llama3 case: ratios %s" % ratio)
    # the grouped split: old multi-head (G 1) is view(H, 3, hd); multi-query is [q | k | v]
    for tag in ("A", "B", "D"):
        cfg, sd, wkw = tab[tag]
        m = FalconRef(cfg, falcon_weights(cfg, sd, **wkw))
        H, KV, hd = m.H, m.KV, m.hd
        qkv = list(range((H + 2 * KV) * hd))
        qh, kh, vh = m._split(qkv)
        if tag == "D" and (qh[2] != qkv[2 * 3 * hd:2 * 3 * hd + hd] or kh[2] != qkv[7 * hd:8 * hd]
                           or vh[3] != qkv[11 * hd:12 * hd]):
            bad.append("old multi-head split is not view(H, 3, hd)")
        if tag == "A" and (qh[3] != qkv[3 * hd:4 * hd] or kh[0] != qkv[4 * hd:5 * hd] or vh[0] != qkv[5 * hd:]):
            bad.append("multi-query split is not [q | k | v]")
        if tag == "B" and (qh[2] != qkv[4 * hd:5 * hd] or kh[1] != qkv[6 * hd:7 * hd] or vh[0] != qkv[3 * hd:4 * hd]
                           or m._kvhead(1) != 0 or m._kvhead(2) != 1):
            bad.append("new-arch split is not view(KV, G + 2, hd)")
    y = layernorm([1.0, 2.0, 4.0, 7.0], [1.0] * 4, [0.0] * 4, 0.0)
    if abs(sum(y)) > 1e-12 or abs(sum(v * v for v in y) / 4 - 1) > 1e-12:
        bad.append("layernorm")
    # cached greedy = the full forward recomputed each step
    for tag in ("A", "B", "C", "D"):
        cfg, sd, wkw = tab[tag]
        m = FalconRef(cfg, falcon_weights(cfg, sd, **wkw))
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
    st = FalconRef(cfgS, TS).greedy(STOP_PROMPT, 30)[0]
    print("  selftest: stop case greedy %s" % st)
    if EOT not in st or st.index(EOT) < 2:
        bad.append("the stop case's greedy continuation does not reach EOS %d after a few tokens: %s" % (EOT, st))
    # sensitivity
    gen = {"A": [(ids[:3], 30), (ids[60:100], 20)], "B": [(ids[:5], 30), (ids[120:160], 22)],
           "C": [(ids[:4], 30), (ids[30:70], 20)], "D": [(ids[10:40], 25)], "E": [(ids[30:62], 25)],
           "F": [(ids[10:40], 25)]}
    cases = []
    for tag, (cfg, sd, wkw) in sorted(tab.items()):
        cases.append((tag, cfg, store(falcon_weights(cfg, sd, **wkw), STORAGE.get(tag, "F32")), gen[tag]))
    for name, (cfg, src) in sorted(variant_table().items()):
        c0, sd, wkw = tab[src]
        a, b = VARIANT_PROMPT[name]
        cases.append((name, cfg, store(falcon_weights(c0, sd, **wkw), STORAGE.get(src, "F32")), [(ids[a:b], 25)]))
    changed = {}
    wins = windows(ids, 64)
    for tag, cfg, T, g in cases:
        model = FalconRef(cfg, T)
        ref, cnt = mean_ce(model, wins)
        refs = [model.greedy(p_, n)[0] for p_, n in g]
        if any(len(set(r_)) < 4 for r_ in refs):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
        worst = None
        sc = falcon_params(cfg)["scaling"]
        tables = [("RoPE tables +-1 float32 ulp (noise, the largest of 3 draws)", [{"ulp_noise": s_} for s_ in (1, 2, 5)])]
        if sc is None or sc["rope_type"] in ("linear", "dynamic"):
            tables.append(("RoPE tables in float64", [{"rope_f64": True}]))
        for name, kws in tables:
            rel = max(abs(mean_ce(FalconRef(cfg, T, **kw), wins)[0] - ref) / abs(ref) for kw in kws)
            print("  selftest %-30s %-66s relative change %.2e" % (tag, name, rel))
            if "noise" in name and rel > TOL["float64"] / 2:
                bad.append("%s: one float32 ulp in the RoPE tables moves the loss by %.2e, too close to the "
                           "float64 tolerance" % (tag, rel))
        for name, kw in alternatives(cfg):
            alt = FalconRef(cfg, T, **kw)
            a_, _ = mean_ce(alt, wins)
            rel = abs(a_ - ref) / abs(ref)
            worst = rel if worst is None else min(worst, rel)
            if rel < 20 * TOL["float64"]:
                bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
            same = all(alt.greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            key = re.sub(r"activation gelu\S*", "activation gelu (the other form)", name.split(" instead")[0])
            key = re.sub(r"layer_norm_epsilon \S+", "layer_norm_epsilon", key)
            key = re.sub(r"RoPE base 10000.*", "RoPE base 10000 (the default)", key)
            key = re.sub(r"^(linear|yarn|llama3) scaling ignored", "scaling ignored", key)
            changed.setdefault(key, [])
            if not same:
                changed[key].append(tag)
            print("  selftest %-30s %-66s relative change %.2e%s" % (
                tag, name, rel, "  (greedy ids unchanged)" if same else ""))
        print("  selftest %-30s loss %.8g over %d targets (ppl %.4g); smallest relative change %.2e; greedy %s" % (
            tag, ref, cnt, math.exp(ref / cnt), worst, refs))
        for name, kw in DECODE_ALTS:
            same = all(FalconRef(cfg, T, **kw).greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
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
    c = sub.add_parser("check", help="build tiny Falcon folders, run lol, compare with the reference")
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
