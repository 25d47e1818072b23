#!/usr/bin/env bash
# The sbatch.sh that `pentamesh plan --emit E` writes, submitted unedited to a real Slurm cluster
# on this machine (scripts/slurm_cluster.sh: 2 nodes x 2 GPUs, GRES with no device behind it), for
# E = megatron, torchtitan and deepspeed: Llama 3 8B on 4 GPUs at tp = 2. The engines themselves need GPUs,
# so recording stand-ins for their launchers come first on the job's PATH (sbatch passes the
# submitting environment on): `python` (Megatron-LM's and Megatron-DeepSpeed's pretrain_gpt.py run
# as `${PYTHON:-python}`) and `torchrun` (torchtitan), each writing one line per process with the
# node Slurm placed it on, the rendezvous variables and its arguments (a file per process). The stand-in torchrun also
# hands its arguments to torch's own torchrun parser (torch.distributed.run.get_args_parser), so a
# flag torchrun does not know fails the test. What each engine needs, checked per engine:
#   megatron, deepspeed  one process per GPU: 2 on each node, RANK 0-3 each once, LOCAL_RANK 0 and
#                        1 on each node, WORLD_SIZE 4, MASTER_ADDR the first node, MASTER_PORT set;
#                        the plan's tp (2, by --allow) reaches the engine's flags and tp x pp x cp
#                        divides the world.
#   torchtitan           exactly one torchrun per node, --nnodes=2 --nproc_per_node=2, node ranks
#                        0 and 1, rendezvous endpoint first-node:port, `-m torchtitan.train`.
# Usage: slurm_emit.sh REPO PENTAMESH_BINARY [JOB_TIMEOUT_S]   (each job's limit; default 60 s)
# Exit 77 (ctest SKIP_RETURN_CODE) with "slurm_emit: SKIP: <reason>" when Slurm cannot run here.
set -u
repo=$1 binary=$2 job_timeout_s=${3:-60}
readonly kSkip=77
fail() {
  echo "FAIL: $*"
  [[ -n "${cluster:-}" && -d "${cluster:-}/log" ]] && grep -h "error" "$cluster"/log/slurm*.log | tail -n 20
  exit 1
}
skip() { echo "slurm_emit: SKIP: $*"; exit "$kSkip"; }
[[ "$job_timeout_s" =~ ^[1-9][0-9]*$ ]] || { echo "slurm_emit: JOB_TIMEOUT_S must be a positive integer (got '$job_timeout_s')" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || skip "the Slurm daemons need root (uid is $(id -u))"

work=$(mktemp -d /tmp/pm-slurm-emit.XXXXXX)
cluster=$work/cluster
cleanup() {
  bash "$repo/scripts/slurm_cluster.sh" stop --dir "$cluster" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The cluster the plan is for: H100 nodes of 2 GPUs, 2 nodes.
sed -e 's/^gpus_per_node = .*/gpus_per_node = 2/' -e 's/^nodes = .*/nodes = 2/' \
  "$repo/configs/presets/clusters/h100-sxm.toml" >"$work/cluster.toml"
for engine in megatron torchtitan deepspeed; do
  "$binary" plan --model llama3-8b --train pretrain-4k --cluster "$work/cluster.toml" --gpus 4 \
    --top 1 --allow "tp=2" --emit "$engine" --out "$work/$engine" >"$work/$engine.plan" 2>&1 ||
    { cat "$work/$engine.plan"; fail "plan --emit $engine exited with status $?"; }
done

out=$(bash "$repo/scripts/slurm_cluster.sh" start --dir "$cluster" --nodes 2 --gpus-per-node 2 2>&1)
rc=$?
echo "$out"
[[ $rc -eq $kSkip ]] && skip "the cluster did not start (above)"
[[ $rc -eq 0 ]] || fail "slurm_cluster.sh start exited with status $rc"
export SLURM_CONF=$cluster/slurm.conf

# The stand-ins. Each line: node, then the variables, then the arguments (one per field, tabs).
mkdir -p "$work/bin"
cat >"$work/bin/python" <<'STANDIN'
#!/usr/bin/env bash
# Stand-in for the engine's python: records where and how this process was started.
# One file per process: processes on both nodes run at once, and lines appended to one shared
# file interleave.
{
  printf 'node=%s\tRANK=%s\tLOCAL_RANK=%s\tWORLD_SIZE=%s\tMASTER_ADDR=%s\tMASTER_PORT=%s' \
    "${SLURMD_NODENAME:-}" "${RANK:-}" "${LOCAL_RANK:-}" "${WORLD_SIZE:-}" "${MASTER_ADDR:-}" "${MASTER_PORT:-}"
  printf '\t%s' "$@"
  printf '\n'
} >"$(mktemp "$PM_RECORD_DIR/python.XXXXXX")"
STANDIN
cat >"$work/bin/torchrun" <<'STANDIN'
#!/usr/bin/env bash
# Stand-in for torchrun: records where it was started and its arguments, then has torch's own
# torchrun parser read them (exit 2 from the parser on a flag torchrun does not know).
{
  printf 'node=%s\tMASTER_ADDR=%s\tMASTER_PORT=%s' "${SLURMD_NODENAME:-}" "${MASTER_ADDR:-}" "${MASTER_PORT:-}"
  printf '\t%s' "$@"
  printf '\n'
} >"$(mktemp "$PM_RECORD_DIR/torchrun.XXXXXX")"
exec /usr/bin/python3 -c '
import sys
from torch.distributed.run import get_args_parser
args = get_args_parser().parse_args(sys.argv[1:])
assert args.module and args.training_script == "torchtitan.train", args
' "$@"
STANDIN
chmod +x "$work/bin/python" "$work/bin/torchrun"
command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c "import torch.distributed.run" 2>/dev/null ||
  skip "/usr/bin/python3 cannot import torch.distributed.run (torchrun's parser)"

# A field of a record line: the value of NAME=... (variables) or the argument after FLAG.
field() { tr '\t' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n 1; }
arg_after() { tr '\t' '\n' <<<"$1" | awk -v f="$2" 'take { print; exit } $0 == f { take = 1 }'; }

submit() {  # engine: runs its sbatch.sh, unedited, from its directory; waits for it to end
  local engine=$1 job rc
  cp -r "$work/$engine" "$work/job-$engine"
  mkdir -p "$work/$engine.rec.d"
  job=$(cd "$work/job-$engine" && PATH="$work/bin:$PATH" PM_RECORD_DIR="$work/$engine.rec.d" \
    timeout --kill-after=5 "$job_timeout_s" sbatch --parsable --wait -o "$work/$engine.out" sbatch.sh)
  rc=$?
  [[ $rc -eq 0 ]] || { cat "$work/$engine.out" 2>/dev/null; fail "$engine: sbatch sbatch.sh exited with status $rc (job '$job')"; }
  cat /dev/null "$work/$engine.rec.d"/* >"$work/$engine.rec" 2>/dev/null
  echo "$engine: job $job ended; its launcher processes:"
  sed 's/^/  /' "$work/$engine.rec" | cut -c 1-160
}

check_per_gpu() {  # engine: one process per GPU with torch.distributed's env:// variables
  local engine=$1 rec=$work/$1.rec line n node rank local world addr port tp pp cp
  n=$(wc -l <"$rec")
  [[ $n -eq 4 ]] || fail "$engine: $n processes started, expected 4 (2 nodes x 2 GPUs)"
  local ranks="" placement=""
  while IFS= read -r line; do
    node=$(field "$line" node) rank=$(field "$line" RANK) local=$(field "$line" LOCAL_RANK)
    world=$(field "$line" WORLD_SIZE) addr=$(field "$line" MASTER_ADDR) port=$(field "$line" MASTER_PORT)
    [[ "$world" == 4 ]] || fail "$engine: WORLD_SIZE '$world' on $node, expected 4"
    [[ "$addr" == pm1 ]] || fail "$engine: MASTER_ADDR '$addr', expected the first node pm1"
    [[ "$port" =~ ^[0-9]+$ ]] || fail "$engine: MASTER_PORT '$port' is not a port"
    ranks+="$rank " placement+="$node:$local "
    tp=$(arg_after "$line" --tensor-model-parallel-size) pp=$(arg_after "$line" --pipeline-model-parallel-size)
    cp=$(arg_after "$line" --context-parallel-size)
    [[ -z "$cp" ]] && cp=$(arg_after "$line" --ds-sequence-parallel-size)
    [[ "$tp" == 2 ]] || fail "$engine: --tensor-model-parallel-size '$tp', the plan's is 2"
    [[ $((4 % (${tp:-1} * ${pp:-1} * ${cp:-1}))) -eq 0 ]] ||
      fail "$engine: tp $tp x pp $pp x cp $cp does not divide the world of 4"
  done <"$rec"
  [[ "$(tr ' ' '\n' <<<"$ranks" | sort -n | tr '\n' ' ')" == " 0 1 2 3 " ]] ||
    fail "$engine: RANKs '$ranks', expected 0-3 each once"
  [[ "$(tr ' ' '\n' <<<"$placement" | sort | tr '\n' ' ')" == " pm1:0 pm1:1 pm2:0 pm2:1 " ]] ||
    fail "$engine: node:LOCAL_RANK '$placement', expected pm1:0 pm1:1 pm2:0 pm2:1"
  echo "$engine: PASS: 4 processes, 2 per node, RANK 0-3, LOCAL_RANK 0-1 per node, WORLD_SIZE 4, MASTER_ADDR pm1, tp 2"
}

check_torchtitan() {
  local rec=$work/torchtitan.rec line n nodes="" node_ranks=""
  n=$(wc -l <"$rec")
  [[ $n -eq 2 ]] || fail "torchtitan: $n torchrun processes started, expected one per node (2)"
  while IFS= read -r line; do
    nodes+="$(field "$line" node) "
    node_ranks+="$(tr '\t' '\n' <<<"$line" | sed -n 's/^--node_rank=//p') "
    tr '\t' '\n' <<<"$line" | grep -qx -- "--nnodes=2" || fail "torchtitan: no --nnodes=2 in: $line"
    tr '\t' '\n' <<<"$line" | grep -qx -- "--nproc_per_node=2" || fail "torchtitan: no --nproc-per-node=2 in: $line"
    tr '\t' '\n' <<<"$line" | grep -qx -- "--rdzv_endpoint=pm1:[0-9]*" ||
      fail "torchtitan: the rendezvous endpoint is not pm1:PORT in: $line"
  done <"$rec"
  [[ "$(tr ' ' '\n' <<<"$nodes" | sort | tr '\n' ' ')" == " pm1 pm2 " ]] || fail "torchtitan: torchrun on nodes '$nodes'"
  [[ "$(tr ' ' '\n' <<<"$node_ranks" | sort -n | tr '\n' ' ')" == " 0 1 " ]] ||
    fail "torchtitan: node ranks '$node_ranks', expected 0 and 1"
  echo "torchtitan: PASS: one torchrun per node (pm1, pm2), node ranks 0 and 1, --nnodes=2 --nproc_per_node=2, rendezvous at pm1, arguments accepted by torchrun's parser"
}

for engine in megatron torchtitan deepspeed; do submit "$engine"; done
check_per_gpu megatron
check_torchtitan
check_per_gpu deepspeed
echo "PASS: every emitted sbatch.sh starts the processes its engine needs at 2 nodes x 2 GPUs"
