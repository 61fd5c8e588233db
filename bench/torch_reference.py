#!/usr/bin/env python3
"""PyTorch eager reference of `lol bench train` (issue 12), for side-by-side timing.

The same presets (shapes), model and optimizer as `lol bench train`, written the way a
PyTorch user would: nn.Modules, F.scaled_dot_product_attention, the routed core's windows
grouped by expert with boolean indexing (one block call per expert and routed depth),
torch.optim.Muon (PyTorch >= 2.9; a per-parameter Muon of the same formula otherwise) for
the blocks' matrices and torch.optim.AdamW for the rest, clip_grad_norm_, and the
loss-free balancing update after each step. Synthetic batches: uniform random tokens, one
document per row, every next token a target.

    python3 bench/torch_reference.py --preset tiny --arch both --device cuda --steps 50 --warmup 5
    python3 bench/torch_reference.py --preset small --arch lol --device cuda --steps 20 --warmup 3 --json

Model (LoL paper sections 3.1-3.2, Algorithm 1; src/lol/model.cpp): embedding, prelude
blocks with causal attention over the row, `core_depth` routed depths, coda blocks, final
RMSNorm, tied LM head. Routed depth l (1-based) cuts each row into windows of `window`
tokens shifted by ((l - 1) * stride) mod window; a window's router input is
(e_l + s_first) / 2 for the row's first window and the mean of the earlier windows' mean
states otherwise; top-1 expert by softmax probability plus the balancing bias; the
expert's block runs on the window's tokens (causal attention inside the window, RoPE at
the row positions, FiLM of depth l on both norms) and the update is
s <- s + alpha (E(s) - s), alpha the router's probability of the chosen expert.
`--arch dense`: the equal-depth dense strided-window model (src/training/
dense_window_model.h): routed depth l always runs its own block l, alpha = 1, no router,
no FiLM. Blocks: pre-norm Llama/Qwen2 (RMSNorm, grouped-query attention without biases,
SwiGLU FFN). Initialisation as lol's: normal(0, 0.02) (the depth embedding too), output
projections 0.02 / sqrt(2 * layers) (lol only; dense: all 0.02), norms and FiLM gammas 1, betas 0.

Prints the median step, fwd+bwd and optimizer times and tokens/s like `lol bench train`
(--json: one JSON object per architecture).

Differences from `lol bench train` that change the work or its timing: the windows run as a
padded batch [batch * windows, window, d], so at depths whose windows are shifted the
blocks' projections and FFN see (windows * window) rows per sequence instead of seq (+12.5%
at half of the routed depths in both presets; attention is padded to the window in both);
torch.optim.Muon runs its Newton-Schulz iteration in bfloat16 (lol: float32) and one
parameter at a time; the architectures of --arch both run one after the other (lol
interleaves their steps); batches are on the device before the timing starts.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "tiny": dict(vocab=512, d=64, heads=4, kv_heads=4, ffn=172, prelude=1, coda=1, library=4, depth=4,
                 window=16, stride=8, seq=128, batch=8),
    "small": dict(vocab=2048, d=256, heads=8, kv_heads=4, ffn=688, prelude=2, coda=2, library=8, depth=8,
                  window=64, stride=32, seq=512, batch=8),
}
EPS = 1e-5
THETA = 10000.0
ROUTER_NOISE = 0.1
BALANCE_RATE = 1e-3
# F.scaled_dot_product_attention(enable_gqa=...) since PyTorch 2.5; before, K/V are repeated.
GQA = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rotate(x, cos, sin):
    """x [n, L, H, hd]; cos/sin [n or 1, L, 1, hd/2] (rotate-half RoPE, as Llama/Qwen2)."""
    x1, x2 = x.chunk(2, -1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Block(nn.Module):
    def __init__(self, p):
        super().__init__()
        d, h, kv, hd = p["d"], p["heads"], p["kv_heads"], p["d"] // p["heads"]
        self.h, self.kv, self.hd = h, kv, hd
        self.input_layernorm = RMSNorm(d)
        self.post_attention_layernorm = RMSNorm(d)
        self.q_proj = nn.Linear(d, h * hd, bias=False)
        self.k_proj = nn.Linear(d, kv * hd, bias=False)
        self.v_proj = nn.Linear(d, kv * hd, bias=False)
        self.o_proj = nn.Linear(h * hd, d, bias=False)
        self.gate_proj = nn.Linear(d, p["ffn"], bias=False)
        self.up_proj = nn.Linear(d, p["ffn"], bias=False)
        self.down_proj = nn.Linear(p["ffn"], d, bias=False)

    def delta(self, x, cos, sin, mask, film=None):
        """E(x) - x for x [n, L, d]: attention then FFN, each pre-norm (FiLM: gamma * norm + beta).

        mask: None (causal over L) or a boolean [n, 1, L, L] (True = may attend)."""
        n, L, _ = x.shape
        h = self.input_layernorm(x)
        if film is not None:
            h = film[0] * h + film[1]
        q = rotate(self.q_proj(h).view(n, L, self.h, self.hd), cos, sin).transpose(1, 2)
        k = rotate(self.k_proj(h).view(n, L, self.kv, self.hd), cos, sin).transpose(1, 2)
        v = self.v_proj(h).view(n, L, self.kv, self.hd).transpose(1, 2)
        if self.kv != self.h and not GQA:
            k = k.repeat_interleave(self.h // self.kv, dim=1)
            v = v.repeat_interleave(self.h // self.kv, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                           **({"enable_gqa": True} if GQA and self.kv != self.h else {}))
        a = self.o_proj(o.transpose(1, 2).reshape(n, L, self.h * self.hd))
        m = self.post_attention_layernorm(x + a)
        if film is not None:
            m = film[2] * m + film[3]
        return a + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


class Model(nn.Module):
    def __init__(self, p, arch):
        super().__init__()
        self.p, self.arch = p, arch
        d = p["d"]
        self.embed_tokens = nn.Embedding(p["vocab"], d)
        self.prelude = nn.ModuleList(Block(p) for _ in range(p["prelude"]))
        core = p["library"] if arch == "lol" else p["depth"]
        self.library = nn.ModuleList(Block(p) for _ in range(core))
        self.coda = nn.ModuleList(Block(p) for _ in range(p["coda"]))
        self.norm = RMSNorm(d)
        if arch == "lol":
            self.router = nn.Linear(d, p["library"], bias=False)
            self.depth_embed = nn.Parameter(torch.zeros(p["depth"], d))
            # FiLM per routed depth: attn gamma, attn beta, ffn gamma, ffn beta.
            self.film = nn.Parameter(torch.cat([torch.ones(p["depth"], 1, d), torch.zeros(p["depth"], 1, d)] * 2, 1))
            self.register_buffer("balance_bias", torch.zeros(p["library"]))
            self.load = torch.zeros(p["library"], dtype=torch.long)
        hd = d // p["heads"]
        inv = 1.0 / (THETA ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        freqs = torch.outer(torch.arange(p["seq"] + p["window"], dtype=torch.float32), inv)
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)
        layers = p["prelude"] + p["coda"] + p["depth"]
        with torch.no_grad():
            for name, w in self.named_parameters():
                if name.endswith("proj.weight") or name in ("embed_tokens.weight", "router.weight", "depth_embed"):
                    # lol scales the output projections; the dense reference does not (dense_window_model.cpp).
                    scaled = arch == "lol" and name.endswith(("o_proj.weight", "down_proj.weight"))
                    std = 0.02 / math.sqrt(2.0 * layers) if scaled else 0.02
                    w.normal_(0.0, std)

    def forward(self, tokens):
        B, T = tokens.shape
        p = self.p
        s = self.embed_tokens(tokens)
        cos, sin = self.cos[:T].view(1, T, 1, -1), self.sin[:T].view(1, T, 1, -1)
        for blk in self.prelude:
            s = s + blk.delta(s, cos, sin, None)
        W = p["window"]
        for l in range(1, p["depth"] + 1):
            s = self.routed_depth(s, l, W, ((l - 1) * p["stride"]) % W)
        for blk in self.coda:
            s = s + blk.delta(s, cos, sin, None)
        return self.norm(s) @ self.embed_tokens.weight.t()

    def routed_depth(self, s, l, W, shift):
        """One routed depth over windows of W tokens, the first `W - shift` long."""
        B, T, d = s.shape
        n_win = (shift + T + W - 1) // W
        pad_right = n_win * W - shift - T
        # Windows as a padded batch [B * n_win, W, d]; `valid` marks real tokens.
        xw = F.pad(s, (0, 0, shift, pad_right)).view(B * n_win, W, d)
        valid = F.pad(torch.ones(B, T, dtype=torch.bool, device=s.device), (shift, pad_right)).view(B * n_win, W)
        pos = (torch.arange(n_win * W, device=s.device) - shift).clamp(min=0).view(n_win, W)
        cos = self.cos[pos].view(1, n_win, W, 1, -1).expand(B, -1, -1, -1, -1).reshape(B * n_win, W, 1, -1)
        sin = self.sin[pos].view(1, n_win, W, 1, -1).expand(B, -1, -1, -1, -1).reshape(B * n_win, W, 1, -1)
        causal = torch.ones(W, W, dtype=torch.bool, device=s.device).tril()
        mask = (causal.unsqueeze(0) & valid.unsqueeze(1)).unsqueeze(1)  # [B*n_win, 1, W(q), W(k)]
        # A padded query row sees no key: let it see itself (its output is dropped).
        mask = mask | torch.eye(W, dtype=torch.bool, device=s.device).view(1, 1, W, W)
        if self.arch == "dense":
            delta = self.library[l - 1].delta(xw, cos, sin, mask)
            out = xw + delta
        else:
            vf = valid.unsqueeze(-1).to(s.dtype)
            counts = vf.sum(1).view(B, n_win, 1)
            means = ((xw * vf).sum(1).view(B, n_win, d) / counts)
            earlier = torch.cumsum(means, 1)[:, :-1] / torch.arange(1, n_win, device=s.device, dtype=s.dtype).view(1, -1, 1)
            first = ((self.depth_embed[l - 1] + s[:, 0]) / 2).unsqueeze(1)
            r = torch.cat([first, earlier], 1).view(B * n_win, d)
            logits = self.router(r)
            if self.training:
                logits = logits + torch.randn_like(logits) * ROUTER_NOISE
            probs = logits.softmax(-1)
            sel = (probs.detach() + self.balance_bias).argmax(-1)
            alpha = probs.gather(1, sel.unsqueeze(1)).view(-1, 1, 1)
            film = self.film[l - 1]
            # Windows grouped by expert: one host copy of the counts per depth.
            counts = torch.bincount(sel, minlength=len(self.library)).tolist()
            out = xw.clone()
            for e, idx in enumerate(torch.argsort(sel, stable=True).split(counts)):
                if counts[e] == 0:
                    continue
                delta = self.library[e].delta(xw[idx], cos[idx], sin[idx], mask[idx], film=film)
                out.index_add_(0, idx, alpha[idx] * delta)
            if self.training:
                self.load += torch.tensor(counts)
        return out.view(B, n_win * W, d)[:, shift:shift + T]

    def update_balance(self):
        if self.arch != "lol" or self.load.sum() == 0:
            return
        lf = self.load.float()
        self.balance_bias += (torch.sign(lf.mean() - lf) * BALANCE_RATE).to(self.balance_bias.device)
        self.load.zero_()


def newton_schulz(g, steps=5, eps=1e-7):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.float()
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.t()
    x = x / x.norm().clamp_min(eps)
    for _ in range(steps):
        A = x @ x.t()
        x = a * x + (b * A + c * A @ A) @ x
    return (x.t() if tall else x).to(g.dtype)


class SimpleMuon(torch.optim.Optimizer):
    """Muon as torch.optim.Muon (nesterov, adjust_lr_fn="match_rms_adamw"), for PyTorch < 2.9."""

    def __init__(self, params, lr, weight_decay, momentum=0.95):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if "momentum_buffer" not in st:
                    st["momentum_buffer"] = torch.zeros_like(p)
                buf = st["momentum_buffer"]
                buf.lerp_(p.grad, 1 - g["momentum"])
                u = p.grad.lerp(buf, g["momentum"])
                p.mul_(1 - g["lr"] * g["weight_decay"])
                p.add_(newton_schulz(u), alpha=-g["lr"] * 0.2 * math.sqrt(max(p.shape)))


def make_optimizers(model, lr=3e-3, wd=0.1):
    muon, decay, no_decay = [], [], []
    for name, w in model.named_parameters():
        if w.dim() == 2 and name.endswith("proj.weight"):
            muon.append(w)
        elif name in ("embed_tokens.weight", "router.weight"):
            decay.append(w)
        else:
            no_decay.append(w)
    try:
        m = torch.optim.Muon(muon, lr=lr, weight_decay=wd, momentum=0.95, nesterov=True, ns_steps=5,
                             adjust_lr_fn="match_rms_adamw")
    except (AttributeError, TypeError, ValueError):  # no torch.optim.Muon, or another signature
        m = SimpleMuon(muon, lr=lr, weight_decay=wd)
    a = torch.optim.AdamW([dict(params=decay, weight_decay=wd), dict(params=no_decay, weight_decay=0.0)], lr=lr,
                          betas=(0.9, 0.95), eps=1e-8)
    return [m, a]


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def bench(preset, arch, dev, steps, warmup, seed):
    p = PRESETS[preset]
    torch.manual_seed(seed)
    model = Model(p, arch).to(dev).train()
    opts = make_optimizers(model)
    params = [w for w in model.parameters()]
    g = torch.Generator().manual_seed(seed + 1)
    batches = [torch.randint(0, p["vocab"], (p["batch"], p["seq"]), generator=g).to(dev) for _ in range(warmup + steps)]
    fb_t, opt_t, losses = [], [], []
    for i, tokens in enumerate(batches):
        sync(dev)
        t0 = time.perf_counter()
        logits = model(tokens)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, p["vocab"]), tokens[:, 1:].reshape(-1))
        loss.backward()
        losses.append(loss.item())
        sync(dev)
        t1 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        for o in opts:
            o.step()
        for o in opts:
            o.zero_grad(set_to_none=True)
        model.update_balance()
        sync(dev)
        t2 = time.perf_counter()
        if i >= warmup:
            fb_t.append(t1 - t0)
            opt_t.append(t2 - t1)
    step = statistics.median([a + b for a, b in zip(fb_t, opt_t)])
    tokens = p["batch"] * p["seq"]
    return dict(preset=preset, arch=arch, device=str(dev), torch=torch.__version__,
                parameters=sum(w.numel() for w in params), steps=steps, step_s=step,
                fwd_bwd_s=statistics.median(fb_t), optimizer_s=statistics.median(opt_t),
                tokens_per_s=tokens / step, fwd_bwd_tokens_per_s=tokens / statistics.median(fb_t),
                first_loss=losses[0], last_loss=losses[-1],
                muon=type(opts[0]).__module__ + "." + type(opts[0]).__name__,
                threads=torch.get_num_threads())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--arch", default="lol", choices=["lol", "dense", "both"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    for arch in (["lol", "dense"] if a.arch == "both" else [a.arch]):
        r = bench(a.preset, arch, dev, a.steps, a.warmup, a.seed)
        if a.json:
            print(json.dumps(r))
            continue
        print(f"torch reference, preset {a.preset} ({arch}): {r['parameters']} parameters; torch {r['torch']}, "
              f"{r['device']}, {r['threads']} threads, {r['muon']}")
        print(f"step (median of {a.steps}): {1e3 * r['step_s']:.2f} ms = fwd+bwd {1e3 * r['fwd_bwd_s']:.2f} ms"
              f" + optimizer {1e3 * r['optimizer_s']:.2f} ms")
        print(f"tokens/s: {r['tokens_per_s']:.1f} (full step), {r['fwd_bwd_tokens_per_s']:.1f} (fwd+bwd only); "
              f"loss {r['first_loss']:.3f} -> {r['last_loss']:.3f}")


if __name__ == "__main__":
    main()
