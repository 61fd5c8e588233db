#!/usr/bin/env python3
"""Adversarial checks of lol's chat-template support (`lol tokenizer chat`, `lol hf info`).

Provenance
----------
Written by an independent reviewer for the brief "try to break lol's chat-template
support", from docs/chat.md (the contract), `lol tokenizer chat --help`,
`lol hf generate --help` and the reviewer's knowledge of jinja2 3.1 and of how
transformers renders chat templates -- without reading src/ or tests/ (other than
tests/reference/).  Standard library only: every expected text below was produced by
jinja2 3.1.6 (Debian python3-jinja2) configured as transformers configures it
(ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]), tojson = json.dumps(ensure_ascii=False, ...)) or by Python's
json / datetime, and is written in as a literal.

The contract checked (docs/chat.md and the brief)
  * bad input: exit 2 with "error:" on stderr -- never a crash (exit 1, 134, 139, any
    signal), a hang (here: more than HANG_S seconds), or memory far beyond the 64 MiB
    value / output limits (here: more than MEM_MB of resident memory);
  * what renders, renders as jinja2 renders it (or is refused with exit 2 where lol
    documents a refusal, e.g. 64-bit integers).

Kinds of check
  clean   exit 0 or 2 (2 with "error:"), within HANG_S, under MEM_MB.  Used for
          pathological inputs where both "renders" and "refuses" are acceptable.
  same    exit 0 with jinja2's text, or exit 2 with "error:" where `refuse_ok` says a
          documented refusal is acceptable (never exit 0 with different text).
  refuse  exit 2 with "error:" (and, when given, a substring of the message).

Each lol run: `timeout`, RLIMIT_AS 4 GB, pinned to CPU 0 (taskset) when available.

Usage: chat_template_abuse.py check --lol build/lol --work /tmp/abuse
Prints each disagreement with its reproduction, then "N checks, M disagreements";
exit 0 when there are none, 1 otherwise.
"""
import argparse
import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import threading
import time

HANG_S = 6.0          # a run longer than this is a hang (lol starts in ~0.7 s)
MEM_MB = 1500         # resident memory far beyond the 64 MiB limits
AS_LIMIT = 4_000_000_000

ONE_MSG = [{"role": "user", "content": "Hi"}]


# Differences the main developer accepted and documented (docs/chat.md, "Not
# supported" / "Limits"), reported as "known" instead of disagreements.
KNOWN = {
    "messages_200000_keys": "JSON objects of more than 10000 members are refused",
    "print_range": "range() is a list (prints [0, 1, 2], not range(0, 3))",
    "int_filter_unicode_digits": "int / isdigit read ASCII digits only",
    "messages_bigint": "JSON integers beyond 64 bits are read as floats",
}


def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


