#!/usr/bin/env bash
# Installs, builds and runs the main job: plans the seeds' case study (MeridianFin-72B, 128K context,
# 1,024 H100s) and, once the engine exists, a short 5D training run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release pentamesh
./build/src/cli/pentamesh presets
