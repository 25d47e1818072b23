// torchtitan: job.toml for the released 0.2.x line (torchtitan.config.ConfigManager's TOML), the
// equivalent --section.key overrides for current main (a Python config registry whose batch keys
// are token counts), sbatch.sh; and the reverse: a 0.2.x TOML back into model, batch and layout.
//
// Layout -> TOML: ZeRO 2/3 are FSDP2 over dp_shard = engine DP (fsdp_reshard_after_forward
// "never" / "always"); ZeRO 0 is DDP (dp_replicate = engine DP). Without PP local_batch_size is
// the micro-batch (gradient accumulation = global / (local x DP)); with PP it is the sequences of
// one rank's step, cut into pipeline_parallel_microbatch_size micro-batches, so the pipeline sees
// all of them in one flush as pentamesh's schedules do. Stage split: layers_per_stage = n and
// first/last_stage_less_layers as spec::ChunkLayers splits.
#include <fmt/format.h>

#include <toml++/toml.h>

#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "core/check.h"
#include "core/quote.h"
#include "launch/internal.h"
#include "schedule/table.h"
#include "spec/limits.h"
#include "spec/load_toml.h"
#include "spec/toml_parse.h"

namespace pentamesh::launch::internal {
namespace {

struct Flavor {
  const char* preset;
  const char* name;
  const char* flavor;
};
// pentamesh presets that are torchtitan's own registered flavors.
constexpr Flavor kFlavors[] = {{"llama3-8b", "llama3", "8B"},
                               {"llama3-70b", "llama3", "70B"},
                               {"llama3-405b", "llama3", "405B"}};

// torchtitan's name of the layout's schedule (launch.h EngineSchedules); a single stage runs
// torchtitan's default, 1F1B.
const char* ScheduleName(const spec::Layout& l) {
  const EngineSchedule* row = FindEngineSchedule(Engine::kTorchtitan, l.schedule);
  if (l.pp == 1 || row == nullptr || row->name == nullptr) {
    PM_CHECK(l.pp == 1) << "torchtitan cannot run schedule " << spec::ToString(l.schedule)
                        << " (its capability rules refuse it before the files are written)";
    return "1F1B";
  }
  return row->name;
}

// activation_checkpoint.mode for each recomputation, both ways.
struct RecomputeMode {
  spec::Recompute recompute;
  const char* mode;
};
constexpr RecomputeMode kRecomputeModes[] = {{spec::Recompute::kNone, "none"},
                                             {spec::Recompute::kSelective, "selective"},
                                             {spec::Recompute::kFull, "full"}};

const char* RecomputeName(spec::Recompute r) {
  for (const RecomputeMode& m : kRecomputeModes) {
    if (m.recompute == r) return m.mode;
  }
  return "none";
}

// What job.toml and overrides.txt both say: the model entry, the data-parallel split and the
// stage split.
struct TitanJob {
  std::string name, flavor;  // torchtitan's model name and flavor
  bool registered = false;   // a flavor torchtitan ships (else the user registers it)
  int64_t dp = 0, seqs = 0;  // engine DP, sequences per step
  bool fsdp = false;         // FSDP2 over dp_shard (ZeRO 2/3), else DDP over dp_replicate
  int64_t per_stage = 0;     // pipeline_parallel_layers_per_stage
  int64_t deficit = 0;       // SplitDeficit: layers fewer in the first (2) and last (>= 1) stage
};

TitanJob MakeTitanJob(const EmitInput& in) {
  const spec::Layout& l = in.layout;
  const spec::ModelSpec& m = in.model;
  TitanJob job{.name = m.is_moe() ? "qwen3" : "llama3", .flavor = m.name};
  for (const Flavor& f : kFlavors) {
    if (m.name == f.preset) {
      job.name = f.name;
      job.flavor = f.flavor;
      job.registered = true;
    }
  }
  job.dp = EngineDataParallel(l);
  job.seqs = in.train.global_batch_seqs();
  job.fsdp = l.zero >= 2;
  const int64_t chunks = l.pp * l.virtual_stages;
  job.per_stage = spec::ChunkLayers(m.layers, chunks, chunks > 1 ? 1 : 0);
  job.deficit = SplitDeficit(m, l);
  return job;
}

// The comment telling the user to register a flavor torchtitan does not ship, with its shape.
std::string RegisterFlavorNote(const spec::ModelSpec& m, const TitanJob& job) {
  return fmt::format(
      "# model.flavor '{}' is not one of torchtitan's registered flavors: register it in\n"
      "# torchtitan/models/{}/__init__.py with: layers {}, dim {}, heads {}, kv heads {}, head\n"
      "# dim {}, FFN {}, vocab {}, rope theta {}{}.\n",
      core::CommentText(job.flavor), job.name, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim,
      m.ffn_hidden, m.vocab, m.rope_theta,
      m.is_moe()
          ? fmt::format(
                ", {} experts top-{} of FFN {}, first {} layers dense, every {} layer MoE,\n# "
                "MoEArgs(num_experts={}, num_shared_experts={}, top_k={}, score_func=\"softmax\", "
                "route_norm={}),\n# Qwen3ModelArgs(qk_norm=False) (qwen3's default adds q/k "
                "RMSNorms this model does not have)",
                m.moe.experts, m.moe.top_k, m.moe.expert_ffn_hidden, m.moe.first_dense_layers,
                m.moe.moe_layer_freq, m.moe.experts, m.moe.shared_experts, m.moe.top_k,
                m.moe.router == spec::MoeRouter::kTopKRenorm ? "True" : "False")
          : std::string());
}

// job.toml's [parallelism] table.
std::string ParallelismToml(const EmitInput& in, const TitanJob& job) {
  const spec::Layout& l = in.layout;
  std::string t = fmt::format(
      "\n[parallelism]\ndata_parallel_replicate_degree = {}\ndata_parallel_shard_degree = {}\n"
      "fsdp_reshard_after_forward = \"{}\"\ntensor_parallel_degree = {}\n"
      "enable_async_tensor_parallel = false\npipeline_parallel_degree = {}\n",
      job.fsdp ? 1 : job.dp, job.fsdp ? job.dp : 1, l.zero == 2 ? "never" : "always", l.tp, l.pp);
  if (l.pp > 1) {
    t += fmt::format(
        "pipeline_parallel_schedule = \"{}\"\npipeline_parallel_microbatch_size = {}\n"
        "pipeline_parallel_layers_per_stage = {}\npipeline_parallel_first_stage_less_layers = {}\n"
        "pipeline_parallel_last_stage_less_layers = {}\n",
        ScheduleName(l), l.mbs, job.per_stage, job.deficit == 2 ? 1 : 0, job.deficit >= 1 ? 1 : 0);
  }
  t += fmt::format("context_parallel_degree = {}\n", l.cp);
  if (in.model.is_moe()) {
    t += fmt::format("expert_parallel_degree = {}\nexpert_tensor_parallel_degree = {}\n", l.ep,
                     ExpertTensorParallel(l));
  }
  return t;
}

// job.toml for torchtitan 0.2.x.
std::string JobToml(const EmitInput& in, const TitanJob& job) {
  const spec::Layout& l = in.layout;
  const spec::ModelSpec& m = in.model;
  const int64_t local = l.pp > 1 ? job.seqs / job.dp : l.mbs;
  std::string t = Header(Engine::kTorchtitan, in, "# ");
  t += "# torchtitan 0.2.x job config: torchrun ... -m torchtitan.train --job.config_file "
       "job.toml\n";
  if (!job.registered) t += RegisterFlavorNote(m, job);
  t += "\n[job]\ndump_folder = \"./outputs\"\n";
  // The model's name is the user's: TOML-escaped (core::TomlString) wherever it is a value.
  t += fmt::format("description = {}\n",
                   core::TomlString("pentamesh: " + m.name + " " + spec::ShortLayout(l)));
  t += fmt::format("\n[model]\nname = {}\nflavor = {}\n", core::TomlString(job.name),
                   core::TomlString(job.flavor));
  if (in.train.precision == spec::Precision::kFp8) {
    t += "converters = [\"quantize.linear.float8\"]\n";
  }
  t += "\n[optimizer]\nname = \"AdamW\"\nlr = 3e-4\neps = 1e-8\n";
  t += fmt::format("\n[lr_scheduler]\nwarmup_steps = {}\n",
                   std::min<int64_t>(2000, std::max<int64_t>(1, TrainIters(in.train) / 100)));
  t += fmt::format(
      "\n[training]\nlocal_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\nmax_norm = 1.0\n"
      "steps = {}\nmixed_precision_param = \"{}\"\n",
      local, job.seqs, in.train.seq_len, TrainIters(in.train),
      in.train.precision == spec::Precision::kFp32 ? "float32" : "bfloat16");
  t += ParallelismToml(in, job);
  t += fmt::format("\n[activation_checkpoint]\nmode = \"{}\"\n", RecomputeName(l.recompute));
  if (l.recompute == spec::Recompute::kSelective) t += "selective_ac_option = \"op\"\n";
  t += "\n[compile]\nenable = false\n";
  t += "\n[checkpoint]\nenable = true\nfolder = \"checkpoint\"\ninterval = 1000\n";
  return t;
}

// overrides.txt for current main: --module/--config pick a registry entry; batch keys count
// tokens.
std::string OverridesTxt(const EmitInput& in, const TitanJob& job) {
  const spec::Layout& l = in.layout;
  std::string o = Header(Engine::kTorchtitan, in, "# ");
  o += fmt::format(
      "# torchtitan main: torchrun ... -m torchtitan.train --module {} --config <your {} config> "
      "$(grep -v '^#' overrides.txt)\n",
      job.name, core::CommentText(job.flavor));
  auto kv = [&o](const std::string& k, const std::string& v) { o += "--" + k + " " + v + "\n"; };
  kv("training.num_tokens_per_microbatch_per_dp_rank", std::to_string(l.mbs * in.train.seq_len));
  kv("training.num_tokens_per_train_step", std::to_string(in.train.global_batch_tokens));
  kv("training.max_context_length", std::to_string(in.train.seq_len));
  kv("training.steps", std::to_string(TrainIters(in.train)));
  kv("parallelism.data_parallel_replicate_degree", std::to_string(job.fsdp ? 1 : job.dp));
  kv("parallelism.data_parallel_shard_degree", std::to_string(job.fsdp ? job.dp : 1));
  kv("parallelism.fsdp_reshard_after_forward", l.zero == 2 ? "never" : "always");
  kv("parallelism.tensor_parallel_degree", std::to_string(l.tp));
  kv("parallelism.pipeline_parallel_degree", std::to_string(l.pp));
  if (l.pp > 1) {
    kv("parallelism.pipeline_parallel_schedule", ScheduleName(l));
    kv("parallelism.num_pp_microbatches", std::to_string(job.seqs / (job.dp * l.mbs)));
    kv("parallelism.pipeline_parallel_layers_per_stage", std::to_string(job.per_stage));
    kv("parallelism.pipeline_parallel_first_stage_less_layers", job.deficit == 2 ? "1" : "0");
    kv("parallelism.pipeline_parallel_last_stage_less_layers", job.deficit >= 1 ? "1" : "0");
  }
  kv("parallelism.context_parallel_degree", std::to_string(l.cp));
  if (in.model.is_moe()) kv("parallelism.expert_parallel_degree", std::to_string(l.ep));
  kv("activation_checkpoint.mode", RecomputeName(l.recompute));
  return o;
}

// sbatch.sh: torchtitan's launcher is torchrun, exactly one per node, which starts the node's
// GPUs' processes: the allocation asks for one task per node with all its GPUs, and srun says the
// task count and gives the task the node's CPUs. $SLURM_NODEID is the task's (single quotes: the
// task's shell expands it, not the batch script's).
std::string TorchrunSbatch(const EmitInput& in) {
  return SbatchPreamble(Engine::kTorchtitan, in, 1) +
         fmt::format(
             "srun --ntasks=\"$SLURM_NNODES\" --ntasks-per-node=1 "
             "--cpus-per-task=\"$SLURM_CPUS_ON_NODE\" --kill-on-bad-exit=1 bash -c 'exec torchrun "
             "--nnodes=\"$SLURM_NNODES\" --nproc_per_node={} --node_rank=\"$SLURM_NODEID\" "
             "--rdzv_backend=c10d --rdzv_endpoint=\"$MASTER_ADDR:$MASTER_PORT\" -m "
             "torchtitan.train "
             "--job.config_file job.toml'\n",
             GpusPerNode(in));
}

}  // namespace

std::vector<File> EmitTorchtitan(const EmitInput& in) {
  const TitanJob job = MakeTitanJob(in);
  return {File{"job.toml", JobToml(in, job), false},
          File{"overrides.txt", OverridesTxt(in, job), false},
          File{"sbatch.sh", TorchrunSbatch(in), true}};
}

namespace {

// Typed reads of a torchtitan TOML's dotted keys; errors name the file, the line and the key.
struct TitanKeys {
  const std::string& name;
  const toml::table& root;

