#!/usr/bin/env python3
"""Checks pentamesh's emitted launch files with the engines' own code (run by CTest, label
`engines`, in the venv of scripts/engines_env.sh).

For the case study (MeridianFin-72B, 1,024 H100, 128K), Llama 3 405B (16,384 H100, 8K), Mixtral
8x7B (256 H100, 4K) and Llama 3 70B (512 H100, 4K), and a few fixed layouts that exercise more
flags, `pentamesh plan|estimate --emit ENGINE` writes the
files, then:
  megatron   train.sh is run by bash with PYTHON pointing at a recorder, so the argv is what bash
             passes to pretrain_gpt.py. Every flag must be in Megatron-LM's parser (the flag list
             extracted at core_v0.16.1, src/launch/data), with its arity, type and choices; the
             flags that are megatron-core dataclass fields build TransformerConfig and
             DistributedDataParallelConfig (their __post_init__ checks run); the degrees build
             megatron-core's RankGenerator for the dense and the expert meshes, and the batch
             megatron-core's ConstantNumMicroBatchesCalculator. Megatron-LM's validate_args
             (not in the wheel) runs as the rules of megatron_validate_args.py over the
             parser's namespace (tests/launch/data/megatron_parser_core_v0.16.1.tsv: defaults,
             then the argv), the environment train.sh sets and the header GPU's compute
             capability; hand-written argvs that break 2-3 rules must be named exactly.
  torchtitan torchtitan's ConfigManager parses job.toml; ParallelDims validates the degrees for the
             world size of sbatch.sh; the batch rules of torchtitan's trainer and the stage split
             of its pipeline builder (generate_llm_fqn_per_model_part) are checked.
  deepspeed  DeepSpeedConfig loads ds_config.json with the data-parallel world size (its batch
             assertion runs), and the ZeRO stage it reads must be < 2 with pipeline parallelism;
             launch.sh's argv must parse with Megatron-DeepSpeed's parser (the flag list extracted
             at commit f4157be, src/launch/data) and carry FlashAttention and, for MoE, the MoE
             parameter group with ZeRO <= 2.
Then each engine's own start-up path on CPU, on the meta device (no memory, no GPU):
  torchtitan the fake process group (torch's "fake" backend, what comm.mode = "fake_backend" and
             init_fake_mode start), the model of job.toml on the meta device (a registered flavor,
             else the one the header's note tells the user to register, read from the note), its
             pipeline split (pipeline_module_split over generate_llm_fqn_per_model_part, for every
             pp rank) and its parallelize function (parallelize_llama / parallelize_qwen3: TP, CP,
             activation checkpointing, FSDP) on each stage, over the emitted mesh with the data-
             parallel degrees shrunk to <= 2 (FSDP stays on or off as emitted). Asserted: the
             dtype torchtitan computes in (FSDP's param_dtype, else maybe_enable_amp's rule)
             equals the train preset's precision; the layers per pp rank and the parameters per
             rank (DTensor sizes over the non-data-parallel mesh dims) equal `estimate --json`'s
             "stages"; the model's total equals its "params.total". Trainer is not called (it
             calls cuda.set_device).
  megatron   initialize_model_parallel over the fake backend (tp, pp, vpp, ep, etp; cp folded into
             dp, since the local attention without Transformer Engine refuses cp and cp holds no
             parameter), then GPTModel from the TransformerConfig of the flags, for every pp rank
             and virtual stage (set_pipeline_model_parallel_rank; pre_process/post_process as
             pretrain_gpt.py), with get_gpt_decoder_block_spec(use_transformer_engine=False) on
             the meta device; sequence parallelism, grouped GEMM and the all-to-all dispatcher
             are off for the build (TE / grouped_gemm / CUDA streams), none shapes a parameter.
             Asserted: layers and parameters per pp rank equal "stages".
  deepspeed  for MoE, what DeepSpeed 0.19.8's ZeRO-1/2 optimizer asserts with MoE layers
             (stage_1_and_2.py _configure_moe_settings): reduce_scatter, and
             contiguous_gradients at stage 2.
Layouts an engine cannot run must be refused by pentamesh, naming the rule (for
tt-bf16-needs-fsdp the engine's own dtype rule is run on the refused layout too).
The run prints a table of pentamesh's parameter counts against the engines'.
Usage: validate_engines.py PENTAMESH_BINARY FLAGS_TSV WORKDIR
  (PM_ENGINES_ONLY=torchtitan,megatron limits the run to those engines, for development)
"""
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TORCHELASTIC_ERROR_FILE", "/dev/null")

PENTAMESH, FLAGS_TSV, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)
failures = []
passed = 0
RESULTS = []  # (engine, case, what, pentamesh, engine's count)


def check(cond, what):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(args, expect=0):
    p = subprocess.run([PENTAMESH] + args, capture_output=True, text=True)
    if p.returncode != expect:
        raise RuntimeError(f"pentamesh {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def world_of(directory):
    text = open(os.path.join(directory, "sbatch.sh")).read()
    nodes = int(re.search(r"#SBATCH --nodes=(\d+)", text).group(1))
    per = int(re.search(r"#SBATCH --gpus-per-node=(\d+)", text).group(1))
    return nodes * per


def header_ok(path):
    text = open(path).read()
    head = text if path.endswith(".json") else text[:2000]
    return ("Emitted by pentamesh" in head and "predicted: memory" in head
            and "tokens/s" in head and "command: pentamesh" in head)


# ---------------------------------------------------------------- Megatron-LM
def load_flags(path):
    flags = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        cols = line.rstrip("\n").split("\t")
        flags[cols[0]] = {"kind": cols[1], "type": cols[2], "nargs": cols[3],
                          "choices": cols[4].split("|") if cols[4] else []}
    return flags


MEGATRON_FLAGS = load_flags(FLAGS_TSV)
# Megatron-DeepSpeed's parser (pinned commit; scripts/megatron_deepspeed_flags.py), beside it.
DS_FLAGS_TSV = os.path.join(os.path.dirname(FLAGS_TSV), "megatron_deepspeed_flags_f4157be.tsv")
MEGATRON_DS_FLAGS = load_flags(DS_FLAGS_TSV)


RECORDED_ENV = ("CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO")


def recorded_argv(directory, script):
    rec = os.path.join(directory, "argv.json")
    recorder = os.path.join(directory, "record_argv.py")
    with open(recorder, "w") as f:
        f.write("import json, os, sys\njson.dump(sys.argv[1:], open(%r, 'w'))\n" % rec)
        # The environment the engine reads in its argument validation.
        f.write("json.dump({k: os.environ[k] for k in %r if k in os.environ}, open(%r, 'w'))\n"
                % (RECORDED_ENV, os.path.join(directory, "env.json")))
    env = dict(os.environ, PYTHON=f"{sys.executable} {recorder}", MEGATRON_LM=directory,
               MEGATRON_DEEPSPEED=directory)
    for k in RECORDED_ENV:  # what the script sets, not what this test's caller had
        env.pop(k, None)
    # PYTHON is word-split by bash in "${PYTHON:-python}": pass the recorder via a wrapper.
    wrapper = os.path.join(directory, "python-recorder")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(recorder)} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    env["PYTHON"] = wrapper
    subprocess.run(["bash", os.path.join(directory, script)], check=True, env=env, cwd=directory)
    argv = json.load(open(rec))
    return argv[1:]  # drop pretrain_gpt.py


