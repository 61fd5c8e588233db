#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face GPT-J (GPTJForCausalLM, model_type "gptj":
EleutherAI/gpt-j-6b and its fine-tunes) in pure Python (stdlib only), and a check that `lol hf
ppl|generate|info` and `lol export --hf --arch gptj` / `lol layerroute merge` agree with it on tiny
GPT-J folders written here.

  python3 tests/reference/gptj_reference.py check --lol PATH/TO/lol --work /tmp/x [--quiet]
  python3 tests/reference/gptj_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside tests/reference/,
from transformers' modeling_gptj.py / configuration_gptj.py as remembered (the 4.1x code
gpt-j-6b was converted with: create_sinusoidal_positions, rotate_every_two, apply_rotary_pos_emb
with repeat_interleave, GPTJBlock's parallel residual on one ln_1, the bias-free q/k/v/out_proj,
lm_head with a bias; and the later rewrites, which kept the function), the gpt-j-6b config.json
as remembered, docs/hf.md ("GPT-J", "Commands", "Export", "Cached decoding", "Phi-1, Phi-1.5 and
Phi-2" for the default export architecture), docs/layerroute.md ("layerroute merge"; and, in a
later revision for the adapter files' new layout, "Files" and "The adapter as PEFT's") and the
brief. It imports qwen2_reference.py (float32 / bfloat16 rounding, log_softmax / argmax / top-2
gap, Checker, compare_greedy, parse_ids), gpt2_reference.py (GPT-2's byte-level tokenizer: GPT-J
uses GPT-2's tokenizer with <|endoftext|> as bos / eos), gpt_neox_reference.py (the GELU forms,
LayerNorm, f16 / storage rounding, windows / mean_ce), phi_reference.py (PhiRef / phi_params, to
read the PhiForCausalLM folders lol writes of GPT-J models) and safetensors_io (write_st /
read_st), all unchanged; the GPT-J model, its RoPE tables and interleaved rotation, its config
reading, the weights, the folder writer, the cases and the comparisons are this file's.

Rules of the reference (float64 on the stored, float16- / bfloat16-rounded weights; the RoPE
tables in float32 as transformers builds them):
  x_0[t] = wte[id_t]   (no position embedding; positions 0.. within each forward call / hf ppl
      window)
  per layer (GPTJBlock): ONE LayerNorm feeds both branches (parallel block):
      n = ln_1(x);  y = x + out_proj(attn(n)) + fc_out(act(fc_in(n)))
  attention (GPTJAttention): head_dim hd = n_embd / n_head; q = n Wq^T, k = n Wk^T, v = n Wv^T
      (q_proj, k_proj, v_proj: nn.Linear(bias=False)), head j = rows j*hd .. (j+1)*hd - 1;
      RoPE on the first rd = rotary_dim dims of each q and k head (the other hd - rd pass), in
      interleaved pairs (rotate_every_two; sin / cos repeat_interleave'd by 2): for i < rd/2
          y[2i]   = x[2i] cos_i - x[2i+1] sin_i
          y[2i+1] = x[2i+1] cos_i + x[2i] sin_i
      with (create_sinusoidal_positions(n_positions, rd), each step in float32)
          inv_freq[i] = float32(1 / float32(10000 ** float32(2i / rd)))  (exponents over rd)
          angle = float32(pos * inv_freq[i]); sin / cos in float32; the table is cat(sin, cos)
          and split in that order;
      scores = q.k / sqrt(hd), causal softmax; o = heads concatenated; attn = o Wout^T
      (out_proj: nn.Linear(bias=False)).
  MLP (GPTJMLP): fc_out(act(fc_in(n))), both nn.Linear with bias; width n_inner (null: 4 n_embd).
  logits = ln_f(x_L) lm_head.weight^T + lm_head.bias   (lm_head: nn.Linear(bias=True), untied)
  LayerNorm (nn.LayerNorm): (x - mean) / sqrt(var + eps) * w + b, var the biased (1/n) variance,
      eps layer_norm_epsilon.
  act (activation_function): "gelu_new" (default) / "gelu_pytorch_tanh" = 0.5 x (1 + tanh(sqrt(2/pi)
      (x + 0.044715 x^3))); "gelu_fast" the same with 0.7978845608; "gelu" = 0.5 x (1 + erf(x/sqrt 2)).
  GPTJConfig defaults: n_inner None (= 4 n_embd), rotary_dim 64, activation_function "gelu_new",
      layer_norm_epsilon 1e-5, tie_word_embeddings false, bos / eos 50256.
  Tensors: transformer.wte.weight, transformer.h.{i}.ln_1.{weight,bias},
      transformer.h.{i}.attn.{q_proj,k_proj,v_proj,out_proj}.weight,
      transformer.h.{i}.mlp.{fc_in,fc_out}.{weight,bias}, transformer.ln_f.{weight,bias},
      lm_head.weight, lm_head.bias; older files add the buffers transformer.h.{i}.attn.bias (the
      causal mask [1, 1, P, P], bool or uint8) and transformer.h.{i}.attn.masked_bias (-1e9; -inf
      in a float16 file).
  num_parameters() = 2 V d + V + L (2d + 4 d^2 + 2 d F + F + d) + 2d (gpt-j-6b: 6,050,882,784).
  GPT-J as rotate-half (the loader's reordering, checked here, not assumed): with the leading rd
      rows of every q / k head permuted so that half row i <- GPT-J row 2i and half row rd/2 + i
      <- GPT-J row 2i + 1, a Phi model (rotate-half on rd of hd dims, zero q/k/v / dense biases)
      computes GPT-J's function (selftest: logits equal to 1e-12).

Cases (vocab_size 300 > the tokenizer's 259 ids, n_positions 64, GPT-2's byte-level tokenizer as
gpt2_reference writes it: ids 0..255 bytes, merges "Ġt" 256 / "he" 257, <|endoftext|> 258 = bos /
eos in config.json; a text of 256 tokens):
  A gptj-6b-like-partial: gpt-j-6b's config.json keys (n_inner null -> 4 n_embd = 192,
    gelu_new, layer_norm_epsilon 1e-5, tie false, the "rotary" / "scale_attn_weights" /
    summary_* / task_specific_params keys transformers ignores), n_embd 48, 4 heads (head_dim 12),
    rotary_dim 6 (partial: 6 of 12), 3 layers, with the old buffers attn.bias (BOOL [1, 1, 64, 64])
    and attn.masked_bias (F32 -1e9) in the file; embeddings of std 0.02 (layer 0's LayerNorm then
    tells eps 1e-5 from 1e-6). ppl float64 --context 0 (= 64) and 9, float32 64; generate
    float64 (3 + 30: longer than the prompt, 40 + 20), float32 (40 + 20), --prompt text,
    --max-new 30 after 50 ids (reduced to 14); info --check.
  B gptj-full-rotary-gelu: rotary_dim = head_dim = 8 (n_embd 32, 4 heads), exact "gelu",
    layer_norm_epsilon 1e-3, n_inner 64, 2 layers, a top-level "rope_theta": 10000 (the only value
    lol accepts; ASSUMED accepted). ppl float64 0 / 9, float32; generate float64 (4 + 30, 40 + 20)
    / float32; info --check.
  C gptj-f16-fast-u8-buffers: F16 storage, gelu_fast, rotary_dim 4 of 16 (n_embd 32, 2 heads),
    torch_dtype float16, the buffers as a float16 save holds them (attn.bias U8, masked_bias F16
    -inf), 2 layers: ppl float64, generate float64, info --check.
  D gptj-bf16-rd8of12: BF16 storage, rotary_dim 8 of 12 (n_embd 36, 3 heads), gelu_pytorch_tanh,
    "rope_scaling": null (ASSUMED: null is no scaling, accepted): ppl float64 (on the bf16-rounded
    weights), float32, bfloat16; generate float64; info --check.
  E gptj-defaults-only-sizes: config.json with only architectures, model_type, vocab_size, n_embd
    128, n_layer 1, n_head 2, n_positions 64 (and bos / eos 258, ASSUMED: GPTJConfig's 50256 is
    outside this vocabulary): GPTJConfig's defaults give rotary_dim 64 = head_dim 64 (full), n_inner
    512, gelu_new, eps 1e-5: ppl float64, generate float64, info --check.
  gptj-stop-at-eos: a folder whose greedy continuation reaches <|endoftext|> 258, run without
    --no-stop: the ids up to and including it.
  Refusals (hf ppl, exit 2, stderr naming the field / tensor): rotary_dim null, 5 (odd), 14 (>
    head_dim 12), 0 (ASSUMED from docs' [2, head_dim]); config.json without rotary_dim on head_dim
    12 (GPTJConfig's default 64 > 12); tie_word_embeddings true; rope_scaling linear;
    rope_parameters default with rope_theta 500; top-level rope_theta 500; activation_function relu;
    quantization_config; a missing n_embd; n_embd 36 on 4 heads (head_dim 9, odd); tensors: an
    unexpected attn.q_proj.bias, an unexpected attn.out_proj.bias, an extra ln_2.weight, a missing
    attn.k_proj.weight, a missing mlp.fc_out.bias, a missing lm_head.bias, a missing lm_head.weight,
    fc_in.weight stored transposed (and its message names GPT-J's fields n_inner / n_embd: docs/hf.md
    "the message names the config fields that set the shape"), Phi's names (model.layers.{i}...)
    instead of GPT-J's.
  Export (check_export): dense models of Phi's layout without attention biases ("norm":
    "layernorm", "mlp": "plain", "parallel_residual", "shared_input_norm", "lm_head_bias", no
    qkv_bias / o_bias, rope_theta 10000) trained 3 steps on a byte corpus (4 heads of 12 with
    partial_rotary_factor 0.5 -> rotary_dim 6, gelu_pytorch_tanh; 4 heads of 8 with full rotary,
    exact gelu, norm_eps 1e-3): `lol export --hf --arch gptj`: GPTJForCausalLM, config.json read
    with GPTJConfig's rules gives the trained model, the tensors are the checkpoint's renamed bit for
    bit with the leading rd rows of each q / k head interleaved back (GPT-J row 2i <- row i, row
    2i + 1 <- row rd/2 + i), hf ppl float64 of the export equals this reference on the exported
    tensors, and this reference on the export equals phi_reference's PhiRef on the checkpoint (the
    export computes the trained model, 1e-10). The default --arch of such a model is
    PhiForCausalLM (docs' "phi for Phi's layout"). A model without MLP / lm_head biases exports with
    zero biases (the same function). Refused with --arch gptj (exit 2 naming the field, no --out
    folder left): qkv_bias, o_bias, n_kv_heads 2 of 4, tie_word_embeddings (without lm_head_bias,
    which lol's dense config refuses with tied embeddings), rope_theta 500, two
    LayerNorms per block (GPT-NeoX's parallel layout: shared_input_norm false), a sequential
    LayerNorm model, the default dense model (RMSNorm, gated MLP).
  Loaded GPT-J folders written back (the command-line route is `lol layerroute merge`, which
    docs/layerroute.md says writes "its architecture unless --arch says otherwise"; docs/hf.md
    GPT-J says an export of a loaded GPT-J model defaults to PhiForCausalLM): a folder of case D's
    model plus a chat template (LayerRoute needs one), a LayerRoute adapter trained with --lr 0
    (LoRA B stays 0): merge --arch gptj gives GPTJForCausalLM with every parameter tensor of the
    source bit for bit (the buffers may be dropped); merge --arch phi gives a PhiForCausalLM whose
    config reads (PhiConfig's int(hd * partial_rotary_factor)) as rotary dims 8 of 12 and whose
    function (PhiRef) equals this reference on the source (1e-10), hf ppl float64 of it too; merge
    without --arch: either architecture, computing the source's function. An adapter trained
    3 steps with lr 0.01 on q_proj, k_proj, down_proj of case A's model plus a chat template:
    merge --arch gptj writes the untouched tensors bit for bit and q_proj / k_proj / fc_out within
    float32 rounding of PEFT's W + alpha/r B A with the q / k rows of B in GPT-J's own
    (interleaved) order (docs/layerroute.md "The adapter as PEFT's": the files are PEFT's on
    GPTJForCausalLM), the merged folder's hf ppl float64 equals this reference on it, and
    `layerroute generate --gates open` (the adapter on the base) gives the greedy ids of this
    reference on the fold. For both adapters (zero and trained) the files are checked as PEFT
    reads them (check_peft_files): layerroute.json's peft_architecture "GPTJForCausalLM"; tensors
    base_model.model.transformer.h.{i}.{attn.q_proj, attn.k_proj, mlp.fc_out}.lora_{A,B}.weight
    and nothing else, lora_A [r, in] / lora_B [out, r] of those nn.Linear modules;
    adapter_config.json's target_modules selecting, by PEFT's rule (an entry matches a module path
    equal to it or ending with "." + entry; a string is fullmatched) over every module of
    GPTJForCausalLM (ASSUMED: its named_modules() as remembered, gptj_modules), exactly the
    modules holding tensors; r / lora_alpha = layerroute.json's rank / alpha and each module's
    rank_pattern / alpha_pattern scale = alpha / r; fan_in_fan_out false; peft_type LORA, bias
    none, no rslora / dora / layers_to_transform / modules_to_save.
Tolerances: float64 summed loss / bits per byte 1e-8 relative, perplexity 1e-7 (selftest: +-1
float32 ulp of noise on every sin / cos entry moves the loss by less than half of that); float32
1e-6; bfloat16 5e-3; greedy ids exact (after a float32 near-tie, top-2 gap < 1e-4 of max |logit|,
the rest of that continuation is not compared, noted). At the time of writing lol was 1.9e-10 ..
8e-10 away in float64 (loss_sum), 1.1e-9 .. 6.9e-9 in float32, 3.1e-5 in bfloat16; its exports
7e-12 .. 5.7e-11 (float64 hf ppl against this reference on the exported tensors); the merged
LoRA fold 5e-8 of max |W'| (float32 storage); a check run took 170 s (92 lol runs) on 2 shared
cores, `selftest` about 3 minutes. Revised for the adapter files' new layout (q / k rows in GPT-J's
order expected, check_peft_files, selftest_lora): check 213 checks, 0 disagreements, 92 lol runs,
145 s; selftest 132 s; the old row reading is 5.2e-2 of max |W'| away on check()'s trained adapter
(the fold agrees to 5e-8), and with it the old check() (rows reordered expected) reported 3
disagreements against the same lol, each naming the documented reading as lol's.

`selftest` (no lol) checks cached greedy decoding = recomputed full forward, the GELU forms, the
parameter counts (gpt-j-6b's 6,050,882,784), config reading with GPTJConfig's defaults, the
interleaved RoPE against a direct complex rotation of (x_2i + i x_2i+1), the rotate-half
equivalence above (and that the un-permuted rows do not give it), and the sensitivity: each
alternative reading (rotate-half pairs (i, i + rd/2) instead of interleaved, rotary on the last
rd dims, on all head dims, no RoPE, exponents over head_dim instead of rotary_dim, sin and cos
swapped, the rotation reversed, repeat instead of repeat_interleave of sin / cos; sequential
residual, two norms (the MLP on a second default LayerNorm), the MLP on the un-normalized input;
no lm_head bias, the tied head (wte), no MLP biases; the other GELU form, relu; no scale / 1/hd
scale; LayerNorm without mean / bias, unbiased variance, eps outside the sqrt, another eps)
moves each case's float64 loss by > 20 x the float64 tolerance, and the greedy ids check()
compares change under each in at least one case (the eps / GELU-form readings may not), as they
do under cached decoding that puts every new token at position len(prompt) or restarts the
positions at 0. LoRA (selftest_lora): PEFT's fold on GPT-J's weights with the q / k B rows in
GPT-J's order equals lol's LoRA on the rotate-half (Phi) model with B's rows permuted like the
loader's (B_lol = P B; 1e-12), the old reading (rows in lol's order) equals it with B as stored,
and the old reading moves a random adapter's merged tensors by > 1e-4 of max |W'|, the loss by
> 20 x the float64 tolerance and the greedy ids of check()'s two prompts; check() also requires
the trained adapter's two readings to differ by > 1e-4; peft_selects / peft_pattern on GPT-J's
module tree. On a disagreement check() prints which alternative reading, if any, lol matches.

ASSUMED (where neither the brief nor transformers decides):
  * The reference is the float64 function of the equations above. transformers' own GPT-J casts
    q and k to float32 for the scores (GPTJAttention._attn), divides them by
    sqrt(head_dim) computed in float32, and casts lm_head's logits to float32 even in a float64
    model; those roundings are not modelled (selftest prints what the float32 scale and float32
    scores would move; lol's float64 is compared with the float64 function).
  * inv_freq's float32 pow is taken as correctly rounded (10000 ** float32(2i / rd) is inexact for
    rotary_dim 6 and 64; torch's vectorized powf may differ by an ulp): selftest moves every
    inexact inv_freq by one ulp (the loss moves by at most 7e-9 relative, on case E's 64 rotary
    dims; 5e-10 on A; it fails above the 1e-8 tolerance); rotary dims 4 and 8 make every power
    exact.
  * hf ppl windows: non-overlapping windows of --context tokens, positions restart at 0 in each
    window, no BOS (docs/hf.md); --context 0 -> min(512, n_positions).
  * The old buffers are skipped whatever their dtype (BOOL / U8 mask, F32 masked_bias, F16 -inf).
  * "rope_theta": 10000 and "rope_scaling": null are accepted (docs: refused are rope_scaling /
    rope_parameters objects and rope_theta other than 10000; transformers ignores all of them).
  * hf info's summary lines are checked loosely (the form lol prints for Phi: "rotary dims rd of
    hd" (printed for partial rotary only, as for GPT-NeoX), "heads H query, H key/value,
    head_dim hd", the eps on the "positions" line, "vocab ... (separate lm_head)", a "block" line
    saying parallel, LayerNorm, the GELU form, lm_head with a bias, and no q/k/v biases / RMSNorm /
    gate / second norm); docs/hf.md does not fix the format.
  * Refusal messages name the field or tensor (any one of the listed needles).
  * Export: the exported config.json is judged by what GPTJConfig would read from it (absent keys
    -> its defaults); gelu_new / gelu_fast are accepted for a gelu_pytorch_tanh model.
  * PEFT's matching of rank_pattern / alpha_pattern keys (the key equal to the module path, else
    re.match("(.*[.])?KEY$")) is as remembered; lol writes both empty on GPT-J (no fused module),
    so only r / lora_alpha decide here.
  * The LayerRoute adapter files changed on 2026-12-07 (docs/layerroute.md "Files"): before,
    Llama's names on every base and the q / k lora_B rows in lol's reordered (rotate-half) order;
    that old reading (P^-1 (B A) on GPT-J's weights) is the alternative printed when the fold or
    the greedy ids disagree, and selftest shows that check() would see it.
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
import gpt_neox_reference as nx  # noqa: E402  (GELU forms, LayerNorm, storage rounding, windows / mean_ce)
import phi_reference as ph  # noqa: E402  (PhiRef: the PhiForCausalLM folders lol writes of GPT-J models)

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
layernorm, f16, store, windows, mean_ce = nx.layernorm, nx.f16, nx.store, nx.windows, nx.mean_ce


def matvec(W, x):
    return [sum(map(_mul, row, x)) for row in W]


# ---------------------------------------------------------------- config (GPTJConfig)
def gptj_params(cfg):
    """the model GPTJConfig describes (GPTJConfig's defaults for absent keys)"""
    d, H = cfg["n_embd"], cfg["n_head"]
    hd = d // H
    F = cfg.get("n_inner")
    if F is None:
        F = 4 * d
    return {"V": cfg["vocab_size"], "d": d, "L": cfg["n_layer"], "H": H, "hd": hd, "P": cfg["n_positions"],
            "F": F, "rd": cfg.get("rotary_dim", 64), "act": cfg.get("activation_function", "gelu_new"),
            "eps": cfg.get("layer_norm_epsilon", 1e-5), "tied": cfg.get("tie_word_embeddings", False),
            "bos": cfg.get("bos_token_id", 50256), "eos": cfg.get("eos_token_id", 50256)}


def gptj_config(**kw):
    """gpt-j-6b's config.json (as transformers 4.18 saved it), tiny sizes"""
    c = {"activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"], "attn_pdrop": 0.0,
         "bos_token_id": EOT, "embd_pdrop": 0.0, "eos_token_id": EOT, "gradient_checkpointing": False,
         "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gptj", "n_embd": 48,
         "n_head": 4, "n_inner": None, "n_layer": 3, "n_positions": 64, "resid_pdrop": 0.0, "rotary": True,
         "rotary_dim": 6, "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.1,
         "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
         "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50, "temperature": 1.0}},
         "tie_word_embeddings": False, "tokenizer_class": "GPT2Tokenizer", "torch_dtype": "float32",
         "transformers_version": "4.18.0.dev0", "use_cache": True, "vocab_size": 300}
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def param_count(cfg):
    """transformers' num_parameters() (the buffers not counted)"""
    p = gptj_params(cfg)
    d, F, V = p["d"], p["F"], p["V"]
    per = 2 * d + 4 * d * d + 2 * d * F + F + d
    return 2 * V * d + V + p["L"] * per + 2 * d


# ---------------------------------------------------------------- weights (GPTJForCausalLM names)
def gptj_weights(cfg, seed, emb_std=0.5, qk=2.5, fc=2.5, lnf_std=0.3, head_bias=0.5, head_std=0.3):
    """name -> (shape, flat float32-rounded values). LayerNorm weights N(1, 0.3), biases N(0, 0.3);
    q / k rows larger than v's (attention far from uniform); MLP pre-activations of a few units;
    lm_head.bias N(0, head_bias)."""
    rng = random.Random(seed)
    p = gptj_params(cfg)
    V, d, L, F = p["V"], p["d"], p["L"], p["F"]
    T = {}

    def put(name, shape, sd, mean=0.0):
        n = 1
        for s_ in shape:
            n *= s_
        T[name] = (list(shape), [f32(rng.gauss(mean, sd)) for _ in range(n)])

    put("transformer.wte.weight", [V, d], emb_std)
    for i in range(L):
        pre = "transformer.h.%d." % i
        put(pre + "ln_1.weight", [d], 0.3, 1.0)
        put(pre + "ln_1.bias", [d], 0.3)
        put(pre + "attn.q_proj.weight", [d, d], qk / math.sqrt(d))
        put(pre + "attn.k_proj.weight", [d, d], qk / math.sqrt(d))
        put(pre + "attn.v_proj.weight", [d, d], 1.2 / math.sqrt(d))
        put(pre + "attn.out_proj.weight", [d, d], 1.0 / math.sqrt(d))
        put(pre + "mlp.fc_in.weight", [F, d], fc / math.sqrt(d))
        put(pre + "mlp.fc_in.bias", [F], 0.5)
        put(pre + "mlp.fc_out.weight", [d, F], 1.2 / math.sqrt(F))
        put(pre + "mlp.fc_out.bias", [d], 0.3)
    put("transformer.ln_f.weight", [d], lnf_std, 1.0)
    put("transformer.ln_f.bias", [d], 0.3)
    put("lm_head.weight", [V, d], head_std)
    put("lm_head.bias", [V], head_bias)
    return T


def with_buffers(T, cfg, mask_dtype="BOOL", float_dtype="F32"):
    """the buffers of older files: attn.bias (the causal mask [1, 1, P, P]) and attn.masked_bias
    (-1e9; a float16 save holds -inf: -1e9 overflows float16)"""
    p = gptj_params(cfg)
    P = p["P"]
    mask = [j <= i for i in range(P) for j in range(P)]
    if mask_dtype == "U8":
        mask = [int(v) for v in mask]
    out = dict(T)
    for i in range(p["L"]):
        out["transformer.h.%d.attn.bias" % i] = ([1, 1, P, P], mask, mask_dtype)
        out["transformer.h.%d.attn.masked_bias" % i] = (
            [], [float("-inf") if float_dtype == "F16" else -1e9], float_dtype)
    return out


def write_folder(folder, cfg, T, dtype="F32", chat_template=None):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    gc = {"_from_model_config": True}
    for k in ("bos_token_id", "eos_token_id"):
        if k in cfg:
            gc[k] = cfg[k]
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(gc, f)
    g2.write_tokenizer(folder, cfg.get("n_positions", 64))
    if chat_template is not None:
        with open(os.path.join(folder, "chat_template.jinja"), "w") as f:
            f.write(chat_template)
    write_st(os.path.join(folder, "model.safetensors"),
             {k: (v[0], v[1], v[2] if len(v) > 2 else dtype) for k, v in T.items()}, {"format": "pt"})


# ---------------------------------------------------------------- RoPE (create_sinusoidal_positions)
def gptj_inv_freq(rd, expo_dim=None):
    """1 / 10000 ** (arange(0, dim, 2) / dim) in float32 (dim = rotary_dim; expo_dim: an
    alternative reading's exponent denominator)"""
    ed = rd if expo_dim is None else expo_dim
    return [f32(1.0 / f32(10000.0 ** f32(j / ed))) for j in range(0, rd, 2)]


def sincos_tables(inv, npos, f64=False):
    """(sin, cos) [npos][rd / 2]: sinusoid_inp = float32(pos * inv_freq), sin / cos in float32"""
    sin, cos = [], []
    for pos in range(npos):
        if f64:
            ang = [pos * v for v in inv]
            sin.append([math.sin(a) for a in ang])
            cos.append([math.cos(a) for a in ang])
        else:
            ang = [f32(pos * v) for v in inv]
            sin.append([f32(math.sin(a)) for a in ang])
            cos.append([f32(math.cos(a)) for a in ang])
    return sin, cos


def rope_gptj(x, s, c, rd, layout="interleaved"):
    """x: one head (hd values); RoPE on the rotary dims, the rest unchanged.
    interleaved (GPT-J): pairs (2i, 2i+1) turn by angle i; alternatives: "half" (rotate-half pairs
    (i, i + rd/2)), "last" (interleaved on the last rd dims), "repeat" (sin / cos repeated instead
    of repeat_interleave'd: element j uses angle j mod rd/2), "none"."""
    half = rd // 2
    if rd == 0 or layout == "none":
        return list(x)
    y = list(x)
    if layout == "last":
        hd = len(x)
        return list(x[:hd - rd]) + rope_gptj(x[hd - rd:], s, c, rd)
    if layout == "half":
        for i in range(half):
            a, b = x[i], x[i + half]
            y[i] = a * c[i] - b * s[i]
            y[i + half] = b * c[i] + a * s[i]
        return y
    if layout == "repeat":  # tensor * cat(c, c) + rotate_every_two(tensor) * cat(s, s)
        for i in range(half):
            a, b = x[2 * i], x[2 * i + 1]
            j0, j1 = (2 * i) % half, (2 * i + 1) % half
            y[2 * i] = a * c[j0] - b * s[j0]
            y[2 * i + 1] = b * c[j1] + a * s[j1]
        return y
    for i in range(half):  # rotate_every_two: stack((-x2, x1)); sin / cos repeat_interleave'd
        a, b = x[2 * i], x[2 * i + 1]
        y[2 * i] = a * c[i] - b * s[i]
        y[2 * i + 1] = b * c[i] + a * s[i]
    return y


def half_perm(hd, rd):
    """row r of a rotate-half head <- GPT-J row perm[r]: half row i <- 2i, half row rd/2 + i <- 2i + 1"""
    perm = list(range(hd))
    for i in range(rd // 2):
        perm[i] = 2 * i
        perm[rd // 2 + i] = 2 * i + 1
    return perm


def permute_rows(vals, d_in, H, hd, perm):
    """a [H hd, d_in] matrix (flat) with the rows of each head taken in perm's order: new row
    h*hd + r <- old row h*hd + perm[r]"""
    out = []
    for h in range(H):
        for r in range(hd):
            src = h * hd + perm[r]
            out.extend(vals[src * d_in:(src + 1) * d_in])
    return out


def inverse(perm):
    inv = [0] * len(perm)
    for r, p_ in enumerate(perm):
        inv[p_] = r
    return inv


# ---------------------------------------------------------------- the model
class GptjRef:
    """GPTJForCausalLM in float64. Keyword arguments select alternative readings (sensitivity
    checks and the diagnosis of a disagreement)."""

    def __init__(self, cfg, T, rope_layout="interleaved", rd=None, expo="rd", sincos="hf", residual="parallel",
                 norms="shared", mlp_bias=True, head_bias=True, head="lm_head", act=None, attn_scale="hf",
                 ln_center=True, ln_bias=True, ln_unbiased=False, ln_eps_out=False, eps=None, rope_f64=False,
                 ulp_noise=None, inv_noise=None, decode_pos="hf", scores_f32=False):
        p = gptj_params(cfg)
        self.p = p
        self.d, self.L, self.H, self.V, self.P, self.hd = p["d"], p["L"], p["H"], p["V"], p["P"], p["hd"]
        self.rd = p["rd"] if rd is None else rd
        assert isinstance(self.rd, int) and self.rd % 2 == 0 and 0 <= self.rd <= self.hd, self.rd
        self.rope_layout = rope_layout
        self.residual, self.norms = residual, norms
        self.eps = p["eps"] if eps is None else eps
        self.ln_kw = {"center": ln_center, "bias": ln_bias, "unbiased": ln_unbiased, "eps_out": ln_eps_out}
        self.act = ACTS[act or p["act"]]
        self.scale = {"hf": 1.0 / math.sqrt(self.hd), "none": 1.0, "1/hd": 1.0 / self.hd,
                      "f32": 1.0 / f32(math.sqrt(self.hd))}[attn_scale]
        self.scores_f32 = scores_f32
        self.decode_pos = decode_pos
        inv = gptj_inv_freq(self.rd, self.hd if expo == "hd" else None)
        if inv_noise is not None:  # selftest: the inexact powers' inv_freq moved by up to one float32 ulp
            rng = random.Random(inv_noise)
            ed = self.hd if expo == "hd" else self.rd
            inv = [v if float(10000.0 ** f32(2 * i / ed)).is_integer() else
                   v + rng.choice((-1, 1)) * 2.0 ** (math.frexp(v)[1] - 24) for i, v in enumerate(inv)]
        self.sin, self.cos = sincos_tables(inv, self.P + 8, rope_f64)
        if sincos == "swapped":  # split(cat(sin, cos)) read as (cos, sin)
            self.sin, self.cos = self.cos, self.sin
        elif sincos == "reversed":  # the rotation by minus the angle
            self.sin = [[-v for v in row] for row in self.sin]
        if ulp_noise is not None:  # selftest: every table entry moved by up to one float32 ulp
            rng = random.Random(ulp_noise)

            def nudge(v):
                if v == 0.0:
                    return v
                return v + rng.choice((-1, 0, 1)) * 2.0 ** (math.frexp(v)[1] - 24)
            self.sin = [[nudge(v) for v in row] for row in self.sin]
            self.cos = [[nudge(v) for v in row] for row in self.cos]
        d, F = self.d, p["F"]

        def rows(name, shape):
            s, v = T[name][0], T[name][1]
            assert list(s) == list(shape), (name, s, shape)
            return [list(v[i * s[1]:(i + 1) * s[1]]) for i in range(s[0])]

        def vec(name, n, use=True):
            if not use:
                return [0.0] * n
            v = list(T[name][1])
            assert len(v) == n, (name, len(v), n)
            return v

        def ln(name):
            return vec(name + ".weight", d), vec(name + ".bias", d)
        self.embed = rows("transformer.wte.weight", [self.V, d])
        self.layers = []
        for i in range(self.L):
            pre = "transformer.h.%d." % i
            self.layers.append({"ln": ln(pre + "ln_1"),
                                "q": rows(pre + "attn.q_proj.weight", [d, d]),
                                "k": rows(pre + "attn.k_proj.weight", [d, d]),
                                "v": rows(pre + "attn.v_proj.weight", [d, d]),
                                "o": rows(pre + "attn.out_proj.weight", [d, d]),
                                "fc_in": (rows(pre + "mlp.fc_in.weight", [F, d]), vec(pre + "mlp.fc_in.bias", F, mlp_bias)),
                                "fc_out": (rows(pre + "mlp.fc_out.weight", [d, F]),
                                           vec(pre + "mlp.fc_out.bias", d, mlp_bias))})
        self.lnf = ln("transformer.ln_f")
        self.lm_head = self.embed if head == "tied" else rows("lm_head.weight", [self.V, d])
        self.lm_bias = vec("lm_head.bias", self.V, head_bias)
        self.unit_ln = ([1.0] * d, [0.0] * d)
        self.memo = {}

    def _ln(self, x, wb):
        return layernorm(x, wb[0], wb[1], self.eps, **self.ln_kw)

    def _mlp(self, ly, m):
        M, b = ly["fc_in"]
        f = [self.act(s + bb) for s, bb in zip(matvec(M, m), b)]
        M, b = ly["fc_out"]
        return [s + bb for s, bb in zip(matvec(M, f), b)]

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, hd, rd = self.H, self.hd, self.rd
        out = []
        for t, x in enumerate(X):
            pos = pos0 + t
            n = self._ln(x, ly["ln"])
            q, k, v = matvec(ly["q"], n), matvec(ly["k"], n), matvec(ly["v"], n)
            s_, c = self.sin[pos], self.cos[pos]
            qh = [rope_gptj(q[j * hd:(j + 1) * hd], s_, c, rd, self.rope_layout) for j in range(H)]
            kh = [rope_gptj(k[j * hd:(j + 1) * hd], s_, c, rd, self.rope_layout) for j in range(H)]
            vh = [v[j * hd:(j + 1) * hd] for j in range(H)]
            cache["k"].append(kh)
            cache["v"].append(vh)
            att = []
            for h in range(H):
                qa = qh[h]
                if self.scores_f32:  # transformers' float32 scores (informational: selftest)
                    qa = [f32(z) for z in qa]
                    sc = [f32(f32(sum(map(_mul, qa, [f32(z) for z in kk[h]]))) * f32(self.scale))
                          for kk in cache["k"]]
                else:
                    sc = [sum(map(_mul, qa, kk[h])) * self.scale for kk in cache["k"]]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for w, vv in zip(e, cache["v"]):
                    w /= tot
                    if self.scores_f32:
                        w = f32(w)
                    o = [oj + w * vj for oj, vj in zip(o, vv[h])]
                att.extend(o)
            attn = matvec(ly["o"], att)
            if self.residual == "sequential":  # h = x + attn(ln x); y = h + mlp(ln h) (the same ln_1)
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


# ---------------------------------------------------------------- GPT-J as a Phi model (rotate-half)
def phi_equivalent(cfg, T, perm_rows=True):
    """(PhiConfig dict, PhiForCausalLM tensors, rd): GPT-J's model in Phi's names with zero
    q/k/v / dense biases and the leading rd rows of each q / k head permuted to rotate-half order
    (perm_rows False: left in GPT-J's order, a wrong conversion for selftest)"""
    p = gptj_params(cfg)
    d, H, hd, rd, F, L = p["d"], p["H"], p["hd"], p["rd"], p["F"], p["L"]
    pc = ph.phi_config(hidden_size=d, num_attention_heads=H, num_key_value_heads=H, intermediate_size=F,
                       num_hidden_layers=L, vocab_size=p["V"], max_position_embeddings=p["P"],
                       partial_rotary_factor=rd / hd, hidden_act=p["act"], layer_norm_eps=p["eps"],
                       rope_theta=10000.0, _name_or_path=ph.DROP)
    perm = half_perm(hd, rd)
    S = {"model.embed_tokens.weight": T["transformer.wte.weight"], "lm_head.weight": T["lm_head.weight"],
         "lm_head.bias": T["lm_head.bias"], "model.final_layernorm.weight": T["transformer.ln_f.weight"],
         "model.final_layernorm.bias": T["transformer.ln_f.bias"]}
    for i in range(L):
        a, b = "transformer.h.%d." % i, "model.layers.%d." % i
        S[b + "input_layernorm.weight"] = T[a + "ln_1.weight"]
        S[b + "input_layernorm.bias"] = T[a + "ln_1.bias"]
        for x in "qk":
            sh, v = T[a + "attn.%s_proj.weight" % x][:2]
            S[b + "self_attn.%s_proj.weight" % x] = (sh, permute_rows(v, d, H, hd, perm) if perm_rows else v)
        S[b + "self_attn.v_proj.weight"] = T[a + "attn.v_proj.weight"]
        S[b + "self_attn.dense.weight"] = T[a + "attn.out_proj.weight"]
        for x in ("q_proj", "k_proj", "v_proj", "dense"):
            S[b + "self_attn.%s.bias" % x] = ([d], [0.0] * d)
        for x, y in (("fc_in", "fc1"), ("fc_out", "fc2")):
            for z in ("weight", "bias"):
                S[b + "mlp.%s.%s" % (y, z)] = T[a + "mlp.%s.%s" % (x, z)]
    return pc, {k: (v[0], v[1]) for k, v in S.items()}, rd


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = gptj_params(cfg)
    hd, rd = p["hd"], p["rd"]
    other = "gelu" if ACTS[p["act"]] is not gelu_exact else "gelu_new"
    other_eps = 1e-6 if p["eps"] != 1e-6 else 1e-5
    out = [("RoPE pairs rotate-half (i, i + rd/2) instead of interleaved (2i, 2i+1)", {"rope_layout": "half"}),
           ("sin / cos repeated (cat) instead of repeat_interleave'd", {"rope_layout": "repeat"}),
           ("sin and cos swapped (split order of cat(sin, cos))", {"sincos": "swapped"}),
           ("the rotation reversed (minus the angle)", {"sincos": "reversed"}),
           ("no RoPE", {"rope_layout": "none"})]
    if rd < hd:
        out += [("inv_freq exponents over head_dim, not rotary_dim", {"expo": "hd"}),
                ("RoPE on all head dims (rotary_dim ignored)", {"rd": hd}),
                ("RoPE on the last rotary_dim dims", {"rope_layout": "last"})]
    out += [("sequential residual (MLP on ln_1(x + attn))", {"residual": "sequential"}),
            ("two norms: the MLP on a second, default LayerNorm (weight 1, bias 0)", {"norms": "second-default"}),
            ("the MLP on the un-normalized block input", {"norms": "none"}),
            ("no lm_head bias", {"head_bias": False}),
            ("tied head (wte) instead of lm_head", {"head": "tied"}),
            ("no MLP biases", {"mlp_bias": False}),
            ("activation %s" % other, {"act": other}),
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
    return out


DECODE_ALTS = [("cached decoding: every new token at position len(prompt)", {"decode_pos": "stuck"}),
               ("cached decoding: new tokens' positions restart at 0", {"decode_pos": "restart"})]
WEAK = ("activation gelu", "layer_norm_epsilon", "LayerNorm with the unbiased", "LayerNorm eps outside")


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, seed, gptj_weights keyword arguments)"""
    A = gptj_config()
    B = gptj_config(n_embd=32, n_head=4, rotary_dim=8, n_layer=2, n_inner=64, activation_function="gelu",
                    layer_norm_epsilon=1e-3, rope_theta=10000.0, transformers_version="4.45.0",
                    gradient_checkpointing=DROP, rotary=DROP, summary_activation=DROP, summary_first_dropout=DROP,
                    summary_proj_to_labels=DROP, summary_type=DROP, summary_use_proj=DROP,
                    task_specific_params=DROP)
    C = gptj_config(n_embd=32, n_head=2, rotary_dim=4, n_layer=2, n_inner=96, activation_function="gelu_fast",
                    torch_dtype="float16")
    D = gptj_config(n_embd=36, n_head=3, rotary_dim=8, n_layer=2, n_inner=64,
                    activation_function="gelu_pytorch_tanh", torch_dtype="bfloat16", rope_scaling=None)
    E = {"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "vocab_size": 300, "n_embd": 128,
         "n_layer": 1, "n_head": 2, "n_positions": 64, "bos_token_id": EOT, "eos_token_id": EOT}
    return {"A": (A, 807, {"emb_std": 0.02}), "B": (B, 802, {}), "C": (C, 803, {"emb_std": 0.3}),
            "D": (D, 804, {"emb_std": 0.3}), "E": (E, 805, {"emb_std": 0.3, "qk": 3.5, "head_std": 0.15})}


STORAGE = {"C": "F16", "D": "BF16"}
BUFFERS = {"A": ("BOOL", "F32"), "C": ("U8", "F16")}
NAMES = {"A": "gptj-6b-like-partial", "B": "gptj-full-rotary-gelu", "C": "gptj-f16-fast-u8-buffers",
         "D": "gptj-bf16-rd8of12", "E": "gptj-defaults-only-sizes"}
GEN = {"A": [(0, 3, 30), (60, 100, 20)], "B": [(0, 4, 30), (30, 70, 20)], "C": [(30, 62, 25)],
       "D": [(10, 40, 25)], "E": [(10, 40, 25)]}


# ---------------------------------------------------------------- the check
class Case:
    def __init__(self, ck, tag, cfg, T, dtype="F32", buffers=None, chat_template=None):
        self.ck, self.tag, self.cfg = ck, tag, cfg
        F = with_buffers(T, cfg, *buffers) if buffers else T
        write_folder(os.path.join(ck.work, tag), cfg, F, dtype, chat_template)
        self.T = store(T, dtype)
        self.model = GptjRef(cfg, self.T)
        self.alts = {}
        p = gptj_params(cfg)
        print("[%s] %s storage, layers %d, n_embd %d, heads %d, rotary_dim %d of %d, n_inner %d, act %s, eps %g%s"
              % (tag, dtype, p["L"], p["d"], p["H"], p["rd"], p["hd"], p["F"], p["act"], p["eps"],
                 ", old buffers %s / %s" % buffers if buffers else ""), flush=True)

    def alt(self, kw):
        key = json.dumps(kw, sort_keys=True)
        if key not in self.alts:
            self.alts[key] = GptjRef(self.cfg, self.T, **kw)
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
            for name, kw in alternatives(self.cfg) + [("RoPE tables in float64", {"rope_f64": True}),
                                                      ("float32 scores (transformers' _attn)", {"scores_f32": True})]:
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
            "" if expect_n is None else ", --max-new %d reduced by n_positions %d" % (n, self.model.P))
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

    def info(self):
        ck = self.ck
        r = ck.run(["hf", "info", self.tag, "--check"], expect_rc=None)
        ck.equal("%s hf info --check exits 0" % self.tag, r.returncode, 0)
        if r.returncode != 0:
            return None
        ck.equal("%s hf info names GPTJForCausalLM" % self.tag, "GPTJForCausalLM" in r.stdout, True)
        ck.equal("%s hf info --check: all tensors present" % self.tag, "all tensors present" in r.stdout, True)
        m = re.search(r"parameters\s+([\d,]+)", r.stdout)
        if m:
            ck.equal("%s hf info parameters (transformers' num_parameters())" % self.tag,
                     int(m.group(1).replace(",", "")), param_count(self.cfg))
        else:
            ck.note("%s: hf info prints no parameter count" % self.tag)
        # ASSUMED: hf info's summary lines (in the form lol prints them for Phi) describe the model
        p = gptj_params(self.cfg)
        lines = {}
        for l_ in r.stdout.splitlines():
            mm = re.match(r"(\S+(?: \S+)?)\s{2,}(.*)", l_)
            if mm:
                lines.setdefault(mm.group(1), mm.group(2))
        rot = lines.get("rotary dims")
        if p["rd"] < p["hd"]:
            ck.equal("%s hf info 'rotary dims' line [ASSUMED]: %r" % (self.tag, rot),
                     (rot or "").startswith("%d of %d" % (p["rd"], p["hd"])), True)
        elif rot is not None:  # lol prints the line for partial rotary only (as for GPT-NeoX)
            ck.equal("%s hf info 'rotary dims' line (full rotary) [ASSUMED]: %r" % (self.tag, rot),
                     rot.startswith("%d of %d" % (p["hd"], p["hd"])), True)
        hl = lines.get("heads", "")
        heads = re.search(r"(\d+) query, (\d+) key/value, head_dim (\d+)", hl)
        ck.equal("%s hf info heads line (query, key/value, head_dim) [ASSUMED]: %r" % (self.tag, hl),
                 tuple(int(x) for x in heads.groups()) if heads else None, (p["H"], p["H"], p["hd"]))
        pos = lines.get("positions", "")
        me = re.search(r"(?:layer_norm_eps|layer_norm_epsilon) ([\d.e+-]+)", pos)
        mp = re.match(r"(\d+)", pos)
        ck.equal("%s hf info positions / layer_norm_epsilon [ASSUMED]: %r" % (self.tag, pos),
                 (int(mp.group(1)) if mp else None, float(me.group(1)) if me else None), (p["P"], p["eps"]))
        mb = re.search(r"rope_theta ([\d.e+-]+)", pos)
        if mb:
            ck.equal("%s hf info rope_theta 10000 [ASSUMED]" % self.tag, float(mb.group(1)), 10000.0)
        voc = lines.get("vocab", "")
        ck.equal("%s hf info vocab line: %d, not tied [ASSUMED]: %r" % (self.tag, p["V"], voc),
                 (voc.startswith(str(p["V"])), "tied" in voc and "untied" not in voc), (True, False))
        blk = lines.get("block", "")
        want = ("parallel", "LayerNorm", "MLP gelu " if p["act"] == "gelu" else "MLP gelu_pytorch_tanh",
                "lm_head with a bias")
        ck.equal("%s hf info block line names %s [ASSUMED]: %r" % (self.tag, " / ".join(want), blk),
                 [w in blk + " " for w in want], [True] * len(want))
        claims = (("RMSNorm (rms_norm_eps)", r"rms_?norm"), ("a gated MLP ('MLP gate')", r"\bgate\b"),
                  ("a post_attention_layernorm / second norm", r"post_attention|ln_2"),
                  ("q/k/v / dense biases", r"biases on q/k/v|q/k/v_proj and dense|query_key_value and dense"))
        wrong = [w for w, pat in claims if re.search(pat, r.stdout, re.I)]
        ck.equal("%s hf info describes GPT-J's layout [ASSUMED]: claims of features GPT-J lacks" % self.tag,
                 wrong, [])
        return r.stdout


def refusal(ck, tag, cfg, T, needles, assumed="", rc=2, dtype="F32", also=None):
    """also: (what, needles) a second check on the same message (every needle must appear)"""
    write_folder(os.path.join(ck.work, tag), cfg, T, dtype)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--threads", 1], expect_rc=None)
    ok = r.returncode == rc and any(n in r.stderr for n in needles)
    ck.compared += 1
    if not ok:
        ck.fail("%s%s: expected exit %d naming %s; got exit %d, stderr %r" % (
            tag, assumed, rc, " or ".join(needles), r.returncode, r.stderr.strip()[-400:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("%s refused (exit %d)" % (tag, rc), r.stderr.strip()[:160]))
    if also is not None and r.returncode == rc:
        what, need = also
        ck.equal("%s: %s: %r" % (tag, what, r.stderr.strip()[-200:]), [n for n in need if n not in r.stderr], [])


# ---------------------------------------------------------------- export of trained models
EXPORT_BASE = {"architecture": "dense", "n_layers": 2, "qkv_bias": False, "o_bias": False, "mlp_bias": True,
               "norm": "layernorm", "mlp": "plain", "parallel_residual": True, "shared_input_norm": True,
               "lm_head_bias": True, "tie_word_embeddings": False, "max_seq_len": 64, "rope_theta": 10000.0}
EXPORT_MODELS = {
    "export-gptj-partial": dict(EXPORT_BASE, d_model=48, n_heads=4, n_kv_heads=4, ffn_hidden=64,
                                partial_rotary_factor=0.5, activation="gelu_pytorch_tanh", norm_eps=1e-5),
    "export-gptj-full-gelu": dict(EXPORT_BASE, d_model=32, n_heads=4, n_kv_heads=4, ffn_hidden=64,
                                  partial_rotary_factor=1.0, activation="gelu", norm_eps=1e-3)}


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


def gptj_expected_from_checkpoint(S, m):
    """the GPT-J tensors an export of checkpoint S (lol's names, rotate-half rows) must hold"""
    d, H, L = m["d_model"], m["n_heads"], m["n_layers"]
    hd = d // H
    rd = int(hd * m["partial_rotary_factor"])
    inv = inverse(half_perm(hd, rd))  # GPT-J row r <- half row inv[r]
    ren = {"model.embed_tokens.weight": "transformer.wte.weight", "lm_head.weight": "lm_head.weight",
           "lm_head.bias": "lm_head.bias", "model.norm.weight": "transformer.ln_f.weight",
           "model.norm.bias": "transformer.ln_f.bias"}
    for i in range(L):
        a, b = "model.layers.%d." % i, "transformer.h.%d." % i
        for y in ("weight", "bias"):
            ren[a + "input_layernorm." + y] = b + "ln_1." + y
            ren[a + "mlp.up_proj." + y] = b + "mlp.fc_in." + y
            ren[a + "mlp.down_proj." + y] = b + "mlp.fc_out." + y
        ren[a + "self_attn.v_proj.weight"] = b + "attn.v_proj.weight"
        ren[a + "self_attn.o_proj.weight"] = b + "attn.out_proj.weight"
    want, missing = {}, []
    for k_src, k_dst in ren.items():
        if k_src in S:
            want[k_dst] = (list(S[k_src][0]), list(S[k_src][1]))
        else:
            missing.append(k_src)
    F = m["ffn_hidden"]
    V = S["model.embed_tokens.weight"][0][0]
    for k_dst, n in (("mlp.fc_in.bias", F), ("mlp.fc_out.bias", d)):
        for i in range(L):
            want.setdefault("transformer.h.%d.%s" % (i, k_dst), ([n], [0.0] * n))
    want.setdefault("lm_head.bias", ([V], [0.0] * V))
    for i in range(L):
        a, b = "model.layers.%d.self_attn." % i, "transformer.h.%d.attn." % i
        for x in "qk":
            k = a + x + "_proj.weight"
            if k in S:
                want[b + x + "_proj.weight"] = (list(S[k][0]), permute_rows(S[k][1], d, H, hd, inv))
            else:
                missing.append(k)
    return want, missing, rd


def check_export(ck):
    """train tiny dense models of Phi's layout without attention biases for 3 steps, `lol export
    --hf --arch gptj`: config.json must describe the model in GPTJConfig's keys, the tensors must
    be the checkpoint's renamed bit for bit with the q / k rotary rows interleaved back, and `hf ppl
    --dtype float64` of the export must equal this reference on the exported tensors, which must
    compute the checkpoint's (rotate-half) model"""
    w = ck.work
    print("[export] dense models of Phi's layout without attention biases -> GPTJForCausalLM folders", flush=True)
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
        run = train_run(ck, tag, m, 3)
        if run is None:
            continue
        ckpt = os.path.join(w, run, open(os.path.join(w, run, "latest")).read().strip())
        S = read_st(os.path.join(ckpt, "model.safetensors"))
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "gptj"])
        if r.returncode != 0:
            continue
        cfg = json.load(open(os.path.join(w, tag, "config.json")))
        E = read_st(os.path.join(w, tag, "model.safetensors"))
        ck.equal("%s: architectures / model_type (--arch gptj)" % tag,
                 (cfg.get("architectures"), cfg.get("model_type")), (["GPTJForCausalLM"], "gptj"))
        d, H, L, F = m["d_model"], m["n_heads"], m["n_layers"], m["ffn_hidden"]
        hd = d // H
        try:
            p = gptj_params(cfg)
        except (KeyError, TypeError) as e:
            ck.fail("%s: config.json unreadable as GPTJConfig: %r" % (tag, e))
            continue
        keys = ("d", "L", "H", "P", "F", "rd", "act", "eps", "tied")
        got = {k: p[k] for k in keys}
        want = {"d": d, "L": L, "H": H, "P": m["max_seq_len"], "F": F, "rd": int(hd * m["partial_rotary_factor"]),
                "act": m["activation"], "eps": m["norm_eps"], "tied": False}
        if got["act"] in ("gelu_new", "gelu_fast") and want["act"] == "gelu_pytorch_tanh":
            got["act"] = want["act"]  # the same tanh GELU
        ck.equal("%s: config.json read as GPTJConfig (defaults for absent keys)" % tag, got, want)
        bad_keys = {k: cfg[k] for k in ("rope_scaling", "rope_parameters") if cfg.get(k) is not None}
        if cfg.get("rope_theta") not in (None, 10000, 10000.0):
            bad_keys["rope_theta"] = cfg["rope_theta"]
        ck.equal("%s: config.json has no RoPE keys GPT-J's loaders would refuse / ignore" % tag, bad_keys, {})
        want_t, missing, rd = gptj_expected_from_checkpoint(S, m)
        for k in missing:
            ck.note("%s: the checkpoint has no %s" % (tag, k))
        got_t = {k: (list(v[0]), list(v[1])) for k, v in E.items()}
        ck.equal("%s: tensor names (GPTJForCausalLM's)" % tag, sorted(got_t), sorted(want_t))
        diff = sorted(k for k in want_t if k in got_t and got_t[k] != want_t[k])
        ck.equal("%s: tensors = the checkpoint's, renamed bit for bit, q/k rotary rows interleaved back "
                 "(names differing)" % tag, diff, [])
        if any("q_proj" in k or "k_proj" in k for k in diff):
            k = next(k for k in diff if "q_proj" in k or "k_proj" in k)
            src = S[k.replace("transformer.h.", "model.layers.").replace(".attn.", ".self_attn.")][1]
            if got_t[k][1] == list(src):
                print("    %s: %s holds the checkpoint's rows unpermuted (rotate-half order)" % (tag, k))
            elif got_t[k][1] == permute_rows(src, d, H, hd, half_perm(hd, rd)):
                print("    %s: %s holds the rows permuted the other way (the loader's direction)" % (tag, k))
        try:
            model = GptjRef(cfg, got_t)
        except (KeyError, AssertionError) as e:
            ck.fail("%s: the exported tensors do not form a GPTJForCausalLM: %r" % (tag, e))
            continue
        # the export computes the trained model: PhiRef on the checkpoint (rotate-half, zero attention biases)
        pc = ph.phi_config(hidden_size=d, num_attention_heads=H, num_key_value_heads=H, intermediate_size=F,
                           num_hidden_layers=L, vocab_size=S["model.embed_tokens.weight"][0][0],
                           max_position_embeddings=m["max_seq_len"], hidden_act=m["activation"],
                           layer_norm_eps=m["norm_eps"], rope_theta=10000.0, _name_or_path=ph.DROP)
        PT = {}
        ren = {"model.norm.weight": "model.final_layernorm.weight", "model.norm.bias": "model.final_layernorm.bias"}
        for k, (sh, v, _) in S.items():
            k2 = ren.get(k, k).replace("self_attn.o_proj", "self_attn.dense").replace(
                "mlp.up_proj", "mlp.fc1").replace("mlp.down_proj", "mlp.fc2")
            PT[k2] = (list(sh), list(v))
        for i in range(L):
            b = "model.layers.%d." % i
            for x in ("q_proj", "k_proj", "v_proj", "dense"):
                PT.setdefault(b + "self_attn.%s.bias" % x, ([d], [0.0] * d))
        try:
            trained = ph.PhiRef(pc, PT, rd=rd)
            a_, _ = mean_ce(trained, wins)
            b_, _ = mean_ce(model, wins)
            ck.close("%s: this reference on the export = PhiRef on the checkpoint (the trained model), loss_sum"
                     % tag, b_, a_, 1e-10)
        except (KeyError, AssertionError) as e:
            ck.note("%s: the checkpoint could not be read as a Phi model (%r): the export's function not "
                    "compared with the checkpoint's" % (tag, e))
        out = os.path.join(w, "ppl_%s.json" % tag)
        r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", out,
                    "--threads", 1])
        tot, cnt = mean_ce(model, wins)
        if r.returncode == 0:
            res = json.load(open(out))
            ck.equal("%s hf ppl --context 64: targets" % tag, res.get("targets"), cnt)
            ck.close("%s hf ppl --dtype float64 --context 64: loss_sum" % tag, res.get("loss_sum"), tot,
                     TOL["float64"])
            ck.close("%s hf ppl --dtype float64 --context 64: bits_per_byte" % tag, res.get("bits_per_byte"),
                     tot / math.log(2) / cnt, TOL["float64"])
        # the default --arch of the same checkpoint: PhiForCausalLM, the same function
        tagd = tag + "-default-arch"
        shutil.rmtree(os.path.join(w, tagd), ignore_errors=True)
        r = ck.run(["export", "--hf", run, "--out", tagd])
        if r.returncode == 0:
            cd = json.load(open(os.path.join(w, tagd, "config.json")))
            ck.equal("%s: architectures (the default --arch of Phi's layout)" % tagd, cd.get("architectures"),
                     ["PhiForCausalLM"])
            out = os.path.join(w, "ppl_%s.json" % tagd)
            r = ck.run(["hf", "ppl", tagd, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out",
                        out, "--threads", 1])
            if r.returncode == 0:
                ck.close("%s hf ppl --dtype float64: loss_sum = this reference on the GPT-J export" % tagd,
                         json.load(open(out)).get("loss_sum"), tot, TOL["float64"])
    # a model without MLP / lm_head biases: zero biases written, the same function
    base = dict(EXPORT_MODELS["export-gptj-partial"], n_layers=1)
    tag = "export-gptj-zero-mlp-lm_head-bias"
    shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
    run = train_run(ck, tag, dict(base, mlp_bias=False, lm_head_bias=False), 1)
    if run is not None:
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "gptj"])
        if r.returncode == 0:
            cfg = json.load(open(os.path.join(w, tag, "config.json")))
            E = read_st(os.path.join(w, tag, "model.safetensors"))
            kinds = ["mlp.fc_in.bias", "mlp.fc_out.bias", "lm_head.bias"]
            zeros = sorted(k for k in E if any(k.endswith(x) for x in kinds))
            ck.equal("%s: zero biases written (%d tensors)" % (tag, len(zeros)),
                     [k for k in zeros if any(v != 0.0 for v in E[k][1])], [])
            ck.equal("%s: a bias of each missing kind is written" % tag,
                     sorted(x for x in kinds if not any(k.endswith(x) for k in zeros)), [])
            out = os.path.join(w, "ppl_%s.json" % tag)
            r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out",
                        out, "--threads", 1])
            if r.returncode == 0:
                try:
                    tot, cnt = mean_ce(GptjRef(cfg, {k: (v[0], v[1]) for k, v in E.items()}), wins)
                    ck.close("%s hf ppl --dtype float64 --context 64: loss_sum" % tag,
                             json.load(open(out)).get("loss_sum"), tot, TOL["float64"])
                except (KeyError, AssertionError) as e:
                    ck.fail("%s: the exported tensors do not form a GPTJForCausalLM: %r" % (tag, e))
    # models GPTJForCausalLM cannot hold: --arch gptj refused naming the field, nothing left
    neox = {k: v for k, v in base.items() if k not in ("shared_input_norm", "lm_head_bias")}
    seq = {k: v for k, v in base.items() if k not in ("shared_input_norm", "parallel_residual")}
    llama = {k: base[k] for k in ("architecture", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden",
                                  "max_seq_len", "tie_word_embeddings")}
    for tag, model, needles in (
            ("export-gptj-refuse-qkv_bias", dict(base, qkv_bias=True), ["qkv_bias"]),
            ("export-gptj-refuse-o_bias", dict(base, o_bias=True), ["o_bias"]),
            ("export-gptj-refuse-gqa", dict(base, n_kv_heads=2), ["n_kv_heads"]),
            ("export-gptj-refuse-tied", dict(base, tie_word_embeddings=True, lm_head_bias=False),
             ["tie_word_embeddings"]),
            ("export-gptj-refuse-rope_theta", dict(base, rope_theta=500.0), ["rope_theta"]),
            ("export-gptj-refuse-two-norms", neox, ["shared_input_norm", "post_attention_layernorm"]),
            ("export-gptj-refuse-sequential", seq, ["parallel_residual", "shared_input_norm"]),
            ("export-gptj-refuse-rmsnorm-gated", llama, ["norm", "mlp", "gate", "RMSNorm", "rmsnorm"])):
        shutil.rmtree(os.path.join(w, tag), ignore_errors=True)
        run = train_run(ck, tag, model, 1)
        if run is None:
            continue
        r = ck.run(["export", "--hf", run, "--out", tag, "--arch", "gptj"], expect_rc=None)
        ck.compared += 1
        left = os.path.exists(os.path.join(w, tag))
        if r.returncode != 2 or not any(n in r.stderr for n in needles) or left:
            ck.fail("%s: expected exit 2 naming %s and no %s folder left; got exit %d (folder left: %s), %r" % (
                tag, " or ".join(needles), tag, r.returncode, left, r.stderr.strip()[-300:]))
        elif ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))


