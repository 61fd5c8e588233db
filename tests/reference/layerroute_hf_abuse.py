#!/usr/bin/env python3
"""Adversarial checks of `lol layerroute render` with non-ChatML chat templates and of
`lol hf info|ppl|generate` on tiny hostile Hugging Face folders (sliding-window fields,
Phi-3 fused tensors).  Standard library only.

    python3 layerroute_hf_abuse.py check --lol PATH/TO/lol --work DIR

Every problem is printed with a minimal reproduction and the expectation; the last line
is "N checks, M problems"; exit 1 when M > 0.

Written by an adversarial reviewer who did not read src/ (session 43).  Its first run:
156 checks, 9 problems; fixed since: a generation prompt the conversation does not
repeat cut the start of answers that begin like it (DeepSeek-R1's "<think>\n" and an
answer "<th>..."), a missing Phi-3 fused tensor named by its unfused parts, a damaged
safetensors header blamed on config.json.  KNOWN (documented, printed, not counted):
CLI11 reads a bracketed option value ("[INST]") as a list (`tokenizer train --special`);
OpenAI-style content lists are refused (docs/layerroute.md); `--loss-tokens all` shows an
all-zero mask for a sample whose cut keeps no assistant token (it is dropped: data.h);
integers beyond 64 bits in config.json are called "not an integer".  Run by hand."""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

LOL = None
WORK = None
TIMEOUT = 20
checks = 0
problems = []


def run(args, timeout=TIMEOUT):
    cmd = ["taskset", "-c", "0", "env", "OMP_NUM_THREADS=1", LOL] + args
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=WORK, capture_output=True, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), time.time() - t0
    except subprocess.TimeoutExpired:
        return "timeout", "", "", time.time() - t0


def problem(name, repro, got, expected):
    problems.append("PROBLEM [%s]\n  repro: %s\n  got: %s\n  expected: %s" % (name, repro, got, expected))


KNOWN = {"tokenizer train --special '[INST]'", "parts (accepted)", "losstokens_all (mask)", "bigint message"}
known = []


def check(name, cond, repro, got, expected):
    global checks
    checks += 1
    if not cond:
        if name in KNOWN:
            known.append(name)
        else:
            problem(name, repro, got, expected)
    return cond


def sane(name, r, repro, allow=(0, 2)):
    """no signal, no hang, exit code 0 or 2"""
    rc = r[0]
    return check(name + " (exit status)", rc in allow, repro,
                 "rc=%s after %.1fs; stderr tail: %s" % (rc, r[3], r[2][-400:].strip()),
                 "exit status in %s within %ds" % (list(allow), TIMEOUT))


# ---------------------------------------------------------------- tokenizer helpers
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class Tok:
    def __init__(self, d):
        t = json.load(open(os.path.join(d, "tokenizer.json")))
        u2b = bytes_to_unicode()
        self.pieces = {}
        for s, i in t["model"]["vocab"].items():
            self.pieces[i] = bytes(u2b[c] for c in s)
        for a in t["added_tokens"]:
            self.pieces[a["id"]] = a["content"].encode()

    def masked_text(self, ids, mask):
        return b"".join(self.pieces[i] for i, m in zip(ids, mask) if m)

    def text(self, ids):
        return b"".join(self.pieces[i] for i in ids)


SPECIALS = ["<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>", "<|system|>"]
TOKDIRS = {}
BASE_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def base_tok():
    d = os.path.join(WORK, "tok_base")
    if not os.path.exists(os.path.join(d, "tokenizer.json")):
        args = ["tokenizer", "train", "--in", CORPUS, "--vocab-size", "400", "--out", d, "--no-progress",
                "--bos", "<s>", "--eos", "</s>"]
        for s in SPECIALS:
            args += ["--special", s]
        r = run(args, 60)
        if r[0] != 0:
            sys.exit("tokenizer train failed: %s" % r[2])
    return d


def tok_with(name, template, extra=None):
    d = os.path.join(WORK, "tok_" + name)
    os.makedirs(d, exist_ok=True)
    b = base_tok()
    shutil.copy(os.path.join(b, "tokenizer.json"), d)
    c = json.load(open(os.path.join(b, "tokenizer_config.json")))
    if template is None:
        c.pop("chat_template", None)
    else:
        c["chat_template"] = template
    if extra:
        c.update(extra)
    json.dump(c, open(os.path.join(d, "tokenizer_config.json"), "w"))
    return d


