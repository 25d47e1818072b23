#!/usr/bin/env bash
# The engine profiles (cost::ServeEngineProfile) against serving measurements:
# bench/data/serving_runs.json (collected, bench/data/make_serving_runs.py) and the rows of
# bench/data/published_serving.json that name an engine; then the shipped profiles on
# bench/data/inferencex_serving.json and bench/data/trtllm_perf_overview.json, which no fit sees
# (serve_bench --check). Per engine: the profile fitted on all
# rows, the shipped profile's errors, and median / p90 |error| by metric in-sample, 5-fold, leave-one-source-out and
# leave-one-GPU-out and leave-one-model-out, with the profile "none" (the kernels' roofline
# alone) for comparison; then the closed loops at concurrency 1, 10, 100 next to the
# measurements; then the capacity search's speed (serve --rate without --tp).
# docs/COST_MODEL.md ("Engine profiles") quotes this output.
#   bash bench/serving.sh
# Every row's measured and simulated TTFT/TPOT, and the errors by the number of clients:
#   build/bench/serve_bench --rows bench/data/serving_runs.json bench/data/published_serving.json
# Uses build/bench/serve_bench and build/src/cli/pentamesh (scripts/build.sh release).
set -euo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/serve_bench
bin=build/src/cli/pentamesh
[ -x "$bench" ] && [ -x "$bin" ] || {
  echo "serving.sh: build first (bash scripts/build.sh release)" >&2
  exit 2
}
"$bench" bench/data/serving_runs.json bench/data/published_serving.json
echo
# A second source no profile is fitted on (bench/data/make_inferencex_runs.py): the shipped
# profiles checked against it.
"$bench" --check bench/data/inferencex_serving.json | grep -v '^    '
echo
# A third, never fitted (bench/data/make_trtllm_perf_runs.py): TensorRT-LLM's maximum-throughput
# tables, each a fixed batch of requests; every row with the roofline's ("none") time beside.
"$bench" --check bench/data/trtllm_perf_overview.json
echo
echo "== capacity search (serve --rate, no --tp): wall time"
for args in "--model llama3-8b --input-tokens 2000 --output-tokens 200 --rate 20 --slo-ttft 1000 --slo-itl 50" \
            "--model llama3-70b --input-tokens 1000 --output-tokens 500 --rate 10 --slo-ttft 2000 --slo-itl 60"; do
  start=$(date +%s%N)
  # shellcheck disable=SC2086
  "$bin" serve $args --engine trtllm --cluster h100-sxm --top 3
  end=$(date +%s%N)
  echo "took $(( (end - start) / 1000000 )) ms"
done
