#!/usr/bin/env bash
# The seeds' failure injections, one command (docs/engine.md, "Failure injections"). Runs each
# through the pentamesh CLI (mpirun -np 2 for the pipeline), prints one line per injection and
# writes a JSON array of {name, command, outcome, numbers{...}}. The numbers come from what the
# engine writes (metrics.jsonl's summary.json: train/metrics.h RunOutcome) and from the CLI's
# messages and JSON; this script only runs commands and collects them.
#   microbatches  pp=2 1f1b on tiny-dense, M = 1..4 micro-batches: measured vs simulated bubble
#   memory_cap    run.memory_limit_bytes below the prediction (refused before allocating, naming
#                 the category), then at the prediction (stopped at run time, naming the tag)
#   divergence    tiny-dense with the learning rate x100: spikes, skipped steps, end state
#   no_aux_loss   tiny-moe with optim.aux_loss_coef 0 against 0.01: expert imbalance over time
#   tp_over_node  estimate tp=4 on 2-GPU nodes: refused naming the rule; the TP term across nodes
#                 next to tp=4 inside 4-GPU nodes
# Usage: scripts/inject.sh [build_dir=build] [--out outcomes.json]
# Environment: PENTAMESH_DATASET (default out/data/finance-4096 under the repository, built from
# data/finance_corpus.txt.xz on first use), MPIRUN (default mpirun).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=build
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "inject.sh: --out needs a file" >&2; exit 2; }; out=$2; shift 2 ;;
    -*) echo "inject.sh: unknown option $1 (usage: inject.sh [build_dir] [--out FILE])" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
