#!/usr/bin/env bash
# Installs, builds and runs every test: the release build, then the ASan+UBSan build, then a
# bounded fuzz run of the TOML loader. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/setup.sh
bash scripts/pyenv.sh  # transformers (PyPI) for the Hugging Face export tests
# The engines' packages (torch 2.x, DeepSpeed, torchtitan, megatron-core) for the `engines` tests:
# cached under ~/.cache; a first install (~5 min) runs in the background while the build does, and
# the test waits for it (the script holds a lock while it installs).
bash scripts/engines_env.sh > "${TMPDIR:-/tmp}/pentamesh-engines-env.log" 2>&1 &
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "== release build"
bash scripts/build.sh release
echo "== release tests"
ctest --test-dir build --output-on-failure -j "${PM_JOBS:-2}"
echo "== asan+ubsan build"
bash scripts/build.sh asan
echo "== asan+ubsan tests"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "${PM_JOBS:-2}" -LE slow
if [ -f fuzz/run.sh ]; then
  echo "== bounded fuzzing"
  bash fuzz/run.sh
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