# ---------------------------------------------------------------- loaded folders written back (layerroute merge)
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '<|endoftext|>' }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}")
LR_SAMPLES = [{"question": "the %d" % i, "answer": "then %d the" % (i * 7)} for i in range(8)]


def gptj_modules(cfg):
    """GPTJForCausalLM's named_modules() (as PEFT walks them; ASSUMED from the transformers code
    as remembered): path -> (out_features, in_features) of each nn.Linear, None for the others"""
    p = gptj_params(cfg)
    d, F, L = p["d"], p["F"], p["L"]
    mods = {k: None for k in ("transformer", "transformer.wte", "transformer.drop", "transformer.h",
                              "transformer.ln_f")}
    mods["lm_head"] = (p["V"], d)
    for i in range(L):
        b = "transformer.h.%d" % i
        for k in ("", ".ln_1", ".attn", ".attn.attn_dropout", ".attn.resid_dropout", ".mlp", ".mlp.act",
                  ".mlp.dropout"):
            mods[b + k] = None
        for x in ("q_proj", "k_proj", "v_proj", "out_proj"):
            mods[b + ".attn." + x] = (d, d)
        mods[b + ".mlp.fc_in"] = (F, d)
        mods[b + ".mlp.fc_out"] = (d, F)
    return mods


def peft_selects(path, target_modules):
    """PEFT's check_target_module_exists: a string is a regular expression fullmatched against the
    module path; a list entry matches a path equal to it or ending with "." + entry"""
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, path) is not None
    return path in target_modules or any(path.endswith("." + t) for t in target_modules)


