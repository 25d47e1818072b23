#!/usr/bin/env bash
# Creates (idempotently) the Python environment the engine-validator tests use: the engines' own
# packages from PyPI, pinned: DeepSpeed, torchtitan 0.2.x and megatron-core, with the PyTorch 2.x
# they need. PyPI's torch is a CUDA build; with its nvidia-* wheels it imports on these CPU-only
# machines (torch.cuda.is_available() is False), which is all the validators need.
# Cost, measured on the 2-core CI machine: about 5 minutes and 5.8 GB the first time (torch and
# its CUDA wheels are 4.5 GB of it); nothing afterwards (the stamp below matches).
# The venv lives outside the work tree so repeated CI runs on one machine reuse it:
#   ${PENTAMESH_ENGINES_ENV:-$HOME/.cache/pentamesh/engines-<pins hash>}
# Usage: bash scripts/engines_env.sh [--print-path]   (prints the venv's python with --print-path)
# Prints nothing but errors (and the path) when the environment is already complete.
set -euo pipefail
TORCH_PINS=(torch==2.15.0)
ENGINE_PINS=(deepspeed==0.19.8 torchtitan==0.2.2 megatron-core==0.16.1)
ALL="${TORCH_PINS[*]} ${ENGINE_PINS[*]}"
HASH=$(printf '%s' "$ALL" | sha256sum | cut -c1-10)
VENV="${PENTAMESH_ENGINES_ENV:-${HOME:-/root}/.cache/pentamesh/engines-$HASH}"
STAMP="$VENV/.pentamesh-pins"
CHECK='import torch, deepspeed, torchtitan, megatron.core'
print_path() { if [ "${1:-}" = "--print-path" ]; then echo "$VENV/bin/python"; fi; }
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$ALL" ] && [ -x "$VENV/bin/python" ]; then
  print_path "${1:-}"
  exit 0
fi
start=$(date +%s)
echo "engines_env: creating $VENV with $ALL" >&2
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9  # one installer at a time (CI and a developer may start it together)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$ALL" ]; then print_path "${1:-}"; exit 0; fi
rm -rf "$VENV"
/usr/bin/python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir)
"${PIP[@]}" "${TORCH_PINS[@]}" >&2
"${PIP[@]}" "${ENGINE_PINS[@]}" >&2
"$VENV/bin/python" -W ignore -c "$CHECK; print('engines_env: torch', torch.__version__, 'deepspeed', deepspeed.__version__)" 2>/dev/null | tail -1 >&2
echo "$ALL" > "$STAMP"
echo "engines_env: ready in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1) on disk" >&2
print_path "${1:-}"