def parse_megatron_argv(argv, where, table=None, engine="a Megatron-LM flag at core_v0.16.1"):
    """Megatron's parser rules from the extracted list: known flag, arity, type, choices."""
    table = MEGATRON_FLAGS if table is None else table
    args = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        check(flag.startswith("--"), f"{where}: '{flag}' is not a flag")
        spec = table.get(flag)
        check(spec is not None, f"{where}: {flag} is not {engine}")
        i += 1
        values = []
        while i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        if spec is None:
            continue
        if spec["kind"] == "switch":
            check(not values, f"{where}: {flag} is a switch but got {values}")
            args[flag] = True
            continue
        many = spec["nargs"] in ("+", "*")
        check(len(values) >= 1 and (many or len(values) == 1),
              f"{where}: {flag} takes {'values' if many else 'one value'}, got {values}")
        for v in values:
            if spec["type"] == "int":
                check(re.fullmatch(r"-?\d+", v) is not None, f"{where}: {flag} {v} is not an int")
            elif spec["type"] == "float":
                try:
                    float(v)
                    passed_float = True
                except ValueError:
                    passed_float = False
                check(passed_float, f"{where}: {flag} {v} is not a float")
            if spec["choices"]:
                check(v in spec["choices"], f"{where}: {flag} {v} not in {spec['choices']}")
        conv = {"int": int, "float": float}.get(spec["type"], str)
        vals = [conv(v) for v in values]
        args[flag] = vals if many else (vals[0] if vals else None)
    return args


# Megatron-LM's validate_args (megatron/training/arguments.py, not in the PyPI wheel) as rules,
# over the namespace its parser builds: every dest with its default, then the argv.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_validate_args as VARGS  # noqa: E402


def load_parser_table(path):
    import ast
    table = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        flag, dest, action, const, default = line.rstrip("\n").split("\t")
        table[flag] = (dest, action, ast.literal_eval(const), ast.literal_eval(default))
    return table


MEGATRON_PARSER = load_parser_table(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "megatron_parser_core_v0.16.1.tsv"))
# The GPU's major CUDA compute capability (validate_args reads the device's), by the name in the
# header's "on N x GPU" line; ROCm reports MI300X (gfx942) as 9.4.
COMPUTE_CAPABILITY = {"A100": 8, "H100": 9, "H200": 9, "H800": 9, "MI300X": 9, "B200": 10,
                      "GB200": 10}


def megatron_namespace(flags):
    """argparse's namespace for a parsed argv ({flag: value}, switches True): every dest at its
    default, then the flags given (store_true/store_false switches set their constant)."""
    import types
    ns = types.SimpleNamespace(**{dest: default for dest, _, _, default
                                  in MEGATRON_PARSER.values()})
    for flag, value in flags.items():
        dest, action, const, _ = MEGATRON_PARSER[flag]
        setattr(ns, dest, const if action in ("store_true", "store_false") else value)
    return ns


def validate_args_broken(flags, world, env, cc):
    """The validate_args rules (megatron_validate_args.py) the argv breaks."""
    a = megatron_namespace(flags)
    VARGS.derive(a, world)
    return VARGS.broken(a, env, cc)


def check_validate_args(where, directory, flags, world):
    header = open(os.path.join(directory, "train.sh")).read()[:2000]
    m = re.search(r" on \d+ x (\S+)", header)
    cc = COMPUTE_CAPABILITY.get(m.group(1)) if m else None
    check(cc is not None, f"{where}: the header names a GPU of known compute capability")
    env = json.load(open(os.path.join(directory, "env.json")))
    bad = validate_args_broken(flags, world, env, cc or 0)
    check(not bad, f"{where}: Megatron-LM validate_args ({VARGS.COMMIT[:7]}) rules broken: "
          f"{', '.join(bad)}")


def moe_layer_freq(value, layers):
    # Megatron's moe_freq_type: an int, or a Python list expression evaluated to a list.
    if re.fullmatch(r"\d+", value):
        return int(value)
    pattern = eval(value, {"__builtins__": {}})  # the same evaluation Megatron applies
    check(isinstance(pattern, list) and len(pattern) == layers,
          f"--moe-layer-freq {value} is not a list of {layers} layers")
    return pattern


