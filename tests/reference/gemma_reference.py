#!/usr/bin/env python3
"""An independent float64 reference of Hugging Face Gemma (GemmaForCausalLM, model_type
"gemma"), Gemma 2 (Gemma2ForCausalLM, model_type "gemma2") and Gemma 3 text
(Gemma3ForCausalLM, model_type "gemma3_text") in pure Python (stdlib only), and a check that
`lol hf ppl|generate|info` agrees with it on tiny Gemma folders written here.

  python3 tests/reference/gemma_reference.py check --lol PATH/TO/lol --work /tmp/x
  python3 tests/reference/gemma_reference.py selftest      # the reference's own checks, no lol

Provenance. Written by a reviewer who did not read src/ nor tests/ outside
tests/reference/, from transformers' modeling_gemma.py / configuration_gemma.py /
modeling_gemma3.py / configuration_gemma3.py as remembered (and re-read in public copies
of transformers for the points listed under "version differences"), and the feature's
brief. The Gemma 2 part was added by a second reviewer (same rules: src/ and tests/ outside
tests/reference/ unread), from modeling_gemma2.py / configuration_gemma2.py as remembered,
with the defaults and the version differences below re-read in public copies of
transformers. It imports qwen2_reference.py (unchanged) for the float32 RoPE tables as
transformers builds them, RMSNorm / matvec, the prefill / greedy driver of its `Ref`
(this file's `GemmaRef` supplies its own weights, embedding scale, block and head),
`mean_ce`, the folder / tokenizer / safetensors writers, `Checker` and the ppl / greedy
comparisons (summed CE, perplexity, bits/byte within 1e-5 relative; greedy ids exact
except after a float32 near-tie).

Rules of the reference (float64; RoPE cos/sin tables in float32 as transformers builds them):
  RMSNorm (GemmaRMSNorm = Gemma2RMSNorm = Gemma3RMSNorm):
      y = x / sqrt(mean(x^2) + eps) * (1 + w); the stored weight w is an offset from 1
      (initialised to zeros). Used for input_layernorm, post_attention_layernorm, model.norm,
      and in Gemma 2 / 3 also pre_feedforward_layernorm, post_feedforward_layernorm, in Gemma 3
      also self_attn.q_norm / self_attn.k_norm (the latter two per head, over head_dim, eps rms_norm_eps).
  Embedding: h0 = embed_tokens[id] * sqrt(hidden_size). Gemma 1 and Gemma 2 build the
      normalizer as torch.tensor(hidden_size ** 0.5, dtype=compute dtype); Gemma 3 as a float32
      buffer cast to the weight dtype, so the reference uses sqrt(d) (Gemma 1, 2) and
      float32(sqrt(d)) (Gemma 3) -- 1.7e-8 apart, far below every tolerance. The tied lm_head is the
      UNSCALED embedding matrix.
  MLP: down_proj(act(gate_proj(x)) * up_proj(x)), act "gelu_pytorch_tanh" (also
      "gelu_new", "gelu_fast" in the reference: the same tanh formula)
      0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), or "gelu" = exact
      0.5 x (1 + erf(x / sqrt 2)).
      Gemma 1: config "hidden_activation" when present and not null, else
      gelu_pytorch_tanh, whatever "hidden_act" says (transformers 4.39 .. 4.47's GemmaMLP;
      see "version differences"). Gemma 2 and 3: "hidden_activation", default
      gelu_pytorch_tanh ("hidden_act" ignored).
  Gemma 1 block (Llama pre-norm): h = x + o_proj(attn(input_layernorm(x)));
      y = h + mlp(post_attention_layernorm(h)). Attention scale head_dim^-0.5.
  Gemma 2 block: the Gemma 3 block below without q_norm / k_norm (none exist in Gemma 2):
      a = post_attention_layernorm(o_proj(attn(input_layernorm(x)))); h = x + a;
      y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))).
      Attention scale query_pre_attn_scalar^-0.5 (default 256). One RoPE (rope_theta, default
      10000, with "rope_scaling" as given -- ASSUMED as transformers >= 4.48, whose
      Gemma2RotaryEmbedding reads rope_scaling; 4.42 .. 4.47 built it from rope_theta alone)
      for every layer, sliding or not.
  Softcapping (Gemma 2; also Gemma 3, whose modeling code applies the same two caps when set):
      attention: scores = (q . k) * scale; when attn_logit_softcapping c is not null:
      scores = c * tanh(scores / c); THEN the causal / sliding mask (keys outside it excluded);
      softmax. Final: when final_logit_softcapping c is not null: logits = c * tanh(logits / c),
      and `hf ppl`'s cross entropy is that of the capped logits (greedy ids are unchanged by
      the final cap: it is monotonic). Gemma2Config's defaults: attention 50.0, final 30.0; a
      key given as null turns that cap off. Gemma3TextConfig's defaults: both null.
  Gemma 3 block ("sandwich" norms):
      a = post_attention_layernorm(o_proj(attn(input_layernorm(x)))); h = x + a;
      y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))).
      q, k: projected, viewed as heads, q_norm / k_norm per head, then RoPE.
      Attention scale query_pre_attn_scalar^-0.5 (default 256), not head_dim^-0.5.
  Attention (both): rotate-half RoPE, grouped-query (query head a uses kv head
      a // (H / Hkv)), causal softmax, no biases, then o_proj; logits = model.norm(h) .
      lm_head^T (lm_head = embed_tokens when tie_word_embeddings).
  Gemma 2 layer types: "layer_types" when given (and not null); else layer i is
      "sliding_attention" iff i % 2 == 0 (layers 0, 2, 4, ... slide; 1, 3, ... full), window
      W = "sliding_window" (default 4096) with the same rule as Gemma 3 below.
  Gemma 3 layer types: "layer_types" when given (and not null); else from
      "sliding_window_pattern" P (default 6): layer i is "sliding_attention" iff
      (i + 1) % P != 0, else "full_attention". A sliding layer with window
      W = "sliding_window" (default 4096) lets query i see keys j with i - W < j <= i; a
      full layer is plain causal. W >= max_position_embeddings never binds.
  Gemma 3 RoPE: full layers use rope_theta (default 1e6) with "rope_scaling" (null, or
      {"rope_type"|"type": "linear", "factor": f}: inv_freq / f); sliding layers use
      rope_local_base_freq (default 10000) with no scaling -- also when the window never
      binds (case E checks that).
  Defaults. GemmaConfig: head_dim 256, num_key_value_heads 16, rope_theta 10000,
      rms_norm_eps 1e-6, tie_word_embeddings true, attention_bias false.
      Gemma3TextConfig: head_dim 256, num_key_value_heads 4, rms_norm_eps 1e-6,
      tie_word_embeddings true, query_pre_attn_scalar 256, sliding_window 4096,
      sliding_window_pattern 6, rope_theta 1e6, rope_local_base_freq 10000,
      final_logit_softcapping null, attn_logit_softcapping null.
      Gemma2Config (transformers >= 4.45 or so): head_dim 256, num_key_value_heads 4,
      rms_norm_eps 1e-6, rope_theta 10000, tie_word_embeddings true, attention_bias false,
      hidden_activation gelu_pytorch_tanh, query_pre_attn_scalar 256, sliding_window 4096,
      attn_logit_softcapping 50.0, final_logit_softcapping 30.0, max_position_embeddings 8192.

Version differences found while writing this (transformers' own code, public copies):
  * GemmaMLP of transformers 4.39 .. 4.47 uses config.hidden_activation (null ->
    gelu_pytorch_tanh with a warning, hidden_act ignored); since the modular rewrite
    (4.48+) GemmaMLP uses ACT2FN[config.hidden_act] and ignores hidden_activation, while
    configuration_gemma.py's docstring still says hidden_act "is overwritten by the
    hidden_activation". Google's original Gemma configs say "hidden_act": "gelu".
    The main cases here set both keys consistently; the rule of the brief (hidden_activation,
    else tanh) is checked on its own in variant A-hidden_act-gelu, marked ASSUMED.
  * Gemma2Config's defaults changed: transformers 4.42 (gemma-2-9b style) had
    num_attention_heads 16, num_key_value_heads 16, query_pre_attn_scalar 224; later releases
    (gemma-2-2b style) have 8, 4 and 256. The cases write num_key_value_heads explicitly
    (G3-kv-absent below tests the absent key leniently); G3 checks query_pre_attn_scalar
    absent -> 256 (as the brief; ASSUMED the current default, 224 in 4.42).
  * Gemma 2's sliding mask: 4.42 .. 4.4x masked keys j <= i - W with
    torch.tril(ones, diagonal=-W); masking_utils (4.53+) keeps kv_idx > q_idx - W: the same
    W keys, i - W < j <= i.

Cases (`case_table()`; vocab 264 > the byte tokenizer's 259 ids, hidden 32, intermediate
40, the qwen2_reference byte-level tokenizer, a 199-token text; norm offsets N(0, 0.2) so
that a loader that forgets the +1 fails by far, q_norm / k_norm offsets N(1, 0.2) so that
the normalised heads of dimension 16 give attention far from uniform; Gemma 3 tied cases
with embeddings of std 0.05 and a final norm offset N(4, 0.2), else greedy decoding
repeats the input token):
  A gemma-gqa-f32: gemma 1, 3 layers, 4 heads / 2 kv heads, head_dim 16 != 32 / 4, F32,
    tie_word_embeddings and rms_norm_eps absent (-> tied, 1e-6), rope_theta 500,
    hidden_act and hidden_activation "gelu_pytorch_tanh": hf ppl float64 --context 9, 64,
    float32 64; generate float64 / float32 (--tokens --ids greedy, a 33-id ChatML prompt + 12);
    hf info --check.
    Variants on A's weights, one ppl each: A-hidden_act-gelu ("hidden_act": "gelu", no
    hidden_activation -> tanh, ASSUMED as the brief, see above); A-hidden_activation-null.
  B gemma-mqa-gelu-untied-bf16: 1 kv head, hidden_activation and hidden_act "gelu" (exact
    erf GELU), untied lm_head, rope_theta absent (10000), rms_norm_eps 1e-5, BF16 storage:
    ppl float64 (tight, reference on the bf16-rounded weights), float32, bfloat16 (5e-3;
    lol was 2.9e-4 away when written);
    generate float64; hf info --check.
  C gemma3-pattern2-w5: gemma3_text, 4 layers, 4 heads / 2 kv heads, head_dim 16,
    sliding_window_pattern 2 (layers 0, 2 slide), sliding_window 5,
    query_pre_attn_scalar 12, rope_theta 1e6, rope_local_base_freq 10000, rope_scaling
    linear factor 4, softcappings given as null, max_position_embeddings 64: ppl float64
    --context 7 and 40, float32 40; generate float64 with prompts of 3 and 17 ids (+30 /
    +25 new: crossing the window many times), float32 17; hf info --check (the sliding line
    names 5).
  D gemma3-layer_types: explicit ["sliding_attention", "full_attention",
    "sliding_attention"], no sliding_window_pattern key, sliding_window 6, no
    query_pre_attn_scalar (-> 256 != head_dim 16), untied: ppl float64 7 / 40,
    generate float64; hf info (the sliding line names 6).
  C-window-absent: C without "sliding_window" (4096, never binds; local RoPE kept): ppl 40.
  gemma3-pattern-window-null: C with "sliding_window": null. transformers keeps layers 0, 2
    sliding and fails building their mask; ASSUMED: lol refuses naming sliding_window (as
    it does for an explicit layer_types list with a null window), or runs those layers
    unbounded with the local RoPE.
  E gemma3-window-ge-positions: 2 layers, sliding_window_pattern 2, sliding_window 64 =
    max_position_embeddings (never binds) and rope_theta / rope_local_base_freq /
    num_key_value_heads absent (1e6 / 10000 / 4 = MHA): ppl float64 64, generate float64:
    the sliding layer still uses the local RoPE base.
  F gemma3-softcap: gemma3_text as C but 3 layers, window 4, attn_logit_softcapping 2.5 and
    final_logit_softcapping 4.0 (both binding; they were refused before Gemma 2 support):
    ppl float64 40, generate float64 (17 ids + 25).
  G1 gemma2-softcap-w5: gemma2, 4 layers (0, 2 slide by default), 4 heads / 2 kv heads,
    head_dim 16, query_pre_attn_scalar 24, sliding_window 5, attn_logit_softcapping 2.0,
    final_logit_softcapping 3.0 (both bind: scores and logits are several units), rope_theta
    10000, tied, max_position_embeddings 64: ppl float64 --context 7 and 40, float32 40;
    generate float64 with prompts of 3 and 17 ids (+30 / +25, crossing the window); hf info
    --check (the sliding line names 5; a note when no line names both softcaps).
  G2 gemma2-nocap-layer_types: 3 layers, both softcaps given as null (off), explicit
    layer_types ["sliding_attention", "sliding_attention", "full_attention"] (not the
    default pattern), sliding_window 6, query_pre_attn_scalar 10, rope_theta 500 with
    rope_scaling linear factor 2 (ASSUMED applied, transformers >= 4.48), untied, eps 1e-5:
    ppl float64 40, generate float64 (17 ids + 25).
  G3 gemma2-defaults: 3 layers, no softcap keys (-> 50 / 30), no query_pre_attn_scalar
    (-> 256), no rope_theta / rms_norm_eps / tie_word_embeddings / hidden_activation keys,
    sliding_window 4, q / k rows 8 / sqrt(32) so that the default attention cap of 50 binds:
    ppl float64 40. G3-kv-absent: G3 without num_key_value_heads (4 query heads): agreement
    with Gemma2Config's current default 4 (MHA) passes, a refusal naming
    num_key_value_heads is only a note (4.42's default 16 cannot serve 4 query heads).
  Refusals (hf ppl, exit 2, stderr naming what is wrong): a gemma3_text folder without
    model.layers.1.post_feedforward_layernorm.weight (names post_feedforward_layernorm);
    hidden_activation "relu" in gemma and in gemma3_text (names hidden_activation).
    ASSUMED (from docs/hf.md's rule that fields changing the function are refused and
    loading is strict): gemma3_text "use_bidirectional_attention": true (names it); gemma
    "attention_bias": true (names attention_bias or a bias tensor); a gemma3_text folder
    without layer 0's self_attn.q_norm.weight (names q_norm).
    Gemma 2 (on G1): a gemma2 folder without model.layers.1.post_feedforward_layernorm.weight
    (names post_feedforward_layernorm); ASSUMED as the brief: attn_logit_softcapping 0.0
    (names it; transformers would divide by zero), final_logit_softcapping -3.0 (names it;
    transformers would compute -c tanh(x / -c) = 3 tanh(x / 3)), and a gemma2 folder with a
    model.layers.0.self_attn.q_norm.weight tensor (names q_norm: strict loading; transformers
    only warns about unexpected keys).
  hf info --check (A, B, C, G1): exit 0, names the architecture, "all tensors present", a printed
    parameter count = transformers' num_parameters(). hf info (C and G1 with --check, D
    without): a line mentioning the sliding layers / window that names W (5, 6, 5); a note when the
    sliding layers' indices are not all in it.
  Probes: the two GELUs differ by < 5e-4 anywhere, which moves a 199-token summed loss by
    only ~1e-5 (random signs average out). So A, A-hidden_act-gelu, B and C also run
    `hf ppl --dtype float64` on a two-character text (one predicted token) chosen by
    `probe_text` as the one whose cross entropy differs most (relatively, 2.6e-4 .. 6e-4)
    between the two GELUs, compared within 2e-6.
`check` does not run `selftest` (about 35 s of pure Python): run both.
Every compared case is also evaluated (on a disagreement) under other readings -- no +1 on
the norm weights, no sqrt(d) embedding scale, lm_head = the scaled embedding, the other
GELU, head_dim^-0.5 scale, no q/k norm, one RoPE for every layer, no rope_scaling, full
attention / W+1 keys, shifted layer pattern (for Gemma 2: sliding on odd instead of even
layers), Gemma 1 block on Gemma 2 / 3 weights, no attention softcap, the attention softcap
before the query_pre_attn_scalar scale, no final softcap, and for G2 the caps of 50 / 30
instead of null -- and the reading that matches lol is named (first 6 disagreements).
`selftest` asserts that each of those readings moves the loss by far more than the tolerance
(and that each changes the greedy ids of the generate checks, but the activation, the tied
head's scale and the final softcap, which leave the argmax alone or nearly), that Gemma 2
without softcaps and with every layer full equals the Gemma 3 model without q/k norms, that
caps of 1e9 equal no caps, and Gemma2Config's defaults as read.

LayerRoute and export (added by a third reviewer, same rules: src/ and tests/ outside
tests/reference/ unread; check_layerroute_gemma / check_export_gemma, modelled on
olmo_reference.py's check_layerroute_olmo / check_export_olmo, whose fold_adapter, LR_SAMPLES,
LR_TARGETS and WORDS are imported):
  * layerroute train (3 steps, rank 4, all seven LoRA targets, --system "", 8 ChatML samples of
    29-30 tokens) on three bases: a Gemma 3 folder (C's config, untied, 4 layers, layers 0, 2
    slide with window 5 and rope_local_base_freq 10000, the full ones rope_theta 1e6 with linear
    scaling 4, query_pre_attn_scalar 12 != head_dim 16), G1's Gemma 2 folder (soft-caps 2 / 3,
    window 5, query_pre_attn_scalar 24, tied) and A's Gemma folder. Gemma 3 and Gemma 2 train
    with gate biases 0 (--bias-band 0 --bias-outside 0; Gemma 2 --seed 3) so that the gates follow
    each sample's mean hidden state (Gemma 3's samples take 3 gate patterns). eval --json
    (ppl_base / ppl_open / ppl_gated / executed_mean / layer_open against GemmaRef with the
    adapter's LoRA folded in float64 -- W + alpha/r B A, as PEFT on transformers' model: on q_proj
    before q_norm and before the query_pre_attn_scalar^-1/2 scale -- and the adapter's gates: the
    gate of layer i reads the mean of the states entering block i, the scaled embeddings for
    block 0; gated numbers only when every |gate score| > 1e-4). merge: the base's architecture,
    model_type and tensor names; every tensor = the float64 fold within 1e-6 of max |W'|, where a
    query_pre_attn_scalar rewritten to s' carries c = sqrt(s' / s) in Gemma 2's q_proj
    (c W') or Gemma 3's q_norm (1 + w' = c (1 + w)); the merged folder read with its own
    config.json (as transformers reads it) gives the adapted model's logits (1e-5 relative) and
    `hf ppl` float64 of it = the reference; gates.safetensors = the adapter's. layerroute
    generate --gates learned and open (greedy, 12 new ids after a 26-id chat prompt and a 17-id
    text piece: the window binds): the layers run and the ids. On a Gemma 2 disagreement the
    reading "LoRA on q_proj not times sqrt(head_dim / query_pre_attn_scalar)" is evaluated.
  * lol train (8 steps, d 32, 4 heads / 2 kv heads, head_dim 16, ffn 40, a byte-tokenized word
    corpus) of dense models of Gemma layout, then lol export --hf (default architecture):
    Gemma 3 (scale_embeddings, gelu_pytorch_tanh, sandwich_norm, qk_norm, sliding window 6 with
    full_attention_interval 2, rope_local_theta 10000, rope_theta 1e6 with linear scaling 2,
    untied); the same checkpoint with its config.json edited to full_attention_interval 3 and
    soft-caps 2.5 / 4 (Gemma 3 holds any pattern and both caps); Gemma 2 (sandwich_norm, window 5,
    interval 2, soft-caps 2 / 3, tied), and edited without caps (Gemma2Config's 50 / 30 defaults
    must not apply); Gemma 1 (exact GELU, full attention, tied). Checked: architectures /
    model_type; config.json as the transformers class reads it (absent keys -> its defaults):
    head_dim, num_key_value_heads, hidden_activation, tie_word_embeddings, rope_theta,
    rms_norm_eps, max_position_embeddings, layer_types, sliding_window, the soft-caps,
    rope_local_base_freq, rope_scaling; Gemma 3's layer_types = the sliding_window_pattern's
    (transformers < 4.53 reads the pattern), Gemma 2's = 0, 2, .. sliding (< 4.53 ignores
    layer_types), Gemma's hidden_act = hidden_activation (>= 4.48 reads hidden_act); tensor names
    and shapes exactly Gemma's; exported norm + 1 = the checkpoint's norm, other tensors equal
    (q_proj / q_norm up to the query_pre_attn_scalar factor); the reference on the exported folder
    = `lol forward` on the checkpoint (2e-5 of max |logit|; the readings it cannot tell apart are
    noted); `hf ppl` float64 of the folder = the reference. Refusals (exit 2, naming what
    differs): the Gemma 3 layout with --arch gemma2 / qwen2 / gemma, the Gemma 2 layout edited to
    interval 3 (default arch and --arch gemma2), the Gemma 1 layout with --arch gemma3.
  ASSUMED: the adapter's LoRA means PEFT's on the Hugging Face base (docs/layerroute.md: PEFT
  names, scale lora_alpha / r), so a query_pre_attn_scalar that lol folds into its queries must
  not change the LoRA's effect; a merged folder is right when transformers, reading it, computes
  that adapted model (rewritten query_pre_attn_scalar accepted); an export whose
  query_pre_attn_scalar is not head_dim is a note (the function check decides); Gemma 2/3
  exports need layer_types only to agree with what older readers derive.
"""
import argparse
import json
import math
import operator
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen2_reference as q2  # noqa: E402
from qwen2_reference import (Checker, apply_rope, compare_generate, compare_ppl, f32,  # noqa: E402
                             mean_ce, ppl_windows, rmsnorm, silu, write_folder)

