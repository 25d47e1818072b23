#!/usr/bin/env bash
# The cost model's step time and MFU for the engine against the engine's measured ones, with this
# host measured first (`pentamesh calibrate --host --np 2,4`, used as run.host_profile: GEMM forms,
# bandwidth, and MPI collectives at 2 and 4 ranks): tiny-dense on one process and under mpirun
# (dp, tp), the median of the steps after the first five, and the dp and tp collective time per
# step, predicted (metrics.jsonl predicted.time_s) and measured (comm_time_s). A benchmark that
# prints numbers, not a test: the figures are this machine's.
#   bash bench/step_time.sh [build_dir] [steps]
# STEP_TIME_NP="" measures no collectives (the link falls back to run.mem_gbps, no latency).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-40}
bin="$build/src/cli/pentamesh"
[[ -x $bin ]] || { echo "step_time.sh: build first (bash scripts/build.sh release)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
np=${STEP_TIME_NP-2,4}
"$bin" calibrate --host ${np:+--np "$np"} --out "$out/host.toml" |
  grep -E "large-GEMM|one thread|triad|collectives at|collective|own fit|p2p|all_|reduce_scatter|joint|note"
common=(--config configs/tiny-dense.toml --set run.steps="$steps" --set optim.warmup_steps=1
        --set run.eval_every=0 --set run.eval_batches=1 --set run.log_every=1000
        --set run.host_profile=\""$out/host.toml"\")
"$bin" train "${common[@]}" --set run.steps=2 --set run.out_dir=\"\" >/dev/null  # dataset once
printf '%-18s %5s %11s %11s %6s %8s %8s %17s %17s\n' layout ranks "measured s" "predicted s" \
  ratio "MFU meas" "MFU pred" "dp ms meas/pred" "tp ms meas/pred"
run() {  # ranks layout
  local dir="$out/run-$1-${2// /_}"
  if [[ $1 == 1 ]]; then
    "$bin" train "${common[@]}" --layout "$2" --set run.out_dir=\""$dir"\" >/dev/null
  else
    mpirun --oversubscribe -np "$1" --mca btl self,vader "$bin" train "${common[@]}" \
      --layout "$2" --set run.threads=1 --set run.out_dir=\""$dir"\" >/dev/null
  fi
  /usr/bin/python3 - "$dir/metrics.jsonl" "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if "predicted" in r][5:]
m = statistics.median(r["step_time_s"] for r in rows)
p = rows[-1]["predicted"]
def comm(term):  # measured / predicted milliseconds per step, "-" where the layout has none
    meas = [r.get("comm_time_s", {}).get(term) for r in rows]
    if meas[0] is None: return "-"
    return f"{1e3 * statistics.median(meas):.2f}/{1e3 * p['time_s'][term]:.2f}"
print(f"{sys.argv[3]:<18} {sys.argv[2]:>5} {m:>11.4f} {p['time_s']['step']:>11.4f} "
      f"{p['time_s']['step'] / m:>6.2f} {statistics.median(r['mfu'] for r in rows):>8.3f} "
      f"{p['mfu']:>8.3f} {comm('dp'):>17} {comm('tp'):>17}")
PY
}
run 1 "mbs=8"
run 2 "mbs=8 dp=2"
run 2 "mbs=8 tp=2"
run 4 "mbs=4 dp=4"
run 4 "mbs=4 dp=2 tp=2"
