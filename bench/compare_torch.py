#!/usr/bin/python3
"""Step time of the same model and batch in pentamesh and in PyTorch (CPU, same thread count).

pentamesh: `pentamesh train --config CONFIG` for STEPS steps (no eval), median `step_time_s` of
metrics.jsonl after the first 2 steps. PyTorch (Debian's 1.13, float32): the same architecture
(RMSNorm, RoPE, GQA causal attention, SwiGLU, untied head, cross-entropy) and sizes, forward +
backward + torch.optim.AdamW on a random batch of global_batch_seqs x seq_len tokens split into
micro-batches of mbs, median step time after 2 warm-up steps.
Usage: /usr/bin/python3 bench/compare_torch.py [--config configs/tiny-dense.toml] [--steps 8]
       [--threads 1] [--pentamesh build/src/cli/pentamesh]
Prints both step times (wall, and CPU time, which is robust when other processes share the
cores) and the ratios pentamesh / PyTorch (<= 1.0: pentamesh is as fast or faster). Dense only.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import resource
import tempfile
import time
import tomllib

import torch
import torch.nn.functional as F


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope_tables(S, D, theta):
    half = D // 2
    freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / D)
    ang = torch.arange(S, dtype=torch.float64)[:, None] * freq[None, :]
    return torch.cos(ang).float()[None, :, None, :], torch.sin(ang).float()[None, :, None, :]


def rope(x, c, s):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


class Model(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m
        H, A, K, D, Fd, V = m["hidden"], m["heads"], m.get("kv_heads", m["heads"]), \
            m.get("head_dim", m["hidden"] // m["heads"]), m["ffn_hidden"], m["vocab"]
        self.A, self.K, self.D = A, K, D
        p = lambda *shape: torch.nn.Parameter(torch.randn(*shape) * 0.02)
        self.emb = p(V, H)
        self.layers = torch.nn.ModuleList()
        for _ in range(m["layers"]):
            layer = torch.nn.ParameterDict({
                "n1": torch.nn.Parameter(torch.ones(H)), "n2": torch.nn.Parameter(torch.ones(H)),
                "wq": p(A * D, H), "wk": p(K * D, H), "wv": p(K * D, H), "wo": p(H, A * D),
                "w1": p(Fd, H), "w3": p(Fd, H), "w2": p(H, Fd)})
            self.layers.append(layer)
        self.norm = torch.nn.Parameter(torch.ones(H))
        self.head = p(V, H)
        self.eps = m.get("norm_eps", 1e-5)
        self.theta = m.get("rope_theta", 10000.0)

    def forward(self, tokens, targets):
        B, S = tokens.shape
        c, s = rope_tables(S, self.D, self.theta)
        mask = torch.ones(S, S, dtype=torch.bool).tril()
        x = self.emb[tokens]
        for l in self.layers:
            n = rmsnorm(x, l["n1"], self.eps)
            q = rope((n @ l["wq"].T).view(B, S, self.A, self.D), c, s)
            k = rope((n @ l["wk"].T).view(B, S, self.K, self.D), c, s)
            v = (n @ l["wv"].T).view(B, S, self.K, self.D)
            rep = self.A // self.K
            k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(self.D)
            att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
            o = (att @ v).transpose(1, 2).reshape(B, S, self.A * self.D)
            x = x + o @ l["wo"].T
            n = rmsnorm(x, l["n2"], self.eps)
            x = x + (F.silu(n @ l["w1"].T) * (n @ l["w3"].T)) @ l["w2"].T
        logits = rmsnorm(x, self.norm, self.eps) @ self.head.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def torch_step_time(cfg, steps):
    m, t = cfg["model"], cfg["train"]
    G, S = t["global_batch_seqs"], t["seq_len"]
    layout = dict(kv.split("=", 1) for kv in cfg["run"].get("layout", "").split())
    mbs = int(layout.get("mbs", 1))
    model = Model(m)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, m["vocab"], (G, S + 1), generator=gen)
    times, cpu = [], []
    for _ in range(steps):
        start, start_cpu = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        for mb in range(0, G, mbs):
            chunk = tokens[mb:mb + mbs]
            loss = model(chunk[:, :-1], chunk[:, 1:]) / (G * S)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times[2:]), statistics.median(cpu[2:])


def pentamesh_run(binary, config, steps, threads):
    """Median wall step time, and the CPU seconds of the whole process."""
    cfg = tomllib.load(open(config, "rb"))
    tokens = cfg["train"]["global_batch_seqs"] * cfg["train"]["seq_len"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([binary, "train", "--config", config, "--set",
                        f"train.total_tokens={tokens * steps}", "--set", "run.eval_every=0",
                        "--set", "optim.warmup_steps=1", "--set", f"run.threads={threads}",
                        "--set", f'run.out_dir="{out}"'], check=True, stdout=subprocess.DEVNULL)
        lines = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return statistics.median(l["step_time_s"] for l in lines[2:]), cpu


def pentamesh_step_time(binary, config, steps, threads):
    """Wall: median step. CPU: (CPU of a 2*steps run - CPU of a steps run) / steps, which
    cancels start-up; robust when other processes share the cores."""
    wall, cpu_a = pentamesh_run(binary, config, steps, threads)
    _, cpu_b = pentamesh_run(binary, config, 2 * steps, threads)
    return wall, (cpu_b - cpu_a) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/tiny-dense.toml")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pentamesh", default="build/src/cli/pentamesh")
    a = ap.parse_args()
    cfg = tomllib.load(open(a.config, "rb"))
    assert "moe" not in cfg["model"], "dense models only"
    torch.set_num_threads(a.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    tokens = cfg["train"]["global_batch_seqs"] * cfg["train"]["seq_len"]
    pm, pm_cpu = pentamesh_step_time(a.pentamesh, a.config, a.steps, a.threads)
    pt, pt_cpu = torch_step_time(cfg, a.steps)
    print(f"{a.config}: {tokens} tokens/step, {a.threads} thread(s)")
    print(f"pentamesh step {pm * 1e3:.1f} ms wall, {pm_cpu * 1e3:.1f} ms CPU "
          f"({tokens / pm:.0f} tokens/s wall)")
    print(f"pytorch   step {pt * 1e3:.1f} ms wall, {pt_cpu * 1e3:.1f} ms CPU "
          f"({tokens / pt:.0f} tokens/s wall)")
    print(f"ratio pentamesh/pytorch = {pm / pt:.2f} (wall), {pm_cpu / pt_cpu:.2f} (CPU time)")


if __name__ == "__main__":
    main()