TEXT = q2.TEXT
DIAGNOSE = [6]
_mul = operator.mul


def matvec(W, x):
    """qwen2_reference.matvec, faster: the same products summed in the same order (bit-identical)"""
    return [sum(map(_mul, row, x)) for row in W]

DROP = object()


# ---------------------------------------------------------------- activations
def gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def gelu_exact(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


ACTS = {"gelu_pytorch_tanh": gelu_tanh, "gelu_new": gelu_tanh, "gelu_fast": gelu_tanh, "gelu": gelu_exact,
        "silu": silu}


# ---------------------------------------------------------------- config reading
def gemma_params(cfg):
    mt = cfg.get("model_type")
    g3 = mt == "gemma3_text"
    g2 = mt == "gemma2"
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    L = cfg["num_hidden_layers"]
    # Gemma2Config: 4 since transformers 4.45 or so (4.42's 9b-style defaults said 16)
    Hkv = cfg.get("num_key_value_heads", 4 if (g3 or g2) else 16)
    hd = cfg.get("head_dim", 256)
    if g3 or g2:
        act = cfg.get("hidden_activation", "gelu_pytorch_tanh")
    else:
        act = cfg.get("hidden_activation") or "gelu_pytorch_tanh"
    p = {"g3": g3, "g2": g2, "sw": g3 or g2, "d": d, "H": H, "Hkv": Hkv, "hd": hd, "F": cfg["intermediate_size"],
         "L": L, "V": cfg["vocab_size"], "eps": cfg.get("rms_norm_eps", 1e-6),
         "theta": cfg.get("rope_theta", 1e6 if g3 else 1e4), "tied": cfg.get("tie_word_embeddings", True),
         "mpe": cfg["max_position_embeddings"], "act": act, "rope_scaling": cfg.get("rope_scaling")}
    if g3 or g2:
        lt = cfg.get("layer_types")
        if lt is None and g3:
            P = cfg.get("sliding_window_pattern", 6)
            lt = ["sliding_attention" if (i + 1) % P else "full_attention" for i in range(L)]
        elif lt is None:  # Gemma 2: layers 0, 2, 4, ... slide
            lt = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(L)]
        p["layer_types"] = list(lt)
        p["window"] = cfg.get("sliding_window", 4096)
        p["local_theta"] = cfg.get("rope_local_base_freq", 10000.0) if g3 else None
        p["scale"] = cfg.get("query_pre_attn_scalar", 256) ** -0.5
        p["embed_scale"] = f32(math.sqrt(d)) if g3 else math.sqrt(d)
        dflt = (50.0, 30.0) if g2 else (None, None)
        p["attn_cap"] = cfg.get("attn_logit_softcapping", dflt[0])
        p["final_cap"] = cfg.get("final_logit_softcapping", dflt[1])
    else:
        p["layer_types"] = ["full_attention"] * L
        p["window"] = None
        p["local_theta"] = None
        p["scale"] = hd ** -0.5
        p["embed_scale"] = math.sqrt(d)
        p["attn_cap"] = p["final_cap"] = None
    return p


