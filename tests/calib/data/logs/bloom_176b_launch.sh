#!/bin/bash
# Written for pentamesh's tests: BigScience's tr11-176B-ml run (README.md), 48 nodes x 8 A100 80GB.
deepspeed pretrain_gpt.py \
  --tensor-model-parallel-size 4 --pipeline-model-parallel-size 12 \
  --num-layers 70 --hidden-size 14336 --num-attention-heads 112 \
  --seq-length 2048 --max-position-embeddings 2048 --vocab-size 250880 \
  --micro-batch-size 2 --global-batch-size 2048 --bf16 --checkpoint-activations \
  --deepspeed --deepspeed_config bloom_176b_ds_config.json --zero-stage 0 \
  --deepspeed-activation-checkpointing
