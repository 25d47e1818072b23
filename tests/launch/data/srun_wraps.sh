#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
# Written for pentamesh's tests (not an engine's file): srun with its own flags (container,
# MPI, task count) wraps `bash -c "$CMD"`; the command is a string of flags expanded unquoted.
# Neither srun's flags nor bash's are Megatron's. 8 GPUs, tp 4 -> dp 2.
MODEL="--num-layers 4 --hidden-size 256 --num-attention-heads 8 --ffn-hidden-size 512"
MODEL="$MODEL --vocab-size 1024 --seq-length 512"
PARALLEL="--tensor-model-parallel-size 4 --micro-batch-size 1 --global-batch-size 8"
CMD="cd /nonexistent-megatron; python pretrain_gpt.py ${MODEL} ${PARALLEL}"
srun --mpi=pmix -l --container-image nvcr.io/nvidia/pytorch:25.01-py3 \
    --container-mounts /data:/data --ntasks-per-node 4 \
    bash -x -c "${CMD}" 2>&1 | tee train.log
