#!/usr/bin/env bash
# The cost model against the published runs (bench/data/published_runs.json): the shipped
# calibration's errors, and a fresh fit's in-sample, 5-fold (fixed seed) and leave-one-group-out
# errors, by source group, GPU and regime (MoE, seq >= 32K, FP8, >= 1,024 GPUs: median and p90).
# docs/COST_MODEL.md ("Accuracy") quotes this output.
#   bash bench/calibration.sh            # print (by source group, GPU and regime)
#   bash bench/calibration.sh --write    # also refit and rewrite the presets (then rebuild)
# Uses build/src/cli/pentamesh (scripts/build.sh release).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/src/cli/pentamesh
runs=bench/data/published_runs.json
[ -x "$bin" ] || { echo "calibration.sh: build first (bash scripts/build.sh release)" >&2; exit 2; }
if [ "${1:-}" = "--write" ]; then
  "$bin" validate --runs "$runs" --write-presets configs/presets
  echo "presets rewritten: rebuild (bash scripts/build.sh release) so the binary embeds them"
  exit 0
fi
start=$(date +%s%N)
"$bin" validate --runs "$runs" --cv --no-rows
end=$(date +%s%N)
echo "validate --cv took $(( (end - start) / 1000000 )) ms (15 fits: in-sample, 5 folds, 9 groups left out)"