class Runner:
    def __init__(self, lol, work):
        self.lol = os.path.abspath(lol)
        self.work = os.path.abspath(work)
        os.makedirs(self.work, exist_ok=True)
        self.taskset = shutil.which("taskset")
        self.n = 0
        self.bad = []

    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, data):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        return p

    def run(self, args, timeout=HANG_S):
        cmd = [self.lol] + args
        if self.taskset:
            cmd = [self.taskset, "-c", "0"] + cmd
        env = dict(os.environ, OMP_NUM_THREADS="1")
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=_limits, env=env)
        bufs = {}

        def drain(key, f):
            bufs[key] = f.read()

        th = [threading.Thread(target=drain, args=(k, f)) for k, f in
              (("out", p.stdout), ("err", p.stderr))]
        for t in th:
            t.start()
        status = ru = None
        while True:
            pid, st, usage = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                status, ru = st, usage
                break
            if time.time() - t0 > timeout:
                p.kill()
                _, st, usage = os.wait4(p.pid, 0)
                ru = usage
                break
            time.sleep(0.01)
        p.returncode = 0  # reaped above; keep Popen from waiting again
        for t in th:
            t.join()
        dt = time.time() - t0
        out, err = bufs.get("out", b""), bufs.get("err", b"")
        if status is None:
            rc = "timeout"
        elif os.WIFSIGNALED(status):
            rc = -os.WTERMSIG(status)
        else:
            rc = os.WEXITSTATUS(status)
        return rc, out, err, dt, ru.ru_maxrss // 1024

    # ------------------------------------------------------------------ helpers
    def _base_problem(self, rc, err, dt, mem):
        if rc == "timeout":
            return "no result within %.0f s (a hang)" % HANG_S
        if rc not in (0, 2):
            sig = " (signal %d)" % -rc if isinstance(rc, int) and rc < 0 else ""
            return "exit %s%s, expected 0 or 2" % (rc, sig)
        if rc == 2 and not err.startswith(b"error:"):
            return "exit 2 but stderr does not start with 'error:'"
        if mem > MEM_MB:
            return "peak resident memory %d MB (> %d MB)" % (mem, MEM_MB)
        return None

    def check(self, name, repro, args, kind, expect=None, refuse_ok=False,
              err_has=None, err_lacks=None, timeout=HANG_S, files_note=""):
        self.n += 1
        rc, out, err, dt, mem = self.run(args, timeout)
        prob = self._base_problem(rc, err, dt, mem)
        if prob is None:
            if kind == "same":
                if rc == 0 and out != expect:
                    prob = "printed %r, jinja2/Python gives %r" % (out[:200], expect[:200])
                elif rc == 2 and not refuse_ok:
                    prob = "refused (%r); jinja2/Python gives %r" % (err[:200], expect[:200])
            elif kind == "refuse":
                if rc != 2:
                    prob = "exit 0 printing %r; expected a refusal (exit 2)" % out[:200]
            if prob is None and err_has is not None and rc == 2 and err_has.encode() not in err:
                prob = "error message %r lacks %r" % (err[:200], err_has)
            if prob is None and err_lacks is not None and err_lacks in err:
                prob = "error message %r contains %r" % (err[:200], err_lacks)
        if prob and name in KNOWN:
            print("known   %s: %s (documented in docs/chat.md: %s)" % (name, prob[:120], KNOWN[name]))
            prob = None
        if prob:
            self.bad.append(name)
            print("DISAGREE %s: %s" % (name, prob))
            print("   repro: %s" % repro)
            if files_note:
                print("   files: %s" % files_note)
            print("   lol: exit %s, %.1f s, %d MB, stderr %r" % (rc, dt, mem, err[:240]))

    def tpl(self, name, src, kind, expect=None, messages=None, extra=(), **kw):
        tp = self.write("t_%s.jinja" % name, src)
        mp = self.write("m_%s.json" % name, json.dumps(messages if messages is not None else ONE_MSG))
        args = ["tokenizer", "chat", "--template", tp, "--messages", mp] + list(extra)
        shown = src if isinstance(src, str) else src.decode("utf-8", "backslashreplace")
        if len(shown) > 160:
            shown = shown[:100] + "...(%d chars; written by the script)" % len(shown)
        repro = "lol %s   with %s = %r" % (" ".join(args[:2] + ["--template", "T.jinja", "--messages", "M.json"] + list(extra)), "T.jinja", shown)
        if isinstance(expect, str):
            expect = expect.encode("utf-8")
        self.check(name, repro, args, kind, expect=expect, **kw)


