#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face GPT-NeoX (GPTNeoXForCausalLM, model_type
"gpt_neox": EleutherAI Pythia, gpt-neox-20b) in pure Python (stdlib only), and a check that
`lol hf ppl|generate|info` agrees with it on tiny GPT-NeoX folders written here.

  python3 tests/reference/gpt_neox_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/gpt_neox_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_gpt_neox.py / configuration_gpt_neox.py / modeling_rope_utils.py as
remembered (the 4.2x code Pythia was converted with, the 4.4x RotaryEmbedding rewrite and the
5.x rope_parameters config), docs/hf.md ("GPT-NeoX (Pythia)", "Commands", "RoPE scaling",
"Cached decoding") and the feature's brief. It imports qwen2_reference.py (unchanged) for the
float32 / bfloat16 rounding helpers, log_softmax / argmax / top-2 gap, `Checker`,
`compare_greedy`, `parse_ids` and bytes_to_unicode, and safetensors_io.write_st; the model,
the RoPE tables, the tokenizer files, the folder writer and the comparisons are this file's.

Rules of the reference (float64 on the stored, float16- / bfloat16-rounded weights; the RoPE
tables in float32 as transformers builds them):
  x_0[t] = embed_in[id_t]   (no position embedding; positions 0.. within each forward call /
      hf ppl window)
  per layer (GPTNeoXLayer), with a = input_layernorm(x):
      qkv = a W_qkv^T + b_qkv   W_qkv = attention.query_key_value.weight [3d, d] (nn.Linear)
      viewed as [T, H, 3 hs] (hs = head_size = d / H): head j's q = qkv[j*3hs : j*3hs+hs],
          k = the next hs, v = the next hs (GPTNeoXAttention: view(..., H, 3 hs), chunk(3))
      RoPE on the first rd = int(hs * rotary_pct) dims of q and k (the other hs - rd pass
          unchanged), rotate-half inside them: for i < rd/2 the pair (i, i + rd/2) turns by
          position * inv_freq[i]:  x_i' = x_i cos - x_{i+rd/2} sin,  x_{i+rd/2}' = x_{i+rd/2} cos
          + x_i sin  (q_rot * cos + rotate_half(q_rot) * sin with cos = cat(c, c))
      inv_freq[i] = float32(1 / float32(base ** float32(2i / rd))) (exponents over rd, not hs),
          angle = float32(position * inv_freq[i]), cos / sin computed in float32 (then used in
          the compute dtype: float64 here)
      scores = q.k * hs^-1/2, causal softmax; o = heads concatenated (head-major), then
      attn = o W_dense^T + b_dense   (attention.dense)
      mlp(m) = dense_4h_to_h(act(dense_h_to_4h(m)))  (both nn.Linear with bias)
      use_parallel_residual true:   y = x + attn + mlp(post_attention_layernorm(x))
      use_parallel_residual false:  h = x + attn;  y = h + mlp(post_attention_layernorm(h))
  logits = final_layer_norm(x_L) embed_out^T  (embed_out = embed_in when tie_word_embeddings)
  LayerNorm: (x - mean) / sqrt(var + eps) * w + b, var the biased (1/n) variance.
  attention_bias (default true): biases on query_key_value and dense; false: neither.
  act (hidden_act): "gelu" = 0.5 x (1 + erf(x / sqrt 2)); "gelu_new" / "gelu_pytorch_tanh" =
      0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); "gelu_fast" the same with the constant
      0.7978845608 (3e-12 from sqrt(2/pi)).
  RoPE scaling (rope_scaling, or rope_parameters' rope_type; transformers' rope init functions
      called with dim = rd): "linear": inv_freq / factor (float32); "dynamic": plain RoPE
      within max_position_embeddings (every window / generation here stays within it);
      "yarn": as modeling_rope_utils' _compute_yarn_parameters with dim = rd (ramp over the rd/2
      frequencies, cos / sin times 0.1 ln(factor) + 1 in float32).
  GPTNeoXConfig defaults: rotary_pct 0.25, rotary_emb_base 10000, hidden_act "gelu",
      layer_norm_eps 1e-5, use_parallel_residual true, attention_bias true,
      tie_word_embeddings false, bos 0, eos 2.
  Keys: 4.x rotary_pct / rotary_emb_base; 4.4x also partial_rotary_factor / rope_theta (the
      same values); 5.x rope_parameters {rope_type, rope_theta, partial_rotary_factor}.

