#!/usr/bin/env python3
"""Writes bench/data/collected_runs.json: Megatron-Bridge's published pre-training benchmarks
(docs/performance-summary-archive.md of NVIDIA-NeMo/Megatron-Bridge, pinned to a commit) for H100
and B200, and NeMo's long-sequence (context-parallel, 32K to 1M tokens) FP8 runs
(docs/source/performance/performance_long_sequence.md of NVIDIA/NeMo), and the Grok-1 MoE
runs of dgxc-benchmarking v25.04.01 (H100, BF16 and FP8, 8 to 2,048 GPUs), in the format of published_runs.json. Every measured value is a cell of the source's
table (kept verbatim in published_values); model shapes come from the models' published configs
(listed in inferred_fields). Run from the repository root: python3 bench/data/make_collected_runs.py
"""
import json

COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
URL = ("https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/" + COMMIT +
       "/docs/performance-summary-archive.md")

# name -> (model fields, config source)
MODELS = {
    "LLAMA3_8B": (dict(name="Llama 3 8B", family="Llama 3", arch="dense", total_params_b=8,
                       num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
                       num_attention_heads=32, num_kv_heads=8, head_dim=128, vocab_size=128256),
                  "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    "LLAMA3_70B": (dict(name="Llama 3 70B", family="Llama 3", arch="dense", total_params_b=70,
                        num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
                        num_attention_heads=64, num_kv_heads=8, head_dim=128, vocab_size=128256),
                   "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json"),
    "LLAMA3.1_405B": (dict(name="Llama 3.1 405B", family="Llama 3", arch="dense",
                           total_params_b=405, num_layers=126, hidden_size=16384,
                           ffn_hidden_size=53248, num_attention_heads=128, num_kv_heads=8,
                           head_dim=128, vocab_size=128256),
                      "https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json"),
    "Qwen3_30B_a3B": (dict(name="Qwen3-30B-A3B", family="Qwen3 MoE", arch="moe",
                           total_params_b=30.5, active_params_b=3.3, num_layers=48,
                           hidden_size=2048, ffn_hidden_size=6144, moe_ffn_hidden_size=768,
                           num_attention_heads=32, num_kv_heads=4, head_dim=128,
                           vocab_size=151936, num_experts=128, top_k=8, shared_experts=0),
                      "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json"),
    "Qwen3_235B_a22B": (dict(name="Qwen3-235B-A22B", family="Qwen3 MoE", arch="moe",
                             total_params_b=235, active_params_b=22, num_layers=94,
                             hidden_size=4096, ffn_hidden_size=12288, moe_ffn_hidden_size=1536,
                             num_attention_heads=64, num_kv_heads=4, head_dim=128,
                             vocab_size=151936, num_experts=128, top_k=8, shared_experts=0),
                        "https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json"),
    "GPT OSS 120B": (dict(name="gpt-oss-120b", family="gpt-oss", arch="moe",
                          total_params_b=117, active_params_b=5.1, num_layers=36,
                          hidden_size=2880, ffn_hidden_size=None, moe_ffn_hidden_size=2880,
                          num_attention_heads=64, num_kv_heads=8, head_dim=64,
                          vocab_size=201088, num_experts=128, top_k=4, shared_experts=0),
                     "https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json"),
}
MODEL_NOTES = {
    "GPT OSS 120B": "Every other layer uses a 128-token sliding window (not in this format: "
                    "costed as full causal attention); SwiGLU with clamping; attention sinks.",
}

PREC = {"FP8-CS": "fp8 (current scaling, per-tensor)", "FP8-MX": "mxfp8 (block scaled)",
        "FP8": "fp8", "BF16": "bf16"}
GPU = {"DGX-H100": ("H100", "H100-SXM 80GB HBM3 (DGX H100)", 80),
       "DGX-B200": ("B200", "B200 (DGX B200)", 180)}

