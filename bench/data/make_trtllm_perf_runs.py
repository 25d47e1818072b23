#!/usr/bin/env python3
"""Writes bench/data/trtllm_perf_overview.json: TensorRT-LLM's published maximum-throughput
measurements of dense Llama models on H100 and H200 (FP8), a third serving source for the engine
profiles (cost::ServeEngineProfile, bench/serving.sh), checked and never fitted.

Source: NVIDIA/TensorRT-LLM at commit 00f37686aa854010d68bcbd0f4ab000221541ca6,
docs/source/performance/perf-overview.md ("Throughput Measurements"): `trtllm-bench throughput`
(PyTorch backend) fed a dataset of `num_requests` requests of exactly ISL input and OSL output
tokens (prepare_dataset.py token-norm-dist, stdev 0) at an infinite rate; the metric is "Total
Output Throughput (tokens/sec)" = requests x OSL / total latency (first request to last token).
Kept: the FP8 tables of Llama 3.1 8B (H100 TP1, H200 TP1), Llama 3.3 70B (H100 TP2, H200 TP1) and
Llama 3.1 405B (H100 TP8, H200 TP8); the models are `llama3-8b`, `llama3-70b` and `llama3-405b`
(Llama 3.1 and 3.3 keep Llama 3's architecture). Values copied from the tables; the request
counts from the same page's "$num_requests" table.

Each row is a fixed batch: `requests` requests arriving together, compared on the time the last
one finishes (`batch_ms` = 1000 x requests x OSL / throughput). The engine's batch limits are what
trtllm-bench gives itself when none are passed: tensorrt_llm/bench/build/tuning.py
(`calc_engine_setting`, `finetune_setting`, same commit's tree) from the device's memory, the FP8
weights' bytes (1 a parameter), the FP8 KV cache's bytes a token and ISL + OSL:
  kv_requests = 0.95 x (GPUs x device GiB - params GiB) / (KV GiB a token x (ISL + OSL))
  raw_bs = min(kv_requests, 4096); raw_tokens = min(raw_bs x (1 + ISL / OSL), 32768)
  max_batch_size = max(64, 32 ceil(raw_bs / 32)) below 256, 128 ceil(raw_bs / 128) below 1024,
                   else 256 ceil(raw_bs / 256)
  max_num_tokens = max(2048, 256 ceil(raw_tokens / 256)) below 4096, 512 ceil(/ 512) below 8192,
                   else 1024 ceil(raw_tokens / 1024)
The page's runs raise the KV cache's share to 0.95 of the memory left after the weights ("in many
cases ... --kv_cache_free_gpu_mem_fraction 0.95", 0.90 where that ran out of memory; which rows
used which is not published): 0.95 here. Device memory: what the driver reports (the cluster
presets' hbm_usable_gb: H100 80GB 85.52 GB, H200 150.75 GB); parameters, layers, KV heads and head
size: the model presets' (configs/presets, read here).

  python3 bench/data/make_trtllm_perf_runs.py > bench/data/trtllm_perf_overview.json
"""
import json
import math
import os
import sys
import tomllib

COMMIT = "00f37686aa854010d68bcbd0f4ab000221541ca6"
PATH = "docs/source/performance/perf-overview.md"
URL = f"https://github.com/NVIDIA/TensorRT-LLM/blob/{COMMIT}/{PATH}"
TUNING = f"https://github.com/NVIDIA/TensorRT-LLM/blob/{COMMIT}/tensorrt_llm/bench/build/tuning.py"

LENGTHS = [(128, 128), (128, 2048), (128, 4096), (500, 2000), (1000, 1000), (1000, 2000),
           (2048, 128), (2048, 2048), (5000, 500), (20000, 2000)]
REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500,
            (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000,
            (500, 2000): 3000, (20000, 2000): 1000}
# Total output tokens/s per column, in LENGTHS order (None: not published).
TABLES = {
    ("llama3-8b", "h200", 1): [27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804],
    ("llama3-8b", "h100-sxm", 1): [28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305, 3459,
                                   1351],
    ("llama3-70b", "h200", 1): [3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283],
    ("llama3-70b", "h100-sxm", 2): [6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437],
    ("llama3-405b", "h200", 8): [3814, 5348, 4741, 4724, 3330, 3722, 456, 2948, 650, 505],
    ("llama3-405b", "h100-sxm", 8): [3627, 4340, 3116, 3994, 2919, 2895, 453, 2296, 610, 345],
}
PRESETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "presets")


def preset(kind, name):
    with open(os.path.join(PRESETS, kind, name + ".toml"), "rb") as f:
        return tomllib.load(f)


NAMES = {"llama3-8b": "llama3.1-8b", "llama3-70b": "llama3.3-70b", "llama3-405b": "llama3.1-405b"}
KV_FRACTION = 0.95


def bench_settings(model, cluster, tp, isl, osl):
    """trtllm-bench's max_batch_size and max_num_tokens (tuning.py), FP8 weights and KV."""
    m = preset("models", model)["model"]
    device_gb = preset("clusters", cluster)["cluster"]["hbm_usable_gb"]
    gib = 1024.0**3
    per_token = 2 * m["layers"] * max(tp, m["kv_heads"]) * m["head_dim"] * 1.0 / gib
    available = device_gb * 1e9 / gib * tp - m["total_params"] * 1.0 / gib
    kv_requests = available * KV_FRACTION / (per_token * (isl + osl))
    raw_bs = min(kv_requests, 4096)
    raw_token = min(raw_bs * (1 + isl / osl), 32768)
    bs = round_up(raw_bs, [(256, 32), (1024, 128), (math.inf, 256)], 64)
    tokens = round_up(raw_token, [(4096, 256), (8192, 512), (math.inf, 1024)], 2048)
    return bs, tokens


def round_up(x, ladder, least):
    """tuning.py's rounding: up to a multiple of the step of the first limit x is below, and at
    least `least` in the first rung."""
    for i, (limit, step) in enumerate(ladder):
        if x < limit:
            v = step * math.ceil(x / step)
            return max(least, v) if i == 0 else v
    raise ValueError(x)


def main():
    rows = []
    for (model, cluster, tp), values in TABLES.items():
        config = f"{NAMES[model]}-{cluster}-tp{tp}-fp8"
        for (isl, osl), tput in zip(LENGTHS, values):
            if tput is None:
                continue
            n = REQUESTS[(isl, osl)]
            bs, tokens = bench_settings(model, cluster, tp, isl, osl)
            rows.append({
                "name": f"trtllm-perf-{config}-{isl}in-{osl}out",
                "source": URL,
                "group": "trtllm-perf-overview",
                "config": config,
                "engine": "trtllm",
                "model": model,
                "cluster": cluster,
                "precision": "fp8",
                "tp": tp,
                "input_tokens": isl,
                "output_tokens": osl,
                "requests": n,
                "max_seqs": bs,
                "max_batched_tokens": tokens,
                "gpu_memory_utilization": KV_FRACTION,
                "batch_ms": round(1000.0 * n * osl / tput, 1),
                "compare": ["batch_ms"],
                "published": {"total_output_tokens_per_s": tput, "num_requests": n},
            })
    rows.sort(key=lambda x: x["name"])
    json.dump({"source": URL, "settings": TUNING, "rows": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