# ---------------------------------------------------------------- the model
class GemmaRef(q2.Ref):
    """GemmaForCausalLM / Gemma2ForCausalLM / Gemma3ForCausalLM, float64. Reuses qwen2_reference.Ref's prefill /
    greedy; weights, embedding scale, block and head are this class's. Keyword arguments
    select alternative readings (for the sensitivity checks and the diagnosis)."""

    def __init__(self, cfg, weights, plus1=True, embed_scale=True, scaled_head=False, act=None, attn_scale=None,
                 qk_norm=True, rope="hf", window="config", layer_types=None, sandwich=True, attn_cap="config",
                 final_cap="config", cap_order="hf"):
        p = gemma_params(cfg)
        self.cfg, self.p = cfg, p
        self.g3, self.sw = p["g3"], p["sw"]
        self.attn_cap = p["attn_cap"] if attn_cap == "config" else attn_cap
        self.final_cap = p["final_cap"] if final_cap == "config" else final_cap
        self.cap_order = cap_order
        self.d, self.L, self.H, self.Hkv, self.hd, self.V = p["d"], p["L"], p["H"], p["Hkv"], p["hd"], p["V"]
        self.eps = p["eps"]
        self.act = ACTS[act or p["act"]]
        self.scale = p["scale"] if attn_scale is None else attn_scale
        self.qk_norm, self.sandwich = qk_norm, sandwich
        M = {k: q2.mat(v) for k, v in weights.items()}

        def nw(w):
            return [1.0 + x for x in w] if plus1 else list(w)
        E = M["model.embed_tokens.weight"]
        s = p["embed_scale"] if embed_scale else 1.0
        self.embed = [[v * s for v in row] for row in E]
        self.lm_head = (self.embed if scaled_head else E) if p["tied"] else M["lm_head.weight"]
        self.norm = nw(M["model.norm.weight"])
        lt = layer_types or p["layer_types"]
        W = p["window"] if window == "config" else window
        mpe = p["mpe"]
        glob = q2.rope_tables({"rope_theta": p["theta"], "rope_scaling": None if rope == "noscale" else
                               p["rope_scaling"], "max_position_embeddings": mpe}, self.hd, mpe)
        loc = glob
        if self.g3:
            loc = q2.rope_tables({"rope_theta": p["local_theta"], "max_position_embeddings": mpe}, self.hd, mpe)
        self.layers = []
        for i in range(self.L):
            pre = "model.layers.%d." % i
            sliding = lt[i] == "sliding_attention"
            tab = {"hf": loc if sliding else glob, "noscale": loc if sliding else glob, "global": glob,
                   "local": loc}[rope]
            ly = {"in_norm": nw(M[pre + "input_layernorm.weight"]),
                  "post_attn": nw(M[pre + "post_attention_layernorm.weight"]),
                  "q": M[pre + "self_attn.q_proj.weight"], "k": M[pre + "self_attn.k_proj.weight"],
                  "v": M[pre + "self_attn.v_proj.weight"], "o": M[pre + "self_attn.o_proj.weight"],
                  "gate": M[pre + "mlp.gate_proj.weight"], "up": M[pre + "mlp.up_proj.weight"],
                  "down": M[pre + "mlp.down_proj.weight"], "cos": tab[0], "sin": tab[1],
                  "window": W if sliding else None}
            if self.sw:
                ly["pre_ff"] = nw(M[pre + "pre_feedforward_layernorm.weight"])
                ly["post_ff"] = nw(M[pre + "post_feedforward_layernorm.weight"])
            if self.g3:
                ly["q_norm"] = nw(M[pre + "self_attn.q_norm.weight"])
                ly["k_norm"] = nw(M[pre + "self_attn.k_norm.weight"])
            self.layers.append(ly)
        self.gates = None
        self.use_lora = False
        self.memo = {}

    def block(self, i, X, pos0, cache):
        ly = self.layers[i]
        H, Hkv, hd, eps, W = self.H, self.Hkv, self.hd, self.eps, ly["window"]
        rep = H // Hkv
        scale = self.scale
        act = self.act
        qkn = self.g3 and self.qk_norm
        cap = self.attn_cap
        out = []
        for t, h in enumerate(X):
            pos = pos0 + t
            x = rmsnorm(h, ly["in_norm"], eps)
            q, k, v = matvec(ly["q"], x), matvec(ly["k"], x), matvec(ly["v"], x)
            qh = [q[a * hd:(a + 1) * hd] for a in range(H)]
            kh = [k[a * hd:(a + 1) * hd] for a in range(Hkv)]
            if qkn:
                qh = [rmsnorm(z, ly["q_norm"], eps) for z in qh]
                kh = [rmsnorm(z, ly["k_norm"], eps) for z in kh]
            c, s = ly["cos"][pos], ly["sin"][pos]
            qh = [apply_rope(z, c, s) for z in qh]
            cache["k"].append([apply_rope(z, c, s) for z in kh])
            cache["v"].append([v[a * hd:(a + 1) * hd] for a in range(Hkv)])
            assert len(cache["k"]) == pos + 1
            lo = 0 if W is None else max(0, pos - W + 1)  # keys j: pos - W < j <= pos
            keys, vals = cache["k"][lo:], cache["v"][lo:]
            att = []
            for a in range(H):
                g = a // rep
                qa = qh[a]
                sc = [sum(map(_mul, qa, kk[g])) * scale for kk in keys]
                if cap is not None:
                    if self.cap_order == "before_scale":  # an alternative reading: cap * tanh(q.k / cap) * scale
                        sc = [cap * math.tanh(z / scale / cap) * scale for z in sc]
                    else:  # transformers: scores * scaling, then cap * tanh(scores / cap), then the mask
                        sc = [cap * math.tanh(z / cap) for z in sc]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                o = [0.0] * hd
                for wgt, vv in zip(e, vals):
                    wgt /= tot
                    o = [oj + wgt * vj for oj, vj in zip(o, vv[g])]
                att.extend(o)
            a_out = matvec(ly["o"], att)
            if self.sw and self.sandwich:
                a_out = rmsnorm(a_out, ly["post_attn"], eps)
                h2 = [x1 + x2 for x1, x2 in zip(h, a_out)]
                x = rmsnorm(h2, ly["pre_ff"], eps)
            else:
                h2 = [x1 + x2 for x1, x2 in zip(h, a_out)]
                x = rmsnorm(h2, ly["post_attn"], eps)
            mid = [act(g_) * u_ for g_, u_ in zip(matvec(ly["gate"], x), matvec(ly["up"], x))]
            mo = matvec(ly["down"], mid)
            if self.sw and self.sandwich:
                mo = rmsnorm(mo, ly["post_ff"], eps)
            out.append([x1 + x2 for x1, x2 in zip(h2, mo)])
        return out

    def head(self, h):
        z = matvec(self.lm_head, rmsnorm(h, self.norm, self.eps))
        c = self.final_cap
        return z if c is None else [c * math.tanh(v / c) for v in z]


# ---------------------------------------------------------------- tiny folders
def gemma_config(**kw):
    c = {"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "vocab_size": 264, "hidden_size": 32,
         "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 16, "max_position_embeddings": 256, "rope_theta": 500.0, "hidden_act": "gelu_pytorch_tanh",
         "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False, "attention_dropout": 0.0,
         "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32",
         "bos_token_id": q2.ENDOFTEXT, "eos_token_id": q2.IM_END, "pad_token_id": q2.ENDOFTEXT}
    return _apply(c, kw)


def gemma3_config(**kw):
    c = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 264,
         "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 64, "rope_theta": 1000000.0,
         "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 4.0},
         "sliding_window": 5, "sliding_window_pattern": 2, "query_pre_attn_scalar": 12,
         "final_logit_softcapping": None, "attn_logit_softcapping": None, "hidden_activation": "gelu_pytorch_tanh",
         "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "attention_bias": False, "attention_dropout": 0.0,
         "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32", "cache_implementation": "hybrid",
         "bos_token_id": q2.ENDOFTEXT, "eos_token_id": q2.IM_END, "pad_token_id": q2.ENDOFTEXT}
    return _apply(c, kw)


def gemma2_config(**kw):
    c = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "vocab_size": 264, "hidden_size": 32,
         "intermediate_size": 40, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 16, "max_position_embeddings": 64, "rope_theta": 10000.0, "sliding_window": 5,
         "query_pre_attn_scalar": 24, "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0,
         "hidden_activation": "gelu_pytorch_tanh", "hidden_act": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
         "tie_word_embeddings": True, "attention_bias": False, "attention_dropout": 0.0, "initializer_range": 0.02,
         "use_cache": True, "torch_dtype": "float32", "cache_implementation": "hybrid",
         "bos_token_id": q2.ENDOFTEXT, "eos_token_id": q2.IM_END, "pad_token_id": q2.ENDOFTEXT}
    return _apply(c, kw)


def _apply(c, kw):
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def gemma_weights(cfg, seed, embed_std=0.3, norm_std=0.2, g2=False, qk_mean=1.0, gate=3.0, up=2.0, down=2.0,
                  final_mean=0.0, qk=2.5):
    """random tensors; norm weights are offsets N(0, norm_std) around 0 (the model uses 1 + w),
    q_norm / k_norm offsets N(qk_mean, norm_std) (so that the normalised heads give attention
    far from uniform at head_dim 16); q/k rows larger than v; gate pre-activations of a few
    units (where the two GELUs differ most) and a large MLP (the activation matters).
    g2: Gemma 2 layout (sandwich norms, no q/k norm; also for a gemma2 config). qk: the q / k
    rows' scale (times 1/sqrt(hidden))."""
    rng = random.Random(seed)
    p = gemma_params(cfg)
    g2 = g2 or p["g2"]
    d, L, V, F, H, Hkv, hd = p["d"], p["L"], p["V"], p["F"], p["H"], p["Hkv"], p["hd"]
    T = {}

    def put(name, shape, sd, mean=0.0):
        n = 1
        for s_ in shape:
            n *= s_
        T[name] = (list(shape), [f32(rng.gauss(mean, sd)) for _ in range(n)])
    put("model.embed_tokens.weight", [V, d], embed_std)
    if not p["tied"]:
        put("lm_head.weight", [V, d], 0.2)
    put("model.norm.weight", [d], norm_std, final_mean)
    for i in range(L):
        pre = "model.layers.%d." % i
        put(pre + "input_layernorm.weight", [d], norm_std)
        put(pre + "post_attention_layernorm.weight", [d], norm_std)
        if p["g3"] or g2:
            put(pre + "pre_feedforward_layernorm.weight", [d], norm_std)
            put(pre + "post_feedforward_layernorm.weight", [d], norm_std)
        if p["g3"] and not g2:
            put(pre + "self_attn.q_norm.weight", [hd], norm_std, qk_mean)
            put(pre + "self_attn.k_norm.weight", [hd], norm_std, qk_mean)
        put(pre + "self_attn.q_proj.weight", [H * hd, d], qk / math.sqrt(d))
        put(pre + "self_attn.k_proj.weight", [Hkv * hd, d], qk / math.sqrt(d))
        put(pre + "self_attn.v_proj.weight", [Hkv * hd, d], 1.2 / math.sqrt(d))
        put(pre + "self_attn.o_proj.weight", [d, H * hd], 1.2 / math.sqrt(H * hd))
        put(pre + "mlp.gate_proj.weight", [F, d], gate / math.sqrt(d))
        put(pre + "mlp.up_proj.weight", [F, d], up / math.sqrt(d))
        put(pre + "mlp.down_proj.weight", [d, F], down / math.sqrt(F))
    return T


def param_count(cfg):
    """transformers' num_parameters() (tied embeddings counted once)"""
    p = gemma_params(cfg)
    d, F, H, Hkv, hd = p["d"], p["F"], p["H"], p["Hkv"], p["hd"]
    per = H * hd * d + 2 * Hkv * hd * d + d * H * hd + 3 * F * d + 2 * d
    if p["g3"]:
        per += 2 * d + 2 * hd
    elif p["g2"]:
        per += 2 * d
    return p["V"] * d * (1 if p["tied"] else 2) + d + p["L"] * per


# ---------------------------------------------------------------- alternative readings
def alternatives(cfg):
    p = gemma_params(cfg)
    other = "gelu" if ACTS[p["act"]] is gelu_tanh else "gelu_pytorch_tanh"
    out = [("norm weight without the +1 (Llama's RMSNorm)", {"plus1": False}),
           ("no sqrt(hidden_size) embedding scale", {"embed_scale": False}),
           ("activation %s" % other, {"act": other}),
           ("activation silu", {"act": "silu"})]
    if p["tied"]:
        out.append(("tied lm_head = the scaled embedding", {"scaled_head": True}))
    if p["sw"]:
        out += [("attention scale head_dim^-0.5", {"attn_scale": p["hd"] ** -0.5}),
                ("Gemma 1 block (no sandwich norms)", {"sandwich": False})]
    if p["g3"]:
        out += [("no q_norm / k_norm", {"qk_norm": False}),
                ("global RoPE (rope_theta + scaling) on every layer", {"rope": "global"}),
                ("local RoPE (rope_local_base_freq) on every layer", {"rope": "local"})]
    if p["sw"] and p["rope_scaling"]:
        out.append(("rope_scaling ignored", {"rope": "noscale"}))
    if p["sw"]:
        if p["attn_cap"] is not None:
            out += [("no attention logit softcap", {"attn_cap": None}),
                    ("attention softcap before the query_pre_attn_scalar scale", {"cap_order": "before_scale"})]
        elif p["g2"]:
            out.append(("attention logit softcap 50 (Gemma2Config's default) instead of null", {"attn_cap": 50.0}))
        if p["final_cap"] is not None:
            out.append(("no final logit softcap", {"final_cap": None}))
        elif p["g2"]:
            out.append(("final logit softcap 30 (Gemma2Config's default) instead of null", {"final_cap": 30.0}))
        lt = p["layer_types"]
        if "sliding_attention" in lt:
            W = p["window"]
            if W < p["mpe"]:
                out += [("full attention in the sliding layers", {"window": None}),
                        ("W+1 keys", {"window": W + 1})]
            flipped = ["full_attention" if t == "sliding_attention" else "sliding_attention" for t in lt]
            odd = " (sliding on odd instead of even layers)" if p["g2"] and all(
                (t == "sliding_attention") == (i % 2 == 0) for i, t in enumerate(lt)) else ""
            out.append(("layer types flipped %s%s" % ("".join("S" if t[0] == "s" else "F" for t in flipped), odd),
                        {"layer_types": flipped}))
            out.append(("every layer sliding", {"layer_types": ["sliding_attention"] * p["L"]}))
    return out


PROBE_CHARS = list(range(33, 127))  # printable ASCII but space: one byte = one token id


def probe_text(ref, alt, chars=PROBE_CHARS):
    """the two-token text (a, t) whose single cross entropy -log p(t | a) differs most,
    relatively, between the models `ref` and `alt` (CE >= 0.5): a loss that the summed
    losses of a long text would average out (the two GELUs differ by < 5e-4 anywhere).
    Returns (relative difference, a, t, CE under ref, CE under alt)."""
    best = None
    for a in chars:
        la = q2.log_softmax(ref.prefill([a])[0][0])
        lb = q2.log_softmax(alt.prefill([a])[0][0])
        for t in chars:
            ce = -la[t]
            if ce < 0.5:
                continue
            rel = abs(lb[t] - la[t]) / ce
            if best is None or rel > best[0]:
                best = (rel, a, t, ce, -lb[t])
    return best


