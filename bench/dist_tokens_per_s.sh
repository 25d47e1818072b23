#!/usr/bin/env bash
# Tokens/s of distributed training on this machine for dp = 1, 2, 4 and tp = 1, 2 (sp off and on) with
# the tiny dense model (configs/tiny-dense.toml), each run under mpirun. On a 2-core machine the
# larger worlds are oversubscribed: the figures are for the record, not a target.
#   bash bench/dist_tokens_per_s.sh [build_dir] [steps]
set -euo pipefail
build=${1:-build}
steps=${2:-10}
bin="$build/src/cli/pentamesh"
[[ -x $bin ]] || bin="$build/pentamesh"
[[ -x $bin ]] || { echo "pentamesh not built under $build" >&2; exit 1; }
config=configs/tiny-dense.toml
common=(--config "$config" --set run.steps="$steps" --set optim.warmup_steps=1 --set run.eval_every=0 --set run.eval_batches=1
        --set run.out_dir=\"\" --set run.log_every=1000)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The first run tokenizes the corpus into the dataset if it is missing (single process).
"$bin" train "${common[@]}" --set run.steps=1 >/dev/null
printf '%-22s %6s %12s\n' layout ranks tokens/s
for layout in "dp=1 tp=1" "dp=2 tp=1" "dp=4 tp=1" "dp=1 tp=2 sp=off" "dp=2 tp=2 sp=off" \
              "dp=1 tp=2 sp=on" "dp=2 tp=2 sp=on"; do
  np=$(( $(sed -E 's/.*dp=([0-9]+).*/\1/' <<<"$layout") * $(sed -E 's/.*tp=([0-9]+).*/\1/' <<<"$layout") ))
  line=$(mpirun --oversubscribe -np "$np" --mca btl self,vader "$bin" train "${common[@]}" \
           --layout "mbs=4 $layout" | grep '^done:')
  tps=$(sed -E 's/.*\(([0-9.]+) tokens\/s\).*/\1/' <<<"$line")
  printf '%-22s %6d %12s\n' "$layout" "$np" "$tps"
done
