#!/usr/bin/python3
"""Latency by tensor-parallel degree (the seeds' inference script): measured on this machine and
predicted, and predicted on H100.

This machine: `pentamesh calibrate --host --np 2,4` measures the host (GEMM form, bandwidth,
collectives); a ~100M-parameter dense model (tiny-dense widened: 8 layers, hidden 1024, FP32)
trains one step to get a checkpoint; then `pentamesh generate` at TP 1, 2 and 4 (`mpirun -np
TP`, 2/TP BLAS threads a rank) prefills a prompt and decodes, REPEATS times, and the median
measured prefill and per-token decode are printed next to the inference cost model's prediction
for the same host and layout (`generate --host-profile`, train::PredictGeneration).

The predicted H100 table: for the case study's model (MeridianFin-72B, 128 experts) and Llama 3
70B, prefill, time to first token, inter-token latency, weights and KV cache per GPU at TP 1, 2,
4 and 8 (one replica, EP 1, BF16 or --precision fp8), for a workload given on the command line (default: the case
study's 50K-token filing in, 2K tokens out, one request). A layout that does not fit prints the
planner's reason. A benchmark that prints numbers, not a test.
  /usr/bin/python3 bench/latency_by_tp.py [--build build] [--input-tokens N] [--output-tokens N]
      [--precision bf16|fp8] [--no-host] [--prompt N] [--new N] [--repeats N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HOST_TPS = [1, 2, 4]
BENCH_MODEL = ["--set", "model.layers=8", "--set", "model.hidden=1024", "--set", "model.heads=16",
               "--set", "model.kv_heads=4", "--set", "model.ffn_hidden=2816",
               "--set", "model.max_seq_len=512", "--set", 'model.name="bench-100m"']

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


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"latency_by_tp: {what} failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def host_section(binary, args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    os.environ.update(env)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        host = f"{tmp}/host.toml"
        run([binary, "calibrate", "--host", "--np", "2,4", "--out", host], "calibrate --host")
        ckpt = f"{tmp}/ckpt"
        run([binary, "train", "--config", "configs/tiny-dense.toml", *BENCH_MODEL,
             "--set", "train.global_batch_seqs=2", "--set", "run.layout=\"mbs=2\"",
             "--set", "run.steps=1", "--set", "run.eval_every=0", "--set", "run.eval_batches=1",
             "--set", f"run.out_dir=\"{tmp}/run\"", "--set", f"ckpt.dir=\"{ckpt}\""],
            "train (the bench model's checkpoint)")
        prompt = ",".join(str(7 + (i * 31) % 4000) for i in range(args.prompt))
        print(f"this machine ({cores} cores): bench-100m (8 layers, hidden 1024, FP32), "
              f"{args.prompt}-token prompt, {args.new} new tokens, median of {args.repeats} runs; "
              "predicted: the inference cost model on `pentamesh calibrate --host` of this host")
        print(f"{'TP':>3} {'threads':>7} {'prefill ms':>10} {'predicted':>9} {'ratio':>6} "
              f"{'decode ms/token':>15} {'predicted':>9} {'ratio':>6}")
        for tp in HOST_TPS:
            threads = max(1, cores // tp)
            cmd = [binary, "generate", "--checkpoint", ckpt, "--prompt-ids", prompt,
                   "--max-new-tokens", str(args.new), "--layout", f"tp={tp}",
                   "--threads", str(threads), "--host-profile", host, "--json"]
            if tp > 1:
                cmd = ["mpirun", "--oversubscribe", "-np", str(tp), "--mca", "btl", "self,vader",
                       *cmd]
            runs = [json.loads(run(cmd, f"generate at tp={tp}")) for _ in range(args.repeats)]
            pre = statistics.median(r["prefill_ms"] for r in runs)
            dec = statistics.median(r["decode_ms_per_token"] for r in runs)
            p = runs[0]["predicted"]
            p_pre, p_dec = p["prefill_ms"]["total"], p["itl_ms"]
            print(f"{tp:>3} {threads:>7} {pre:>10.1f} {p_pre:>9.1f} {pre / p_pre:>6.2f} "
                  f"{dec:>15.2f} {p_dec:>9.2f} {dec / p_dec:>6.2f}")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--cluster", default="h100-sxm")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp8"])
    ap.add_argument("--input-tokens", type=int, default=50000)
    ap.add_argument("--output-tokens", type=int, default=2000)
    ap.add_argument("--no-host", action="store_true", help="only the predicted H100 table")
    ap.add_argument("--prompt", type=int, default=256, help="this machine: prompt tokens")
    ap.add_argument("--new", type=int, default=32, help="this machine: new tokens")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    binary = f"{args.build}/src/cli/pentamesh"
    if not os.access(binary, os.X_OK):
        sys.exit(f"latency_by_tp: {binary} not found: build first (bash scripts/build.sh release)")
    if not args.no_host:
        host_section(binary, args)
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
