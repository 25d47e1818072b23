#!/usr/bin/python3
"""Latency by tensor-parallel degree (the seeds' inference script), predicted by `pentamesh serve`.

The predicted H100 table: for the case study's model (MeridianFin-72B, 128 experts) and Llama 3
70B, prefill, time to first token, inter-token latency, weights and KV cache per GPU at TP 1, 2,
4 and 8 (one replica, EP 1, BF16 or --precision fp8), for a workload given on the command line (default: the case
study's 50K-token filing in, 2K tokens out, one request). A layout that does not fit prints the
planner's reason. A benchmark that prints numbers, not a test.
  /usr/bin/python3 bench/latency_by_tp.py [--build build] [--input-tokens N] [--output-tokens N]
"""
import argparse
import json
import os
import subprocess
import sys

MODELS = ["meridianfin-72b", "llama3-70b"]
TPS = [1, 2, 4, 8]


def serve(binary, model, tp, args):
    cmd = [binary, "serve", "--model", model, "--cluster", args.cluster, "--tp", str(tp),
           "--input-tokens", str(args.input_tokens), "--output-tokens", str(args.output_tokens),
           "--precision", args.precision, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 2:  # the layout breaks a rule or does not fit: the planner says why
        why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "does not fit"
        return None, why.removeprefix("pentamesh: error: ")
    if p.returncode != 0:
        sys.exit(f"latency_by_tp: {' '.join(cmd)} failed ({p.returncode}): {p.stderr}")
    return json.loads(p.stdout), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cluster", default="h100-sxm")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp8"])
    ap.add_argument("--input-tokens", type=int, default=50000)
    ap.add_argument("--output-tokens", type=int, default=2000)
    args = ap.parse_args()
    binary = f"{args.build}/src/cli/pentamesh"
    if not os.access(binary, os.X_OK):
        sys.exit(f"latency_by_tp: {binary} not found: build first (bash scripts/build.sh release)")
    print(f"predicted on {args.cluster}: {args.input_tokens} input + {args.output_tokens} output "
          f"tokens, 1 request, {args.precision}, EP 1, one replica (pentamesh serve --tp T --json)")
    print(f"{'model':<16} {'TP':>3} {'weights GB':>10} {'KV GB':>7} {'prefill ms':>10} "
          f"{'TTFT p95 ms':>11} {'ITL ms':>7} {'tok/s/GPU':>9} {'$/request':>9}")
    for model in MODELS:
        for tp in TPS:
            e, why = serve(binary, model, tp, args)
            if e is None:
                print(f"{model:<16} {tp:>3}  does not fit: {why}")
                continue
            m = e["memory_bytes"]
            print(f"{model:<16} {tp:>3} {m['weights'] / 1e9:>10.1f} {m['kv_cache'] / 1e9:>7.1f} "
                  f"{e['prefill_ms']['total']:>10.0f} {e['ttft_p95_ms']:>11.0f} "
                  f"{e['decode_ms']['itl']:>7.2f} {e['output_tokens_per_s_gpu']:>9.1f} "
                  f"{e['usd_per_request']:>9.4f}")


if __name__ == "__main__":
    main()