# (release, section, system, model, gpus, precision, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, ga,
#  tokens/s/GPU, model TFLOP/s/GPU, header)
H25 = ("Model | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | "
       "GA | Tokens / sec / GPU | Model TFLOP / sec / GPU")
H26 = ("System | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP "
       "| Tokens / sec / GPU | Model TFLOP / sec / GPU")
ROWS = [
    # 25.11 NeMo Container, "#### System: DGX-H100"
    ("25.11", "System: DGX-H100", "DGX-H100", "LLAMA3_8B", 8, "FP8-CS", 128, 1, 8192, 8, 1, 1, 1, None, 1, 16, 14451, 744, H25),
    ("25.11", "System: DGX-H100", "DGX-H100", "LLAMA3_70B", 64, "FP8-CS", 128, 1, 8192, 0, 4, 8, 1, 5, 1, 64, 1602, 719, H25),
    ("25.11", "System: DGX-H100", "DGX-H100", "LLAMA3.1_405B", 1024, "FP8-CS", 512, 1, 8192, 0, 8, 8, 2, 8, 1, 64, 292, 737, H25),
    ("25.11", "System: DGX-H100", "DGX-H100", "GPT OSS 120B", 64, "BF16", 512, 4, 4096, 0, 1, 4, 1, 1, 8, 2, 5630, 153, H25),
    ("25.11", "System: DGX-H100", "DGX-H100", "Qwen3_30B_a3B", 16, "FP8-CS", 512, 2, 4096, 0, 1, 2, 1, 24, 8, 32, 5275, 121, H25),
    ("25.11", "System: DGX-H100", "DGX-H100", "Qwen3_235B_a22B", 256, "FP8-CS", 2048, 1, 4096, 0, 2, 8, 1, 4, 32, 128, 1575, 233, H25),
    # 25.11 NeMo Container, "#### System: DGX-B200" (first value where two are given: FP8-CS)
    ("25.11", "System: DGX-B200", "DGX-B200", "LLAMA3_8B", 8, "FP8-CS", 128, 2, 8192, 0, 1, 1, 1, None, 1, 8, 30624, 1576, H25),
    ("25.11", "System: DGX-B200", "DGX-B200", "LLAMA3.1_405B", 128, "FP8-CS", 64, 1, 8192, 0, 4, 8, 2, 8, 1, 32, 661, 1667, H25),
    ("25.11", "System: DGX-B200", "DGX-B200", "GPT OSS 120B", 64, "BF16", 512, 4, 4096, 0, 1, 1, 1, 1, 8, 2, 8213, 223, H25),
    ("25.11", "System: DGX-B200", "DGX-B200", "Qwen3_30B_a3B", 8, "FP8-MX", 512, 1, 4096, 0, 1, 1, 1, 1, 8, 64, 9299, 214, H25),
    ("25.11", "System: DGX-B200", "DGX-B200", "Qwen3_235B_a22B", 64, "FP8-MX", 1024, 1, 4096, 0, 1, 8, 1, 2, 8, 128, 3269, 484, H25),
    # 26.04.01 NeMo Container, per-model tables, DGX-H100 rows
    ("26.04.01", "Model: LLAMA3_70B", "DGX-H100", "LLAMA3_70B", 64, "FP8", 256, 1, 8192, 0, 4, 8, 1, 5, None, None, 1664, 731, H26),
    ("26.04.01", "Model: LLAMA3.1_405B", "DGX-H100", "LLAMA3.1_405B", 1024, "FP8", 1536, 1, 8192, 0, 8, 8, 2, 8, None, None, 328, 827, H26),
    ("26.04.01", "Model: GPT OSS 120B", "DGX-H100", "GPT OSS 120B", 64, "BF16", 1280, 1, 4096, 0, 1, 4, 1, None, 8, None, 5824, 158, H26),
    ("26.04.01", "Model: Qwen3_30B_a3B", "DGX-H100", "Qwen3_30B_a3B", 16, "FP8", 1024, 1, 4096, 0, 1, 1, 1, None, 16, None, 8960, 206, H26),
    ("26.04.01", "Model: Qwen3_235B_a22B", "DGX-H100", "Qwen3_235B_a22B", 256, "FP8", 8192, 1, 4096, 0, 2, 8, 1, 4, 32, None, 1712, 253, H26),
]