def validate_megatron(directory, layout):
    import torch
    import torch.nn.functional as F
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.core.parallel_state import RankGenerator
    from megatron.core.transformer import TransformerConfig

    where = f"{directory}/train.sh"
    check(header_ok(os.path.join(directory, "train.sh")), f"{where}: header")
    a = parse_megatron_argv(recorded_argv(directory, "train.sh"), where)
    world = world_of(directory)
    check_validate_args(where, directory, a, world)
    tp = a.get("--tensor-model-parallel-size", 1)
    pp = a.get("--pipeline-model-parallel-size", 1)
    cp = a.get("--context-parallel-size", 1)
    ep = a.get("--expert-model-parallel-size", 1)
    etp = a.get("--expert-tensor-parallel-size", tp)
    check(world % (tp * pp * cp) == 0, f"{where}: world {world} % tp*pp*cp")
    dp = world // (tp * pp * cp)
    # Megatron's TransformerConfig from the flags whose dest is a field (core_transformer_config_
    # from_args copies those), plus the renames that function applies.
    # With --multi-latent-attention Megatron-LM builds MLATransformerConfig (its q/kv LoRA ranks and
    # head dims are fields of that class only).
    if "--multi-latent-attention" in a:
        from megatron.core.transformer.transformer_config import MLATransformerConfig
        TransformerConfig = MLATransformerConfig  # noqa: N806
    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    kw = {}
    for flag, value in a.items():
        dest = flag[2:].replace("-", "_")
        if dest in fields:
            kw[dest] = value
    layers = a["--num-layers"]
    kw["num_layers"] = layers
    if "--swiglu" in a:
        kw["gated_linear_unit"] = True
        kw["activation_func"] = F.silu
        kw["bias_activation_fusion"] = False
    if "--norm-epsilon" in a:
        kw["layernorm_epsilon"] = a["--norm-epsilon"]
    if "--num-experts" in a:
        kw["num_moe_experts"] = a["--num-experts"]
    if "--moe-layer-freq" in a:
        kw["moe_layer_freq"] = moe_layer_freq(a["--moe-layer-freq"], layers)
    if "--disable-bias-linear" in a:
        kw["add_bias_linear"] = False
    if "--num-virtual-stages-per-pipeline-rank" in a:
        kw["virtual_pipeline_model_parallel_size"] = a["--num-virtual-stages-per-pipeline-rank"]
        kw.pop("num_virtual_stages_per_pipeline_rank", None)
    if "--cp-comm-type" in a:
        kw["cp_comm_type"] = a["--cp-comm-type"][0]
    if "--bf16" in a:
        kw["bf16"] = True
        kw["params_dtype"] = torch.bfloat16
    if "--fp8-format" in a:
        kw["fp8"] = a["--fp8-format"]
    kw["pipeline_dtype"] = torch.bfloat16
    kw["num_query_groups"] = a.get("--num-query-groups", a["--num-attention-heads"])
    if "--recompute-modules" in a:  # nargs '+': Megatron's list, checked by TransformerConfig
        kw["recompute_modules"] = list(a["--recompute-modules"])
    else:
        kw.pop("recompute_modules", None)
    try:
        config = TransformerConfig(**kw)
        ok = True
    except Exception as e:  # noqa: BLE001 - the engine's own refusal is the test's finding
        ok, config = False, None
        print(f"{where}: TransformerConfig refused: {type(e).__name__}: {e}")
    check(ok, f"{where}: megatron-core TransformerConfig accepts the flags")
    ddp_fields = {f.name for f in dataclasses.fields(DistributedDataParallelConfig)}
    ddp_kw = {flag[2:].replace("-", "_"): v for flag, v in a.items()
              if flag[2:].replace("-", "_") in ddp_fields}
    try:
        DistributedDataParallelConfig(**ddp_kw)
        ok = True
    except Exception as e:  # noqa: BLE001
        ok = False
        print(f"{where}: DistributedDataParallelConfig refused: {e}")
    check(ok, f"{where}: megatron-core DistributedDataParallelConfig accepts the flags")
    # Degrees: the dense mesh and the expert mesh (as initialize_model_parallel builds them).
    try:
        RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order="tp-cp-ep-dp-pp").get_ranks("dp")
        check(world % (etp * ep * pp) == 0, f"{where}: world % (etp*ep*pp)")
        edp = world // (etp * ep * pp)
        RankGenerator(tp=etp, ep=ep, dp=edp, pp=pp, cp=1, order="tp-ep-dp-pp").get_ranks("ep")
        ok = True
    except Exception as e:  # noqa: BLE001
        ok = False
        print(f"{where}: RankGenerator refused: {e}")
    check(ok, f"{where}: megatron-core RankGenerator builds the dense and expert meshes")
    try:
        calc = ConstantNumMicroBatchesCalculator(a["--global-batch-size"], a["--micro-batch-size"],
                                                 dp, False, 0)
        micro = calc.get()
        ok = True
    except Exception as e:  # noqa: BLE001
        ok, micro = False, 0
        print(f"{where}: ConstantNumMicroBatchesCalculator refused: {e}")
    check(ok, f"{where}: megatron-core's micro-batch calculator accepts the batch")
    # The argument validation's VPP rule: interleaved needs pp > 2 unless P2P overlap is on
    # (on by default at core_v0.16.1), and pentamesh's interleaved runs pp micro-batches or more.
    if "--num-virtual-stages-per-pipeline-rank" in a:
        check(micro % pp == 0, f"{where}: micro-batches {micro} % pp {pp}")
    # The layout round trip: what the flags say is what was planned.
    check(tp == layout["tp"] and pp == layout["pp"] and cp == layout["cp"],
          f"{where}: degrees {tp} {pp} {cp} vs {layout}")
    if config is not None and "--multi-latent-attention" in a:
        # Megatron-Core builds MLA's core attention through Transformer Engine only (the local
        # DotProductAttention takes no k_channels): the CPU start-up below cannot build it.
        print(f"{where}: MLA: flags, validate_args and MLATransformerConfig checked; the model "
              "start-up needs Transformer Engine and is not built", flush=True)
    elif config is not None:
        startup_megatron(where, a, kw, layout, tp, pp, cp, ep, etp)


FAKE = {"world": 0}


def fake_process_group(world):
    """torch's fake backend (what torchtitan's init_fake_mode starts) as the default group of
    `world` ranks, this process rank 0; replaced when another world is needed."""
    import torch.distributed as tdist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if tdist.is_initialized() and FAKE["world"] == world:
        return
    if tdist.is_initialized():
        tdist.destroy_process_group()
    tdist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    FAKE["world"] = world


def startup_megatron(where, a, kw, layout, tp, pp, cp, ep, etp):
    """megatron-core's model construction for every pipeline rank: parallel_state's groups
    (initialize_model_parallel) over torch's fake backend, then GPTModel with pretrain_gpt.py's
    decoder block spec without Transformer Engine (get_gpt_decoder_block_spec, local modules) on
    the meta device, pre_process on the first rank, post_process on the last, one model chunk
    per virtual stage. Parameters count per rank, before the distributed optimizer shards
    anything."""
    import torch
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.transformer import TransformerConfig
    # Without Transformer Engine the local attention refuses context parallelism, so the ranks
    # are built with cp folded into the data-parallel degree (cp shards activations, no
    # parameter). The world: tp x pp x dp' with dp' the least degree that holds the expert mesh
    # (etp x ep divides tp x dp'); per-rank parameters do not depend on dp.
    cp = 1
    dp = 1
    while (tp * dp) % (etp * ep):
        dp += 1
    world = tp * pp * dp
    ps.destroy_model_parallel()
    fake_process_group(world)
    vpp = a.get("--num-virtual-stages-per-pipeline-rank")
    ps.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                                 virtual_pipeline_model_parallel_size=vpp,
                                 context_parallel_size=cp, expert_model_parallel_size=ep,
                                 expert_tensor_parallel_size=etp, create_gloo_process_groups=False)
    # Without Transformer Engine: torch's norms refuse sequence parallelism and the grouped GEMM
    # package is absent, so the model is built with sequence_parallel off and SequentialMLP
    # experts, and the all-to-all dispatcher (it opens a CUDA stream) is swapped for the
    # all-gather one; none of these holds or shapes a parameter.
    kw = dict(kw, use_cpu_initialization=True, perform_initialization=False,
              params_dtype=torch.bfloat16, sequence_parallel=False, moe_grouped_gemm=False,
              context_parallel_size=1)
    if "--num-experts" in a:
        kw["moe_token_dispatcher_type"] = "allgather"
        # The EP overlap needs the all-to-all or flex dispatcher (the first check above passed with
        # the flags as written); it schedules the step and holds no parameter.
        kw["overlap_moe_expert_parallel_comm"] = False
        kw["delay_wgrad_compute"] = False
    # moe_act recomputation needs the grouped GEMM (TransformerConfig raises without it; the
    # first check above passed with the flags as written); it holds no parameter.
    if kw.get("recompute_modules"):
        kw["recompute_modules"] = [m for m in kw["recompute_modules"] if m != "moe_act"]
    config = TransformerConfig(**kw)
    # Megatron-LM's vocab padding (megatron/training/tokenizer/tokenizer.py,
    # _vocab_size_with_padding): a multiple of make_vocab_size_divisible_by x tp.
    multiple = a.get("--make-vocab-size-divisible-by", 128) * tp
    vocab = -(-a["--vocab-size"] // multiple) * multiple
    est = layout["estimate"]
    for r in range(pp):
        ps.set_pipeline_model_parallel_rank(r)
        n = layers = 0
        for v in range(vpp or 1):
            # pretrain_gpt.py's layer spec without TE: the decoder block spec (moe_layer_freq),
            # the local modules.
            spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                              normalization=a.get("--normalization"),
                                              vp_stage=v if vpp else None, pp_rank=r)
            with torch.device("meta"):
                model = GPTModel(
                    config, spec, vocab_size=vocab,
                    max_sequence_length=a.get("--max-position-embeddings", a["--seq-length"]),
                    pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=v)
                    if vpp else r == 0,
                    post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=v)
                    if vpp else r == pp - 1,
                    share_embeddings_and_output_weights="--untie-embeddings-and-output-weights"
                    not in a,
                    position_embedding_type=a.get("--position-embedding-type", "learned_absolute"),
                    rotary_base=a.get("--rotary-base", 10000), vp_stage=v if vpp else None)
            layers += len(model.decoder.layers)
            n += sum(p.numel() for p in model.parameters())
        want = est["stages"][r]
        pm = want["params_dense"] + want["params_expert"]
        check(layers == want["layers"],
              f"{where}: megatron-core builds {layers} layers on pp rank {r}, pentamesh "
              f"{want['layers']}")
        check(n == round(pm), f"{where}: pp rank {r}: megatron-core {n} parameters per rank, "
              f"pentamesh {pm:.0f}")
        RESULTS.append(("megatron", layout["name"], f"pp{r}", pm, n))
    ps.set_pipeline_model_parallel_rank(None)


