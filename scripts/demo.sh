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
$pm train --config configs/tiny-dense.toml --set run.steps=60 --set run.eval_every=30 \
  --set run.out_dir=out/runs/demo