def slug(s):
    return "".join(c.lower() if c.isalnum() else "-" for c in s).strip("-").replace("--", "-")


def row(r):
    (rel, section, system, mname, gpus, prec, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, ga, tps,
     tflops, header) = r
    m, cfg = MODELS[mname]
    gpu_model, gpu_type, mem = GPU[system]
    moe = m["arch"] == "moe"
    model = dict(name=m["name"], family=m["family"], arch=m["arch"],
                 total_params_b=m.get("total_params_b"), total_params_exact=None,
                 active_params_b=m.get("active_params_b"), num_layers=m["num_layers"],
                 hidden_size=m["hidden_size"], ffn_hidden_size=m.get("ffn_hidden_size"),
                 moe_ffn_hidden_size=m.get("moe_ffn_hidden_size"),
                 num_attention_heads=m["num_attention_heads"], num_kv_heads=m["num_kv_heads"],
                 head_dim=m["head_dim"], vocab_size=m["vocab_size"], seq_length=seq,
                 num_experts=m.get("num_experts"), top_k=m.get("top_k"),
                 shared_experts=m.get("shared_experts"), activation="swiglu",
                 notes=MODEL_NOTES.get(mname))
    cells = {"Model" if header is H25 else "System": mname if header is H25 else system,
             "#-GPUs": gpus, "Precision": prec, "GBS": gbs, "MBS": mbs,
             "Sequence Length": seq, "FSDP": fsdp, "TP": tp, "PP": pp, "CP": cp,
             "VP": "n/a" if vp is None else vp, "EP": "n/a" if ep is None else ep,
             "Tokens / sec / GPU": tps, "Model TFLOP / sec / GPU": tflops}
    if header is H25:
        cells["GA"] = ga
        cells["System"] = system
    else:
        cells["Model"] = mname
    dp = gpus // (tp * pp * cp)
    inferred = [f"model.* (except seq_length) from the model's published config: {cfg}",
                "model.activation = swiglu (the config's hidden_act silu, gated MLP)",
                "parallelism.dp_derived = GPUs / (TP PP CP)",
                "parallelism.global_batch_tokens_derived = GBS * Sequence Length"]
    if moe:
        inferred.append("parallelism.etp = 1 (Megatron-Bridge's MoE recipes leave expert tensor "
                        "parallelism at 1; EP folded into the TP x CP x DP ranks)")
    shard = (f"Megatron-FSDP (FSDP = {fsdp})" if fsdp else "Megatron distributed optimizer (FSDP=0)")
    if not fsdp:
        inferred.append("parallelism.data_parallel_sharding: distributed optimizer is the "
                        "Megatron-Bridge recipes' default, not a table cell")
    return {
        "id": slug(f"bridge-{rel}-{system}-{mname}-{prec}-{gpus}gpu-tp{tp}pp{pp}cp{cp}"
                   f"ep{ep or 1}-gbs{gbs}-seq{seq}"),
        "source": {
            "group": "megatron_bridge_perf",
            "name": f"Megatron-Bridge performance summary, NeMo {rel} container ({section})",
            "reference": "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md",
            "locator": f"'## {rel} NeMo Container' > Pre-Training Performance > '#### {section}'",
            "url": URL, "supporting_urls": [cfg], "date": rel,
            "software": f"Megatron-Bridge / Megatron-Core (NeMo {rel} container)",
            "notes": ("MoE benchmarks force-balance the token distribution among experts and are "
                      "token-dropless (the page's footnote)." if moe else None)},
        "model": model,
        "hardware": {"gpu_model": gpu_model, "gpu_type": gpu_type, "gpu_memory_gb": mem,
                     "num_gpus": gpus, "gpus_per_node": 8, "interconnect": None, "notes": None},
        "parallelism": {
            "tp": tp, "pp": pp, "dp": None, "cp": cp, "ep": ep if moe else None,
            "etp": 1 if moe else None, "vpp": vp, "pipeline_schedule": None,
            "model_parallel_size": None, "dp_derived": dp, "data_parallel_sharding": shard,
            "sequence_parallel": None, "activation_recompute": None, "recompute_detail": None,
            "micro_batch_size": mbs, "global_batch_size": gbs, "global_batch_tokens": None,
            "global_batch_tokens_derived": gbs * seq, "grad_accum_steps": ga,
            "precision": PREC[prec],
            "notes": ("force-balanced routing, token-dropless" if moe else None)},
        "measured": {"tflops_per_gpu": tflops, "tflops_kind": "model", "mfu_pct": None,
                     "hfu_pct": None, "tokens_per_sec_per_gpu": tps, "tokens_per_sec_total": None,
                     "step_time_s": None, "samples_per_sec": None, "aggregate_pflops": None,
                     "memory_gib_per_gpu": None, "other": None, "derived": None},
        "conventions": {"flops_formula": "Megatron-Bridge model FLOPs",
                        "attention_flops": "causal attention counted as half of s^2 (Bridge 25.09 on)",
                        "recompute_flops_counted": False, "peak_tflops_basis": None,
                        "notes": None},
        "published_values": {"table_header": header, **cells},
        "inferred_fields": inferred,
    }


