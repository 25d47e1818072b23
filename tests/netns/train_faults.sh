#!/usr/bin/env bash
# `pentamesh train` (tiny-moe, 8 ranks: pp=2 x dp=2 x cp=2 x ep=2 folded, so stage 0 runs on host
# A and stage 1 on host B and every pp transfer crosses the link) across the two network-namespace
# hosts of scripts/netns_hosts.sh, under a network fault:
#   slow-link   the veth limited by tbf to 8 Gbit/s = 1 GB/s, the inter-node bandwidth the engine's
#               cost model assumes for a host (train::HostCluster): the run must complete, and its
#               measured step time is printed next to the cost model's predicted one.
#   partition   the link set down once step 3 is logged: the job must fail with the engine's named
#               communication time-out (PENTAMESH_COMM_TIMEOUT_S=10) and exit on its own within
#               the limit plus abort time, never hang; scripts/relaunch.sh then reruns it on the
#               healed link with --resume auto, and the resumed run's losses equal an uninterrupted
#               run's bitwise (both across the same two hosts).
# Usage: train_faults.sh slow-link|partition REPO PENTAMESH_BINARY     Exit 77: no namespaces.
set -u
mode=$1 repo=$2 binary=$3
# The partitioned attempts time out after 10 s; the other runs get 120 s (under ASan rank 0 alone
# trains the tokenizer for longer than 10 s while the others wait in a broadcast).
readonly kCutTimeoutS=10
export PENTAMESH_COMM_TIMEOUT_S=120
readonly kLayout="pp=2 dp=2 cp=2 ep=2 ep_placement=folded mbs=2 schedule=1f1b"
readonly kAbortSlackS=20  # the abort's way across a dead link: TCP gives up after 4 retries
fail() { echo "FAIL: $*"; exit 1; }

# The train command line for run directory $1 (the dataset is built by rank 0 on first use).
train_cmd() {
  local dir=$1; shift
  echo "$PM_NETNS_MPIRUN -x PENTAMESH_COMM_TIMEOUT_S $binary train" \
    "--config $repo/configs/tiny-moe.toml --layout '$kLayout' --set model.vocab=512" \
    "--set 'data.dataset=\"$work/data\"' --set 'data.corpus=\"$work/corpus.txt\"'" \
    "--set optim.warmup_steps=1 --set run.eval_every=0 --set run.log_every=1" \
    "--set 'run.out_dir=\"$dir\"' --set 'ckpt.dir=\"$dir/ckpt\"' --set ckpt.interval=2 $*"
}

# Inside host A (run by netns_hosts.sh): one step of the scenario.
inside() {
  local step=$1
  case "$step" in
    train) eval "timeout --kill-after=5 120 $(train_cmd "$work/$2" --set run.steps="$3")" ;;
    attempt)  # one relaunch attempt: heal the link (a requeue lands on a working network), resume
      ip -n "$PM_NETNS_B" link set "$PM_NETNS_LINK_B" up
      export PENTAMESH_COMM_TIMEOUT_S=$kCutTimeoutS
      eval "timeout --kill-after=5 120 $(train_cmd "$work/cut" --set run.steps=6 --resume auto)"
      local rc=$?
      [ "$rc" -ne 0 ] && date +%s.%N > "$work/failed_at"
      return "$rc" ;;
    partition)
      (until grep -q '"step":3,' "$work/cut/metrics.jsonl" 2>/dev/null; do sleep 0.1; done
       ip -n "$PM_NETNS_B" link set "$PM_NETNS_LINK_B" down
       date +%s.%N > "$work/cut_at"
       echo "train_faults: link $PM_NETNS_LINK_B set down after step 3") &
      local watcher=$!
      bash "$repo/scripts/relaunch.sh" --retries 1 -- bash "$0" inside "$repo" "$binary" "$work" attempt
      local rc=$?
      kill "$watcher" 2>/dev/null
      return "$rc" ;;
  esac
}
if [ "$mode" = inside ]; then
  work=$4; shift 4
  inside "$@"
  exit $?
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 400000 < <(xz -dc "$repo/data/finance_corpus.txt.xz") >"$work/corpus.txt"
hosts() { timeout --kill-after=5 "$1" bash "$repo/scripts/netns_hosts.sh" "${@:2}"; }
me=$(realpath "$0")
case "$mode" in
  slow-link)
    out=$(hosts 150 --rate 8gbit -- bash "$me" inside "$repo" "$binary" "$work" train slow 6 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -eq 77 ] && exit 77
    [ "$rc" -eq 0 ] || fail "the rate-limited run exited with status $rc"
    grep -q "link limited to 8gbit by tbf" <<<"$out" || fail "no tbf on the link"
    grep -q "^netns_hosts: sch_netem" <<<"$out" || fail "netem availability not reported"
    /usr/bin/python3 - "$work/slow/metrics.jsonl" <<'PY' || exit 1
