#!/usr/bin/env python3
"""Writes bench/data/serving_runs.json: serving measurements collected for the engine profiles
(cost::ServeEngineProfile, fitted by bench/serving.sh).

Source: NVIDIA's "Sizing LLM Inference Systems" course data set `nim.csv` (NIM for LLMs with the
TensorRT-LLM backend, measured with GenAI-Perf: a closed loop of N concurrent clients, synthetic
prompts of a fixed length, max_tokens = the output length), as kept in the public repository
wbing520/ai-performance-engineering at commit 0e25b2e236211ad01ed2221bd2c1cfa5b3f47b55, path
code/ch10_inference/inference_gpu_cluster_sizing/dataset/nim.csv. It holds Llama 3 8B and 70B
Instruct on A100-SXM4-80GB and H100 80GB HBM3, TP 1-8, FP16/BF16/FP8, at 6 prompt shapes and
concurrency 1-250. Kept here: the first row of each (model, GPU, TP, precision, input, output,
concurrency), at every concurrency the file has (1, 2, 5, 10, 25, 50, 100, 150, 200, 250; the set
repeats some settings, concurrency 5 twice); the cells copied verbatim (ns converted to ms).

  python3 bench/data/make_serving_runs.py NIM_CSV > bench/data/serving_runs.json
"""
import csv
import json
import sys

COMMIT = "0e25b2e236211ad01ed2221bd2c1cfa5b3f47b55"
PATH = "code/ch10_inference/inference_gpu_cluster_sizing/dataset/nim.csv"
URL = f"https://github.com/wbing520/ai-performance-engineering/blob/{COMMIT}/{PATH}"
MODELS = {"meta-llama3-8b-instruct": "llama3-8b", "meta-llama3-70b-instruct": "llama3-70b"}
GPUS = {"A100-SXM4-80GB": "a100-80gb", "H100_80GB_HBM3": "h100-sxm"}
PRECISIONS = {"fp16": "bf16", "bf16": "bf16", "fp8": "fp8"}  # FP16 costs as BF16 (2 bytes)


def main():
    rows, seen = [], set()
    with open(sys.argv[1], newline="") as f:
        for r in csv.DictReader(f):
            c = int(r["input_config-concurrency"])
            key = (r["task_inputs-model"], r["task_inputs-GPU"], r["task_inputs-n_gpus"],
                   r["task_inputs-precision"], r["input_config-synthetic_input_tokens_mean"],
                   r["input_config-output_tokens_mean"], c)
            if key in seen:
                continue
            seen.add(key)
            model, gpu, tp, prec, inp, out = key[:6]
            ms = lambda col: round(float(r[col]) / 1e6, 3)
            rows.append({
                "name": f"nim-dli-{MODELS[model]}-{GPUS[gpu]}-tp{tp}-{prec}-{inp}in-{out}out-c{c}",
                "source": URL,
                "group": "nim-dli",
                "config": f"{MODELS[model]}-{GPUS[gpu]}-tp{tp}-{prec}",
                "engine": "trtllm",
                "model": MODELS[model], "cluster": GPUS[gpu], "precision": PRECISIONS[prec],
                "tp": int(tp), "input_tokens": int(inp), "output_tokens": int(out),
                "concurrency": c,
                "ttft_ms": ms("time_to_first_token-avg"),
                "itl_ms": ms("inter_token_latency-avg"),
                "output_tokens_per_s": round(float(r["output_token_throughput-avg"]), 2),
                "published": {k: r[k] for k in (
                    "time_to_first_token-avg", "inter_token_latency-avg",
                    "output_token_throughput-avg", "num_output_token-avg",
                    "num_input_token-avg")},
            })
    about = ("Serving measurements for the engine profiles (cost::ServeEngineProfile; "
             "bench/serving.sh fits and cross-validates them). Closed loops of `concurrency` "
             "clients; ttft_ms and itl_ms are GenAI-Perf's means (its ITL is per request "
             "(e2e - TTFT) / (output - 1), the simulation's TPOT); FP16 rows are costed as BF16. "
             "Written by bench/data/make_serving_runs.py from " + URL + ".")
    json.dump({"about": about, "rows": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
