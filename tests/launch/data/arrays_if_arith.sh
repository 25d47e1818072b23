#!/bin/bash
# Written for pentamesh's tests (not an engine's file): the idioms of Megatron-LM's published
# examples. A self-appending array, `if` blocks choosing flags, `$((...))` arithmetic, torchrun's
# world size from variables. 2 nodes x 4 GPUs, tp 2, pp 2 -> dp 2; global batch 8 x 4 = 32.
set -euo pipefail
GPUS_PER_NODE=4
NUM_NODES=2
WORLD_SIZE=$((GPUS_PER_NODE * NUM_NODES))
TP=2
PP=$((WORLD_SIZE / TP / 2))
USE_DIST_OPT=${USE_DIST_OPT:-1}
ARGS=(--num-layers 8 --hidden-size 512 --num-attention-heads 8 --ffn-hidden-size 1024
      --vocab-size 4096 --seq-length 2048)
ARGS=("${ARGS[@]}" --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP")
if [ "$USE_DIST_OPT" = 1 ]; then
  ARGS=("${ARGS[@]}" --use-distributed-optimizer)
else
  ARGS=("${ARGS[@]}" --recompute-granularity full --recompute-method uniform)
fi
if [[ $WORLD_SIZE -gt 4 ]]; then
  ARGS+=(--sequence-parallel)
fi
ARGS+=(--micro-batch-size 2 --global-batch-size $((WORLD_SIZE * 4)) --bf16)
torchrun --nproc_per_node "$GPUS_PER_NODE" --nnodes "$NUM_NODES" pretrain_gpt.py "${ARGS[@]}"