def write_lines(name, lines):
    p = os.path.join(WORK, name)
    with open(p, "wb") as f:
        for l in lines:
            if isinstance(l, (dict, list)):
                l = json.dumps(l)
            if isinstance(l, str):
                l = l.encode()
            f.write(l + b"\n")
    return p


def render(tokdir, data, extra=(), timeout=TIMEOUT):
    return run(["layerroute", "render", "--data", data, "--tokenizer", tokdir] + list(extra), timeout)


def ids_lines(out):
    res = []
    for l in out.splitlines():
        l = l.strip()
        if l.startswith("{"):
            res.append(json.loads(l))
    return res


def U(c):
    return {"role": "user", "content": c}


def A(c):
    return {"role": "assistant", "content": c}


# ---------------------------------------------------------------- layerroute render cases
def repro_lr(tmpl, lines, extra=()):
    return ("tokenizer_config.json chat_template=%r; S.jsonl=%s; lol layerroute render --data S.jsonl "
            "--tokenizer TOK %s" % (tmpl, " | ".join(json.dumps(l) if not isinstance(l, bytes) else repr(l)
                                                       for l in lines)[:600], " ".join(extra)))


def expect_refusal(name, tmpl, lines, extra=(), must=("S.jsonl:1",), tok=None):
    d = tok or tok_with(name, tmpl)
    data = write_lines("S_%s.jsonl" % name, lines)
    r = render(d, data, ["--ids"] + list(extra))
    rp = repro_lr(tmpl, lines, extra)
    if not sane(name, r, rp):
        return r
    check(name + " (refused)", r[0] == 2, rp, "rc=%s stdout=%s" % (r[0], r[1][:300]), "a refusal (exit 2)")
    for m in must:
        m2 = m.replace("S.jsonl", "S_%s.jsonl" % name)
        check(name + " (error names %s)" % m, m2 in r[2], rp, "stderr: %s" % r[2].strip()[:400],
              "the error names %r" % m2)
    return r


def expect_mask(name, tmpl, lines, answers, extra=(), tok=None):
    """answers: for sample i, the exact bytes the masked tokens must spell"""
    d = tok or tok_with(name, tmpl)
    data = write_lines("S_%s.jsonl" % name, lines)
    r = render(d, data, ["--ids", "--count", str(len(lines)), "--max-len", "4096"] + list(extra))
    rp = repro_lr(tmpl, lines, extra)
    if not sane(name, r, rp) or not check(name + " (accepted)", r[0] == 0, rp, r[2].strip()[:400], "rc 0"):
        return None
    t = Tok(d)
    got = ids_lines(r[1])
    for i, (g, a) in enumerate(zip(got, answers)):
        mt = t.masked_text(g["tokens"], g["loss_mask"])
        check(name + " (mask of sample %d)" % i, mt == a, rp,
              "masked bytes %r (whole text %r)" % (mt, t.text(g["tokens"])), "masked bytes %r" % a)
    return got