import json, statistics, sys
steps = [json.loads(line) for line in open(sys.argv[1])]
assert len(steps) == 6, f"{len(steps)} steps in metrics.jsonl, expected 6"
# Step 1 includes warm-up (first touches, connection set-up); the rest are the steady state.
measured = statistics.median(s["step_time_s"] for s in steps[1:])
pred = steps[-1]["predicted"]["time_s"]
print(f"slow link (tbf 8 Gbit/s = the model's 1 GB/s inter-node): step time measured "
      f"{measured:.3f} s (median of steps 2-6), predicted {pred['step']:.3f} s "
      f"(compute {pred['compute']:.3f}, bubble {pred['bubble']:.3f}, pp {pred['pp']:.4f}, "
      f"cp {pred['cp']:.4f}, ep {pred['ep']:.4f}, dp {pred['dp']:.4f})")
comm = {g: statistics.median(s["comm_time_s"][g] for s in steps[1:]) for g in ("pp", "cp", "ep", "dp")}
print("measured comm time per step (median, s): " + ", ".join(f"{g} {t:.4f}" for g, t in comm.items()))
PY
    echo "PASS: the rate-limited 2-host run completed" ;;
  partition)
    out=$(hosts 150 -- bash "$me" inside "$repo" "$binary" "$work" train straight 6 2>&1)
    rc=$?
    [ "$rc" -eq 77 ] && { echo "$out"; exit 77; }
    [ "$rc" -eq 0 ] || { echo "$out"; fail "the uninterrupted 2-host run exited with status $rc"; }
    echo "uninterrupted run: $(grep -c '^step ' <<<"$out") steps"
    out=$(hosts 300 -- bash "$me" inside "$repo" "$binary" "$work" partition 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -eq 0 ] || fail "the relaunched run exited with status $rc"
    [ -f "$work/cut_at" ] || fail "the link was never cut"
    [ -f "$work/failed_at" ] || fail "the first attempt did not fail after the cut"
    grep -q "pentamesh comm: timeout: world rank .* did not complete .* within $kCutTimeoutS s" <<<"$out" ||
      fail "no named communication time-out"
    grep -q "resumed from .*step-00000002" <<<"$out" || fail "the relaunch did not resume from step 2"
    # The rank prints the time-out when it fires; Open MPI forwards that line only as mpirun
    # exits (MPI_Abort stops the rank's output path first), so the exit is what is timed here.
    exited=$(awk '{ t[NR] = $1 } END { printf "%.1f", t[2] - t[1] }' "$work/cut_at" "$work/failed_at")
    echo "the first attempt failed with the named time-out and exited ${exited} s after the cut" \
      "(limit: ${kCutTimeoutS} s time-out + ${kAbortSlackS} s for the abort to give up on host B)"
    awk -v t="$exited" -v max=$((kCutTimeoutS + kAbortSlackS)) 'BEGIN { exit !(t <= max) }' ||
      fail "the failure took ${exited} s"
    /usr/bin/python3 - "$work/straight/metrics.jsonl" "$work/cut/metrics.jsonl" <<'PY' || exit 1
import json, sys
def losses(path):
    return {s["step"]: s["loss"] for s in map(json.loads, open(path))}  # the last line per step
want, got = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(got) == sorted(want) == list(range(1, 7)), (sorted(want), sorted(got))
for step in want:
    assert got[step] == want[step], f"step {step}: loss {got[step]!r} != {want[step]!r}"
print("losses of steps 1-6 after the partition and relaunch equal the uninterrupted run bitwise: "
      + " ".join(f"{want[s]:.6f}" for s in sorted(want)))
PY
    echo "PASS: partition -> named time-out -> relaunch resumed bitwise" ;;
  *) echo "train_faults: unknown mode '$mode' (slow-link or partition)" >&2; exit 2 ;;
esac