# ---------------------------------------------------------------- torchtitan
def validate_torchtitan(directory, layout):
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import ParallelDims

    path = os.path.join(directory, "job.toml")
    check(header_ok(path), f"{path}: header")
    cfg = ConfigManager().parse_args(["--job.config_file", path])
    p = cfg.parallelism
    world = world_of(directory)
    try:
        dims = ParallelDims(dp_replicate=p.data_parallel_replicate_degree,
                            dp_shard=p.data_parallel_shard_degree, cp=p.context_parallel_degree,
                            tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                            ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree,
                            world_size=world)
        ok = True
    except Exception as e:  # noqa: BLE001
        ok = False
        print(f"{path}: ParallelDims refused: {e}")
    check(ok, f"{path}: torchtitan ParallelDims accepts the degrees for world {world}")
    if not ok:
        return
    t = cfg.training
    dp = dims.dp_replicate * dims.dp_shard
    # torchtitan's trainer: global batch = local x dp x gradient accumulation steps.
    check(t.global_batch_size % (t.local_batch_size * dp) == 0,
          f"{path}: global {t.global_batch_size} % (local {t.local_batch_size} x dp {dp})")
    if p.pipeline_parallel_degree > 1:
        check(t.local_batch_size % p.pipeline_parallel_microbatch_size == 0,
              f"{path}: local batch % pipeline micro-batch")
        from torchtitan.distributed.pipeline_parallel import generate_llm_fqn_per_model_part
        layers = layout["layers"]
        per = p.pipeline_parallel_layers_per_stage
        stages = (layers + p.pipeline_parallel_first_stage_less_layers
                  + p.pipeline_parallel_last_stage_less_layers) // per
        parts = generate_llm_fqn_per_model_part(stages, layers,
                                                p.pipeline_parallel_first_stage_less_layers,
                                                p.pipeline_parallel_last_stage_less_layers)
        check(len(parts) == layout["pp"] * layout["v"],
              f"{path}: torchtitan splits into {len(parts)} stages, planned "
              f"{layout['pp'] * layout['v']}")
        n_layers = sum(1 for part in parts for fqn in part if fqn.startswith("layers."))
        check(n_layers == layers, f"{path}: stages hold {n_layers} layers, not {layers}")
    check(p.tensor_parallel_degree == layout["tp"] and p.context_parallel_degree == layout["cp"]
          and p.pipeline_parallel_degree == layout["pp"], f"{path}: degrees vs {layout}")
    startup_torchtitan(directory, cfg, dims, layout)


# torchtitan's start-up path on CPU: the fake process group (init_fake_mode, what
# comm.mode = "fake_backend" runs), the model on the meta device, its pipeline split
# (pipeline_module_split over generate_llm_fqn_per_model_part, for every pp rank) and its
# parallelize function (TP, CP, activation checkpointing, FSDP) on each stage. The mesh is the
# emitted one with the data-parallel degrees shrunk (to 2 where they are > 1, so FSDP stays on or
# off as emitted, and ep still divides dp_shard x cp): per-rank parameters do not depend on them.
def torchtitan_model(directory, cfg):
    """The model the job builds: a registered flavor, else the flavor the header's note tells the
    user to register (its shape read from the note, what a user would type in)."""
    import torch
    name, flavor = cfg.model.name, cfg.model.flavor
    if name == "llama3":
        from torchtitan.models.llama3 import llama3_args, Transformer
        if flavor in llama3_args:
            args = llama3_args[flavor]
            args.update_from_config(cfg)
            with torch.device("meta"):
                return Transformer(args), args
    note = open(os.path.join(directory, "job.toml")).read().split("[job]")[0]
    note = re.sub(r"\n# ?", " ", note)
    m = re.search(r"register it in\s+torchtitan/models/(\w+)/__init__.py with: layers (\d+), dim "
                  r"(\d+), heads (\d+), kv heads (\d+), head\s+dim (\d+), FFN (\d+), vocab (\d+), "
                  r"rope theta ([\d.e+]+)(.*)", note)
    check(m is not None and m.group(1) == name,
          f"{directory}/job.toml: a note to register {flavor}")
    if m is None:
        return None, None
    layers, dim, heads, kv, head_dim, ffn, vocab = (int(m.group(i)) for i in range(2, 9))
    rest = m.group(10)
    if name == "llama3":
        from torchtitan.models.llama3 import TransformerModelArgs, Transformer
        check(" qk_norm" not in rest, f"{directory}: llama3 has no qk_norm")
        # llama3's FFN width is derived (multiple_of, ffn_dim_multiplier): multiple_of = FFN.
        args = TransformerModelArgs(dim=dim, n_layers=layers, n_heads=heads, n_kv_heads=kv,
                                    vocab_size=vocab, multiple_of=ffn, ffn_dim_multiplier=None,
                                    rope_theta=float(m.group(9)))
        cls = Transformer
    else:
        from torchtitan.models.moe import MoEArgs
        from torchtitan.models.qwen3 import Qwen3ModelArgs, Qwen3Model as cls
        moe = re.search(r"MoEArgs\(([^)]*)\)", rest)
        moe_kw = eval("dict(" + moe.group(1) + ")", {"__builtins__": {}, "dict": dict,
                                                    "True": True, "False": False}) if moe else {}
        extra = re.search(r"Qwen3ModelArgs\(([^)]*)\)", rest)
        kw = eval("dict(" + extra.group(1) + ")", {"__builtins__": {}, "dict": dict,
                                                  "True": True, "False": False}) if extra else {}
        expert_ffn = re.search(r"experts top-\d+ of FFN (\d+)", rest)
        args = Qwen3ModelArgs(dim=dim, n_layers=layers, n_heads=heads, n_kv_heads=kv,
                              vocab_size=vocab, head_dim=head_dim, hidden_dim=ffn,
                              rope_theta=float(m.group(9)), moe_enabled=moe is not None,
                              moe_inter_dim=int(expert_ffn.group(1)) if expert_ffn else ffn,
                              moe_args=MoEArgs(**moe_kw), **kw)
    args.update_from_config(cfg)
    with torch.device("meta"):
        return cls(args), args


