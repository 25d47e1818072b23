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

#include "launch/internal.h"
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

const char* ScheduleName(const spec::Layout& l) {
  switch (l.schedule) {
    case spec::Schedule::kGPipe:
      return "GPipe";
    case spec::Schedule::kInterleaved:
      return "Interleaved1F1B";
    case spec::Schedule::kZeroBubble:
      return "ZBVZeroBubble";
    case spec::Schedule::kOneFOneB:
      break;
  }
  return "1F1B";
}

const char* RecomputeName(spec::Recompute r) {
  switch (r) {
    case spec::Recompute::kNone:
      return "none";
    case spec::Recompute::kSelective:
      return "selective";
    case spec::Recompute::kFull:
      return "full";
  }
  return "none";
}

}  // namespace

std::vector<File> EmitTorchtitan(const EmitInput& in) {
  const spec::Layout& l = in.layout;
  const spec::ModelSpec& m = in.model;
  const int64_t dp = EngineDataParallel(l);
  const int64_t seqs = in.train.global_batch_seqs();
  const bool fsdp = l.zero >= 2;
  std::string name = m.is_moe() ? "qwen3" : "llama3", flavor = m.name;
  bool registered = false;
  for (const Flavor& f : kFlavors) {
    if (m.name == f.preset) {
      name = f.name;
      flavor = f.flavor;
      registered = true;
    }
  }
  const int64_t local = l.pp > 1 ? seqs / dp : l.mbs;
  const int64_t chunks = l.pp * l.virtual_stages;
  const int64_t per_stage = spec::ChunkLayers(m.layers, chunks, chunks > 1 ? 1 : 0);
  const int64_t d = SplitDeficit(m, l);

  std::string t = Header(Engine::kTorchtitan, in, "# ");
  t += "# torchtitan 0.2.x job config: torchrun ... -m torchtitan.train --job.config_file "
       "job.toml\n";
  if (!registered) {
    t += fmt::format(
        "# model.flavor '{}' is not one of torchtitan's registered flavors: register it in\n"
        "# torchtitan/models/{}/__init__.py with: layers {}, dim {}, heads {}, kv heads {}, head\n"
        "# dim {}, FFN {}, vocab {}, rope theta {}{}.\n",
        flavor, name, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden, m.vocab,
        m.rope_theta,
        m.is_moe() ? fmt::format(", {} experts top-{} of FFN {}, first {} layers dense, every {} "
                                 "layer MoE",
                                 m.moe.experts, m.moe.top_k, m.moe.expert_ffn_hidden,
                                 m.moe.first_dense_layers, m.moe.moe_layer_freq)
                   : std::string());
  }
  t += "\n[job]\ndump_folder = \"./outputs\"\n";
  t += fmt::format("description = \"pentamesh: {} {}\"\n", m.name, spec::ShortLayout(l));
  t += fmt::format("\n[model]\nname = \"{}\"\nflavor = \"{}\"\n", name, flavor);
  if (in.train.precision == spec::Precision::kFp8) {
    t += "converters = [\"quantize.linear.float8\"]\n";
  }
  t += "\n[optimizer]\nname = \"AdamW\"\nlr = 3e-4\neps = 1e-8\n";
  t += fmt::format("\n[lr_scheduler]\nwarmup_steps = {}\n",
                   std::min<int64_t>(2000, std::max<int64_t>(1, TrainIters(in.train) / 100)));
  t += fmt::format(
      "\n[training]\nlocal_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\nmax_norm = 1.0\n"
      "steps = {}\nmixed_precision_param = \"{}\"\n",
      local, seqs, in.train.seq_len, TrainIters(in.train),
      in.train.precision == spec::Precision::kFp32 ? "float32" : "bfloat16");
  t += fmt::format(
      "\n[parallelism]\ndata_parallel_replicate_degree = {}\ndata_parallel_shard_degree = {}\n"
      "fsdp_reshard_after_forward = \"{}\"\ntensor_parallel_degree = {}\n"
      "enable_async_tensor_parallel = false\npipeline_parallel_degree = {}\n",
      fsdp ? 1 : dp, fsdp ? dp : 1, l.zero == 2 ? "never" : "always", l.tp, l.pp);
  if (l.pp > 1) {
    t += fmt::format(
        "pipeline_parallel_schedule = \"{}\"\npipeline_parallel_microbatch_size = {}\n"
        "pipeline_parallel_layers_per_stage = {}\npipeline_parallel_first_stage_less_layers = {}\n"
        "pipeline_parallel_last_stage_less_layers = {}\n",
        ScheduleName(l), l.mbs, per_stage, d == 2 ? 1 : 0, d >= 1 ? 1 : 0);
  }
  t += fmt::format("context_parallel_degree = {}\n", l.cp);
  if (m.is_moe()) {
    t += fmt::format("expert_parallel_degree = {}\nexpert_tensor_parallel_degree = {}\n", l.ep,
                     ExpertTensorParallel(l));
  }
  t += fmt::format("\n[activation_checkpoint]\nmode = \"{}\"\n", RecomputeName(l.recompute));
  if (l.recompute == spec::Recompute::kSelective) t += "selective_ac_option = \"op\"\n";
  t += "\n[compile]\nenable = false\n";
  t += "\n[checkpoint]\nenable = true\nfolder = \"checkpoint\"\ninterval = 1000\n";

  // Current main: --module/--config pick a registry entry; batch keys count tokens.
  std::string o = Header(Engine::kTorchtitan, in, "# ");
  o += fmt::format(
      "# torchtitan main: torchrun ... -m torchtitan.train --module {} --config <your {} config> "
      "$(grep -v '^#' overrides.txt)\n",
      name, flavor);
  auto kv = [&o](const std::string& k, const std::string& v) { o += "--" + k + " " + v + "\n"; };
  kv("training.num_tokens_per_microbatch_per_dp_rank", std::to_string(l.mbs * in.train.seq_len));
  kv("training.num_tokens_per_train_step", std::to_string(in.train.global_batch_tokens));
  kv("training.max_context_length", std::to_string(in.train.seq_len));
  kv("training.steps", std::to_string(TrainIters(in.train)));
  kv("parallelism.data_parallel_replicate_degree", std::to_string(fsdp ? 1 : dp));
  kv("parallelism.data_parallel_shard_degree", std::to_string(fsdp ? dp : 1));
  kv("parallelism.fsdp_reshard_after_forward", l.zero == 2 ? "never" : "always");
  kv("parallelism.tensor_parallel_degree", std::to_string(l.tp));
  kv("parallelism.pipeline_parallel_degree", std::to_string(l.pp));
  if (l.pp > 1) {
    kv("parallelism.pipeline_parallel_schedule", ScheduleName(l));
    kv("parallelism.num_pp_microbatches", std::to_string(seqs / (dp * l.mbs)));
    kv("parallelism.pipeline_parallel_layers_per_stage", std::to_string(per_stage));
    kv("parallelism.pipeline_parallel_first_stage_less_layers", d == 2 ? "1" : "0");
    kv("parallelism.pipeline_parallel_last_stage_less_layers", d >= 1 ? "1" : "0");
  }
  kv("parallelism.context_parallel_degree", std::to_string(l.cp));
  if (m.is_moe()) kv("parallelism.expert_parallel_degree", std::to_string(l.ep));
  kv("activation_checkpoint.mode", RecomputeName(l.recompute));

  const std::string run = fmt::format(
      "torchrun --nnodes=$SLURM_NNODES --nproc-per-node={} --node-rank=$SLURM_NODEID "
      "--rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT -m torchtitan.train "
      "--job.config_file job.toml",
      GpusPerNode(in));
  // torchtitan's launcher is torchrun, one per node (not one task per GPU): replace the srun line.
  std::string sb = Sbatch(Engine::kTorchtitan, in, "");
  const size_t srun = sb.rfind("\nsrun ") + 1;
  sb = sb.substr(0, srun) + "srun --ntasks-per-node=1 --kill-on-bad-exit=1 " + run + "\n";
  return {File{"job.toml", t, false}, File{"overrides.txt", o, false}, File{"sbatch.sh", sb, true}};
}

