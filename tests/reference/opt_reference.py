#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face OPT (OPTForCausalLM, model_type "opt":
facebook/opt-125m ... opt-66b and their fine-tunes) in pure Python (stdlib only), and a check that
`lol hf ppl|generate|info|bench`, `lol export --hf --arch opt` and `lol layerroute train|merge|
generate` agree with it on tiny OPT folders written here.

  python3 tests/reference/opt_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/opt_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_opt.py / configuration_opt.py as remembered (OPTLearnedPositionalEmbedding
with offset 2: a table of max_position_embeddings + 2 rows, position p reading row p + 2;
OPTAttention with q = q_proj(x) * head_dim^-0.5, the bias included in what is scaled; OPTDecoderLayer
pre-norm when do_layer_norm_before; OPTDecoder's final_layer_norm unless _remove_final_layer_norm;
nn.LayerNorm's eps 1e-5; ACT2FN[activation_function]; enable_bias on q/k/v/out_proj, fc1 and fc2;
lm_head tied to embed_tokens; OPTConfig's defaults), facebook/opt-125m's config.json as remembered,
docs/hf.md ("OPT", "Commands", "Export", "Cached decoding", "GPT-2" for the GELU forms),
docs/layerroute.md ("Files", "The adapter as PEFT's", "Commands", the merge paragraph),
docs/baselines.md (the dense switches an OPT export needs) and the brief. It imports
qwen2_reference.py (float32 / bfloat16 rounding, log_softmax / argmax / top-2 gap, Checker,
compare_greedy, parse_ids, matmul / mat, read_folder_weights), gpt2_reference.py (GPT-2's byte-level
tokenizer and text, the GELU forms, LayerNorm with its alternative readings, float16 / storage
rounding, windows / mean_ce) and gptj_reference.py (write_folder with a chat template, refusal,
train_run, check_peft_files / peft_selects / peft_pattern / _Tally / selftest_peft_files, the chat
template and LayerRoute samples), all unchanged; the OPT model, its config reading, the weights,
the cases, the export / merge / adapter expectations and the comparisons are this file's.

Rules of the reference (float64 on the stored, float16- / bfloat16-rounded weights):
  x_0[t] = embed_tokens[id_t] + embed_positions[t + 2]   (positions 0.. within each forward call /
      hf ppl window; rows 0 and 1 of the [max_position_embeddings + 2, d] table are never read
      without left padding)
  per layer (OPTDecoderLayer, do_layer_norm_before true):
      a = self_attn_layer_norm(x)
      q = (a Wq^T + bq) * hd^-0.5,  k = a Wk^T + bk,  v = a Wv^T + bv   (hd = hidden_size / heads)
      head j = rows j*hd .. (j+1)*hd - 1; scores q.k (already scaled), causal softmax, heads concatenated
      h = x + (o Wout^T + bout)
      y = h + fc2(act(fc1(final_layer_norm(h))))      fc1: [ffn_dim, d] (+ bias), fc2: [d, ffn_dim] (+ bias)
      (enable_bias false: no bias on q/k/v/out_proj, fc1, fc2; the LayerNorms keep theirs)
  logits = decoder.final_layer_norm(x_L) lm_head^T, lm_head = embed_tokens (tie_word_embeddings,
      default true) else lm_head.weight [V, d]; no bias.
  LayerNorm (nn.LayerNorm(hidden_size), elementwise affine): (x - mean) / sqrt(var + 1e-5) * w + b,
      var the biased (1/n) variance.
  act: "relu" (default) max(x, 0); "gelu" exact 0.5 x (1 + erf(x / sqrt 2)); "gelu_new" /
      "gelu_pytorch_tanh" the tanh form; "gelu_fast" the tanh form with 0.7978845608.
  OPTConfig defaults: activation_function relu, do_layer_norm_before true, _remove_final_layer_norm
      false, word_embed_proj_dim None (= hidden_size), enable_bias true,
      layer_norm_elementwise_affine true, tie_word_embeddings true, pad 1, bos / eos 2.
  Tensors (OPTForCausalLM): model.decoder.embed_tokens.weight, model.decoder.embed_positions.weight,
      model.decoder.layers.{i}.self_attn.{q,k,v,out}_proj.{weight,bias},
      model.decoder.layers.{i}.self_attn_layer_norm.{weight,bias}, model.decoder.layers.{i}.fc{1,2}.
      {weight,bias}, model.decoder.layers.{i}.final_layer_norm.{weight,bias},
      model.decoder.final_layer_norm.{weight,bias}, lm_head.weight (untied, or tied and stored);
      OPTModel's names drop the leading "model.".
  num_parameters() = V d (x2 untied) + (P + 2) d + L (4 d^2 + 2 d F + 6 d + F [biases] + 4 d [norms])
      + 2 d   (facebook/opt-125m: 125,239,296).

Cases (vocab_size 300 > the tokenizer's 259 ids, hidden 32, 4 heads (hd 8), max_position_embeddings 64
(table 66 rows), GPT-2's byte-level tokenizer as gpt2_reference writes it: ids 0..255 bytes, merges
"Ġt" 256 / "he" 257, <|endoftext|> 258 = bos / eos where config.json gives them; a text of 256 tokens):
  A opt-lmhead-tied-relu: OPTForCausalLM names, 3 layers, ffn_dim 80, no activation_function /
    enable_bias / tie_word_embeddings keys (relu, biases, tied); embeddings and positions of std
    0.005 (layer 0's LayerNorm then tells eps 1e-5 from 1e-6) with a final LayerNorm weight of std 40,
    bias std 0.3 (tied logits of a few units); offset rows 0 / 1 random. ppl float64 --context 0 (= 64) and 9, float32
    64; generate float64 (3 + 30, 40 + 20), float32 (40 + 20), float64 with LOL_CPU_KERNELS=0 (the
    tensor path), a --prompt text, --max-new 30 after 50 ids (reduced to 14 by 64 positions); info.
  B opt-decoder-names-nobias-gelu: OPTModel names (decoder.), enable_bias false, exact "gelu", 2
    layers, ffn_dim 64, tied: ppl float64 0 / 9, float32; generate float64 (4 + 30, 30 + 20) /
    float32; info.
  C opt-untied-gelu_new-f16: F16 storage, untied lm_head.weight, "gelu_new", opt-125m's explicit
    keys (prefix, dropout, ..., word_embed_proj_dim = hidden_size, torch_dtype float16): ppl float64,
    float32; generate float64; info.
  D opt-bf16-decoder-names-stored-head: BF16 storage, OPTModel names plus a stored lm_head.weight
    equal to embed_tokens, relu, biases: ppl float64 (on the bf16-rounded weights), float32, bfloat16;
    generate float64; info.
  E opt-defaults-no-token-ids: only architectures, model_type and the six size fields (every other
    key OPTConfig's default, bos / eos 2 included), 1 layer, ffn_dim 128: ppl float64; generate
    float64; info.
  opt-stop-at-default-eos: E's config untied, lm_head row 2 replaced by 1.02 x the row of a token the
    model's greedy decoding emits at step >= 2 (stop_case's search), so that greedy decoding reaches id
    2 after 2 other tokens: without --no-stop the ids up to and including the first of 2 (OPTConfig's
    default eos_token_id) / 258 (the tokenizer's eos_token).
  opt-125m config.json (as on the Hub): `hf bench CONFIG --json` (random weights) reports
    125,239,296 parameters; opt-350m's (word_embed_proj_dim 512, do_layer_norm_before false) is refused.
  Refusals (hf ppl, exit 2, stderr naming the field / tensor): do_layer_norm_before false,
    word_embed_proj_dim 16 (with project_in / project_out tensors), _remove_final_layer_norm true,
    layer_norm_elementwise_affine false (no LayerNorm tensors), activation_function silu /
    quick_gelu, quantization_config, a missing ffn_dim, hidden 36 on 4 heads (head_dim 9, odd), a
    position table of max_position_embeddings rows (no offset rows) or of P + 1 rows, missing
    model.decoder.layers.1.fc2.bias / decoder.layers.0.self_attn_layer_norm.weight /
    model.decoder.final_layer_norm.bias / model.decoder.embed_positions.weight, untied without
    lm_head.weight, a stored lm_head.weight differing from embed_tokens with tie true (ASSUMED
    refused, as GPT-2's), fc1.weight transposed (and its message names OPT's fields ffn_dim /
    hidden_size: docs/hf.md "Weights": "the message names the config fields that set the shape"), hf
    ppl --context 100 > 64 (ASSUMED refused); the missing position table's message, where it gives a
    shape, gives the file's [66, 32] (docs/hf.md OPT).
    enable_bias false with bias tensors in the file: transformers ignores them (unexpected keys);
    either a refusal naming the tensor or the bias-free function is accepted.
  Export (trained dense models of GPT-2's layout, 3 steps on a byte corpus): relu with biases
    (tied) and exact gelu without any bias (untied): `lol export --hf` with no --arch (docs: opt is
    the default for GPT-2's layout with the ReLU or without biases) and --arch opt: OPTForCausalLM,
    config.json read with OPTConfig's rules gives the trained model, the tensors are the
    checkpoint's renamed bit for bit with two zero rows before the position table, hf ppl float64
    of the export = this reference on the exported tensors. GPT-2's layout with the tanh GELU and
    all biases still defaults to GPT2LMHeadModel. Refused with --arch opt (exit 2 naming the field,
    no folder left): grouped-query attention, parallel blocks, biases on some projections only, an
    lm_head bias, RoPE positions (ASSUMED), norm_eps 1e-3 (ASSUMED: OPT's LayerNorms are fixed at
    1e-5, OPTConfig has no epsilon key, so an export must refuse rather than change the function),
    RMSNorm / gated MLP, and (ASSUMED, OPT cannot express them) a sliding window, head_dim !=
    d_model / n_heads, scaled embeddings, final-logit soft-capping, q/k norms.
  Loaded folders written back (`layerroute merge`, the command-line route for a loaded folder;
    docs/hf.md: the export writes the two offset rows as zeros): a zero LoRA (--lr 0) on case D's
    weights (BF16, decoder. names, random offset rows): the merged folder is OPTForCausalLM with
    OPTConfig's reading of the source, every tensor the source's (OPTForCausalLM names) except the
    offset rows, which are 0; its function and hf ppl float64 = the source's. A LoRA trained 3 steps
    (lr 0.01, rank 4, alpha 8) on q_proj, k_proj, v_proj, o_proj, up_proj, down_proj of a
    model.decoder.-named base with zero offset rows: the adapter files as PEFT reads them on
    OPTForCausalLM (check_peft_files: base_model.model.model.decoder.layers.{i}.self_attn.{q,k,v,out}
    _proj / fc1 / fc2 .lora_{A,B}.weight, target_modules under PEFT's matching rule selecting exactly
    those modules, r / lora_alpha, peft_architecture "OPTForCausalLM"); merge = PEFT's fold
    W + alpha/r B A (within 1e-6 of max |W'|), the other tensors bit for bit; the merged folder's hf
    ppl float64 = this reference on it; `layerroute generate --gates open` = greedy ids of this
    reference on the fold.
Tolerances: float64 summed loss / bits per byte 1e-8 relative, perplexity 1e-7; float32 1e-6;
bfloat16 5e-3; greedy ids exact (after a float32 near-tie, top-2 gap < 1e-4 of max |logit|, the
rest of that continuation is not compared, noted).
First run (build/lol of 2026-12-07 18:41, the first with OPT; 2 shared cores while a build ran):
189 checks, 3 disagreements, 99 lol runs, 162 s; selftest 43 s. lol was 1.2e-16 .. 7.1e-16 away in
float64 (loss_sum), 2.9e-9 .. 1.2e-8 in float32, 7.9e-5 in bfloat16; exports and merged folders
3.5e-16 .. 6.7e-16 (hf ppl float64 against this reference on their tensors); the merged LoRA fold
4.8e-8 of max |W'|; every greedy id equal (no near-tie). The disagreements: `export --hf [--arch
opt]` of a dense model with norm_eps 1e-3 writes an OPT folder (which OPTConfig can only read with
LayerNorm eps 1e-5: the loss moves by 3.9e-5 relative; lol's own --verify sees 0.0043 in the logits
and exits 1), the missing-position-table message gives the shape [64, 32] instead of [66, 32], and
the fc1 shape message names intermediate_size instead of OPT's ffn_dim.

`selftest` (no lol): GELU forms, parameter counts (opt-125m's 125,239,296, each case's = its stored
values), config reading with OPTConfig's defaults, both name layouts giving the same model, cached
greedy decoding = recomputed full forward, the stop case reaching id 2, the sensitivity: each
alternative reading (positions without the +2 offset, with +1, no positions; q not scaled, scaled
by 1/hd, only the weight part of q scaled (bias unscaled: a fold of the scale into q_proj.weight
alone); GELU (both forms) instead of ReLU and ReLU instead of GELU; LayerNorm without the mean,
without bias, unbiased variance, eps outside the sqrt, eps 1e-6; post-norm blocks
(do_layer_norm_before false read); no decoder final_layer_norm; no projection biases; the tied head
for an untied one) moves each case's float64 loss by > 20 x the float64 tolerance (eps 1e-6, eps
outside the sqrt, the unbiased variance and the other GELU form: in at least one case; smallest
required change 3.9e-5, A's offset-1 positions), and the greedy ids check() compares change under each in
at least one case, as they do under cached decoding that puts every new token at position
len(prompt), restarts at 0, or forgets the +2 offset in decoding only; check_peft_files on PEFT
files written as documented (no failure) and on wrong ones (lol's names o_proj / up_proj /
down_proj as targets, a container selected, rank / alpha patterns, fan_in_fan_out, no
peft_architecture, a transposed lora_B: each detected); the fold against the low-rank path.

ASSUMED (where neither the brief nor transformers decides):
  * The reference is the float64 function of the equations above (transformers' OPT in float64
    computes it; its scaling of q before the product is the same in exact arithmetic).
  * hf ppl windows: non-overlapping windows of --context tokens, positions restart at 0 in each
    window, no BOS (docs/hf.md); --context 0 -> min(512, max_position_embeddings).
  * OPTForCausalLM's named_modules() (as PEFT walks them) are the remembered tree (opt_modules:
    model, model.decoder, embed_tokens, embed_positions, final_layer_norm, layers, layers.{i},
    self_attn, {q,k,v,out}_proj, activation_fn, self_attn_layer_norm, fc1, fc2, final_layer_norm,
    lm_head; project_in / project_out / dropout are not modules when word_embed_proj_dim =
    hidden_size).
  * A merged / exported tied model may or may not store lm_head.weight (equal to embed_tokens);
    its tensors are expected under OPTForCausalLM's names (what save_pretrained writes).
  * hf info's summary: names OPTForCausalLM, "all tensors present", a "parameters N" line if any;
    no claims of RoPE / RMSNorm / a gated MLP; the "block" line names the activation (a tanh GELU by
    any of its names), epsilon 1e-5 and "no biases" exactly when enable_bias is false, the "vocab"
    line "tied" exactly for tied heads, the "positions" line max_position_embeddings and "offset 2"
    (the format lol printed when this was written).
  * Refusal messages name the field or tensor (any one of the listed needles).
  * A stored lm_head.weight differing from embed_tokens under tie_word_embeddings true is refused
    (docs/hf.md says only that an equal one is accepted; GPT-2's section says the other is refused).
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
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import Checker, argmax_low, compare_greedy, f32, log_softmax, parse_ids, top2_gap  # noqa
from safetensors_io import read_st, write_st  # noqa: E402
import gpt2_reference as g2  # noqa: E402  (tokenizer, text, GELU forms, LayerNorm, storage rounding, windows)
import gptj_reference as gj  # noqa: E402  (write_folder, refusal, train_run, check_peft_files, chat template)

_mul = operator.mul
DROP = object()
DIAGNOSE = [6]
TOL = {"float64": 1e-8, "float32": 1e-6, "bfloat16": 5e-3}
TEXT = g2.TEXT
encode = g2.encode
token_bytes = g2.token_bytes
EOT = g2.EOT  # 258
OPT_EOS = 2   # OPTConfig's bos / eos default (</s> in OPT's own tokenizer)
layernorm = g2.layernorm
windows = g2.windows
mean_ce = g2.mean_ce
store = g2.store

ACTS = {"relu": g2.relu, "gelu": g2.gelu_exact, "gelu_new": g2.gelu_tanh, "gelu_pytorch_tanh": g2.gelu_tanh,
        "gelu_fast": g2.gelu_fast}


def matvec(W, x):
    return [sum(map(_mul, row, x)) for row in W]


# ---------------------------------------------------------------- config (OPTConfig)
def opt_params(cfg):
    d = cfg["hidden_size"]
    wep = cfg.get("word_embed_proj_dim")
    return {"V": cfg["vocab_size"], "d": d, "L": cfg["num_hidden_layers"], "H": cfg["num_attention_heads"],
            "P": cfg["max_position_embeddings"], "F": cfg["ffn_dim"],
            "act": cfg.get("activation_function", "relu"),
            "bias": cfg.get("enable_bias", True),
            "tied": cfg.get("tie_word_embeddings", True),
            "pre": cfg.get("do_layer_norm_before", True),
            "wep": d if wep is None else wep,
            "final_ln": not cfg.get("_remove_final_layer_norm", False),
            "affine": cfg.get("layer_norm_elementwise_affine", True),
            "bos": cfg.get("bos_token_id", OPT_EOS), "eos": cfg.get("eos_token_id", OPT_EOS),
            "eps": 1e-5}


def opt_config(**kw):
    """facebook/opt-125m's config.json keys (as remembered) at a tiny size"""
    c = {"_name_or_path": "facebook/opt-125m", "_remove_final_layer_norm": False, "activation_dropout": 0.0,
         "activation_function": "relu", "architectures": ["OPTForCausalLM"], "attention_dropout": 0.0,
         "bos_token_id": EOT, "do_layer_norm_before": True, "dropout": 0.1, "eos_token_id": EOT,
         "ffn_dim": 64, "hidden_size": 32, "init_std": 0.02, "layerdrop": 0.0, "max_position_embeddings": 64,
         "model_type": "opt", "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 1,
         "prefix": "</s>", "torch_dtype": "float32", "transformers_version": "4.21.0.dev0", "use_cache": True,
         "vocab_size": 300, "word_embed_proj_dim": 32}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def opt125m_config():
    return opt_config(bos_token_id=2, eos_token_id=2, ffn_dim=3072, hidden_size=768, max_position_embeddings=2048,
                      num_attention_heads=12, num_hidden_layers=12, torch_dtype="float16", vocab_size=50272,
                      word_embed_proj_dim=768)


def opt350m_config():
    return opt_config(_name_or_path="facebook/opt-350m", bos_token_id=2, eos_token_id=2, ffn_dim=4096,
                      hidden_size=1024, max_position_embeddings=2048, num_attention_heads=16, num_hidden_layers=24,
                      torch_dtype="float16", vocab_size=50272, word_embed_proj_dim=512, do_layer_norm_before=False)


def param_count(cfg):
    """transformers' num_parameters() (tied lm_head counted once); pre-norm, no projections"""
    p = opt_params(cfg)
    d, F, V = p["d"], p["F"], p["V"]
    b = 1 if p["bias"] else 0
    per = 4 * d * d + 2 * d * F + b * (4 * d + F + d) + 4 * d
    return V * d * (1 if p["tied"] else 2) + (p["P"] + 2) * d + p["L"] * per + (2 * d if p["final_ln"] else 0)


# ---------------------------------------------------------------- weights (OPTForCausalLM names)
def opt_weights(cfg, seed, emb_std=0.5, pos_std=0.5, off_std=None, lnf_std=0.3, lnf_mean=1.0, qk=2.5, fc=2.5,
                lnf_bias_std=0.3):
    """name -> (shape, flat float32-rounded values) under OPTForCausalLM's names. LayerNorm weights
    N(1, 0.3), biases N(0, 0.3); q / k rows larger than v's; fc1 pre-activations of a few units
    (ReLU and the GELU forms differ there). off_std: the two offset rows of the position table
    (None: pos_std; 0: zeros, as lol's export writes them)."""
    rng = random.Random(seed)
    p = opt_params(cfg)
    V, d, L, P, F = p["V"], p["d"], p["L"], p["P"], p["F"]
    T = {}

    def put(name, shape, sd, mean=0.0):
        n = 1
        for s_ in shape:
            n *= s_
        T[name] = (list(shape), [f32(rng.gauss(mean, sd)) for _ in range(n)])

    D = "model.decoder."
    put(D + "embed_tokens.weight", [V, d], emb_std)
    put(D + "embed_positions.weight", [P + 2, d], pos_std)
    if off_std is not None:
        sh, v = T[D + "embed_positions.weight"]
        o = [f32(rng.gauss(0.0, off_std)) if off_std else 0.0 for _ in range(2 * d)]
        T[D + "embed_positions.weight"] = (sh, o + v[2 * d:])
    for i in range(L):
        pre = D + "layers.%d." % i
        for x, sd in (("q", qk), ("k", qk), ("v", 1.2), ("out", 1.0)):
            put(pre + "self_attn.%s_proj.weight" % x, [d, d], sd / math.sqrt(d))
            if p["bias"]:
                put(pre + "self_attn.%s_proj.bias" % x, [d], 0.3)
        put(pre + "self_attn_layer_norm.weight", [d], 0.3, 1.0)
        put(pre + "self_attn_layer_norm.bias", [d], 0.3)
        put(pre + "fc1.weight", [F, d], fc / math.sqrt(d))
        if p["bias"]:
            put(pre + "fc1.bias", [F], 0.5)
        put(pre + "fc2.weight", [d, F], 1.2 / math.sqrt(F))
        if p["bias"]:
            put(pre + "fc2.bias", [d], 0.3)
        put(pre + "final_layer_norm.weight", [d], 0.3, 1.0)
        put(pre + "final_layer_norm.bias", [d], 0.3)
    put(D + "final_layer_norm.weight", [d], lnf_std, lnf_mean)
    put(D + "final_layer_norm.bias", [d], lnf_bias_std)
    if not p["tied"]:
        put("lm_head.weight", [V, d], 0.3)
    return T


def model_layout(T):
    """OPTModel's names (no leading "model."); lm_head kept only if present"""
    return {(k[len("model."):] if k.startswith("model.") else k): v for k, v in T.items()}


def canonical(T):
    """any layout -> OPTForCausalLM's names"""
    return {("model." + k if k.startswith("decoder.") else k): v for k, v in T.items()}


def write_folder(folder, cfg, T, dtype="F32", chat_template=None):
    gj.write_folder(folder, cfg, T, dtype, chat_template)


# ---------------------------------------------------------------- the model
class OptRef:
    """OPTForCausalLM in float64. Keyword arguments select alternative readings (sensitivity checks
    and the diagnosis of a disagreement)."""

    def __init__(self, cfg, T, ln_center=True, ln_bias=True, ln_unbiased=False, ln_eps_out=False, eps=None,
                 positions="offset", q_scale="hf", act=None, post_norm=False, final_norm=True, biases=True,
                 head=None, decode_pos="hf"):
        p = opt_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.V, self.P, self.F = p["d"], p["L"], p["H"], p["V"], p["P"], p["F"]
        self.hd = self.d // self.H
        self.eps = p["eps"] if eps is None else eps
        self.ln_kw = {"center": ln_center, "bias": ln_bias, "unbiased": ln_unbiased, "eps_out": ln_eps_out}
        self.act = ACTS[act or p["act"]]
        self.s = self.hd ** -0.5
        self.q_scale = q_scale
        self.positions = positions
        self.post_norm = post_norm
        self.final_norm = final_norm
        self.decode_pos = decode_pos
        W = canonical(T)
        D = "model.decoder."
        d, F = self.d, self.F

        def rows(name, shape):
            s, v = W[name][0], W[name][1]
            assert list(s) == list(shape), (name, s, shape)
            return [list(v[i * s[1]:(i + 1) * s[1]]) for i in range(s[0])]

        def vec(name, n):
            s, v = W[name][0], W[name][1]
            assert list(s) == [n], (name, s, n)
            return list(v)

        def lin(name, n_out, n_in):
            M = rows(name + ".weight", [n_out, n_in])
            b = vec(name + ".bias", n_out) if (p["bias"] and biases) else [0.0] * n_out
            return M, b

        def ln(name):
            return vec(name + ".weight", d), vec(name + ".bias", d)
        self.embed_tokens = rows(D + "embed_tokens.weight", [self.V, d])
        self.embed_positions = rows(D + "embed_positions.weight", [self.P + 2, d])
        self.layers = []
        for i in range(self.L):
            pre = D + "layers.%d." % i
            self.layers.append({"ln1": ln(pre + "self_attn_layer_norm"), "ln2": ln(pre + "final_layer_norm"),
                                "q": lin(pre + "self_attn.q_proj", d, d), "k": lin(pre + "self_attn.k_proj", d, d),
                                "v": lin(pre + "self_attn.v_proj", d, d),
                                "o": lin(pre + "self_attn.out_proj", d, d),
                                "fc1": lin(pre + "fc1", F, d), "fc2": lin(pre + "fc2", d, F)})
        self.ln_f = ln(D + "final_layer_norm")
        tied = p["tied"] if head is None else head == "tied"
        self.lm_head = self.embed_tokens if tied else rows("lm_head.weight", [self.V, d])
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps, **self.ln_kw)

    def embed(self, t, pos, decoding=False):
        e = self.embed_tokens[t]
        mode = self.positions
        if decoding and self.decode_pos == "no-offset":
            mode = "no-offset"
        if mode == "none":
            return list(e)
        row = {"offset": pos + 2, "no-offset": pos, "offset1": pos + 1}[mode]
        return [a + b for a, b in zip(e, self.embed_positions[row])]

    def block(self, i, X, cache):
        ly = self.layers[i]
        H, hd, s = self.H, self.hd, self.s
        out = []
        for h in X:
            a = h if self.post_norm else self._ln(h, ly["ln1"])
            M, b = ly["q"]
            qw = matvec(M, a)
            if self.q_scale == "hf":
                q = [(x + bb) * s for x, bb in zip(qw, b)]
            elif self.q_scale == "weight-only":
                q = [x * s + bb for x, bb in zip(qw, b)]
            elif self.q_scale == "none":
                q = [x + bb for x, bb in zip(qw, b)]
            else:  # "1/hd"
                q = [(x + bb) / hd for x, bb in zip(qw, b)]
            M, b = ly["k"]
            k = [x + bb for x, bb in zip(matvec(M, a), b)]
            M, b = ly["v"]
            v = [x + bb for x, bb in zip(matvec(M, a), b)]
            cache["k"].append([k[j * hd:(j + 1) * hd] for j in range(H)])
            cache["v"].append([v[j * hd:(j + 1) * hd] for j in range(H)])
            att = []
            for j in range(H):
                qa = q[j * hd:(j + 1) * hd]
                sc = [sum(map(_mul, qa, kk[j])) for kk in cache["k"]]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for w, vv in zip(e, cache["v"]):
                    w /= tot
                    o = [oj + w * vj for oj, vj in zip(o, vv[j])]
                att.extend(o)
            M, b = ly["o"]
            h2 = [x1 + y + bb for x1, y, bb in zip(h, matvec(M, att), b)]
            if self.post_norm:
                h2 = self._ln(h2, ly["ln1"])
            m_ = h2 if self.post_norm else self._ln(h2, ly["ln2"])
            M, b = ly["fc1"]
            f = [self.act(y + bb) for y, bb in zip(matvec(M, m_), b)]
            M, b = ly["fc2"]
            y = [x1 + z + bb for x1, z, bb in zip(h2, matvec(M, f), b)]
            if self.post_norm:
                y = self._ln(y, ly["ln2"])
            out.append(y)
        return out

    def head(self, h):
        x = self._ln(h, self.ln_f) if self.final_norm else h
        return matvec(self.lm_head, x)

    def prefill(self, tokens, mode=None):
        key = tuple(tokens)
        if key in self.memo:
            return self.memo[key]
        X = [self.embed(t, j) for j, t in enumerate(tokens)]
        caches = []
        for i in range(self.L):
            c = {"k": [], "v": []}
            X = self.block(i, X, c)
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
            pp = {"hf": pos, "no-offset": pos, "stuck": len(prompt), "restart": pos - len(prompt)}[self.decode_pos]
            h = self.embed(t, pp, decoding=True)
            for i in range(self.L):
                h = self.block(i, [h], caches[i])[0]
            z = self.head(h)
            pos += 1
        return toks, gaps


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = opt_params(cfg)
    out = [("positions without the +2 offset (embed_positions[t])", {"positions": "no-offset"}),
           ("positions with offset 1 (embed_positions[t + 1])", {"positions": "offset1"}),
           ("no position embeddings", {"positions": "none"}),
           ("q not scaled", {"q_scale": "none"}),
           ("q scaled by 1/head_dim", {"q_scale": "1/hd"})]
    if p["bias"]:
        out.append(("only q_proj.weight scaled (the q bias unscaled)", {"q_scale": "weight-only"}))
    if p["act"] == "relu":
        out += [("activation gelu (exact) instead of relu", {"act": "gelu"}),
                ("activation gelu_new (tanh) instead of relu", {"act": "gelu_new"})]
    else:
        out.append(("activation relu instead of %s" % p["act"], {"act": "relu"}))
        other = "gelu" if ACTS[p["act"]] is not g2.gelu_exact else "gelu_new"
        out.append(("activation %s (the other GELU form) instead of %s" % (other, p["act"]), {"act": other}))
    out += [("LayerNorm without the mean subtraction", {"ln_center": False}),
            ("LayerNorm without bias", {"ln_bias": False}),
            ("LayerNorm with the unbiased (n-1) variance", {"ln_unbiased": True}),
            ("LayerNorm eps outside the sqrt", {"ln_eps_out": True}),
            ("LayerNorm eps 1e-6 instead of 1e-5", {"eps": 1e-6}),
            ("post-norm blocks (do_layer_norm_before false)", {"post_norm": True}),
            ("no decoder final_layer_norm (_remove_final_layer_norm)", {"final_norm": False})]
    if p["bias"]:
        out.append(("no projection biases (enable_bias ignored)", {"biases": False}))
    if not p["tied"]:
        out.append(("tied head (embed_tokens) instead of lm_head.weight", {"head": "tied"}))
    return out


# the alternatives whose effect may be small (the loss must move in at least one case, not in each)
WEAK = ("LayerNorm eps 1e-6", "LayerNorm with the unbiased", "LayerNorm eps outside", "activation gelu_new (the other",
        "activation gelu (the other")
DECODE_ALTS = [("cached decoding: every new token at position len(prompt)", {"decode_pos": "stuck"}),
               ("cached decoding: new tokens' positions restart at 0", {"decode_pos": "restart"}),
               ("cached decoding: positions without the +2 offset (prefill with it)", {"decode_pos": "no-offset"})]


# ---------------------------------------------------------------- cases
def case_table():
    """tag -> (config, seed, opt_weights keyword arguments, storage, layout, stored head)"""
    A = opt_config(num_hidden_layers=3, ffn_dim=80, activation_function=DROP, enable_bias=DROP,
                   tie_word_embeddings=DROP)
    B = opt_config(activation_function="gelu", enable_bias=False, tie_word_embeddings=True)
    C = opt_config(activation_function="gelu_new", tie_word_embeddings=False, torch_dtype="float16")
    D = opt_config(torch_dtype="bfloat16", enable_bias=True, layer_norm_elementwise_affine=True)
    E = {"architectures": ["OPTForCausalLM"], "model_type": "opt", "vocab_size": 300, "hidden_size": 32,
         "ffn_dim": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "max_position_embeddings": 64}
    small = {"emb_std": 0.005, "pos_std": 0.005, "off_std": 0.005, "lnf_std": 40.0, "lnf_mean": 0.0, "lnf_bias_std": 0.3}
    return {"A": (A, 601, small, "F32", "lmhead", False),
            "B": (B, 602, {"emb_std": 0.3, "off_std": 0.5}, "F32", "model", False),
            "C": (C, 603, {"emb_std": 0.3, "off_std": 0.5}, "F16", "lmhead", False),
            "D": (D, 604, {"emb_std": 0.3, "off_std": 0.5}, "BF16", "model", True),
            "E": (E, 605, {"emb_std": 0.3, "off_std": 0.5, "qk": 3.0}, "F32", "lmhead", False)}


NAMES = {"A": "opt-lmhead-tied-relu", "B": "opt-decoder-names-nobias-gelu", "C": "opt-untied-gelu_new-f16",
         "D": "opt-bf16-decoder-names-stored-head", "E": "opt-defaults-no-token-ids"}
GEN = {"A": [(0, 3, 30), (60, 100, 20)], "B": [(0, 4, 30), (30, 70, 20)], "C": [(30, 62, 25)],
       "D": [(10, 40, 25)], "E": [(10, 40, 25)]}
STOP_PROMPT = "Then the "


def stop_case():
    """E's config, untied and without token ids, lm_head row 2 replaced by c times the row of a token
    the base model's greedy decoding of STOP_PROMPT emits at step >= 2 (the first candidate and the
    smallest c of 1.02, 1.1, 1.3 for which greedy decoding reaches id 2 after >= 2 other tokens and
    before 258)"""
    cfg = dict(case_table()["E"][0], tie_word_embeddings=False)
    base = opt_weights(cfg, 611, emb_std=0.3, qk=3.0)
    prompt = encode(STOP_PROMPT)
    sh, v = base["lm_head.weight"]
    d = sh[1]
    g0 = OptRef(cfg, base).greedy(prompt, 30)[0]
    for t in g0[2:]:
        if t in (OPT_EOS, EOT):
            continue
        for c in (1.02, 1.1, 1.3):
            vv = list(v)
            vv[OPT_EOS * d:(OPT_EOS + 1) * d] = [f32(x * c) for x in v[t * d:(t + 1) * d]]
            T = dict(base, **{"lm_head.weight": (sh, vv)})
            toks = OptRef(cfg, T).greedy(prompt, 30)[0]
            if OPT_EOS in toks and 2 <= toks.index(OPT_EOS) and (EOT not in toks or toks.index(EOT) > toks.index(2)):
                return cfg, T, prompt, (t, c)
    return cfg, base, prompt, None


def file_tensors(T, layout, stored_head):
    F = dict(T)
    if stored_head:
        F["lm_head.weight"] = F["model.decoder.embed_tokens.weight"]
    return model_layout(F) if layout == "model" else F


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32", layout="lmhead", stored_head=False, chat_template=None):
        """T: OPTForCausalLM-named weights; layout 'model' writes OPTModel's names (decoder.)"""
        self.ck, self.tag, self.cfg = ck, tag, cfg
        write_folder(os.path.join(ck.work, tag), cfg, file_tensors(T, layout, stored_head), dtype, chat_template)
        self.T = store(T, dtype)
        self.model = OptRef(cfg, self.T)
        self.alts = {}
        p = opt_params(cfg)
        print("[%s] %s names, %s storage, layers %d, ffn_dim %d, act %s, biases %s, tied %s%s" % (
            tag, "decoder." if layout == "model" else "model.decoder.", dtype, p["L"], p["F"], p["act"], p["bias"],
            p["tied"], ", stored lm_head" if stored_head else ""), flush=True)

    def alt(self, kw):
        key = json.dumps(kw, sort_keys=True)
        if key not in self.alts:
            self.alts[key] = OptRef(self.cfg, self.T, **kw)
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
            for name, kw in alternatives(self.cfg):
                a, _ = mean_ce(self.alt(kw), wins)
                print("    alternative %-62s loss_sum %.12g%s" % (name, a, "   <-- lol matches" if abs(
                    a - got) <= max(rtol, 1e-6) * abs(a) else ""))
        return got

    def generate(self, prompt, n, dtype="float64", text=None, expect_n=None, env=None):
        ck = self.ck
        args = ["hf", "generate", self.tag, "--ids", "--no-stop", "--max-new", n, "--dtype", dtype, "--threads", 1]
        args += ["--prompt", text] if text is not None else ["--tokens", ",".join(map(str, prompt))]
        saved = {k: os.environ.get(k) for k in (env or {})}
        os.environ.update(env or {})
        try:
            r = ck.run(args)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if env:
            ck.last_cmd = " ".join("%s=%s" % kv for kv in env.items()) + " " + ck.last_cmd
        if r.returncode != 0:
            return
        m = n if expect_n is None else expect_n
        toks, gaps = self.model.greedy(prompt, m)
        got = parse_ids(r.stdout)
        what = "%s hf generate --dtype %s %s (%d prompt ids, %d new%s%s)" % (
            self.tag, dtype, "--prompt" if text is not None else "--tokens", len(prompt), m,
            "" if expect_n is None else ", --max-new %d reduced by max_position_embeddings %d" % (n, self.model.P),
            "" if not env else ", " + " ".join("%s=%s" % kv for kv in env.items()))
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

    def generate_stop(self, prompt, n, stops):
        """without --no-stop: the ids up to and including the first stop id"""
        ck = self.ck
        r = ck.run(["hf", "generate", self.tag, "--ids", "--max-new", n, "--dtype", "float64", "--threads", 1,
                    "--tokens", ",".join(map(str, prompt))])
        if r.returncode != 0:
            return
        toks = self.model.greedy(prompt, n)[0]
        k = next((j for j, t in enumerate(toks) if t in stops), None)
        if k is None:
            ck.note("%s: the reference continuation has no stop id; stop not tested" % self.tag)
        else:
            toks = toks[:k + 1]
        ck.equal("%s hf generate (stops at %s: OPTConfig's default eos_token_id 2 / the tokenizer's eos_token; "
                 "%d prompt ids)" % (self.tag, sorted(stops), len(prompt)), parse_ids(r.stdout), toks)

    def info(self):
        ck = self.ck
        r = ck.run(["hf", "info", self.tag, "--check"], expect_rc=None)
        ck.equal("%s hf info --check exits 0" % self.tag, r.returncode, 0)
        if r.returncode != 0:
            return None
        ck.equal("%s hf info names OPTForCausalLM" % self.tag, "OPTForCausalLM" in r.stdout, True)
        ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout, True)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            ck.equal("%s hf info parameters (transformers' num_parameters(), with the 2 offset rows)" % self.tag,
                     int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            ck.note("%s: hf info prints no parameter count" % self.tag)
        p = opt_params(self.cfg)
        lines = {}
        for l_ in r.stdout.splitlines():
            mm = re.match(r"(\S+(?: \S+)?)\s{2,}(.*)", l_)
            if mm:
                lines.setdefault(mm.group(1), mm.group(2))
        blk, voc, pos = lines.get("block", ""), lines.get("vocab", ""), lines.get("positions", "")
        acts = {"relu": ("relu",), "gelu": ("gelu ", "gelu,", "gelu)"),
                "gelu_new": ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"),
                "gelu_pytorch_tanh": ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"),
                "gelu_fast": ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")}[p["act"]]
        got = {"act": any(a in blk + " " for a in acts), "eps 1e-5": "1e-5" in blk or "1e-05" in blk,
               "no biases": "no biases" in blk, "tied": "tied" in voc and "untied" not in voc,
               "offset 2": "offset 2" in pos, "positions": pos.split(" ")[0]}
        ck.equal("%s hf info block / vocab / positions lines [ASSUMED format]: %r / %r / %r" % (self.tag, blk, voc, pos),
                 got, {"act": True, "eps 1e-5": True, "no biases": not p["bias"], "tied": p["tied"], "offset 2": True,
                       "positions": str(p["P"])})
        claims = (("RoPE (rope_theta / rope scaling)", r"rope_theta|rope scaling|rotary"),
                  ("RMSNorm (rms_norm_eps)", r"rms_?norm"), ("a gated MLP ('MLP gate')", r"\bgate\b"))
        wrong = [w for w, pat in claims if re.search(pat, r.stdout, re.I)]
        ck.equal("%s hf info describes OPT's layout [ASSUMED]: claims of features OPT lacks" % self.tag, wrong, [])
        return r.stdout


def refusal(ck, tag, cfg, T, needles, assumed="", dtype="F32", also=None):
    """also: (what, needles) a second check on the same message (every needle must appear)"""
    gj.refusal(ck, tag, cfg, T, needles, assumed, 2, dtype, also)


def check_cases(ck, ids):
    tab = case_table()
    W = {k: opt_weights(cfg, sd, **kw) for k, (cfg, sd, kw, _, _, _) in tab.items()}

    def mk(tag, **kw):
        cfg, _, _, dt, lay, sh = tab[tag]
        return Case(ck, NAMES[tag], cfg, W[tag], dtype=dt, layout=lay, stored_head=sh, **kw)

    c = mk("A")
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[60:100], 20)
    c.generate(ids[60:100], 20, "float32")
    c.generate(ids[60:100], 20, env={"LOL_CPU_KERNELS": "0"})
    ptext = "Then the thin thrush"
    c.generate(encode(ptext), 25, text=ptext)
    c.generate(ids[100:150], 30, expect_n=64 - 50)
    c.info()

    c = mk("B")
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:4], 30)
    c.generate(ids[30:70], 20)
    c.generate(ids[30:70], 20, "float32")
    c.info()

    c = mk("C")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.generate(ids[30:62], 25)
    c.info()

    c = mk("D")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:40], 25)
    c.info()

    c = mk("E")
    c.ppl(ids, 0)
    c.generate(ids[10:40], 25)
    c.info()

    cfgS, TS, prompt, scale = stop_case()
    if scale is None:
        ck.note("stop case: no scale of lm_head row 2 reaches id 2; stop not tested")
    else:
        c = Case(ck, "opt-stop-at-default-eos", cfgS, TS)
        c.generate_stop(prompt, 30, {OPT_EOS, EOT})
    return W


def check_configs(ck):
    """facebook/opt-125m's config.json: hf bench (random weights) reports num_parameters();
    opt-350m's is refused naming word_embed_proj_dim / do_layer_norm_before"""
    print("[opt-125m / opt-350m config.json]", flush=True)
    for name, cfg in (("opt-125m", opt125m_config()), ("opt-350m", opt350m_config())):
        with open(os.path.join(ck.work, name + ".json"), "w") as f:
            json.dump(cfg, f, indent=1)
    r = ck.run(["hf", "bench", "opt-125m.json", "--context", 2, "--new", 1, "--threads", 1, "--json"])
    if r.returncode == 0:
        try:
            res = json.loads(r.stdout)
        except ValueError:
            res = {}
        ck.equal("facebook/opt-125m config.json: hf bench --json parameters (docs: 125,239,296)",
                 res.get("parameters"), param_count(opt125m_config()))
    r = ck.run(["hf", "bench", "opt-350m.json", "--context", 2, "--new", 1, "--threads", 1], expect_rc=None)
    ck.compared += 1
    if r.returncode != 2 or not any(n in r.stderr for n in ("word_embed_proj_dim", "do_layer_norm_before")):
        ck.fail("facebook/opt-350m config.json (post-norm, word_embed_proj_dim 512): expected exit 2 naming "
                "word_embed_proj_dim or do_layer_norm_before; got exit %d, %r" % (r.returncode, r.stderr.strip()[-300:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("opt-350m config refused (exit 2)", r.stderr.strip()[:160]))


def check_refusals(ck, ids):
    print("[refusals]", flush=True)
    base = opt_config()
    Ts = opt_weights(base, 7)
    D = "model.decoder."
    refusal(ck, "refuse-post-norm", dict(base, do_layer_norm_before=False), Ts, ["do_layer_norm_before"])
    # opt-350m's shape: embed_tokens [V, 16], project_in [32, 16], project_out [16, 32]
    T = dict(Ts)
    rng = random.Random(3)
    T[D + "embed_tokens.weight"] = ([300, 16], [f32(rng.gauss(0, 0.3)) for _ in range(300 * 16)])
    T[D + "project_in.weight"] = ([32, 16], [f32(rng.gauss(0, 0.3)) for _ in range(32 * 16)])
    T[D + "project_out.weight"] = ([16, 32], [f32(rng.gauss(0, 0.3)) for _ in range(16 * 32)])
    refusal(ck, "refuse-word_embed_proj_dim", dict(base, word_embed_proj_dim=16), T, ["word_embed_proj_dim"])
    T = {k: v for k, v in Ts.items() if not k.startswith(D + "final_layer_norm")}
    refusal(ck, "refuse-remove-final-layer-norm", dict(base, _remove_final_layer_norm=True), T,
            ["_remove_final_layer_norm"])
    T = {k: v for k, v in Ts.items() if "layer_norm" not in k}
    refusal(ck, "refuse-no-elementwise-affine", dict(base, layer_norm_elementwise_affine=False), T,
            ["layer_norm_elementwise_affine"])
    refusal(ck, "refuse-silu", dict(base, activation_function="silu"), Ts, ["activation_function"])
    refusal(ck, "refuse-quick_gelu", dict(base, activation_function="quick_gelu"), Ts, ["activation_function"])
    refusal(ck, "refuse-quantization_config", dict(base, quantization_config={"quant_method": "bitsandbytes"}), Ts,
            ["quantization_config"])
    refusal(ck, "refuse-missing-ffn_dim", opt_config(ffn_dim=DROP), Ts, ["ffn_dim"])
    c36 = opt_config(hidden_size=36, word_embed_proj_dim=36)
    refusal(ck, "refuse-head_dim-odd", c36, opt_weights(c36, 7), ["num_attention_heads", "hidden_size", "head_dim"])
    sh, v = Ts[D + "embed_positions.weight"]
    T = dict(Ts)
    T[D + "embed_positions.weight"] = ([sh[0] - 2, sh[1]], v[2 * sh[1]:])
    refusal(ck, "refuse-positions-without-offset-rows", base, T, ["embed_positions"])
    T = dict(Ts)
    T[D + "embed_positions.weight"] = ([sh[0] - 1, sh[1]], v[sh[1]:])
    refusal(ck, "refuse-positions-one-offset-row", base, T, ["embed_positions"])
    T = dict(Ts)
    del T[D + "layers.1.fc2.bias"]
    refusal(ck, "refuse-missing-fc2-bias", base, T, ["layers.1.fc2.bias"])
    T = model_layout(Ts)
    del T["decoder.layers.0.self_attn_layer_norm.weight"]
    refusal(ck, "refuse-missing-ln-decoder-names", base, T, ["layers.0.self_attn_layer_norm.weight"])
    T = dict(Ts)
    del T[D + "final_layer_norm.bias"]
    refusal(ck, "refuse-missing-final-ln-bias", base, T, ["decoder.final_layer_norm.bias"])
    T = dict(Ts)
    del T[D + "embed_positions.weight"]
    refusal(ck, "refuse-missing-embed_positions", base, T, ["embed_positions.weight"],
            also=("the message's shape is the one the file must hold, [max_position_embeddings + 2, hidden_size] "
                  "(docs/hf.md OPT: 'naming its expected [max_position_embeddings + 2, hidden_size]')", ["[66, 32]"]))
    cu = dict(base, tie_word_embeddings=False)
    refusal(ck, "refuse-untied-no-lm_head", cu, Ts, ["lm_head.weight"])
    T = dict(Ts)
    sh_e, v_e = Ts[D + "embed_tokens.weight"]
    T["lm_head.weight"] = (sh_e, [x * 0.5 for x in v_e])
    refusal(ck, "refuse-tied-lm_head-differs", base, T, ["lm_head.weight"],
            " (ASSUMED: a stored lm_head differing from embed_tokens under tie_word_embeddings is refused, as GPT-2's)")
    T = dict(Ts)
    sh, v = T[D + "layers.0.fc1.weight"]
    T[D + "layers.0.fc1.weight"] = ([sh[1], sh[0]], v)
    refusal(ck, "refuse-fc1-transposed", base, T, ["layers.0.fc1.weight"],
            also=("the message names OPT's config fields that set the shape (docs/hf.md 'Weights': 'the message "
                  "names the config fields that set the shape'): ffn_dim, hidden_size", ["ffn_dim", "hidden_size"]))
    # enable_bias false with the biases in the file: transformers ignores the unexpected keys
    nb = dict(base, enable_bias=False)
    tag = "opt-enable_bias-false-biases-stored"
    write_folder(os.path.join(ck.work, tag), nb, Ts)
    out = os.path.join(ck.work, "ppl_%s.json" % tag)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", out,
                "--threads", 1], expect_rc=None)
    wins = windows(ids, 64)
    if r.returncode == 2:
        ck.equal("%s: refused naming a stored bias tensor" % tag, bool(re.search(r"_proj\.bias|fc[12]\.bias",
                                                                                 r.stderr)), True)
        ck.note("%s: lol refuses the stored biases (transformers would ignore them): %s" % (tag, r.stderr.strip()[:160]))
    elif r.returncode == 0:
        want, _ = mean_ce(OptRef(nb, Ts), wins)
        got = json.load(open(out)).get("loss_sum")
        ok = ck.close("%s: accepted; hf ppl float64 loss_sum = the bias-free function (transformers ignores the "
                      "biases)" % tag, got, want, TOL["float64"])
        if not ok:
            withb, _ = mean_ce(OptRef(base, Ts), wins)
            print("    with the stored biases applied: %.12g%s" % (withb, "   <-- lol matches" if abs(
                withb - got) < 1e-6 * abs(withb) else ""))
    else:
        ck.fail("%s: exit %d, %r" % (tag, r.returncode, r.stderr.strip()[-300:]))
    # a window longer than max_position_embeddings [ASSUMED refused]
    r = ck.run(["hf", "ppl", NAMES["A"], "--data", "text.txt", "--context", 100, "--threads", 1], expect_rc=None)
    ck.compared += 1
    if r.returncode != 2 or not re.search(r"context|max_position", r.stderr):
        ck.fail("hf ppl --context 100 > max_position_embeddings 64 [ASSUMED refused]: expected exit 2 naming "
                "--context; got exit %d, %r" % (r.returncode, r.stderr.strip()[-300:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("--context 100 > max_position_embeddings refused (exit 2)", r.stderr.strip()[:120]))


# ---------------------------------------------------------------- export of trained models
EXPORT_BASE = {"architecture": "dense", "n_layers": 2, "d_model": 32, "n_heads": 4, "n_kv_heads": 4,
               "ffn_hidden": 64, "max_seq_len": 64, "norm": "layernorm", "mlp": "plain", "positions": "learned",
               "activation": "relu", "qkv_bias": True, "o_bias": True, "mlp_bias": True,
               "tie_word_embeddings": True, "norm_eps": 1e-5}
EXPORT_MODELS = {
    "export-opt-relu-bias-tied": dict(EXPORT_BASE),
    "export-opt-gelu-nobias-untied": dict(EXPORT_BASE, activation="gelu", qkv_bias=False, o_bias=False,
                                          mlp_bias=False, tie_word_embeddings=False)}


def opt_expected_from_checkpoint(S, m):
    """the OPTForCausalLM tensors an export of checkpoint S (lol's dense names) must hold"""
    L = m["n_layers"]
    D = "model.decoder."
    ren = {"model.embed_tokens.weight": D + "embed_tokens.weight", "lm_head.weight": "lm_head.weight",
           "model.norm.weight": D + "final_layer_norm.weight", "model.norm.bias": D + "final_layer_norm.bias"}
    for i in range(L):
        a, b = "model.layers.%d." % i, D + "layers.%d." % i
        for y in ("weight", "bias"):
            ren[a + "input_layernorm." + y] = b + "self_attn_layer_norm." + y
            ren[a + "post_attention_layernorm." + y] = b + "final_layer_norm." + y
            for x in "qkv":
                ren[a + "self_attn.%s_proj.%s" % (x, y)] = b + "self_attn.%s_proj.%s" % (x, y)
            ren[a + "self_attn.o_proj." + y] = b + "self_attn.out_proj." + y
            ren[a + "mlp.up_proj." + y] = b + "fc1." + y
            ren[a + "mlp.down_proj." + y] = b + "fc2." + y
    want, extra = {}, []
    for k, (sh, v, _) in S.items():
        if k == "model.embed_positions.weight":
            want[D + "embed_positions.weight"] = ([sh[0] + 2, sh[1]], [0.0] * (2 * sh[1]) + list(v))
        elif k in ren:
            want[ren[k]] = (list(sh), list(v))
        else:
            extra.append(k)
    return want, extra


def check_export(ck):
    w = ck.work
    print("[export] dense models of GPT-2's layout with the ReLU / without biases -> OPTForCausalLM", flush=True)
    with open(os.path.join(w, "train.txt"), "w", encoding="utf-8") as f:
        f.write((TEXT + "\n\n") * 6)
    shutil.rmtree(os.path.join(w, "data_byte"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "train.txt", "--tokenizer", "byte", "--out", "data_byte", "--valid-fraction", 0,
                "--no-progress"])
    if r.returncode != 0:
        return
    ids = list(TEXT.encode("utf-8"))  # lol's byte tokenizer: id = byte
    wins = windows(ids, 64)
    for tag, m in EXPORT_MODELS.items():
        run = gj.train_run(ck, tag, m, 3)
        if run is None:
            continue
        ckpt = os.path.join(w, run, open(os.path.join(w, run, "latest")).read().strip())
        S = read_st(os.path.join(ckpt, "model.safetensors"))
        want_t, extra = opt_expected_from_checkpoint(S, m)
        ck.equal("%s: checkpoint tensors with no OPT counterpart" % tag, extra, [])
        for arch in (None, "opt"):
            out = tag + ("-arch-opt" if arch else "-default-arch")
            shutil.rmtree(os.path.join(w, out), ignore_errors=True)
            r = ck.run(["export", "--hf", run, "--out", out] + (["--arch", arch] if arch else []))
            if r.returncode != 0:
                continue
            what = "%s: lol export --hf %s" % (tag, "--arch opt" if arch else "(default --arch)")
            cfg = json.load(open(os.path.join(w, out, "config.json")))
            ck.equal(what + ": architectures / model_type", (cfg.get("architectures"), cfg.get("model_type")),
                     (["OPTForCausalLM"], "opt"))
            try:
                p = opt_params(cfg)
            except (KeyError, TypeError) as e:
                ck.fail("%s: config.json unreadable as OPTConfig: %r" % (what, e))
                continue
            keys = ("V", "d", "L", "H", "P", "F", "act", "bias", "tied", "pre", "wep", "final_ln", "affine")
            got = {k: p[k] for k in keys}
            V = S["model.embed_tokens.weight"][0][0]
            want = {"V": V, "d": m["d_model"], "L": m["n_layers"], "H": m["n_heads"], "P": m["max_seq_len"],
                    "F": m["ffn_hidden"], "act": m["activation"], "bias": m["qkv_bias"],
                    "tied": m["tie_word_embeddings"], "pre": True, "wep": m["d_model"], "final_ln": True,
                    "affine": True}
            ck.equal(what + ": config.json read as OPTConfig (defaults for absent keys)", got, want)
            E = {k: (list(v[0]), list(v[1])) for k, v in q2.read_folder_weights(os.path.join(w, out)).items()}
            wt = dict(want_t)
            if m["tie_word_embeddings"] and "lm_head.weight" in E:
                ck.note("%s writes lm_head.weight for a tied model" % what)
                wt["lm_head.weight"] = wt["model.decoder.embed_tokens.weight"]
            ck.equal(what + ": tensor names (OPTForCausalLM's)", sorted(E), sorted(wt))
            ck.equal(what + ": tensors = the checkpoint's renamed bit for bit, 2 zero rows before the position "
                     "table (names differing)", sorted(k for k in wt if k in E and E[k] != wt[k]), [])
            try:
                model = OptRef(cfg, E)
            except (KeyError, AssertionError) as e:
                ck.fail("%s: the exported tensors do not form an OPTForCausalLM: %r" % (what, e))
                continue
            tot, cnt = mean_ce(model, wins)
            res = os.path.join(w, "ppl_%s.json" % out)
            r = ck.run(["hf", "ppl", out, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", res,
                        "--threads", 1])
            if r.returncode == 0:
                j = json.load(open(res))
                ck.equal(what + ": hf ppl --context 64 targets", j.get("targets"), cnt)
                ck.close(what + ": hf ppl --dtype float64 loss_sum = this reference on the exported tensors",
                         j.get("loss_sum"), tot, TOL["float64"])
    # GPT-2's layout with the tanh GELU and every bias: the default stays GPT2LMHeadModel
    tag = "export-gpt2-layout-default"
    run = gj.train_run(ck, tag, dict(EXPORT_BASE, n_layers=1, activation="gelu_pytorch_tanh"), 1)
    if run is not None:
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", tag])
        if r.returncode == 0:
            ck.equal("%s: GPT-2's layout with the tanh GELU and all biases: default architectures" % tag,
                     json.load(open(os.path.join(w, tag, "config.json"))).get("architectures"), ["GPT2LMHeadModel"])
    # models OPTForCausalLM cannot hold: --arch opt refused naming the field, nothing left
    b1 = dict(EXPORT_BASE, n_layers=1)
    llama = {k: b1[k] for k in ("architecture", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden",
                                "max_seq_len", "tie_word_embeddings")}
    for tag, model, needles, assumed in (
            ("export-opt-refuse-gqa", dict(b1, n_kv_heads=2), ["n_kv_heads", "key/value", "grouped"], ""),
            ("export-opt-refuse-parallel", dict(b1, parallel_residual=True), ["parallel_residual", "parallel"], ""),
            ("export-opt-refuse-some-biases", dict(b1, o_bias=False), ["o_bias", "qkv_bias", "mlp_bias", "bias"], ""),
            ("export-opt-refuse-lm_head_bias", dict(b1, lm_head_bias=True, tie_word_embeddings=False),
             ["lm_head_bias", "lm_head.bias"], ""),
            ("export-opt-refuse-rope", dict(b1, positions="rope"), ["positions", "rope", "RoPE"],
             " (ASSUMED: OPT has learned positions only)"),
            ("export-opt-refuse-norm_eps", dict(b1, norm_eps=1e-3), ["norm_eps", "eps"],
             " (ASSUMED: OPT's LayerNorms are nn.LayerNorm's 1e-5, OPTConfig has no epsilon)"),
            ("export-opt-refuse-rmsnorm-gated", llama, ["norm", "mlp", "gate", "RMSNorm", "rmsnorm"], ""),
            ("export-opt-refuse-sliding", dict(b1, attention="sliding", window=16), ["attention", "window", "sliding"],
             " (ASSUMED: OPT attends to every earlier token)"),
            ("export-opt-refuse-head_dim", dict(b1, head_dim=16), ["head_dim"],
             " (ASSUMED: OPT's head_dim is hidden_size / num_attention_heads)"),
            ("export-opt-refuse-scale_embeddings", dict(b1, scale_embeddings=True), ["scale_embeddings"],
             " (ASSUMED: OPT does not scale its embeddings)"),
            ("export-opt-refuse-final_logit_softcap", dict(b1, final_logit_softcap=30.0), ["softcap"],
             " (ASSUMED: OPT has no soft-capping)"),
            ("export-opt-refuse-qk_norm", dict(b1, qk_norm=True), ["qk_norm"],
             " (ASSUMED: OPT has no q/k norms)")):
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        run = gj.train_run(ck, tag, model, 1)
        if run is None:
            ck.note("%s: lol train refused the dense config; the export refusal not tested" % tag)
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "opt"], expect_rc=None)
        ck.compared += 1
        left = os.path.exists(os.path.join(w, tag))
        if r.returncode != 2 or not any(n in r.stderr for n in needles) or left:
            ck.fail("%s%s: expected exit 2 naming %s and no %s folder left; got exit %d (folder left: %s), %r" % (
                tag, assumed, " or ".join(needles), tag, r.returncode, left, r.stderr.strip()[-300:]))
            if r.returncode == 0 and "norm_eps" in model and os.path.exists(os.path.join(w, tag, "config.json")):
                try:  # what the silent export costs: the folder as OPT reads it (1e-5) against the trained eps
                    cfg = json.load(open(os.path.join(w, tag, "config.json")))
                    E = {k: (list(v[0]), list(v[1])) for k, v in q2.read_folder_weights(os.path.join(w, tag)).items()}
                    bw = windows(list(TEXT.encode("utf-8")), 64)
                    a_, _ = mean_ce(OptRef(cfg, E), bw)
                    b_, _ = mean_ce(OptRef(cfg, E, eps=model["norm_eps"]), bw)
                    print("    the exported folder as OPTConfig reads it (LayerNorm eps 1e-5): loss_sum %.10g; the "
                          "trained model (norm_eps %g) on the same tensors: %.10g (relative %.1e); config.json keys "
                          "mentioning eps: %s" % (a_, model["norm_eps"], b_, abs(a_ - b_) / abs(b_),
                                                  [k for k in cfg if "eps" in k]))
                except (KeyError, AssertionError, OSError, ValueError) as e:
                    print("    (the exported folder could not be read: %r)" % (e,))
        elif ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


# ---------------------------------------------------------------- LayerRoute on OPT bases
def opt_modules(cfg):
    """OPTForCausalLM's named_modules() (as PEFT walks them; ASSUMED from transformers' code as
    remembered): path -> (out_features, in_features) of each nn.Linear, None for the others"""
    p = opt_params(cfg)
    d, F, L = p["d"], p["F"], p["L"]
    mods = {k: None for k in ("model", "model.decoder", "model.decoder.embed_tokens",
                              "model.decoder.embed_positions", "model.decoder.final_layer_norm",
                              "model.decoder.layers")}
    mods["lm_head"] = (p["V"], d)
    for i in range(L):
        b = "model.decoder.layers.%d" % i
        for k in ("", ".self_attn", ".activation_fn", ".self_attn_layer_norm", ".final_layer_norm"):
            mods[b + k] = None
        for x in ("q_proj", "k_proj", "v_proj", "out_proj"):
            mods[b + ".self_attn." + x] = (d, d)
        mods[b + ".fc1"] = (F, d)
        mods[b + ".fc2"] = (d, F)
    return mods


LOL_TO_OPT = {"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj", "v_proj": "self_attn.v_proj",
              "o_proj": "self_attn.out_proj", "up_proj": "fc1", "down_proj": "fc2"}


def fold_lora_tensors(T, St, sc):
    """T (OPTForCausalLM names) with the PEFT tensors St folded in float64: W + sc B A"""
    F = {k: (list(v[0]), list(v[1])) for k, v in canonical(T).items()}
    touched = []
    for k in sorted(St):
        if not k.endswith(".lora_A.weight"):
            continue
        m = re.fullmatch(r"base_model\.model\.(model\.decoder\.layers\.\d+\.(?:self_attn\.(?:q|k|v|out)_proj|fc1|fc2))"
                         r"\.lora_A\.weight", k)
        if not m:
            raise KeyError("adapter tensor %s is not PEFT's name of an OPTForCausalLM projection" % k)
        name = m.group(1) + ".weight"
        ba = q2.matmul(q2.mat(St[k.replace("lora_A", "lora_B")]), q2.mat(St[k]))
        shape, vals = F[name]
        c = shape[1]
        F[name] = (shape, [v + sc * ba[i // c][i % c] for i, v in enumerate(vals)])
        touched.append(name)
    return F, touched


def fold_lora(T, adapter):
    lj = json.load(open(os.path.join(adapter, "layerroute.json")))
    sc = lj["lora"]["alpha"] / lj["lora"]["rank"]
    return fold_lora_tensors(T, read_st(os.path.join(adapter, "adapter_model.safetensors")), sc)


def random_opt_lora(cfg, seed, rank=4, mods=("self_attn.q_proj", "self_attn.out_proj", "fc1", "fc2")):
    rng = random.Random(seed)
    lin = opt_modules(cfg)
    St = {}
    for i in range(opt_params(cfg)["L"]):
        for x in mods:
            path = "model.decoder.layers.%d.%s" % (i, x)
            out, inn = lin[path]
            St["base_model.model.%s.lora_A.weight" % path] = (
                [rank, inn], [f32(rng.gauss(0, 1.0 / math.sqrt(inn))) for _ in range(rank * inn)], "F32")
            St["base_model.model.%s.lora_B.weight" % path] = (
                [out, rank], [f32(rng.gauss(0, 0.15)) for _ in range(out * rank)], "F32")
    return St


def merged_against_source(ck, what, mc, mT, src_cfg, src_T, zero_offset=True):
    """the merged folder's config (as OPTConfig reads it) and tensors against the source's; returns the
    expected tensors (OPTForCausalLM names, offset rows zeroed)"""
    ck.equal(what + ": architectures / model_type", (mc.get("architectures"), mc.get("model_type")),
             (["OPTForCausalLM"], "opt"))
    keys = ("V", "d", "L", "H", "P", "F", "act", "bias", "tied", "pre", "wep", "final_ln", "affine")
    try:
        pm = opt_params(mc)
        ck.equal(what + ": config.json read as OPTConfig = the source's", {k: pm[k] for k in keys},
                 {k: opt_params(src_cfg)[k] for k in keys})
    except (KeyError, TypeError) as e:
        ck.fail("%s: config.json unreadable as OPTConfig: %r" % (what, e))
    want = {k: (list(v[0]), list(v[1])) for k, v in canonical(src_T).items()}
    if zero_offset:
        k = "model.decoder.embed_positions.weight"
        sh, v = want[k]
        want[k] = (sh, [0.0] * (2 * sh[1]) + v[2 * sh[1]:])
    if "lm_head.weight" in mT and "lm_head.weight" not in want and opt_params(src_cfg)["tied"]:
        ck.note("%s writes lm_head.weight for a tied model" % what)
        want["lm_head.weight"] = want["model.decoder.embed_tokens.weight"]
    if opt_params(src_cfg)["tied"] and "lm_head.weight" in want and "lm_head.weight" not in mT:
        del want["lm_head.weight"]
    ck.equal(what + ": tensor names (OPTForCausalLM's)", sorted(mT), sorted(want))
    return want


def check_layerroute(ck, ids, W):
    w = ck.work
    print("[layerroute] adapters on OPT bases: PEFT's files, merge", flush=True)
    with open(os.path.join(w, "lr_opt.jsonl"), "w") as f:
        for s_ in gj.LR_SAMPLES:
            f.write(json.dumps(s_) + "\n")
    wins = windows(ids, 64)
    train = ["--data", "lr_opt.jsonl", "--batch", 2, "--accum", 1, "--system", "", "--max-len", 64, "--rank", 4,
             "--threads", 1, "--no-progress"]

    def fresh(*names):
        for n in names:
            shutil.rmtree(os.path.join(w, n), ignore_errors=True)

    # 1. a zero LoRA on case D's model (BF16, decoder. names + stored head, random offset rows)
    cfgD, _, _, dtD, layD, shD = case_table()["D"]
    TD = store(W["D"], dtD)
    base = "lr-base-opt-bf16"
    fresh(base, "lr-zero", "lr-zero-merged")
    write_folder(os.path.join(w, base), cfgD, file_tensors(W["D"], layD, shD), dtD, gj.CHAT_TEMPLATE)
    src = OptRef(cfgD, TD)
    src_loss, _ = mean_ce(src, wins)
    r = ck.run(["layerroute", "train", "--base", base, "--out", "lr-zero", "--steps", 2, "--lr", 0,
                "--targets", "q_proj,o_proj,down_proj"] + train)
    if r.returncode == 0:
        gj.check_peft_files(ck, "lr-zero (decoder.-named base; targets q_proj,o_proj,down_proj) adapter files",
                            os.path.join(w, "lr-zero"), opt_modules(cfgD), "OPTForCausalLM",
                            ["model.decoder.layers.%d.%s" % (i, x) for i in range(cfgD["num_hidden_layers"])
                             for x in ("self_attn.q_proj", "self_attn.out_proj", "fc2")])
        r = ck.run(["layerroute", "merge", "--adapter", "lr-zero", "--out", "lr-zero-merged"])
        if r.returncode == 0:
            what = "layerroute merge of a zero LoRA on %s (default --arch)" % base
            mc = json.load(open(os.path.join(w, "lr-zero-merged", "config.json")))
            mT = {k: (list(v[0]), list(v[1])) for k, v in
                  q2.read_folder_weights(os.path.join(w, "lr-zero-merged")).items()}
            want = merged_against_source(ck, what, mc, mT, cfgD, TD)
            ck.equal(what + ": tensors = the source's bit for bit, offset rows 0 and 1 zero (names differing)",
                     sorted(k for k in want if k in mT and mT[k] != want[k]), [])
            try:
                model = OptRef(mc, mT)
                a_, _ = mean_ce(model, wins)
                ck.close(what + ": the merged folder's function = the source's (loss_sum)", a_, src_loss, 1e-10)
            except (KeyError, AssertionError) as e:
                ck.fail("%s: not an OPTForCausalLM: %r" % (what, e))
            res = os.path.join(w, "ppl_lr-zero-merged.json")
            r = ck.run(["hf", "ppl", "lr-zero-merged", "--data", "text.txt", "--context", 64, "--dtype", "float64",
                        "--out", res, "--threads", 1])
            if r.returncode == 0:
                ck.close(what + ": hf ppl --dtype float64 loss_sum = the source's", json.load(open(res)).get(
                    "loss_sum"), src_loss, TOL["float64"])
    # (informative) lol export --hf on a Hugging Face folder
    fresh("export-of-hf-folder")
    r = ck.run(["export", "--hf", base, "--out", "export-of-hf-folder"], expect_rc=None)
    ck.note("lol export --hf %s (a Hugging Face folder, not a checkpoint): exit %d%s" % (
        base, r.returncode, (", " + r.stderr.strip().splitlines()[-1][:160]) if r.stderr.strip() else ""))

    # 2. a trained LoRA on every target of a model.decoder.-named base with zero offset rows
    cfg = opt_config(num_hidden_layers=2, ffn_dim=64)
    T = opt_weights(cfg, 621, emb_std=0.3, off_std=0)
    base = "lr-base-opt"
    fresh(base, "lr-all", "lr-all-merged")
    write_folder(os.path.join(w, base), cfg, T, "F32", gj.CHAT_TEMPLATE)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"]
    r = ck.run(["layerroute", "train", "--base", base, "--out", "lr-all", "--steps", 3, "--lr", 0.01, "--alpha", 8,
                "--targets", ",".join(targets)] + train)
    if r.returncode != 0:
        return
    adapter = os.path.join(w, "lr-all")
    gj.check_peft_files(ck, "lr-all (targets %s, alpha 8) adapter files" % ",".join(targets), adapter,
                        opt_modules(cfg), "OPTForCausalLM",
                        ["model.decoder.layers.%d.%s" % (i, LOL_TO_OPT[x]) for i in range(cfg["num_hidden_layers"])
                         for x in targets])
    try:
        Fd, touched = fold_lora(T, adapter)
    except (KeyError, OSError, ValueError) as e:
        ck.fail("lr-all: the adapter could not be read as PEFT's on OPTForCausalLM: %r" % (e,))
        return
    adapted = OptRef(cfg, Fd)
    r = ck.run(["layerroute", "merge", "--adapter", "lr-all", "--out", "lr-all-merged"])
    if r.returncode == 0:
        what = "layerroute merge of a LoRA on q/k/v/o/up/down_proj"
        mc = json.load(open(os.path.join(w, "lr-all-merged", "config.json")))
        mT = {k: (list(v[0]), list(v[1])) for k, v in q2.read_folder_weights(os.path.join(w, "lr-all-merged")).items()}
        want = merged_against_source(ck, what, mc, mT, cfg, T)
        ck.equal(what + ": untouched tensors bit for bit (names differing)",
                 sorted(k for k in want if k not in touched and k in mT and mT[k] != want[k]), [])
        worst, wname = 0.0, None
        for k in touched:
            if k in mT:
                scale = max(abs(v) for v in Fd[k][1]) or 1.0
                e = max(abs(a - b) for a, b in zip(mT[k][1], Fd[k][1])) / scale
                if e > worst:
                    worst, wname = e, k
        ck.close(what + ": folded tensors = PEFT's W + alpha/r B A, max |merged - float64 fold| / max |W'| "
                 "(worst %s)" % wname, worst, 0.0, 0, 1e-6)
        base_dev = max(max(abs(a - b) for a, b in zip(Fd[k][1], T[k][1])) for k in touched)
        ck.equal(what + ": (reference) the trained LoRA moves the folded weights (max |B A| sc %.2e > 1e-5)"
                 % base_dev, base_dev > 1e-5, True)
        try:
            mref = OptRef(mc, mT)
            a_, _ = mean_ce(mref, wins)
            b_, _ = mean_ce(adapted, wins)
            ck.close(what + ": the merged folder's loss_sum = the adapted model's (float32 rounding of the fold)",
                     a_, b_, 1e-6)
            res = os.path.join(w, "ppl_lr-all-merged.json")
            r = ck.run(["hf", "ppl", "lr-all-merged", "--data", "text.txt", "--context", 64, "--dtype", "float64",
                        "--out", res, "--threads", 1])
            if r.returncode == 0:
                ck.close(what + ": hf ppl --dtype float64 loss_sum = this reference on the merged tensors",
                         json.load(open(res)).get("loss_sum"), a_, TOL["float64"])
        except (KeyError, AssertionError) as e:
            ck.fail("%s: not an OPTForCausalLM: %r" % (what, e))
    for prompt, n in ((ids[:6], 20), (ids[60:90], 20)):
        r = ck.run(["layerroute", "generate", "--adapter", "lr-all", "--gates", "open", "--tokens",
                    ",".join(map(str, prompt)), "--ids", "--no-stop", "--max-new", n, "--threads", 1])
        if r.returncode != 0:
            continue
        got = parse_ids(r.stdout)
        toks, gaps = adapted.greedy(prompt, n)
        nf = len(ck.failures)
        compare_greedy(ck, "lr-all layerroute generate --gates open (%d prompt ids, %d new): the adapted model"
                       % (len(prompt), n), got, toks, gaps, True)
        if len(ck.failures) > nf:
            print("    reference %s\n    lol       %s\n    base model (no LoRA) %s" % (
                toks, got, OptRef(cfg, T).greedy(prompt, n)[0]))


# ---------------------------------------------------------------- check
def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    r = ck.run(["hf", "--help"], expect_rc=None)
    if "OPT" not in r.stdout + r.stderr:
        ck.note("lol hf --help does not mention OPT")
    W = check_cases(ck, ids)
    check_configs(ck)
    check_refusals(ck, ids)
    check_export(ck)
    check_layerroute(ck, ids, W)
    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


# ---------------------------------------------------------------- selftest
def selftest_peft(cfg):
    """check_peft_files on documented PEFT files (gptj_reference.selftest_peft_files' variants) and on
    files naming lol's own targets (o_proj / up_proj / down_proj: OPTForCausalLM has none)"""
    St = random_opt_lora(cfg, 31, mods=("self_attn.q_proj", "self_attn.out_proj", "fc1", "fc2"))
    want = ["model.decoder.layers.%d.%s" % (i, x) for i in range(cfg["num_hidden_layers"])
            for x in ("self_attn.q_proj", "self_attn.out_proj", "fc1", "fc2")]
    tm = ["q_proj", "out_proj", "fc1", "fc2"]
    bad = gj.selftest_peft_files(opt_modules(cfg), "OPTForCausalLM", St, tm, 4, 8, want)
    with tempfile.TemporaryDirectory() as d:
        write_st(os.path.join(d, "adapter_model.safetensors"), St)
        json.dump({"lora": {"rank": 4, "alpha": 8}, "peft_architecture": "OPTForCausalLM"},
                  open(os.path.join(d, "layerroute.json"), "w"))
        for name, t_ in (("lol's names o_proj / up_proj / down_proj", ["q_proj", "o_proj", "up_proj", "down_proj"]),
                         ("self_attn.o_proj for out_proj", ["q_proj", "self_attn.o_proj", "fc1", "fc2"]),
                         ("a regex over the layers", r"model\.decoder\.layers\.\d+\.(self_attn\.(q_proj|out_proj)|fc1|fc2)")):
            json.dump({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": t_, "fan_in_fan_out": False,
                       "bias": "none"}, open(os.path.join(d, "adapter_config.json"), "w"))
            t = gj._Tally()
            gj.check_peft_files(t, "selftest", d, opt_modules(cfg), "OPTForCausalLM", want)
            print("  selftest: check_peft_files on %-48s %d of %d comparisons fail" % (name, len(t.failed), t.compared))
            if (name.startswith("a regex")) != (not t.failed):
                bad.append("check_peft_files on %s: %s" % (name, t.failed))
    # the fold = the low-rank path on one q_proj row (x A^T B^T sc added to x W^T)
    T = opt_weights(cfg, 5)
    F, touched = fold_lora_tensors(T, St, 2.0)
    if len(touched) != 4 * cfg["num_hidden_layers"]:
        bad.append("fold touched %d tensors" % len(touched))
    k = "model.decoder.layers.1.self_attn.q_proj"
    A_ = q2.mat(St["base_model.model.%s.lora_A.weight" % k])
    B_ = q2.mat(St["base_model.model.%s.lora_B.weight" % k])
    Wm = q2.mat(T[k + ".weight"])
    Fm = q2.mat(F[k + ".weight"])
    x = [0.1 * j - 1.0 for j in range(len(Wm[0]))]
    ax = matvec(A_, x)
    lowrank = [a + 2.0 * b for a, b in zip(matvec(Wm, x), matvec(B_, ax))]
    if max(abs(a - b) for a, b in zip(lowrank, matvec(Fm, x))) > 1e-12:
        bad.append("fold != low-rank path")
    ids = encode(TEXT)
    l0, _ = mean_ce(OptRef(cfg, T), windows(ids[:64], 64))
    l1, _ = mean_ce(OptRef(cfg, F), windows(ids[:64], 64))
    print("  selftest: a random LoRA fold moves the loss by %.2e relative" % (abs(l1 - l0) / l0))
    if abs(l1 - l0) < 1e-3 * l0:
        bad.append("the random LoRA hardly moves the loss")
    return bad


def selftest():
    t0 = time.time()
    bad = []
    ids = encode(TEXT)
    print("  selftest: text %d ids, %d bytes" % (len(ids), len(TEXT.encode())))
    for x in (-3.0, -1.0, 0.5, 2.0):
        if abs(g2.gelu_fast(x) - g2.gelu_tanh(x)) > 1e-10:
            bad.append("gelu_fast != gelu_new at %g" % x)
    if abs(g2.gelu_exact(1.0) - 0.8413447460685429) > 1e-12 or g2.relu(-0.5) != 0.0 or g2.relu(0.5) != 0.5:
        bad.append("activation values")
    # facebook/opt-125m (docs/hf.md: 125,239,296)
    if param_count(opt125m_config()) != 125239296:
        bad.append("opt-125m param count %d" % param_count(opt125m_config()))
    tab = case_table()
    for tag, (cfg, sd, wkw, _, _, _) in tab.items():
        n = sum(len(v[1]) for v in opt_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    want = {"A": ("relu", True, True, 80, 258), "B": ("gelu", False, True, 64, 258),
            "C": ("gelu_new", True, False, 64, 258), "D": ("relu", True, True, 64, 258),
            "E": ("relu", True, True, 128, 2)}
    for tag, w_ in want.items():
        p = opt_params(tab[tag][0])
        got = (p["act"], p["bias"], p["tied"], p["F"], p["eos"])
        if got != w_ or not (p["pre"] and p["final_ln"] and p["affine"] and p["wep"] == p["d"]):
            bad.append("case %s read as %s, not %s" % (tag, got, w_))
    y = layernorm([1.0, 2.0, 4.0, 7.0], [1.0] * 4, [0.0] * 4, 0.0)
    if abs(sum(y)) > 1e-12 or abs(sum(v * v for v in y) / 4 - 1) > 1e-12:
        bad.append("layernorm")
    # both name layouts (and a stored equal head) give the same model
    cfg, sd, wkw, _, _, _ = tab["D"]
    TD = opt_weights(cfg, sd, **wkw)
    a = OptRef(cfg, TD).prefill(ids[:20])[0]
    b = OptRef(cfg, file_tensors(TD, "model", True)).prefill(ids[:20])[0]
    if a != b:
        bad.append("OPTModel layout gives other logits")
    # the offset rows are never read: zeroing them changes nothing; the no-offset reading sees them
    k = "model.decoder.embed_positions.weight"
    sh, v = TD[k]
    TZ = dict(TD, **{k: (sh, [0.0] * (2 * sh[1]) + v[2 * sh[1]:])})
    if OptRef(cfg, TZ).prefill(ids[:20])[0] != a:
        bad.append("zeroing the offset rows changed the logits")
    # cached greedy = the full forward recomputed each step
    for tag in ("A", "B", "C"):
        cfg, sd, wkw, _, _, _ = tab[tag]
        m = OptRef(cfg, opt_weights(cfg, sd, **wkw))
        pr = ids[60:75]
        toks = m.greedy(pr, 10)[0]
        seq = list(pr)
        for j in range(10):
            t = argmax_low(m.prefill(seq)[0][-1])
            if t != toks[j]:
                bad.append("%s: cached greedy step %d: %d != recomputed %d" % (tag, j, toks[j], t))
                break
            seq.append(t)
    cfgS, TS, prompt, scale = stop_case()
    st = OptRef(cfgS, TS).greedy(prompt, 30)[0]
    print("  selftest: stop case (lm_head row 2 = (row, factor) %s) greedy %s" % (scale, st))
    if scale is None:
        bad.append("the stop case's greedy continuation never reaches id 2 after a few tokens")
    bad += selftest_peft(opt_config(num_hidden_layers=2))
    # sensitivity
    changed = {}
    moved = {}
    wins = windows(ids, 64)
    for tag, (cfg, sd, wkw, dt, _, _) in sorted(tab.items()):
        T = store(opt_weights(cfg, sd, **wkw), dt)
        model = OptRef(cfg, T)
        g = [(ids[a_:b_], n) for a_, b_, n in GEN[tag]]
        ref, cnt = mean_ce(model, wins)
        refs = [model.greedy(p_, n)[0] for p_, n in g]
        if any(len(set(r_)) < 4 for r_ in refs):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
        worst = None
        for name, kw in alternatives(cfg):
            alt = OptRef(cfg, T, **kw)
            a_, _ = mean_ce(alt, wins)
            rel = abs(a_ - ref) / abs(ref)
            worst = rel if worst is None else min(worst, rel)
            key = name.split(" instead")[0]
            moved.setdefault(key, []).append(rel)
            if rel < 20 * TOL["float64"] and not name.startswith(WEAK):
                bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
            same = all(alt.greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            changed.setdefault(key, [])
            if not same:
                changed[key].append(tag)
            print("  selftest %-2s %-62s relative change %.2e%s" % (
                tag, name, rel, "  (greedy ids unchanged)" if same else ""))
        print("  selftest %-2s loss %.8g over %d targets (ppl %.4g); smallest relative change %.2e; greedy %s" % (
            tag, ref, cnt, math.exp(ref / cnt), worst, refs))
        for name, kw in DECODE_ALTS:
            same = all(OptRef(cfg, T, **kw).greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            changed.setdefault(name, [])
            if not same:
                changed[name].append(tag)
    for key, rels in sorted(moved.items()):
        if max(rels) < 20 * TOL["float64"]:
            bad.append("no case's loss moves by 20 x the tolerance under '%s' (%s)" % (key, rels))
    for key, tags in sorted(changed.items()):
        print("  selftest: greedy ids compared by check() change under '%s' in cases %s" % (key, tags))
        if not tags and not key.startswith(WEAK):
            bad.append("no case's greedy ids change under '%s'" % key)
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny OPT folders, run lol, compare with the reference")
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
