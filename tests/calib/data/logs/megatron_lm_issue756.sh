#!/bin/bash
# Written for pentamesh's tests: the run of Megatron-LM issue #756 (README.md), 2 nodes x 8 H100.
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \
  --group-query-attention --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights \
  --normalization RMSNorm --position-embedding-type rope --disable-bias-linear \
  --vocab-size 32000 --seq-length 2048 --max-position-embeddings 32768 \
  --micro-batch-size 1 --global-batch-size 128 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --sequence-parallel \
  --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 \
  --use-distributed-optimizer --bf16