core::Result<Imported> ImportTorchtitan(const std::string& name, const std::string& text,
                                        const ImportOptions& options) {
  // The guarded parse: toml++ 3.3 crashes on some code points (spec/toml_parse.h).
  spec::TomlErrorAt at;
  auto parsed = spec::ParseTomlText(text, name, &at);
  if (!parsed.ok())
    return core::Status::Error(fmt::format("{}: line {}: {}", name, at.line, at.description));
  const toml::table& root = *parsed;
  Imported out;
  out.engine = Engine::kTorchtitan;
  auto where = [&](const std::string& key) {
    const toml::node* n = root.at_path(key).node();
    return n ? fmt::format("{}: line {}: {}", name, n->source().begin.line, key)
             : fmt::format("{}: {}", name, key);
  };
  auto get_int = [&](const std::string& key, int64_t def) -> core::Result<int64_t> {
    const toml::node* n = root.at_path(key).node();
    if (n == nullptr) return def;
    if (!n->is_integer()) return core::Status::Error(where(key) + " must be an integer");
    return n->value<int64_t>().value_or(def);
  };
  auto get_str = [&](const std::string& key, const std::string& def) -> core::Result<std::string> {
    const toml::node* n = root.at_path(key).node();
    if (n == nullptr) return def;
    if (!n->is_string()) return core::Status::Error(where(key) + " must be a string");
    return n->value<std::string>().value_or(def);
  };
  // Model: a registered flavor, a pentamesh preset named as flavor, or --model.
  PM_ASSIGN_OR_RETURN(std::string model_name, get_str("model.name", "llama3"));
  PM_ASSIGN_OR_RETURN(std::string flavor, get_str("model.flavor", ""));
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
  } else if (spec::PresetText("models", flavor)) {
    PM_ASSIGN_OR_RETURN(out.model, spec::LoadModel(flavor));
  } else {
    return core::Status::Error(fmt::format(
        "{}: model {} flavor '{}' is neither a torchtitan flavor pentamesh knows (llama3 8B, 70B, "
        "405B) nor a pentamesh preset: pass --model",
        where("model.flavor"), model_name, flavor));
  }
  spec::Layout& l = out.layout;
  spec::TrainSpec& t = out.train;
  PM_ASSIGN_OR_RETURN(t.seq_len, get_int("training.seq_len", options.seq_len.value_or(2048)));
  PM_ASSIGN_OR_RETURN(int64_t local, get_int("training.local_batch_size", 8));
  PM_ASSIGN_OR_RETURN(int64_t global, get_int("training.global_batch_size", -1));
  PM_ASSIGN_OR_RETURN(int64_t steps, get_int("training.steps", 10000));
  PM_ASSIGN_OR_RETURN(int64_t rep, get_int("parallelism.data_parallel_replicate_degree", 1));
  PM_ASSIGN_OR_RETURN(int64_t shard, get_int("parallelism.data_parallel_shard_degree", -1));
  PM_ASSIGN_OR_RETURN(l.tp, get_int("parallelism.tensor_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(l.pp, get_int("parallelism.pipeline_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(l.cp, get_int("parallelism.context_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(l.ep, get_int("parallelism.expert_parallel_degree", 1));
  PM_ASSIGN_OR_RETURN(int64_t etp, get_int("parallelism.expert_tensor_parallel_degree", 1));
  for (auto [key, v] : {std::pair<const char*, int64_t>{"training.seq_len", t.seq_len},
                        {"training.local_batch_size", local},
                        {"parallelism.data_parallel_replicate_degree", rep},
                        {"parallelism.tensor_parallel_degree", l.tp},
                        {"parallelism.pipeline_parallel_degree", l.pp},
                        {"parallelism.context_parallel_degree", l.cp},
                        {"parallelism.expert_parallel_degree", l.ep}}) {
    if (v <= 0) return core::Status::Error(fmt::format("{} = {} must be positive", where(key), v));
  }
  if (l.ep > 1 && etp != l.tp) {
    return core::Status::Error(fmt::format(
        "{} = {}: pentamesh's layouts split experts over tp (expert TP = tensor_parallel_degree "
        "{})",
        where("parallelism.expert_tensor_parallel_degree"), etp, l.tp));
  }
  const int64_t fixed = rep * l.tp * l.pp * l.cp;
  if (shard == -1) {
    if (!options.gpus) {
      return core::Status::Error(
          fmt::format("{} = -1 (the rest of the world): pass --gpus to say the world size",
                      where("parallelism.data_parallel_shard_degree")));
    }
    if (*options.gpus % fixed != 0) {
      return core::Status::Error(
          fmt::format("{} = -1: --gpus {} is not a multiple of replicate x tp x pp x cp = {}",
                      where("parallelism.data_parallel_shard_degree"), *options.gpus, fixed));
    }
    shard = *options.gpus / fixed;
  } else if (shard <= 0) {
    return core::Status::Error(fmt::format("{} = {} must be positive or -1",
                                           where("parallelism.data_parallel_shard_degree"), shard));
  }
  out.gpus = fixed * shard;
  const int64_t dp = rep * shard;
  l.dp = dp;
  PM_ASSIGN_OR_RETURN(std::string reshard,
                      get_str("parallelism.fsdp_reshard_after_forward", "default"));
  if (shard * l.cp > 1) {
    if (reshard == "never") {
      l.zero = 2;
    } else if (reshard == "always") {
      l.zero = 3;
    } else if (reshard == "default") {
      l.zero = l.pp > 1 ? 2 : 3;
    } else {
      return core::Status::Error(fmt::format("{} = '{}' is not default, always or never",
                                             where("parallelism.fsdp_reshard_after_forward"),
                                             reshard));
    }
    if (rep > 1) {
      out.notes.push_back(fmt::format(
          "HSDP (replicate {} x shard {}) is costed as ZeRO-{} over all {} data-parallel ranks",
          rep, shard, l.zero, dp));
    }
  } else {
    l.zero = 0;
  }
  if (l.pp > 1) {
    PM_ASSIGN_OR_RETURN(l.mbs, get_int("parallelism.pipeline_parallel_microbatch_size", 1));
    PM_ASSIGN_OR_RETURN(std::string sched,
                        get_str("parallelism.pipeline_parallel_schedule", "1F1B"));
    PM_ASSIGN_OR_RETURN(int64_t first,
                        get_int("parallelism.pipeline_parallel_first_stage_less_layers", 1));
    PM_ASSIGN_OR_RETURN(int64_t last,
                        get_int("parallelism.pipeline_parallel_last_stage_less_layers", 1));
    PM_ASSIGN_OR_RETURN(int64_t per, get_int("parallelism.pipeline_parallel_layers_per_stage", 0));
    int64_t stages = l.pp;
    if (per > 0) {
      const int64_t total = out.model.layers + first + last;
      if (total % per != 0 || (total / per) % l.pp != 0) {
        return core::Status::Error(fmt::format(
            "{} = {}: {} layers (+{} first, +{} last) do not split into a multiple of {} stages",
            where("parallelism.pipeline_parallel_layers_per_stage"), per, out.model.layers, first,
            last, l.pp));
      }
      stages = total / per;
    }
    l.virtual_stages = stages / l.pp;
    if (sched == "1F1B" && l.virtual_stages == 1) {
      l.schedule = spec::Schedule::kOneFOneB;
    } else if (sched == "GPipe" && l.virtual_stages == 1) {
      l.schedule = spec::Schedule::kGPipe;
    } else if (sched == "Interleaved1F1B" && l.virtual_stages > 1) {
      l.schedule = spec::Schedule::kInterleaved;
    } else {
      return core::Status::Error(fmt::format(
          "{} = '{}' with {} stage(s) per rank has no pentamesh equivalent (1F1B, GPipe: one "
          "stage per rank; Interleaved1F1B: two or more)",
          where("parallelism.pipeline_parallel_schedule"), sched, l.virtual_stages));
    }
  } else {
    l.mbs = local;
  }
  const int64_t seqs = global > 0 ? global : local * dp;
  t.global_batch_tokens = seqs * t.seq_len;
  t.total_tokens = static_cast<double>(steps) * static_cast<double>(t.global_batch_tokens);
  PM_ASSIGN_OR_RETURN(std::string ac, get_str("activation_checkpoint.mode", "selective"));
  if (ac == "none") {
    l.recompute = spec::Recompute::kNone;
  } else if (ac == "selective") {
    l.recompute = spec::Recompute::kSelective;
  } else if (ac == "full") {
    l.recompute = spec::Recompute::kFull;
  } else {
    return core::Status::Error(fmt::format("{} = '{}' is not none, selective or full",
                                           where("activation_checkpoint.mode"), ac));
  }
  PM_ASSIGN_OR_RETURN(std::string mp, get_str("training.mixed_precision_param", "bfloat16"));
  t.precision = mp == "float32" ? spec::Precision::kFp32 : spec::Precision::kBf16;
  if (const toml::array* conv = root.at_path("model.converters").as_array()) {
    for (const auto& c : *conv) {
      const auto s = c.value<std::string>();
      if (s && s->find("float8") != std::string::npos) t.precision = spec::Precision::kFp8;
    }
  }
  l.sp = true;
  l.cp_kind = spec::CpKind::kRing;
  l.ep_placement = l.ep > 1 ? spec::EpPlacement::kFolded : spec::EpPlacement::kSeparate;
  return out;
}

}  // namespace pentamesh::launch::internal
