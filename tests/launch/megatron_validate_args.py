"""Megatron-LM's argument validation (validate_args in megatron/training/arguments.py) at the
commit below, as rules over the parsed arguments; used by tests/launch/validate_engines.py only.
The PyPI megatron-core wheel does not ship megatron/training, so its rules are transcribed here
(in our words, not its code): each rule is a condition under which it applies ("when"), what must
then hold ("must"), both Python expressions over `a` (the argparse namespace: the parser's
defaults of tests/launch/data/megatron_parser_core_v0.16.1.tsv, overridden by the argv, then
derive() below) and `env` (the environment train.sh hands to pretrain_gpt.py), plus `cc`, the
major CUDA compute capability of the target GPU. A broken rule is one whose "when" holds and
whose "must" does not.

Left out: the RL (--perform-rl-step), inference, FIM, local-checkpoint replication and
heterogeneous-layer branches, and the checks of installed versions (TE, torch) and of
nvidia_resiliency_ext; pentamesh emits none of those flags. The rules megatron-core itself
enforces (TransformerConfig.__post_init__: MoE router/dispatcher/capacity, recompute method vs
layers, layers per virtual stage; the micro-batch calculator) run in validate_engines.py from the
installed wheel.
"""

COMMIT = "55ac7082517c3878ae653c07c09c534b8aed49f6"  # tag core_v0.16.1
SOURCE = "megatron/training/arguments.py, validate_args"
HOPPER_OR_OLDER = 10  # validate_args' CUDA_DEVICE_MAX_CONNECTIONS rule: arch < 10 (pre-Blackwell)


