#!/usr/bin/env bash
# Under mpirun, a missing dataset is built once, by rank 0: `mpirun -np 2 pentamesh train` on a
# fresh data.dataset must train one tokenizer (one "training a ... tokenizer" line, printed before
# the non-lead ranks are silenced, so a second builder would show up) and then train normally.
# Usage: dataset_rank0.sh PENTAMESH_BIN REPO_DIR MPIEXEC...
set -euo pipefail
bin=$1 repo=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head -c 400000 < <(xz -dc "$repo/data/finance_corpus.txt.xz") > "$dir/corpus.txt"
out=$("$@" -np 2 "$bin" train --config "$repo/configs/tiny-dense.toml" --layout "dp=2 mbs=8" \
  --set model.vocab=512 --set "data.dataset=\"$dir/data\"" --set "data.corpus=\"$dir/corpus.txt\"" \
  --set run.steps=2 --set optim.warmup_steps=1 --set run.eval_every=0 --set "run.out_dir=\"$dir/run\"" 2>&1) || {
  echo "$out"; echo "FAIL: mpirun pentamesh train exited non-zero"; exit 1; }
echo "$out"
n=$(grep -c "training a 512-token BPE tokenizer" <<< "$out" || true)
[ "$n" = 1 ] || { echo "FAIL: the tokenizer was trained $n times, expected once (by rank 0)"; exit 1; }
[ -f "$dir/data/manifest.json" ] || { echo "FAIL: no dataset manifest"; exit 1; }
grep -q '"step":2' "$dir/run/metrics.jsonl" || { echo "FAIL: no step 2 in metrics.jsonl"; exit 1; }
echo "PASS: one tokenizer, 2 steps"