class Case:
    models = {}

    def __init__(self, ck, tag, cfg, T, dt="F32", wtag=None):
        self.ck, self.tag, self.cfg, self.T, self.dt = ck, tag, cfg, T, dt
        self.wtag = wtag or tag
        write_folder(os.path.join(ck.work, tag), cfg, T, dt)
        self.W = q2.as_weights(T, dt)
        self.model = self.alt({})
        p = gemma_params(cfg)
        print("[%s] %s H %d, Hkv %d, hd %d, act %s, scale %.4g, layers %s, window %s, theta %g / local %s, "
              "rope_scaling %s, tied %s, softcaps %s / %s, %s" % (
                  tag, cfg["model_type"], p["H"], p["Hkv"], p["hd"], p["act"], p["scale"],
                  "".join("S" if t[0] == "s" else "F" for t in p["layer_types"]), p["window"], p["theta"],
                  p["local_theta"], p["rope_scaling"], p["tied"], p["attn_cap"], p["final_cap"], dt), flush=True)

    def alt(self, kw):
        key = (self.wtag, self.dt, json.dumps(self.cfg, sort_keys=True), json.dumps(kw, sort_keys=True))
        if key not in Case.models:
            Case.models[key] = GemmaRef(self.cfg, self.W, **kw)
        return Case.models[key]

    def ppl(self, ids, context, dtype="float64", rtol=1e-5):
        nf = len(self.ck.failures)
        compare_ppl(self.ck, self.tag, self.model, ids, context, dtype, rtol, self.tag)
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0:
            DIAGNOSE[0] -= 1
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
                    print("    alternative %-52s loss_sum %.10g%s" % (name, a, "   <-- lol matches" if abs(
                        a - got) <= max(rtol, 1e-4) * abs(a) else ""))

    def generate(self, prompt, n, dtype="float64"):
        nf = len(self.ck.failures)
        compare_generate(self.ck, self.tag, self.model, prompt, n, dtype, self.tag)
        if len(self.ck.failures) > nf and DIAGNOSE[0] > 0:
            DIAGNOSE[0] -= 1
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

    def probe(self, name, kw, dtype="float64", rtol=2e-6, assumed=""):
        """`hf ppl` of the two-token text that best separates the reference from the reading
        `kw` (see probe_text): lol must give the reference's single cross entropy"""
        rel, a, t, ce, ce_alt = probe_text(self.model, self.alt(kw))
        fn = "probe_%s_%s.txt" % (self.tag, re.sub(r"[^A-Za-z0-9]+", "_", name))
        with open(os.path.join(self.ck.work, fn), "w") as f:
            f.write(chr(a) + chr(t))
        out = os.path.join(self.ck.work, fn[:-4] + "_%s.json" % dtype)
        r = self.ck.run(["hf", "ppl", self.tag, "--data", fn, "--context", 64, "--dtype", dtype, "--out", out,
                         "--threads", 1])
        if r.returncode != 0:
            return
        res = json.load(open(out))
        print("    probe %r: reference CE %.10g, under '%s' %.10g (relative %.1e)" % (chr(a) + chr(t), ce, name,
                                                                                   ce_alt, rel))
        if rel < 20 * rtol:
            self.ck.note("%s probe for '%s': the readings differ by only %.1e" % (self.tag, name, rel))
        self.ck.equal("%s hf ppl probe %r: targets" % (self.tag, chr(a) + chr(t)), res.get("targets"), 1)
        ok = self.ck.close("%s hf ppl --dtype %s probe %r (vs '%s'): loss_sum%s" % (
            self.tag, dtype, chr(a) + chr(t), name, assumed), res.get("loss_sum"), ce, rtol)
        if not ok and res.get("loss_sum") is not None and abs(res["loss_sum"] - ce_alt) <= rtol * ce_alt:
            print("    lol matches the reference under: %s" % name)

    def info(self, check=True, window=None, caps=None):
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
        if caps is not None:
            cl = [l_ for l_ in r.stdout.splitlines() if re.search(r"soft.?cap|capping", l_, re.I)]
            for l_ in cl:
                print("    info: %s" % l_.strip())
            nums = set(float(x) for x in re.findall(r"\d+(?:\.\d+)?", " ".join(cl)))
            if not cl or not all(float(v) in nums for v in caps):
                self.ck.note("%s: hf info does not print the softcaps %s (format?)" % (self.tag, caps))
        if window is None:
            return
        lines = [l_ for l_ in r.stdout.splitlines() if "slid" in l_.lower() or "window" in l_.lower()]
        self.ck.compared += 1
        if not lines:
            self.ck.fail("%s: hf info prints no line about the sliding layers (window %d)" % (self.tag, window))
            return
        for l_ in lines:
            print("    info: %s" % l_.strip())
        self.ck.equal("%s hf info's sliding line names the window %d" % (self.tag, window),
                      any(re.search(r"\b%d\b" % window, l_) for l_ in lines), True)
        sl = [i for i, t in enumerate(gemma_params(self.cfg)["layer_types"]) if t == "sliding_attention"]
        txt = " ".join(lines)
        nums = set(int(x) for x in re.findall(r"\d+", txt))
        if not all(i in nums for i in sl):
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


# ---------------------------------------------------------------- the cases
def case_table():
    """tag -> (config, weight seed, gemma_weights keyword arguments, storage dtype). Gemma 3
    cases with tied embeddings use small embeddings and a final norm of about 5 (1 + N(4, .2)):
    with embeddings of std 0.3 the scaled input embedding dominates the sandwich-normed
    residual and greedy decoding repeats one token, which would test little."""
    A = gemma_config(tie_word_embeddings=DROP, rms_norm_eps=DROP)
    B = gemma_config(num_key_value_heads=1, hidden_activation="gelu", hidden_act="gelu", tie_word_embeddings=False,
                     rope_theta=DROP, rms_norm_eps=1e-5, torch_dtype="bfloat16")
    C = gemma3_config()
    D = gemma3_config(num_hidden_layers=3, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                      sliding_window_pattern=DROP, sliding_window=6, query_pre_attn_scalar=DROP,
                      tie_word_embeddings=False, final_logit_softcapping=DROP, attn_logit_softcapping=DROP)
    E = gemma3_config(num_hidden_layers=2, sliding_window=64, rope_theta=DROP, rope_local_base_freq=DROP,
                      num_key_value_heads=DROP, rope_scaling=None)
    small = {"embed_std": 0.05, "final_mean": 4.0}
    # Gemma 2
    G1 = gemma2_config()
    G2 = gemma2_config(num_hidden_layers=3, attn_logit_softcapping=None, final_logit_softcapping=None,
                       layer_types=["sliding_attention", "sliding_attention", "full_attention"], sliding_window=6,
                       query_pre_attn_scalar=10, rope_theta=500.0,
                       rope_scaling={"rope_type": "linear", "factor": 2.0},
                       tie_word_embeddings=False, rms_norm_eps=1e-5)
    G3 = gemma2_config(num_hidden_layers=3, attn_logit_softcapping=DROP, final_logit_softcapping=DROP,
                       query_pre_attn_scalar=DROP, rope_theta=DROP, rms_norm_eps=DROP, tie_word_embeddings=DROP,
                       hidden_activation=DROP, hidden_act=DROP, cache_implementation=DROP, sliding_window=4)
    # Gemma 3 with both softcaps set (binding)
    F = gemma3_config(num_hidden_layers=3, attn_logit_softcapping=2.5, final_logit_softcapping=4.0, sliding_window=4)
    return {"A": (A, 401, {}, "F32"), "B": (B, 402, {}, "BF16"), "C": (C, 403, small, "F32"),
            "D": (D, 404, {"embed_std": 0.1, "final_mean": 3.0}, "F32"), "E": (E, 405, small, "F32"),
            "G1": (G1, 413, {"embed_std": 0.05, "final_mean": 1.0}, "F32"),
            "G2": (G2, 412, {"embed_std": 0.1, "final_mean": 1.0}, "F32"),
            "G3": (G3, 413, {"embed_std": 0.1, "final_mean": 2.0, "qk": 8.0}, "F32"),
            "F": (F, 414, {"embed_std": 0.1, "final_mean": 1.0}, "F32")}


def kv_default(ck, cfg, seed, wkw, ids, tag="gemma2-defaults-kv-absent"):
    """G3 without num_key_value_heads, 4 query heads: transformers' Gemma2Config (4.45 and
    later) says 4 (multi-head attention here); 4.42's said 16, which 4 query heads cannot use.
    Agreement with 4 passes; a refusal naming num_key_value_heads is a note; anything else fails."""
    cfg = {k: v for k, v in cfg.items() if k != "num_key_value_heads"}
    T = gemma_weights(cfg, seed, **wkw)
    write_folder(os.path.join(ck.work, tag), cfg, T)
    out = os.path.join(ck.work, "ppl_%s.json" % tag)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 40, "--dtype", "float64", "--out", out,
                "--threads", 1], expect_rc=None)
    ck.compared += 1
    want, _ = mean_ce(GemmaRef(cfg, q2.as_weights(T, "F32")), ppl_windows(ids, 40))
    if r.returncode == 2 and "num_key_value_heads" in r.stderr:
        ck.note("%s: refused naming num_key_value_heads (Gemma2Config's default is 4 since transformers 4.45 or "
                "so, 16 in 4.42): %s" % (tag, r.stderr.strip()[-200:]))
        return
    got = json.load(open(out)).get("loss_sum") if r.returncode == 0 else None
    if got is not None and abs(got - want) <= 1e-5 * abs(want):
        if ck.verbose:
            print("  ok %-60s lol %.10g ref %.10g" % ("%s (num_key_value_heads absent -> 4)" % tag, got, want))
        return
    ck.fail("%s (num_key_value_heads absent, 4 query heads; Gemma2Config's default 4 = multi-head): expected "
            "loss_sum %.10g or exit 2 naming num_key_value_heads; got exit %d, %s" % (
                tag, want, r.returncode, ("loss_sum %.10g" % got) if got is not None else r.stderr.strip()[-300:]))


def null_window(ck, cfg, T, ids, tag="gemma3-pattern-window-null"):
    write_folder(os.path.join(ck.work, tag), cfg, T)
    out = os.path.join(ck.work, "ppl_%s.json" % tag)
    r = ck.run(["hf", "ppl", tag, "--data", "text.txt", "--context", 40, "--dtype", "float64", "--out", out,
                "--threads", 1], expect_rc=None)
    ck.compared += 1
    W = q2.as_weights(T, "F32")
    if r.returncode == 2 and "sliding_window" in r.stderr:
        if ck.verbose:
            print("  ok %-60s %s" % ("%s refused (exit 2)" % tag, r.stderr.strip()[:160]))
        return
    got = json.load(open(out)).get("loss_sum") if r.returncode == 0 else None
    want, _ = mean_ce(GemmaRef(cfg, W, window=None), ppl_windows(ids, 40))
    if got is not None and abs(got - want) <= 1e-5 * abs(want):
        ck.note("%s: run as unbounded sliding layers with the local RoPE (transformers fails here)" % tag)
        return
    msg = "%s (sliding_window null, layers from sliding_window_pattern; ASSUMED): expected exit 2 naming " \
          "sliding_window, or the sliding layers unbounded with the local RoPE (loss_sum %.10g); got exit %d, %s" % (
              tag, want, r.returncode, ("loss_sum %.10g" % got) if got is not None else r.stderr.strip()[-300:])
    if got is not None:
        for name, kw in (("every layer full attention with the global RoPE", {"window": None, "rope": "global"}),
                         ("window 4096 (the default)", {"window": 4096})):
            a, _ = mean_ce(GemmaRef(cfg, W, **kw), ppl_windows(ids, 40))
            if abs(a - got) <= 1e-5 * abs(a):
                msg += "; lol matches the reference under: %s" % name
    ck.fail(msg)


# ---------------------------------------------------------------- LayerRoute and export (third reviewer)
# check_layerroute_gemma / check_export_gemma: modelled on olmo_reference.py's check_layerroute_olmo /
# check_export_olmo, whose fold_adapter, LR_SAMPLES, LR_TARGETS and WORDS are imported.
def lr_reference_gemma(cfg, T, F, gates, samples):
    """LayerRoute eval's pooled assistant-token perplexities (backbone on T, open and gated on F =
    T with the LoRA folded in float64; each sample's gates from the mean of its whole sequence's
    states entering block i, the scaled embeddings for block 0) and mean executed layers; no
    system turn. Also the smallest |gate score| and the gated model."""
    W = lambda X: {k: (s, v, "F64") for k, (s, v) in X.items()}  # noqa: E731
    bb, ad = GemmaRef(cfg, W(T)), GemmaRef(cfg, W(F))
    ad.gates = gates
    out, margin = {}, float("inf")
    for key, model, mode in (("ppl_base", bb, "backbone"), ("ppl_open", ad, "open"), ("ppl_gated", ad, "gated")):
        tot = cnt = 0.0
        ex, pats = [], []
        for s in samples:
            toks, mask, _ = q2.chatml_ids(s, None)
            logits, _, opens, scores = model.prefill(toks, mode)
            ex.append(sum(opens))
            pats.append(opens)
            if scores:
                margin = min(margin, min(abs(x) for x in scores))
            for j in range(len(toks) - 1):
                if mask[j + 1]:
                    tot -= q2.log_softmax(logits[j])[toks[j + 1]]
                    cnt += 1
        out[key] = math.exp(tot / cnt)
        if mode == "gated":
            out["executed_mean"] = sum(ex) / len(ex)
            out["layer_open"] = [sum(o[i] for o in pats) / len(pats) for i in range(model.L)]
            out["patterns"] = sorted(set("".join("1" if o else "0" for o in op) for op in pats))
    return out, margin, ad


