#!/usr/bin/env bash
# The cost model against the published runs: bench/data/published_runs.json and
# bench/data/collected_runs.json (runs collected beside it: MoE, long context, FP8 at scale;
# bench/data/README.md). The shipped presets are fitted on both files as one calibration set.
#  1. held out: the collected rows predicted by the shipped calibration (which saw them) and by a
#     fresh fit on published_runs.json only (which never did: a genuine held-out check), by group,
#     GPU and regime;
#  2. both files as one set: the shipped calibration's errors, and a fresh fit's in-sample, 5-fold
#     (fixed seed) and leave-one-group-out errors, by source group, GPU and regime (MoE,
#     seq >= 32K, FP8, >= 1,024 GPUs: median and p90).
#  3. the regime intervals (src/calib/regime_interval.h): leave-one-out coverage on the
#     calibration table (configs/presets/calibration/runs.toml), by regime, beside the stack-wide
#     interval (build/bench/interval_coverage).
# docs/COST_MODEL.md ("Accuracy", "Regime intervals") quotes this output.
#   bash bench/calibration.sh            # print
#   bash bench/calibration.sh --write    # also refit on both files and rewrite the presets and
#                                        # the regime table (every run with its 5-fold error)
# Uses build/src/cli/pentamesh and build/bench/interval_coverage (scripts/build.sh release).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/src/cli/pentamesh
runs=bench/data/published_runs.json
collected=bench/data/collected_runs.json
[ -x "$bin" ] || { echo "calibration.sh: build first (bash scripts/build.sh release)" >&2; exit 2; }
if [ "${1:-}" = "--write" ]; then
  "$bin" validate --runs "$runs" "$collected" --write-presets configs/presets
  echo "presets rewritten: rebuild (bash scripts/build.sh release) so the binary embeds them"
  exit 0
fi
echo "== 1. held out: $collected, fitted on $runs only"
"$bin" validate --runs "$runs" --holdout "$collected"
echo
echo "== 2. both files as one calibration set"
start=$(date +%s%N)
"$bin" validate --runs "$runs" "$collected" --cv --no-rows
end=$(date +%s%N)
echo "validate --cv took $(( (end - start) / 1000000 )) ms (in-sample, 5 folds, each group left out)"
echo
echo "== 3. regime intervals: leave-one-out coverage on the calibration table"
[ -x build/bench/interval_coverage ] || { echo "calibration.sh: build/bench/interval_coverage missing (bash scripts/build.sh release)" >&2; exit 2; }
build/bench/interval_coverage
