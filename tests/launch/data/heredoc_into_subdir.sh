#!/bin/bash
# Written for pentamesh's tests (not an engine's file): the idioms of Megatron-DeepSpeed's
# examples_deepspeed/pretrain_llama2_distributed.sh. `set -e`; the ds_config is a heredoc into a
# directory of the working directory the script never makes (it holds the user's data and
# tokenizer); no gradient_accumulation_steps, so the data-parallel degree comes from torchrun's
# world (1 node x 4): tp 2 -> dp 2, batch 16 = micro 2 x dp 2 x 4 steps; a SentencePiece
# tokenizer whose vocabulary is in that (absent) model file.
set -e
BASE_PATH=./run
DS_CONFIG=${BASE_PATH}/deepspeed.json
cat <<EOT > $DS_CONFIG
{
  "train_batch_size": 16,
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 1},
  "bf16": {"enabled": true}
}
EOT
ds_args=" --deepspeed --deepspeed_config=$DS_CONFIG --zero-stage=1"
torchrun --nproc_per_node 4 --nnodes 1 --node_rank 0 pretrain_gpt.py \
  --tensor-model-parallel-size 2 --num-layers 4 --hidden-size 512 --num-attention-heads 8 \
  --num-key-value-heads 4 --ffn-hidden-size 1376 --seq-length 1024 \
  --max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 16 --bf16 --swiglu \
  --tokenizer-type GPTSentencePieceTokenizer --tokenizer-model ${BASE_PATH}/tokenizer.model \
  $ds_args
