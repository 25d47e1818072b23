#!/usr/bin/env bash
# Installs the Debian 12 packages pentamesh builds and tests with. Idempotent; needs root (or sudo).
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git clang clang-format libclang-rt-14-dev jq
  xz-utils liblzma-dev dpkg-dev file
  libfmt-dev nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libopenmpi-dev openmpi-bin slurm-wlm munge
  libsentencepiece-dev sentencepiece
  python3 python3-torch python3-numpy python3-venv
  chromium libjs-vega
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
