#!/usr/bin/env bash
# Creates (idempotently) the Python environment the Hugging Face interop tests use: a venv made
# from Debian's /usr/bin/python3 with --system-site-packages (so Debian's CPU PyTorch 1.13 stays
# visible; PyPI's torch wheels are multi-GB CUDA builds), plus transformers and safetensors from
# PyPI, pinned to versions that support torch 1.13.
# Usage: bash scripts/pyenv.sh [VENV_DIR]   (default: .venv/hf in the repo; PENTAMESH_PYENV too)
# Prints nothing but errors when the environment is already complete.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-${PENTAMESH_PYENV:-$PWD/.venv/hf}}"
PINS=(transformers==4.44.2 safetensors==0.4.3 tokenizers==0.19.1 sentencepiece==0.2.0)
STAMP="$VENV/.pentamesh-pins"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}" ] && "$VENV/bin/python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  exit 0
fi
echo "pyenv: creating $VENV with ${PINS[*]}"
/usr/bin/python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "${PINS[@]}"
"$VENV/bin/python" -c "import torch, transformers, safetensors; print('pyenv: torch', torch.__version__, 'transformers', transformers.__version__)"
echo "${PINS[*]}" > "$STAMP"