def q_lora_unscaled(cfg, T, F):
    """a diagnosis reading for Gemma 2 (query_pre_attn_scalar s != head_dim): the scale folded into the
    base q_proj only, q = (c W + alpha/r B A) x with c = sqrt(head_dim / s) and scores times
    head_dim^-1/2, i.e. the LoRA on q_proj divided by c relative to PEFT on transformers' model.
    Returns (config, base tensors, adapted tensors) of that reading."""
    p = gemma_params(cfg)
    c = p["scale"] / p["hd"] ** -0.5
    cfg2 = dict(cfg, query_pre_attn_scalar=p["hd"])
    T2 = {k: (v[0], [x * c for x in v[1]] if k.endswith("q_proj.weight") else v[1]) for k, v in T.items()}
    F2 = dict(F)
    for k, v in T2.items():
        if k.endswith("q_proj.weight"):
            # F - T = the LoRA delta; add it to the scaled base unscaled
            F2[k] = (v[0], [x + (f - t) for x, f, t in zip(v[1], F[k][1], T[k][1])])
    return cfg2, T2, F2


def _maxrel(A, B):
    """max |a - b| over two lists of logit rows, relative to max |b|"""
    return max(abs(a - b) for ra, rb in zip(A, B) for a, b in zip(ra, rb)) / max(abs(b) for rb in B for b in rb)


def merged_expected(cfg, mc, F):
    """the tensors a merged folder of config `mc` should hold: the float64 fold F, where a rewritten
    query_pre_attn_scalar s' (the base's s) folds sqrt(s' / s) into the queries: Gemma 2's q_proj,
    Gemma 3's q_norm (1 + w' = c (1 + w)); RoPE is linear and q_norm is scale-equivariant."""
    p, pm = gemma_params(cfg), gemma_params(mc)
    c = p["scale"] / pm["scale"]
    E = dict(F)
    if abs(c - 1.0) > 1e-12:
        for k, (shape, vals) in F.items():
            if p["g3"] and k.endswith("self_attn.q_norm.weight"):
                E[k] = (shape, [c * (1.0 + v) - 1.0 for v in vals])
            elif p["g2"] and k.endswith("self_attn.q_proj.weight"):
                E[k] = (shape, [c * v for v in vals])
    return E, c


def check_layerroute_gemma(ck, bases):
    """LayerRoute on Gemma-family bases. bases: (tag, folder, config, tensors, full, extra train args)
    where `full` asks for merge and generate besides train + eval. Train 3 steps (every LoRA target), eval against the
    reference with the LoRA folded in float64 and the adapter's gates, merge (the base's architecture
    and tensor names, the fold's values, a folder that read as transformers reads it computes the
    adapted model, and hf ppl of it), layerroute generate (--gates learned and open)."""
    import shutil
    import olmo_reference as olmo
    from safetensors_io import read_st
    print("[layerroute on Gemma bases]", flush=True)
    data = os.path.join(ck.work, "lr_gemma.jsonl")
    with open(data, "w") as f:
        for s_ in olmo.LR_SAMPLES:
            f.write(json.dumps(s_) + "\n")
    lens = [len(q2.chatml_ids(s_, None)[0]) for s_ in olmo.LR_SAMPLES]
    train = ["--data", "lr_gemma.jsonl", "--steps", 3, "--batch", 2, "--accum", 1, "--lr", 0.01, "--system", "",
             "--max-len", 64, "--rank", 4, "--targets", olmo.LR_TARGETS, "--threads", 1, "--no-progress"]
    ids = q2.encode(TEXT)
    for tag, base, cfg, T, full, extra in bases:
        p = gemma_params(cfg)
        adapter, merged = "lr-" + tag, "lr-" + tag + "-merged"
        for d_ in (adapter, merged):
            shutil.rmtree(os.path.join(ck.work, d_), ignore_errors=True)
        slid = [i for i, t in enumerate(p["layer_types"]) if t == "sliding_attention"]
        print("  [%s] base %s (%s), sliding layers %s window %s, samples of %d..%d tokens" % (
            tag, base, cfg["architectures"][0], slid, p["window"], min(lens), max(lens)), flush=True)
        r = ck.run(["layerroute", "train", "--base", base, "--out", adapter] + train + extra)
        if r.returncode != 0:
            continue
        F, gates = olmo.fold_adapter(T, os.path.join(ck.work, adapter))
        ref, margin, model = lr_reference_gemma(cfg, T, F, gates, olmo.LR_SAMPLES)
        print("    reference: gate patterns %s, smallest |gate score| %.2e" % (ref["patterns"], margin))
        r = ck.run(["layerroute", "eval", "--adapter", adapter, "--data", "lr_gemma.jsonl", "--samples", 0,
                    "--timing-samples", 0, "--json", adapter + "-eval.json", "--threads", 1])
        if r.returncode == 0:
            res = json.load(open(os.path.join(ck.work, adapter + "-eval.json")))
            gated = margin > 1e-4
            nf = len(ck.failures)
            for k in ("ppl_base", "ppl_open") + (("ppl_gated",) if gated else ()):
                ck.close("%s layerroute eval %s" % (tag, k), res.get(k), ref[k], 1e-5)
            if gated:
                ck.close("%s layerroute eval executed_mean" % tag, res.get("executed_mean"), ref["executed_mean"],
                         0, 1e-9)
                if "layer_open" in res:
                    ck.equal("%s layerroute eval layer_open" % tag, [round(v, 9) for v in res["layer_open"]],
                             [round(v, 9) for v in ref["layer_open"]])
            if len(ck.failures) > nf and p["g2"] and abs(p["scale"] - p["hd"] ** -0.5) > 1e-12:
                c2, T2, F2 = q_lora_unscaled(cfg, T, F)
                alt, _, _ = lr_reference_gemma(c2, T2, F2, gates, olmo.LR_SAMPLES)
                print("    under the reading 'q = (c W_q + alpha/r B A) x, scores x head_dim^-1/2' (the LoRA on "
                      "q_proj not times c = sqrt(head_dim / query_pre_attn_scalar)): ppl_open %.10g, ppl_gated %.10g"
                      "%s" % (alt["ppl_open"], alt["ppl_gated"], "   <-- lol matches" if abs(
                          alt["ppl_open"] - (res.get("ppl_open") or 0)) <= 1e-5 * alt["ppl_open"] else ""))
            if not gated:
                ck.note("%s layerroute: a gate score within %.1e of 0: gated numbers not compared" % (tag, margin))
            if abs(ref["ppl_open"] - ref["ppl_base"]) < 1e-4 * ref["ppl_base"]:
                ck.note("%s layerroute: the LoRA barely moves the perplexity (%.3g vs %.3g)" % (
                    tag, ref["ppl_open"], ref["ppl_base"]))
        if not full:
            continue
        # merge: a folder of the base's architecture holding the folded weights
        r = ck.run(["layerroute", "merge", "--adapter", adapter, "--out", merged])
        if r.returncode == 0:
            mdir = os.path.join(ck.work, merged)
            mc = json.load(open(os.path.join(mdir, "config.json")))
            ck.equal("%s layerroute merge: architectures / model_type" % tag,
                     (mc.get("architectures"), mc.get("model_type")), (cfg["architectures"], cfg["model_type"]))
            mT = q2.read_folder_weights(mdir)
            ck.equal("%s layerroute merge: tensor names = the base's" % tag, sorted(mT), sorted(T))
            E, c = merged_expected(cfg, mc, F)
            if c != 1.0:
                print("    merged query_pre_attn_scalar %r (base %r): the queries carry x%.6g" % (
                    mc.get("query_pre_attn_scalar"), cfg.get("query_pre_attn_scalar"), c))
            worst, wname = 0.0, None
            for k, (shape, want) in E.items():
                if k in mT:
                    sc = max(abs(v) for v in want) or 1.0
                    e = max(abs(a - b) for a, b in zip(mT[k][1], want)) / sc
                    if e > worst:
                        worst, wname = e, k
            ck.close("%s layerroute merge: max |merged - float64 fold| / max |W'| (worst %s)" % (tag, wname), worst,
                     0.0, 0, 1e-6)
            # the function: the merged folder read as transformers reads it (its own config) against
            # the adapted model (the base's config on the fold)
            adapted = GemmaRef(cfg, {k: (s_, v, "F64") for k, (s_, v) in F.items()})
            mref = GemmaRef(mc, mT)
            seqs = [q2.chatml_ids(s_, None)[0] for s_ in olmo.LR_SAMPLES[:3]] + [ids[:40]]
            dmax = max(_maxrel(mref.prefill(s_)[0], adapted.prefill(s_)[0]) for s_ in seqs)
            ok = ck.close("%s layerroute merge: the merged folder's logits (its config.json, as transformers reads "
                          "it) vs the adapted model, max rel" % tag, dmax, 0.0, 0, 1e-5)
            if not ok and p["g2"] and abs(p["scale"] - p["hd"] ** -0.5) > 1e-12:
                c2, _, F2 = q_lora_unscaled(cfg, T, F)
                alt = GemmaRef(c2, {k: (s_, v, "F64") for k, (s_, v) in F2.items()})
                d2 = max(_maxrel(mref.prefill(s_)[0], alt.prefill(s_)[0]) for s_ in seqs)
                print("    the merged folder against the reading 'LoRA on q_proj not times sqrt(head_dim / "
                      "query_pre_attn_scalar)': max rel %.2e%s" % (d2, "   <-- lol matches" if d2 < 1e-5 else ""))
            mg = os.path.join(mdir, "gates.safetensors")
            if os.path.exists(mg):
                G = read_st(mg)
                got_g = (q2.mat(G["gates.weight"]), list(G["gates.bias"][1])) if "gates.weight" in G and \
                    "gates.bias" in G else sorted(G)
                ck.equal("%s layerroute merge: gates.safetensors = the adapter's" % tag, got_g, gates)
            else:
                ck.note("%s layerroute merge: no gates.safetensors in the merged folder" % tag)
            for k_ in ("pad_token_id", "bos_token_id", "eos_token_id"):
                if mc.get(k_) != cfg.get(k_):
                    ck.note("%s layerroute merge: %s %r -> %r" % (tag, k_, cfg.get(k_), mc.get(k_)))
            compare_ppl(ck, merged, adapted, ids, 40, "float64", 1e-5, merged)
        # generate: the gated model (gates from the prompt) and every layer open, greedy
        # (a chat prompt of 26 ids and a 17-id piece of TEXT, +12 new: past the window of 5)
        toks_, _, plen = q2.chatml_ids({"question": "hi 3 hi", "answer": "ok"}, None)
        for prompt in (toks_[:plen], ids[5:22]):
            for gt, fo in (("open", [True] * model.L), ("learned", None)):
                want = model.greedy(prompt, 12, "forced" if fo else "gated", fo)[0]
                if len(set(want)) < 3:
                    ck.note("%s layerroute generate --gates %s (%d prompt ids): the reference's greedy ids %s are "
                            "repetitive" % (tag, gt, len(prompt), want))
            if margin > 1e-4:
                q2.lr_generate(ck, model, adapter, "%s (%d prompt ids)" % (tag, len(prompt)), prompt, "learned",
                               n=12)
            q2.lr_generate(ck, model, adapter, "%s (%d prompt ids)" % (tag, len(prompt)), prompt, "open", n=12)


def train_dense_gemma(ck, name, model, steps=8):
    """an 8-step `lol train` of a tiny dense model on gemma-data (the byte-level tokenizer's 259 ids)"""
    import shutil
    m = {"architecture": "dense", "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16, "ffn_hidden": 40,
         "max_seq_len": 64, "n_layers": 4}
    m.update(model)
    cfg = {"model": m, "data": {"dir": "gemma-data", "seq_len": 32, "batch_size": 4, "packing": "pack"},
           "optim": {"type": "adamw", "lr": 0.02},
           "train": {"steps": steps, "out": name, "device": "cpu", "threads": 1, "seed": 0, "eval_every": 100,
                     "eval_batches": 1, "save_every": 100, "log_every": 100}}
    shutil.rmtree(os.path.join(ck.work, name), ignore_errors=True)
    json.dump(cfg, open(os.path.join(ck.work, name + ".json"), "w"))
    r = ck.run(["train", "--config", name + ".json", "--no-progress"])
    return name if r.returncode == 0 else None


def _latest_ckpt(ck, run):
    d = os.path.join(ck.work, run, "checkpoints")
    return os.path.join(d, sorted(os.listdir(d))[-1])


def gemma_shapes(arch, V, d, H, Hkv, hd, F, L, tied):
    """Gemma / Gemma2 / Gemma3ForCausalLM's tensor names and shapes"""
    out = {"model.embed_tokens.weight": [V, d], "model.norm.weight": [d]}
    if not tied:
        out["lm_head.weight"] = [V, d]
    for i in range(L):
        p_ = "model.layers.%d." % i
        out.update({p_ + "self_attn.q_proj.weight": [H * hd, d], p_ + "self_attn.k_proj.weight": [Hkv * hd, d],
                    p_ + "self_attn.v_proj.weight": [Hkv * hd, d], p_ + "self_attn.o_proj.weight": [d, H * hd],
                    p_ + "input_layernorm.weight": [d], p_ + "post_attention_layernorm.weight": [d],
                    p_ + "mlp.gate_proj.weight": [F, d], p_ + "mlp.up_proj.weight": [F, d],
                    p_ + "mlp.down_proj.weight": [d, F]})
        if arch in ("gemma2", "gemma3"):
            out.update({p_ + "pre_feedforward_layernorm.weight": [d], p_ + "post_feedforward_layernorm.weight": [d]})
        if arch == "gemma3":
            out.update({p_ + "self_attn.q_norm.weight": [hd], p_ + "self_attn.k_norm.weight": [hd]})
    return out


