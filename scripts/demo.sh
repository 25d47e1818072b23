#!/usr/bin/env bash
# The main job: installs, builds, plans the seeds' case study (MeridianFin-72B, 128K context,
# 1,024 H100s) against the FSDP baseline, writes the HTML report, then runs a short training job
# on the real finance corpus and prints its losses and measured-vs-predicted memory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release pentamesh
pm=./build/src/cli/pentamesh
mkdir -p out

echo "== planning the case study: MeridianFin-72B, 128K context, 1,024 x H100"
$pm plan --model meridianfin-72b --cluster h100-sxm --gpus 1024 --train meridian-128k \
  --top 5 --distinct --baseline fsdp --html out/plan.html
echo "(report: out/plan.html)"

echo "== Llama 3 405B on 16,384 x H100: Meta's published layout, costed"
$pm estimate --model llama3-405b --cluster h100-sxm --gpus 16384 --train llama3-405b-8k \
  --layout "dp=128 tp=8 pp=16 zero=1 schedule=1f1b recompute=selective" || true

echo "== a short training run on the finance corpus (tiny dense model)"
$pm train --config configs/tiny-dense.toml --set run.steps=60 --set optim.warmup_steps=10 --set run.eval_every=30 \
  --set run.out_dir=out/runs/demo

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --mca btl self,vader)

echo "== 4 MPI ranks: data parallel x tensor + sequence parallel, ZeRO-3"
"${mpi[@]}" -np 4 $pm train --config configs/tiny-dense.toml \
  --layout "mbs=4 dp=2 tp=2 zero=3 sp=on" --set run.steps=20 --set optim.warmup_steps=5 \
  --set run.eval_every=20 --set run.out_dir=out/runs/demo-dp2-tp2-zero3

echo "== 8 MPI ranks: pipeline (zero-bubble) x data x tensor parallel, with a Chrome trace"
mkdir -p out/runs/demo-pp2-dp2-tp2  # --trace writes into it; the run creates it only later
"${mpi[@]}" -np 8 $pm train --config configs/tiny-dense.toml \
  --layout "mbs=2 dp=2 pp=2 tp=2 schedule=zb zero=1 sp=off" --set run.steps=20 \
  --set optim.warmup_steps=5 --set run.eval_every=20 --set run.out_dir=out/runs/demo-pp2-dp2-tp2 \
  --trace out/runs/demo-pp2-dp2-tp2/trace.json
$pm report --run out/runs/demo-pp2-dp2-tp2 --trace out/runs/demo-pp2-dp2-tp2/trace.json \
  --html out/runs/demo-pp2-dp2-tp2/report.html

echo "== 8 MPI ranks: the MoE model with pipeline (interleaved) x data x context (ring) x expert parallel"
"${mpi[@]}" -np 8 $pm train --config configs/tiny-moe.toml \
  --layout "mbs=2 pp=2 dp=2 cp=2 ep=2 ep_placement=folded schedule=interleaved:2" \
  --set run.steps=20 --set optim.warmup_steps=5 --set run.eval_every=20 \
  --set run.out_dir=out/runs/demo-moe-pp-cp-ep
$pm report --run out/runs/demo-moe-pp-cp-ep --html out/runs/demo-moe-pp-cp-ep/report.html