case "$build" in /*) ;; *) build="$root/$build" ;; esac
bin="$build/src/cli/pentamesh"
[ -x "$bin" ] || { echo "inject.sh: missing $bin (bash scripts/build.sh release)" >&2; exit 2; }
command -v jq >/dev/null || { echo "inject.sh: jq is required (apt-get install jq)" >&2; exit 2; }
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null || { echo "inject.sh: $mpirun not found" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
dataset=${PENTAMESH_DATASET:-$root/out/data/finance-4096}
corpus="$root/data/finance_corpus.txt.xz"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results="$tmp/results.jsonl"
: >"$results"

data_sets=(--set "data.dataset=\"$dataset\"" --set "data.corpus=\"$corpus\"" --set run.eval_every=0
           --set run.eval_batches=1 --set run.log_every=1000)
# run NAME CMD...: runs CMD with its output in $tmp/NAME.{out,err}; sets $rc.
run() {
  local name=$1; shift
  set +e
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  set -e
}
# emit NAME COMMAND OUTCOME NUMBERS_JSON: one result.
emit() {
  jq -cn --arg name "$1" --arg command "$2" --arg outcome "$3" --argjson numbers "$4" \
    '{name: $name, command: $command, outcome: $outcome, numbers: $numbers}' >>"$results"
  printf '%-13s %s\n' "$1" "$3"
}
error_line() { grep -m1 'pentamesh: error:' "$1" | sed 's/^pentamesh: error: //' || true; }

# 1. Too few micro-batches: pp=2 1f1b, 12 sequences a step, M = 12 / mbs.
micro='[]'
for m in 1 2 3 4; do
  dir="$tmp/micro$m"
  run "micro$m" "$mpirun" --oversubscribe --mca btl self,vader -np 2 "$bin" train \
    --config "$root/configs/tiny-dense.toml" --layout "pp=2 schedule=1f1b mbs=$((12 / m))" \
    "${data_sets[@]}" --set train.global_batch_seqs=12 --set run.steps=4 \
    --set optim.warmup_steps=1 --set "run.out_dir=\"$dir\""
  [ "$rc" = 0 ] || { echo "microbatches: M=$m failed (exit $rc): $(tail -3 "$tmp/micro$m.err")" >&2; exit 1; }
  micro=$(jq -c --argjson m "$m" --slurpfile s "$dir/summary.json" \
    '. + [{M: $m, measured: $s[0].bubble.measured, simulated: $s[0].bubble.simulated,
           closed_form: (1 / ($m + 1))}]' <<<"$micro")
done
emit microbatches \
  "mpirun -np 2 pentamesh train --config configs/tiny-dense.toml --layout 'pp=2 schedule=1f1b mbs=12/M' --set train.global_batch_seqs=12 --set run.steps=4 (M = 1..4)" \
  "$(jq -r 'map("M=\(.M) bubble \(.measured*1000|round/1000) (simulated \(.simulated*1000|round/1000))") | join(", ")' <<<"$micro")" \
  "$(jq -c '{per_m: .}' <<<"$micro")"

# 2. Memory cap: below the prediction, then at it.
cap_cmd=(train --config "$root/configs/tiny-dense.toml" "${data_sets[@]}" --set run.steps=2
         --set optim.warmup_steps=1 --set "run.out_dir=\"$tmp/mem\"")
run mem_low "$bin" "${cap_cmd[@]}" --set run.memory_limit_bytes=20000000
low_rc=$rc
low_msg=$(error_line "$tmp/mem_low.err")
needs=$(grep -o 'the rank needs [0-9]*' <<<"$low_msg" | grep -o '[0-9]*$' || echo 0)
run mem_at "$bin" "${cap_cmd[@]}" --set run.memory_limit_bytes="$needs"
at_rc=$rc
at_msg=$(error_line "$tmp/mem_at.err")
emit memory_cap \
  "pentamesh train --config configs/tiny-dense.toml --set run.memory_limit_bytes=20000000 (then =the predicted need)" \
  "below the prediction: exit $low_rc, $low_msg; at the prediction ($needs bytes): exit $at_rc, $at_msg" \
  "$(jq -cn --argjson low "$low_rc" --argjson at "$at_rc" --argjson needs "$needs" \
      '{limit_low_bytes: 20000000, exit_low: $low, predicted_bytes: $needs, exit_at_prediction: $at}')"

# 3. Divergence: the learning rate x100 (3e-3 -> 0.3).
dir="$tmp/lr"
run lr "$bin" train --config "$root/configs/tiny-dense.toml" "${data_sets[@]}" --set optim.lr=0.3 \
  --set optim.min_lr=0.03 --set optim.warmup_steps=10 --set run.steps=24 --set run.spike_window=8 --set run.spike_factor=1.5 \
  --set "run.out_dir=\"$dir\""
emit divergence \
  "pentamesh train --config configs/tiny-dense.toml --set optim.lr=0.3 --set optim.warmup_steps=10 --set run.steps=24 --set run.spike_window=8 --set run.spike_factor=1.5" \
  "exit $rc; $(jq -r '"\(.steps) steps, \(.loss_spikes) loss spikes (steps \(.spike_steps)), \(.skipped_steps) skipped non-finite steps; loss \(.first_loss*1000|round/1000) -> max \(.max_loss*1000|round/1000) -> \(.last_loss*1000|round/1000)"' "$dir/summary.json")$( [ "$rc" = 0 ] || echo "; $(error_line "$tmp/lr.err")")" \
  "$(jq -c --argjson rc "$rc" '. + {exit_status: $rc}' "$dir/summary.json")"

# 4. No load-balancing loss: tiny-moe, dropless, aux 0.01 against 0.
moe='{}'
for coef in 0.01 0; do
  dir="$tmp/moe$coef"
  run "moe$coef" "$bin" train --config "$root/configs/tiny-moe.toml" "${data_sets[@]}" \
    --set train.global_batch_seqs=4 --set run.layout='"mbs=4 recompute=selective"' \
    --set run.steps=30 --set optim.warmup_steps=3 --set model.moe.capacity_factor=0 \
    --set optim.aux_loss_coef="$coef" --set "run.out_dir=\"$dir\""
  [ "$rc" = 0 ] || { echo "no_aux_loss: aux $coef failed (exit $rc): $(tail -3 "$tmp/moe$coef.err")" >&2; exit 1; }
  moe=$(jq -c --arg k "aux_$coef" --slurpfile s "$dir/summary.json" '. + {($k): $s[0].moe}' <<<"$moe")
done
emit no_aux_loss \
  "pentamesh train --config configs/tiny-moe.toml --set optim.aux_loss_coef=0 (and 0.01) --set model.moe.capacity_factor=0 --set train.global_batch_seqs=4 --set run.steps=30" \
  "$(jq -r '"expert_load_imbalance late: \(.aux_0.imbalance_late*1000|round/1000) without the loss vs \(.["aux_0.01"].imbalance_late*1000|round/1000) with it; max expert share \(.aux_0.max_expert_share_last*1000|round/1000) vs \(.["aux_0.01"].max_expert_share_last*1000|round/1000); collapse flagged on \(.aux_0.collapse_steps) vs \(.["aux_0.01"].collapse_steps) steps"' <<<"$moe")" \
  "$moe"

# 5. TP wider than a node: 8 GPUs in nodes of 2 (refused) and of 4 (allowed), one 25 GB/s NIC.
for gpn in 2 4; do
  printf '[cluster]\nname = "tiny-nodes-%s"\ngpu = "h100"\npeak_tflops = 989\nhbm_gb = 80\nhbm_gbps = 3350\ngpus_per_node = %s\nnodes = %s\nintra_node_gbps = 450\nnics_per_node = 1\ninter_node_gbps = 25\n' \
    "$gpn" "$gpn" $((8 / gpn)) >"$tmp/nodes$gpn.toml"
  run "tp$gpn" "$bin" estimate --model llama3-8b --train pretrain-4k --cluster "$tmp/nodes$gpn.toml" \
    --layout "tp=4 dp=2 zero=1" --json
  eval "tp${gpn}_rc=$rc"
done
emit tp_over_node \
  "pentamesh estimate --model llama3-8b --train pretrain-4k --cluster nodes2.toml (gpus_per_node=2) --layout 'tp=4 dp=2 zero=1' --json" \
  "exit $tp2_rc: $(error_line "$tmp/tp2.err"); tp term across nodes $(jq -r '.tp_across_nodes.time.tp' "$tmp/tp2.out") s/step vs $(jq -r '.time.tp' "$tmp/tp4.out") s inside 4-GPU nodes (exit $tp4_rc)" \
  "$(jq -cn --argjson rc "$tp2_rc" --slurpfile a "$tmp/tp2.out" --slurpfile b "$tmp/tp4.out" \
      '{exit_status: $rc, tp_s_across_nodes: $a[0].tp_across_nodes.time.tp,
        step_s_across_nodes: $a[0].tp_across_nodes.time.step, tp_s_inside_node: $b[0].time.tp,
        step_s_inside_node: $b[0].time.step}')"

if [ -n "$out" ]; then
  jq -s . "$results" >"$out"
  echo "wrote $out"
fi
