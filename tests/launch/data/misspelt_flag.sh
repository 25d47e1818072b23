#!/bin/bash
# Written for pentamesh's tests (not an engine's file): a misspelt flag added by a self-appending
# array in an `if` block. Megatron's parser would refuse it; a reader that skipped it would import
# tp = 1.
TP=8
ARGS=(--num-layers 4 --hidden-size 256 --num-attention-heads 8 --ffn-hidden-size 512
      --vocab-size 1024 --seq-length 1024 --micro-batch-size 1 --global-batch-size 16)
if [ "$TP" -gt 1 ]; then
  ARGS=("${ARGS[@]}"
        --tensor-model-paralel-size "$TP")
fi
torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py "${ARGS[@]}"