def peft_pattern(pattern, path, default):
    """rank_pattern / alpha_pattern: the value of the first key matching the module path (PEFT's
    get_pattern_key: the key equal to the path, else re.match("(.*[.])?KEY$"); ASSUMED)"""
    pattern = pattern or {}
    if path in pattern:
        return pattern[path]
    for k, v in pattern.items():
        if re.match(r"(.*\.)?%s$" % k, path):
            return v
    return default


def check_peft_files(ck, tag, adapter, modules, arch, want_modules):
    """the adapter directory as PEFT reads it on the base's Hugging Face class (docs/layerroute.md
    "The adapter as PEFT's"): layerroute.json's peft_architecture; every tensor named
    base_model.model.{module}.lora_{A,B}.weight for a Linear module of the class, A [r_m, in] and
    B [out, r_m]; adapter_config.json's target_modules selecting (PEFT's matching rule, over every
    named module) exactly the modules holding tensors; r / lora_alpha / rank_pattern /
    alpha_pattern giving each module the scale layerroute.json's alpha / rank; fan_in_fan_out
    false (nn.Linear); nothing asking PEFT for another computation"""
    lj = json.load(open(os.path.join(adapter, "layerroute.json")))
    ac = json.load(open(os.path.join(adapter, "adapter_config.json")))
    St = read_st(os.path.join(adapter, "adapter_model.safetensors"))
    ck.equal("%s: layerroute.json peft_architecture" % tag, lj.get("peft_architecture"), arch)
    held, odd = {}, []
    for k in St:
        m = re.fullmatch(r"base_model\.model\.(.+)\.lora_([AB])\.weight", k)
        if not m:
            odd.append(k)
            continue
        held.setdefault(m.group(1), {})[m.group(2)] = St[k]
    ck.equal("%s: adapter tensors named base_model.model.{module}.lora_{A,B}.weight (others)" % tag, odd, [])
    ck.equal("%s: modules holding adapter tensors = %d expected modules of %s" % (tag, len(want_modules), arch),
             sorted(held), sorted(want_modules))
    ck.equal("%s: modules holding tensors that are not Linear modules of %s" % (tag, arch),
             sorted(m for m in held if modules.get(m) is None), [])
    tm = ac.get("target_modules")
    sel = sorted(m for m in modules if tm is not None and peft_selects(m, tm))
    ck.equal("%s: adapter_config.json target_modules %s selects (PEFT's rule, every named module) exactly the "
             "modules holding tensors" % (tag, json.dumps(tm)), sel, sorted(held))
    rank, alpha = lj["lora"]["rank"], lj["lora"]["alpha"]
    ck.equal("%s: adapter_config.json peft_type, r, lora_alpha (layerroute.json's rank / alpha)" % tag,
             (ac.get("peft_type"), ac.get("r"), float(ac.get("lora_alpha", float("nan")))),
             ("LORA", rank, float(alpha)))
    ck.equal("%s: adapter_config.json fan_in_fan_out false (nn.Linear), bias none, no rslora / dora / "
             "layers_to_transform / modules_to_save" % tag,
             (bool(ac.get("fan_in_fan_out", False)), ac.get("bias", "none"), bool(ac.get("use_rslora", False)),
              bool(ac.get("use_dora", False)), ac.get("layers_to_transform"), ac.get("modules_to_save")),
             (False, "none", False, False, None, None))
    badshape, badscale = [], []
    for m, ab in sorted(held.items()):
        if "A" not in ab or "B" not in ab or modules.get(m) is None:
            badshape.append(m)
            continue
        r_m = peft_pattern(ac.get("rank_pattern"), m, ac.get("r"))
        a_m = peft_pattern(ac.get("alpha_pattern"), m, ac.get("lora_alpha"))
        out, inn = modules[m]
        if list(ab["A"][0]) != [r_m, inn] or list(ab["B"][0]) != [out, r_m]:
            badshape.append("%s A %s B %s (want [%s, %d], [%d, %s])" % (m, ab["A"][0], ab["B"][0], r_m, inn, out, r_m))
        if not r_m or abs(a_m / r_m - alpha / rank) > 1e-12 * abs(alpha / rank):
            badscale.append("%s %s/%s" % (m, a_m, r_m))
    ck.equal("%s: lora_A [r_m, in] / lora_B [out, r_m] of each module's Linear (r_m from rank_pattern)" % tag,
             badshape, [])
    ck.equal("%s: each module's PEFT scale alpha_m / r_m (alpha_pattern / rank_pattern) = alpha / rank %g"
             % (tag, alpha / rank), badscale, [])
    return lj


