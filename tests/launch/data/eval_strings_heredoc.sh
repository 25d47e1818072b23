#!/bin/bash
# Written for pentamesh's tests (not an engine's file): the idioms of Megatron-DeepSpeed's
# published examples. Flags kept in strings, extended in `if` blocks, expanded unquoted and run
# through `eval`; the ds_config written by a heredoc with `$((...))` in it. 8 GPUs, tp 2 -> dp 4;
# batch 64 = micro 2 x gas 8 x dp 4.
NUM_GPUS=8
MP_SIZE=2
GLOBAL_BATCH=64
MICRO=2
ZERO_STAGE=1
megatron_options=" \
    --num-layers 6 \
    --hidden-size 768 \
    --num-attention-heads 12 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --vocab-size 50304 \
    --tensor-model-parallel-size ${MP_SIZE} \
    --micro-batch-size ${MICRO} \
    --global-batch-size ${GLOBAL_BATCH}"
if [[ $ZERO_STAGE -gt 0 ]]; then
  megatron_options="${megatron_options} --zero-stage ${ZERO_STAGE}"
fi
config_json="ds_config_gbs${GLOBAL_BATCH}_zero${ZERO_STAGE}.json"
cat <<EOF > ${config_json}
{
  "train_batch_size": ${GLOBAL_BATCH},
  "train_micro_batch_size_per_gpu": ${MICRO},
  "gradient_accumulation_steps": $(( GLOBAL_BATCH / (MICRO * NUM_GPUS / MP_SIZE) )),
  "zero_optimization": {"stage": ${ZERO_STAGE}},
  "bf16": {"enabled": true}
}
EOF
deepspeed_options="--deepspeed --deepspeed_config ${config_json} --no-pipeline-parallel"
run_cmd="deepspeed --num_gpus ${NUM_GPUS} pretrain_gpt.py ${megatron_options} ${deepspeed_options} &> train.log"
echo ${run_cmd}
eval ${run_cmd}
