#!/usr/bin/env bash
# (a) An 8-rank layout across two network-namespace hosts over TCP equals the single process:
# runs the mpirun equivalence test binary (tests/mpi/cp_ep_train_test.cc: losses and final weights
# to 1e-5, bytes per group equal to the cost model's) under scripts/netns_hosts.sh, 4 ranks a host,
# and checks that ranks 0-3 ran on host A and 4-7 on host B (two network namespaces) and that the
# traffic crossed the veth link.
# Usage: equivalence.sh REPO TEST_BINARY MODEL LAYOUT      Exit 77: namespaces not allowed here.
set -u
repo=$1 binary=$2
export PM_TEST_MODEL=$3 PM_TEST_LAYOUT=$4
export PENTAMESH_COMM_TIMEOUT_S=${PENTAMESH_COMM_TIMEOUT_S:-60}
out=$(timeout --kill-after=5 120 bash "$repo/scripts/netns_hosts.sh" --np-per-host 4 -- sh -c \
  '$PM_NETNS_MPIRUN -x PM_TEST_MODEL -x PM_TEST_LAYOUT -x PENTAMESH_COMM_TIMEOUT_S \
   $PM_NETNS_WHERE "$0"' "$binary" 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 77 ] && exit 77
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "the 2-host run exited with status $rc"
# Every test of the binary passed (it holds more than one: the equivalence and the routed rows).
grep -Eq "PASSED.*[0-9]+ tests?\." <<<"$out" || fail "no passing GoogleTest summary"
grep -q "FAILED" <<<"$out" && fail "a GoogleTest test failed"
host_a=$(sed -n 's/^netns_hosts: hosts \(pmA[0-9]*\) .*/\1/p' <<<"$out")
host_b=${host_a/pmA/pmB}
for rank in 0 1 2 3 4 5 6 7; do
  want=$host_a; [ "$rank" -ge 4 ] && want=$host_b
  grep -q "^rank $rank on host $want (netns net:\[" <<<"$out" || fail "rank $rank did not run on $want"
done
inodes=$(grep -o "^rank [0-7] on host pm[AB][0-9]* (netns net:\[[0-9]*\])" <<<"$out" |
         sed 's/.*net:\[\([0-9]*\)\].*/\1/' | sort -u | wc -l)
[ "$inodes" -eq 2 ] || fail "ranks ran in $inodes network namespaces, expected 2"
crossed=$(sed -n 's/^netns_hosts: the link carried \([0-9]*\) bytes.*/\1/p' <<<"$out")
[ "${crossed:-0}" -gt 100000 ] || fail "only ${crossed:-0} bytes crossed the link"
echo "PASS: 8 ranks on 2 namespace hosts ($host_a: 0-3, $host_b: 4-7) over TCP equal one process"