ARCHS = {"gemma": ("GemmaForCausalLM", "gemma"), "gemma2": ("Gemma2ForCausalLM", "gemma2"),
         "gemma3": ("Gemma3ForCausalLM", "gemma3_text")}


def export_case(ck, tag, run, arch, model, want_keys, ids):
    """`lol export --hf RUN` (default architecture): config.json / tensors as `arch`'s, the reference on
    the folder = `lol forward` on the checkpoint, norms = the checkpoint's minus 1, hf ppl reads it back"""
    from safetensors_io import read_st
    out = "ex-" + tag
    import shutil
    shutil.rmtree(os.path.join(ck.work, out), ignore_errors=True)
    r = ck.run(["export", "--hf", run, "--out", out])
    if r.returncode != 0:
        return
    ex = os.path.join(ck.work, out)
    c = json.load(open(os.path.join(ex, "config.json")))
    ck.equal("export %s: default architecture" % tag, (c.get("architectures"), c.get("model_type")),
             ([ARCHS[arch][0]], ARCHS[arch][1]))
    if c.get("model_type") != ARCHS[arch][1]:
        return
    p = gemma_params(c)
    # the config as transformers' config class reads it (absent keys -> the class's defaults)
    got = {"head_dim": p["hd"], "num_key_value_heads": p["Hkv"], "hidden_activation": p["act"],
           "tie_word_embeddings": p["tied"], "rope_theta": p["theta"], "rms_norm_eps": p["eps"],
           "max_position_embeddings": p["mpe"]}
    want = {"head_dim": model["head_dim"], "num_key_value_heads": model["n_kv_heads"],
            "hidden_activation": model["activation"], "tie_word_embeddings": model.get("tie_word_embeddings", False),
            "rope_theta": model.get("rope_theta", 10000.0), "rms_norm_eps": 1e-6, "max_position_embeddings": 64}
    if arch in ("gemma2", "gemma3"):
        got.update({"layer_types": p["layer_types"], "sliding_window": p["window"],
                    "attn_logit_softcapping": p["attn_cap"], "final_logit_softcapping": p["final_cap"]})
        want.update(want_keys)
    if arch == "gemma3":
        got.update({"rope_local_base_freq": p["local_theta"], "rope_scaling": p["rope_scaling"]})
    for k in sorted(want):
        if k in got:
            ok = (abs(got[k] - want[k]) <= 1e-12 * abs(want[k])) if isinstance(want[k], float) and \
                isinstance(got[k], (int, float)) else got[k] == want[k]
            ck.compared += 1
            if not ok:
                ck.fail("export %s config.json read as %s: %s %r, the checkpoint's %r" % (
                    tag, ARCHS[arch][0], k, got[k], want[k]))
    if ck.verbose:
        print("  ok %-60s %s" % ("export %s config.json as %s reads it" % (tag, ARCHS[arch][0]), _kv(got)))
    # version differences: each reading of the same file must give the same function
    if arch == "gemma3":
        lt = c.get("layer_types")
        P = c.get("sliding_window_pattern", 6)
        by_p = ["sliding_attention" if (i + 1) % P else "full_attention" for i in range(c["num_hidden_layers"])]
        if lt is not None:
            ck.equal("export %s: layer_types = sliding_window_pattern's %s (transformers < 4.53 reads the pattern)"
                     % (tag, P), lt, by_p)
    if arch == "gemma2":
        lt = c.get("layer_types")
        if lt is not None:
            ck.equal("export %s: layer_types = 0, 2, .. sliding (transformers < 4.53 ignores layer_types)" % tag, lt,
                     ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(c["num_hidden_layers"])])
    if arch == "gemma":
        ha = c.get("hidden_act", "gelu_pytorch_tanh")
        ck.equal("export %s: hidden_act = hidden_activation (transformers >= 4.48's GemmaMLP reads hidden_act, "
                 "default gelu_pytorch_tanh)" % tag, (ha, c.get("hidden_activation")), (model["activation"],) * 2)
    T = q2.read_folder_weights(ex)
    ck.equal("export %s: tensor names and shapes (%s's)" % (tag, ARCHS[arch][0]),
             sorted((k, list(v[0])) for k, v in T.items()),
             sorted(gemma_shapes(arch, 259, 32, 4, 2, model["head_dim"], 40, model["n_layers"],
                                 model.get("tie_word_embeddings", False)).items()))
    # norms written as w - 1 (the checkpoint's tensors carry Llama's names)
    try:
        CK = read_st(os.path.join(_latest_ckpt(ck, run), "model.safetensors"))
    except (OSError, IndexError):
        CK = {}
    # lol's attention scale is head_dim^-1/2; a query_pre_attn_scalar s other than head_dim must carry
    # c = sqrt(s / head_dim) in Gemma 2's q_proj or Gemma 3's q_norm (1 + w)
    c_q = model["head_dim"] ** -0.5 / p["scale"]
    if abs(c_q - 1.0) > 1e-12:
        ck.note("export %s: query_pre_attn_scalar %r != head_dim %d: queries scaled by %.6g" % (
            tag, c.get("query_pre_attn_scalar"), model["head_dim"], c_q))
    worst, n, other, miss = 0.0, 0, 0.0, []
    for k, v in T.items():
        if k not in CK:
            miss.append(k)
            continue
        if "norm" in k:
            n += 1
            f = c_q if k.endswith("q_norm.weight") else 1.0
            worst = max(worst, max(abs(a + 1.0 - f * b) for a, b in zip(v[1], CK[k][1])))
        else:
            f = c_q if (k.endswith("q_proj.weight") and arch != "gemma3") else 1.0
            other = max(other, max(abs(a - f * b) for a, b in zip(v[1], CK[k][1])) / max(abs(b) for b in CK[k][1]))
    if CK:
        ck.close("export %s: max |exported norm + 1 - checkpoint's norm| (%d norms)" % (tag, n), worst, 0.0, 0, 1e-6)
        ck.close("export %s: max |exported - checkpoint| / max |W| of the other weights" % tag, other, 0.0, 0,
                 1e-6)
        if miss:
            ck.note("export %s: tensors not in the checkpoint under the same name: %s" % (tag, miss[:4]))
    # the function: lol forward on the checkpoint against the reference on the exported folder
    toks = ids[:40]
    fw = "fw-%s.safetensors" % tag
    r = ck.run(["forward", "--model", run, "--tokens", ",".join(map(str, toks)), "--out", fw])
    model_ref = GemmaRef(c, T)
    if r.returncode == 0:
        lg = read_st(os.path.join(ck.work, fw))["logits"]
        V = lg[0][-1]
        gotl = [lg[1][i * V:(i + 1) * V] for i in range(len(toks))]
        want_l = model_ref.prefill(toks)[0]
        err = _maxrel(gotl, want_l)
        ok = ck.close("export %s: max |lol forward(checkpoint) - reference(exported folder)| / max |logit|" % tag,
                      err, 0.0, 0, 2e-5)
        # which readings would the comparison tell apart?
        blind, match = [], []
        for name, kw in alternatives(c):
            if name.startswith("activation") or ("attn_scale" in kw and abs(kw["attn_scale"] - p["scale"]) < 1e-15):
                continue  # hidden_activation is checked above; the same scale is no alternative
            e2 = _maxrel(gotl, GemmaRef(c, T, **kw).prefill(toks)[0])
            if e2 < 2e-4:
                (match if not ok else blind).append(name)
        if blind:
            ck.note("export %s: the forward comparison barely tells apart: %s" % (tag, "; ".join(blind)))
        if match:
            print("    lol forward matches the reference under: %s" % "; ".join(match))
    compare_ppl(ck, out, model_ref, ids, 40, "float64", 1e-5, out)


def _kv(d):
    s = ", ".join("%s %s" % (k, v if not isinstance(v, list) else "".join("S" if t[0] == "s" else "F" for t in v))
                  for k, v in sorted(d.items()))
    return s if len(s) < 200 else s[:197] + "..."


def export_refusal(ck, tag, run, arch, needles):
    import shutil
    out = "ex-refuse-%s-%s" % (tag, arch or "default")
    shutil.rmtree(os.path.join(ck.work, out), ignore_errors=True)
    r = ck.run(["export", "--hf", run, "--out", out] + (["--arch", arch] if arch else []), expect_rc=None)
    ck.compared += 1
    named = [n for n in needles if n in r.stderr]
    if r.returncode != 2 or not named:
        ck.fail("export of %s%s: expected exit 2 naming %s; got exit %d, stderr %r" % (
            tag, " --arch " + arch if arch else "", " or ".join(needles), r.returncode, r.stderr.strip()[-300:]))
    elif ck.verbose:
        print("  ok %-60s %s" % ("export %s --arch %s refused (exit 2)" % (tag, arch), r.stderr.strip()[:160]))