def tt_local_params(module, fsdp_dims):
    """Parameters on one rank before ZeRO: each DTensor's global size over the mesh dims that
    shard it, leaving out the data-parallel (FSDP) dims."""
    from torch.distributed.tensor import DTensor, Shard
    n = 0
    for prm in module.parameters():
        if isinstance(prm, DTensor):
            div = 1
            mesh = prm.device_mesh
            for dim, plc in enumerate(prm.placements):
                if isinstance(plc, Shard) and mesh.mesh_dim_names[dim] not in fsdp_dims:
                    div *= mesh.size(dim)
            n += prm.numel() // div
        else:
            n += prm.numel()
    return n


def torchtitan_dtype(dims, mixed_precision_param):
    """The dtype torchtitan 0.2.2 computes in: FSDP's param_dtype (mixed_precision_param) when it
    shards (parallelize_llama/qwen3 apply_fsdp), else maybe_enable_amp's autocast, which it turns
    off when tp or pp runs without FSDP (fp32)."""
    import torch
    from torchtitan.distributed.utils import maybe_enable_amp
    amp = maybe_enable_amp(dims, mixed_precision_param, "cpu")
    if dims.fsdp_enabled:
        return mixed_precision_param
    if isinstance(amp, torch.autocast):
        return str(amp.fast_dtype).replace("torch.", "")
    return "float32"


