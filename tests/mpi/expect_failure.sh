#!/usr/bin/env bash
# Runs a command that must fail (an abort on a communication timeout, a failed test on one
# rank): it must exit non-zero, without hanging, within
# MAX_S seconds and print EXPECTED (a fixed string) on stdout or stderr.
# Usage: expect_failure.sh MAX_S EXPECTED command...
set -u
max_s="$1"; expected="$2"; shift 2
start_ms=$(( $(date +%s%N) / 1000000 ))
output=$(timeout --kill-after=5 $((max_s * 3)) "$@" 2>&1)
rc=$?
elapsed_ms=$(( $(date +%s%N) / 1000000 - start_ms ))
echo "$output"
echo "expect_failure: exit code $rc after ${elapsed_ms} ms"
if [ "$rc" -eq 0 ]; then echo "expect_failure: FAIL: exit code 0, expected non-zero"; exit 1; fi
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "expect_failure: FAIL: the job hung"; exit 1; fi
if [ "$elapsed_ms" -gt $((max_s * 1000)) ]; then
  echo "expect_failure: FAIL: took ${elapsed_ms} ms, more than ${max_s} s"; exit 1
fi
if ! grep -qF -- "$expected" <<<"$output"; then
  echo "expect_failure: FAIL: output lacks: $expected"; exit 1
fi
echo "expect_failure: OK"
