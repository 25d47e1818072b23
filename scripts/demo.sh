#!/usr/bin/env bash
# The main job: installs, builds, plans a 72B mixture-of-experts model at 128K context on 1,024
# H100s against the FSDP baseline (HTML report), writes its Megatron-LM launch files, then trains
# the tiny models of configs/ on the finance corpus shipped in data/ on 1, 4 and 8 MPI ranks and
# prints each run's held-out loss against the unigram baseline and its measured step time against
# the prediction (the summary also goes to out/demo/summary.txt).
# PENTAMESH=/path/to/pentamesh skips the install and the build and uses that binary.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PENTAMESH:-}" ]; then
  bash scripts/setup.sh
  bash scripts/build.sh release pentamesh
  PENTAMESH=./build/src/cli/pentamesh
fi
pm=$PENTAMESH
out=out/demo
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca btl self,vader)

echo "== plan: MeridianFin-72B (72B MoE, 128 experts, top-4) at 128K context on 1,024 x H100"
$pm plan --model meridianfin-72b --cluster h100-sxm --gpus 1024 --train meridian-128k \
  --top 3 --distinct --baseline fsdp --html "$out/plan.html"
echo "(report: $out/plan.html)"

echo "== launch: the best layout Megatron-LM can run, as its launch files"
$pm plan --model meridianfin-72b --cluster h100-sxm --gpus 1024 --train meridian-128k \
  --top 1 --emit megatron --out "$out/launch" > /dev/null
ls "$out/launch"

# train NAME NP CONFIG LAYOUT STEPS [ARGS...]: one training run, its output in $out/NAME.log.
train() {
  local name=$1 np=$2 config=$3 layout=$4 steps=$5
  shift 5
  local cmd=("$pm" train --config "$config" --layout "$layout" --set run.steps="$steps"
             --set optim.warmup_steps=5 --set run.eval_every="$steps" --set run.log_every=10
             --set run.out_dir="\"$out/runs/$name\"" "$@")
  [ "$np" -gt 1 ] && cmd=("${mpi[@]}" -np "$np" "${cmd[@]}")
  echo "== $name: $np rank(s), layout $layout, $steps steps"
  "${cmd[@]}" | tee "$out/$name.log"
}

train 1-rank 1 configs/tiny-dense.toml "mbs=8" 60
train dp2-tp2-zero3 4 configs/tiny-dense.toml "mbs=4 dp=2 tp=2 zero=3 sp=on" 40
mkdir -p "$out/runs/pp2-dp2-tp2"
train pp2-dp2-tp2 8 configs/tiny-dense.toml "mbs=2 dp=2 pp=2 tp=2 schedule=zb zero=1 sp=off" 40 \
  --trace "$out/runs/pp2-dp2-tp2/trace.json"
$pm report --run "$out/runs/pp2-dp2-tp2" --trace "$out/runs/pp2-dp2-tp2/trace.json" \
  --html "$out/runs/pp2-dp2-tp2/report.html"
train moe-pp2-dp2-cp2-ep2 8 configs/tiny-moe.toml \
  "mbs=2 pp=2 dp=2 cp=2 ep=2 ep_placement=folded schedule=interleaved:2" 40
$pm report --run "$out/runs/moe-pp2-dp2-cp2-ep2" --html "$out/runs/moe-pp2-dp2-cp2-ep2/report.html"

{
  echo "demo summary: each run's held-out loss after its last step against the unigram baseline"
  echo "(the corpus's token frequencies alone), and its step time measured against the prediction"
  for log in 1-rank dp2-tp2-zero3 pp2-dp2-tp2 moe-pp2-dp2-cp2-ep2; do
    echo "$log:"
    grep -E '^(done|step time):' "$out/$log.log" | sed 's/^/  /'
  done
} | tee "$out/summary.txt"
if grep -q "NOT below the unigram baseline" "$out/summary.txt"; then
  echo "demo: a run did not learn past the unigram baseline (above)" >&2
  exit 1
fi