def fold_lora_tensors(cfg, T, St, sc, rows="gptj"):
    """T with the adapter tensors St (PEFT's names on GPTJForCausalLM) folded in float64: PEFT's
    W + sc (B A) with B A's rows in GPT-J's own order (rows "gptj", docs/layerroute.md "The
    adapter as PEFT's"); rows "reordered", the alternative reading (the layout before
    peft_architecture): q_proj / k_proj B A rows in lol's rotate-half order, GPT-J row r of a head
    taking delta row inv(half_perm)[r], i.e. P^-1 (B A)"""
    p = gptj_params(cfg)
    H, hd, rd = p["H"], p["hd"], p["rd"]
    F = {k: (list(v[0]), list(v[1])) for k, v in T.items()}
    inv = inverse(half_perm(hd, rd))
    touched = []
    for k in sorted(St):
        if not k.endswith(".lora_A.weight"):
            continue
        m = re.fullmatch(r"base_model\.model\.transformer\.h\.(\d+)\.(attn\.(?:q|k|v|out)_proj|mlp\.fc_(?:in|out))"
                         r"\.lora_A\.weight", k)
        if not m:
            raise KeyError("adapter tensor %s is not PEFT's name of a GPTJForCausalLM projection" % k)
        name = "transformer.h.%s.%s.weight" % (m.group(1), m.group(2))
        ba = q2.matmul(q2.mat(St[k.replace("lora_A", "lora_B")]), q2.mat(St[k]))
        if rows == "reordered" and m.group(2) in ("attn.q_proj", "attn.k_proj"):
            ba = [ba[h * hd + inv[r]] for h in range(H) for r in range(hd)]
        shape, vals = F[name]
        c = shape[1]
        F[name] = (shape, [v + sc * ba[i // c][i % c] for i, v in enumerate(vals)])
        touched.append(name)
    return F, touched


def fold_lora(cfg, T, adapter, rows="gptj"):
    """fold_lora_tensors of an adapter directory (scale layerroute.json's alpha / rank)"""
    lj = json.load(open(os.path.join(adapter, "layerroute.json")))
    sc = lj["lora"]["alpha"] / lj["lora"]["rank"]
    return fold_lora_tensors(cfg, T, read_st(os.path.join(adapter, "adapter_model.safetensors")), sc, rows)


def random_gptj_lora(cfg, seed, rank=4, mods=("attn.q_proj", "attn.k_proj", "mlp.fc_out")):
    """random PEFT tensors on GPTJForCausalLM's modules (selftest)"""
    rng = random.Random(seed)
    lin = gptj_modules(cfg)
    St = {}
    for i in range(gptj_params(cfg)["L"]):
        for x in mods:
            path = "transformer.h.%d.%s" % (i, x)
            out, inn = lin[path]
            St["base_model.model.%s.lora_A.weight" % path] = (
                [rank, inn], [f32(rng.gauss(0, 1.0 / math.sqrt(inn))) for _ in range(rank * inn)], "F32")
            St["base_model.model.%s.lora_B.weight" % path] = (
                [out, rank], [f32(rng.gauss(0, 0.15)) for _ in range(out * rank)], "F32")
    return St


def check_merge(ck, ids):
    """GPT-J folders loaded by lol and written back by `layerroute merge` (the command-line route
    for a loaded folder): bit for bit with a zero LoRA, GPT-J and Phi layouts; the adapter files
    as PEFT's on GPTJForCausalLM (names, adapter_config.json, peft_architecture) and the LoRA
    folded by PEFT's rule W + alpha/r B A with B's q / k rows in GPT-J's own order"""
    w = ck.work
    print("[layerroute merge] loaded GPT-J folders written back", flush=True)
    with open(os.path.join(w, "lr_gptj.jsonl"), "w") as f:
        for s_ in LR_SAMPLES:
            f.write(json.dumps(s_) + "\n")
    tab = case_table()
    wins = windows(ids, 64)
    train = ["--data", "lr_gptj.jsonl", "--batch", 2, "--accum", 1, "--system", "", "--max-len", 64, "--rank", 4,
             "--threads", 1, "--no-progress"]

    def fresh(*names):
        for n in names:
            shutil.rmtree(os.path.join(w, n), ignore_errors=True)

    # 1. a zero LoRA (--lr 0: B stays 0) on case D's model (BF16 storage, rotary 8 of 12)
    cfgD, sd, kw = tab["D"]
    TD = store(gptj_weights(cfgD, sd, **kw), "BF16")
    base = "lr-base-gptj-bf16"
    fresh(base, "lr-zero", "lr-zero-gptj", "lr-zero-phi", "lr-zero-default")
    write_folder(os.path.join(w, base), cfgD, TD, "BF16", CHAT_TEMPLATE)
    src = GptjRef(cfgD, TD)
    src_loss, cnt = mean_ce(src, wins)
    r = ck.run(["layerroute", "train", "--base", base, "--out", "lr-zero", "--steps", 2, "--lr", 0,
                "--targets", "q_proj,k_proj,down_proj"] + train)
    if r.returncode == 0:
        check_peft_files(ck, "lr-zero (targets q_proj,k_proj,down_proj) adapter files", os.path.join(w, "lr-zero"),
                         gptj_modules(cfgD), "GPTJForCausalLM",
                         ["transformer.h.%d.%s" % (i, x) for i in range(cfgD["n_layer"])
                          for x in ("attn.q_proj", "attn.k_proj", "mlp.fc_out")])
        for arch, out in (("gptj", "lr-zero-gptj"), ("phi", "lr-zero-phi"), (None, "lr-zero-default")):
            r = ck.run(["layerroute", "merge", "--adapter", "lr-zero", "--out", out] +
                       (["--arch", arch] if arch else []))
            if r.returncode != 0:
                continue
            mc = json.load(open(os.path.join(w, out, "config.json")))
            mT = {k: (list(v[0]), list(v[1])) for k, v in q2.read_folder_weights(os.path.join(w, out)).items()}
            got_arch = (mc.get("architectures") or [None])[0]
            what = "layerroute merge %s of a zero LoRA on %s" % ("--arch " + arch if arch else "(default --arch)", base)
            if arch is None:
                ck.equal(what + ": GPTJForCausalLM (the base's, docs/layerroute.md) or PhiForCausalLM "
                         "(docs/hf.md GPT-J's export default)", got_arch in ("GPTJForCausalLM", "PhiForCausalLM"),
                         True)
                ck.note("%s writes %s" % (what, got_arch))
            if got_arch == "GPTJForCausalLM":
                if arch is not None:
                    ck.equal(what + ": architectures / model_type", (mc.get("architectures"), mc.get("model_type")),
                             (["GPTJForCausalLM"], "gptj"))
                p = gptj_params(mc)
                ck.equal(what + ": config.json read as GPTJConfig",
                         {k: p[k] for k in ("d", "L", "H", "P", "F", "rd", "eps", "tied")},
                         {k: src.p[k] for k in ("d", "L", "H", "P", "F", "rd", "eps", "tied")})
                want = {k: (list(v[0]), list(v[1])) for k, v in TD.items()}
                ck.equal(what + ": tensor names = the source's", sorted(mT), sorted(want))
                ck.equal(what + ": tensors = the source's bit for bit (names differing)",
                         sorted(k for k in want if k in mT and mT[k] != want[k]), [])
                try:
                    model = GptjRef(mc, mT)
                except (KeyError, AssertionError) as e:
                    ck.fail("%s: not a GPTJForCausalLM: %r" % (what, e))
                    continue
            elif got_arch == "PhiForCausalLM":
                if arch is not None:
                    ck.equal(what + ": architectures / model_type", (mc.get("architectures"), mc.get("model_type")),
                             (["PhiForCausalLM"], "phi"))
                pp = ph.phi_params(mc)
                ck.equal(what + ": config.json read as PhiConfig (int(head_dim * partial_rotary_factor) = "
                         "rotary_dim %d)" % src.rd,
                         {k: pp[k] for k in ("d", "L", "H", "KV", "P", "F", "rd", "base", "scaling", "eps", "tied",
                                             "qk_ln")},
                         {"d": src.d, "L": src.L, "H": src.H, "KV": src.H, "P": src.P, "F": src.p["F"], "rd": src.rd,
                          "base": 10000.0, "scaling": None, "eps": src.p["eps"], "tied": False, "qk_ln": False})
                zb = sorted(k for k in mT if re.search(r"self_attn\.(q_proj|k_proj|v_proj|dense)\.bias$", k)
                            and any(v != 0.0 for v in mT[k][1]))
                ck.equal(what + ": q/k/v / dense biases zero", zb, [])
                _, want, _ = phi_equivalent(cfgD, TD)
                ck.equal(what + ": tensor names = PhiForCausalLM's", sorted(mT), sorted(want))
                ck.equal(what + ": tensors = the source's renamed, q/k rotary rows reordered (names differing)",
                         sorted(k for k in want if k in mT and mT[k] != want[k]), [])
                try:
                    model = ph.PhiRef(mc, mT)
                except (KeyError, AssertionError) as e:
                    ck.fail("%s: not a PhiForCausalLM: %r" % (what, e))
                    continue
            else:
                ck.fail("%s: architectures %r" % (what, mc.get("architectures")))
                continue
            a_, _ = mean_ce(model, wins)
            ck.close(what + ": the merged folder's function (its config.json as transformers reads it) = the "
                     "source's, loss_sum", a_, src_loss, 1e-10)
            res = os.path.join(w, "ppl_%s.json" % out)
            r = ck.run(["hf", "ppl", out, "--data", "text.txt", "--context", 64, "--dtype", "float64", "--out", res,
                        "--threads", 1])
            if r.returncode == 0:
                ck.close(what + ": hf ppl --dtype float64 loss_sum", json.load(open(res)).get("loss_sum"), src_loss,
                         TOL["float64"])

    # 2. a trained LoRA on q_proj, k_proj, down_proj of case A's model (rotary 6 of 12)
    cfgA, sd, kw = tab["A"]
    TA = gptj_weights(cfgA, sd, **kw)
    base = "lr-base-gptj-partial"
    fresh(base, "lr-qk", "lr-qk-gptj")
    write_folder(os.path.join(w, base), cfgA, with_buffers(TA, cfgA), "F32", CHAT_TEMPLATE)
    r = ck.run(["layerroute", "train", "--base", base, "--out", "lr-qk", "--steps", 3, "--lr", 0.01,
                "--targets", "q_proj,k_proj,down_proj"] + train)
    if r.returncode != 0:
        return
    check_peft_files(ck, "lr-qk (targets q_proj,k_proj,down_proj) adapter files", os.path.join(w, "lr-qk"),
                     gptj_modules(cfgA), "GPTJForCausalLM",
                     ["transformer.h.%d.%s" % (i, x) for i in range(cfgA["n_layer"])
                      for x in ("attn.q_proj", "attn.k_proj", "mlp.fc_out")])
    try:
        Fd, touched = fold_lora(cfgA, TA, os.path.join(w, "lr-qk"))
        Fg, _ = fold_lora(cfgA, TA, os.path.join(w, "lr-qk"), rows="reordered")
    except (KeyError, OSError, ValueError) as e:
        ck.fail("lr-qk: the adapter could not be read: %r" % (e,))
        return
    adapted = GptjRef(cfgA, Fd)
    other = GptjRef(cfgA, Fg)
    ck.equal("lr-qk: the LoRA touches q_proj, k_proj and fc_out of every layer (%d tensors)" % len(touched),
             sorted(set(re.sub(r"\.\d+\.", ".", t) for t in touched)),
             ["transformer.h.attn.k_proj.weight", "transformer.h.attn.q_proj.weight",
              "transformer.h.mlp.fc_out.weight"])
    r = ck.run(["layerroute", "merge", "--adapter", "lr-qk", "--out", "lr-qk-gptj", "--arch", "gptj"])
    if r.returncode == 0:
        mc = json.load(open(os.path.join(w, "lr-qk-gptj", "config.json")))
        mT = {k: (list(v[0]), list(v[1])) for k, v in q2.read_folder_weights(os.path.join(w, "lr-qk-gptj")).items()}
        what = "layerroute merge --arch gptj of a LoRA on q/k/down_proj"
        ck.equal(what + ": architectures", mc.get("architectures"), ["GPTJForCausalLM"])
        buf = sorted(k for k in mT if re.search(r"attn\.(bias|masked_bias)$", k))
        if buf:
            ck.note("%s: the source's old buffers are written back (%d tensors)" % (what, len(buf)))
            mT = {k: v for k, v in mT.items() if k not in buf}
        ck.equal(what + ": tensor names = the source's parameters", sorted(mT), sorted(TA))
        ck.equal(what + ": untouched tensors bit for bit (names differing)",
                 sorted(k for k in TA if k not in touched and k in mT and mT[k][1] != TA[k][1]), [])
        worst, wname, worst_g = 0.0, None, 0.0
        for k in touched:
            if k in mT:
                scale = max(abs(v) for v in Fd[k][1]) or 1.0
                e = max(abs(a - b) for a, b in zip(mT[k][1], Fd[k][1])) / scale
                eg = max(abs(a - b) for a, b in zip(mT[k][1], Fg[k][1])) / scale
                if e > worst:
                    worst, wname = e, k
                worst_g = max(worst_g, eg)
        ok = ck.close(what + ": folded tensors = PEFT's W + alpha/r B A (q / k rows in GPT-J's order), max |merged - "
                      "float64 fold| / max |W'| (worst %s)" % wname, worst, 0.0, 0, 1e-6)
        ck.equal(what + ": (reference) the trained adapter's two q / k row readings differ by > 1e-4 of max |W'| "
                 "(the check can see the row order; %.2e)" % worst_g, worst_g > 1e-4, True)
        if not ok:
            print("    against the reading 'q / k B A rows in lol's reordered (rotate-half) order, P^-1 (B A)': max "
                  "rel %.2e%s" % (worst_g, "   <-- lol matches" if worst_g < 1e-6 else ""))
        try:
            mref = GptjRef(mc, mT)
            a_, _ = mean_ce(mref, wins)
            b_, _ = mean_ce(adapted, wins)
            ck.close(what + ": the merged folder's loss_sum = the adapted model's (float32 rounding of the fold)",
                     a_, b_, 1e-6)
            res = os.path.join(w, "ppl_lr-qk-gptj.json")
            r = ck.run(["hf", "ppl", "lr-qk-gptj", "--data", "text.txt", "--context", 64, "--dtype", "float64",
                        "--out", res, "--threads", 1])
            if r.returncode == 0:
                ck.close(what + ": hf ppl --dtype float64 loss_sum = this reference on the merged tensors",
                         json.load(open(res)).get("loss_sum"), a_, TOL["float64"])
        except (KeyError, AssertionError) as e:
            ck.fail("%s: not a GPTJForCausalLM: %r" % (what, e))
    # the adapter on the base as lol runs it (all layers open): greedy ids of this reference on the fold
    for prompt, n in ((ids[:6], 20), (ids[60:90], 20)):
        r = ck.run(["layerroute", "generate", "--adapter", "lr-qk", "--gates", "open", "--tokens",
                    ",".join(map(str, prompt)), "--ids", "--no-stop", "--max-new", n, "--threads", 1])
        if r.returncode != 0:
            continue
        got = parse_ids(r.stdout)
        toks, gaps = adapted.greedy(prompt, n)
        nf = len(ck.failures)
        compare_greedy(ck, "lr-qk layerroute generate --gates open (%d prompt ids, %d new): the adapted model"
                       % (len(prompt), n), got, toks, gaps, True)
        if len(ck.failures) > nf:
            print("    reference %s\n    lol       %s\n    reading 'q / k B A rows reordered, P^-1 (B A)': %s%s" % (
                toks, got, other.greedy(prompt, n)[0],
                "   <-- lol matches" if other.greedy(prompt, n)[0] == got else ""))


# ---------------------------------------------------------------- check
STOP_PROMPT = None
STOP_BIAS = [6.0]


def stop_case():
    """a folder whose greedy continuation reaches <|endoftext|> 258: B's config with
    lm_head.bias[258] raised"""
    global STOP_PROMPT
    cfg = case_table()["B"][0]
    T = dict(gptj_weights(cfg, 811, emb_std=0.3))
    sh, v = T["lm_head.bias"]
    v = list(v)
    v[EOT] = STOP_BIAS[0]
    T["lm_head.bias"] = (sh, v)
    STOP_PROMPT = encode("Then the ")
    return cfg, T


def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    tab = case_table()
    W = {k: gptj_weights(cfg, sd, **kw) for k, (cfg, sd, kw) in tab.items()}

    # A: gpt-j-6b's config keys, partial rotary 6 of 12, n_inner null, old buffers
    c = Case(ck, NAMES["A"], tab["A"][0], W["A"], buffers=BUFFERS["A"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[60:100], 20)
    c.generate(ids[60:100], 20, "float32")
    ptext = "Then the thin thrush"
    c.generate(encode(ptext), 25, text=ptext)
    c.generate(ids[100:150], 30, expect_n=64 - 50)
    c.info()

    # B: full rotary, exact gelu, eps 1e-3, rope_theta 10000 given
    c = Case(ck, NAMES["B"], tab["B"][0], W["B"])
    c.ppl(ids, 0)
    c.ppl(ids, 9)
    c.ppl(ids, 64, "float32")
    c.generate(ids[:4], 30)
    c.generate(ids[30:70], 20)
    c.generate(ids[30:70], 20, "float32")
    c.info()

    # C: F16 storage, gelu_fast, the buffers of a float16 save
    c = Case(ck, NAMES["C"], tab["C"][0], W["C"], dtype="F16", buffers=BUFFERS["C"])
    c.ppl(ids, 0)
    c.generate(ids[30:62], 25)
    c.info()

    # D: BF16 storage, rotary 8 of 12, gelu_pytorch_tanh, rope_scaling null
    c = Case(ck, NAMES["D"], tab["D"][0], W["D"], dtype="BF16")
    c.ppl(ids, 0)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16")
    c.generate(ids[10:40], 25)
    c.info()

    # E: GPTJConfig's defaults (rotary_dim 64 of 64, n_inner 4 n_embd, gelu_new, eps 1e-5)
    c = Case(ck, NAMES["E"], tab["E"][0], W["E"])
    c.ppl(ids, 0)
    c.generate(ids[10:40], 25)
    c.info()

    # stop at EOS without --no-stop
    cfgS, TS = stop_case()
    c = Case(ck, "gptj-stop-at-eos", cfgS, TS)
    c.generate_stop(STOP_PROMPT, 30)

    # refusals
    print("[refusals]", flush=True)
    base = gptj_config(n_layer=2)
    Ts = gptj_weights(base, 7)
    refusal(ck, "refuse-rotary_dim-null", dict(base, rotary_dim=None), Ts, ["rotary_dim"])
    refusal(ck, "refuse-rotary_dim-odd", dict(base, rotary_dim=5), Ts, ["rotary_dim"])
    refusal(ck, "refuse-rotary_dim-above-head_dim", dict(base, rotary_dim=14), Ts, ["rotary_dim"])
    refusal(ck, "refuse-rotary_dim-0", dict(base, rotary_dim=0), Ts, ["rotary_dim"],
            " (ASSUMED: docs' 'even, in [2, head_dim]')")
    refusal(ck, "refuse-rotary_dim-default-64-above-head_dim", gptj_config(n_layer=2, rotary_dim=DROP), Ts,
            ["rotary_dim"])
    refusal(ck, "refuse-tie_word_embeddings", dict(base, tie_word_embeddings=True), Ts, ["tie_word_embeddings"])
    refusal(ck, "refuse-rope_scaling", dict(base, rope_scaling={"type": "linear", "factor": 2.0}), Ts,
            ["rope_scaling"])
    refusal(ck, "refuse-rope_parameters", dict(base, rope_parameters={"rope_type": "default", "rope_theta": 500.0}),
            Ts, ["rope_parameters", "rope_theta"])
    refusal(ck, "refuse-rope_theta-500", dict(base, rope_theta=500.0), Ts, ["rope_theta"])
    refusal(ck, "refuse-relu", dict(base, activation_function="relu"), Ts, ["activation_function"])
    refusal(ck, "refuse-quantization_config", dict(base, quantization_config={"quant_method": "bitsandbytes"}),
            Ts, ["quantization_config"])
    refusal(ck, "refuse-missing-n_embd", gptj_config(n_layer=2, n_embd=DROP), Ts, ["n_embd"])
    c36 = dict(base, n_embd=36, n_head=4, rotary_dim=4)
    refusal(ck, "refuse-head_dim-odd", c36, gptj_weights(c36, 7), ["n_head", "n_embd", "head_dim"])
    T = dict(Ts)
    T["transformer.h.0.attn.q_proj.bias"] = ([48], [0.1] * 48)
    refusal(ck, "refuse-unexpected-q_proj-bias", base, T, ["transformer.h.0.attn.q_proj.bias"])
    T = dict(Ts)
    T["transformer.h.1.attn.out_proj.bias"] = ([48], [0.1] * 48)
    refusal(ck, "refuse-unexpected-out_proj-bias", base, T, ["transformer.h.1.attn.out_proj.bias"])
    T = dict(Ts)
    T["transformer.h.1.ln_2.weight"] = Ts["transformer.h.1.ln_1.weight"]
    refusal(ck, "refuse-unexpected-ln_2", base, T, ["transformer.h.1.ln_2.weight"])
    T = dict(Ts)
    del T["transformer.h.1.attn.k_proj.weight"]
    refusal(ck, "refuse-missing-k_proj", base, T, ["transformer.h.1.attn.k_proj.weight"])
    T = dict(Ts)
    del T["transformer.h.0.mlp.fc_out.bias"]
    refusal(ck, "refuse-missing-fc_out-bias", base, T, ["transformer.h.0.mlp.fc_out.bias"])
    T = dict(Ts)
    del T["lm_head.bias"]
    refusal(ck, "refuse-missing-lm_head-bias", base, T, ["lm_head.bias"])
    T = dict(Ts)
    del T["lm_head.weight"]
    refusal(ck, "refuse-missing-lm_head-weight", base, T, ["lm_head.weight"])
    T = dict(Ts)
    sh, v = T["transformer.h.0.mlp.fc_in.weight"]
    T["transformer.h.0.mlp.fc_in.weight"] = ([sh[1], sh[0]], v)
    refusal(ck, "refuse-fc_in-transposed", base, T, ["transformer.h.0.mlp.fc_in.weight"],
            also=("the message names GPT-J's config fields that set the shape (docs/hf.md: 'a shape mismatch "
                  "(the message names the config fields that set the shape)'), fields not named", ["n_inner", "n_embd"]))
    _, TP, _ = phi_equivalent(base, Ts)
    refusal(ck, "refuse-phi-names", base, TP, ["transformer.wte.weight", "model.embed_tokens.weight",
                                               "model.layers"])

    check_export(ck)
    check_merge(ck, ids)

    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


# ---------------------------------------------------------------- selftest
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
    # gpt-j-6b (docs/hf.md: 6,050,882,784)
    g6 = gptj_config(vocab_size=50400, n_embd=4096, n_layer=28, n_head=16, rotary_dim=64, n_positions=2048)
    if param_count(g6) != 6050882784:
        bad.append("gpt-j-6b param count %d" % param_count(g6))
    p6 = gptj_params(g6)
    if (p6["F"], p6["hd"], p6["rd"]) != (16384, 256, 64):
        bad.append("gpt-j-6b read as %s" % p6)
    tab = case_table()
    for tag, (cfg, sd, wkw) in tab.items():
        n = sum(len(v[1]) for v in gptj_weights(cfg, sd, **wkw).values())
        if param_count(cfg) != n:
            bad.append("%s: param_count %d != stored %d" % (tag, param_count(cfg), n))
    want = {"A": (6, 12, 192, "gelu_new", 1e-5), "B": (8, 8, 64, "gelu", 1e-3), "C": (4, 16, 96, "gelu_fast", 1e-5),
            "D": (8, 12, 64, "gelu_pytorch_tanh", 1e-5), "E": (64, 64, 512, "gelu_new", 1e-5)}
    for tag, w_ in want.items():
        p = gptj_params(tab[tag][0])
        if (p["rd"], p["hd"], p["F"], p["act"], p["eps"]) != w_:
            bad.append("case %s read as %s, not %s" % (tag, (p["rd"], p["hd"], p["F"], p["act"], p["eps"]), w_))
    pe = gptj_params(tab["E"][0])
    if (pe["tied"], gptj_params({k: v for k, v in tab["E"][0].items() if "token" not in k})["eos"]) != (False, 50256):
        bad.append("GPTJConfig defaults (tie, eos) read wrong")
    # RoPE: inv_freq, the interleaved rotation = complex rotation of (x_2i + i x_2i+1)
    if gptj_inv_freq(8) != [f32(v) for v in (1.0, 0.1, 0.01, 0.001)]:
        bad.append("inv_freq(8) %s" % gptj_inv_freq(8))
    if gptj_inv_freq(4) != [1.0, f32(0.01)]:
        bad.append("inv_freq(4) %s" % gptj_inv_freq(4))
    inv = gptj_inv_freq(6)
    if max(abs(v - 10000.0 ** (-2 * i / 6)) / v for i, v in enumerate(inv)) > 3e-7:
        bad.append("inv_freq(6) %s" % inv)
    sin, cos = sincos_tables(inv, 40)
    x = [0.3 * k - 1.0 for k in range(12)]
    y = rope_gptj(x, sin[37], cos[37], 6)
    for i in range(3):
        z = complex(x[2 * i], x[2 * i + 1]) * complex(math.cos(37 * inv[i]), math.sin(37 * inv[i]))
        if abs(z.real - y[2 * i]) > 1e-5 or abs(z.imag - y[2 * i + 1]) > 1e-5:
            bad.append("rope pair %d" % i)
    if y[6:] != x[6:]:
        bad.append("rope touched the pass-through dims")
    # the rows permutation makes GPT-J a rotate-half (Phi) model; without it, not
    y = layernorm([1.0, 2.0, 4.0, 7.0], [1.0] * 4, [0.0] * 4, 0.0)
    if abs(sum(y)) > 1e-12 or abs(sum(v * v for v in y) / 4 - 1) > 1e-12:
        bad.append("layernorm")
    for tag in ("A", "B", "D"):
        cfg, sd, wkw = tab[tag]
        T = gptj_weights(cfg, sd, **wkw)
        a1 = GptjRef(cfg, T).prefill(ids[:30])[0]
        pc, PT, rd = phi_equivalent(cfg, T)
        a2 = ph.PhiRef(pc, PT, rd=rd).prefill(ids[:30])[0]
        err = max(abs(u - v) for r1, r2 in zip(a1, a2) for u, v in zip(r1, r2)) / max(abs(u) for r1 in a1 for u in r1)
        print("  selftest: %s GPT-J vs the permuted rotate-half (Phi) model: max rel logit difference %.1e" % (tag, err))
        if err > 1e-12:
            bad.append("%s: GPT-J != Phi with permuted q/k rows (%.1e)" % (tag, err))
        pc, PT, rd = phi_equivalent(cfg, T, perm_rows=False)
        a3 = ph.PhiRef(pc, PT, rd=rd).prefill(ids[:30])[0]
        err3 = max(abs(u - v) for r1, r2 in zip(a1, a3) for u, v in zip(r1, r2)) / max(abs(u) for r1 in a1 for u in r1)
        if err3 < 1e-6:
            bad.append("%s: GPT-J = Phi even without the permutation (%.1e): the check cannot see it" % (tag, err3))
        # the export's inverse permutation undoes the loader's
        hd = gptj_params(cfg)["hd"]
        pm = half_perm(hd, rd)
        v0 = T["transformer.h.0.attn.q_proj.weight"][1]
        d_ = gptj_params(cfg)["d"]
        H_ = gptj_params(cfg)["H"]
        if permute_rows(permute_rows(v0, d_, H_, hd, pm), d_, H_, hd, inverse(pm)) != v0:
            bad.append("%s: the inverse permutation does not undo the permutation" % tag)
    bad += selftest_lora(tab, ids)
    # cached greedy = the full forward recomputed each step
    for tag in ("A", "B", "C"):
        cfg, sd, wkw = tab[tag]
        m = GptjRef(cfg, gptj_weights(cfg, sd, **wkw))
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
    st = GptjRef(cfgS, TS).greedy(STOP_PROMPT, 30)[0]
    print("  selftest: stop case greedy %s" % st)
    if EOT not in st or st.index(EOT) < 2:
        bad.append("the stop case's greedy continuation does not reach EOS %d after a few tokens: %s" % (EOT, st))
    # sensitivity
    cases = [(tag, cfg, store(gptj_weights(cfg, sd, **wkw), STORAGE.get(tag, "F32")),
              [(ids[a:b], n) for a, b, n in GEN[tag]]) for tag, (cfg, sd, wkw) in sorted(tab.items())]
    changed = {}
    wins = windows(ids, 64)
    for tag, cfg, T, g in cases:
        model = GptjRef(cfg, T)
        ref, cnt = mean_ce(model, wins)
        refs = [model.greedy(p_, n)[0] for p_, n in g]
        if any(len(set(r_)) < 4 for r_ in refs):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
        worst = None
        for name, kws in (("sin / cos tables +-1 float32 ulp (noise, the largest of 3 draws)",
                           [{"ulp_noise": sd_} for sd_ in (1, 2, 5)]),
                          ("inv_freq +-1 float32 ulp where 10000 ** e is inexact (torch's powf; the largest of 3 draws)",
                           [{"inv_noise": sd_} for sd_ in (1, 2, 3)]),
                          ("sin / cos tables in float64", [{"rope_f64": True}]),
                          ("scale 1/float32(sqrt(head_dim)) (transformers' scale_attn)", [{"attn_scale": "f32"}]),
                          ("float32 scores and probabilities (transformers' _attn, approx.)", [{"scores_f32": True}])):
            rel = max(abs(mean_ce(GptjRef(cfg, T, **kw), wins)[0] - ref) / abs(ref) for kw in kws)
            print("  selftest %-4s %-72s relative change %.2e" % (tag, name, rel))
            if "noise" in name and rel > TOL["float64"] / 2:
                bad.append("%s: one float32 ulp in the RoPE tables moves the loss by %.2e, too close to the "
                           "float64 tolerance" % (tag, rel))
            if "inv_freq" in name and rel > TOL["float64"]:
                bad.append("%s: one float32 ulp of inv_freq moves the loss by %.2e" % (tag, rel))
        for name, kw in alternatives(cfg):
            alt = GptjRef(cfg, T, **kw)
            a_, _ = mean_ce(alt, wins)
            rel = abs(a_ - ref) / abs(ref)
            worst = rel if worst is None else min(worst, rel)
            if rel < 20 * TOL["float64"]:
                bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
            same = all(alt.greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            key = re.sub(r"activation gelu\S*", "activation gelu (the other form)", name.split(" instead")[0])
            key = re.sub(r"layer_norm_epsilon \S+", "layer_norm_epsilon", key)
            changed.setdefault(key, [])
            if not same:
                changed[key].append(tag)
            print("  selftest %-4s %-72s relative change %.2e%s" % (
                tag, name, rel, "  (greedy ids unchanged)" if same else ""))
        print("  selftest %-4s loss %.8g over %d targets (ppl %.4g); smallest relative change %.2e; greedy %s" % (
            tag, ref, cnt, math.exp(ref / cnt), worst, refs))
        for name, kw in DECODE_ALTS:
            same = all(GptjRef(cfg, T, **kw).greedy(p_, n)[0] == r_ for (p_, n), r_ in zip(g, refs))
            changed.setdefault(name, [])
            if not same:
                changed[name].append(tag)
    for key, tags in sorted(changed.items()):
        print("  selftest: greedy ids compared by check() change under '%s' in cases %s" % (key, tags))
        if not tags and not key.startswith(WEAK):
            bad.append("no case's greedy ids change under '%s'" % key)
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


def selftest_lora(tab, ids):
    """LayerRoute adapter files (PEFT's on GPTJForCausalLM): the documented reading (q / k B A rows
    in GPT-J's own order) against the old one (rows in lol's reordered order): PEFT's rule on
    GPT-J's weights = lol's LoRA with B's rows permuted like the loader's q / k rows (B_lol = P B)
    on the rotate-half (Phi) model; the old reading = lol's LoRA with B as stored; and the old
    reading is detected by what check() compares (merged tensors at 1e-6, the loss, the greedy
    ids of its two prompts); the PEFT config matching rule on gptj_modules"""
    bad = []
    cfg, sd, wkw = tab["A"]
    T = gptj_weights(cfg, sd, **wkw)
    p = gptj_params(cfg)
    d, H, hd, rd, L = p["d"], p["H"], p["hd"], p["rd"], p["L"]
    St = random_gptj_lora(cfg, 29)
    sc = 4.0
    Fg, touched = fold_lora_tensors(cfg, T, St, sc)
    Fr, _ = fold_lora_tensors(cfg, T, St, sc, rows="reordered")
    if len(touched) != 3 * L:
        bad.append("LoRA selftest: %d tensors folded" % len(touched))
    # the fold is the low-rank path: W x + sc B (A x) on a q_proj (documented reading)
    A_ = q2.mat(St["base_model.model.transformer.h.1.attn.q_proj.lora_A.weight"])
    B_ = q2.mat(St["base_model.model.transformer.h.1.attn.q_proj.lora_B.weight"])
    xx = [math.sin(j + 1.0) for j in range(d)]
    W0 = q2.mat(T["transformer.h.1.attn.q_proj.weight"])
    want = [u + sc * v for u, v in zip(matvec(W0, xx), matvec(B_, matvec(A_, xx)))]
    if max(abs(u - v) for u, v in zip(matvec(q2.mat(Fg["transformer.h.1.attn.q_proj.weight"]), xx), want)) > 1e-12:
        bad.append("LoRA fold of q_proj != W x + s B A x")
    # against lol's rotate-half model: P (W + s B A) = P W + s (P B) A
    pc, PT, _ = phi_equivalent(cfg, T)
    perm = half_perm(hd, rd)
    for reading, Fx in (("documented (B_lol = P B)", Fg), ("old (B_lol = B)", Fr)):
        PX = dict(PT)
        for i in range(L):
            for x, y in (("attn.q_proj", "self_attn.q_proj"), ("attn.k_proj", "self_attn.k_proj"),
                         ("mlp.fc_out", "mlp.fc2")):
                pre = "base_model.model.transformer.h.%d.%s." % (i, x)
                Bs, Bv = St[pre + "lora_B.weight"][:2]
                if x != "mlp.fc_out" and reading.startswith("documented"):
                    Bv = permute_rows(Bv, Bs[1], H, hd, perm)
                ba = q2.matmul(q2.mat((Bs, Bv)), q2.mat(St[pre + "lora_A.weight"]))
                ws, wv = PX["model.layers.%d.%s.weight" % (i, y)]
                c = ws[1]
                PX["model.layers.%d.%s.weight" % (i, y)] = (ws, [v + sc * ba[j // c][j % c] for j, v in enumerate(wv)])
        a1 = GptjRef(cfg, Fx).prefill(ids[:30])[0]
        a2 = ph.PhiRef(pc, PX, rd=rd).prefill(ids[:30])[0]
        err = max(abs(u - v) for r1, r2 in zip(a1, a2) for u, v in zip(r1, r2)) / max(abs(u) for r1 in a1 for u in r1)
        print("  selftest: LoRA %s reading on GPT-J = lol's LoRA on the rotate-half (Phi) model: max rel logit "
              "difference %.1e" % (reading, err))
        if err > 1e-12:
            bad.append("LoRA %s reading != lol's LoRA on the rotate-half model (%.1e)" % (reading, err))
    # the old reading is seen by check(): tensors, loss, greedy ids
    tdiff = max(max(abs(u - v) for u, v in zip(Fg[k][1], Fr[k][1])) / max(abs(v) for v in Fg[k][1])
                for k in touched)
    wins = windows(ids, 64)
    lg, _ = mean_ce(GptjRef(cfg, Fg), wins)
    lr_, _ = mean_ce(GptjRef(cfg, Fr), wins)
    lb, _ = mean_ce(GptjRef(cfg, T), wins)
    prompts = ((ids[:6], 20), (ids[60:90], 20))
    gsame = [GptjRef(cfg, Fg).greedy(p_, n)[0] == GptjRef(cfg, Fr).greedy(p_, n)[0] for p_, n in prompts]
    print("  selftest: LoRA q / k rows read in the old (reordered) order: merged tensors move %.2e of max |W'|, "
          "loss %.2e relative (the LoRA itself %.2e), greedy ids of check()'s prompts %s"
          % (tdiff, abs(lr_ - lg) / abs(lg), abs(lg - lb) / abs(lb),
             ["unchanged" if x else "changed" for x in gsame]))
    if tdiff < 100 * 1e-6:
        bad.append("the old q / k row reading moves the merged tensors by only %.2e" % tdiff)
    if abs(lr_ - lg) < 20 * TOL["float64"] * abs(lg):
        bad.append("the old q / k row reading moves the loss by only %.2e" % (abs(lr_ - lg) / abs(lg)))
    if all(gsame):
        bad.append("the old q / k row reading leaves the greedy ids of check()'s prompts unchanged")
    # PEFT's target_modules rule on GPT-J's module tree
    mods = gptj_modules(cfg)
    sel = sorted(m for m in mods if peft_selects(m, ["q_proj", "k_proj", "fc_out"]))
    want = sorted("transformer.h.%d.%s" % (i, x) for i in range(L) for x in ("attn.q_proj", "attn.k_proj",
                                                                              "mlp.fc_out"))
    if sel != want:
        bad.append("peft_selects(['q_proj', 'k_proj', 'fc_out']) selects %s" % sel)
    if [m for m in mods if peft_selects(m, ["proj"])] or len([m for m in mods if peft_selects(m, ["attn"])]) != L:
        bad.append("peft_selects matches inside a name / misses a container")
    if sorted(m for m in mods if peft_selects(m, r"transformer\.h\.\d+\.attn\.[qk]_proj")) != sorted(
            w_ for w_ in want if "fc_out" not in w_):
        bad.append("peft_selects with a regular expression")
    if (peft_pattern({"fc_out": 8}, "transformer.h.1.mlp.fc_out", 4), peft_pattern({"c_out": 8},
                                                                                 "transformer.h.1.mlp.fc_out", 4)) != (8, 4):
        bad.append("peft_pattern")
    n_lin = sum(v is not None for v in mods.values())
    if n_lin != 6 * L + 1:
        bad.append("gptj_modules: %d Linear modules" % n_lin)
    bad += selftest_peft_files(mods, "GPTJForCausalLM", St, ["q_proj", "k_proj", "fc_out"], 4, 16.0, want)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny GPT-J folders, run lol, compare with the reference")
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
