#!/usr/bin/env python3
"""Checks pentamesh's emitted launch files with the engines' own code (run by CTest, label
`engines`, in the venv of scripts/engines_env.sh).

For the case study (MeridianFin-72B, 1,024 H100, 128K) and Llama 3 405B (16,384 H100, 8K), and a
few fixed layouts that exercise more flags, `pentamesh plan|estimate --emit ENGINE` writes the
files, then:
  megatron   train.sh is run by bash with PYTHON pointing at a recorder, so the argv is what bash
             passes to pretrain_gpt.py. Every flag must be in Megatron-LM's parser (the flag list
             extracted at core_v0.16.1, src/launch/data), with its arity, type and choices; the
             flags that are megatron-core dataclass fields build TransformerConfig and
             DistributedDataParallelConfig (their __post_init__ checks run); the degrees build
             megatron-core's RankGenerator for the dense and the expert meshes, and the batch
             megatron-core's ConstantNumMicroBatchesCalculator.
  torchtitan torchtitan's ConfigManager parses job.toml; ParallelDims validates the degrees for the
             world size of sbatch.sh; the batch rules of torchtitan's trainer and the stage split
             of its pipeline builder (generate_llm_fqn_per_model_part) are checked.
  deepspeed  DeepSpeedConfig loads ds_config.json with the data-parallel world size (its batch
             assertion runs), and the ZeRO stage it reads must be < 2 with pipeline parallelism;
             launch.sh's argv must parse with Megatron-DeepSpeed's parser (the flag list extracted
             at commit f4157be, src/launch/data) and carry FlashAttention and, for MoE, the MoE
             parameter group with ZeRO <= 2.
Layouts an engine cannot run must be refused by pentamesh, naming the rule.
Usage: validate_engines.py PENTAMESH_BINARY FLAGS_TSV WORKDIR
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


def recorded_argv(directory, script):
    rec = os.path.join(directory, "argv.json")
    recorder = os.path.join(directory, "record_argv.py")
    with open(recorder, "w") as f:
        f.write("import json, sys\njson.dump(sys.argv[1:], open(%r, 'w'))\n" % rec)
    env = dict(os.environ, PYTHON=f"{sys.executable} {recorder}", MEGATRON_LM=directory,
               MEGATRON_DEEPSPEED=directory)
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
    tp = a.get("--tensor-model-parallel-size", 1)
    pp = a.get("--pipeline-model-parallel-size", 1)
    cp = a.get("--context-parallel-size", 1)
    ep = a.get("--expert-model-parallel-size", 1)
    etp = a.get("--expert-tensor-parallel-size", tp)
    check(world % (tp * pp * cp) == 0, f"{where}: world {world} % tp*pp*cp")
    dp = world // (tp * pp * cp)
    # Megatron's TransformerConfig from the flags whose dest is a field (core_transformer_config_
    # from_args copies those), plus the renames that function applies.
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
    kw.pop("recompute_modules", None)
    try:
        TransformerConfig(**kw)
        ok = True
    except Exception as e:  # noqa: BLE001 - the engine's own refusal is the test's finding
        ok = False
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


VALIDATORS = {"megatron": validate_megatron, "torchtitan": validate_torchtitan,
              "deepspeed": validate_deepspeed}

CASES = [
    ("meridianfin-72b", "meridian-128k", 1024),
    ("llama3-405b", "llama3-405b-8k", 16384),
]
# Fixed layouts: (engine, model, train, gpus, layout); they reach flags the plans may not.
FIXED = [
    ("megatron", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 cp=1 zero=1 mbs=1 recompute=selective schedule=interleaved:2"),
    ("megatron", "meridianfin-72b", "meridian-128k", 1024,
     "dp=64 tp=1 pp=1 cp=16 ep=16 ep_placement=folded zero=3 mbs=1 recompute=full cp_kind=ulysses"),
    ("megatron", "meridianfin-72b", "meridian-128k", 1024,
     "dp=1 tp=8 pp=4 cp=4 ep=8 ep_placement=separate zero=2 mbs=1 recompute=full"),
    ("torchtitan", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=2 mbs=1 recompute=full schedule=interleaved:2"),
    ("torchtitan", "meridianfin-72b", "meridian-128k", 1024,
     "dp=4 tp=8 pp=1 cp=32 ep=16 ep_placement=folded zero=3 mbs=1 recompute=full"),
    ("deepspeed", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=1 mbs=1 recompute=full"),
    ("deepspeed", "mixtral-8x7b", "pretrain-4k", 256,
     "dp=64 tp=2 pp=1 cp=2 ep=8 ep_placement=folded zero=2 mbs=1 recompute=full cp_kind=ulysses "
     "sp=off"),
]
# Models an engine cannot run at all (MeridianFin's experts are smaller than its dense FFN).
PLAN_REFUSED = {("deepspeed", "meridianfin-72b"): "ds-moe-shape"}
# Layouts an engine cannot run: pentamesh must refuse them naming the rule.
REFUSED = [
    ("deepspeed", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=3 mbs=1 recompute=full", "ds-pp-zero01"),
    ("torchtitan", "meridianfin-72b", "meridian-128k", 1024,
     "dp=64 tp=1 cp=16 ep=16 ep_placement=folded zero=3 mbs=1 recompute=full cp_kind=ulysses",
     "tt-no-ulysses"),
    ("megatron", "llama3-405b", "llama3-405b-8k", 16384,
     "dp=128 tp=8 pp=16 zero=1 mbs=1 recompute=full schedule=zb", "mg-no-zero-bubble"),
    ("deepspeed", "meridianfin-72b", "meridian-128k", 1024,
     "dp=16 tp=4 cp=16 ep=16 ep_placement=folded zero=2 mbs=1 recompute=full", "ds-no-ring"),
    ("deepspeed", "meridianfin-72b", "meridian-128k", 1024,
     "dp=64 tp=1 pp=1 cp=16 ep=8 ep_placement=folded zero=2 mbs=1 recompute=full cp_kind=ulysses",
     "ds-moe-shape"),
]


def layout_info(layout_text, model):
    kv = dict(item.split("=") for item in layout_text.split())
    sched = kv.get("schedule", "1f1b")
    layers = {"llama3-405b": 126, "meridianfin-72b": 80, "mixtral-8x7b": 32}[model]
    return {"tp": int(kv.get("tp", 1)), "pp": int(kv.get("pp", 1)), "cp": int(kv.get("cp", 1)),
            "zero": int(kv.get("zero", 0)), "layers": layers,
            "v": int(sched.split(":")[1]) if ":" in sched else (2 if sched == "interleaved" else 1)}


def main():
    for engine in VALIDATORS:
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
            VALIDATORS[engine](d, layout_info(best, model))
    for engine, model, train, gpus, layout in FIXED:
        d = os.path.join(WORK, f"fixed-{engine}-{model}-{abs(hash(layout)) % 10**6}")
        run(["estimate", "--model", model, "--train", train, "--cluster", "h100-sxm", "--gpus",
             str(gpus), "--layout", layout, "--emit", engine, "--out", d])
        print(f"== {engine} {model} fixed: {layout}", flush=True)
        VALIDATORS[engine](d, layout_info(layout, model))
    for engine, model, train, gpus, layout, rule in REFUSED:
        p = subprocess.run([PENTAMESH, "estimate", "--model", model, "--train", train, "--cluster",
                            "h100-sxm", "--gpus", str(gpus), "--layout", layout, "--emit", engine,
                            "--out", os.path.join(WORK, "refused")], capture_output=True, text=True)
        check(p.returncode == 2 and f"rule {rule}" in p.stderr,
              f"{engine} refuses '{layout}' naming {rule} (exit {p.returncode}: {p.stderr.strip()})")
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