NEMO_COMMIT = "19fadb67b09ba94c55094d34df119d6f9c565068"
NEMO_URL = ("https://github.com/NVIDIA/NeMo/blob/" + NEMO_COMMIT +
            "/docs/source/performance/performance_long_sequence.md")
LONG_MODELS = {
    "LLAMA2-7B": (dict(name="Llama 2 7B", family="Llama 2", arch="dense", total_params_b=7,
                       num_layers=32, hidden_size=4096, ffn_hidden_size=11008,
                       num_attention_heads=32, num_kv_heads=32, head_dim=128, vocab_size=32000),
                  "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json"),
    "LLAMA3-8B": MODELS["LLAMA3_8B"],
}
LONG_HEADER = ("SeqLen (K) | # of GPUs | Batch Size | Without CP: TFLOPS / GPU | With CP: TP | PP | "
               "DP | CP | TFLOPS / GPU | Speedup with CP/without CP")
# (section, system, container, model, seq K, gpus, batch, tflops without CP, tp, pp, dp, cp,
#  tflops with CP, speedup): the table rows at 32K and more (all use CP >= 2)
LONG = [
    ("LLAMA2-7B (FP8) - H100", "DGX-H100", "NeMo24.03.01.framework", "LLAMA2-7B", 32, 32, 128, "595", 2, 1, 8, 2, 610, "1.03"),
    ("LLAMA2-7B (FP8) - H100", "DGX-H100", "NeMo24.03.01.framework", "LLAMA2-7B", 64, 64, 64, "534", 4, 1, 8, 2, 574, "1.07"),
    ("LLAMA2-7B (FP8) - H100", "DGX-H100", "NeMo24.03.01.framework", "LLAMA2-7B", 128, 128, 32, "424", 4, 1, 8, 4, 555, "1.31"),
    ("LLAMA2-7B (FP8) - H100", "DGX-H100", "NeMo24.03.01.framework", "LLAMA2-7B", 256, 256, 16, "392", 4, 1, 8, 8, 549, "1.40"),
    ("LLAMA2-7B (FP8) - H100", "DGX-H100", "NeMo24.03.01.framework", "LLAMA2-7B", 512, 512, 8, "104", 8, 1, 4, 16, 549, "5.28"),
    ("LLAMA2-7B (FP8) - H100", "DGX-H100", "NeMo24.03.01.framework", "LLAMA2-7B", 1024, 1024, 4, "26.5", 8, 1, 4, 32, 536, "20.23"),
    # The B200 table's rows at this commit (LLAMA3-8B (FP8) - B200, NeMo 25.04.rc2): its TP x PP
    # x DP x CP is a quarter to an eighth of its '# of GPUs'; they are read from the page's first
    # revision instead (LONG_B200 below).
    # ("LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "LLAMA3-8B", 32, 32, 128, "1,549", 1, 1, 4, 2, 1624, "1.05"),
    # ("LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "LLAMA3-8B", 64, 64, 64, "1,481", 1, 1, 4, 4, 1600, "1.08"),
    # ("LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "LLAMA3-8B", 128, 128, 32, "1,438", 2, 1, 4, 4, 1588, "1.10"),
    # ("LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "LLAMA3-8B", 256, 256, 16, "1,162", 4, 1, 4, 4, 1590, "1.37"),
    # ("LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "LLAMA3-8B", 512, 512, 8, "607", 4, 1, 4, 8, 1619, "2.67"),
    # ("LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "LLAMA3-8B", 1024, 1024, 4, "-1)", 4, 1, 4, 16, 1608, "-"),
]