def _edited_ckpt(ck, run, name, **changes):
    """a copy of run's latest checkpoint with config.json fields changed (same weights)"""
    import shutil
    dst = os.path.join(ck.work, name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(_latest_ckpt(ck, run), dst)
    cp = os.path.join(dst, "config.json")
    c = json.load(open(cp))
    c.update(changes)
    json.dump(c, open(cp, "w"), indent=1)
    return name


def check_export_gemma(ck, tokenizer_folder):
    """`lol export --hf` of Gemma-layout dense checkpoints trained with `lol train`"""
    import shutil
    import olmo_reference as olmo
    print("[export of Gemma-layout dense checkpoints]", flush=True)
    rng = random.Random(12)
    with open(os.path.join(ck.work, "gemma_corpus.txt"), "w") as f:
        for _ in range(300):
            f.write(" ".join(rng.choice(olmo.WORDS) for _ in range(rng.randint(5, 30))) + "\n\n")
    shutil.rmtree(os.path.join(ck.work, "gemma-data"), ignore_errors=True)
    r = ck.run(["corpus", "--in", "gemma_corpus.txt", "--tokenizer", tokenizer_folder + "/tokenizer.json", "--out",
                "gemma-data", "--valid-fraction", 0.1, "--no-progress"])
    if r.returncode != 0:
        return
    ids = q2.encode(TEXT)
    gem = {"scale_embeddings": True, "activation": "gelu_pytorch_tanh"}
    # Gemma 3: sandwich norms, per-head q/k norms, layers 0, 2 slide (window 6) with their own RoPE
    # base 10000, the full ones rope_theta 1e6 with linear scaling 2; untied
    m3 = dict(gem, n_layers=4, sandwich_norm=True, qk_norm=True, attention="sliding", window=6,
              full_attention_interval=2, rope_theta=1e6, rope_local_theta=10000.0,
              rope_scaling={"rope_type": "linear", "factor": 2.0}, tie_word_embeddings=False)
    run3 = train_dense_gemma(ck, "gemma3-dense", m3)
    m3 = dict(m3, head_dim=16, n_kv_heads=2)
    if run3:
        export_case(ck, "gemma3-dense", run3, "gemma3", m3, {
            "layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 6,
            "attn_logit_softcapping": None, "final_logit_softcapping": None, "rope_local_base_freq": 10000.0,
            "rope_scaling": {"rope_type": "linear", "factor": 2.0}}, ids)
        # the same weights with a full layer every 3rd and both soft-caps (Gemma 3 holds any pattern)
        ed = _edited_ckpt(ck, run3, "gemma3-dense-p3-caps", full_attention_interval=3, attn_logit_softcap=2.5,
                          final_logit_softcap=4.0)
        export_case(ck, "gemma3-dense-p3-caps", ed, "gemma3", m3, {
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
            "sliding_window": 6, "attn_logit_softcapping": 2.5, "final_logit_softcapping": 4.0,
            "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}, ids)
        export_refusal(ck, "gemma3-dense", run3, "gemma2", ["qk_norm", "q_norm", "rope_local"])
        export_refusal(ck, "gemma3-dense", run3, "qwen2", ["scale_embeddings", "sandwich", "activation", "gelu",
                                                           "rope_local", "Gemma", "gemma"])
        export_refusal(ck, "gemma3-dense", run3, "gemma", ["sandwich", "qk_norm", "q_norm", "sliding", "window",
                                                           "rope_local"])
    # Gemma 2: sandwich norms, no q/k norms, layers 0, 2 slide (window 5), both soft-caps; tied
    m2 = dict(gem, n_layers=4, sandwich_norm=True, attention="sliding", window=5, full_attention_interval=2,
              attn_logit_softcap=2.0, final_logit_softcap=3.0, tie_word_embeddings=True)
    run2 = train_dense_gemma(ck, "gemma2-dense", m2)
    m2 = dict(m2, head_dim=16, n_kv_heads=2)
    if run2:
        export_case(ck, "gemma2-dense", run2, "gemma2", m2, {
            "layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 5,
            "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0}, ids)
        # without soft-caps: Gemma2Config's defaults (50 / 30) must not apply
        ed = _edited_ckpt(ck, run2, "gemma2-dense-nocap", attn_logit_softcap=0.0, final_logit_softcap=0.0)
        export_case(ck, "gemma2-dense-nocap", ed, "gemma2", m2, {
            "layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 5,
            "attn_logit_softcapping": None, "final_logit_softcapping": None}, ids)
        # a full layer every 3rd: Gemma 2 slides on 0, 2, 4, .. only
        ed = _edited_ckpt(ck, run2, "gemma2-dense-p3", full_attention_interval=3)
        export_refusal(ck, "gemma2-dense-p3", ed, None, ["full_attention_interval", "interval", "layer"])
        export_refusal(ck, "gemma2-dense-p3", ed, "gemma2", ["full_attention_interval", "interval", "layer"])
    # Gemma 1: Llama blocks, exact GELU, full attention, tied
    m1 = dict(gem, n_layers=3, activation="gelu", rope_theta=500.0, tie_word_embeddings=True)
    run1 = train_dense_gemma(ck, "gemma1-dense", m1)
    m1 = dict(m1, head_dim=16, n_kv_heads=2)
    if run1:
        export_case(ck, "gemma1-dense", run1, "gemma", m1, {}, ids)
        export_refusal(ck, "gemma1-dense", run1, "gemma3", ["sandwich", "qk_norm", "q_norm", "pre_feedforward"])


# ---------------------------------------------------------------- self-checks
def selftest():
    bad = []
    t0 = time.time()
    # activations
    if abs(gelu_tanh(1.0) - 0.8411919906082768) > 1e-12 or abs(gelu_exact(1.0) - 0.8413447460685429) > 1e-12:
        bad.append("gelu values at 1.0: %r %r" % (gelu_tanh(1.0), gelu_exact(1.0)))
    # config reading
    lt = gemma_params(gemma3_config(num_hidden_layers=12, sliding_window_pattern=DROP))["layer_types"]
    want = (["sliding_attention"] * 5 + ["full_attention"]) * 2
    if lt != want:
        bad.append("default pattern 6: %s" % lt)
    if gemma_params(gemma3_config())["layer_types"] != ["sliding_attention", "full_attention"] * 2:
        bad.append("pattern 2")
    pd = gemma_params(gemma3_config(num_key_value_heads=DROP, head_dim=DROP, rms_norm_eps=DROP, rope_theta=DROP,
                                    rope_local_base_freq=DROP, query_pre_attn_scalar=DROP, sliding_window=DROP,
                                    tie_word_embeddings=DROP, hidden_activation=DROP))
    if (pd["Hkv"], pd["hd"], pd["eps"], pd["theta"], pd["local_theta"], pd["scale"], pd["window"], pd["tied"],
            pd["act"]) != (4, 256, 1e-6, 1e6, 10000.0, 1 / 16, 4096, True, "gelu_pytorch_tanh"):
        bad.append("Gemma3TextConfig defaults %s" % pd)
    pd = gemma_params(gemma_config(num_key_value_heads=DROP, head_dim=DROP, rope_theta=DROP, hidden_act="gelu",
                                   hidden_activation=DROP))
    if (pd["Hkv"], pd["hd"], pd["eps"], pd["theta"], pd["tied"], pd["act"]) != (16, 256, 1e-6, 1e4, True,
                                                                                 "gelu_pytorch_tanh"):
        bad.append("GemmaConfig defaults %s" % pd)
    pd = gemma_params(gemma2_config(num_key_value_heads=DROP, head_dim=DROP, rms_norm_eps=DROP, rope_theta=DROP,
                                    query_pre_attn_scalar=DROP, sliding_window=DROP, tie_word_embeddings=DROP,
                                    hidden_activation=DROP, attn_logit_softcapping=DROP, final_logit_softcapping=DROP,
                                    num_hidden_layers=5))
    if (pd["Hkv"], pd["hd"], pd["eps"], pd["theta"], pd["scale"], pd["window"], pd["tied"], pd["act"], pd["attn_cap"],
            pd["final_cap"], pd["local_theta"], pd["embed_scale"]) != (
            4, 256, 1e-6, 1e4, 1 / 16, 4096, True, "gelu_pytorch_tanh", 50.0, 30.0, None, math.sqrt(32)):
        bad.append("Gemma2Config defaults %s" % pd)
    if pd["layer_types"] != ["sliding_attention", "full_attention"] * 2 + ["sliding_attention"]:
        bad.append("Gemma 2 default layer types %s" % pd["layer_types"])
    pd = gemma_params(gemma2_config(attn_logit_softcapping=None, final_logit_softcapping=None,
                                    layer_types=["full_attention"] * 3 + ["sliding_attention"]))
    if (pd["attn_cap"], pd["final_cap"], pd["layer_types"][3], pd["layer_types"][0]) != (
            None, None, "sliding_attention", "full_attention"):
        bad.append("Gemma 2 null softcaps / explicit layer_types %s" % pd)
    p3 = gemma_params(gemma3_config(attn_logit_softcapping=DROP, final_logit_softcapping=DROP))
    if gemma_params(gemma3_config())["attn_cap"] is not None or p3["final_cap"] is not None:
        bad.append("Gemma 3 softcaps default to null")
    # A Gemma 1 model = qwen2_reference's Llama Ref with 1 + w norm weights, the scaled
    # embedding as input, the unscaled one as (untied) lm_head and SiLU replaced by GELU-tanh
    import tempfile
    import shutil
    tmp = tempfile.mkdtemp(prefix="gemma_selftest_")
    cfg = gemma_config(max_position_embeddings=64)
    T = gemma_weights(cfg, 5)
    p = gemma_params(cfg)
    lcfg = q2.make_config("LlamaForCausalLM", num_hidden_layers=3, max_position_embeddings=64, rope_theta=500.0,
                          rms_norm_eps=1e-6, head_dim=16, tie_word_embeddings=False)
    LT = {}
    for name, (shape, vals) in T.items():
        if name.endswith("norm.weight"):
            LT[name] = (shape, [1.0 + v for v in vals])
        elif name == "model.embed_tokens.weight":
            LT[name] = (shape, [v * p["embed_scale"] for v in vals])
            LT["lm_head.weight"] = (shape, vals)
        else:
            LT[name] = (shape, vals)
    write_folder(tmp, lcfg, {k: v for k, v in LT.items()})
    saved = q2.silu
    q2.silu = gelu_tanh
    try:
        llama = q2.Ref(tmp, weights={k: (s, v, "F64") for k, (s, v) in LT.items()})
        ids = q2.encode("Hello, gemma!")
        la, _, _, _ = llama.prefill(ids)
    finally:
        q2.silu = saved
    ga = GemmaRef(cfg, q2.as_weights(T, "F32"))
    lb, _, _, _ = ga.prefill(ids)
    if max(abs(a - b) for ra, rb in zip(la, lb) for a, b in zip(ra, rb)) > 1e-9:
        bad.append("GemmaRef (gemma 1) != Llama Ref with 1 + w, scaled embedding and GELU-tanh")
    # the Gemma 3 model without q/k norms, sandwich norms and with one RoPE and no window,
    # scale hd^-0.5 = the Gemma 1 model on the same weights
    c3 = gemma3_config(num_hidden_layers=3, rope_theta=500.0, rope_scaling=None, sliding_window=None,
                       sliding_window_pattern=1, query_pre_attn_scalar=16, max_position_embeddings=64)
    T3 = dict(T)
    rng = random.Random(9)
    for i in range(3):
        for nm, n in (("pre_feedforward_layernorm", 32), ("post_feedforward_layernorm", 32),
                      ("self_attn.q_norm", 16), ("self_attn.k_norm", 16)):
            T3["model.layers.%d.%s.weight" % (i, nm)] = ([n], [f32(rng.gauss(0, 0.2)) for _ in range(n)])
    g3 = GemmaRef(c3, q2.as_weights(T3, "F32"), qk_norm=False, sandwich=False)
    lc, _, _, _ = g3.prefill(ids)
    if max(abs(a - b) for ra, rb in zip(lb, lc) for a, b in zip(ra, rb)) > 1e-6:  # float32(sqrt(d)) vs sqrt(d)
        bad.append("GemmaRef (gemma3 with the Gemma 3 pieces off) != GemmaRef (gemma 1)")
    # Gemma 2 with the softcaps off and every layer full = Gemma 3 without q/k norms, one RoPE
    # (every layer full), same scale (float32(sqrt(d)) vs sqrt(d) apart)
    g3s = GemmaRef(c3, q2.as_weights(T3, "F32"), qk_norm=False)
    ld, _, _, _ = g3s.prefill(ids)
    c2 = gemma2_config(num_hidden_layers=3, rope_theta=500.0, attn_logit_softcapping=None,
                       final_logit_softcapping=None, layer_types=["full_attention"] * 3, query_pre_attn_scalar=16)
    T2 = {k: v for k, v in T3.items() if "q_norm" not in k and "k_norm" not in k}
    le, _, _, _ = GemmaRef(c2, q2.as_weights(T2, "F32")).prefill(ids)
    if max(abs(a - b) for ra, rb in zip(ld, le) for a, b in zip(ra, rb)) > 1e-6:
        bad.append("GemmaRef (gemma2, no softcaps, all full) != GemmaRef (gemma3 without q/k norms, all full)")
    if param_count(c2) != sum(len(v[1]) for v in T2.values()):
        bad.append("gemma2 param_count %d != stored values %d" % (param_count(c2),
                                                                  sum(len(v[1]) for v in T2.values())))
    # softcaps of 1e9 = no softcap; a binding final cap bounds the logits; the cap is c tanh(x / c)
    c2b = dict(c2, attn_logit_softcapping=1e9, final_logit_softcapping=1e9)
    lf, _, _, _ = GemmaRef(c2b, q2.as_weights(T2, "F32")).prefill(ids)
    if max(abs(a - b) for ra, rb in zip(le, lf) for a, b in zip(ra, rb)) > 1e-9:
        bad.append("softcaps of 1e9 != no softcaps")
    c2c = dict(c2, final_logit_softcapping=0.5)
    lg_, _, _, _ = GemmaRef(c2c, q2.as_weights(T2, "F32")).prefill(ids)
    if max(abs(v) for r_ in lg_ for v in r_) >= 0.5 or \
            abs(lg_[0][7] - 0.5 * math.tanh(le[0][7] / 0.5)) > 1e-12:
        bad.append("final softcap 0.5: logits not 0.5 tanh(x / 0.5)")
    shutil.rmtree(tmp, ignore_errors=True)

    # sensitivity: every alternative reading moves the loss by far more than the tolerance
    text = TEXT[:90]
    tids = q2.encode(text)
    for tag, (c, seed, wkw, dt) in sorted(case_table().items()):
        Tt = gemma_weights(c, seed, **wkw)
        Wt = q2.as_weights(Tt, dt)
        p_ = gemma_params(c)
        ref, _ = mean_ce(GemmaRef(c, Wt), ppl_windows(tids, 40))
        worst = None
        model = GemmaRef(c, Wt)
        for name, kw in alternatives(c):
            alt = GemmaRef(c, Wt, **kw)
            if name.startswith("activation gelu"):  # the GELUs differ by < 5e-4: a two-token probe
                rel = probe_text(model, alt)[0]
            else:
                a, _ = mean_ce(alt, ppl_windows(tids, 40))
                rel = abs(a - ref) / abs(ref)
            worst = min(worst or rel, rel)
            if "softcap" in name or (p_["g2"] and name.startswith("layer types flipped")):
                print("  selftest %-4s %-72s relative change %.2e" % (tag, name, rel))
            if rel < (4e-5 if name.startswith("activation gelu") else 2e-4):  # 20x the tolerance
                bad.append("%s: alternative '%s' moves the loss by only %.2e" % (tag, name, rel))
        print("  selftest %-20s loss %.6g; smallest relative change under an alternative %.2e" % (tag, ref, worst))
    # greedy decoding as check() runs it tells the readings of the window / RoPE / layer types apart
    ids = q2.encode(TEXT)
    for tag, prompts in (("C", ((ids[:3], 30), (ids[5:22], 25))), ("D", ((ids[5:22], 25),)),
                         ("E", ((ids[5:22], 30),)), ("G1", ((ids[:3], 30), (ids[5:22], 25))),
                         ("G2", ((ids[5:22], 25),)), ("G3", ((ids[5:22], 25),)), ("F", ((ids[5:22], 25),))):
        c, seed, wkw, dt = case_table()[tag]
        Wt = q2.as_weights(gemma_weights(c, seed, **wkw), dt)
        refs = [GemmaRef(c, Wt).greedy(pp, n)[0] for pp, n in prompts]
        if tag != "D" and any(len(set(r_)) < 4 for r_ in refs):
            bad.append("case %s: greedy continuations %s are too repetitive to test much" % (tag, refs))
        for name, kw in alternatives(c):
            if name.startswith(("activation", "tied lm_head", "no final logit softcap", "final logit softcap")):
                continue  # (the latter three only scale the logits or are monotonic)
            alt = GemmaRef(c, Wt, **kw)
            if all(alt.greedy(pp, n)[0] == r_ for (pp, n), r_ in zip(prompts, refs)):
                bad.append("case %s: greedy ids are the same under '%s'" % (tag, name))
    # the window: W 2 = full attention at positions 0..1, differs at 2; cached greedy = recomputed
    c = gemma3_config(sliding_window=2, num_hidden_layers=2, layer_types=["sliding_attention"] * 2)
    W3 = q2.as_weights(gemma_weights(c, 7), "F32")
    w2, _, _, _ = GemmaRef(c, W3).prefill(tids[:6])
    wf, _, _, _ = GemmaRef(c, W3, window=None).prefill(tids[:6])
    if max(abs(a - b) for a, b in zip(w2[1], wf[1])) > 1e-12 or max(abs(a - b) for a, b in zip(w2[2], wf[2])) < 1e-6:
        bad.append("window 2: positions 0..1 must equal full attention and position 2 differ")
    c = gemma3_config(sliding_window=3)
    W4 = q2.as_weights(gemma_weights(c, 8), "F32")
    toks, _, _, _ = GemmaRef(c, W4).greedy(tids[:5], 8)
    seq = list(tids[:5])
    for j in range(8):
        lg, _, _, _ = GemmaRef(c, W4).prefill(seq)
        t = q2.argmax_low(lg[-1])
        if t != toks[j]:
            bad.append("cached greedy step %d: %d != recomputed %d" % (j, toks[j], t))
            break
        seq.append(t)
    for c in (gemma_config(), gemma_config(tie_word_embeddings=False), gemma3_config(), gemma2_config(),
              gemma2_config(tie_word_embeddings=False)):
        Tt = gemma_weights(c, 1)
        if param_count(c) != sum(len(v[1]) for v in Tt.values()):
            bad.append("param_count %d != stored values %d" % (param_count(c), sum(len(v[1]) for v in Tt.values())))
    # the merge rule of check_layerroute_gemma: query_pre_attn_scalar rewritten to head_dim with the old
    # scale in Gemma 2's q_proj / Gemma 3's q_norm computes the same function; the diagnosis reading
    # q_lora_unscaled is that function when the LoRA delta is zero, another one otherwise
    for tag in ("C", "G1"):
        c, seed, wkw, _ = case_table()[tag]
        Tt = gemma_weights(c, seed, **wkw)
        rng = random.Random(5)
        Ft = {k: (v[0], [x + rng.gauss(0, 0.05) for x in v[1]] if "proj" in k else v[1]) for k, v in Tt.items()}
        mc = dict(c, query_pre_attn_scalar=c["head_dim"])
        E, cq = merged_expected(c, mc, Ft)
        W64 = lambda X: {k: (s_, v, "F64") for k, (s_, v) in X.items()}  # noqa: E731
        a = GemmaRef(c, W64(Ft)).prefill(tids[:20])[0]
        b = GemmaRef(mc, W64(E)).prefill(tids[:20])[0]
        if abs(cq - 1.0) < 1e-3 or _maxrel(b, a) > 1e-12:
            bad.append("case %s: the merged-folder rule (query_pre_attn_scalar -> head_dim, c %.4g) changes the "
                       "logits by %.2e" % (tag, cq, _maxrel(b, a)))
        if tag == "G1":
            c2, T2, F2 = q_lora_unscaled(c, Tt, Tt)
            d0 = _maxrel(GemmaRef(c2, W64(F2)).prefill(tids[:20])[0], GemmaRef(c, W64(Tt)).prefill(tids[:20])[0])
            c2, T2, F2 = q_lora_unscaled(c, Tt, Ft)
            d1 = _maxrel(GemmaRef(c2, W64(F2)).prefill(tids[:20])[0], a)
            if d0 > 1e-12 or d1 < 1e-4:
                bad.append("q_lora_unscaled: %.2e without LoRA (want 0), %.2e with (want > 1e-4)" % (d0, d1))
    print("  selftest: %.1f s" % (time.time() - t0))
    return bad


# ---------------------------------------------------------------- the check
def check(lol, work, verbose=True):
    t0 = time.time()
    os.makedirs(work, exist_ok=True)
    ck = Checker(os.path.abspath(lol), os.path.abspath(work), verbose)
    ids = q2.encode(TEXT)
    with open(os.path.join(ck.work, "text.txt"), "w", encoding="utf-8") as f:
        f.write(TEXT)
    pr = q2.encode("<|im_start|>user\nJump, fox: 12 dozen jugs?<|im_end|>\n")

    # A: gemma 1, GQA, head_dim 16, F32, tied by default, eps by default
    tab = case_table()
    cfgA, sd, wkw, _ = tab["A"]
    TA = gemma_weights(cfgA, sd, **wkw)
    c = Case(ck, "gemma-gqa-f32", cfgA, TA)
    c.ppl(ids, 9)
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.generate(pr, 12)
    c.generate(pr, 12, "float32")
    c.info()
    c.probe("activation gelu", {"act": "gelu"})
    cfgAg = dict(cfgA, hidden_act="gelu")
    cfgAg.pop("hidden_activation")
    c = Case(ck, "gemma-A-hidden_act-gelu", cfgAg, TA, wtag="A")
    c.ppl(ids, 64)
    c.probe("activation gelu", {"act": "gelu"}, assumed=" [ASSUMED rule: hidden_activation absent -> "
            "gelu_pytorch_tanh whatever hidden_act says (transformers 4.39-4.47); 4.48+ would use hidden_act "
            "'gelu' = exact]")
    c = Case(ck, "gemma-A-hidden_activation-null", dict(cfgA, hidden_act="gelu_pytorch_tanh",
                                                         hidden_activation=None), TA, wtag="A")
    c.ppl(ids, 64)

    # B: MQA, exact GELU, untied, BF16
    cfgB, sd, wkw, _ = tab["B"]
    TB = gemma_weights(cfgB, sd, **wkw)
    c = Case(ck, "gemma-mqa-gelu-untied-bf16", cfgB, TB, "BF16")
    c.ppl(ids, 64)
    c.ppl(ids, 64, "float32")
    c.ppl(ids, 64, "bfloat16", 5e-3)
    c.generate(pr, 12)
    c.info()
    c.probe("activation gelu_pytorch_tanh", {"act": "gelu_pytorch_tanh"})

    # C: gemma3_text, pattern 2, window 5, query_pre_attn_scalar 12, linear rope scaling
    cfgC, sd, wkw, _ = tab["C"]
    TC = gemma_weights(cfgC, sd, **wkw)
    c = Case(ck, "gemma3-pattern2-w5", cfgC, TC)
    c.ppl(ids, 7)
    c.ppl(ids, 40)
    c.ppl(ids, 40, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[5:22], 25)
    c.generate(ids[5:22], 25, "float32")
    c.info(window=5)
    c.probe("activation gelu", {"act": "gelu"})
    # C without the sliding_window key: Gemma3TextConfig's 4096 (never binds here), the sliding
    # layers keep the local RoPE
    c = Case(ck, "gemma3-C-window-absent", {k: v for k, v in cfgC.items() if k != "sliding_window"}, TC, wtag="C")
    c.ppl(ids, 40)
    # C with "sliding_window": null: transformers keeps layers 0, 2 sliding (local RoPE) and then
    # fails building their mask (masking_utils raises on a None window; 4.50's
    # tril(diagonal=-None) is a TypeError). ASSUMED: lol refuses naming sliding_window (as
    # it does for an explicit layer_types list with a null window), or else runs the sliding
    # layers unbounded but with the local RoPE.
    null_window(ck, dict(cfgC, sliding_window=None), TC, ids)

    # D: explicit layer_types, no sliding_window_pattern, query_pre_attn_scalar by default (256)
    cfgD, sd, wkw, _ = tab["D"]
    TD = gemma_weights(cfgD, sd, **wkw)
    c = Case(ck, "gemma3-layer_types", cfgD, TD)
    c.ppl(ids, 7)
    c.ppl(ids, 40)
    c.generate(ids[5:22], 25)
    c.info(check=False, window=6)

    # E: a window >= max_position_embeddings (never binds); defaults for theta / local / kv heads
    cfgE, sd, wkw, _ = tab["E"]
    TE = gemma_weights(cfgE, sd, **wkw)
    c = Case(ck, "gemma3-window-ge-positions", cfgE, TE)
    c.ppl(ids, 64)
    c.generate(ids[5:22], 30)

    # G1: Gemma 2 with both softcaps binding (attention 2, final 3), query_pre_attn_scalar 24 !=
    # head_dim 16, window 5, the default layer pattern (layers 0, 2 slide)
    cfgG1, sd, wkw, _ = tab["G1"]
    TG1 = gemma_weights(cfgG1, sd, **wkw)
    c = Case(ck, "gemma2-softcap-w5", cfgG1, TG1)
    c.ppl(ids, 7)
    c.ppl(ids, 40)
    c.ppl(ids, 40, "float32")
    c.generate(ids[:3], 30)
    c.generate(ids[5:22], 25)
    c.info(window=5, caps=(2, 3))
    # G2: Gemma 2 with both softcaps null (off), explicit layer_types S S F, window 6, linear RoPE
    # scaling, untied, query_pre_attn_scalar 10
    cfgG2, sd, wkw, _ = tab["G2"]
    c = Case(ck, "gemma2-nocap-layer_types", cfgG2, gemma_weights(cfgG2, sd, **wkw))
    c.ppl(ids, 40)
    c.generate(ids[5:22], 25)
    # G3: Gemma2Config's defaults: softcaps 50 / 30, query_pre_attn_scalar 256, rope_theta 10000,
    # eps 1e-6, tied, gelu_pytorch_tanh, layers 0, 2 slide (window 4 given)
    cfgG3, sd, wkw, _ = tab["G3"]
    c = Case(ck, "gemma2-defaults", cfgG3, gemma_weights(cfgG3, sd, **wkw))
    c.ppl(ids, 40)
    kv_default(ck, cfgG3, sd, wkw, ids)
    # F: Gemma 3 with attn_logit_softcapping 2.5 and final_logit_softcapping 4 (applied as in Gemma 2)
    cfgF, sd, wkw, _ = tab["F"]
    c = Case(ck, "gemma3-softcap", cfgF, gemma_weights(cfgF, sd, **wkw))
    c.ppl(ids, 40)
    c.generate(ids[5:22], 25)

    # LayerRoute on Gemma 3 (untied, sliding layers with their own RoPE), Gemma 2 (G1: soft-caps,
    # window 5, tied) and Gemma (A: train + eval only) bases; export of Gemma-layout checkpoints
    cfgL3 = gemma3_config(tie_word_embeddings=False)
    TL3 = gemma_weights(cfgL3, 421, embed_std=0.1, final_mean=1.0)
    write_folder(os.path.join(ck.work, "lr-base-gemma3"), cfgL3, TL3)
    # (gate biases of 0: the gates follow each sample's mean hidden state, W . mean + b, not the bias;
    # Gemma 3: patterns 0001 / 0010 / 0011 over the samples; Gemma 2, seed 3: the sliding layers 0, 2 run)
    unbiased = ["--bias-band", 0, "--bias-outside", 0]
    check_layerroute_gemma(ck, [("gemma3", "lr-base-gemma3", cfgL3, TL3, True, unbiased),
                                ("gemma2", "gemma2-softcap-w5", cfgG1, TG1, True, unbiased + ["--seed", 3]),
                                ("gemma", "gemma-gqa-f32", cfgA, TA, True, [])])
    check_export_gemma(ck, "gemma-gqa-f32")

    # refusals
    print("[refusals]", flush=True)
    refusal(ck, "refuse-gemma2-attn-softcap-0", dict(cfgG1, attn_logit_softcapping=0.0), TG1,
            ["attn_logit_softcapping"], " (ASSUMED: a softcap <= 0 is refused; transformers divides by 0)")
    refusal(ck, "refuse-gemma2-final-softcap-neg", dict(cfgG1, final_logit_softcapping=-3.0), TG1,
            ["final_logit_softcapping"], " (ASSUMED: a softcap <= 0 is refused; transformers would compute "
            "-c tanh(x / -c) = |c| tanh(x / |c|))")
    T = dict(TG1)
    del T["model.layers.1.post_feedforward_layernorm.weight"]
    refusal(ck, "refuse-gemma2-missing-post_ff", cfgG1, T, ["post_feedforward_layernorm"])
    T = dict(TG1)
    T["model.layers.0.self_attn.q_norm.weight"] = ([16], [0.0] * 16)
    refusal(ck, "refuse-gemma2-q_norm", cfgG1, T, ["q_norm"], " (ASSUMED: strict loading, an unexpected tensor)")
    T = dict(TC)
    del T["model.layers.1.post_feedforward_layernorm.weight"]
    refusal(ck, "refuse-missing-post_ff", cfgC, T, ["post_feedforward_layernorm"])
    refusal(ck, "refuse-relu-gemma", dict(cfgA, hidden_activation="relu"), TA, ["hidden_activation"])
    refusal(ck, "refuse-relu-gemma3", dict(cfgC, hidden_activation="relu"), TC, ["hidden_activation"])
    refusal(ck, "refuse-bidirectional", dict(cfgC, use_bidirectional_attention=True), TC,
            ["use_bidirectional_attention"], " (ASSUMED: a field that changes the function is refused)")
    refusal(ck, "refuse-attention_bias", dict(cfgA, attention_bias=True), TA, ["attention_bias", ".bias"],
            " (ASSUMED: as Llama's attention_bias)")
    T = dict(TC)
    del T["model.layers.0.self_attn.q_norm.weight"]
    refusal(ck, "refuse-missing-q_norm", cfgC, T, ["q_norm"], " (ASSUMED: strict loading)")

    dt = time.time() - t0
    print("\n%d lol runs (%.1f s of them), %.1f s in all" % (ck.calls, ck.lol_seconds, dt))
    for n in ck.notes:
        print("note: " + n)
    for msg, cmd in ck.failures:
        print("DISAGREEMENT: %s\n    %s" % (msg, cmd))
    print("%d checks, %d disagreements" % (ck.compared, len(ck.failures)))
    return 1 if ck.failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="build tiny Gemma folders, run lol, compare with the reference")
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
