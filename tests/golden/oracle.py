#!/usr/bin/python3
"""PyTorch oracle for the pentamesh engine (tests/golden/golden_test.cc runs it).

Reads DIR/config.json, DIR/params.json + params.bin (float32 weights by name, in the engine's
ParamSet order), DIR/tokens.bin and DIR/targets.bin (int32), builds the same Llama-style
decoder in float64 with autograd, and writes DIR/loss.txt, DIR/logits.bin and DIR/grads.bin
(float64, same order and shapes as params.bin). Invariant: this file restates the model's
math independently of the C++ layers (RoPE rotate-half, GQA, SwiGLU, MoE top-k with unnormalised
gates, the load-balancing loss alpha*E*sum f_i P_i and the router z-loss).
Usage: /usr/bin/python3 oracle.py DIR
"""
import json
import math
import os
import sys

import torch

torch.set_default_dtype(torch.float64)


def load(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    meta = json.load(open(os.path.join(d, "params.json")))
    flat = torch.frombuffer(bytearray(open(os.path.join(d, "params.bin"), "rb").read()),
                            dtype=torch.float32).to(torch.float64)
    params = {}
    for p in meta:
        n = math.prod(p["shape"])
        t = flat[p["offset"]:p["offset"] + n].clone().reshape(p["shape"])
        params[p["name"]] = t.requires_grad_(True)
    def ints(name):
        return torch.frombuffer(bytearray(open(os.path.join(d, name), "rb").read()),
                                dtype=torch.int32).to(torch.int64)
    return cfg, meta, params, ints("tokens.bin"), ints("targets.bin")


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):  # x: (B, S, N, D)
    S, D = x.shape[1], x.shape[3]
    half = D // 2
    freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / D)
    ang = torch.arange(S, dtype=torch.float64)[:, None] * freq[None, :]
    c, s = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def attention(x, p, pre, cfg, B, S):
    A, K, D = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    q = (x @ p[pre + ".wq"].T).reshape(B, S, A, D)
    k = (x @ p[pre + ".wk"].T).reshape(B, S, K, D)
    v = (x @ p[pre + ".wv"].T).reshape(B, S, K, D)
    q, k = rope(q, cfg["rope_theta"]), rope(k, cfg["rope_theta"])
    rep = A // K
    k = k.repeat_interleave(rep, dim=2)
    v = v.repeat_interleave(rep, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, A, S, D)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D)
    mask = torch.ones(S, S, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    o = torch.softmax(scores, dim=-1) @ v
    o = o.transpose(1, 2).reshape(B * S, A * D)
    return o @ p[pre + ".wo"].T


def swiglu(x, w1, w3, w2):
    return (torch.nn.functional.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


def moe(x, p, pre, cfg, aux):
    T = x.shape[0]
    E, k, cf = cfg["experts"], cfg["top_k"], cfg["capacity_factor"]
    assert cf == 0, "the oracle covers the dropless mode"
    logits = x @ p[pre + ".router"].T
    probs = torch.softmax(logits, dim=-1)
    top = torch.topk(probs.detach(), k, dim=-1).indices  # (T, k)
    y = torch.zeros_like(x)
    counts = torch.zeros(E, dtype=torch.float64)
    for e in range(E):
        rows, slots = (top == e).nonzero(as_tuple=True)
        counts[e] = rows.numel()
        if rows.numel() == 0:
            continue
        out = swiglu(x[rows], p[pre + ".experts.w1"][e], p[pre + ".experts.w3"][e],
                     p[pre + ".experts.w2"][e])
        y = y.index_add(0, rows, probs[rows, e:e + 1] * out)
    if pre + ".shared.w1" in p:
        y = y + swiglu(x, p[pre + ".shared.w1"], p[pre + ".shared.w3"], p[pre + ".shared.w2"])
    f = counts / (T * k)
    aux.append(cfg["aux_loss_coef"] * E * (f * probs.mean(0)).sum())
    lse = torch.logsumexp(logits, dim=-1)
    aux.append(cfg["z_loss_coef"] * (lse * lse).mean())
    return y


def main(d):
    cfg, meta, p, tokens, targets = load(d)
    B, S, eps = cfg["batch"], cfg["seq"], cfg["norm_eps"]
    x = p["embedding.weight"][tokens]
    aux = []
    for l in range(cfg["layers"]):
        pre = f"layers.{l}"
        h = x + attention(rmsnorm(x, p[pre + ".attention_norm.weight"], eps), p, pre + ".attention",
                          cfg, B, S)
        n2 = rmsnorm(h, p[pre + ".ffn_norm.weight"], eps)
        if pre + ".moe.router" in p:
            x = h + moe(n2, p, pre + ".moe", cfg, aux)
        else:
            x = h + swiglu(n2, p[pre + ".mlp.w1"], p[pre + ".mlp.w3"], p[pre + ".mlp.w2"])
    xn = rmsnorm(x, p["final_norm.weight"], eps)
    w_out = p["embedding.weight"] if cfg["tied_embeddings"] else p["lm_head.weight"]
    logits = xn @ w_out.T
    valid = targets >= 0
    ce = torch.nn.functional.cross_entropy(logits[valid], targets[valid], reduction="sum")
    loss = ce / valid.sum() + sum(aux) if aux else ce / valid.sum()
    loss.backward()
    with open(os.path.join(d, "loss.txt"), "w") as f:
        f.write(repr(loss.item()) + "\n")
    logits.detach().numpy().astype("float64").tofile(os.path.join(d, "logits.bin"))
    grads = torch.cat([p[m["name"]].grad.reshape(-1) for m in meta])
    grads.numpy().astype("float64").tofile(os.path.join(d, "grads.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