def derive(a, world):
    """The values validate_args computes before (or between) its checks, applied first: each one
    only fills in or normalises what its later checks read."""
    a.world_size = world
    a.use_dist_ckpt = a.ckpt_format != "torch"  # update_use_dist_ckpt
    a.transformer_pipeline_model_parallel_size = a.pipeline_model_parallel_size
    a.data_parallel_size = world // (a.tensor_model_parallel_size
                                     * a.pipeline_model_parallel_size * a.context_parallel_size)
    if a.expert_tensor_parallel_size is None:
        a.expert_tensor_parallel_size = a.tensor_model_parallel_size
    if a.recompute_activations:
        a.recompute_granularity = "selective"
    if a.global_batch_size is None and a.micro_batch_size is not None:
        a.global_batch_size = a.micro_batch_size * a.data_parallel_size
    # The virtual pipeline degree: from the layers per virtual stage or the stages per rank (a
    # --pipeline-model-parallel-layout is parsed by megatron-core; not emitted, left None).
    a.virtual_pipeline_model_parallel_size = None
    layers = pipeline_split_layers(a)
    if a.num_virtual_stages_per_pipeline_rank is not None:
        a.virtual_pipeline_model_parallel_size = a.num_virtual_stages_per_pipeline_rank
    elif a.num_layers_per_virtual_pipeline_stage is not None and layers is not None:
        per_stage = layers // a.pipeline_model_parallel_size
        a.virtual_pipeline_model_parallel_size = (per_stage
                                                  // a.num_layers_per_virtual_pipeline_stage)
    if a.virtual_pipeline_model_parallel_size == 1:
        a.virtual_pipeline_model_parallel_size = None
    if a.virtual_pipeline_model_parallel_size is None:
        a.overlap_p2p_comm = False
        a.align_param_gather = False
    if a.bf16 and not a.grad_reduce_in_bf16 and a.main_grads_dtype == "fp32":
        a.accumulate_allreduce_grads_in_fp32 = True
    if a.num_layers is not None:
        a.encoder_num_layers = a.num_layers
    if a.seq_length is not None:
        a.encoder_seq_length = a.seq_length
    if a.tensor_model_parallel_size == 1:
        a.sequence_parallel = False  # with a warning
    if a.use_rotary_position_embeddings:
        a.position_embedding_type = "rope"
    if a.num_experts == 0:
        a.num_experts = None
    if a.fake_process_group:
        a.enable_gloo_process_groups = False


def pipeline_split_layers(a):
    """The layers the pipeline split divides: the decoder layers, plus one for the embedding and
    one for the loss when they count as a layer."""
    n = a.num_layers if a.num_layers is not None else a.decoder_num_layers
    if n is None:
        return None
    return n + int(bool(a.account_for_embedding_in_pipeline_split)) + int(
        bool(a.account_for_loss_in_pipeline_split))


# (id, line of the check in arguments.py at COMMIT, when, must, what the rule says)
RULES = [
    ("ckpt-nonpersistent-type", 296, "True",
     "a.non_persistent_ckpt_type in ('global', 'local', None)",
     "non-persistent checkpoints are global or local"),
    ("legacy-ckpt-torch", 310, "a.use_legacy_models", "a.ckpt_format == 'torch'",
     "legacy models save only the torch format"),
    ("world-divisible", 317, "True",
     "a.world_size % (a.tensor_model_parallel_size * a.pipeline_model_parallel_size"
     " * a.context_parallel_size) == 0",
     "the world size is a multiple of tp x pp x cp"),
    ("attn-local-needs-local-spec", 322, "a.attention_backend == 'local'",
     "a.spec is not None and a.spec[0] == 'local'",
     "the local attention backend only with --spec local"),
    ("hier-cp-product", 405, "a.hierarchical_context_parallel_sizes",
     "a.context_parallel_size == __import__('math').prod(a.hierarchical_context_parallel_sizes)",
     "cp equals the product of the hierarchical cp sizes"),
    ("cp-a2a-p2p-needs-hier", 407, "'a2a+p2p' in a.cp_comm_type",
     "a.hierarchical_context_parallel_sizes is not None",
     "cp comm type a2a+p2p needs --hierarchical-context-parallel-sizes"),
    ("deprecated-batch-size", 414, "True", "a.batch_size is None",
     "--batch-size is gone: --micro-batch-size"),
    ("deprecated-warmup", 417, "True", "a.warmup is None",
     "--warmup is gone: --lr-warmup-fraction"),
    ("deprecated-model-parallel-size", 420, "True", "a.model_parallel_size is None",
     "--model-parallel-size is gone: --tensor-model-parallel-size"),
    ("deprecated-checkpoint-activations", 427, "True", "not a.checkpoint_activations",
     "--checkpoint-activations exits the program: --recompute-*"),
    ("cuda-graph-old-and-impl", 435, "a.enable_cuda_graph or a.external_cuda_graph",
     "a.cuda_graph_impl == 'none'",
     "the old CUDA-graph switches not with --cuda-graph-impl"),
    ("cuda-graph-old-both", 438, "True", "not (a.enable_cuda_graph and a.external_cuda_graph)",
     "--enable-cuda-graph and --external-cuda-graph exclude each other"),
    ("data-path-one-form", 477, "True", "a.data_path is None or a.data_args_path is None",
     "--data-path or --data-args-path, not both"),
    ("per-split-data-one-form", 484, "True",
     "a.per_split_data_args_path is None or all(p is None for p in"
     " (a.train_data_path, a.valid_data_path, a.test_data_path))",
     "per-split paths or --per-split-data-args-path, not both"),
    ("phases-no-rampup", 492, "a.phase_transition_iterations", "a.rampup_batch_size is None",
     "multi-phase training has no batch ramp-up"),
    ("micro-batch-set", 495, "True",
     "a.micro_batch_size is not None and a.micro_batch_size > 0",
     "--micro-batch-size is given and positive"),
    ("global-batch-positive", 500, "True", "a.global_batch_size > 0",
     "the global batch is positive"),
    ("vpp-one-form", 503, "True",
     "(a.num_layers_per_virtual_pipeline_stage is not None)"
     " + (a.num_virtual_stages_per_pipeline_rank is not None)"
     " + (a.pipeline_model_parallel_layout is not None) <= 1",
     "at most one of layers-per-virtual-stage, virtual-stages-per-rank, pipeline layout"),
    ("vpp-layers-no-uneven", 530,
     "a.num_layers_per_virtual_pipeline_stage is not None"
     " and a.num_virtual_stages_per_pipeline_rank is None"
     " and a.pipeline_model_parallel_layout is None",
     "a.decoder_first_pipeline_num_layers is None and a.decoder_last_pipeline_num_layers is None",
     "uneven first/last stages need --num-virtual-stages-per-pipeline-rank"),
    ("vpp-layers-divisible-pp", 543,
     "a.num_layers_per_virtual_pipeline_stage is not None"
     " and a.num_virtual_stages_per_pipeline_rank is None"
     " and a.pipeline_model_parallel_layout is None",
     "pipeline_split_layers(a) % a.pipeline_model_parallel_size == 0",
     "the layers (+ embedding, + loss when counted) divide by pp"),
    ("vpp-layers-per-stage", 547,
     "a.num_layers_per_virtual_pipeline_stage is not None"
     " and a.num_virtual_stages_per_pipeline_rank is None"
     " and a.pipeline_model_parallel_layout is None",
     "(pipeline_split_layers(a) // a.pipeline_model_parallel_size)"
     " % a.num_layers_per_virtual_pipeline_stage == 0",
     "the layers per pipeline stage divide by the layers per virtual stage"),
    ("pp-layers-divisible", 570,
     "a.num_layers_per_virtual_pipeline_stage is None"
     " and a.num_virtual_stages_per_pipeline_rank is None"
     " and a.pipeline_model_parallel_layout is None"
     " and a.decoder_first_pipeline_num_layers is None"
     " and a.decoder_last_pipeline_num_layers is None and a.num_layers is not None",
     "pipeline_split_layers(a) % a.pipeline_model_parallel_size == 0",
     "without virtual or uneven stages the layers (+ embedding, + loss) divide by pp"),
    ("vpp-pp-gt-1", 575,
     "a.virtual_pipeline_model_parallel_size is not None and a.overlap_p2p_comm",
     "a.pipeline_model_parallel_size > 1",
     "the interleaved schedule needs pp > 1"),
    ("vpp-pp-gt-2-without-overlap", 579,
     "a.virtual_pipeline_model_parallel_size is not None and not a.overlap_p2p_comm",
     "a.pipeline_model_parallel_size > 2",
     "the interleaved schedule without P2P overlap needs pp > 2"),
    ("param-gather-needs-sharding", 598, "a.overlap_param_gather",
     "a.use_distributed_optimizer or a.use_megatron_fsdp",
     "--overlap-param-gather needs the distributed optimizer or Megatron-FSDP"),
    ("param-gather-needs-grad-reduce", 600, "a.overlap_param_gather", "a.overlap_grad_reduce",
     "--overlap-param-gather needs --overlap-grad-reduce"),
    ("param-gather-mcore", 602, "a.overlap_param_gather", "not a.use_legacy_models",
     "--overlap-param-gather needs megatron-core models"),
    ("fsdp2-no-pp", 608, "a.use_torch_fsdp2", "a.pipeline_model_parallel_size == 1",
     "torch FSDP2 without pipeline parallelism"),
    ("fsdp2-no-ep", 610, "a.use_torch_fsdp2", "a.expert_model_parallel_size == 1",
     "torch FSDP2 without expert parallelism"),
    ("fsdp2-no-dist-opt", 612, "a.use_torch_fsdp2", "not a.use_distributed_optimizer",
     "torch FSDP2 without the distributed optimizer"),
    ("fsdp2-no-grad-acc-fusion", 614, "a.use_torch_fsdp2", "not a.gradient_accumulation_fusion",
     "torch FSDP2 needs --no-gradient-accumulation-fusion"),
    ("fsdp2-ckpt-format", 616, "a.use_torch_fsdp2", "a.ckpt_format in ('torch_dist', 'torch_dcp')",
     "torch FSDP2 saves torch_dist or torch_dcp"),
    ("fsdp2-untied", 618, "a.use_torch_fsdp2", "a.untie_embeddings_and_output_weights",
     "torch FSDP2 needs untied embeddings"),
    ("fsdp2-no-fp16", 620, "a.use_torch_fsdp2", "not a.fp16", "torch FSDP2 not in fp16"),
    ("fsdp2-cuda-connections", 622, "a.use_torch_fsdp2",
     "env.get('CUDA_DEVICE_MAX_CONNECTIONS') != '1'",
     "torch FSDP2 needs CUDA_DEVICE_MAX_CONNECTIONS other than 1"),
    ("pg-opt-step-dist-opt", 636, "a.overlap_param_gather_with_optimizer_step",
     "a.use_distributed_optimizer", "param-gather overlap with the step needs the dist. optimizer"),
    ("pg-opt-step-overlap", 638, "a.overlap_param_gather_with_optimizer_step",
     "a.overlap_param_gather", "param-gather overlap with the step needs --overlap-param-gather"),
    ("pg-opt-step-vpp", 640, "a.overlap_param_gather_with_optimizer_step",
     "a.virtual_pipeline_model_parallel_size is not None",
     "param-gather overlap with the step needs the interleaved schedule"),
    ("pg-opt-step-no-dist-ckpt", 642, "a.overlap_param_gather_with_optimizer_step",
     "not a.use_dist_ckpt", "param-gather overlap with the step not with dist. checkpoints"),
    ("fp8-param-gather-sharded", 656, "a.fp8_param_gather",
     "a.use_distributed_optimizer or a.use_torch_fsdp2 or a.use_megatron_fsdp",
     "--fp8-param-gather needs the distributed optimizer or an FSDP (training)"),
    ("fp4-xor-fp8", 661, "True", "not (a.fp4 and a.fp8)", "fp4 and fp8 formats exclude each other"),
    ("fp4-param-needs-fp4", 665, "a.fp4_param", "a.fp4", "--fp4-param needs --fp4-format"),
    ("mfsdp-weight-hash", 684,
     "a.use_megatron_fsdp and a.data_parallel_sharding_strategy == 'optim_grads_params'",
     "a.check_weight_hash_across_dp_replicas_interval is None",
     "ZeRO-3 Megatron-FSDP without the weight-hash check"),
    ("mfsdp-cuda-connections", 687, "a.use_megatron_fsdp",
     "env.get('CUDA_DEVICE_MAX_CONNECTIONS') != '1'",
     "Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS other than 1"),
    ("mfsdp-ckpt-format", 690, "a.use_megatron_fsdp", "a.ckpt_format == 'fsdp_dtensor'",
     "Megatron-FSDP saves only fsdp_dtensor"),
    ("fsdp-manual-reg", 694, "a.fsdp_manual_registration", "a.use_megatron_fsdp and a.nccl_ub",
     "FSDP manual registration needs Megatron-FSDP and --nccl-ub"),
    ("fp16-xor-bf16", 703, "a.fp16 or a.bf16", "not (a.fp16 and a.bf16)",
     "fp16 and bf16 exclude each other"),
    ("bf16-fp32-accumulation", 717, "a.bf16 and a.accumulate_allreduce_grads_in_fp32",
     "a.main_grads_dtype == 'fp32'",
     "fp32 gradient accumulation with bf16 keeps fp32 main gradients"),
    ("dataset-threads", 739, "True", "a.num_dataset_builder_threads > 0",
     "at least one dataset builder thread"),
    ("iters-no-train-samples", 759, "a.train_iters", "a.train_samples is None",
     "iteration-based training: no --train-samples"),
    ("iters-no-decay-samples", 761, "a.train_iters", "a.lr_decay_samples is None",
     "iteration-based training: no --lr-decay-samples"),
    ("iters-no-warmup-samples", 763, "a.train_iters", "a.lr_warmup_samples == 0",
     "iteration-based training: no --lr-warmup-samples"),
    ("iters-no-rampup", 765, "a.train_iters", "a.rampup_batch_size is None",
     "iteration-based training: no batch ramp-up"),
    ("iters-warmup-one-form", 768, "a.train_iters and a.lr_warmup_fraction is not None",
     "a.lr_warmup_iters == 0", "--lr-warmup-fraction or --lr-warmup-iters, not both"),
    ("samples-no-iters", 775, "a.train_samples", "a.train_iters is None",
     "sample-based training: no --train-iters"),
    ("samples-no-decay-iters", 777, "a.train_samples", "a.lr_decay_iters is None",
     "sample-based training: no --lr-decay-iters"),
    ("samples-no-warmup-iters", 779, "a.train_samples", "a.lr_warmup_iters == 0",
     "sample-based training: no --lr-warmup-iters"),
    ("layers-one-form", 787, "a.num_layers is not None",
     "a.encoder_num_layers in (None, a.num_layers)",
     "--num-layers or --encoder-num-layers, not both"),
    ("required-shape", 799, "True",
     "None not in (a.num_layers, a.hidden_size, a.num_attention_heads,"
     " a.max_position_embeddings)",
     "layers, hidden size, heads and max positions are required"),
    ("heads-divide-hidden", 814, "a.kv_channels is None",
     "a.hidden_size % a.num_attention_heads == 0",
     "without --kv-channels the heads divide the hidden size"),
    ("seq-divisible-2cp", 818, "a.seq_length is not None and a.context_parallel_size > 1",
     "a.seq_length % (2 * a.context_parallel_size) == 0",
     "the sequence is a multiple of 2 x cp"),
    ("seq-one-form", 823, "a.seq_length is not None",
     "a.encoder_seq_length in (None, a.seq_length)",
     "--seq-length or --encoder-seq-length, not both"),
    ("positions-cover-seq", 830, "a.seq_length is not None",
     "a.max_position_embeddings >= a.seq_length",
     "--max-position-embeddings is at least --seq-length"),
    ("positions-cover-decoder-seq", 834, "a.decoder_seq_length is not None",
     "a.max_position_embeddings >= a.decoder_seq_length",
     "--max-position-embeddings is at least --decoder-seq-length"),
    ("min-lr-le-lr", 836, "a.lr is not None", "a.min_lr <= a.lr", "--min-lr is at most --lr"),
    ("save-interval", 838, "a.save is not None",
     "a.save_interval is not None and a.save_interval > 0",
     "--save needs a positive --save-interval"),
    ("save-retain-interval", 841, "a.save is not None and a.save_retain_interval is not None",
     "a.save_retain_interval > 0 and a.save_retain_interval % a.save_interval == 0",
     "the retain interval is a positive multiple of the save interval"),
    ("memory-log-interval", 844, "a.log_memory_interval is not None",
     "a.log_memory_interval % a.log_interval == 0",
     "the memory log interval is a multiple of the log interval"),
    ("fp16-ce-needs-fp16", 847, "a.fp16_lm_cross_entropy", "a.fp16",
     "fp16 cross entropy only in fp16"),
    ("fp32-residual-half", 849, "a.fp32_residual_connection", "a.fp16 or a.bf16",
     "fp32 residuals only with fp16 or bf16"),
    ("grouped-gemm-ampere", 854, "a.moe_grouped_gemm", "cc >= 8",
     "grouped GEMM experts need compute capability 8 or more"),
    ("wd-constant-no-range", 868, "a.weight_decay_incr_style == 'constant'",
     "a.start_weight_decay is None and a.end_weight_decay is None",
     "constant weight decay takes no start/end"),
    ("wd-schedule-range", 873, "a.weight_decay_incr_style != 'constant'",
     "a.start_weight_decay is not None and a.end_weight_decay is not None",
     "a weight-decay schedule needs start and end"),
    ("distribute-saved-tp", 885, "a.distribute_saved_activations",
     "a.tensor_model_parallel_size > 1", "distributed saved activations need tp > 1"),
    ("distribute-saved-full", 888, "a.distribute_saved_activations",
     "a.recompute_granularity == 'full' and a.recompute_method is not None",
     "distributed saved activations need full recompute with a method"),
    ("selective-no-method", 900, "a.recompute_granularity == 'selective'",
     "a.recompute_method is None", "selective recompute takes no --recompute-method"),
    ("tp-overlap-needs-sp", 916, "a.tp_comm_overlap", "a.sequence_parallel",
     "TP communication overlap needs sequence parallelism (and tp > 1)"),
    ("hybrid-cp", 919, "a.hybrid_context_parallel",
     "a.pipeline_model_parallel_size == 1 and not a.enable_cuda_graph"
     " and not a.use_megatron_fsdp and a.dataloader_type in (None, 'single')"
     " and a.calculate_per_token_loss",
     "hybrid cp: no pp, CUDA graph or Megatron-FSDP; single loader; per-token loss"),
    ("tp-cp-cuda-connections", 951,
     "(a.tensor_model_parallel_size > 1 or a.context_parallel_size > 1)"
     " and cc < HOPPER_OR_OLDER and not (a.use_torch_fsdp2 or a.use_megatron_fsdp"
     " or a.overlap_moe_expert_parallel_comm)",
     "env.get('CUDA_DEVICE_MAX_CONNECTIONS') == '1'",
     "tp or cp before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1"),
    ("legacy-decoupled-lr", 986, "a.decoupled_lr is not None or a.decoupled_min_lr is not None",
     "not a.use_legacy_models", "decoupled learning rates need megatron-core models"),
    ("legacy-rotary-interleaved", 993, "a.rotary_interleaved", "not a.use_legacy_models",
     "interleaved rotary needs megatron-core models"),
    ("no-position-embedding-deprecated", 1000, "not a.add_position_embedding",
     "a.position_embedding_type == 'rope'",
     "--no-position-embedding is deprecated: --position-embedding-type"),
    ("relative-needs-te", 1004, "a.position_embedding_type == 'relative'",
     "a.transformer_impl == 'transformer_engine'",
     "relative position embeddings need Transformer Engine"),
    ("mrope-section", 1010, "a.position_embedding_type == 'mrope'", "a.mrope_section is not None",
     "mrope needs --mrope-section"),
    ("cp-mcore", 1022, "a.context_parallel_size > 1", "not a.use_legacy_models",
     "context parallelism needs megatron-core models"),
    ("ep-needs-experts", 1026, "a.expert_model_parallel_size > 1", "a.num_experts is not None",
     "expert parallelism needs --num-experts"),
    ("ep-divides-experts", 1027,
     "a.expert_model_parallel_size > 1 and a.num_experts is not None",
     "a.num_experts % a.expert_model_parallel_size == 0", "ep divides the experts"),
    ("legacy-dist-ckpt", 1038, "a.use_legacy_models", "not a.use_dist_ckpt",
     "legacy models without distributed checkpoints"),
    ("torch-dcp", 1042, "a.ckpt_format == 'torch_dcp'",
     "a.use_torch_fsdp2 and a.tensor_model_parallel_size <= 1"
     " and a.pipeline_model_parallel_size <= 1",
     "torch_dcp checkpoints only with torch FSDP2, no tp, no pp"),
    ("fsdp-dtensor-needs-mfsdp", 1050, "a.ckpt_format == 'fsdp_dtensor'", "a.use_megatron_fsdp",
     "fsdp_dtensor checkpoints only with Megatron-FSDP"),
    ("one-data-source", 1053, "True",
     "a.mock_data + bool(a.data_path) + any((a.train_data_path, a.valid_data_path,"
     " a.test_data_path)) <= 1",
     "one data source: mock, --data-path or per-split paths"),
    ("deterministic", 1074, "a.deterministic_mode",
     "not a.use_flash_attn and not a.cross_entropy_loss_fusion and env.get('NCCL_ALGO') in"
     " ('Tree', 'Ring', 'CollnetDirect', 'CollnetChain', '^NVLS')",
     "deterministic mode: no flash attention or fused CE; NCCL_ALGO set"),
    ("no-gloo-dist-opt-dist-ckpt", 1100,
     "not a.enable_gloo_process_groups and a.use_distributed_optimizer", "a.use_dist_ckpt",
     "without Gloo groups the distributed optimizer needs distributed checkpoints"),
    ("fake-pg-no-flex", 1107, "a.fake_process_group", "a.moe_token_dispatcher_type != 'flex'",
     "the fake process group not with the flex dispatcher"),
    ("main-params-no-load-optim", 1136, "a.load_main_params_from_ckpt", "a.no_load_optim",
     "--load-main-params-from-ckpt needs --no-load-optim"),
    ("cuda-graph-ep-padding", 1159,
     "a.cuda_graph_impl == 'local' and a.expert_model_parallel_size > 1",
     "a.moe_pad_experts_for_cuda_graph_inference",
     "local CUDA graphs with ep need expert padding"),
    ("upcycling-save", 1164, "a.moe_use_upcycling", "a.save is not None",
     "upcycling needs --save"),
    ("muon", 1181, "'muon' in a.optimizer",
     "not (a.overlap_grad_reduce or a.overlap_param_gather or a.use_distributed_optimizer"
     " or a.use_torch_fsdp2 or a.use_megatron_fsdp) and a.ckpt_format in ('torch', 'torch_dist')",
     "Muon: no overlap, no distributed optimizer or FSDP, torch/torch_dist checkpoints"),
    ("cpu-offload-precision-aware", 1191, "a.optimizer_cpu_offload",
     "a.use_precision_aware_optimizer",
     "optimizer CPU offload needs --use-precision-aware-optimizer"),
    ("cpu-offload-fp8-delayed", 1195, "a.optimizer_cpu_offload and a.fp8_param_gather",
     "a.fp8_recipe == 'delayed'", "optimizer CPU offload with fp8 gather needs delayed scaling"),
    ("delay-wgrad-te", 1210, "a.delay_wgrad_compute",
     "a.transformer_impl == 'transformer_engine'", "delayed wgrad needs Transformer Engine"),
    ("act-offload-te", 1223, "a.fine_grained_activation_offloading",
     "a.transformer_impl == 'transformer_engine'",
     "fine-grained activation offloading needs Transformer Engine"),
    ("mtp-mcore", 1230, "a.mtp_num_layers", "not a.use_legacy_models",
     "MTP needs megatron-core models"),
    ("mtp-position", 1231, "a.mtp_num_layers", "a.position_embedding_type in ('rope', 'none')",
     "MTP needs rope or no position embedding"),
    ("cuda-graph-full-alone", 1259,
     "isinstance(a.cuda_graph_scope, list) and 'full' in a.cuda_graph_scope",
     "a.cuda_graph_scope == ['full']", "the full CUDA-graph scope stands alone"),
    ("mla-xor-gqa", 1266, "a.multi_latent_attention", "not a.group_query_attention",
     "multi-latent attention and grouped-query attention exclude each other"),
    ("moe-latent", 1270, "a.moe_latent_size is not None",
     "a.moe_latent_size > 0 and a.num_experts is not None and not a.use_legacy_models"
     " and not a.moe_use_legacy_grouped_gemm",
     "MoE latent projections: positive, MoE models, megatron-core, no legacy grouped GEMM"),
]


def broken(a, env, cc):
    """The ids of the rules the namespace breaks (after derive())."""
    scope = {"a": a, "env": env, "cc": cc, "HOPPER_OR_OLDER": HOPPER_OR_OLDER,
             "pipeline_split_layers": pipeline_split_layers}
    out = []
    for rule_id, line, when, must, _ in RULES:
        if eval(when, scope) and not eval(must, scope):  # noqa: S307 - our own table
            out.append(f"{rule_id} (arguments.py:{line})")
    return out