def startup_torchtitan(directory, cfg, dims_full, layout):
    import torch
    import torchtitan.distributed.parallel_dims as tt_pd
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed.pipeline_parallel import (generate_llm_fqn_per_model_part,
                                                         pipeline_module_split)
    path = os.path.join(directory, "job.toml")
    tt_pd.device_type = "cpu"  # the meshes on the fake backend (no CUDA)
    model, args = torchtitan_model(directory, cfg)
    if model is None:
        return
    if cfg.model.name == "llama3":
        from torchtitan.models.llama3 import parallelize_llama as parallelize
    else:
        from torchtitan.models.qwen3 import parallelize_qwen3 as parallelize
    est = layout["estimate"]
    total = sum(p.numel() for p in model.parameters())
    check(total == round(est["params"]["total"]),
          f"{path}: torchtitan's model has {total} parameters, pentamesh "
          f"{est['params']['total']:.0f}")
    RESULTS.append(("torchtitan", layout["name"], "total", est["params"]["total"], total))
    # The dtype policy: FSDP's param_dtype when it shards, autocast under DDP or one GPU, fp32 when
    # tp or pp runs without FSDP (maybe_enable_amp).
    dtype = torchtitan_dtype(dims_full, cfg.training.mixed_precision_param)
    costed = {"bf16": "bfloat16", "fp8": "bfloat16", "fp32": "float32"}[layout["precision"]]
    check(dtype == costed, f"{path}: torchtitan trains in {dtype}, pentamesh costed {costed}")
    p = cfg.parallelism
    shrink = lambda d: min(d, 2)
    dp_shard = shrink(dims_full.dp_shard)
    while (dp_shard * dims_full.cp) % dims_full.ep:
        dp_shard += 1
    world = shrink(dims_full.dp_replicate) * dp_shard * dims_full.cp * dims_full.tp * dims_full.pp
    fake_process_group(world)
    dims = ParallelDims(dp_replicate=shrink(dims_full.dp_replicate), dp_shard=dp_shard,
                        cp=dims_full.cp, tp=dims_full.tp, pp=dims_full.pp, ep=dims_full.ep,
                        etp=dims_full.etp, world_size=world)
    fsdp_dims = {"dp_replicate", "fsdp", "dp_shard", "efsdp", "dp", "dp_cp", "batch", "loss"}
    if dims.pp > 1:
        per = p.pipeline_parallel_layers_per_stage
        first, last = (p.pipeline_parallel_first_stage_less_layers,
                       p.pipeline_parallel_last_stage_less_layers)
        stages = -(-(args.n_layers + first + last) // per)
        parts = generate_llm_fqn_per_model_part(stages, args.n_layers, first, last)
        pp_mesh = dims.get_mesh("pp")

        class RankOf:  # the pp mesh seen from pp rank r (pipeline_module_split asks its rank)
            def __init__(self, r):
                self.r = r

            def get_local_rank(self):
                return self.r

            def size(self):
                return pp_mesh.size()

            def get_group(self, name):
                return pp_mesh.get_group(name)

        for r in range(dims.pp):
            _, chunks = pipeline_module_split(model, RankOf(r), p.pipeline_parallel_schedule,
                                              torch.device("meta"), parts)
            layers = sum(len(c.layers) for c in chunks)
            n = sum(tt_local_params(parallelize(c, dims, cfg), fsdp_dims) for c in chunks)
            want = est["stages"][r]
            check(layers == want["layers"],
                  f"{path}: torchtitan's pp rank {r} holds {layers} layers, pentamesh "
                  f"{want['layers']}")
            pm = want["params_dense"] + want["params_expert"]
            check(n == round(pm), f"{path}: pp rank {r}: torchtitan {n} parameters per rank, "
                  f"pentamesh {pm:.0f}")
            RESULTS.append(("torchtitan", layout["name"], f"pp{r}", pm, n))
    else:
        n = tt_local_params(parallelize(model, dims, cfg), fsdp_dims)
        want = est["stages"][0]
        pm = want["params_dense"] + want["params_expert"]
        check(n == round(pm), f"{path}: torchtitan {n} parameters per rank, pentamesh {pm:.0f}")
        RESULTS.append(("torchtitan", layout["name"], "rank", pm, n))


# ---------------------------------------------------------------- DeepSpeed
DS_READY = False


def deepspeed_comm():
    """DeepSpeedConfig asks deepspeed.comm for the rank: a one-process gloo group on loopback,
    wrapped in DeepSpeed's own TorchBackend (what deepspeed.init_distributed installs)."""
    global DS_READY
    if DS_READY:
        return
    import socket
    import torch.distributed as tdist
    import deepspeed.comm.comm as ds_comm
    from deepspeed.comm.torch import TorchBackend
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0")
    if tdist.is_initialized():  # the fake group of the start-up checks
        tdist.destroy_process_group()
        FAKE["world"] = 0
    tdist.init_process_group("gloo", rank=0, world_size=1)
    ds_comm.cdb = TorchBackend("gloo", timeout=None, init_method=None)
    DS_READY = True


def validate_deepspeed(directory, layout):
    from deepspeed.runtime.config import DeepSpeedConfig
    deepspeed_comm()

    path = os.path.join(directory, "ds_config.json")
    check(header_ok(path), f"{path}: header")
    check(header_ok(os.path.join(directory, "launch.sh")), f"{directory}/launch.sh: header")
    world = world_of(directory)
    model_par = layout["tp"] * layout["pp"] * layout["cp"]
    dp = world // model_par

    class Mpu:  # the data-parallel size DeepSpeed asks Megatron-DeepSpeed's mpu for
        def get_data_parallel_world_size(self):
            return dp

    try:
        cfg = DeepSpeedConfig(path, mpu=Mpu())
        ok = True
    except Exception as e:  # noqa: BLE001
        ok = False
        print(f"{path}: DeepSpeedConfig refused: {e}")
    check(ok, f"{path}: DeepSpeedConfig accepts the batch for data-parallel size {dp}")
    if not ok:
        return
    check(cfg.train_batch_size == cfg.train_micro_batch_size_per_gpu *
          cfg.gradient_accumulation_steps * dp, f"{path}: batch triple")
    check(cfg.zero_optimization_stage == layout["zero"], f"{path}: zero stage")
    if layout["pp"] > 1:
        check(cfg.zero_optimization_stage < 2, f"{path}: pipeline engine needs ZeRO < 2")
    if layout["cp"] > 1:
        # DeepSpeed reads it to size the data-parallel group of Ulysses runs (zero.Init).
        check(cfg._param_dict.get("sequence_parallel_size") == layout["cp"],
              f"{path}: sequence_parallel_size")
    check(cfg.bfloat16_config.enabled, f"{path}: bf16")
    # launch.sh: what bash passes to pretrain_gpt.py must parse with Megatron-DeepSpeed's parser
    # (which rejects unknown flags), and MoE must carry what DeepSpeed asserts and pentamesh costs.
    argv = recorded_argv(directory, "launch.sh")
    args = parse_megatron_argv(argv, f"{directory}/launch.sh", MEGATRON_DS_FLAGS,
                               "a Megatron-DeepSpeed flag at f4157be")
    check("--use-flash-attn-v2" in args, f"{directory}/launch.sh: FlashAttention")
    if "--num-experts" in args:
        check("--create-moe-param-group" in args, f"{directory}/launch.sh: MoE parameter group")
        check(cfg.zero_optimization_stage <= 2, f"{path}: DeepSpeed MoE needs ZeRO <= 2")
        # DeepSpeed 0.19.8's ZeRO-1/2 optimizer with MoE layers (stage_1_and_2.py
        # _configure_moe_settings) asserts reduce_scatter, and contiguous_gradients at stage 2.
        if cfg.zero_optimization_stage >= 1:
            check(cfg.zero_config.reduce_scatter, f"{path}: DeepSpeed MoE needs reduce_scatter")
        if cfg.zero_optimization_stage == 2:
            check(cfg.zero_config.contiguous_gradients,
                  f"{path}: DeepSpeed MoE at ZeRO-2 needs contiguous_gradients")


VALIDATORS = {"megatron": validate_megatron, "torchtitan": validate_torchtitan,
              "deepspeed": validate_deepspeed}

CASES = [
    ("meridianfin-72b", "meridian-128k", 1024),
    ("llama3-405b", "llama3-405b-8k", 16384),
    ("mixtral-8x7b", "pretrain-4k", 256),
    ("llama3-70b", "pretrain-4k", 512),
]
# PM_ENGINES_ONLY=torchtitan,megatron (a comma list) runs those engines' checks only (development).
ONLY = [e for e in os.environ.get("PM_ENGINES_ONLY", "").split(",") if e]
# Fixed layouts: (engine, model, train, gpus, layout); they reach flags the plans may not.
FIXED = [
    ("megatron", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 cp=1 zero=1 mbs=1 recompute=selective schedule=interleaved:2"),
    ("megatron", "meridianfin-72b", "meridian-128k", 1024,
     "dp=64 tp=1 pp=1 cp=16 ep=16 ep_placement=folded zero=3 mbs=1 recompute=full cp_kind=ulysses"),
    ("megatron", "meridianfin-72b", "meridian-128k", 1024,
     "dp=1 tp=8 pp=4 cp=4 ep=8 ep_placement=separate zero=2 mbs=1 recompute=full"),
    # pp 3 over 80 layers (--account-for-loss-in-pipeline-split) with cp; MoE interleaved.
    ("megatron", "llama3-70b", "pretrain-4k", 96,
     "dp=2 tp=8 pp=3 cp=2 zero=1 mbs=1 recompute=full"),
    ("megatron", "mixtral-8x7b", "pretrain-4k", 64,
     "dp=8 tp=2 pp=4 ep=8 ep_placement=folded zero=1 mbs=1 recompute=full schedule=interleaved:2"),
    # Module-level selective recomputation (--recompute-modules, the Bridge MoE recipes' kind).
    ("megatron", "mixtral-8x7b", "pretrain-4k", 64,
     "dp=16 tp=1 pp=4 ep=8 ep_placement=folded zero=1 mbs=1 recompute=selective "
     "recompute_modules=layernorm+moe_act"),
    # MLA's up-projections too (the Bridge DeepSeek-V3 recipes' module), on the published layout.
    ("megatron", "deepseek-v3-like", "pretrain-4k", 1024,
     "dp=64 tp=2 pp=8 ep=64 ep_placement=folded etp=1 zero=1 mbs=1 recompute=selective "
     "recompute_modules=mla_up_proj+mlp schedule=interleaved:2"),
    ("torchtitan", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=2 mbs=1 recompute=full schedule=interleaved:2"),
    ("torchtitan", "mixtral-8x7b", "pretrain-4k", 256,
     "dp=64 tp=2 pp=2 ep=8 ep_placement=folded zero=3 mbs=1 recompute=full"),
    ("deepspeed", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=1 mbs=1 recompute=full"),
    ("deepspeed", "mixtral-8x7b", "pretrain-4k", 256,
     "dp=64 tp=2 pp=1 cp=2 ep=8 ep_placement=folded zero=2 mbs=1 recompute=full cp_kind=ulysses "
     "sp=off"),
]
# Models an engine cannot run at all (MeridianFin's experts are smaller than its dense FFN).
# torchtitan's MoE model (qwen3) makes every layer MoE; MeridianFin's layer 0 is dense.
PLAN_REFUSED = {("deepspeed", "meridianfin-72b"): "ds-moe-shape",
                ("torchtitan", "meridianfin-72b"): "tt-moe-every-layer"}
# Layouts an engine cannot run: pentamesh must refuse them naming the rule.
REFUSED = [
    ("megatron", "mixtral-8x7b", "pretrain-4k", 64,
     "dp=16 tp=1 pp=4 ep=8 ep_placement=folded zero=1 mbs=1 recompute=selective "
     "recompute_modules=mla_up_proj", "mg-mla-up-proj-needs-mla"),
    ("torchtitan", "mixtral-8x7b", "pretrain-4k", 256,
     "dp=64 tp=2 pp=2 ep=8 ep_placement=folded zero=3 mbs=1 recompute=selective "
     "recompute_modules=moe_act", "tt-no-recompute-modules"),
    ("deepspeed", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=3 mbs=1 recompute=full", "ds-pp-zero01"),
    ("torchtitan", "meridianfin-72b", "meridian-128k", 1024,
     "dp=64 tp=1 cp=16 ep=16 ep_placement=folded zero=3 mbs=1 recompute=full cp_kind=ulysses",
     "tt-no-ulysses"),
    ("megatron", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=1 mbs=1 recompute=full schedule=zb", "mg-no-zero-bubble"),
    ("torchtitan", "meridianfin-72b", "meridian-128k", 1024,
     "dp=4 tp=8 pp=1 cp=32 ep=16 ep_placement=folded zero=3 mbs=1 recompute=full",
     "tt-moe-every-layer"),
    ("deepspeed", "meridianfin-72b", "meridian-128k", 1024,
     "dp=16 tp=4 cp=16 ep=16 ep_placement=folded zero=2 mbs=1 recompute=full", "ds-no-ring"),
    ("deepspeed", "meridianfin-72b", "meridian-128k", 1024,
     "dp=64 tp=1 pp=1 cp=16 ep=8 ep_placement=folded zero=2 mbs=1 recompute=full cp_kind=ulysses",
     "ds-moe-shape"),
]
# The refusal above that stands for an engine behaviour checked here too: torchtitan's own dtype
# rule gives fp32 for this layout (tp and pp without data sharding), which pentamesh refuses.
FP32_IN_TORCHTITAN = ("torchtitan", "llama3-70b", "pretrain-4k", 32,
                      "dp=1 tp=8 pp=4 zero=3 mbs=1 recompute=full", "tt-bf16-needs-fsdp")
REFUSED.append(FP32_IN_TORCHTITAN)


# Hand-written Megatron-LM argvs that break validate_args rules: the table must name exactly
# these (it can fail). (what, extra flags over a valid base, world size, environment, rule ids)
VARGS_BASE = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
              "--max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 64 "
              "--mock-data --train-iters 10 --lr 3e-4 --min-lr 3e-5")
VARGS_BROKEN = [
    ("bf16+fp16, seq 4098 with cp 2", "--bf16 --fp16 --seq-length 4098 --context-parallel-size 2",
     16, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, {"fp16-xor-bf16", "seq-divisible-2cp"}),
    ("Megatron-FSDP without fsdp_dtensor, with CUDA_DEVICE_MAX_CONNECTIONS=1",
     "--bf16 --tensor-model-parallel-size 2 --use-megatron-fsdp --use-distributed-optimizer "
     "--data-parallel-sharding-strategy optim_grads_params", 16,
     {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, {"mfsdp-cuda-connections", "mfsdp-ckpt-format"}),
    ("6 experts over ep 4, 32 layers over pp 3, selective with a method",
     "--bf16 --num-experts 6 --expert-model-parallel-size 4 --pipeline-model-parallel-size 3 "
     "--recompute-granularity selective --recompute-method uniform", 24, {},
     {"ep-divides-experts", "pp-layers-divisible", "selective-no-method"}),
]


def check_validate_args_catches():
    for what, extra, world, env, want in VARGS_BROKEN:
        where = f"validate_args rules on a hand-written argv ({what})"
        flags = parse_megatron_argv(shlex.split(VARGS_BASE + " " + extra), where)
        got = {b.split(" ")[0] for b in validate_args_broken(flags, world, env, 9)}
        check(got == want, f"{where}: broken {sorted(got)}, want {sorted(want)}")
    flags = parse_megatron_argv(shlex.split(VARGS_BASE + " --bf16"), "validate_args base argv")
    check(not validate_args_broken(flags, 8, {}, 9), "the hand-written base argv breaks no rule")


ROOT = os.path.abspath(os.path.join(os.path.dirname(FLAGS_TSV), "..", "..", ".."))


def layout_info(layout_text, model, train, gpus):
    """The layout's degrees, pentamesh's parameter counts (estimate --json: params, and per pp
    rank "stages") and the precision it costs (the train preset's)."""
    import tomllib
    kv = dict(item.split("=") for item in layout_text.split())
    sched = kv.get("schedule", "1f1b")
    est = json.loads(run(["estimate", "--model", model, "--train", train, "--cluster", "h100-sxm",
                          "--gpus", str(gpus), "--layout", layout_text, "--json"]).stdout)
    with open(os.path.join(ROOT, "configs", "presets", "train", train + ".toml"), "rb") as f:
        precision = tomllib.load(f)["train"].get("precision", "bf16")
    return {"tp": int(kv.get("tp", 1)), "pp": int(kv.get("pp", 1)), "cp": int(kv.get("cp", 1)),
            "zero": int(kv.get("zero", 0)), "layers": int(sum(s["layers"] for s in est["stages"])),
            "v": int(sched.split(":")[1]) if ":" in sched else (2 if sched == "interleaved" else 1),
            "estimate": est, "precision": precision, "name": f"{model} {layout_text}"}


def check_per_node_dispatch():
    """A stack profile that costs DeepEP's per-node dispatch (the shipped megatron profile with
    ep_dispatch_per_node = true): train.sh carries Megatron's flex dispatcher with the DeepEP
    backend through the same checks as every emitted file (parser, validate_args, TransformerConfig
    and the meshes); torchtitan, which has no such dispatcher, refuses."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with open(os.path.join(source, "configs", "presets", "stacks", "megatron.toml")) as f:
        text = f.read()
    check("ep_dispatch_per_node = false" in text, "the shipped megatron profile names the fact")
    profile = os.path.join(WORK, "per-node-dispatch.toml")
    with open(profile, "w") as f:
        f.write(text.replace("ep_dispatch_per_node = false", "ep_dispatch_per_node = true"))
    model, train, gpus = "mixtral-8x7b", "pretrain-4k", 64
    layout = ("dp=8 tp=2 pp=4 ep=8 ep_placement=folded zero=1 mbs=1 recompute=full "
              "schedule=interleaved:2")
    d = os.path.join(WORK, "per-node-dispatch")
    run(["estimate", "--model", model, "--train", train, "--cluster", "h100-sxm", "--gpus",
         str(gpus), "--layout", layout, "--stack", profile, "--emit", "megatron", "--out", d])
    a = parse_megatron_argv(recorded_argv(d, "train.sh"), d)
    check(a.get("--moe-token-dispatcher-type") == "flex"
          and a.get("--moe-flex-dispatcher-backend") == "deepep",
          f"{d}: the flex dispatcher with DeepEP")
    validate_megatron(d, layout_info(layout, model, train, gpus))
    p = subprocess.run([PENTAMESH, "estimate", "--model", model, "--train", train, "--cluster",
                        "h100-sxm", "--gpus", "256", "--layout",
                        "dp=64 tp=2 pp=2 ep=8 ep_placement=folded zero=3 mbs=1 recompute=full",
                        "--stack", profile, "--emit", "torchtitan",
                        "--out", os.path.join(WORK, "refused")], capture_output=True, text=True)
    check(p.returncode == 2 and "ep_dispatch_per_node" in p.stderr,
          f"torchtitan refuses the per-node dispatch (exit {p.returncode}: {p.stderr.strip()})")
    check("--overlap-moe-expert-parallel-comm" not in a,
          f"{d}: no EP overlap where the profile does not cost it")
    print("== megatron mixtral-8x7b per-node dispatch: flex / deepep", flush=True)


def check_ep_overlap():
    """A stack profile that costs Megatron-Core's EP all-to-all overlap (the shipped megatron
    profile with ep_a2a_overlap = true): train.sh carries --overlap-moe-expert-parallel-comm and
    --delay-wgrad-compute with 8 CUDA connections through the same checks as every emitted file
    (parser, validate_args, TransformerConfig's overlap rules: ep > 1, virtual stages under pp, no
    full recomputation, bf16); with full recomputation the flag is left out (the estimate then
    costs no overlap); torchtitan refuses."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with open(os.path.join(source, "configs", "presets", "stacks", "megatron.toml")) as f:
        text = f.read()
    check("ep_a2a_overlap = false" in text, "the shipped megatron profile names the fact")
    profile = os.path.join(WORK, "ep-overlap.toml")
    with open(profile, "w") as f:
        f.write(text.replace("ep_a2a_overlap = false", "ep_a2a_overlap = true"))
    model, train, gpus = "mixtral-8x7b", "pretrain-4k", 64
    layout = ("dp=8 tp=2 pp=4 ep=8 ep_placement=folded zero=1 mbs=1 recompute=selective "
              "schedule=interleaved:2")
    d = os.path.join(WORK, "ep-overlap")
    run(["estimate", "--model", model, "--train", train, "--cluster", "h100-sxm", "--gpus",
         str(gpus), "--layout", layout, "--stack", profile, "--emit", "megatron", "--out", d])
    a = parse_megatron_argv(recorded_argv(d, "train.sh"), d)
    check("--overlap-moe-expert-parallel-comm" in a and "--delay-wgrad-compute" in a,
          f"{d}: the EP overlap flags")
    with open(os.path.join(d, "train.sh")) as f:
        check("export CUDA_DEVICE_MAX_CONNECTIONS=8" in f.read(), f"{d}: 8 CUDA connections")
    validate_megatron(d, layout_info(layout, model, train, gpus))
    full = layout.replace("recompute=selective", "recompute=full")
    d_full = os.path.join(WORK, "ep-overlap-full")
    run(["estimate", "--model", model, "--train", train, "--cluster", "h100-sxm", "--gpus",
         str(gpus), "--layout", full, "--stack", profile, "--emit", "megatron", "--out", d_full])
    check("--overlap-moe-expert-parallel-comm" not in
          parse_megatron_argv(recorded_argv(d_full, "train.sh"), d_full),
          f"{d_full}: no EP overlap with full recomputation")
    p = subprocess.run([PENTAMESH, "estimate", "--model", model, "--train", train, "--cluster",
                        "h100-sxm", "--gpus", "256", "--layout",
                        "dp=64 tp=2 pp=2 ep=8 ep_placement=folded zero=3 mbs=1 "
                        "recompute=selective schedule=interleaved:2",
                        "--stack", profile, "--emit", "torchtitan",
                        "--out", os.path.join(WORK, "refused")], capture_output=True, text=True)
    check(p.returncode == 2 and "ep_a2a_overlap" in p.stderr,
          f"torchtitan refuses the EP overlap (exit {p.returncode}: {p.stderr.strip()})")
    print("== megatron mixtral-8x7b EP overlap: --overlap-moe-expert-parallel-comm", flush=True)


def main():
    for engine in VALIDATORS:
        if ONLY and engine not in ONLY:
            continue
        for model, train, gpus in CASES:
            d = os.path.join(WORK, f"plan-{engine}-{model}")
            if (engine, model) in PLAN_REFUSED:
                p = subprocess.run([PENTAMESH, "plan", "--model", model, "--train", train,
                                    "--gpus", str(gpus), "--emit", engine, "--out", d],
                                   capture_output=True, text=True)
                rule = PLAN_REFUSED[(engine, model)]
                check(p.returncode == 2 and f"rule {rule}" in p.stderr,
                      f"plan --emit {engine} for {model} is refused naming {rule}: {p.stderr}")
                print(f"== {engine} {model}: refused ({rule})", flush=True)
                continue
            p = run(["plan", "--model", model, "--train", train, "--gpus", str(gpus), "--top", "1",
                     "--json", "--emit", engine, "--out", d], expect=None or 0)
            best = json.loads(p.stdout)["top"][0]["layout"]["text"]
            print(f"== {engine} {model} on {gpus}: {best}", flush=True)
            VALIDATORS[engine](d, layout_info(best, model, train, gpus))
    for engine, model, train, gpus, layout in FIXED:
        if ONLY and engine not in ONLY:
            continue
        d = os.path.join(WORK, f"fixed-{engine}-{model}-{abs(hash(layout)) % 10**6}")
        run(["estimate", "--model", model, "--train", train, "--cluster", "h100-sxm", "--gpus",
             str(gpus), "--layout", layout, "--emit", engine, "--out", d])
        print(f"== {engine} {model} fixed: {layout}", flush=True)
        VALIDATORS[engine](d, layout_info(layout, model, train, gpus))
    if not ONLY or "megatron" in ONLY:
        check_per_node_dispatch()
        check_ep_overlap()
        check_validate_args_catches()
    for engine, model, train, gpus, layout, rule in REFUSED:
        p = subprocess.run([PENTAMESH, "estimate", "--model", model, "--train", train, "--cluster",
                            "h100-sxm", "--gpus", str(gpus), "--layout", layout, "--emit", engine,
                            "--out", os.path.join(WORK, "refused")], capture_output=True, text=True)
        check(p.returncode == 2 and f"rule {rule}" in p.stderr,
              f"{engine} refuses '{layout}' naming {rule} (exit {p.returncode}: {p.stderr.strip()})")
    if not ONLY or "torchtitan" in ONLY:
        from torchtitan.distributed import ParallelDims
        kv = dict(item.split("=") for item in FP32_IN_TORCHTITAN[4].split())
        dims = ParallelDims(dp_replicate=1, dp_shard=int(kv["dp"]), cp=1, tp=int(kv["tp"]),
                            pp=int(kv["pp"]), ep=1, etp=1, world_size=FP32_IN_TORCHTITAN[3])
        check(torchtitan_dtype(dims, "bfloat16") == "float32",
              f"torchtitan trains '{FP32_IN_TORCHTITAN[4]}' in fp32 (tt-bf16-needs-fsdp)")
    print("engine      case / rank: pentamesh vs engine parameters")
    for engine, case, what, pm, got in RESULTS:
        print(f"{engine:10s}  {case} [{what}]: {pm:.0f} vs {got}")
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
