#!/usr/bin/env bash
# Bounded libFuzzer run of the TOML loader (fuzz/toml_fuzz.cc): configures build-fuzz with clang,
# builds only the fuzz target, seeds the corpus with every preset (alone and as one combined
# model+cluster+train file) and every input a fuzzer once crashed on (fuzz/seeds/toml: replayed
# first, so a fixed bug stays fixed), and fuzzes for FUZZ_SECONDS (default 60) from a fixed
# FUZZ_SEED (default 1: CI runs are reproducible; set another for exploration). Exits non-zero on
# a crash. Then the checkpoint readers (ckpt_fuzz, CKPT_FUZZ_SECONDS, default 30) and the CLI
# (cli_fuzz, CLI_FUZZ_SECONDS, default 90: estimate/plan/schedule/sweep/scale with random flags,
# fuzz/cli_properties.h) and import-config's readers with the emitters' escaping (launch_fuzz,
# LAUNCH_FUZZ_SECONDS, default 20), the calibration runs JSON reader (runs_fuzz,
# RUNS_FUZZ_SECONDS, default 20), the metrics.jsonl reader with the report page (metrics_fuzz,
# METRICS_FUZZ_SECONDS, default 20) and import --hf's config.json reader (hf_fuzz,
# HF_FUZZ_SECONDS, default 15), the stack profile reader (stack_fuzz, STACK_FUZZ_SECONDS, default
# 15), the host profile reader (host_fuzz, HOST_FUZZ_SECONDS, default 10), tune's measured-results
# reader (tune_fuzz, TUNE_FUZZ_SECONDS, default 10), `serve` (serve_fuzz, SERVE_FUZZ_SECONDS,
# default 20) and its request trace reader with the simulation of what it accepts
# (serve_trace_fuzz, SERVE_TRACE_FUZZ_SECONDS, default 5), bounded the same way. Longer
# exploratory runs: FUZZ_SECONDS=1200 CLI_FUZZ_SECONDS=1200 FUZZ_SEED=$RANDOM bash fuzz/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
launcher=()
if command -v ccache >/dev/null 2>&1; then  # as scripts/build.sh: shared objects across trees
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$PWD")}" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPM_FUZZ=ON -DPM_BUILD_TESTS=OFF -DPM_BUILD_BENCH=OFF -DPM_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j "${PM_JOBS:-2}" --target toml_fuzz ckpt_fuzz cli_fuzz launch_fuzz \
  runs_fuzz metrics_fuzz hf_fuzz stack_fuzz host_fuzz tune_fuzz serve_fuzz serve_trace_fuzz