def long_row(r):
    (section, system, container, mname, seq_k, gpus, batch, tf_nocp, tp, pp, dp, cp, tf, speedup) = r
    m, cfg = LONG_MODELS[mname]
    gpu_model, gpu_type, mem = GPU[system]
    seq = seq_k * 1024
    model = dict(name=m["name"], family=m["family"], arch="dense",
                 total_params_b=m["total_params_b"], total_params_exact=None, active_params_b=None,
                 num_layers=m["num_layers"], hidden_size=m["hidden_size"],
                 ffn_hidden_size=m["ffn_hidden_size"], moe_ffn_hidden_size=None,
                 num_attention_heads=m["num_attention_heads"], num_kv_heads=m["num_kv_heads"],
                 head_dim=m["head_dim"], vocab_size=m["vocab_size"], seq_length=seq,
                 num_experts=None, top_k=None, shared_experts=None, activation="swiglu",
                 notes=None)
    return {
        "id": slug(f"nemo-longseq-{system}-{mname}-fp8-seq{seq_k}k-{gpus}gpu-tp{tp}pp{pp}cp{cp}"),
        "source": {
            "group": "nemo_long_sequence",
            "name": f"NeMo long sequence performance, {section} ({container})",
            "reference": "NVIDIA/NeMo docs/source/performance/performance_long_sequence.md",
            "locator": f"'## {section}' table, row SeqLen (K) = {seq_k}, 'With CP' columns",
            "url": NEMO_URL, "supporting_urls": [cfg], "date": container,
            "software": f"NeMo (Megatron-Core), container {container}", "notes": None},
        "model": model,
        "hardware": {"gpu_model": gpu_model, "gpu_type": gpu_type, "gpu_memory_gb": mem,
                     "num_gpus": gpus, "gpus_per_node": 8, "interconnect": None, "notes": None},
        "parallelism": {
            "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": None, "etp": None, "vpp": None,
            "pipeline_schedule": None, "model_parallel_size": None, "dp_derived": None,
            "data_parallel_sharding": None, "sequence_parallel": None,
            "activation_recompute": None, "recompute_detail": None, "micro_batch_size": None,
            "global_batch_size": batch, "global_batch_tokens": None,
            "global_batch_tokens_derived": batch * seq, "grad_accum_steps": None,
            "precision": "fp8", "notes": None},
        "measured": {"tflops_per_gpu": tf, "tflops_kind": "model", "mfu_pct": None,
                     "hfu_pct": None, "tokens_per_sec_per_gpu": None, "tokens_per_sec_total": None,
                     "step_time_s": None, "samples_per_sec": None, "aggregate_pflops": None,
                     "memory_gib_per_gpu": None, "other": None, "derived": None},
        "conventions": {"flops_formula": "NeMo model FLOPs (Megatron formula)",
                        "attention_flops": "full s^2 (NeMo before Aug 2025); not stated on the page",
                        "recompute_flops_counted": False, "peak_tflops_basis": None,
                        "notes": "Only TFLOPS/GPU is published: tokens/s follows from the "
                                 "source's FLOPs per token."},
        "published_values": {"table_header": LONG_HEADER, "SeqLen (K)": seq_k,
                             "# of GPUs": gpus, "Batch Size": batch,
                             "Without CP TFLOPS / GPU": tf_nocp, "TP": tp, "PP": pp, "DP": dp,
                             "CP": cp, "With CP TFLOPS / GPU": tf,
                             "Speedup with CP/without CP": speedup},
        "inferred_fields": [
            f"model.* from the model's published config: {cfg}",
            "model.activation = swiglu (the config's hidden_act silu, gated MLP)",
            "model.seq_length = SeqLen (K) * 1024",
            "parallelism.global_batch_size = Batch Size (sequences)",
            "parallelism.global_batch_tokens_derived = Batch Size * seq_length"],
    }


