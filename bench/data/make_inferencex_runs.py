#!/usr/bin/env python3
"""Writes bench/data/inferencex_serving.json: DeepSeek-R1 serving measurements of SemiAnalysis'
InferenceX, a second source for the engine profiles (cost::ServeEngineProfile, bench/serving.sh).

Source: the InferenceX dashboard's benchmark rows as kept in the public repository
SemiAnalysisAI/InferenceX-app at commit a369c398135d525127c1622c1417d75b1cce5170, path
packages/app/cypress/fixtures/api/benchmarks.json (each row names the GitHub Actions run that
measured it, kept here as "run_url"). Kept: DeepSeek-R1 on one node of 8 x H200 or 8 x B200,
SGLang or TensorRT-LLM, FP8 (and NVFP4 on B200), tensor parallel with the experts TP-sharded
(decode_ep 1, no DP attention), no speculative decoding, not disaggregated; every ISL/OSL and
concurrency the file has. Measured values copied verbatim (seconds converted to ms).

The benchmark (InferenceX's utils/bench_serving/benchmark_serving.py): a closed loop of `conc`
clients (--max-concurrency, request rate inf), 10 x conc prompts, each prompt's input and output
lengths drawn uniformly from [int(0.8 L), L] (--random-range-ratio 0.8, the workflow's default),
--ignore-eos. Compared: the median TTFT and median TPOT (the means carry the first round, all
clients sending at once; the medians are the steady loop's). The engines' settings that change
the schedule, from the launch scripts at SemiAnalysisAI/InferenceX commit
843c6254ff69b567f772f6a5fd97675af3d04431 (benchmarks/single_node/fixed_seq_len/dsr1_*.sh; a row's
run used the script of its date):
  SGLang H200 FP8: --chunked-prefill-size 32768, --max-running-requests 512 (1K/1K) else 256,
    --mem-fraction-static 0.82, BF16 KV.
  SGLang B200 FP8: TP 8: 32768, 128, 0.82; TP 4: 8192, 32, 0.95; FP8 KV.
  SGLang B200 NVFP4: 16384, 256, 0.85; FP8 KV.
  Not modelled: SGLang's --stream-interval (10 on H200, 30 on B200) and
  --scheduler-recv-interval (B200: 10, 30 from 16 clients).
  TensorRT-LLM (trtllm-serve, PyTorch backend): max_num_tokens = max(8192, (conc + ISL + 64)
    rounded up to 64), max_batch_size 128 (H200) or conc (B200), FP8 KV, free_gpu_memory_fraction
    (of the memory left after the weights) 0.75 on H200, 0.8 on B200 but 0.75 for FP8 at TP 4 with
    8K prompts.

  python3 bench/data/make_inferencex_runs.py BENCHMARKS_JSON > bench/data/inferencex_serving.json
"""
import json
import sys

COMMIT = "a369c398135d525127c1622c1417d75b1cce5170"
PATH = "packages/app/cypress/fixtures/api/benchmarks.json"
URL = f"https://github.com/SemiAnalysisAI/InferenceX-app/blob/{COMMIT}/{PATH}"
SCRIPTS = ("https://github.com/SemiAnalysisAI/InferenceX/tree/"
           "843c6254ff69b567f772f6a5fd97675af3d04431/benchmarks/single_node/fixed_seq_len")
ENGINES = {"sglang": "sglang", "trt": "trtllm"}
CLUSTERS = {"h200": "h200", "b200": "b200"}


def settings(r):
    """(max_batched_tokens, max_seqs, kv_fp8) of the row's launch script (SGLang's
    --chunked-prefill-size and --max-running-requests; TensorRT-LLM's max_num_tokens and
    max_batch_size)."""
    hw, fw, prec, tp = r["hardware"], r["framework"], r["precision"], r["decode_tp"]
    isl, osl, conc = r["isl"], r["osl"], r["conc"]
    if fw == "sglang":
        if hw == "h200":
            return 32768, 512 if (isl, osl) == (1024, 1024) else 256, False
        if prec == "fp8":
            return (32768, 128, True) if tp == 8 else (8192, 32, True)
        return 16384, 256, True
    tokens = max(8192, (conc + isl + 64 + 63) // 64 * 64)
    return tokens, 128 if hw == "h200" else conc, True


def main():
    with open(sys.argv[1]) as f:
        data = json.load(f)
    rows = []
    for r in data:
        if (r["model"] != "dsr1" or r["hardware"] not in CLUSTERS
                or r["framework"] not in ENGINES or r["spec_method"] != "none" or r["disagg"]
                or r["is_multinode"] or r["decode_ep"] != 1 or r["decode_dp_attention"]
                or r["precision"] not in ("fp8", "fp4")
                or (r["precision"] == "fp4" and r["hardware"] != "b200")):
            continue
        m = r["metrics"]
        if not m.get("median_ttft") or not m.get("median_tpot"):
            continue
        tokens, seqs, kv_fp8 = settings(r)
        # SGLang's --mem-fraction-static (of the device's memory: vLLM's gpu_memory_utilization);
        # TensorRT-LLM's kv_cache_config free_gpu_memory_fraction (of what is left after the
        # weights: the trtllm profile reads it so, cost::ServeEngineProfile): H200 0.75, B200 0.8
        # and 0.75 for FP8 at TP 4 with 8K prompts (dsr1_fp8_b200_trt.sh).
        util = None
        if r["framework"] == "sglang":
            util = {("h200", "fp8"): 0.82, ("b200", "fp8"): 0.82 if r["decode_tp"] == 8 else 0.95,
                    ("b200", "fp4"): 0.85}[(r["hardware"], r["precision"])]
        elif r["hardware"] == "h200":
            util = 0.75
        else:
            util = (0.75 if (r["precision"], r["decode_tp"], r["isl"]) == ("fp8", 4, 8192)
                    else 0.8)
        fw, hw, prec, tp = r["framework"], r["hardware"], r["precision"], r["decode_tp"]
        config = f"dsr1-{hw}-{fw}-tp{tp}-{prec}"
        rows.append({
            "name": f"inferencex-{config}-{r['isl']}in-{r['osl']}out-c{r['conc']}",
            "source": URL,
            "run_url": r["run_url"],
            "date": r["date"],
            "image": r.get("image"),
            "group": "inferencex",
            "config": config,
            "engine": ENGINES[fw],
            "model": "deepseek-v3-like",
            "cluster": CLUSTERS[hw],
            "precision": prec,
            "tp": tp,
            "input_tokens": r["isl"],
            "output_tokens": r["osl"],
            "concurrency": r["conc"],
            "benchmark_requests": 10 * r["conc"],
            "length_range_ratio": 0.8,
            "statistic": "median",
            "max_batched_tokens": tokens,
            "max_seqs": seqs,
            "kv_fp8": kv_fp8,
            **({"gpu_memory_utilization": util} if util else {}),
            "ttft_ms": m["median_ttft"] * 1e3,
            "itl_ms": m["median_tpot"] * 1e3,
            "published": {k: m[k] for k in ("median_ttft", "mean_ttft", "median_tpot",
                                            "mean_tpot", "tput_per_gpu") if k in m},
        })
    rows.sort(key=lambda x: x["name"])
    json.dump({"source": URL, "scripts": SCRIPTS, "rows": rows}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
