#!/usr/bin/env bash
# A plain run predicts its own time: `mpirun -np 4 pentamesh train` on tiny-dense at dp=4 with no
# host profile in sight, on a machine "never calibrated" (a fresh, empty cache directory each
# repetition, so each run measures this host itself: train/host_cache.h), then the same run again
# with the cache now filled. Prints, per run, what the run itself prints: its host line and its
# measured median step time next to the prediction, and the ratio predicted / measured. A
# benchmark that prints numbers, not a test: the figures are this machine's.
#   bash bench/plain_run.sh [build_dir] [steps] [repetitions]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-30}
reps=${3:-3}
bin="$build/src/cli/pentamesh"
[[ -x $bin ]] || { echo "plain_run.sh: build first (bash scripts/build.sh release)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run CACHE_DIR NAME
  PENTAMESH_CACHE_DIR=$1 mpirun --oversubscribe --mca btl self,vader -np 4 "$bin" train \
    --config configs/tiny-dense.toml --layout "dp=4 mbs=4" --set run.steps="$steps" \
    --set optim.warmup_steps=5 --set run.eval_every=0 --set run.log_every=1000 \
    --set run.out_dir=\""$out/$2"\" >"$out/$2.log" 2>&1 || { cat "$out/$2.log"; exit 1; }
  grep -E '^host: ' "$out/$2.log" | sed 's/^/  /'
  grep -E '^step time: ' "$out/$2.log" | sed 's/^/  /'
}
echo "mpirun -np 4 pentamesh train --config configs/tiny-dense.toml --layout \"dp=4 mbs=4\", $steps steps"
for r in $(seq 1 "$reps"); do
  echo "repetition $r, never calibrated (empty cache):"
  run "$out/cache-$r" "fresh-$r"
  echo "repetition $r, again with the cache it filled:"
  run "$out/cache-$r" "cached-$r"
done
