#!/usr/bin/env bash
# Failure injection: train the tiny MoE on the finance corpus (data/) twice,
# with the load-balancing loss on (optim.aux_loss_coef = 0.01) and off (0), dropless, and print
# expert_load_imbalance (max/mean routed tokens per expert, summed over MoE layers) per step of
# both runs side by side, then the mean over the last quarter. Single process.
# Usage: scripts/moe_balance_injection.sh [steps=80] [build dir=build]
set -euo pipefail
steps=${1:-80}
build=${2:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/$build/src/cli/pentamesh"
[[ -x "$bin" ]] || { echo "missing $bin: bash scripts/build.sh release pentamesh" >&2; exit 2; }
dataset=${PENTAMESH_DATASET:-$root/out/data/finance-4096}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for coef in 0.01 0; do
  "$bin" train --config "$root/configs/tiny-moe.toml" \
    --set data.dataset="$dataset" --set data.corpus="$root/data/finance_corpus.txt.xz" --set run.steps="$steps" --set run.out_dir="$out/aux-$coef" \
    --set model.moe.capacity_factor=0 --set optim.aux_loss_coef="$coef" \
    --set run.eval_every=100000 --set run.log_every=100000 > "$out/log-$coef.txt"
done
/usr/bin/env python3 - "$out/aux-0.01/metrics.jsonl" "$out/aux-0/metrics.jsonl" <<'PY'
import json, sys
on = [json.loads(l) for l in open(sys.argv[1])]
off = [json.loads(l) for l in open(sys.argv[2])]
print("step  imbalance(aux on)  imbalance(aux off)  tokens_per_expert(off)")
for a, b in zip(on, off):
    bar = "#" * int(round(10 * (b["expert_load_imbalance"] - 1)))
    print(f'{a["step"]:4d}  {a["expert_load_imbalance"]:17.3f}  {b["expert_load_imbalance"]:18.3f}'
          f'  {b["tokens_per_expert"]} {bar}')
q = max(1, len(on) // 4)
mean = lambda rows: sum(r["expert_load_imbalance"] for r in rows[-q:]) / q
print(f"mean expert_load_imbalance over the last {q} steps: aux on {mean(on):.3f}, "
      f"aux off {mean(off):.3f}")
PY