corpus=build-fuzz/corpus
rm -rf "$corpus" && mkdir -p "$corpus"
for f in configs/presets/*/*.toml; do cp "$f" "$corpus/$(basename "$(dirname "$f")")-$(basename "$f")"; done
for m in configs/presets/models/*.toml; do
  cat "$m" configs/presets/clusters/h100-sxm.toml configs/presets/train/pretrain-4k.toml \
    > "$corpus/all-$(basename "$m")"
done
printf 'dp=8 tp=8 pp=4 cp=2 ep=8 zero=1 mbs=1 recompute=selective schedule=interleaved:2' \
  > "$corpus/layout.txt"
cp fuzz/seeds/toml/* "$corpus/"
mkdir -p build-fuzz/artifacts
# fuzz_target NAME SECONDS [FLAG...]: NAME_fuzz from a fresh corpus of fuzz/seeds/NAME (every input
# a fuzzer once crashed on stays there, replayed first), bounded, from the fixed seed.
fuzz_target() {
  local name=$1 secs=$2
  shift 2
  local corpus=build-fuzz/$name-corpus
  rm -rf "$corpus" && mkdir -p "$corpus"
  cp fuzz/seeds/"$name"/* "$corpus/"
  build-fuzz/fuzz/"$name"_fuzz "$corpus" -max_total_time="$secs" -seed="${FUZZ_SEED:-1}" \
    -rss_limit_mb=2048 -artifact_prefix=build-fuzz/artifacts/"$name"- -print_final_stats=1 "$@" \
    2>&1 | tail -n 12
}
build-fuzz/fuzz/toml_fuzz "$corpus" -max_total_time="$seconds" -seed="${FUZZ_SEED:-1}" -rss_limit_mb=2048 \
  -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 2>&1 | tail -n 25

# The checkpoint readers (fuzz/ckpt_fuzz.cc), seeded with a valid safetensors file and manifest.
fuzz_target ckpt "${CKPT_FUZZ_SECONDS:-30}"

# import-config's readers and the escaping of emitted files (fuzz/launch_fuzz.cc), seeded with
# the files --emit writes for each engine (the first byte picks the file name the importer sees).
fuzz_target launch "${LAUNCH_FUZZ_SECONDS:-20}"

# The calibration runs reader and the row writer's round trip (fuzz/runs_fuzz.cc), seeded with the
# first row of each source group of bench/data/published_runs.json and collected_runs.json.
fuzz_target runs "${RUNS_FUZZ_SECONDS:-20}"

# The metrics.jsonl reader and the report page (fuzz/metrics_fuzz.cc), seeded with the first
# lines `train` wrote for a dense run and for an MoE run with pp, cp and ep (predictions included).
fuzz_target metrics "${METRICS_FUZZ_SECONDS:-20}"

# import --hf's config.json reader (fuzz/hf_fuzz.cc), seeded with Llama, Mixtral and Qwen2-MoE
# configs as ExportHf writes them and every config a fuzzer once crashed on.
fuzz_target hf "${HF_FUZZ_SECONDS:-15}"

# The stack profile reader (fuzz/stack_fuzz.cc), seeded with the five stack presets and the
# profiles that once broke a property; fuzz/profile.dict holds TOML's nan/inf, quoted keys and the
# profiles' table names (also for host_fuzz).
fuzz_target stack "${STACK_FUZZ_SECONDS:-15}" -dict=fuzz/profile.dict

# The host profile reader and the engine's prediction on it (fuzz/host_fuzz.cc), seeded with a
# two-core profile with [[comm]] entries at 2 and 4 ranks as calibrate --host writes it.
fuzz_target host "${HOST_FUZZ_SECONDS:-10}" -dict=fuzz/profile.dict

# tune's reader of each run's metrics.jsonl (fuzz/tune_fuzz.cc), seeded with the metrics seeds
# behind a step-count byte and the files that once aborted it (fuzz/tune.dict: JSON's other types
# and extreme numbers).
fuzz_target tune "${TUNE_FUZZ_SECONDS:-10}" -dict=fuzz/tune.dict

# `serve` (fuzz/cli_fuzz.cc as serve_fuzz), seeded with fuzz/seeds/serve: a search, a Poisson
# simulation with SLOs, an MoE closed loop with offloaded experts, a capacity search with --emit.
fuzz_target serve "${SERVE_FUZZ_SECONDS:-20}" -dict=fuzz/cli.dict -max_len=1024 -timeout=300 \
  -close_fd_mask=2

# `serve --request-trace`'s reader and the simulation of the traces it accepts
# (fuzz/serve_trace_fuzz.cc), seeded with fuzz/seeds/serve_trace: the example trace of configs/,
# AIPerf's Mooncake example, a burst with a long prompt, an unsorted pair; fuzz/serve_trace.dict
# holds the format's keys and extreme numbers.
fuzz_target serve_trace "${SERVE_TRACE_FUZZ_SECONDS:-5}" -dict=fuzz/serve_trace.dict -timeout=60

# The CLI (fuzz/cli_fuzz.cc): argument lists, one per line, seeded with fuzz/seeds/cli (runs that
# work, and every input that once crashed, hung or printed a wrong answer). An input that runs
# longer than 300 s is a hang (a failure). The bound follows from the work a valid command may
# ask for: the largest allowed searches take ~5 s in a release build and the sanitizers with
# libFuzzer's coverage (and its leak-check re-run of a unit) cost 20-30x that on 2 loaded cores:
# the default `sweep` (35 searches up to 512 GPUs, 1.5 s in release) took 39-52 s, which the
# earlier 60 s bound reported as a hang. Output files are redirected to /dev/null by the harness.
fuzz_target cli "${CLI_FUZZ_SECONDS:-90}" -dict=fuzz/cli.dict -max_len=1024 -timeout=300 -close_fd_mask=2