def tiny_model(d, chat_template):
    """A Qwen2 folder: 1 layer, hidden 16, the byte-level vocabulary of tokenizer.json."""
    os.makedirs(d, exist_ok=True)
    vocab = {}
    # GPT-2 byte-to-unicode map
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    k = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + k)
            k += 1
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    for i, s in enumerate(specials):
        vocab[s] = i
    for b, c in zip(bs, cs):
        vocab[chr(c)] = len(vocab)
    V = len(vocab)
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, s in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None,
                   "eos_token": "<|endoftext|>", "chat_template": chat_template}, f)
    H, I, NH, NKV = 16, 32, 2, 1
    hd = H // NH
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": V,
           "hidden_size": H, "intermediate_size": I, "num_hidden_layers": 1,
           "num_attention_heads": NH, "num_key_value_heads": NKV,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "tie_word_embeddings": True, "torch_dtype": "float32", "hidden_act": "silu",
           "eos_token_id": 0, "use_sliding_window": False, "sliding_window": None,
           "max_window_layers": 1}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    p = "model.layers.0."
    shapes = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H],
              p + "self_attn.q_proj.weight": [NH * hd, H], p + "self_attn.q_proj.bias": [NH * hd],
              p + "self_attn.k_proj.weight": [NKV * hd, H], p + "self_attn.k_proj.bias": [NKV * hd],
              p + "self_attn.v_proj.weight": [NKV * hd, H], p + "self_attn.v_proj.bias": [NKV * hd],
              p + "self_attn.o_proj.weight": [H, NH * hd], p + "mlp.gate_proj.weight": [I, H],
              p + "mlp.up_proj.weight": [I, H], p + "mlp.down_proj.weight": [H, I],
              p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H]}
    rnd = random.Random(0)
    hdr, data = {}, b""
    for k, s in shapes.items():
        n = 1
        for x in s:
            n *= x
        vals = [1.0] * n if "norm" in k else [rnd.uniform(-0.1, 0.1) for _ in range(n)]
        b = struct.pack("<%df" % n, *vals)
        hdr[k] = {"dtype": "F32", "shape": s, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def deep_ns(n_outer, n_inner, use):
    """A list nested n_outer*n_inner deep, built through a namespace, then `use`d."""
    return ("{% set ns = namespace(s=[1]) %}{% for i in range(" + str(n_outer) + ") %}"
            "{% for j in range(" + str(n_inner) + ") %}{% set ns.s = [ns.s] %}{% endfor %}"
            "{% endfor %}" + use)


def run_checks(r):
    # ---------------------------------------------------------------- crashes
    # Left-associative chains are not depth-limited (the 200 limit covers brackets,
    # `not`, unary minus, blocks); rendering them recurses once per link.
    r.tpl("chain_plus_20000", "{{ 1" + "+1" * 20000 + " }}", "same", expect="20001",
          refuse_ok=True)
    r.tpl("chain_filter_20000", "{{ 'a'" + "|upper" * 20000 + " }}", "same", expect="A",
          refuse_ok=True)
    r.tpl("chain_attr_20000", "{{ messages" + ".x" * 20000 + " }}", "clean")
    r.tpl("chain_ternary_50000", "{{ " + "1 if true else " * 50000 + "2 }}", "clean")
    # Values nested deeper than the parser allows, built at run time.
    r.tpl("deep_value_print", deep_ns(100, 1000, "{{ ns.s }}"), "clean")
    r.tpl("deep_value_tojson", deep_ns(100, 1000, "{{ ns.s|tojson }}"), "clean")
    r.tpl("deep_value_destroy", deep_ns(1000, 1000, "{{ ns.s|length }}"), "clean")
    # Deep JSON from the command line (Python's json.load raises RecursionError: exit 2).
    deep = '[{"role":"user","content":"x","d":' + "[" * 30000 + "]" * 30000 + "}]"
    mp = r.write("deep_messages.json", deep)
    tp = r.write("plain.jinja", "x")
    r.check("messages_deep_json", "lol tokenizer chat --template plain.jinja --messages M.json "
            "(M.json: a message with a list nested 30000 deep)",
            ["tokenizer", "chat", "--template", tp, "--messages", mp], "clean")
    tools = r.write("deep_tools.json", "[" * 50000 + "]" * 50000)
    r.check("tools_deep_json", "lol tokenizer chat --template plain.jinja --prompt hi "
            "--tools T.json (T.json: [[[...]]] 50000 deep)",
            ["tokenizer", "chat", "--template", tp, "--prompt", "hi", "--tools", tools], "clean")
    r.check("var_deep_json", "lol tokenizer chat --template plain.jinja --prompt hi "
            "--var x=[[[...]]] (50000 deep)",
            ["tokenizer", "chat", "--template", tp, "--prompt", "hi", "--var",
             "x=" + "[" * 50000 + "]" * 50000], "clean")
    # Numbers JSON can hold but a double cannot: exit 1 "internal error" today.
    mp = r.write("inf_messages.json", '[{"role":"user","content":"x","n":1e400}]')
    r.check("messages_1e400", "lol tokenizer chat --template plain.jinja --messages M.json "
            "(M.json: [{\"role\":\"user\",\"content\":\"x\",\"n\":1e400}])",
            ["tokenizer", "chat", "--template", tp, "--messages", mp], "clean")
    tools = r.write("inf_tools.json", '[{"x":-1e400}]')
    r.check("tools_1e400", "lol tokenizer chat --template plain.jinja --prompt hi --tools T.json "
            "(T.json: [{\"x\":-1e400}])",
            ["tokenizer", "chat", "--template", tp, "--prompt", "hi", "--tools", tools], "clean")
    # `hf info` renders the folder's template, so a hostile folder crashes it.
    md = r.path("model_chain")
    tiny_model(md, "{{ 1" + "+1" * 20000 + " }}")
    r.check("hf_info_chain_template", "lol hf info DIR (DIR: a Qwen2 folder whose "
            "tokenizer_config.json chat_template is '{{ 1+1+...+1 }}' with 20000 '+1')",
            ["hf", "info", md], "clean")

    # ------------------------------------------------------------------ hangs
    r.tpl("nested_range_empty_body",
          "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x",
          "refuse")
    # (quadratic in the number of tags until 9303c20; a control now)
    r.tpl("many_comments_60000", "{# c #}" * 60000 + "ok", "same", expect="ok")
    r.tpl("unique_100000_strings", "{{ range(100000)|map('string')|unique|list|length }}",
          "same", expect="100000")
    big = [dict([("role", "user"), ("content", "x")] + [("k%d" % i, i) for i in range(200000)])]
    mp = r.write("manykeys.json", json.dumps(big))
    tp2 = r.write("manykeys.jinja", "{{ messages[0].k199999 }}")
    r.check("messages_200000_keys", "lol tokenizer chat --template T.jinja --messages M.json "
            "(T.jinja: '{{ messages[0].k199999 }}'; M.json: one message with 200000 keys, 3.5 MB)",
            ["tokenizer", "chat", "--template", tp2, "--messages", mp], "same", expect=b"199999")

    # ----------------------------------------------------------------- memory
    r.tpl("list_of_big_string_copies",
          "{% set s = 'a' * 60000000 %}{% set l = [" + ",".join(["s"] * 60) + "] %}{{ l|length }}",
          "same", expect="60", refuse_ok=True)

    # ------------------------------------------------------- silently wrong output
    r.tpl("abs_int64_min", "{{ (-9223372036854775807 - 1)|abs }}", "same",
          expect="9223372036854775808", refuse_ok=True)
    r.tpl("sum_overflow", "{{ [9223372036854775807, 1]|sum }}", "same",
          expect="9223372036854775808", refuse_ok=True)
    r.tpl("int_filter_bigint_string", "{{ '99999999999999999999999'|int }}", "same",
          expect="99999999999999999999999", refuse_ok=True)
    r.tpl("int_filter_big_float", "{{ 1e20|int }}", "same", expect="100000000000000000000",
          refuse_ok=True)
    r.tpl("round_negative_ndigits", "{{ 2.5|round(-400) }}", "same", expect="0.0")
    r.tpl("escape_N_name", "{{ '\\N{BULLET}' }}", "same", expect="\u2022", refuse_ok=True)
    r.tpl("escape_beyond_unicode", "{{ '\\U00110000' }}", "refuse")
    r.tpl("splitlines_python_breaks", "{{ 'a\\x0bb\\x1cc\\u2028d'.splitlines() }}", "same",
          expect="['a', 'b', 'c', 'd']", refuse_ok=True)
    r.tpl("print_range", "{{ range(3) }}", "same", expect="range(0, 3)", refuse_ok=True)
    r.tpl("unknown_filter_in_untaken_ternary", "{{ 1|nonsense if false else 2 }}", "same",
          expect="2")
    r.tpl("int_filter_unicode_digits", "{{ '\u0661\u0662'|int }}", "same", expect="12",
          refuse_ok=True)
    mp = r.write("bigint_messages.json",
                 '[{"role":"user","content":"x","n":123456789012345678901234567890}]')
    tp3 = r.write("tojson_n.jinja", "{{ messages[0].n|tojson }}")
    r.check("messages_bigint", "lol tokenizer chat --template T.jinja --messages M.json "
            "(T.jinja: '{{ messages[0].n|tojson }}'; M.json: n = 123456789012345678901234567890)",
            ["tokenizer", "chat", "--template", tp3, "--messages", mp], "same",
            expect=b"123456789012345678901234567890", refuse_ok=True)
    tpd = r.write("date.jinja", "{{ strftime_now('%d %b %Y') }}")
    for d in ("2026-02-30", "2023-02-29", "0000-01-01"):
        r.check("date_" + d, "lol tokenizer chat --template T.jinja --prompt hi --date %s "
                "(T.jinja: \"{{ strftime_now('%%d %%b %%Y') }}\")" % d,
                ["tokenizer", "chat", "--template", tpd, "--prompt", "hi", "--date", d], "refuse")

    # --------------------------------------------------------- misleading errors
    r.tpl("nul_in_tag_error_message", b"{{\x001 }}", "refuse", err_lacks=b"character '\n")

    # ------------------------------------------- controls (the contract holds today)
    r.tpl("if_nesting_1000", "{% if true %}" * 1000 + "x" + "{% endif %}" * 1000, "refuse")
    r.tpl("brackets_100000", "{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}", "refuse")
    r.tpl("macro_recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "refuse")
    r.tpl("string_doubling", "{% set ns = namespace(s='a') %}{% for i in range(100) %}"
          "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}", "refuse")
    r.tpl("raw_unterminated", "{% raw %}abc", "refuse", err_has="raw")
    r.tpl("crlf_and_ws_control",
          "a  \r\n  {%- if true -%}  \r\n b \r\n {%+ if true +%} c {%- endif +%}\r\n"
          "  {%+ endif -%}  d\r\n", "same", expect="ab \n  c\n  d")
    r.tpl("self_ref_namespace", "{% set ns = namespace(a=1) %}{% set ns.me = ns %}"
          "{{ ns.me.me.a }}|{{ ns|tojson }}", "refuse", err_has="JSON serializable")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--lol", required=True)
    c.add_argument("--work", required=True)
    a = ap.parse_args(argv)
    r = Runner(a.lol, a.work)
    t0 = time.time()
    run_checks(r)
    print("%d checks, %d disagreements (%.0f s)" % (r.n, len(r.bad), time.time() - t0))
    return 1 if r.bad else 0


if __name__ == "__main__":
    sys.exit(main())