def lr_cases():
    T = BASE_TEMPLATE
    # incidental: a bracketed special token such as Mistral's [INST] is kept verbatim by tokenizer train
    d = os.path.join(WORK, "tok_inst")
    r = run(["tokenizer", "train", "--in", CORPUS, "--vocab-size", "300", "--out", d, "--no-progress",
             "--special", "<s>", "--special", "[INST]", "--special", "[/INST]", "--eos", "<s>"], 60)
    got = []
    try:
        got = [a["content"] for a in json.load(open(os.path.join(d, "tokenizer.json")))["added_tokens"]]
    except Exception:
        pass
    check("tokenizer train --special '[INST]'", got == ["<s>", "[INST]", "[/INST]"],
          "lol tokenizer train --in en_devil.txt --vocab-size 300 --out D --special '<s>' --special '[INST]' --special '[/INST]' --eos '<s>'",
          "added tokens %s (rc %s %s)" % (got, r[0], r[2][-200:]),
          "added tokens ['<s>', '[INST]', '[/INST]'] (CLI11 reads '[a]' as list syntax; the brackets are silently dropped)")
    conv = [U("Hello there"), A("The devil is here")]
    tc = {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}
    # plain template: many shapes in one run (one sample per line)
    group = [
        ({"messages": conv}, b"The devil is here<|end|>"),
        # the answer also appears earlier (in the user turns)
        ({"messages": [U("The devil is here"), A("The devil is here"), U("The devil is here"), A("The devil is here")]},
         b"The devil is here<|end|>The devil is here<|end|>"),
        ({"messages": [A("The devil is here")]}, b"The devil is here<|end|>"),
        ({"messages": [U("h\u00e9llo \U0001F600"), A("d\u00e9vil \U0001F608 \u2603")]}, "d\u00e9vil \U0001F608 \u2603<|end|>".encode()),
        ({"messages": [U("Hello"), A("The devil \n")]}, b"The devil \n<|end|>"),
        ({"messages": [U("Hello"), A("")]}, b"<|end|>"),
        ({"messages": [U("Hello"), A("x<|end|>y")]}, b"x<|end|><|end|>" if False else b"x<|end|>y<|end|>"),
        ({"conversations": [{"from": "system", "value": "be nice"}, {"from": "human", "value": "Hello"},
                            {"from": "gpt", "value": "The devil is here"}]}, b"The devil is here<|end|>"),
        ({"messages": [U("call f"), tc]}, b"None<|end|>"),
    ]
    expect_mask("plain", T, [g[0] for g in group], [g[1] for g in group])
    # 1. raise_exception names file:line
    expect_refusal("raise_line3", "{% if messages|length > 2 %}{{ raise_exception('too long') }}{% endif %}" + T,
                   [{"messages": conv}, {"messages": conv}, {"messages": conv + [U("a"), A("b")]}],
                   extra=("--count", "3"), must=("S.jsonl:3", "too long"))
    # 2. prefix-unstable templates
    expect_refusal("looplast", "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{% if loop.last %}<|end|>{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}",
                   [{"messages": conv + [U("again"), A("more")]}])
    # 3. a template that writes nothing for assistants
    d = tok_with("noasst", "{% for m in messages %}{% if m.role != 'assistant' %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endif %}{% endfor %}")
    data = write_lines("S_noasst.jsonl", [{"messages": conv}])
    r = render(d, data, ["--ids"])
    rp = repro_lr("...writes nothing for role assistant...", [{"messages": conv}], ["--ids"])
    if sane("noasst", r, rp) and r[0] == 0:
        g = ids_lines(r[1])
        check("noasst (no loss tokens or refused)", g and sum(g[0]["loss_mask"]) == 0, rp, r[1][:300],
              "no loss token (nothing of the answer is written) or a refusal")
    # 4. huge outputs / non-ending templates: refused (exit 2) quickly, naming the template
    for nm, tm in [("hugemul", "{{ 'x' * 100000000000 }}" + T),
                   ("recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}" + T)]:
        expect_refusal(nm, tm, [{"messages": conv}], must=("S.jsonl:1", "chat_template"))
    # 5. strftime_now: fixed date 26 Jul 2024
    tm = "{{ strftime_now('%d %b %Y') }}|" + T
    d = tok_with("date", tm)
    data = write_lines("S_date.jsonl", [{"messages": conv}])
    r = render(d, data, [])
    if sane("date", r, repro_lr(tm, [{"messages": conv}])):
        check("date (26 Jul 2024)", "26 Jul 2024|" in r[1], repro_lr(tm, [{"messages": conv}]), r[1][:200] + r[2][-200:],
              "the rendering starts with '26 Jul 2024|'")
    # 6. a generation prompt the conversation does not repeat, sharing a prefix with the answer
    tm = ("{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}<|user|>{{ m.content }}{% else %}"
          "<|assistant|>{{ m.content }}<|end|>{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")
    expect_mask("r1_answer_starts_like_think", tm, [{"messages": [U("Write html"), A("<th>Name</th>")]}], [b"<th>Name</th><|end|>"])
    tm = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|assistant|>\nI think that this is a long preamble\n{% endif %}")
    expect_mask("genlong", tm, [{"messages": [U("Hello"), A("I think")]}], [b"I think<|end|>"])
    # 8. content null + tool_calls with a template that writes the calls
    tm = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{% if m.content %}{{ m.content }}{% endif %}"
          "{% if m.tool_calls %}{% for c in m.tool_calls %}CALL {{ c.function.name }} {{ c.function.arguments|tojson }}{% endfor %}{% endif %}<|end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    expect_mask("toolcall", tm, [{"messages": [U("call f"), tc, {"role": "tool", "content": "42"}, A("it is 42")]}],
                [b'CALL f {"x": 1}<|end|>it is 42<|end|>'])
    # 9. content as a list of parts (OpenAI / multimodal style), which templates handle themselves
    tm = ("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{% if m.content is string %}{{ m.content }}{% else %}"
          "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}<|end|>\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello"}]},
             {"role": "assistant", "content": [{"type": "text", "text": "The devil"}, {"type": "text", "text": " is here"}]}]
    expect_mask("parts", tm, [{"messages": parts}], [b"The devil is here<|end|>"])
    # 10. empty conversation
    expect_refusal("empty", T, [{"messages": []}])
    # 11. many turns
    many = []
    for i in range(600):
        many += [U("q%d" % i), A("a%d" % i)]
    d = tok_with("many", T)
    data = write_lines("S_many.jsonl", [{"messages": many}])
    r = render(d, data, ["--ids", "--max-len", "1048576"], timeout=TIMEOUT)
    rp = "600 user/assistant exchanges, plain template, --ids --max-len 1048576"
    if sane("many", r, rp) and r[0] == 0:
        g = ids_lines(r[1])[0]
        mt = Tok(d).masked_text(g["tokens"], g["loss_mask"])
        check("many (mask)", mt == b"".join(b"a%d<|end|>" % i for i in range(600)), rp, repr(mt[:200]), "every answer + <|end|>")
    # 12. invalid UTF-8
    expect_refusal("badutf8_l2", T, [{"messages": conv}, b'{"messages":[{"role":"user","content":"a\xc3"},{"role":"assistant","content":"x"}]}'],
                   extra=("--first", "1"), must=("S.jsonl:2",))
    # 13. tools list
    tm = ("{{ bos_token }}{% if tools %}<|system|>\nTOOLS {% for t in tools %}{{ t.function.name }} {% endfor %}<|end|>\n{% endif %}"
          "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    tools = [{"type": "function", "function": {"name": "getw", "description": "d", "parameters": {"type": "object", "properties": {}}}}]
    got = expect_mask("tools", tm, [{"messages": conv, "tools": tools}], [b"The devil is here<|end|>"])
    if got:
        txt = Tok(tok_with("tools", tm)).text(got[0]["tokens"])
        check("tools (rendered)", b"TOOLS getw" in txt, repro_lr(tm, [{"messages": conv, "tools": tools}]), repr(txt[:200]),
              "the tools block in the text")
    # 15. --system with a template that refuses system messages
    tm = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% endfor %}" + T
    expect_refusal("sysraise", tm, [{"messages": conv}], extra=("--system", "be nice"), must=("S.jsonl:1", "System role not supported"))
    # 16. --loss-tokens all with a small --max-len
    d = tok_with("all", T)
    data = write_lines("S_all.jsonl", [{"messages": conv}])
    r = render(d, data, ["--ids", "--loss-tokens", "all", "--max-len", "8"])
    rp = repro_lr(T, [{"messages": conv}], ["--ids", "--loss-tokens", "all", "--max-len", "8"])
    if sane("losstokens_all", r, rp) and r[0] == 0:
        g = ids_lines(r[1])[0]
        check("losstokens_all (mask)", (sum(g["loss_mask"]) >= len(g["tokens"]) - 1 or "drop" in r[2]) and len(g["tokens"]) <= 8, rp,
              "%s; stderr %r" % (g, r[2][-200:]),
              "<= 8 tokens, every one (but perhaps the first) counted as docs/layerroute.md says of --loss-tokens all "
              "('every token of the sample is a target', 'render --ids shows the mask'), or a note that the sample is dropped")
    # 18. template errors are refused naming the template
    for nm, tm in [("syntax", "{% for m in messages %}{{ m.content }")]:
        expect_refusal(nm, tm, [{"messages": conv}], must=("S.jsonl:1", "tokenizer_config.json"))
    # 20. malformed messages are refused naming file:line
    for nm, line in [("rolenum", {"messages": [{"role": 5, "content": "x"}, A("y")]}),
                     ("deepjson", "{\"messages\":" + "[" * 200000 + "]" * 200000 + "}"),
]:
        expect_refusal(nm, T, [line])
    # 23. base-model-like template whose turns end in white space only
    tm = "{% for m in messages %}{{ m.content }}\n\n{% endfor %}"
    expect_mask("wsonly", tm, [{"messages": [U("Hello"), A("The devil")]}], [b"The devil"])


