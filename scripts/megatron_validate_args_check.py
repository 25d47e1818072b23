#!/usr/bin/env python3
"""Checks tests/launch/megatron_validate_args.py against Megatron-LM's own validate_args: for
each argv below (a valid base plus flags that break one rule, or none), the table must name
exactly that rule and Megatron-LM's function must fail at that rule's line (or pass). Run it when
moving the pin; it needs a checkout of the pinned commit (the PyPI wheel lacks
megatron/training), imported as scripts/megatron_parser_table.py does. The device queries of
validate_args answer as an H100 (compute capability 9.0, arch 9); its printing is silenced.

Usage (in the venv of scripts/engines_env.sh):
  mkdir CHECKOUT && git -C MIRROR archive COMMIT megatron | tar -x -C CHECKOUT
  python scripts/megatron_validate_args_check.py CHECKOUT
"""
import argparse
import os
import shlex
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "launch"))
import megatron_parser_table  # noqa: E402
import megatron_validate_args as V  # noqa: E402

BASE = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
        "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 64 "
        "--mock-data --train-iters 10 --lr 3e-4 --min-lr 3e-5")
ONE = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
CASES = [  # (flags over BASE, world size, environment, the rule broken or None)
    ("--bf16", 8, {}, None),
    ("--bf16 --tensor-model-parallel-size 2 --sequence-parallel", 8, ONE, None),
    ("--bf16 --fp16", 8, {}, "fp16-xor-bf16"),
    ("--bf16 --seq-length 4098 --context-parallel-size 2", 8, ONE, "seq-divisible-2cp"),
    ("--bf16 --tensor-model-parallel-size 2 --use-megatron-fsdp --use-distributed-optimizer "
     "--ckpt-format fsdp_dtensor", 8, ONE, "mfsdp-cuda-connections"),
    ("--bf16 --use-megatron-fsdp --use-distributed-optimizer", 8, {}, "mfsdp-ckpt-format"),
    ("--bf16 --num-experts 6 --expert-model-parallel-size 4", 8, {}, "ep-divides-experts"),
    ("--bf16 --expert-model-parallel-size 2", 8, {}, "ep-needs-experts"),
    ("--bf16 --pipeline-model-parallel-size 3", 6, {}, "pp-layers-divisible"),
    ("--bf16 --pipeline-model-parallel-size 4 --account-for-loss-in-pipeline-split", 8, {},
     "pp-layers-divisible"),
    ("--bf16 --recompute-granularity selective --recompute-method uniform", 8, {},
     "selective-no-method"),
    ("--bf16 --tensor-model-parallel-size 3", 8, ONE, "world-divisible"),
    ("--bf16 --tensor-model-parallel-size 2", 8, {}, "tp-cp-cuda-connections"),
    ("--bf16 --overlap-param-gather --overlap-grad-reduce", 8, {}, "param-gather-needs-sharding"),
    ("--bf16 --overlap-param-gather --use-distributed-optimizer", 8, {},
     "param-gather-needs-grad-reduce"),
    ("--bf16 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
     "--num-layers-per-virtual-pipeline-stage 4", 8, {}, "vpp-one-form"),
    ("--bf16 --pipeline-model-parallel-size 3 --num-layers-per-virtual-pipeline-stage 3 "
     "--num-layers 30", 6, {}, "vpp-layers-per-stage"),
    ("--bf16 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
     "--no-overlap-p2p-communication", 8, {}, "vpp-pp-gt-2-without-overlap"),
    ("--bf16 --use-torch-fsdp2 --ckpt-format torch_dist --untie-embeddings-and-output-weights "
     "--no-gradient-accumulation-fusion --pipeline-model-parallel-size 2", 8, {}, "fsdp2-no-pp"),
    ("--bf16 --fp8-param-gather --fp8-format hybrid", 8, {}, "fp8-param-gather-sharded"),
    ("--bf16 --seq-length 16384", 8, {}, "positions-cover-seq"),
    ("--bf16 --min-lr 1e-3", 8, {}, "min-lr-le-lr"),
    ("--bf16 --save /x", 8, {}, "save-interval"),
    ("--bf16 --multi-latent-attention --group-query-attention --num-query-groups 8", 8, {},
     "mla-xor-gqa"),
    ("--bf16 --ckpt-format fsdp_dtensor", 8, {}, "fsdp-dtensor-needs-mfsdp"),
    ("--bf16 --data-path /x", 8, {}, "one-data-source"),
    ("--bf16 --tp-comm-overlap", 8, {}, "tp-overlap-needs-sp"),
    ("--bf16 --distribute-saved-activations --recompute-granularity full "
     "--recompute-method uniform", 8, {}, "distribute-saved-tp"),
    ("--bf16 --mtp-num-layers 1 --position-embedding-type learned_absolute", 8, {},
     "mtp-position"),
    ("--bf16 --lr-warmup-fraction 0.1 --lr-warmup-iters 5", 8, {}, "iters-warmup-one-form"),
    ("--bf16 --num-attention-heads 30 --kv-channels 128", 8, {}, None),
    ("--bf16 --num-attention-heads 30", 8, {}, "heads-divide-hidden"),
    ("--bf16 --position-embedding-type mrope", 8, {}, "mrope-section"),
    ("--bf16 --weight-decay-incr-style linear", 8, {}, "wd-schedule-range"),
    ("--bf16 --attention-backend local", 8, {}, "attn-local-needs-local-spec"),
    ("--bf16 --cp-comm-type a2a+p2p --context-parallel-size 2", 8, ONE, "cp-a2a-p2p-needs-hier"),
    ("--fp32-residual-connection", 8, {}, "fp32-residual-half"),
    ("--bf16 --optimizer-cpu-offload", 8, {}, "cpu-offload-precision-aware"),
    ("--bf16 --disable-gloo-process-groups --use-distributed-optimizer --ckpt-format torch", 8,
     {}, "no-gloo-dist-opt-dist-ckpt"),
]