Cases (vocab_size 300 > the tokenizer's 260 ids, max_position_embeddings 64, a Pythia-style
byte-level tokenizer.json written here: <|endoftext|> 0 and <|padding|> 1 as added special
tokens, byte b = id 2 + b, merges "Ġ t" (258) and "h e" (259), NFC normalizer, ByteLevel
pre-tokenizer with GPT-2's regex; a text of 335 tokens, 368 bytes):
  A neox-pythia-4x: Pythia's config.json keys (transformers 4.24: rotary_pct 0.25,
    rotary_emb_base 10000, use_parallel_residual true, hidden_act gelu, layer_norm_eps 1e-5,
    tie false, bos / eos 0, no attention_bias key), hidden 32, 2 heads (head_size 16 -> 4
    rotary dims), 3 layers, intermediate 128, with the old buffers attention.bias (BOOL
    [1, 1, 64, 64]), attention.masked_bias (F32 scalar) and attention.rotary_emb.inv_freq (F32
    [2]) in the file; embeddings of std 0.005 (layer 0's LayerNorms then tell eps 1e-5 from
    1e-6). ppl float64 --context 0 (= 64) and 9, float32 64; generate float64 (3 + 30, 40 + 20),
    float32 (40 + 20), --prompt text, --max-new 30 after 50 ids (reduced to 14); info --check.
  B neox-v5-seq-nobias-tanh-tied: transformers 5 layout: "rope_parameters": {"rope_type":
    "default", "rope_theta": 4096, "partial_rotary_factor": 0.5} and no top-level rotary keys,
    "dtype" instead of torch_dtype, use_parallel_residual false, attention_bias false (no
    q/k/v / dense bias tensors), hidden_act gelu_new, tie_word_embeddings true (no embed_out),
    layer_norm_eps 1e-3, hidden 48, 3 heads (head_size 16 -> 8 rotary dims), 2 layers,
    intermediate 96. ppl float64 0 / 9, float32; generate float64 / float32; info --check.
  C neox-linear-full-rotary: 4.4x keys (rotary_pct = partial_rotary_factor = 1.0,
    rotary_emb_base = rope_theta = 10000), rope_scaling {"type": "linear", "factor": 2.0},
    hidden 32, 4 heads (head_size 8, all 8 dims rotate), parallel, gelu_fast, 2 layers.
    ppl float64 0 / 9, float32; generate float64 / float32; info --check.
    neox-dynamic: C's weights with {"rope_type": "dynamic", "factor": 2.0}: plain RoPE (ppl,
    generate). neox-yarn-partial: A's weights with rope_scaling {"rope_type": "yarn",
    "factor": 4.0} (dim = the 4 rotary dims; ppl float64, generate float64).
    neox-linear-partial: A's weights with {"type": "linear", "factor": 2.0} (ppl float64).
  Key layouts (ppl float64 of the same model as the case named): neox-defaults-only-sizes (A's
    weights, config.json with only architectures / model_type / the six sizes: GPTNeoXConfig's
    defaults must give A's model; hf info --check, and its stop tokens are the default eos 2
    and the tokenizer's eos 0, ASSUMED), neox-v5-linear-rope_parameters (C's model with only
    rope_parameters {"rope_type": "linear", "factor": 2, "rope_theta": 10000,
    "partial_rotary_factor": 1}), neox-v5-rope_scaling-key (B's model with rotary_pct 0.5 and
    rope_scaling {"rope_type": "default", "rope_theta": 4096, "partial_rotary_factor": 0.5}),
    neox-rotary_pct-0.3-truncates (A's model with rotary_pct 0.3: int(16 * 0.3) = int(4.8) = 4
    rotary dims, as GPTNeoXAttention's int(); rounding would give 5, odd).
  D neox-f16-seq-tied-stored: F16 storage, sequential, attention_bias true given,
    gelu_pytorch_tanh, tie_word_embeddings true with a stored embed_out.weight equal to
    embed_in, 4.x keys with rotary_pct 0.5 and rotary_emb_base 4096, 2 layers; ppl float64,
    generate float64, info --check. neox-f16-old-buffers: D with the old buffers as a float16
    save holds them (masked_bias -inf: -1e9 overflows float16; inv_freq F16; the mask BOOL):
    ppl float64. neox-stop-at-eos: a folder whose greedy continuation reaches EOS 0 after 17
    tokens, run without --no-stop (the ids up to and including it).
  E neox-bf16: BF16 storage (the buffers BF16 too), Pythia keys, parallel, exact gelu,
    intermediate 64: ppl float64 (on the bf16-rounded weights), float32, bfloat16; generate
    float64.
  hf info --check (A, B, C, D, defaults): exit 0, names GPTNeoXForCausalLM, "all tensors
    present", the parameter count = transformers' num_parameters(); and, ASSUMED from the
    summary lol prints: "rotary dims rd of hs" (when rd < hs), rope_theta and layer_norm_eps
    on the "positions" line, the "block" line naming parallel / sequential, the biases and the
    GELU form, the "vocab" line saying tied or not, the "rope scaling" line (none or type and
    factor); A: no RMSNorm / gate claims.
  Export (check_export): two dense models of the layout trained 3 steps on a byte corpus
    (parallel, biases, partial_rotary_factor 0.25, gelu, untied; sequential, 3 heads, 0.5,
    gelu_pytorch_tanh, tied, rope_theta 4096, norm_eps 1e-3), `lol export --hf` with the
    default --arch: config.json read with GPTNeoXConfig's rules gives the trained model, the
    tensors are the checkpoint's renamed bit for bit with query_key_value = per head j the
    q_proj, k_proj, v_proj rows of head j (biases likewise), and hf ppl float64 of the export
    equals this reference on the exported tensors. Refused (exit 2 naming the field, no --out
    folder left): export --arch gpt_neox of a model with n_kv_heads 1, with qkv_bias but no
    o_bias, without mlp_bias.
  Refusals (hf ppl, exit 2, stderr naming the field / tensor): rotary_pct 0.1875 (3 rotary
    dims, odd), rotary_pct 0.0625 (1), rotary_pct 0.25 with partial_rotary_factor 0.5,
    rope_parameters.partial_rotary_factor 0.5 with rotary_pct 0.25, rotary_emb_base 10000 with
    rope_theta 500, rope_parameters.rope_theta 500 with rotary_emb_base 10000, hidden_act relu /
    quick_gelu, rope_scaling longrope, quantization_config, hidden_size 36 with 4 heads
    (head_size 9, odd), a missing intermediate_size (a required size); tensors: missing
    gpt_neox.layers.1.attention.query_key_value.bias (attention_bias true by default),
    query_key_value.weight stored [d, 3d], query_key_value.weight [2d, d], dense.weight
    missing, embed_out.weight missing (untied), embed_out of vocab - 1 rows, a stored
    embed_out different from embed_in with tie true, q/k/v / dense biases present with
    attention_bias false (an unexpected tensor: docs' strict loading).
Tolerances: float64 summed loss / bits per byte 1e-8 relative, perplexity 1e-7. The RoPE tables
are float32 (as transformers'); one float32 ulp of noise on every cos / sin entry moves the
loss by <= 2e-9 relative (selftest fails above 5e-9), so torch-vs-libm ulps stay inside the
tolerance; float64 tables instead move it by 1e-10 .. 1e-9, which this check therefore cannot
tell from transformers' float32 tables. float32 1e-6; bfloat16 5e-3; greedy ids exact (after a
float32 near-tie, top-2 gap < 1e-4 of max |logit|, the rest of that continuation is not
compared, noted). At the time of writing lol was 1e-11 .. 9e-10 away in float64, 3e-9 .. 2e-8
in float32 and 5.6e-4 in bfloat16.

`selftest` (no lol) checks cached greedy decoding = recomputed full forward, the tokenizer
rule, the GELU forms, param counts (pythia-70m's 70,426,624), the RoPE rule against a direct
complex-rotation form, and the sensitivity: each alternative reading (sequential instead of
parallel and back, parallel with one LayerNorm for both branches (GPT-J), q/k/v as three
contiguous blocks, RoPE on all dims, on the last rd dims, interleaved pairs, exponents over
head_size, no RoPE, rotary_pct 0.25 default instead of the given share, the default base,
linear factor ignored / multiplied, yarn over head_size / without attention factor, no
attention / MLP biases, the other GELU, no scale / 1/hs scale, LayerNorm without mean / bias,
unbiased variance, eps outside the sqrt, other eps, the tied head for an untied model) moves
each case's float64 loss by > 20 x the float64 tolerance (the smallest at the time of writing:
LayerNorm eps outside the sqrt / eps 1e-6 on the cases with large embeddings, 5.4e-7; the other
GELU form 9e-7 .. 3.3e-6), and the greedy ids check() compares change under each in at least one
case (the eps / GELU-form readings may not), as they do under cached decoding that puts every
new token at position len(prompt) or restarts the positions at 0. On a disagreement check() prints
which alternative reading, if any, lol matches.

ASSUMED (where neither the brief nor transformers decides):
  * hf ppl windows: non-overlapping windows of --context tokens, positions restart at 0 in
    each window, no BOS (docs/hf.md); --context 0 -> min(512, max_position_embeddings).
  * RoPE bases / linear factors are chosen so that the float32 pow / division is exact (10000
    and 4096 with rd 4 and 8; factor 2): torch's powf may differ from libm by an ulp, and
    transformers 4.3x's linear class divided the positions instead of inv_freq (the same
    result for a power-of-two factor).
  * yarn with partial rotary uses dim = rd (modeling_rope_utils reads partial_rotary_factor,
    which GPTNeoXConfig sets from rotary_pct since 4.4x); no original_max_position_embeddings
    key is given (4.x releases differ on it).
  * The old buffers are skipped whatever their dtype (BOOL mask, F32 / BF16 masked_bias,
    inv_freq); a stored attention.rotary_emb.inv_freq is not used for the computation
    (transformers recomputes it from the config: it is written here with the correct values).
  * Biases present with attention_bias false, and a tied model's stored embed_out different
    from embed_in, are refused (docs/hf.md's strict loading; transformers warns / re-ties).
  * hf info's summary lines are checked in the form lol printed them when this was written
    ("rotary dims 4 of 16 per head ...", "positions 64, rope_theta 10000, layer_norm_eps 1e-05",
    "block parallel (...) ... MLP gelu ...", "vocab 300 (tied embeddings)", "rope scaling none");
    docs/hf.md does not fix this format.
  * Without eos_token_id in config.json (and none in generation_config.json), GPTNeoXConfig's
    default 2 is an EOS id besides the tokenizer's eos_token (0): hf info's "stop tokens" line
    lists both (docs/hf.md: the config's, generation_config's and the tokenizer's EOS ids).
  * A float16 file's masked_bias buffer is -inf (torch.tensor(-1e9).half()); lol must skip it
    like the other buffers rather than refuse it as a non-finite value (transformers >= 4.4x
    ignores the key).
  * A rope_scaling object that carries rope_theta / partial_rotary_factor (transformers 5 reads
    rope_scaling as rope_parameters) counts like rope_parameters (docs/hf.md lists
    rope_scaling.rope_theta).
  * Export: the exported config.json is judged by what GPTNeoXConfig would read from it (keys
    absent -> its defaults); gelu_new / gelu_fast would be accepted for a gelu_pytorch_tanh
    model (the same tanh GELU).
  * hf info: it must not claim RMSNorm or a gated MLP (checked on A).
"""
import argparse
import json
import math
import operator
import os
import random
import re
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import Checker, argmax_low, bf16, compare_greedy, f32, log_softmax, parse_ids, top2_gap  # noqa
from safetensors_io import write_st  # noqa: E402

_mul = operator.mul
DROP = object()
DIAGNOSE = [6]
TOL = {"float64": 1e-8, "float32": 1e-6, "bfloat16": 5e-3}

# ---------------------------------------------------------------- tokenizer (Pythia-style byte-level BPE)
EOT, PAD = 0, 1
T_ID, HE_ID = 258, 259
EOT_TEXT, PAD_TEXT = "<|endoftext|>", "<|padding|>"
TEXT = q2.TEXT + ("\nThen the thirty thinkers thought the theme through; it's the truth, 4096 times.\n"
                  "Whether the weather be hot, or whether the weather be not, they'll weather it together.\n")


def encode(text):
    """ids under write_tokenizer's tokenizer: bytes (id 2 + b), then the merges by rank: 'Ġt' (a
    space followed by 't': GPT-2's regex keeps ' ?\\p{L}+' together), then 'he' (two letters, one
    piece). <|endoftext|> / <|padding|> are added special tokens."""
    out = []
    parts = re.split("(%s|%s)" % (re.escape(EOT_TEXT), re.escape(PAD_TEXT)), text)
    for part in parts:
        if part == EOT_TEXT:
            out.append(EOT)
            continue
        if part == PAD_TEXT:
            out.append(PAD)
            continue
        b = list(part.encode("utf-8"))
        m = []
        i = 0
        while i < len(b):
            if b[i] == 0x20 and i + 1 < len(b) and b[i + 1] == ord("t"):
                m.append(T_ID)
                i += 2
            else:
                m.append(2 + b[i])
                i += 1
        r = []
        i = 0
        while i < len(m):
            if m[i] == 2 + ord("h") and i + 1 < len(m) and m[i + 1] == 2 + ord("e"):
                r.append(HE_ID)
                i += 2
            else:
                r.append(m[i])
                i += 1
        out.extend(r)
    return out


def token_bytes(t):
    if 2 <= t < 258:
        return 1
    return {T_ID: 2, HE_ID: 2, EOT: len(EOT_TEXT), PAD: len(PAD_TEXT)}[t]


def write_tokenizer(folder, npos):
    b2u = q2.bytes_to_unicode()
    vocab = {EOT_TEXT: EOT, PAD_TEXT: PAD}
    for b in range(256):
        vocab[b2u[b]] = 2 + b
    vocab[b2u[0x20] + "t"] = T_ID
    vocab["he"] = HE_ID

    def added(i, s):
        return {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [added(EOT, EOT_TEXT), added(PAD, PAD_TEXT)],
           "normalizer": {"type": "NFC"}, "pre_tokenizer": dict(bl),
           "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": vocab, "merges": [b2u[0x20] + " t", "h e"]}}
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    tc = {"tokenizer_class": "GPTNeoXTokenizer", "bos_token": EOT_TEXT, "eos_token": EOT_TEXT,
          "unk_token": EOT_TEXT, "add_prefix_space": False, "model_max_length": npos,
          "added_tokens_decoder": {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                            "single_word": False, "special": True}
                                   for i, s in ((EOT, EOT_TEXT), (PAD, PAD_TEXT))}}
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=1)


# ---------------------------------------------------------------- activations
def gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def gelu_fast(x):
    return 0.5 * x * (1.0 + math.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def gelu_exact(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def relu(x):
    return x if x > 0 else 0.0


ACTS = {"gelu": gelu_exact, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "gelu_fast": gelu_fast,
        "relu": relu}


# ---------------------------------------------------------------- config
def neox_params(cfg):
    """the model GPTNeoXConfig describes (GPTNeoXConfig's defaults for absent keys)"""
    d, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hs = d // H
    # transformers 5 reads a rope_scaling object as rope_parameters (both may carry rope_theta and
    # partial_rotary_factor); lol refuses disagreeing values, so any one of them decides
    rp = dict(cfg.get("rope_scaling") or {}, **(cfg.get("rope_parameters") or {}))
    share = cfg.get("rotary_pct", cfg.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.25)))
    base = cfg.get("rotary_emb_base", cfg.get("rope_theta", rp.get("rope_theta", 10000.0)))
    rs = cfg.get("rope_scaling") or rp or {}
    rtype = rs.get("rope_type", rs.get("type", "default"))
    scaling = None if rtype == "default" else (rtype, rs.get("factor"))
    return {"V": cfg["vocab_size"], "d": d, "L": cfg["num_hidden_layers"], "H": H, "hs": hs,
            "P": cfg["max_position_embeddings"], "F": cfg["intermediate_size"],
            "rd": int(hs * share), "base": float(base), "scaling": scaling,
            "act": cfg.get("hidden_act", "gelu"), "eps": cfg.get("layer_norm_eps", 1e-5),
            "parallel": cfg.get("use_parallel_residual", True), "abias": cfg.get("attention_bias", True),
            "tied": cfg.get("tie_word_embeddings", False)}


def neox_config(**kw):
    """Pythia's config.json (as transformers 4.24 saved it), tiny sizes"""
    c = {"architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
         "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 128, "layer_norm_eps": 1e-05,
         "max_position_embeddings": 64, "model_type": "gpt_neox", "num_attention_heads": 2,
         "num_hidden_layers": 3, "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
         "torch_dtype": "float32", "transformers_version": "4.24.0", "use_cache": True,
         "use_parallel_residual": True, "vocab_size": 300}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def param_count(cfg):
    """transformers' num_parameters(): a tied embed_out counted once, buffers not at all"""
    p = neox_params(cfg)
    d, F = p["d"], p["F"]
    ab = 1 if p["abias"] else 0
    per = 4 * d + 3 * d * d + ab * 3 * d + d * d + ab * d + d * F + F + F * d + d
    return p["V"] * d * (1 if p["tied"] else 2) + p["L"] * per + 2 * d


# ---------------------------------------------------------------- weights (GPTNeoXForCausalLM names)
def neox_weights(cfg, seed, emb_std=0.5, qk=2.5, fc=2.5, lnf_std=0.3):
    """name -> (shape, flat float32-rounded values). LayerNorm weights N(1, 0.3), biases N(0, 0.3);
    the q and k rows of each head (rows j*3hs .. j*3hs + 2hs - 1 of query_key_value) larger than
    the v rows (attention far from uniform); MLP pre-activations of a few units."""
    rng = random.Random(seed)
    p = neox_params(cfg)
    V, d, L, F, hs = p["V"], p["d"], p["L"], p["F"], p["hs"]
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

    put("gpt_neox.embed_in.weight", [V, d], emb_std)
    for i in range(L):
        pre = "gpt_neox.layers.%d." % i
        put(pre + "input_layernorm.weight", [d], 0.3, 1.0)
        put(pre + "input_layernorm.bias", [d], 0.3)
        put(pre + "post_attention_layernorm.weight", [d], 0.3, 1.0)
        put(pre + "post_attention_layernorm.bias", [d], 0.3)
        put(pre + "attention.query_key_value.weight", [3 * d, d], 0,
            row_sd=lambda r: (qk if r % (3 * hs) < 2 * hs else 1.2) / math.sqrt(d))
        if p["abias"]:
            put(pre + "attention.query_key_value.bias", [3 * d], 0.3)
        put(pre + "attention.dense.weight", [d, d], 1.0 / math.sqrt(d))
        if p["abias"]:
            put(pre + "attention.dense.bias", [d], 0.3)
        put(pre + "mlp.dense_h_to_4h.weight", [F, d], fc / math.sqrt(d))
        put(pre + "mlp.dense_h_to_4h.bias", [F], 0.5)
        put(pre + "mlp.dense_4h_to_h.weight", [d, F], 1.2 / math.sqrt(F))
        put(pre + "mlp.dense_4h_to_h.bias", [d], 0.3)
    put("gpt_neox.final_layer_norm.weight", [d], lnf_std, 1.0)
    put("gpt_neox.final_layer_norm.bias", [d], 0.3)
    if not p["tied"]:
        put("embed_out.weight", [V, d], 0.3)
    return T


def with_buffers(T, cfg, dtype="F32"):
    """the buffers of older files: attention.bias (the causal mask, bool [1, 1, P, P]),
    attention.masked_bias (a scalar -1e9) and attention.rotary_emb.inv_freq [rd / 2]; a model
    saved in float16 / bfloat16 (model.half()) holds its float buffers in that dtype, so
    masked_bias is -inf in float16 (-1e9 overflows it), as in Pythia's float16 files"""
    p = neox_params(cfg)
    P = p["P"]
    mask = [j <= i for i in range(P) for j in range(P)]
    inv = inv_freq_f32(p["base"], p["rd"])
    out = dict(T)
    fdt = dtype if dtype in ("F16", "BF16") else "F32"
    for i in range(p["L"]):
        pre = "gpt_neox.layers.%d.attention." % i
        out[pre + "bias"] = ([1, 1, P, P], mask, "BOOL")
        out[pre + "masked_bias"] = ([], [float("-inf") if fdt == "F16" else -1e9], fdt)
        out[pre + "rotary_emb.inv_freq"] = ([len(inv)], inv, fdt)
    return out


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def store(T, dtype):
    """the values as read back from a file stored in dtype"""
    rnd = {"BF16": bf16, "F16": f16}.get(dtype, lambda x: x)
    return {k: (v[0], [rnd(x) for x in v[1]]) for k, v in T.items()}


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
    write_tokenizer(folder, cfg.get("max_position_embeddings", 64))
    write_st(os.path.join(folder, "model.safetensors"),
             {k: (v[0], v[1], v[2] if len(v) > 2 else dtype) for k, v in T.items()}, {"format": "pt"})


# ---------------------------------------------------------------- RoPE (float32 tables, as transformers)
def inv_freq_f32(base, rd, expo_dim=None):
    """1 / base ** (arange(0, rd, 2).float() / rd), every step in float32"""
    ed = rd if expo_dim is None else expo_dim
    out = []
    for j in range(0, rd, 2):
        e = f32(f32(float(j)) / ed)
        out.append(f32(1.0 / f32(float(base) ** e)))
    return out


def yarn_inv_freq(base, rd, factor, npos, use_dim=None):
    """modeling_rope_utils._compute_yarn_parameters with dim = rd (use_dim: another dim for the
    correction range, an alternative reading), no original_max_position_embeddings key (= npos);
    returns (inv_freq, attention factor)"""
    dim = rd if use_dim is None else use_dim
    pos_freqs = [f32(base ** f32(f32(float(j)) / rd)) for j in range(0, rd, 2)]
    ext = [f32(1.0 / pf) for pf in pos_freqs]
    itp = [f32(1.0 / f32(f32(factor) * pf)) for pf in pos_freqs]
    att = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0

    def corr(nrot):
        return (dim * math.log(npos / (nrot * 2 * math.pi))) / (2 * math.log(base))
    low, high = math.floor(corr(32)), math.ceil(corr(1))
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    out = []
    for j in range(rd // 2):
        ramp = min(max(f32(f32(float(j) - low) / f32(high - low)), 0.0), 1.0)
        ef = f32(1.0 - ramp)
        out.append(f32(f32(itp[j] * f32(1.0 - ef)) + f32(ext[j] * ef)))
    return out, att


def rope_tables(inv, npos, att=1.0, f64=False):
    """cos, sin [npos][rd / 2] (the half; cat(c, c) in transformers): angle float32(pos * inv),
    cos / sin in float32 (times the attention factor in float32)"""
    cos, sin = [], []
    a32 = f32(att)
    for pos in range(npos):
        if f64:
            ang = [pos * v for v in inv]
            c = [math.cos(a) * att for a in ang]
            s = [math.sin(a) * att for a in ang]
        else:
            ang = [f32(pos * v) for v in inv]
            c = [f32(math.cos(a)) for a in ang]
            s = [f32(math.sin(a)) for a in ang]
            if att != 1.0:
                c = [f32(x * a32) for x in c]
                s = [f32(x * a32) for x in s]
        cos.append(c)
        sin.append(s)
    return cos, sin


def rope_apply(x, c, s, rd, layout="half"):
    """x: one head (hs values); RoPE on the rotary dims, the rest unchanged"""
    half = rd // 2
    if rd == 0 or layout == "none":
        return list(x)
    if layout == "last":
        hs = len(x)
        return list(x[:hs - rd]) + rope_apply(x[hs - rd:], c, s, rd)
    y = list(x)
    if layout == "interleaved":  # GPT-J: pairs (2i, 2i + 1)
        for i in range(half):
            a, b = x[2 * i], x[2 * i + 1]
            y[2 * i] = a * c[i] - b * s[i]
            y[2 * i + 1] = b * c[i] + a * s[i]
        return y
    for i in range(half):  # rotate_half: pairs (i, i + rd/2)
        a, b = x[i], x[i + half]
        y[i] = a * c[i] - b * s[i]
        y[i + half] = b * c[i] + a * s[i]
    return y


# ---------------------------------------------------------------- the model
def layernorm(x, w, b, eps, center=True, bias=True, unbiased=False, eps_out=False):
    n = len(x)
    mu = sum(x) / n if center else 0.0
    xc = [v - mu for v in x]
    var = sum(v * v for v in xc) / (n - 1 if unbiased else n)
    r = 1.0 / (math.sqrt(var) + eps) if eps_out else 1.0 / math.sqrt(var + eps)
    if bias:
        return [wi * v * r + bi for wi, v, bi in zip(w, xc, b)]
    return [wi * v * r for wi, v in zip(w, xc)]


def matvec(W, x):
    return [sum(map(_mul, row, x)) for row in W]


class NeoxRef:
    """GPTNeoXForCausalLM in float64. Keyword arguments select alternative readings (sensitivity
    checks and the diagnosis of a disagreement)."""

    def __init__(self, cfg, T, parallel=None, gptj_ln=False, qkv="per_head", rd=None, rope_layout="half",
                 expo="rd", base=None, scaling="cfg", yarn_dim=None, yarn_att=True, rope_f64=False,
                 attn_bias=True, mlp_bias=True, act=None, attn_scale="hf", ln_center=True, ln_bias=True,
                 ln_unbiased=False, ln_eps_out=False, eps=None, head=None, decode_pos="hf", ulp_noise=None):
        p = neox_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.V, self.P, self.hs = p["d"], p["L"], p["H"], p["V"], p["P"], p["hs"]
        self.parallel = p["parallel"] if parallel is None else parallel
        self.gptj_ln = gptj_ln
        self.qkv = qkv
        self.rd = p["rd"] if rd is None else rd
        self.rope_layout = rope_layout
        self.eps = p["eps"] if eps is None else eps
        self.ln_kw = {"center": ln_center, "bias": ln_bias, "unbiased": ln_unbiased, "eps_out": ln_eps_out}
        self.act = ACTS[act or p["act"]]
        self.scale = {"hf": self.hs ** -0.5, "none": 1.0, "1/hs": 1.0 / self.hs}[attn_scale]
        self.decode_pos = decode_pos
        b = p["base"] if base is None else base
        sc = p["scaling"] if scaling == "cfg" else scaling
        att = 1.0
        if sc is None or sc[0] == "dynamic":
            inv = inv_freq_f32(b, self.rd, self.hs if expo == "hs" else None)
        elif sc[0] == "linear":
            inv = [f32(v / f32(sc[1])) for v in inv_freq_f32(b, self.rd, self.hs if expo == "hs" else None)]
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
        W = {}
        for k, v in T.items():
            W[k] = v
        d, F = self.d, p["F"]

        def rows(name):
            s, v = W[name][0], W[name][1]
            return [list(v[i * s[1]:(i + 1) * s[1]]) for i in range(s[0])]

        def lin(name, n_out, n_in, use_bias):
            s = W[name + ".weight"][0]
            assert s == [n_out, n_in], (name, s)
            M = rows(name + ".weight")
            bn = name + ".bias"
            bb = list(W[bn][1]) if (use_bias and bn in W) else [0.0] * n_out
            return M, bb

        def ln(name):
            return list(W[name + ".weight"][1]), list(W[name + ".bias"][1])
        self.embed = rows("gpt_neox.embed_in.weight")
        self.layers = []
        for i in range(self.L):
            pre = "gpt_neox.layers.%d." % i
            self.layers.append({"ln1": ln(pre + "input_layernorm"), "ln2": ln(pre + "post_attention_layernorm"),
                                "qkv": lin(pre + "attention.query_key_value", 3 * d, d, attn_bias),
                                "dense": lin(pre + "attention.dense", d, d, attn_bias),
                                "up": lin(pre + "mlp.dense_h_to_4h", F, d, mlp_bias),
                                "down": lin(pre + "mlp.dense_4h_to_h", d, F, mlp_bias)})
        self.lnf = ln("gpt_neox.final_layer_norm")
        tied = p["tied"] if head is None else head == "tied"
        self.lm_head = self.embed if tied else rows("embed_out.weight")
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps, **self.ln_kw)

    def _mlp(self, ly, m):
        M, b = ly["up"]
        f = [self.act(s + bb) for s, bb in zip(matvec(M, m), b)]
        M, b = ly["down"]
        return [s + bb for s, bb in zip(matvec(M, f), b)]

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        d, H, hs, rd = self.d, self.H, self.hs, self.rd
        out = []
        for t, x in enumerate(X):
            pos = pos0 + t
            a = self._ln(x, ly["ln1"])
            M, b = ly["qkv"]
            qkv = [s + bb for s, bb in zip(matvec(M, a), b)]
            if self.qkv == "per_head":  # view(H, 3 hs): q, k, v of head j follow one another
                qh = [qkv[3 * j * hs:(3 * j + 1) * hs] for j in range(H)]
                kh = [qkv[(3 * j + 1) * hs:(3 * j + 2) * hs] for j in range(H)]
                vh = [qkv[(3 * j + 2) * hs:(3 * j + 3) * hs] for j in range(H)]
            else:  # alternative: three contiguous blocks [q | k | v] (GPT-2 / Phi-3 style)
                qh = [qkv[j * hs:(j + 1) * hs] for j in range(H)]
                kh = [qkv[d + j * hs:d + (j + 1) * hs] for j in range(H)]
                vh = [qkv[2 * d + j * hs:2 * d + (j + 1) * hs] for j in range(H)]
            c, s_ = self.cos[pos], self.sin[pos]
            qh = [rope_apply(q, c, s_, rd, self.rope_layout) for q in qh]
            kh = [rope_apply(k, c, s_, rd, self.rope_layout) for k in kh]
            cache["k"].append(kh)
            cache["v"].append(vh)
            att = []
            for j in range(H):
                qa = qh[j]
                sc = [sum(map(_mul, qa, kk[j])) * self.scale for kk in cache["k"]]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hs
                for w, vv in zip(e, cache["v"]):
                    w /= tot
                    o = [oj + w * vj for oj, vj in zip(o, vv[j])]
                att.extend(o)
            M, b = ly["dense"]
            attn = [s + bb for s, bb in zip(matvec(M, att), b)]
            if self.parallel:
                m_in = a if self.gptj_ln else self._ln(x, ly["ln2"])
                mo = self._mlp(ly, m_in)
                out.append([mo_ + at + x_ for mo_, at, x_ in zip(mo, attn, x)])
            else:
                h = [at + x_ for at, x_ in zip(attn, x)]
                mo = self._mlp(ly, self._ln(h, ly["ln2"]))
                out.append([mo_ + h_ for mo_, h_ in zip(mo, h)])
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
        r = ([self.head(h) for h in X], caches, None, None)
        self.memo[key] = r
        return r

    def greedy(self, prompt, n):
        """KV-cached greedy decoding (selftest: = recomputing the full forward each step)"""
        logits, caches, _, _ = self.prefill(prompt)
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
        return toks, gaps, None, None


def windows(ids, context):
    return [ids[i:i + context] for i in range(0, len(ids), context)]


def mean_ce(model, wins):
    tot, cnt = 0.0, 0
    for w in wins:
        logits = model.prefill(w)[0]
        for j in range(len(w) - 1):
            tot -= log_softmax(logits[j])[w[j + 1]]
            cnt += 1
    return tot, cnt


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = neox_params(cfg)
    hs, rd = p["hs"], p["rd"]
    sc = p["scaling"]
    other = "gelu" if ACTS[p["act"]] is not gelu_exact else "gelu_new"
    other_eps = 1e-6 if p["eps"] != 1e-6 else 1e-5
    out = []
    if p["parallel"]:
        out += [("sequential residual instead of parallel", {"parallel": False}),
                ("parallel with input_layernorm for both branches (GPT-J)", {"gptj_ln": True})]
    else:
        out.append(("parallel residual instead of sequential", {"parallel": True}))
    out += [("q/k/v as three contiguous blocks [q | k | v]", {"qkv": "blocks"}),
            ("RoPE pairs interleaved (2i, 2i+1), GPT-J style", {"rope_layout": "interleaved"}),
            ("no RoPE", {"rope_layout": "none"})]
    if rd < hs:
        out += [("inv_freq exponents over head_size, not rotary_ndims", {"expo": "hs"})] if not (
            sc is not None and sc[0] == "yarn") else []
        out += [("RoPE on all head dims (rotary share ignored)", {"rd": hs}),
                ("RoPE on the last rotary dims", {"rope_layout": "last"})]
    if rd != int(hs * 0.25):
        out.append(("rotary share 0.25 (the default) instead of the given one", {"rd": int(hs * 0.25)}))
    if p["base"] != 10000.0:
        out.append(("RoPE base 10000 (the default) instead of %g" % p["base"], {"base": 10000.0}))
    if sc is not None and sc[0] == "linear":
        out += [("linear scaling ignored", {"scaling": None}),
                ("linear factor multiplied instead of divided", {"scaling": ("linear", 1.0 / sc[1])})]
    if sc is not None and sc[0] == "yarn":
        out += [("yarn scaling ignored", {"scaling": None}),
                ("yarn correction range over head_size, not rotary_ndims", {"yarn_dim": hs}),
                ("yarn without the attention factor", {"yarn_att": False})]
    if sc is not None and sc[0] == "dynamic":
        out.append(("dynamic read as linear (inv_freq / factor)", {"scaling": ("linear", sc[1])}))
    if p["abias"]:
        out.append(("no query_key_value / dense biases", {"attn_bias": False}))
    out += [("no MLP biases", {"mlp_bias": False}),
            ("activation %s" % other, {"act": other}),
            ("activation relu", {"act": "relu"}),
            ("no attention scale", {"attn_scale": "none"}),
            ("attention scale 1/head_size", {"attn_scale": "1/hs"}),
            ("LayerNorm without the mean subtraction", {"ln_center": False}),
            ("LayerNorm without bias", {"ln_bias": False}),
            ("LayerNorm with the unbiased (n-1) variance", {"ln_unbiased": True}),
            ("LayerNorm eps outside the sqrt", {"ln_eps_out": True}),
            ("layer_norm_eps %g" % other_eps, {"eps": other_eps})]
    if p["eps"] != 1e-5:
        out.append(("layer_norm_eps 1e-5 (the default) instead of %g" % p["eps"], {"eps": 1e-5}))
    if not p["tied"]:
        out.append(("tied head (embed_in) instead of embed_out", {"head": "tied"}))
    return out


DECODE_ALTS = [("cached decoding: every new token at position len(prompt)", {"decode_pos": "stuck"}),
               ("cached decoding: new tokens' positions restart at 0", {"decode_pos": "restart"})]
WEAK = ("activation gelu", "layer_norm_eps", "LayerNorm with the unbiased", "LayerNorm eps outside",
        "yarn without", "RoPE tables")


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32", buffers=False, stored_head=False, head_values=None):
        """T: GPTNeoXForCausalLM-named weights; buffers: the old attention.* buffers in the file;
        stored_head: a tied model's embed_out.weight stored (= embed_in unless head_values)"""
        self.ck, self.tag, self.cfg = ck, tag, cfg
        F = dict(T)
        if stored_head:
            F["embed_out.weight"] = head_values or F["gpt_neox.embed_in.weight"]
        if buffers:
            F = with_buffers(F, cfg, dtype)
        write_folder(os.path.join(ck.work, tag), cfg, F, dtype)
        self.T = store(T, dtype)
        self.model = NeoxRef(cfg, self.T)
        self.alts = {}
        p = neox_params(cfg)
        print("[%s] %s storage, layers %d, hidden %d, heads %d, rotary dims %d of %d, base %g%s, %s, act %s, "
              "eps %g, attention_bias %s, tied %s%s%s" % (
                  tag, dtype, p["L"], p["d"], p["H"], p["rd"], p["hs"], p["base"],
                  ", scaling %s" % (p["scaling"],) if p["scaling"] else "",
                  "parallel" if p["parallel"] else "sequential", p["act"], p["eps"], p["abias"], p["tied"],
                  ", old buffers" if buffers else "", ", stored embed_out" if stored_head else ""), flush=True)

    def alt(self, kw):
        key = json.dumps(kw, sort_keys=True)
        if key not in self.alts:
            self.alts[key] = NeoxRef(self.cfg, self.T, **kw)
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
                print("    alternative %-58s loss_sum %.12g%s" % (name, a, "   <-- lol matches" if abs(
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
        toks, gaps, _, _ = self.model.greedy(prompt, m)
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
        ck = self.ck
        r = ck.run(["hf", "info", self.tag, "--check"], expect_rc=None)
        ck.equal("%s hf info --check exits 0" % self.tag, r.returncode, 0)
        if r.returncode != 0:
            return None
        ck.equal("%s hf info names GPTNeoXForCausalLM" % self.tag, "GPTNeoXForCausalLM" in r.stdout, True)
        ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout, True)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            ck.equal("%s hf info parameters (transformers' num_parameters())" % self.tag,
                     int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            ck.note("%s: hf info prints no parameter count" % self.tag)
        # ASSUMED: hf info's summary lines (keys as lol prints them) describe the model read here
        p = neox_params(self.cfg)
        lines = {}
        for l_ in r.stdout.splitlines():
            mm = re.match(r"(\S+(?: \S+)?)\s{2,}(.*)", l_)
            if mm:
                lines.setdefault(mm.group(1), mm.group(2))
        rot = lines.get("rotary dims")
        if p["rd"] < p["hs"]:
            ck.equal("%s hf info 'rotary dims' line [ASSUMED]" % self.tag, (rot or "").startswith(
                "%d of %d" % (p["rd"], p["hs"])), True)
        elif rot is not None:
            ck.equal("%s hf info 'rotary dims' line (full rotary) [ASSUMED]" % self.tag,
                     rot.startswith("%d of %d" % (p["hs"], p["hs"])), True)
        pos = lines.get("positions", "")
        mb = re.search(r"rope_theta ([\d.e+-]+)", pos)
        me = re.search(r"layer_norm_eps ([\d.e+-]+)", pos)
        ck.equal("%s hf info rope_theta / layer_norm_eps [ASSUMED]: %r" % (self.tag, pos),
                 (float(mb.group(1)) if mb else None, float(me.group(1)) if me else None), (p["base"], p["eps"]))
        blk = lines.get("block", "")
        want = ("parallel" if p["parallel"] else "sequential",
                "no attention biases" if not p["abias"] else "query_key_value and dense biases",
                "MLP gelu " if p["act"] == "gelu" else "MLP gelu_pytorch_tanh")
        ck.equal("%s hf info block line names %s [ASSUMED]" % (self.tag, " / ".join(want)),
                 [w in blk + " " for w in want], [True] * 3)
        ck.equal("%s hf info vocab line: tied %s [ASSUMED]" % (self.tag, p["tied"]),
                 "tied" in lines.get("vocab", ""), p["tied"])
        sc = lines.get("rope scaling", "")
        if p["scaling"]:
            ck.equal("%s hf info rope scaling line [ASSUMED]: %r" % (self.tag, sc),
                     sc.startswith(p["scaling"][0]) and ("factor %g" % p["scaling"][1]) in sc, True)
        else:
            ck.equal("%s hf info rope scaling none [ASSUMED]" % self.tag, sc, "none")
        if layout:
            claims = (("RMSNorm (rms_norm_eps)", r"rms_?norm"), ("a gated MLP ('MLP gate')", r"\bgate\b"))
            wrong = [w for w, pat in claims if re.search(pat, r.stdout, re.I)]
            ck.equal("%s hf info describes GPT-NeoX's layout (LayerNorm, plain MLP) [ASSUMED]: claims of "
                     "features GPT-NeoX lacks" % self.tag, wrong, [])
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


def case_table():
    """tag -> (config, seed, neox_weights keyword arguments)"""
    A = neox_config()
    B = neox_config(hidden_size=48, num_attention_heads=3, num_hidden_layers=2, intermediate_size=96,
                    rotary_pct=DROP, rotary_emb_base=DROP, torch_dtype=DROP, dtype="float32",
                    transformers_version="5.0.0", use_parallel_residual=False, attention_bias=False,
                    hidden_act="gelu_new", tie_word_embeddings=True, layer_norm_eps=1e-3,
                    rope_parameters={"rope_type": "default", "rope_theta": 4096.0, "partial_rotary_factor": 0.5},
                    attention_dropout=0.0, hidden_dropout=0.0, classifier_dropout=0.1)
    C = neox_config(num_attention_heads=4, num_hidden_layers=2, intermediate_size=64, rotary_pct=1.0,
                    partial_rotary_factor=1.0, rope_theta=10000.0, hidden_act="gelu_fast",
                    rope_scaling={"type": "linear", "factor": 2.0}, transformers_version="4.45.0",
                    attention_bias=True, attention_dropout=0.0, hidden_dropout=0.0, classifier_dropout=0.1)
    D = neox_config(num_hidden_layers=2, use_parallel_residual=False, attention_bias=True,
                    hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True, rotary_pct=0.5, rotary_emb_base=4096,
                    torch_dtype="float16")
    E = neox_config(num_hidden_layers=2, intermediate_size=64, torch_dtype="bfloat16")
    return {"A": (A, 607, {"emb_std": 0.005}), "B": (B, 602, {}), "C": (C, 603, {}),
            "D": (D, 604, {"emb_std": 0.3}), "E": (E, 605, {"emb_std": 0.3})}


def variant_table():
    """extra RoPE-scaling configs on the weights of A (partial rotary) / C"""
    A, C = case_table()["A"][0], case_table()["C"][0]
    return {"dynamic": (dict(C, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "C"),
            "yarn-partial": (dict(A, rope_scaling={"rope_type": "yarn", "factor": 4.0}), "A"),
            "linear-partial": (dict(A, rope_scaling={"type": "linear", "factor": 2.0}), "A")}


def key_variants():
    """the same models under other config.json layouts: tag -> (config, the case whose weights and
    reference it shares)"""
    tab = case_table()
    A, B, C = tab["A"][0], tab["B"][0], tab["C"][0]
    required = ("architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
                "num_hidden_layers", "num_attention_heads", "max_position_embeddings")
    defaults = {k: A[k] for k in required}  # GPTNeoXConfig's defaults for everything else
    v5_linear = {k: v for k, v in C.items() if k not in (
        "rotary_pct", "partial_rotary_factor", "rotary_emb_base", "rope_theta", "rope_scaling", "torch_dtype")}
    v5_linear.update(dtype="float32", transformers_version="5.0.0", rope_parameters={
        "rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0, "partial_rotary_factor": 1.0})
    rs_key = {k: v for k, v in B.items() if k != "rope_parameters"}
    rs_key.update(rotary_pct=0.5, rope_scaling={"rope_type": "default", "rope_theta": 4096.0,
                                                "partial_rotary_factor": 0.5})
    return {"neox-defaults-only-sizes": (defaults, "A"), "neox-v5-linear-rope_parameters": (v5_linear, "C"),
            "neox-v5-rope_scaling-key": (rs_key, "B"), "neox-rotary_pct-0.3-truncates": (dict(A, rotary_pct=0.3), "A")}


STORAGE = {"D": "F16", "E": "BF16"}


EXPORT_MODELS = {
    "export-neox-parallel": {"architecture": "dense", "d_model": 32, "n_layers": 2, "n_heads": 2, "n_kv_heads": 2,
                             "ffn_hidden": 64, "qkv_bias": True, "o_bias": True, "mlp_bias": True, "norm": "layernorm",
                             "mlp": "plain", "parallel_residual": True, "partial_rotary_factor": 0.25,
                             "activation": "gelu", "tie_word_embeddings": False, "rope_theta": 10000.0,
                             "norm_eps": 1e-5, "max_seq_len": 64},
    "export-neox-seq-tanh-tied": {"architecture": "dense", "d_model": 48, "n_layers": 2, "n_heads": 3, "n_kv_heads": 3,
                                  "ffn_hidden": 64, "qkv_bias": True, "o_bias": True, "mlp_bias": True,
                                  "norm": "layernorm", "mlp": "plain", "partial_rotary_factor": 0.5,
                                  "activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
                                  "rope_theta": 4096.0, "norm_eps": 1e-3, "max_seq_len": 64}}


def check_export(ck):
    """train tiny dense models of the GPT-NeoX layout for 3 steps, `lol export --hf` (the default
    --arch): config.json must describe the model in GPTNeoXConfig's keys, query_key_value must be
    the checkpoint's q_proj / k_proj / v_proj rows interleaved per head (head j: q rows, k rows,
    v rows), the other tensors renamed bit for bit, and `hf ppl --dtype float64` of the export must
    equal this reference on the exported tensors"""
    import shutil
    from safetensors_io import read_st
    w = ck.work
    print("[export] dense models of the GPT-NeoX layout -> GPTNeoXForCausalLM folders", flush=True)
    with open(os.path.join(w, "train.txt"), "w", encoding="utf-8") as f:
        f.write((TEXT + "\n\n") * 6)
    shutil.rmtree(os.path.join(w, "data_byte"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "train.txt", "--tokenizer", "byte", "--out", "data_byte", "--valid-fraction", 0,
                "--no-progress"])
    if r.returncode != 0:
        return
    ids = list(TEXT.encode("utf-8"))  # lol's byte tokenizer: id = byte
    for tag, m in EXPORT_MODELS.items():
        run = "run_" + tag
        rc = {"model": m, "data": {"dir": "data_byte", "seq_len": 32, "batch_size": 2, "packing": "pack"},
              "optim": {"type": "adamw", "lr": 0.05}, "schedule": {"type": "constant"},
              "train": {"steps": 3, "out": run, "progress": False, "threads": 1, "seed": 0}}
        with open(os.path.join(w, run + ".json"), "w") as f:
            json.dump(rc, f, indent=1)
        shutil.rmtree(os.path.join(w, run), ignore_errors=True)
        r = ck.run(["train", "--config", run + ".json", "--no-progress"])
        if r.returncode != 0:
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
                 (cfg.get("architectures"), cfg.get("model_type")), (["GPTNeoXForCausalLM"], "gpt_neox"))
        d, H, L, F = m["d_model"], m["n_heads"], m["n_layers"], m["ffn_hidden"]
        hs = d // H
        try:
            p = neox_params(cfg)
        except (KeyError, TypeError) as e:
            ck.fail("%s: config.json unreadable as GPTNeoXConfig: %r" % (tag, e))
            continue
        got = {k: p[k] for k in ("d", "L", "H", "F", "P", "rd", "base", "act", "eps", "parallel", "abias", "tied")}
        want = {"d": d, "L": L, "H": H, "F": F, "P": m["max_seq_len"], "rd": int(hs * m["partial_rotary_factor"]),
                "base": m["rope_theta"], "act": m["activation"], "eps": m["norm_eps"],
                "parallel": m.get("parallel_residual", False), "abias": True, "tied": m["tie_word_embeddings"]}
        if got["act"] in ("gelu_new", "gelu_fast") and want["act"] == "gelu_pytorch_tanh":
            got["act"] = want["act"]  # the same tanh GELU
        ck.equal("%s: config.json read as GPTNeoXConfig (defaults for absent keys)" % tag, got, want)
        # tensors: GPT-NeoX names, query_key_value fused per head
        ren = {"model.embed_tokens.weight": "gpt_neox.embed_in.weight", "model.norm.weight":
               "gpt_neox.final_layer_norm.weight", "model.norm.bias": "gpt_neox.final_layer_norm.bias"}
        if not m["tie_word_embeddings"]:
            ren["lm_head.weight"] = "embed_out.weight"
        for i in range(L):
            a, b = "model.layers.%d." % i, "gpt_neox.layers.%d." % i
            for x in ("input_layernorm", "post_attention_layernorm"):
                for y in ("weight", "bias"):
                    ren[a + x + "." + y] = b + x + "." + y
            for x, y in (("self_attn.o_proj", "attention.dense"), ("mlp.up_proj", "mlp.dense_h_to_4h"),
                         ("mlp.down_proj", "mlp.dense_4h_to_h")):
                for z in ("weight", "bias"):
                    ren[a + x + "." + z] = b + y + "." + z
        want_t = {}
        for k_src, k_dst in ren.items():
            if k_src in S:
                want_t[k_dst] = (S[k_src][0], S[k_src][1])
            else:
                ck.note("%s: the checkpoint has no %s" % (tag, k_src))
        for i in range(L):
            a, b = "model.layers.%d.self_attn." % i, "gpt_neox.layers.%d.attention.query_key_value." % i
            if not all(a + x + "_proj.weight" in S for x in "qkv"):
                ck.note("%s: the checkpoint has no q/k/v projections of layer %d" % (tag, i))
                continue
            rows, bias = [], []
            for j in range(H):
                for x in "qkv":
                    rows += S[a + x + "_proj.weight"][1][j * hs * d:(j + 1) * hs * d]
                    bias += S[a + x + "_proj.bias"][1][j * hs:(j + 1) * hs]
            want_t[b + "weight"] = ([3 * d, d], rows)
            want_t[b + "bias"] = ([3 * d], bias)
        got_t = {k: (v[0], v[1]) for k, v in E.items()}
        ck.equal("%s: tensor names" % tag, sorted(got_t), sorted(want_t))
        diff = sorted(k for k in want_t if k in got_t and got_t[k] != want_t[k])
        ck.equal("%s: tensors = the checkpoint's, query_key_value fused per head (names differing)" % tag, diff, [])
        if diff and any("query_key_value" in k for k in diff):
            k = next(k for k in diff if "query_key_value.weight" in k)
            blocks = [v for x in "qkv" for v in S[k.replace("gpt_neox.", "model.").replace(
                "attention.query_key_value.weight", "self_attn.%s_proj.weight" % x)][1]]
            if got_t[k][1] == blocks:
                print("    %s: query_key_value holds q, k, v as three contiguous blocks (not per head)" % tag)
        # hf ppl of the export against the reference on the exported tensors
        model = NeoxRef(cfg, {k: (v[0], v[1]) for k, v in E.items()})
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
    # models GPTNeoXForCausalLM cannot hold: export --arch gpt_neox refused naming the field, nothing left
    base = EXPORT_MODELS["export-neox-parallel"]
    for tag, kw, needles in (("export-refuse-gqa", {"n_kv_heads": 1}, ["n_kv_heads"]),
                             ("export-refuse-o_bias", {"o_bias": False}, ["o_bias"]),
                             ("export-refuse-no-mlp_bias", {"mlp_bias": False}, ["mlp_bias"])):
        run = "run_" + tag
        rc = {"model": dict(base, n_layers=1, **kw),
              "data": {"dir": "data_byte", "seq_len": 32, "batch_size": 2, "packing": "pack"},
              "optim": {"type": "adamw", "lr": 0.05}, "schedule": {"type": "constant"},
              "train": {"steps": 1, "out": run, "progress": False, "threads": 1, "seed": 0}}
        with open(os.path.join(w, run + ".json"), "w") as f:
            json.dump(rc, f, indent=1)
        shutil.rmtree(os.path.join(w, run), ignore_errors=True)
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        r = ck.run(["train", "--config", run + ".json", "--no-progress"])
        if r.returncode != 0:
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "gpt_neox"], expect_rc=None)
        ck.compared += 1
        left = os.path.exists(os.path.join(w, tag))
        if r.returncode != 2 or not any(n in r.stderr for n in needles) or left:
            ck.fail("%s: expected exit 2 naming %s and no %s folder left; got exit %d (folder left: %s), %r" % (
                tag, " or ".join(needles), tag, r.returncode, left, r.stderr.strip()[-300:]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    tab = case_table()
    W = {k: neox_weights(cfg, sd, **kw) for k, (cfg, sd, kw) in tab.items()}

    # A: Pythia's 4.x config and buffers
    cfgA = tab["A"][0]
    c = Case(ck, "neox-pythia-4x", cfgA, W["A"], buffers=True)
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

    # B: transformers 5's rope_parameters, sequential, no attention biases, gelu_new, tied
    cfgB = tab["B"][0]
    c = Case(ck, "neox-v5-seq-nobias-tanh-tied", cfgB, W["B"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:5], 30)
    c.generate(ids[120:160], 22)
    c.generate(ids[120:160], 22, "float32")
    c.info()

    # C: linear scaling, full rotary, 4.4x keys
    cfgC = tab["C"][0]
    c = Case(ck, "neox-linear-full-rotary", cfgC, W["C"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:4], 30)
    c.generate(ids[30:70], 20)
    c.generate(ids[30:70], 20, "float32")
    c.info()
    for name, (cfg, src) in variant_table().items():
        c = Case(ck, "neox-" + name, cfg, W[src])
        c.ppl(ids, 0)
        if name != "linear-partial":
            c.generate(ids[10:40], 25)

    # the same models under other config.json key layouts (GPTNeoXConfig's defaults; 5.x keys)
    for tag, (cfg, src) in key_variants().items():
        c = Case(ck, tag, cfg, W[src])
        c.ppl(ids, 0)
        if tag == "neox-defaults-only-sizes":
            out = c.info()
            m = re.search(r"^stop tokens\s+(.*)$", out or "", re.M)
            # ASSUMED: without eos_token_id, config.json's default 2 (GPTNeoXConfig) and the tokenizer's
            # eos (0) both stop generation (docs/hf.md: config, generation_config and tokenizer EOS ids)
            ck.equal("%s hf info stop tokens include config's default eos 2 and the tokenizer's 0 [ASSUMED]"
                     % tag, sorted(int(x) for x in re.findall(r"\d+", m.group(1))) if m else None, [0, 2])

    # D: F16, sequential, tied with a stored embed_out, gelu_pytorch_tanh, rotary 0.5, base 4096
    cfgD = tab["D"][0]
    c = Case(ck, "neox-f16-seq-tied-stored", cfgD, W["D"], dtype="F16", stored_head=True)
    c.ppl(ids, 0)
    c.generate(ids[30:62], 25)
    c.info()
    # D's weights with the old buffers as a float16 save holds them (masked_bias -inf, inv_freq F16)
    c = Case(ck, "neox-f16-old-buffers", cfgD, W["D"], dtype="F16", stored_head=True, buffers=True)
    c.ppl(ids, 0)

    # E: BF16 storage with BF16 buffers
    cfgE = tab["E"][0]
    c = Case(ck, "neox-bf16", cfgE, W["E"], dtype="BF16", buffers=True)
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:40], 25)

    # stop at EOS 0 without --no-stop
    cfgS, TS = stop_case()
    c = Case(ck, "neox-stop-at-eos", cfgS, TS)
    c.generate_stop(STOP_PROMPT, 30)

    # refusals
    print("[refusals]", flush=True)
    base = neox_config(num_hidden_layers=2)
    Ts = neox_weights(base, 7)
    refusal(ck, "refuse-rotary-odd", dict(base, rotary_pct=0.1875), Ts, ["rotary_pct"])
    refusal(ck, "refuse-rotary-one-dim", dict(base, rotary_pct=0.0625), Ts, ["rotary_pct"])
    refusal(ck, "refuse-rotary_pct-vs-partial", dict(base, partial_rotary_factor=0.5), Ts,
            ["partial_rotary_factor", "rotary_pct"])
    refusal(ck, "refuse-rotary_pct-vs-rope_parameters",
            dict(base, rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}), Ts,
            ["partial_rotary_factor", "rotary_pct"])
    refusal(ck, "refuse-base-vs-rope_theta", dict(base, rope_theta=500.0), Ts, ["rope_theta", "rotary_emb_base"])
    refusal(ck, "refuse-base-vs-rope_parameters-theta",
            dict(base, rope_parameters={"rope_type": "default", "rope_theta": 500.0}), Ts,
            ["rope_theta", "rotary_emb_base"])
    refusal(ck, "refuse-relu", dict(base, hidden_act="relu"), Ts, ["hidden_act"])
    refusal(ck, "refuse-quick_gelu", dict(base, hidden_act="quick_gelu"), Ts, ["hidden_act"])
    refusal(ck, "refuse-longrope", dict(base, rope_scaling={"rope_type": "longrope", "short_factor": [1.0, 1.0],
                                                            "long_factor": [2.0, 2.0], "factor": 2.0}),
            Ts, ["longrope", "rope_scaling"])
    refusal(ck, "refuse-quantization_config", dict(base, quantization_config={"quant_method": "bitsandbytes"}),
            Ts, ["quantization_config"])
    c36 = dict(base, hidden_size=36, num_attention_heads=4)
    refusal(ck, "refuse-head-size-odd", c36, neox_weights(c36, 7), ["num_attention_heads", "hidden_size"])
    refusal(ck, "refuse-missing-intermediate_size", neox_config(num_hidden_layers=2, intermediate_size=DROP), Ts, ["intermediate_size"])
    T = dict(Ts)
    del T["gpt_neox.layers.1.attention.query_key_value.bias"]
    refusal(ck, "refuse-missing-qkv-bias", base, T, ["gpt_neox.layers.1.attention.query_key_value.bias"])
    T = dict(Ts)
    sh, v = T["gpt_neox.layers.0.attention.query_key_value.weight"]
    T["gpt_neox.layers.0.attention.query_key_value.weight"] = ([sh[1], sh[0]], v)
    refusal(ck, "refuse-qkv-transposed", base, T, ["gpt_neox.layers.0.attention.query_key_value.weight"])
    T = dict(Ts)
    sh, v = T["gpt_neox.layers.1.attention.query_key_value.weight"]
    T["gpt_neox.layers.1.attention.query_key_value.weight"] = ([2 * sh[1], sh[1]], v[:2 * sh[1] * sh[1]])
    refusal(ck, "refuse-qkv-rows", base, T, ["gpt_neox.layers.1.attention.query_key_value.weight"])
    T = dict(Ts)
    del T["gpt_neox.layers.0.attention.dense.weight"]
    refusal(ck, "refuse-missing-dense", base, T, ["gpt_neox.layers.0.attention.dense.weight"])
    T = dict(Ts)
    del T["embed_out.weight"]
    refusal(ck, "refuse-untied-no-embed_out", base, T, ["embed_out.weight"])
    T = dict(Ts)
    sh, v = T["embed_out.weight"]
    T["embed_out.weight"] = ([sh[0] - 1, sh[1]], v[:-sh[1]])
    refusal(ck, "refuse-embed_out-rows", base, T, ["embed_out.weight"])
    refusal(ck, "refuse-tied-embed_out-differs", dict(base, tie_word_embeddings=True), Ts, ["embed_out"],
            " (ASSUMED: docs' 'a stored embed_out.weight must equal embed_in')")
    refusal(ck, "refuse-biases-with-attention_bias-false", dict(base, attention_bias=False), Ts,
            ["query_key_value.bias", "dense.bias"], " (ASSUMED: docs' strict loading, an unexpected tensor)")

    check_export(ck)

    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


# a folder whose greedy continuation reaches EOS 0: C's config with A-like weights whose embed_out
# row 0 is pulled towards the final LayerNorm's output direction
STOP_PROMPT = None


def stop_case():
    global STOP_PROMPT
    cfg = neox_config(num_hidden_layers=2, intermediate_size=64)
    T = dict(neox_weights(cfg, 611, emb_std=0.3))
    sh, v = T["embed_out.weight"]
    d = sh[1]
    lnb = T["gpt_neox.final_layer_norm.bias"][1]
    v = list(v)
    for j in range(d):  # row 0 ~ the final LayerNorm's bias direction: logit 0 grows with it
        v[j] = f32(v[j] + 1.5 * lnb[j])
    T["embed_out.weight"] = (sh, v)
    STOP_PROMPT = encode("Then the ")
    return cfg, T


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
    if ids.count(T_ID) < 5 or ids.count(HE_ID) < 5:
        bad.append("the text uses the merges too little")
    print("  selftest: text %d ids (%d 'Ġt', %d 'he'), %d bytes" % (len(ids), ids.count(T_ID), ids.count(HE_ID),
                                                                      len(TEXT.encode())))
    for x in (-3.0, -1.0, 0.5, 2.0):
        if abs(gelu_fast(x) - gelu_tanh(x)) > 1e-10:
            bad.append("gelu_fast != gelu_new at %g" % x)
    if abs(gelu_exact(1.0) - 0.8413447460685429) > 1e-12:
        bad.append("exact gelu(1) wrong")
    # pythia-70m's parameter count (docs/hf.md: 70,426,624)
    p70 = neox_config(vocab_size=50304, hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
                      intermediate_size=2048, max_position_embeddings=2048)
    if param_count(p70) != 70426624:
        bad.append("pythia-70m param count %d" % param_count(p70))
    for tag, (cfg, sd, wkw) in case_table().items():
        n = sum(len(v[1]) for v in neox_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    # config reading: the three key layouts give the same model
    pa = neox_params(case_table()["A"][0])
    pb = neox_params(case_table()["B"][0])
    if (pa["rd"], pa["base"], pb["rd"], pb["base"]) != (4, 10000.0, 8, 4096.0):
        bad.append("rotary dims / base read wrong: %s" % ((pa["rd"], pa["base"], pb["rd"], pb["base"]),))
    for tag, (cfg, src) in key_variants().items():
        if neox_params(cfg) != neox_params(case_table()[src][0]):
            bad.append("%s: the config reads as %s, not as case %s's %s" % (
                tag, neox_params(cfg), src, neox_params(case_table()[src][0])))
    # RoPE: rotate-half equals the complex rotation of (x_i + i x_{i+rd/2}) by pos * inv_freq_i
    inv = inv_freq_f32(10000.0, 8)
    if inv != [f32(v) for v in (1.0, 0.1, 0.01, 0.001)]:  # 10000 ** (-2i / 8), each step exact in float32
        bad.append("inv_freq %s" % inv)
    cos, sin = rope_tables(inv, 40)
    x = [0.3 * k - 1.0 for k in range(12)]
    y = rope_apply(x, cos[37], sin[37], 8)
    for i in range(4):
        z = complex(x[i], x[i + 4]) * complex(math.cos(37 * inv[i]), math.sin(37 * inv[i]))
        if abs(z.real - y[i]) > 1e-5 or abs(z.imag - y[i + 4]) > 1e-5:
            bad.append("rope pair %d" % i)
    if y[8:] != x[8:]:
        bad.append("rope touched the pass-through dims")
    # LayerNorm
    y = layernorm([1.0, 2.0, 4.0, 7.0], [1.0] * 4, [0.0] * 4, 0.0)
    if abs(sum(y)) > 1e-12 or abs(sum(v * v for v in y) / 4 - 1) > 1e-12:
        bad.append("layernorm")
    # buffers and storage: the reference reads only the parameters
    cfgA, sd, wkw = case_table()["A"]
    TA = neox_weights(cfgA, sd, **wkw)
    if NeoxRef(cfgA, TA).prefill(ids[:20])[0] != NeoxRef(cfgA, with_buffers(TA, cfgA)).prefill(ids[:20])[0]:
        bad.append("buffers change the reference")
    # cached greedy = the full forward recomputed each step
    for tag in ("A", "B", "C"):
        cfg, sd, wkw = case_table()[tag]
        m = NeoxRef(cfg, neox_weights(cfg, sd, **wkw))
        pr = ids[60:75]
        toks = m.greedy(pr, 10)[0]
        seq = list(pr)
        for j in range(10):
            t = argmax_low(m.prefill(seq)[0][-1])
            if t != toks[j]:
                bad.append("%s: cached greedy step %d: %d != recomputed %d" % (tag, j, toks[j], t))
                break
            seq.append(t)
    # the stop case reaches EOS
    cfgS, TS = stop_case()
    st = NeoxRef(cfgS, TS).greedy(STOP_PROMPT, 30)[0]
    print("  selftest: stop case greedy %s" % st)
    if EOT not in st or st.index(EOT) < 2:
        bad.append("the stop case's greedy continuation does not reach EOS 0 after a few tokens: %s" % st)
    # sensitivity
    gen = {"A": [(ids[:3], 30), (ids[60:100], 20)], "B": [(ids[:5], 30), (ids[120:160], 22)],
           "C": [(ids[:4], 30), (ids[30:70], 20)], "D": [(ids[30:62], 25)], "E": [(ids[10:40], 25)]}
    tab = case_table()
    cases = [(tag, cfg, store(neox_weights(cfg, sd, **wkw), STORAGE.get(tag, "F32")), gen[tag])
             for tag, (cfg, sd, wkw) in sorted(tab.items())]
    for name, (cfg, src) in sorted(variant_table().items()):
        c0, sd, wkw = tab[src]
        cases.append((name, cfg, neox_weights(c0, sd, **wkw), [] if name == "linear-partial" else [(ids[10:40], 25)]))
    changed = {}
    wins = windows(ids, 64)
    for tag, cfg, T, g in cases:
        model = NeoxRef(cfg, T)
        ref, cnt = mean_ce(model, wins)
        refs = [model.greedy(p_, n)[0] for p_, n in g]
        if any(len(set(r_)) < 4 for r_ in refs):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
        worst = None
        # the precision of the float32 tables: one ulp of noise on every entry, and float64 tables
        for name, kw in (("RoPE tables +-1 float32 ulp (noise)", {"ulp_noise": 5}),
                         ("RoPE tables in float64", {"rope_f64": True})):
            a_, _ = mean_ce(NeoxRef(cfg, T, **kw), wins)
            rel = abs(a_ - ref) / abs(ref)
            print("  selftest %-14s %-62s relative change %.2e" % (tag, name, rel))
            if "noise" in name and rel > TOL["float64"] / 2:
                bad.append("%s: one float32 ulp in the RoPE tables moves the loss by %.2e, too close to the "
                           "float64 tolerance" % (tag, rel))
        for name, kw in alternatives(cfg):
            alt = NeoxRef(cfg, T, **kw)
            a_, _ = mean_ce(alt, wins)
            rel = abs(a_ - ref) / abs(ref)
            worst = rel if worst is None else min(worst, rel)
            if rel < 20 * TOL["float64"]:
                bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
            same = all(alt.greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            key = re.sub(r"activation gelu\S*", "activation gelu (the other form)", name.split(" instead")[0])
            key = re.sub(r"layer_norm_eps \S+", "layer_norm_eps", key)
            key = re.sub(r"RoPE base 10000.*", "RoPE base 10000 (the default)", key)
            if g:
                changed.setdefault(key, [])
                if not same:
                    changed[key].append(tag)
            print("  selftest %-14s %-62s relative change %.2e%s" % (
                tag, name, rel, "  (greedy ids unchanged)" if same and g else ""))
        print("  selftest %-14s loss %.8g over %d targets (ppl %.4g); smallest relative change %.2e; greedy %s" % (
            tag, ref, cnt, math.exp(ref / cnt), worst, refs))
        for name, kw in DECODE_ALTS:
            if g:
                same = all(NeoxRef(cfg, T, **kw).greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
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
    c = sub.add_parser("check", help="build tiny GPT-NeoX folders, run lol, compare with the reference")
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