  std::string Where(const std::string& key) const {
    const toml::node* n = root.at_path(key).node();
    return n ? fmt::format("{}: line {}: {}", name, n->source().begin.line, key)
             : fmt::format("{}: {}", name, key);
  }
  core::Result<int64_t> Int(const std::string& key, int64_t def) const {
    const toml::node* n = root.at_path(key).node();
    if (n == nullptr) return def;
    if (!n->is_integer()) return core::Status::Error(Where(key) + " must be an integer");
    return n->value<int64_t>().value_or(def);
  }
  core::Result<std::string> Str(const std::string& key, const std::string& def) const {
    const toml::node* n = root.at_path(key).node();
    if (n == nullptr) return def;
    if (!n->is_string()) return core::Status::Error(Where(key) + " must be a string");
    return n->value<std::string>().value_or(def);
  }
};

// torchtitan 0.2.2's registered qwen3, deepseek_v3 and llama4 flavors
// (torchtitan/models/qwen3/__init__.py qwen3_args, torchtitan/models/deepseek_v3/__init__.py
// deepseekv3_args at 73a0e697, with their ModelArgs defaults), as pentamesh's model. MoE there is
// dropless (capacity 0) in every layer after n_dense_layers. head_dim of the MLA flavors is hidden
// / heads, as the presets' (the attention shape is the MLA dims).
struct TitanShape {
  const char* name;
  const char* flavor;
  int64_t layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
  bool tied;
  double rope_theta, norm_eps;
  int64_t experts = 0, top_k = 0, expert_ffn = 0, shared = 0, first_dense = 0;
  bool route_norm = false;          // gates renormalised over the chosen k (else softmax kept)
  bool sigmoid = false;             // score_func "sigmoid" (pentamesh costs softmax routers)
  bool limited_groups = false;      // num_expert_groups / num_limited_groups set
  int64_t q_lora = 0, kv_lora = 0;  // MLA (deepseek_v3): nope 128, rope 64, v 128
  int64_t moe_every = 1;            // llama4's interleave_moe_layer_step (MoE where (l+1) % k == 0)
};
constexpr TitanShape kTitanShapes[] = {
    {"qwen3", "0.6B", 28, 1024, 16, 8, 128, 3072, 151936, true, 1e6, 1e-6},
    {"qwen3", "1.7B", 28, 2048, 16, 8, 128, 6144, 151936, true, 1e6, 1e-6},
    {"qwen3", "4B", 36, 2560, 32, 8, 128, 9728, 151936, true, 1e6, 1e-6},
    {"qwen3", "8B", 36, 4096, 32, 8, 128, 12288, 151936, false, 1e6, 1e-6},
    {"qwen3", "14B", 40, 5120, 40, 8, 128, 17408, 151936, false, 1e6, 1e-6},
    {"qwen3", "32B", 64, 5120, 64, 8, 128, 25600, 151936, false, 1e6, 1e-6},
    {"qwen3", "30B-A3B", 48, 2048, 32, 4, 128, 6144, 151936, false, 1e6, 1e-6, 128, 8, 768, 0, 0,
     true},
    {"qwen3", "235B-A22B", 94, 4096, 64, 4, 128, 12288, 151936, false, 5e6, 1e-6, 128, 8, 1536, 0,
     0, true},
    {"deepseek_v3", "16B", 27, 2048, 16, 16, 128,   10944, 102400, false, 1e4,
     1e-5,          64,    6,  1408, 2,  1,  false, false, false,  0,     512},
    {"deepseek_v3", "236B", 60, 5120, 128, 128, 40,    12288, 102400, false, 1e4,
     1e-5,          160,    6,  1536, 2,   1,   false, false, true,   1536,  512},
    {"deepseek_v3", "671B", 61, 7168, 128, 128, 56,   18432, 129280, false, 1e4,
     1e-5,          256,    8,  2048, 1,   3,   true, true,  true,   1536,  512},
    // llama4 (torchtitan/models/llama4/__init__.py llama4_args, without the _irope variants): FFN
    // 4 x 5120 -> 2/3 -> x 1.2 -> up to a multiple of 2048 = 16384; experts' hidden that / (top_k
    // 1 + 1 shared) rounded up to 2048 = 8192 (auto_scale_hidden_dim); sigmoid router, no
    // route_norm; 17bx128e has MoE in every 2nd layer (the default interleave_moe_layer_step).
    {"llama4", "17bx16e", 48, 5120, 40, 8, 128, 16384, 202048, false, 5e5, 1e-5, 16, 1, 8192, 1, 0,
     false, true},
    {"llama4", "17bx128e", 48,   5120, 40, 8,     128,  16384, 202048, false, 5e5, 1e-5,
     128,      1,          8192, 1,    1,  false, true, false, 0,      0,     2},
};

// The model of a flavor in kTitanShapes, with notes for what pentamesh does not model.
std::optional<spec::ModelSpec> TitanShapeModel(const std::string& name, const std::string& flavor,
                                               std::vector<std::string>& notes) {
  for (const TitanShape& f : kTitanShapes) {
    if (name != f.name || flavor != f.flavor) continue;
    spec::ModelSpec m;
    m.name = fmt::format("{}-{}", f.name, f.flavor);
    m.layers = f.layers;
    m.hidden = f.hidden;
    m.heads = f.heads;
    m.kv_heads = f.kv_heads;
    m.head_dim = f.head_dim;
    m.ffn_hidden = f.ffn;
    m.vocab = f.vocab;
    m.max_seq_len = 0;  // training.seq_len, as torchtitan's update_from_config sets it
    m.activation = spec::Activation::kSwiGLU;
    m.tied_embeddings = f.tied;
    m.rope_theta = f.rope_theta;
    m.norm_eps = f.norm_eps;
    if (f.kv_lora > 0) {
      m.mla = {.q_lora_rank = f.q_lora,
               .kv_lora_rank = f.kv_lora,
               .qk_nope_head_dim = 128,
               .qk_rope_head_dim = 64,
               .v_head_dim = 128};
    }
    if (f.experts > 0) {
      m.moe.experts = f.experts;
      m.moe.top_k = f.top_k;
      m.moe.expert_ffn_hidden = f.expert_ffn;
      m.moe.shared_experts = f.shared;
      m.moe.first_dense_layers = f.first_dense;
      m.moe.moe_layer_freq = f.moe_every;
      m.moe.capacity_factor = 0;
      m.moe.router = f.route_norm ? spec::MoeRouter::kTopKRenorm : spec::MoeRouter::kSoftmaxTopK;
      if (f.sigmoid) {
        notes.push_back("the flavor's sigmoid router scores are costed as softmax top-k");
      }
      if (f.limited_groups) notes.push_back("group-limited routing is not modelled");
    }
    if (std::string(f.name) == "qwen3") {
      notes.push_back(
          "qwen3's q/k RMSNorm weights (2 x head_dim per layer) are not in pentamesh's count");
    }
    notes.push_back(
        fmt::format("model {} flavor {}: torchtitan 0.2.2's registered shape", f.name, f.flavor));
    return m;
  }
  return std::nullopt;
}

// The model: a registered flavor, a pentamesh preset named as flavor, or --model.
core::Status ImportTitanModel(const TitanKeys& keys, const ImportOptions& options, Imported& out) {
  PM_ASSIGN_OR_RETURN(std::string model_name, keys.Str("model.name", "llama3"));
  PM_ASSIGN_OR_RETURN(std::string flavor, keys.Str("model.flavor", ""));
  std::string preset;
  for (const Flavor& f : kFlavors) {
    if (model_name == f.name && flavor == f.flavor) preset = f.preset;
  }
  if (options.model) {
    PM_ASSIGN_OR_RETURN(out.model, spec::LoadModel(*options.model));
  } else if (!preset.empty()) {
    PM_ASSIGN_OR_RETURN(out.model, spec::LoadModel(preset));
    out.notes.push_back(
        fmt::format("model {} flavor {} is pentamesh's preset {}", model_name, flavor, preset));
  } else if (auto shape = TitanShapeModel(model_name, flavor, out.notes)) {
    out.model = *shape;
    // The rules about the llama3 / qwen3 models pentamesh writes do not bind torchtitan's own
    // deepseek_v3 (MLA, leading dense layers) and llama4 (interleaved MoE) models.
    if (model_name != "qwen3") out.waived_rules = {"tt-moe-every-layer", "tt-no-mla"};
  } else if (spec::PresetText("models", flavor)) {
    PM_ASSIGN_OR_RETURN(out.model, spec::LoadModel(flavor));
  } else {
    return core::Status::Error(fmt::format(
        "{}: model {} flavor '{}' is neither a torchtitan flavor pentamesh knows (llama3 8B, 70B, "
        "405B; qwen3 0.6B-32B, 30B-A3B, 235B-A22B; deepseek_v3 16B, 236B, 671B; llama4 17bx16e, "
        "17bx128e) nor a pentamesh "
        "preset: pass --model",
        keys.Where("model.flavor"), model_name, flavor));
  }
  return core::Status::Ok();
}

// The [training] and [parallelism] numbers that do not go straight into the layout.
struct TitanBatch {
  int64_t local = 0, global = 0, steps = 0;  // sequences per rank and per step; steps
  int64_t rep = 0, shard = 0;                // data_parallel_replicate / shard degrees
};

// training.* and the parallel degrees into t.seq_len and out.layout's tp, pp, cp, ep; each
// checked positive, and expert TP checked equal to TP.
core::Result<TitanBatch> ImportTitanDegrees(const TitanKeys& keys, const ImportOptions& options,
                                            Imported& out) {
  spec::Layout& l = out.layout;
  spec::TrainSpec& t = out.train;
  TitanBatch b;
  PM_ASSIGN_OR_RETURN(t.seq_len, keys.Int("training.seq_len", options.seq_len.value_or(2048)));
  PM_ASSIGN_OR_RETURN(b.local, keys.Int("training.local_batch_size", 8));
  PM_ASSIGN_OR_RETURN(b.global, keys.Int("training.global_batch_size", -1));
  PM_ASSIGN_OR_RETURN(b.steps, keys.Int("training.steps", 10000));
  PM_ASSIGN_OR_RETURN(b.rep, keys.Int("parallelism.data_parallel_replicate_degree", 1));
  PM_ASSIGN_OR_RETURN(b.shard, keys.Int("parallelism.data_parallel_shard_degree", -1));
  PM_ASSIGN_OR_RETURN(l.tp, keys.Int("parallelism.tensor_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(l.pp, keys.Int("parallelism.pipeline_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(l.cp, keys.Int("parallelism.context_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(l.ep, keys.Int("parallelism.expert_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(int64_t etp, keys.Int("parallelism.expert_tensor_parallel_degree", 1));
  for (auto [key, v] : {std::pair<const char*, int64_t>{"training.seq_len", t.seq_len},
                        {"training.local_batch_size", b.local},
                        {"parallelism.data_parallel_replicate_degree", b.rep},
                        {"parallelism.tensor_parallel_degree", l.tp},
                        {"parallelism.pipeline_parallel_degree", l.pp},
                        {"parallelism.context_parallel_degree", l.cp},
                        {"parallelism.expert_parallel_degree", l.ep}}) {
    if (v <= 0) {
      return core::Status::Error(fmt::format("{} = {} must be positive", keys.Where(key), v));
    }
  }
  if (l.ep > 1 && etp != l.tp) {
    return core::Status::Error(fmt::format(
        "{} = {}: pentamesh's layouts split experts over tp (expert TP = tensor_parallel_degree "
        "{})",
        keys.Where("parallelism.expert_tensor_parallel_degree"), etp, l.tp));
  }
  return b;
}

// data_parallel_shard_degree, with -1 (the rest of the world) resolved from --gpus; `fixed` is
// replicate x tp x pp x cp.
core::Result<int64_t> ResolveShard(const TitanKeys& keys, const ImportOptions& options,
                                   int64_t shard, int64_t fixed) {
  const std::string key = "parallelism.data_parallel_shard_degree";
  if (shard == -1) {
    if (!options.gpus) {
      return core::Status::Error(fmt::format(
          "{} = -1 (the rest of the world): pass --gpus to say the world size", keys.Where(key)));
    }
    if (*options.gpus % fixed != 0) {
      return core::Status::Error(
          fmt::format("{} = -1: --gpus {} is not a multiple of replicate x tp x pp x cp = {}",
                      keys.Where(key), *options.gpus, fixed));
    }
    return *options.gpus / fixed;
  }
  if (shard <= 0) {
    return core::Status::Error(
        fmt::format("{} = {} must be positive or -1", keys.Where(key), shard));
  }
  return shard;
}

// The ZeRO stage: FSDP over shard x cp > 1 ranks is ZeRO 2 (no reshard after forward) or 3,
// else DDP (ZeRO 0).
core::Status ImportTitanZero(const TitanKeys& keys, const TitanBatch& b, Imported& out) {
  spec::Layout& l = out.layout;
  PM_ASSIGN_OR_RETURN(std::string reshard,
                      keys.Str("parallelism.fsdp_reshard_after_forward", "default"));
  if (b.shard * l.cp <= 1) {
    l.zero = 0;
    return core::Status::Ok();
  }
  if (reshard == "never") {
    l.zero = 2;
  } else if (reshard == "always") {
    l.zero = 3;
  } else if (reshard == "default") {
    l.zero = l.pp > 1 ? 2 : 3;
  } else {
    return core::Status::Error(fmt::format("{} = '{}' is not default, always or never",
                                           keys.Where("parallelism.fsdp_reshard_after_forward"),
                                           reshard));
  }
  if (b.rep > 1) {
    out.notes.push_back(fmt::format(
        "HSDP (replicate {} x shard {}) is costed as ZeRO-{} over all {} data-parallel ranks",
        b.rep, b.shard, l.zero, l.dp));
  }
  return core::Status::Ok();
}

// With pp > 1: micro-batch size, stages per rank (from layers_per_stage) and the schedule.
core::Status ImportTitanPipeline(const TitanKeys& keys, Imported& out) {
  spec::Layout& l = out.layout;
  PM_ASSIGN_OR_RETURN(l.mbs, keys.Int("parallelism.pipeline_parallel_microbatch_size", 1));
  PM_ASSIGN_OR_RETURN(std::string sched,
                      keys.Str("parallelism.pipeline_parallel_schedule", "1F1B"));
  PM_ASSIGN_OR_RETURN(int64_t first,
                      keys.Int("parallelism.pipeline_parallel_first_stage_less_layers", 1));
  PM_ASSIGN_OR_RETURN(int64_t last,
                      keys.Int("parallelism.pipeline_parallel_last_stage_less_layers", 1));
  PM_ASSIGN_OR_RETURN(int64_t per, keys.Int("parallelism.pipeline_parallel_layers_per_stage", 0));
  int64_t stages = l.pp;
  if (per > 0) {
    const int64_t total = out.model.layers + first + last;
    if (total % per != 0 || (total / per) % l.pp != 0) {
      return core::Status::Error(fmt::format(
          "{} = {}: {} layers (+{} first, +{} last) do not split into a multiple of {} stages",
          keys.Where("parallelism.pipeline_parallel_layers_per_stage"), per, out.model.layers,
          first, last, l.pp));
    }
    stages = total / per;
  }
  l.virtual_stages = stages / l.pp;
  // torchtitan's names of pentamesh's schedules (EngineSchedules), each with its stages per rank.
  const EngineSchedule* named = nullptr;
  for (const EngineSchedule& row : EngineSchedules()) {
    if (row.engine == Engine::kTorchtitan && row.name != nullptr && sched == row.name) named = &row;
  }
  const schedule::ScheduleRow* row =
      named == nullptr ? nullptr : schedule::FindRow(named->schedule);
  if (row != nullptr && (row->layout_virtual_stages_min > 1) == (l.virtual_stages > 1)) {
    l.schedule = named->schedule;
  } else {
    return core::Status::Error(fmt::format(
        "{} = '{}' with {} stage(s) per rank has no pentamesh equivalent (1F1B, GPipe: one "
        "stage per rank; Interleaved1F1B: two or more)",
        keys.Where("parallelism.pipeline_parallel_schedule"), sched, l.virtual_stages));
  }
  return core::Status::Ok();
}

// activation_checkpoint.mode, then the precision (mixed_precision_param, float8 converters).
core::Status ImportTitanRecomputeAndPrecision(const TitanKeys& keys, Imported& out) {
  PM_ASSIGN_OR_RETURN(std::string ac, keys.Str("activation_checkpoint.mode", "selective"));
  const RecomputeMode* mode = nullptr;
  for (const RecomputeMode& m : kRecomputeModes) {
    if (ac == m.mode) mode = &m;
  }
  if (mode == nullptr) {
    return core::Status::Error(fmt::format("{} = '{}' is not none, selective or full",
                                           keys.Where("activation_checkpoint.mode"), ac));
  }
  out.layout.recompute = mode->recompute;
  spec::TrainSpec& t = out.train;
  PM_ASSIGN_OR_RETURN(std::string mp, keys.Str("training.mixed_precision_param", "bfloat16"));
  t.precision = mp == "float32" ? spec::Precision::kFp32 : spec::Precision::kBf16;
  if (const toml::array* conv = keys.root.at_path("model.converters").as_array()) {
    for (const auto& c : *conv) {
      const auto s = c.value<std::string>();
      if (s && s->find("float8") != std::string::npos) t.precision = spec::Precision::kFp8;
    }
  }
  return core::Status::Ok();
}

// torchtitan 0.2.2's ConfigManager rejects keys its JobConfig lacks: each is named with its line
// (an error, or a warning with allow_unknown).
core::Status CheckTitanKeys(const std::string& name, const toml::table& root,
                            const ImportOptions& options, Imported& out) {
  static const std::set<std::string> known = FlagNames(kTorchtitanKeyTable);
  std::string unknown;
  int count = 0;
  // A key is known, or a prefix of known keys (a section), walked into.
  std::function<void(const toml::table&, const std::string&)> walk =
      [&](const toml::table& table, const std::string& prefix) {
        for (const auto& [key, node] : table) {
          const std::string path = prefix + std::string(key.str());
          if (known.count(path)) continue;
          const auto section = known.lower_bound(path + ".");
          if (node.is_table() && section != known.end() && section->rfind(path + ".", 0) == 0) {
            walk(*node.as_table(), path + ".");
            continue;
          }
          unknown += fmt::format("{}line {}: {}", unknown.empty() ? "" : "; ",
                                 node.source().begin.line, path);
          ++count;
        }
      };
  walk(root, "");
  if (count == 0) return core::Status::Ok();
  if (!options.allow_unknown) {
    return core::Status::Error(fmt::format(
        "{}: {} not in torchtitan 0.2.2's job config, whose ConfigManager refuses unknown keys: "
        "{} (pass --allow-unknown to import without them)",
        name, count == 1 ? "a key is" : "keys are", unknown));
  }
  out.warnings.push_back(
      fmt::format("{}: ignored, not in torchtitan 0.2.2's job config: {}", name, unknown));
  return core::Status::Ok();
}

}  // namespace

core::Result<Imported> ImportTorchtitan(const std::string& name, const std::string& text,
                                        const ImportOptions& options) {
  // The guarded parse: toml++ 3.3 crashes on some code points (spec/toml_parse.h).
  spec::TomlErrorAt at;
  auto parsed = spec::ParseTomlText(text, name, &at);
  if (!parsed.ok())
    return core::Status::Error(fmt::format("{}: line {}: {}", name, at.line, at.description));
  const TitanKeys keys{name, *parsed};
  Imported out;
  out.engine = Engine::kTorchtitan;
  PM_RETURN_IF_ERROR(CheckTitanKeys(name, *parsed, options, out));
  PM_RETURN_IF_ERROR(ImportTitanModel(keys, options, out));
  spec::Layout& l = out.layout;
  spec::TrainSpec& t = out.train;
  PM_ASSIGN_OR_RETURN(TitanBatch b, ImportTitanDegrees(keys, options, out));
  if (out.model.max_seq_len == 0) out.model.max_seq_len = t.seq_len;
  PM_ASSIGN_OR_RETURN(const int64_t fixed, spec::GpuProduct(name + ": replicate x tp x pp x cp",
                                                            {b.rep, l.tp, l.pp, l.cp}));
  PM_ASSIGN_OR_RETURN(b.shard, ResolveShard(keys, options, b.shard, fixed));
  PM_ASSIGN_OR_RETURN(
      out.gpus, spec::GpuProduct(name + ": replicate x shard x tp x pp x cp", {fixed, b.shard}));
  l.dp = b.rep * b.shard;
  PM_RETURN_IF_ERROR(ImportTitanZero(keys, b, out));
  if (l.pp > 1) {
    PM_RETURN_IF_ERROR(ImportTitanPipeline(keys, out));
  } else {
    l.mbs = b.local;
  }
  const int64_t seqs = b.global > 0 ? b.global : b.local * l.dp;
  t.global_batch_tokens = seqs * t.seq_len;
  t.total_tokens = static_cast<double>(b.steps) * static_cast<double>(t.global_batch_tokens);
  PM_RETURN_IF_ERROR(ImportTitanRecomputeAndPrecision(keys, out));
  l.sp = true;
  l.cp_kind = spec::CpKind::kRing;
  l.ep_placement = l.ep > 1 ? spec::EpPlacement::kFolded : spec::EpPlacement::kSeparate;
  return out;
}

}  // namespace pentamesh::launch::internal
