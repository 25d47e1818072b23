#!/usr/bin/env python3
"""Writes bench/data/collected_runs.json: Megatron-Bridge's published pre-training benchmarks
(docs/performance-summary-archive.md of NVIDIA-NeMo/Megatron-Bridge, pinned to a commit) for H100
and B200 (NeMo 25.11 and 26.04.01; then the MoE rows of 25.09 to 26.06, appended last), and NeMo's long-sequence (context-parallel, 32K to 1M tokens) FP8 runs
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
MODELS["DeepSeekV3"] = (
    dict(name="DeepSeek-V3", family="DeepSeek-V3", arch="moe", total_params_b=671,
         active_params_b=37, num_layers=61, hidden_size=7168, ffn_hidden_size=18432,
         moe_ffn_hidden_size=2048, num_attention_heads=128, num_kv_heads=128, head_dim=None,
         vocab_size=129280, num_experts=256, top_k=8, shared_experts=1),
    "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json")
MODEL_NOTES = {
    "DeepSeekV3": "Multi-head latent attention (q_lora_rank 1536, kv_lora_rank 512, "
                  "qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128; no head_dim field) "
                  "and the first 3 layers dense (first_k_dense_replace 3, FFN 18432) are not "
                  "fields of this format; the reader adds both for the DeepSeek-V3 family. The "
                  "multi-token-prediction block (num_nextn_predict_layers 1) has no field either: "
                  "61 layers are costed.",
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


BRIDGE = "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/"
V020 = BRIDGE + "7af9601c9da746d21481194356295bfe23df3737/"  # tag v0.2.0
V040 = BRIDGE + "0fbfe7d3e970fbd75c1281d71cee586ce1f3df5e/"  # tag v0.4.0
V042 = BRIDGE + "c810129341a84e58f4cbed3093f70668a088c028/"  # tag v0.4.2
# Rows whose layout is their Megatron-Bridge recipe's: the recipe's dispatcher and EP overlap
# flags (supporting urls, parallelism notes after the routing words).
RECIPE_NOTES = {
    "bridge-25-11-dgx-h100-qwen3-235b-a22b-fp8-cs-256gpu-tp2pp8cp1ep32-gbs2048-seq4096": (
        [V020 + "scripts/performance/configs/qwen3/workload_base_configs.py",
         V020 + "scripts/performance/utils/helpers.py",
         V020 + "src/megatron/bridge/models/qwen/qwen_provider.py"],
        "recipe QWEN3_235B_A22B_H100_FP8_CS_BASE_CONFIG (Megatron-Bridge v0.2.0 workload config, "
        "same layout): moe_token_dispatcher_type alltoall (the Qwen3 provider's default), "
        "moe_a2a_overlap=True (helpers.py: overlap_moe_expert_parallel_comm and "
        "delay_wgrad_compute on)"),
    "bridge-26-04-01-dgx-h100-qwen3-30b-a3b-fp8-16gpu-tp1pp1cp1ep16-gbs1024-seq4096": (
        [V040 + "scripts/performance/configs/qwen/qwen3_workload_base_configs.py",
         V040 + "scripts/performance/configs/qwen/qwen3_llm_pretrain.py"],
        "recipe QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 (Megatron-Bridge v0.4.0 workload "
        "config, same layout): moe_token_dispatcher_type flex with moe_flex_dispatcher_backend "
        "hybridep (qwen3_llm_pretrain.py), moe_a2a_overlap=False"),
    "bridge-26-04-01-dgx-b200-deepseekv3-mxfp8-256gpu-tp1pp8cp1ep32-gbs4096-seq4096": (
        [V042 + "scripts/performance/configs/deepseek/deepseek_workload_base_configs.py",
         V042 + "src/megatron/bridge/training/flex_dispatcher_backend.py"],
        "recipe DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 (Megatron-Bridge v0.4.2 workload "
        "config, same layout; v0.4.0's B200 config is pp 16 x ep 8): moe_flex_dispatcher_backend "
        "deepep (flex dispatcher, flex_dispatcher_backend.py), moe_a2a_overlap=True, "
        "recompute_modules mla_up_proj and mlp"),
    "bridge-26-04-01-dgx-h100-qwen3-235b-a22b-fp8-256gpu-tp2pp8cp1ep32-gbs8192-seq4096": (
        [V040 + "scripts/performance/configs/qwen/qwen3_workload_base_configs.py",
         V040 + "scripts/performance/configs/qwen/qwen3_llm_pretrain.py"],
        "recipe QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2 (Megatron-Bridge v0.4.0 workload "
        "config, same layout): moe_token_dispatcher_type alltoall (qwen3_llm_pretrain.py), "
        "moe_a2a_overlap=True (overlap_moe_expert_parallel_comm and delay_wgrad_compute on)"),
}


def slug(s):
    out = "".join(c.lower() if c.isalnum() else "-" for c in s).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


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
    out = {
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
    if out["id"] in RECIPE_NOTES:
        urls, words = RECIPE_NOTES[out["id"]]
        out["source"]["supporting_urls"] += urls
        out["parallelism"]["notes"] += "; " + words
    return out


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


# More Megatron-Bridge rows from the same pinned archive page: every DGX-H100 and DGX-B200 row of
# the MoE models (DeepSeek-V3, Qwen3-30B-A3B, Qwen3-235B-A22B, gpt-oss-120b) in the 25.09, 26.02,
# 26.02.01, 26.04, 26.04.01 (B200) and 26.06 containers, and 25.11's DeepSeek-V3 row (the 26.06.01
# tables and the current page, 26.08, list no H100 or B200 rows of these models). Each table row
# is kept as the page's markdown line and parsed here; a cell "a (b)" is read as a, or as b where
# the row is marked PAREN (25.09: b is another FP8 quantization granularity, same layout).
H2509 = ("Model | #-GPUs | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | GA | "
         "Tokens / sec / GPU | Model TFLOP / sec / GPU")
H2606 = ("System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | "
         "Tokens / sec / GPU | Model TFLOP / sec / GPU")
PREC["MXFP8"] = "mxfp8 (block scaled)"
PLAIN, PAREN = "plain", "paren"
MORE = [
    ("26.06", "Model: Qwen3_30B_a3B", H2606, "| DGX-H100 | 16 | FP8 | 1024 | 1 | 4096 | 1 | 1 | 1 | n/a | 16 | 8826 | 203 |", PLAIN),
    ("26.04.01", "Model: DeepSeekV3", H26, "| DGX-B200 | 256 | MXFP8 | 4096 | 1 | 4096 | 0 | 1 | 8 | 1 | 2 | 32 | 3328 | 864 |", PLAIN),
    ("26.04.01", "Model: GPT OSS 120B", H26, "| DGX-B200 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 13568 | 369 |", PLAIN),
    ("26.04.01", "Model: Qwen3_30B_a3B", H26, "| DGX-B200 | 8 | MXFP8 | 512 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 27136 | 619 |", PLAIN),
    ("26.04.01", "Model: Qwen3_235B_a22B", H26, "| DGX-B200 | 256 | MXFP8 | 8192 | 1 | 4096 | 0 | 1 | 8 | 1 | n/a | 8 | 3776 | 560 |", PLAIN),
    ("26.04", "Model: DeepSeekV3", H26, "| DGX-B200 | 256 | MXFP8 | 4096 | 1 | 4096 | 0 | 1 | 16 | 1 | n/a | 8 | 2815 | 732 |", PLAIN),
    ("26.04", "Model: GPT OSS 120B", H26, "| DGX-B200 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 13045 | 355 |", PLAIN),
    ("26.04", "Model: GPT OSS 120B", H26, "| DGX-H100 | 64 | BF16 | 1280 | 1 | 4096 | 0 | 1 | 4 | 1 | n/a | 8 | 5810 | 158 |", PLAIN),
    ("26.04", "Model: Qwen3_30B_a3B", H26, "| DGX-B200 | 8 | MXFP8 | 512 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 26859 | 618 |", PLAIN),
    ("26.04", "Model: Qwen3_30B_a3B", H26, "| DGX-H100 | 16 | FP8 | 1024 | 1 | 4096 | 0 | 1 | 1 | 1 | n/a | 16 | 8901 | 205 |", PLAIN),
    ("26.04", "Model: Qwen3_235B_a22B", H26, "| DGX-H100 | 256 | FP8 | 8192 | 1 | 4096 | 0 | 2 | 8 | 1 | 4 | 32 | 1686 | 250 |", PLAIN),
    ("26.02.01", "Model: DeepSeekV3", H26, "| DGX-B200 | 256 | MXFP8 | 4096 | 1 | 4096 | 0 | 1 | 16 | 1 | n/a | 8 | 2790 | 725 |", PLAIN),
    ("26.02.01", "Model: GPT OSS 120B", H26, "| DGX-B200 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 13722 | 373 |", PLAIN),
    ("26.02.01", "Model: GPT OSS 120B", H26, "| DGX-H100 | 64 | BF16 | 1280 | 1 | 4096 | 0 | 1 | 4 | 1 | n/a | 8 | 5984 | 163 |", PLAIN),
    ("26.02.01", "Model: Qwen3_30B_a3B", H26, "| DGX-B200 | 8 | MXFP8 | 512 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 26695 | 614 |", PLAIN),
    ("26.02.01", "Model: Qwen3_30B_a3B", H26, "| DGX-H100 | 16 | FP8 | 1024 | 1 | 4096 | 0 | 1 | 2 | 1 | 12 | 8 | 9058 | 208 |", PLAIN),
    ("26.02.01", "Model: Qwen3_235B_a22B", H26, "| DGX-H100 | 256 | FP8 | 8192 | 1 | 4096 | 0 | 2 | 8 | 1 | 4 | 32 | 1611 | 238 |", PLAIN),
    ("26.02", "Model: DeepSeekV3", H26, "| DGX-B200 | 256 | MXFP8 | 4096 | 1 | 4096 | 0 | 1 | 16 | 1 | n/a | 8 | 2689 | 699 |", PLAIN),
    ("26.02", "Model: GPT OSS 120B", H26, "| DGX-B200 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 64 | 8047 | 219 |", PLAIN),
    ("26.02", "Model: GPT OSS 120B", H26, "| DGX-H100 | 64 | BF16 | 1280 | 1 | 4096 | 0 | 1 | 4 | 1 | n/a | 8 | 5993 | 163 |", PLAIN),
    ("26.02", "Model: Qwen3_30B_a3B", H26, "| DGX-B200 | 8 | MXFP8 | 512 | 1 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 9691 | 223 |", PLAIN),
    ("26.02", "Model: Qwen3_30B_a3B", H26, "| DGX-H100 | 16 | FP8 | 1024 | 1 | 4096 | 0 | 1 | 2 | 1 | 12 | 8 | 5113 | 118 |", PLAIN),
    ("26.02", "Model: Qwen3_235B_a22B", H26, "| DGX-B200 | 256 | MXFP8 | 8192 | 1 | 4096 | 0 | 1 | 8 | 1 | n/a | 8 | 3805 | 563 |", PLAIN),
    ("26.02", "Model: Qwen3_235B_a22B", H26, "| DGX-H100 | 256 | FP8 | 8192 | 1 | 4096 | 0 | 2 | 8 | 1 | 4 | 32 | 1633 | 242 |", PLAIN),
    ("25.11", "System: DGX-B200", H25, "| DeepSeekV3 (w/ MTP) | 256 | FP8-MX | 2048 | 1 | 4096 | 0 | 1 | 16 | 1 | 1 | 8 | 128 | 2139 | 557 |", PLAIN),
    ("25.09", "System: DGX-B200", H2509, "| DeepSeekV3 (tokendrop) | 256 | 2048 | 1 | 4096 | 0 | 1 | 16 | 1 | 1 | 8 | 128 | 2265 (2159) | 589 (562) |", PLAIN),
    ("25.09", "System: DGX-B200", H2509, "| DeepSeekV3 (tokendrop) | 256 | 2048 | 1 | 4096 | 0 | 1 | 16 | 1 | 1 | 8 | 128 | 2265 (2159) | 589 (562) |", PAREN),
    ("25.09", "System: DGX-B200", H2509, "| Qwen3_30B_a3B (tokendrop) | 8 | 512 | 1 | 4096 | 0 | 1 | 1 | 1 | 1 | 8 | 64 | 18066 | 416 |", PLAIN),
    ("25.09", "System: DGX-B200", H2509, "| Qwen3_235B_a22B (tokendrop) | 64 | 1024 | 1 | 4096 | 0 | 1 | 8 | 1 | 2 | 8 | 128 | 4104 (4275) | 607 (633) |", PLAIN),
    ("25.09", "System: DGX-B200", H2509, "| Qwen3_235B_a22B (tokendrop) | 64 | 1024 | 1 | 4096 | 0 | 1 | 8 | 1 | 2 | 8 | 128 | 4104 (4275) | 607 (633) |", PAREN),
    ("25.09", "System: DGX-H100", H2509, "| DeepSeekV3 (dropless) | 1024 | 8192 | 1 | 4096 | 0 | 2 | 8 | 1 | 4 | 64 | 128 | 1297 | 338 (330) |", PLAIN),
    ("25.09", "System: DGX-H100", H2509, "| Qwen3_30B_a3B (tokendrop) | 16 | 512 | 2 | 4096 | 0 | 1 | 2 | 1 | 24 | 8 | 32 | 10494 | 241 |", PLAIN),
    ("25.09", "System: DGX-H100", H2509, "| Qwen3_235B_a22B (tokendrop) | 256 | 2048 | 1 | 4096 | 0 | 2 | 8 | 1 | 4 | 32 | 128 | 1204 | 178 |", PLAIN),
]
V010RC3 = BRIDGE + "bf71eba07bae8d36f08b796c106d1197d46ad541/"  # tag v0.1.0rc3 (2025-10-08)
RUN_SCRIPT_0109 = V010RC3 + "scripts/performance/run_script.py"
TOKEN_DROP_0109 = V010RC3 + "src/megatron/bridge/training/utils/moe_token_drop.py"
DSV3_YAML_0109 = V010RC3 + "scripts/performance/configs/deepseek/deepseek_v3_llm_pretrain.yaml"


def cell_value(text, pick):
    """A table cell as a number (or "n/a"): "a (b)" gives a, or b for PAREN."""
    text = text.strip()
    if "(" in text:
        a, b = text.split("(")
        text = (b.rstrip(")") if pick == PAREN else a).strip()
    if text == "n/a":
        return text
    return int(text)


def more_row(r):
    rel, section, header, line, pick = r
    cols = header.split(" | ")
    raw = [c.strip() for c in line.strip().strip("|").split("|")]
    assert len(raw) == len(cols), (line, cols)
    cells = dict(zip(cols, raw))
    v = {c: (t if c in ("Model", "System", "Precision") else cell_value(t, pick))
         for c, t in cells.items()}
    model_cell = cells["Model"] if "Model" in cells else section.split(": ", 1)[1]
    system = cells["System"] if "System" in cells else section.split(": ", 1)[1]
    mname = model_cell.split(" (")[0]
    mark = model_cell[len(mname):].strip(" ()")  # "tokendrop", "dropless", "w/ MTP" or ""
    dual = [c for c, t in cells.items() if "(" in t and c != "Model"]
    prec = cells.get("Precision")
    if prec is None:  # 25.09: no precision column
        prec_id = "FP8-32x32" if pick == PAREN and system == "DGX-B200" else "FP8"
    else:
        prec_id = prec
    vp, ep = v["VP"], v["EP"]
    fsdp = v.get("FSDP")
    base = (rel, section, system, mname, v["#-GPUs"], prec or "FP8", v["GBS"], v["MBS"],
            v["Sequence Length"], fsdp or 0, v["TP"], v["PP"], v["CP"],
            None if vp == "n/a" else vp, None if ep == "n/a" else ep, v.get("GA"),
            v["Tokens / sec / GPU"], v["Model TFLOP / sec / GPU"], header)
    out = row(base)
    tp, pp, cp, gpus, gbs, seq = v["TP"], v["PP"], v["CP"], v["#-GPUs"], v["GBS"], v["Sequence Length"]
    mslug = model_cell.replace("/", " ")
    out["id"] = slug(f"bridge-{rel}-{system}-{mslug}-{prec_id}-{gpus}gpu-tp{tp}pp{pp}cp{cp}"
                     f"ep{ep if ep != 'n/a' else 1}-gbs{gbs}-seq{seq}")
    # the table's cells in its column order (the value this row takes where a cell holds two),
    # then the section's name
    pv = {"table_header": header}
    for c in cols:
        pv[c] = v[c] if c not in ("Model", "System", "Precision") else cells[c]
    if "Model" not in cols:
        pv["Model"] = model_cell
    if "System" not in cols:
        pv["System"] = system
    out["published_values"] = pv
    src, par, inf = out["source"], out["parallelism"], out["inferred_fields"]
    notes = []
    if fsdp is None:
        par["data_parallel_sharding"] = "Megatron distributed optimizer (no FSDP column on the page)"
        inf[-1] = ("parallelism.data_parallel_sharding: the table has no FSDP column; distributed "
                   "optimizer is the Megatron-Bridge recipes' default, not a table cell")
    if dual:
        which = "parenthesised" if pick == PAREN else "plain"
        notes.append("The row's cells " + ", ".join(f"{c} '{cells[c]}'" for c in dual) +
                     f": this row takes the {which} value" +
                     ("." if pick == PAREN else
                      " (the parenthesised one is another FP8 quantization granularity, the "
                      "page's footnote; " +
                      ("its tokens/s is not given, so it has no row)." if "Tokens / sec / GPU" not in dual
                       else "a row of its own).")))
    if prec is None:
        if pick == PAREN:
            par["precision"] = ("fp8 (32x32 quantization blocks for both weights and "
                                "activations, the page's footnote for B200)")
        else:
            par["precision"] = "fp8 (scaling recipe not stated on the page)"
        inf.append("parallelism.precision: the 25.09 tables have no precision column; the "
                   "footnote calls the parenthesised values other quantization granularities "
                   "(32x32 blocks on B200; 128x128 weights and 1x128 activations on H100), so "
                   "the table's runs are FP8; the plain values' scaling recipe is not stated")
    if mname == "DeepSeekV3":
        if mark == "w/ MTP":
            notes.append("The page's row is 'DeepSeekV3 (w/ MTP)': trained with the "
                         "multi-token-prediction block, which this format has no field for (the "
                         "row's model is the 61-layer model without it).")
        elif rel != "25.09":
            notes.append("The page does not say whether multi-token prediction was on.")
    if mark == "tokendrop":
        src["notes"] = " ".join(notes + [
            "The row is marked '(tokendrop)': MoE token dropping. The page gives no capacity "
            "factor, and its footnote's balancing of the token distribution is stated for the "
            "token-dropless rows only. Megatron-Bridge v0.1.0rc3 (tagged 2025-10-08, two days "
            "before this table) scripts/performance/run_script.py turns token drop on for "
            "Qwen3-30B-A3B and Qwen3-235B-A22B on every GPU and for DeepSeek-V3 on B200 and GB200 "
            "through apply_moe_token_drop (moe_token_drop.py: moe_expert_capacity_factor 1.0, "
            "moe_pad_expert_input_to_capacity True). The format has no capacity field: the row "
            "is read as dropless with balanced routing; at factor 1.0 with inputs padded to "
            "capacity every expert computes the balanced share of tokens."])
        src["supporting_urls"] += [RUN_SCRIPT_0109, TOKEN_DROP_0109]
        par["notes"] = ("token-drop (the page's '(tokendrop)'); capacity factor 1.0 with inputs "
                        "padded to capacity per v0.1.0rc3 run_script.py / moe_token_drop.py, not "
                        "a table cell; moe_token_dispatcher_type alltoall or alltoall_seq "
                        "(apply_moe_token_drop asserts one of them)")
        inf.append("source.notes / parallelism.notes: token-drop settings from Megatron-Bridge "
                   "v0.1.0rc3's performance scripts, not from the page")
    elif rel == "25.09":
        src["notes"] = " ".join(notes + [
            "The row is marked '(dropless)'; the page's footnote: token-dropless MoE benchmarks "
            "force-balance the token distribution among experts. Megatron-Bridge v0.1.0rc3 "
            "(tagged 2025-10-08) deepseek_v3_llm_pretrain.yaml lists this layout for H100 (1,024 "
            "GPUs, TP 2, PP 8, VP 4, EP 64, GBS 8192), and its run_script.py sets, for "
            "DeepSeek-V3 on H100: no token drop, the DeepEP dispatcher (enable_deepep) with "
            "moe_router_force_load_balancing, overlap_moe_expert_parallel_comm and "
            "delay_wgrad_compute on, recompute_modules mla_up_proj and mlp, pipeline layout "
            "'Et|(tt|)*30mL' (embedding and one layer on the first stage, the MTP block and "
            "loss on the last)."])
        src["supporting_urls"] += [DSV3_YAML_0109, RUN_SCRIPT_0109]
        par["notes"] = ("force-balanced routing, token-dropless; DeepEP dispatcher, "
                        "moe_a2a_overlap=True (overlap_moe_expert_parallel_comm), recompute of "
                        "mla_up_proj and mlp (v0.1.0rc3 run_script.py for H100, not table cells)")
        inf.append("source.notes / parallelism.notes: dispatcher, overlap, recompute and "
                   "pipeline layout from Megatron-Bridge v0.1.0rc3's performance scripts, not "
                   "from the page")
    elif notes:
        src["notes"] = " ".join([src["notes"]] + notes)
    return out


V030 = BRIDGE + "21b02e0cfb2f8ff907e0d8baee0c5205876c6812/"  # tag v0.3.0
# The Megatron-Bridge tag of each NeMo container release's performance scripts (25.11: v0.2.0,
# 26.02: v0.3.0, 26.04: v0.4.0) and its GPT-OSS / DeepSeek-V3 workload configs. Their
# recompute_modules are the same in every one of these tags: GPT-OSS-120B layernorm + moe_act on
# H100 and B200; DeepSeek-V3 mla_up_proj + mlp on H100, mla_up_proj on B200 (the v0.4.2 B200
# FP8-MX V2 config of the pp 8 x ep 32 row: mla_up_proj + mlp). With recompute_modules the
# scripts set recompute_granularity selective (utils/overrides.py, v0.2.0 helpers.py), and the
# list replaces Megatron-Core's default (core_attn).
BRIDGE_TAGS = {"25.11": (V020, "v0.2.0", "gpt_oss/workload_base_configs.py",
                         "deepseek/workload_base_configs.py"),
               "26.02": (V030, "v0.3.0", "gpt_oss/gpt_oss_workload_base_configs.py",
                         "deepseek/deepseek_workload_base_configs.py"),
               "26.04": (V040, "v0.4.0", "gpt_oss/gpt_oss_workload_base_configs.py",
                         "deepseek/deepseek_workload_base_configs.py")}
RECOMPUTE_MODULES = {("gpt-oss-120b", "H100"): "layernorm, moe_act",
                     ("gpt-oss-120b", "B200"): "layernorm, moe_act",
                     ("DeepSeek-V3", "H100"): "mla_up_proj, mlp",
                     ("DeepSeek-V3", "B200"): "mla_up_proj"}


def recipe_recompute(out):
    """The row's recipe recomputation (activation_recompute selective, the module list in
    recompute_detail), for GPT-OSS-120B and DeepSeek-V3 rows of 25.11 to 26.04.01 whose layout is
    their workload config's, and the 25.09 DeepSeek-V3 H100 row (v0.1.0rc3 run_script.py)."""
    if not out["id"].startswith("bridge-"):
        return out
    name, gpu = out["model"]["name"], out["hardware"]["gpu_model"]
    rel = out["source"]["date"]
    key = next((k for k in RECOMPUTE_MODULES if k[0] in name and k[1] == gpu), None)
    if key is None:
        return out
    par = out["parallelism"]
    if rel == "25.09":
        if gpu != "H100":
            return out  # v0.1.0rc3 sets recompute_modules for H100 and GB200 only
        par["activation_recompute"] = "selective"
        par["recompute_detail"] = ("recompute_modules mla_up_proj, mlp (Megatron-Bridge v0.1.0rc3 "
                                   "scripts/performance/run_script.py for DeepSeek-V3 on H100)")
        out["inferred_fields"].append("parallelism.activation_recompute / recompute_detail: "
                                      "the run script's recompute_modules, not a table cell")
        return out
    tag = BRIDGE_TAGS.get(rel[:5])
    if tag is None:
        return out
    base, version, gpt_oss_cfg, dsv3_cfg = tag
    modules = RECOMPUTE_MODULES[key]
    cfg = gpt_oss_cfg if key[0] == "gpt-oss-120b" else dsv3_cfg
    if out["id"] == "bridge-26-04-01-dgx-b200-deepseekv3-mxfp8-256gpu-tp1pp8cp1ep32-gbs4096-seq4096":
        base, version, modules = V042, "v0.4.2", "mla_up_proj, mlp"
    url = base + "scripts/performance/configs/" + cfg
    par["activation_recompute"] = "selective"
    par["recompute_detail"] = (f"recompute_modules {modules} (Megatron-Bridge {version} "
                               f"scripts/performance/configs/{cfg}, the {gpu} config)")
    if url not in out["source"]["supporting_urls"]:
        out["source"]["supporting_urls"].append(url)
    out["inferred_fields"].append(
        f"parallelism.activation_recompute / recompute_detail: the {gpu} workload config's "
        f"recompute_modules in Megatron-Bridge {version} (NeMo {rel}'s scripts), not a table cell")
    return out


if __name__ == "__main__":
    out = ([row(r) for r in ROWS] + [long_row(r) for r in LONG] +
           [long_b200_row(r) for r in LONG_B200] + grok_rows() + [more_row(r) for r in MORE])
    out = [recipe_recompute(o) for o in out]
    ids = [o["id"] for o in out]
    assert len(set(ids)) == len(ids), ids
    with open("bench/data/collected_runs.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote bench/data/collected_runs.json: {len(out)} rows")