# ---------------------------------------------------------------- Hugging Face folders
H, NH, NKV, HD, FF, NL, V, MAXPOS = 8, 2, 1, 4, 16, 2, 400, 64


def write_st(path, tensors, raw_header=None):
    """tensors: name -> (shape, dtype, bytes or None = random F32/F16/BF16 data)"""
    hdr, blobs, off = {}, [], 0
    rng = random.Random(7)
    for name in sorted(tensors):
        shape, dt, blob = tensors[name]
        n = 1
        for x in shape:
            n *= x
        if blob is None:
            if dt == "F32":
                blob = struct.pack("<%df" % n, *[rng.uniform(-0.3, 0.3) for _ in range(n)])
            elif dt == "F16":
                blob = struct.pack("<%de" % n, *[rng.uniform(-0.3, 0.3) for _ in range(n)])
            elif dt == "BF16":
                blob = b"".join(struct.pack("<f", rng.uniform(-0.3, 0.3))[2:] for _ in range(n))
            elif dt == "I32":
                blob = struct.pack("<%di" % n, *[1] * n)
            elif dt == "F64":
                blob = struct.pack("<%dd" % n, *[rng.uniform(-0.3, 0.3) for _ in range(n)])
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        blobs.append(blob)
    h = raw_header if raw_header is not None else json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def base_tensors(arch):
    t = {"model.embed_tokens.weight": ([V, H], "F32", None), "model.norm.weight": ([H], "F32", None),
         "lm_head.weight": ([V, H], "F32", None)}
    for i in range(NL):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = ([H], "F32", None)
        t[p + "post_attention_layernorm.weight"] = ([H], "F32", None)
        t[p + "self_attn.o_proj.weight"] = ([H, NH * HD], "F32", None)
        t[p + "mlp.down_proj.weight"] = ([H, FF], "F32", None)
        if arch == "phi3":
            t[p + "self_attn.qkv_proj.weight"] = ([(NH + 2 * NKV) * HD, H], "F32", None)
            t[p + "mlp.gate_up_proj.weight"] = ([2 * FF, H], "F32", None)
        else:
            t[p + "self_attn.q_proj.weight"] = ([NH * HD, H], "F32", None)
            t[p + "self_attn.k_proj.weight"] = ([NKV * HD, H], "F32", None)
            t[p + "self_attn.v_proj.weight"] = ([NKV * HD, H], "F32", None)
            t[p + "mlp.gate_proj.weight"] = ([FF, H], "F32", None)
            t[p + "mlp.up_proj.weight"] = ([FF, H], "F32", None)
            if arch == "qwen2":
                t[p + "self_attn.q_proj.bias"] = ([NH * HD], "F32", None)
                t[p + "self_attn.k_proj.bias"] = ([NKV * HD], "F32", None)
                t[p + "self_attn.v_proj.bias"] = ([NKV * HD], "F32", None)
    return t