# The page's B200 table as first published (commit 14d427f5, 2025-04-28): there its '# of GPUs' is
# TP x CP x DP (PP 1), where the later revision above changed the GPU counts and kept the layouts.
NEMO_B200_COMMIT = "14d427f575ee0c3be2719ef7f7c4ecad1b6b45e5"
NEMO_B200_URL = ("https://github.com/NVIDIA/NeMo/blob/" + NEMO_B200_COMMIT +
                 "/docs/source/performance/performance_long_sequence.md")
LONG_B200_HEADER = "SeqLen (K) | # of GPUs | Batch Size | TP | CP | DP | TFLOPS / GPU"
# (seq K, gpus, batch, tp, cp, dp, tflops): '## LLAMA3-8B (FP8) - B200', NeMo25.04.rc2, DGX-B200
LONG_B200 = [
    (8, 2, 512, 1, 1, 2, "1,671"),
    (16, 4, 256, 1, 1, 4, "1,717"),
    (32, 8, 128, 1, 2, 4, "1,624"),
    (64, 16, 64, 1, 4, 4, "1,600"),
    (128, 32, 32, 2, 4, 4, "1,588"),
    (256, 64, 16, 4, 4, 4, "1,590"),
    (512, 128, 8, 4, 8, 4, "1,619"),
    (1024, 256, 4, 4, 16, 4, "1,608"),
]


def long_b200_row(r):
    seq_k, gpus, batch, tp, cp, dp, tf = r
    assert tp * cp * dp == gpus, r
    out = long_row(("LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "LLAMA3-8B", seq_k, gpus,
                    batch, None, tp, 1, dp, cp, int(tf.replace(",", "")), None))
    out["id"] = slug(f"nemo-longseq-b200-llama3-8b-fp8-seq{seq_k}k-{gpus}gpu-tp{tp}cp{cp}dp{dp}")
    out["source"].update({
        "group": "nemo_long_sequence_b200",
        "locator": f"'## LLAMA3-8B (FP8) - B200' table, row SeqLen (K) = {seq_k}",
        "url": NEMO_B200_URL,
        "notes": "The page's first B200 table (this commit): '# of GPUs' = TP x CP x DP. The "
                 "next revision (19fadb67) lists 4x-8x the GPUs for the same layouts and "
                 "TFLOPS/GPU; this row keeps the self-consistent first one."})
    out["published_values"] = {"table_header": LONG_B200_HEADER, "SeqLen (K)": seq_k,
                               "# of GPUs": gpus, "Batch Size": batch, "TP": tp, "CP": cp,
                               "DP": dp, "TFLOPS / GPU": tf}
    out["inferred_fields"].append("parallelism.pp = 1 (no PP column; GPUs = TP x CP x DP)")
    return out


DGXC_COMMIT = "85380ffe02eac74e1d07e556b28cdcf7cce2d2f0"  # tag v25.04.01
DGXC_URL = ("https://github.com/NVIDIA/dgxc-benchmarking/blob/" + DGXC_COMMIT +
            "/grok1/README_314b.md")
