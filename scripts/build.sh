#!/usr/bin/env bash
# Configures and builds one flavour of pentamesh. Usage: scripts/build.sh [release|asan] [targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
flavour="${1:-release}"; shift || true
case "$flavour" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=Debug -DPM_SANITIZE=ON -DPM_BUILD_BENCH=OFF) ;;
  *) echo "build.sh: flavour '$flavour' is not release or asan" >&2; exit 2 ;;
esac
# ccache, when installed, lets several work trees (and rebuilds) share compiled objects.
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}" CCACHE_NOHASHDIR=1
  flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
jobs="${PM_JOBS:-$(nproc)}"
if [ $# -gt 0 ]; then
  cmake --build "$dir" -j "$jobs" --target "$@"
else
  cmake --build "$dir" -j "$jobs"
fi