ARCH = {"mistral": ("MistralForCausalLM", "mistral"), "qwen2": ("Qwen2ForCausalLM", "qwen2"),
        "phi3": ("Phi3ForCausalLM", "phi3"), "llama": ("LlamaForCausalLM", "llama")}


def base_config(arch):
    a, mt = ARCH[arch]
    return {"architectures": [a], "model_type": mt, "hidden_size": H, "num_attention_heads": NH,
            "num_key_value_heads": NKV, "head_dim": HD, "intermediate_size": FF, "num_hidden_layers": NL,
            "vocab_size": V, "max_position_embeddings": MAXPOS, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32", "bos_token_id": 0,
            "eos_token_id": 1}


_st_cache = {}


def hf_folder(name, arch, cfg_over=None, cfg_drop=(), tensors=None, cfg_raw=None):
    d = os.path.join(WORK, "hf_" + name)
    os.makedirs(d, exist_ok=True)
    cfg = base_config(arch)
    for k in cfg_drop:
        cfg.pop(k, None)
    if cfg_over:
        cfg.update(cfg_over)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(cfg_raw if cfg_raw is not None else json.dumps(cfg))
    st = os.path.join(d, "model.safetensors")
    if tensors is None:
        key = arch
        if key not in _st_cache:
            src = os.path.join(WORK, "st_%s.safetensors" % arch)
            write_st(src, base_tensors(arch))
            _st_cache[key] = src
        shutil.copy(_st_cache[key], st)
    elif callable(tensors):
        tensors(st)
    else:
        write_st(st, tensors)
    b = base_tok()
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(b, fn), d)
    return d


