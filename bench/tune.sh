#!/usr/bin/env bash
# The engine's step time predicted vs measured, the way a user tunes: `pentamesh tune` on tiny-dense
# and tiny-moe at N = 2 and N = 4 ranks (top 6 planned layouts + the FSDP baseline + one process =
# 8 runs each), this host measured first at each N (`calibrate --host --np N`). Prints each tune's
# table and a last summary line per (model, N): median |error|, rank agreement, the measured best's
# predicted rank. A benchmark that prints numbers, not a test: the figures are this machine's; run
# it on a quiet machine (other processes on the cores skew every timing).
#   bash bench/tune.sh [build_dir] [steps] [out_dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-20}
out=${3:-out/bench/tune}
bin="$build/src/cli/pentamesh"
[[ -x $bin ]] || { echo "tune.sh: build first (bash scripts/build.sh release)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
summary=()
for np in 2 4; do
  "$bin" calibrate --host --np "$np" --out "$out/host-np$np.toml" > "$out/calibrate-np$np.log"
  for model in tiny-dense tiny-moe; do
    echo "== $model, $np ranks"
    "$bin" tune --config "configs/$model.toml" --np "$np" --top 6 --steps "$steps" \
      --host-profile "$out/host-np$np.toml" --out-dir "$out/$model-np$np" \
      --html "$out/$model-np$np.html" --json-out "$out/$model-np$np.json" 2>/dev/null |
      tee "$out/$model-np$np.txt"
    summary+=("$(/usr/bin/python3 - "$out/$model-np$np.json" "$model" "$np" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
s = j["summary"]
print(f"{sys.argv[2]:<11} N={sys.argv[3]}  runs {s['measured_runs']}  median |error| "
      f"{100 * s['median_abs_error']:.1f}%  Spearman {s['spearman']:.2f}  measured best = "
      f"predicted #{s['best_predicted_rank']} (#{s['best_tied_rank']} with ties)")
PY
)")
  done
done
echo "== summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