DGXC_YAML = ("https://github.com/NVIDIA/dgxc-benchmarking/blob/" + DGXC_COMMIT +
             "/grok1/cfg/grok1_314b.yaml")
# README_314b.md config table: GPUs | SeqLen | Layers | TP | PP | CP | EP | DP | VP | MBS | GBS | GA
GROK_CFG = [
    (8, 4096, 2, 4, 1, 1, 2, 1, None, 1, 1024, 128),
    (16, 4096, 4, 4, 1, 1, 4, 1, None, 1, 1024, 128),
    (32, 4096, 4, 4, 1, 1, 8, 1, None, 1, 1024, 128),
    (64, 8192, 8, 4, 1, 2, 8, 1, None, 1, 1024, 128),
    (128, 8192, 16, 4, 2, 2, 8, 1, 8, 1, 1024, 128),
    (256, 8192, 32, 4, 4, 2, 8, 1, 8, 1, 1024, 128),
    (512, 8192, 64, 4, 8, 2, 8, 1, 8, 1, 1024, 128),
    (1024, 8192, 64, 4, 8, 2, 8, 2, 8, 1, 2048, 128),
    (2048, 8192, 64, 4, 8, 2, 8, 4, 8, 1, 4096, 128),
]
# Expected Performance tables, per GPU count in the order above: (step time, tokens/s, MFU, days)
GROK_PERF = {
    "BF16": ("Grok 1 314b BF16",
             ["24.00", "21.71", "10.70", "21.42", "20.73", "20.83", "21.01", "21.20", "21.29"],
             ["174762", "193223", "391991", "391606", "404699", "402756", "399191", "791378", "1576065"],
             ["45.4%", "44.5%", "45.1%", "42.9%", "42.8%", "41.8%", "41.09%", "40.73%", "40.56%"],
             ["NA", "NA", "NA", "NA", "NA", "NA", "28.99", "14.63", "7.34"]),
    "FP8": ("Grok 1 314b FP8",
            ["19.71", "17.80", "8.70", "17.53", "16.70", "16.75", "16.90", "17.01", "17.30"],
            ["212757", "235635", "482159", "478583", "502311", "500752", "496367", "981295", "1939562"],
            ["27.7%", "27.1%", "27.7%", "26.2%", "26.6%", "26.0%", "25.53%", "25.24%", "24.94%"],
            ["NA", "NA", "NA", "NA", "NA", "NA", "23.32", "11.73", "5.97"]),
}


