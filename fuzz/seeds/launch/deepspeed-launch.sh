#!/bin/bash
# Emitted by pentamesh 0.1.0 for deepspeed.
# cost stack profile: deepspeed, deepspeed's own profile (no --stack given)
# command: pentamesh estimate --model mixtral-8x7b --cluster h100-sxm --train pretrain-4k --gpus 64 --layout 'dp=8 tp=8 ep=8 ep_placement=folded zero=1' --emit deepspeed --out emit/deepspeed
# model mixtral-8x7b on 64 x H100 SXM 80GB (8 nodes x 8), seq 4096, 4194304 tokens/step
# layout: dp=8 tp=8 pp=1 cp=1 ep=8 zero=1 mbs=1 recompute=none schedule=1f1b cp_kind=ring ep_placement=folded sp=on
# predicted: memory 19.88 GB of 78.00 GB per GPU, step 21.405 s, 195951 tokens/s, MFU 25.7%
# One process per GPU (sbatch.sh sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
# MEGATRON_DEEPSPEED: a Megatron-DeepSpeed checkout; DATA_PATH / TOKENIZER: your data.
set -euo pipefail
CHECKPOINT_DIR=${CHECKPOINT_DIR:-checkpoints}
MODEL_ARGS=(
  --num-layers 32
  --hidden-size 4096
  --ffn-hidden-size 14336
  --num-attention-heads 32
  --num-key-value-heads 8
  --kv-channels 128
  --seq-length 4096
  --max-position-embeddings 32768
  --use-rotary-position-embeddings
  --rotary-position-embeddings-theta 1000000
  --normalization rmsnorm
  --layernorm-epsilon 1e-05
  --use-flash-attn-v2
  --swiglu
  --untie-embeddings-and-output-weights
  --disable-bias-linear
  --attention-dropout 0.0
  --hidden-dropout 0.0
  --tokenizer-type NullTokenizer
  --vocab-size 32000
  --make-vocab-size-divisible-by 1
  --num-experts 8
  --topk 2
  --expert-interval 1
  --mlp-type standard
  --disable-moe-token-dropping
  --disable-moe-top2-2nd-expert-sampling
  --create-moe-param-group
)
PARALLEL_ARGS=(
  --tensor-model-parallel-size 8
  --sequence-parallel
  --pipeline-model-parallel-size 1
  --no-pipeline-parallel
  --moe-expert-parallel-size 8
  --enable-expert-tensor-parallelism
  --zero-stage 1
  --micro-batch-size 1
  --global-batch-size 1024
  --bf16
  --deepspeed
  --deepspeed_config ds_config.json
)
TRAINING_ARGS=(
  --train-iters 238419
  --lr 3e-4
  --min-lr 3e-5
  --lr-decay-style cosine
  --lr-warmup-iters 2000
  --weight-decay 0.1
  --clip-grad 1.0
  --adam-beta1 0.9
  --adam-beta2 0.95
  --init-method-std 0.02
  --log-interval 10
  --save-interval 1000
  --eval-interval 1000
  --eval-iters 0
  --save "${CHECKPOINT_DIR}"
  --load "${CHECKPOINT_DIR}"
)
${PYTHON:-python} "${MEGATRON_DEEPSPEED:-.}/pretrain_gpt.py" "${MODEL_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${TRAINING_ARGS[@]}" --data-path "${DATA_PATH:-data}" "$@"