def hf_expect(name, d, sub, desc, must=(), ok_allowed=True, extra=()):
    """hf SUB DIR: no crash/hang; a refusal names every string of must"""
    args = ["hf", sub, d] + list(extra)
    r = run(args)
    rp = "%s; lol %s" % (desc, " ".join(["hf", sub, "DIR"] + list(extra)))
    if not sane(name, r, rp):
        return r
    if r[0] == 2 or not ok_allowed:
        check(name + " (refused)", r[0] == 2, rp, "rc=%s stdout=%s" % (r[0], r[1][:200]), "a refusal (exit 2)")
        for m in must:
            check(name + " (error names %s)" % m, m in r[2], rp, "stderr: %s" % r[2].strip()[:400],
                  "the error names %r" % m)
    return r


def ppl_of(d, extra=()):
    data = os.path.join(WORK, "ppl.txt")
    if not os.path.exists(data):
        with open(data, "w") as f:
            f.write(open(CORPUS).read()[:3000])
    r = run(["hf", "ppl", d, "--data", data, "--context", "48", "--max-tokens", "200", "--threads", "1",
             "--out", d + ".ppl.json"] + list(extra))
    if r[0] != 0:
        return None, r
    try:
        return json.load(open(d + ".ppl.json")), r
    except Exception:
        return None, r