def grok_rows():
    out = []
    for prec, (title, steps, tps, mfu, days) in GROK_PERF.items():
        for i, (gpus, seq, layers, tp, pp, cp, ep, dp, vp, mbs, gbs, ga) in enumerate(GROK_CFG):
            full = layers == 64
            column = f"Throughput on {gpus}{'x' if gpus < 256 else ''} H100 GPUs"
            out.append({
                "id": f"dgxc-v25.04.01-grok1-{prec.lower()}-{gpus}gpu",
                "source": {
                    "group": "dgxc_v25.04.01",
                    "name": "NVIDIA DGX Cloud benchmarking recipes (dgxc-benchmarking v25.04.01)",
                    "reference": "NVIDIA/dgxc-benchmarking grok1/README_314b.md",
                    "locator": f"config table row GPUs={gpus}; perf table '{title}', column "
                               f"'{column}'",
                    "url": DGXC_URL, "supporting_urls": [DGXC_YAML], "date": "2025-04",
                    "software": "NeMo (NeMo Launcher, Megatron-Core; dgxc-benchmarking v25.04.01)",
                    "notes": ("Full-depth Grok-1 (64 layers)." if full else
                              f"Reduced-depth proxy ({layers} layers) used at this scale (weak "
                              "scaling).") +
                             " Measured as the last training step of the run (README)."},
                "model": {
                    "name": "Grok-1 314B (NeMo proxy config)", "family": "Grok-1 (proxy config)",
                    "arch": "moe", "total_params_b": 314 if full else None,
                    "total_params_exact": None, "active_params_b": None, "num_layers": layers,
                    "hidden_size": 6144, "ffn_hidden_size": 32768, "moe_ffn_hidden_size": None,
                    "num_attention_heads": 48, "num_kv_heads": 8, "head_dim": None,
                    "vocab_size": None, "seq_length": seq, "num_experts": 8, "top_k": 2,
                    "shared_experts": None, "activation": "geglu",
                    "notes": "grok1/cfg/grok1_314b.yaml: 64 layers, hidden 6144, FFN 32768, 48 "
                             "heads, 8 query groups, 8 experts top-2, fast-geglu; vocab via the "
                             "HF tokenizer (size not in the yaml). Layers per row from the "
                             "README's config table."},
                "hardware": {"gpu_model": "H100", "gpu_type": "H100 (DGX Cloud)",
                             "gpu_memory_gb": 80, "num_gpus": gpus, "gpus_per_node": 8,
                             "interconnect": None, "notes": None},
                "parallelism": {
                    "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "etp": None, "vpp": vp,
                    "pipeline_schedule": None, "model_parallel_size": None, "dp_derived": None,
                    "data_parallel_sharding": "mcore distributed optimizer",
                    "sequence_parallel": True, "activation_recompute": "none",
                    "recompute_detail": None, "micro_batch_size": mbs, "global_batch_size": gbs,
                    "global_batch_tokens": None, "global_batch_tokens_derived": gbs * seq,
                    "grad_accum_steps": ga, "precision": prec.lower(),
                    "notes": "DP as published in the recipe table; in this table GPUs = "
                             "TP*PP*CP*EP*DP (EP is not folded into DP), i.e. attention-side "
                             "data parallel size = EP*DP. Token dispatcher: alltoall (yaml)."},
                "measured": {
                    "tflops_per_gpu": None, "tflops_kind": None,
                    "mfu_pct": float(mfu[i].rstrip("%")), "hfu_pct": None,
                    "tokens_per_sec_per_gpu": None, "tokens_per_sec_total": int(tps[i]),
                    "step_time_s": float(steps[i]), "samples_per_sec": None,
                    "aggregate_pflops": None, "memory_gib_per_gpu": None,
                    "other": {"time_to_train_1T_tokens_days": days[i]}, "derived": None},
                "conventions": {
                    "flops_formula": "README: MFU = GBS * model_flops / step_time / GPUs / peak; "
                                     "model flops per sample (2048-GPU config) = 4.27E+15",
                    "attention_flops": "not stated", "recompute_flops_counted": False,
                    "peak_tflops_basis": "H100 BF16 989 TFLOP/s, FP8 1979 TFLOP/s (README)",
                    "notes": None},
                "published_values": {
                    "table_title": title, "column": column,
                    "config_row": {"GPUs": str(gpus), "SeqLen": str(seq), "Layers": str(layers),
                                   "TP": str(tp), "PP": str(pp), "CP": str(cp), "EP": str(ep),
                                   "DP": str(dp), "VP": "NA" if vp is None else str(vp),
                                   "MBS": str(mbs), "GBS": str(gbs), "GA": str(ga)},
                    "Training step time (seconds per step)": steps[i],
                    "Throughput in tokens per second": tps[i],
                    "Model flops utilization": mfu[i],
                    "Time to train 1T tokens in days": days[i]},
                "inferred_fields": [
                    "parallelism.sequence_parallel/activation_recompute/data_parallel_sharding "
                    "from grok1/cfg/grok1_314b.yaml at the same commit",
                    "model.* (except num_layers, seq_length) from grok1/cfg/grok1_314b.yaml"],
            })
    return out


if __name__ == "__main__":
    out = ([row(r) for r in ROWS] + [long_row(r) for r in LONG] +
           [long_b200_row(r) for r in LONG_B200] + grok_rows())
    ids = [o["id"] for o in out]
    assert len(set(ids)) == len(ids), ids
    with open("bench/data/collected_runs.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote bench/data/collected_runs.json: {len(out)} rows")