def main():
    arguments = megatron_parser_table.import_arguments(sys.argv[1])
    import torch
    arguments.get_device_arch_version = lambda: 9
    torch.cuda.get_device_capability = lambda *a: (9, 0)
    for name in ("print_rank_0", "warn_rank_0", "_print_args"):
        setattr(arguments, name, lambda *a, **k: None)
    lines = {r[0]: r[1] for r in V.RULES}
    bad = 0
    for extra, world, env, rule in CASES:
        argv = shlex.split(BASE + " " + extra)
        parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
        given = {a.dest for a in parser._actions if set(a.option_strings) & set(argv)}
        args = parser.parse_args(argv)
        # The table's namespace: every dest at its default, the given ones as parsed.
        ns = types.SimpleNamespace(**{a.dest: getattr(a.default, "name", a.default)
                                      for a in parser._actions})
        for dest in given:
            setattr(ns, dest, getattr(getattr(args, dest), "name", getattr(args, dest)))
        V.derive(ns, world)
        ours = [b.split(" ")[0] for b in V.broken(ns, env, 9)]
        for k in ("CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO"):
            os.environ.pop(k, None)
        os.environ.update(env)
        args.rank, args.world_size = 0, world
        try:
            arguments.validate_args(args)
            theirs = None
        except BaseException as e:  # noqa: BLE001 - the line it failed at is the answer
            theirs = [f.lineno for f in traceback.extract_tb(e.__traceback__)
                      if f.filename.endswith("arguments.py")][-1]
        ok = ours == ([rule] if rule else []) and theirs == (lines[rule] if rule else None)
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {rule or '(valid)'}: table {ours}, "
              f"validate_args {'passes' if theirs is None else f'fails at line {theirs}'}")
    print(f"{len(CASES) - bad} of {len(CASES)} agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