def hf_cases():
    # hostile sliding-window fields: accepted or refused naming config.json and the field
    hostile = [
        ("mistral", "sliding_window", "32"), ("mistral", "sliding_window", 0), ("mistral", "sliding_window", True),
        ("mistral", "sliding_window", 2 ** 63), ("phi3", "sliding_window", -5),
        ("qwen2", "use_sliding_window", "true"), ("qwen2", "max_window_layers", 10 ** 20),
        ("qwen2", "layer_types", ["full_attention"] * 5), ("qwen2", "layer_types", [None, 1]),
        ("qwen2", "layer_types", ["sliding_attention", "full_attention"]),
        ("mistral", "layer_types", ["full_attention", "sliding_attention"]),
    ]
    for i, (arch, key, val) in enumerate(hostile):
        over = {key: val}
        if arch == "qwen2" and key != "use_sliding_window":
            over["use_sliding_window"] = True
            over["sliding_window"] = 8
        if key == "layer_types" and arch == "mistral":
            over["sliding_window"] = None
        nm = "sw%d_%s_%s" % (i, arch, key)
        d = hf_folder(nm, arch, over)
        hf_expect(nm, d, "info", "%s config.json with %s" % (arch, json.dumps(over)), must=("config.json", key))
    # an integer beyond 64 bits is an integer: the refusal should say it is too large, not that it is no integer
    d = os.path.join(WORK, "hf_sw6_qwen2_max_window_layers")
    r = run(["hf", "info", d])
    check("bigint message", not ("expected an integer" in r[2] and "<=" not in r[2]),
          "qwen2 config.json with \"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 100000000000000000000; lol hf info DIR",
          r[2].strip()[:300], "a refusal saying the value is too large (as sliding_window = 2^63 gets: 'expected an integer <= 2^63 - 1'), "
          "not 'expected an integer' with the value shown as 1e+20")
    # a huge float in JSON (1e999 reads as infinity in most parsers)
    d = hf_folder("sw_inf", "mistral", cfg_raw=json.dumps(base_config("mistral"))[:-1] + ', "sliding_window": 1e999}')
    hf_expect("sw_inf", d, "info", "mistral config.json with \"sliding_window\": 1e999", must=("config.json",))
    # semantic checks by perplexity (Mistral): a window >= max_position_embeddings is full attention;
    # a window of 2 differs from full attention; a null window is full attention
    full, r0 = ppl_of(hf_folder("pf_null", "mistral", {"sliding_window": None}))
    big, r1 = ppl_of(hf_folder("pf_big", "mistral", {"sliding_window": MAXPOS}))
    small, r2 = ppl_of(hf_folder("pf_2", "mistral", {"sliding_window": 2}))
    rp = "tiny Mistral folder, lol hf ppl DIR --data TEXT --context 48 --max-tokens 200 with sliding_window null / %d / 2" % MAXPOS
    if check("ppl runs", full and big and small, rp, "%s | %s | %s" % (r0[2][-200:], r1[2][-200:], r2[2][-200:]), "three results"):
        fk = ["loss", "perplexity", "bits_per_byte"]
        check("ppl window>=max_pos equals full", all(abs(full[k] - big[k]) <= 1e-6 * max(1, abs(full[k])) for k in fk), rp,
              "%s vs %s" % (full, big), "equal results")
        check("ppl window 2 differs from full", any(abs(full[k] - small[k]) > 1e-6 for k in fk), rp,
              "%s vs %s" % (full, small), "different results")
    # qwen2: max_window_layers = num_hidden_layers -> no sliding layer
    q_full, _ = ppl_of(hf_folder("pq_full", "qwen2", {"use_sliding_window": False, "sliding_window": 2}))
    q_mwl, r3 = ppl_of(hf_folder("pq_mwl", "qwen2", {"use_sliding_window": True, "sliding_window": 2, "max_window_layers": NL}))
    rp = "tiny Qwen2 folder, use_sliding_window true, sliding_window 2, max_window_layers %d (= layers) vs use_sliding_window false" % NL
    if check("qwen2 max_window_layers=layers runs", q_full and q_mwl, rp, r3[2][-300:], "both run"):
        check("qwen2 max_window_layers=layers is full attention", abs(q_full["perplexity"] - q_mwl["perplexity"]) <= 1e-6 * q_full["perplexity"], rp,
              "%s vs %s" % (q_full, q_mwl), "equal perplexities")
    # generate with a window of 1 (legal: each query sees itself only) and the KV cache
    d = hf_folder("gen_w1", "mistral", {"sliding_window": 1})
    hf_expect("gen_w1", d, "generate", "mistral sliding_window 1", extra=("--prompt", "The devil", "--max-new", "20", "--ids", "--threads", "1", "--no-stop"))
    # KV-cached greedy decoding past the window agrees with a fresh prefill of the same prefix
    d = hf_folder("kv_m3", "mistral", {"sliding_window": 3})
    r = run(["hf", "generate", d, "--tokens", "5 6 7 8 9", "--max-new", "25", "--ids", "--no-stop", "--threads", "1"])
    ids = r[1].split()
    if check("kv generate runs", r[0] == 0 and len(ids) == 25, "tiny Mistral sliding_window 3; lol hf generate DIR --tokens '5 6 7 8 9' --max-new 25 --ids --no-stop",
             r[2][-300:], "25 ids"):
        r2 = run(["hf", "generate", d, "--tokens", "5 6 7 8 9 " + " ".join(ids[:15]), "--max-new", "10", "--ids", "--no-stop", "--threads", "1"])
        check("kv cache vs prefill (window 3)", r2[1].split() == ids[15:], "tiny Mistral sliding_window 3: greedy ids 16..25 of "
              "--tokens '5 6 7 8 9' vs --tokens '5 6 7 8 9 + first 15 generated' --max-new 10", "%s vs %s" % (ids[15:], r2[1].split()),
              "the same ids")
    # Phi-3 hostile tensors
    def phi_t(mod):
        def make(path):
            t = base_tensors("phi3")
            mod(t)
            write_st(path, t)
        return make
    P = "model.layers.0."
    QKV = (NH + 2 * NKV) * HD
    phi = [
        ("qkv_rows", lambda t: t.__setitem__(P + "self_attn.qkv_proj.weight", ([QKV + 4, H], "F32", None)), P + "self_attn.qkv_proj.weight"),
        ("qkv_i32", lambda t: t.__setitem__(P + "self_attn.qkv_proj.weight", ([QKV, H], "I32", None)), P + "self_attn.qkv_proj.weight"),
        ("qkv_missing", lambda t: t.pop(P + "self_attn.qkv_proj.weight"), P + "self_attn.qkv_proj.weight"),
        ("gateup_odd", lambda t: t.__setitem__(P + "mlp.gate_up_proj.weight", ([2 * FF + 1, H], "F32", None)), P + "mlp.gate_up_proj.weight"),
        ("gateup_missing", lambda t: t.pop(P + "mlp.gate_up_proj.weight"), P + "mlp.gate_up_proj.weight"),
        ("unfused_only", lambda t: (t.pop(P + "self_attn.qkv_proj.weight"),
                                    t.__setitem__(P + "self_attn.q_proj.weight", ([NH * HD, H], "F32", None)),
                                    t.__setitem__(P + "self_attn.k_proj.weight", ([NKV * HD, H], "F32", None)),
                                    t.__setitem__(P + "self_attn.v_proj.weight", ([NKV * HD, H], "F32", None))), P + "self_attn."),
    ]
    for nm, mod, tname in phi:
        d = hf_folder("phi_" + nm, "phi3", tensors=phi_t(mod))
        hf_expect("phi_" + nm, d, "info", "Phi3ForCausalLM folder, %s (%s)" % (nm, tname), must=(tname,), ok_allowed=False, extra=("--check",))
    # a bf16 / f16 fused tensor is fine: ppl equal to f32 within rounding is not required, only that it loads
    d = hf_folder("phi_bf16", "phi3", tensors=phi_t(lambda t: t.__setitem__(P + "self_attn.qkv_proj.weight", ([QKV, H], "BF16", None))))
    r = hf_expect("phi_bf16", d, "info", "Phi3 folder with a BF16 qkv_proj", extra=("--check",))
    check("phi_bf16 (accepted)", r[0] == 0, "Phi3 folder with a BF16 qkv_proj; lol hf info --check DIR", r[2][-300:], "rc 0 (dtype mixes are loaded as transformers does)")
    # phi3: unfused Llama layout but phi3 architecture with Phi3 defaults -> ppl runs on the fused folder
    d = hf_folder("phi_ok", "phi3", {"sliding_window": 2047})
    res, r = ppl_of(d)
    check("phi_ok ppl", res is not None, "tiny Phi3 folder, sliding_window 2047; lol hf ppl", r[2][-300:], "a perplexity")
    # safetensors damage
    def bad_offsets(path):
        t = base_tensors("mistral")
        write_st(path, t)
        raw = open(path, "rb").read()
        hl = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + hl])
        hdr["model.norm.weight"]["data_offsets"] = [0, 10 ** 12]
        h = json.dumps(hdr).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        open(path, "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + hl:])
    d = hf_folder("st_badoff", "mistral", tensors=bad_offsets)
    hf_expect("st_badoff", d, "info", "safetensors whose model.norm.weight data_offsets end at 1e12", must=("model.norm.weight",), ok_allowed=False, extra=("--check",))
    def huge_header(path):
        open(path, "wb").write(struct.pack("<Q", 2 ** 62) + b"{}")
    d = hf_folder("st_hugehdr", "mistral", tensors=huge_header)
    hf_expect("st_hugehdr", d, "info", "model.safetensors whose header length is 2^62 (file of 10 bytes)", must=("model.safetensors",), ok_allowed=False, extra=("--check",))

CORPUS = "/work/shared/data/corpora/en_devil.txt"


def main():
    global LOL, WORK
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    c = sp.add_parser("check")
    c.add_argument("--lol", required=True)
    c.add_argument("--work", required=True)
    c.add_argument("--only", default="")
    a = ap.parse_args()
    LOL = os.path.abspath(a.lol)
    WORK = os.path.abspath(a.work)
    os.makedirs(WORK, exist_ok=True)
    if a.only in ("", "lr"):
        lr_cases()
    if a.only in ("", "hf") and "hf_cases" in globals():
        hf_cases()
    for p in problems:
        print(p)
    print("%d checks, %d problems (%d KNOWN documented differences: %s)" % (
        checks, len(problems), len(known), ", ".join(known)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
