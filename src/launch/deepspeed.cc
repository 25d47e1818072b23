// DeepSpeed: ds_config.json (batch triple, ZeRO stage, bf16, activation checkpointing, Ulysses
// sequence_parallel_size) plus launch.sh running Megatron-DeepSpeed's pretrain_gpt.py (the model,
// Megatron tensor parallelism, DeepSpeed's pipeline engine, DeepSpeed-MoE expert parallelism),
// sbatch.sh; and the reverse, from launch.sh (with the ds_config it names) or a bare
// ds_config.json (with --model, --seq-len and --gpus).
//
// Tensor parallelism is Megatron-DeepSpeed's (--tensor-model-parallel-size), not AutoTP: the
// emitted config keeps "tensor_parallel" out so DeepSpeed does not shard the model a second
// time; import reads "tensor_parallel.autotp_size" from configs written for Hugging Face models.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "launch/internal.h"
#include "spec/json_input.h"
#include "spec/limits.h"
#include "spec/load_toml.h"

namespace pentamesh::launch::internal {

// The emitted ds_config's comment (JSON has none): pentamesh's own key, which DeepSpeed ignores
// and the importer's key check accepts.
constexpr const char* kHeaderKey = "_pentamesh";

std::vector<File> EmitDeepSpeed(const EmitInput& in) {
  const spec::Layout& l = in.layout;
  const int64_t dp = EngineDataParallel(l);
  const int64_t seqs = in.train.global_batch_seqs();
  nlohmann::ordered_json j;
  std::vector<std::string> header;
  {
    const std::string h = Header(Engine::kDeepSpeed, in, "");
    size_t start = 0;
    while (start < h.size()) {
      const size_t nl = h.find('\n', start);
      header.push_back(h.substr(start, nl - start));
      start = nl + 1;
    }
  }
  j[kHeaderKey] = header;
  j["train_batch_size"] = seqs;
  j["train_micro_batch_size_per_gpu"] = l.mbs;
  j["gradient_accumulation_steps"] = seqs / (dp * l.mbs);
  j["gradient_clipping"] = 1.0;
  j["steps_per_print"] = 10;
  j["zero_optimization"] = {{"stage", l.zero}};
  if (l.zero >= 1) {
    j["zero_optimization"]["overlap_comm"] = true;
    j["zero_optimization"]["contiguous_gradients"] = true;
  }
  j["bf16"] = {{"enabled", in.train.precision != spec::Precision::kFp32}};
  if (l.cp > 1) j["sequence_parallel_size"] = l.cp;
  if (l.recompute == spec::Recompute::kFull) {
    j["activation_checkpointing"] = {{"partition_activations", false},
                                     {"contiguous_memory_optimization", false},
                                     {"cpu_checkpointing", false},
                                     {"number_checkpoints", in.model.layers}};
  }
  j["wall_clock_breakdown"] = false;

  std::string s = "#!/bin/bash\n" + Header(Engine::kDeepSpeed, in, "# ");
  s += "# One process per GPU (sbatch.sh sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, "
       "MASTER_PORT).\n"
       "# MEGATRON_DEEPSPEED: a Megatron-DeepSpeed checkout; DATA_PATH / TOKENIZER: your data.\n"
       "set -euo pipefail\n"
       "CHECKPOINT_DIR=${CHECKPOINT_DIR:-checkpoints}\n";
  Flags parallel = MegatronParallelFlags(in.model, in.train, l, true);
  if (l.recompute == spec::Recompute::kFull) {
    // Megatron-DeepSpeed routes full recomputation through DeepSpeed's activation checkpointing.
    parallel.push_back({"--deepspeed-activation-checkpointing", ""});
  }
  parallel.push_back({"--deepspeed", ""});
  parallel.push_back({"--deepspeed_config", "ds_config.json"});
  s += FlagArray("MODEL_ARGS", MegatronModelFlags(in.model, in.train, true));
  s += FlagArray("PARALLEL_ARGS", parallel);
  s += FlagArray("TRAINING_ARGS", TrainingLoopFlags(in.train, true));
  s +=
      "${PYTHON:-python} \"${MEGATRON_DEEPSPEED:-.}/pretrain_gpt.py\" \"${MODEL_ARGS[@]}\" "
      "\"${PARALLEL_ARGS[@]}\" \"${TRAINING_ARGS[@]}\" --data-path \"${DATA_PATH:-data}\" \"$@\"\n";
  return {File{"ds_config.json", j.dump(2) + "\n", false}, File{"launch.sh", s, true},
          File{"sbatch.sh", Sbatch(Engine::kDeepSpeed, in, "bash launch.sh"), true}};
}

namespace {

// Keys DeepSpeed 0.19.8 does not read, each named by its dotted path: an error, or with
// allow_unknown a warning. At the top level DeepSpeed ignores them (a misspelt section silently
// falls back to its defaults); inside a section its pydantic models check (kDeepSpeedConfigKeyTable
// lists their fields), DeepSpeed refuses them. The contents of other sections (optimizer.params,
// scheduler.params, ...) are the components' own and are not checked.
core::Status CheckDsKeys(const std::string& name, const nlohmann::json& root,
                         const ImportOptions& options, Imported& out) {
  static const std::set<std::string> known = FlagNames(kDeepSpeedConfigKeyTable);
  std::vector<std::string> ignored, refused;
  std::function<void(const nlohmann::json&, const std::string&)> walk =
      [&](const nlohmann::json& object, const std::string& prefix) {
        for (const auto& [key, value] : object.items()) {
          const std::string path = prefix + key;
          if (known.count(path) || path == kHeaderKey) continue;
          const auto section = known.lower_bound(path + ".");
          if (section != known.end() && section->rfind(path + ".", 0) == 0) {
            if (value.is_object()) walk(value, path + ".");
            continue;
          }
          (prefix.empty() ? ignored : refused).push_back(path);
        }
      };
  walk(root, "");
  if (ignored.empty() && refused.empty()) return core::Status::Ok();
  std::string what;
  if (!ignored.empty()) {
    what =
        fmt::format("{} (DeepSpeed ignores {}: a misspelt key leaves its setting at the default)",
                    fmt::join(ignored, ", "), ignored.size() == 1 ? "it" : "them");
  }
  if (!refused.empty()) {
    what += fmt::format("{}{} (DeepSpeed's config check refuses {})", what.empty() ? "" : "; ",
                        fmt::join(refused, ", "), refused.size() == 1 ? "it" : "them");
  }
  if (!options.allow_unknown) {
    return core::Status::Error(fmt::format(
        "{}: not DeepSpeed 0.19.8 ds_config keys: {} (pass --allow-unknown to import without them)",
        name, what));
  }
  out.warnings.push_back(
      fmt::format("{}: ignored, not DeepSpeed 0.19.8 ds_config keys: {}", name, what));
  return core::Status::Ok();
}

// The ds_config fields pentamesh reads, with the key named in every error.
core::Status ReadDsConfig(const std::string& name, const std::string& text,
                          const ImportOptions& options, Imported& out, int64_t* train_batch,
                          int64_t* micro, int64_t* gas) {
  PM_ASSIGN_OR_RETURN(const nlohmann::json j, spec::ParseJson(text, name));
  if (!j.is_object()) return core::Status::Error(fmt::format("{}: not a JSON object", name));
  PM_RETURN_IF_ERROR(CheckDsKeys(name, j, options, out));
  auto get_int = [&](const nlohmann::json& obj, const std::string& key,
                     const std::string& path) -> core::Result<std::optional<int64_t>> {
    if (!obj.contains(key) || obj[key].is_null()) return std::optional<int64_t>();
    if (obj[key].is_string() && obj[key] == "auto") {
      return core::Status::Error(fmt::format(
          "{}: \"{}\" is \"auto\" (filled in by the HF Trainer): pentamesh needs the number", name,
          path));
    }
    return spec::JsonInt(obj, key, path, name);
  };
  PM_ASSIGN_OR_RETURN(auto tb, get_int(j, "train_batch_size", "train_batch_size"));
  PM_ASSIGN_OR_RETURN(
      auto mb, get_int(j, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu"));
  PM_ASSIGN_OR_RETURN(auto ga,
                      get_int(j, "gradient_accumulation_steps", "gradient_accumulation_steps"));
  *train_batch = tb.value_or(0);
  *micro = mb.value_or(0);
  *gas = ga.value_or(0);
  if (j.contains("zero_optimization")) {
    if (!j["zero_optimization"].is_object()) {
      return core::Status::Error(fmt::format("{}: \"zero_optimization\" must be an object", name));
    }
    PM_ASSIGN_OR_RETURN(auto z,
                        get_int(j["zero_optimization"], "stage", "zero_optimization.stage"));
    if (z && *z > 3) {
      return core::Status::Error(
          fmt::format("{}: \"zero_optimization.stage\" {} is not 0..3", name, *z));
    }
    out.layout.zero = static_cast<int>(z.value_or(0));
  }
  PM_ASSIGN_OR_RETURN(auto sp, get_int(j, "sequence_parallel_size", "sequence_parallel_size"));
  if (sp && *sp > 1) {
    out.layout.cp = *sp;
    out.layout.cp_kind = spec::CpKind::kUlysses;
  }
  if (j.contains("tensor_parallel") && j["tensor_parallel"].is_object()) {
    PM_ASSIGN_OR_RETURN(
        auto tp, get_int(j["tensor_parallel"], "autotp_size", "tensor_parallel.autotp_size"));
    if (tp && *tp > 1) out.layout.tp = *tp;
  }
  PM_ASSIGN_OR_RETURN(const auto bf16, spec::JsonBool(j.value("bf16", nlohmann::json()), "enabled",
                                                      "bf16.enabled", name));
  PM_ASSIGN_OR_RETURN(const auto fp16, spec::JsonBool(j.value("fp16", nlohmann::json()), "enabled",
                                                      "fp16.enabled", name));
  out.train.precision = bf16.value_or(false) || fp16.value_or(false) ? spec::Precision::kBf16
                                                                     : spec::Precision::kFp32;
  if (j.contains("activation_checkpointing")) out.layout.recompute = spec::Recompute::kFull;
  return core::Status::Ok();
}

// The batch triple of a ds_config (0 where it is not given).
struct DsBatch {
  int64_t train_batch = 0;   // train_batch_size: sequences per step
  int64_t micro = 0;         // train_micro_batch_size_per_gpu
  int64_t gas = 0;           // gradient_accumulation_steps
  std::string world_source;  // what said the world size in out.gpus (empty: nothing did)
};

bool StartsWithBrace(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

// A bare ds_config.json: the model and sequence length come from --model and --seq-len.
core::Status ImportBareDsConfig(const std::string& name, const std::string& text,
                                const ImportOptions& options, Imported& out, DsBatch& b) {
  if (!options.model || !options.seq_len) {
    return core::Status::Error(fmt::format(
        "{}: a ds_config.json does not say the model or the sequence length: pass --model and "
        "--seq-len (or import the launch script that names it)",
        name));
  }
  PM_ASSIGN_OR_RETURN(out.model, spec::LoadModel(*options.model));
  out.train.seq_len = *options.seq_len;
  PM_RETURN_IF_ERROR(ReadDsConfig(name, text, options, out, &b.train_batch, &b.micro, &b.gas));
  out.layout.mbs = b.micro;
  return core::Status::Ok();
}

// A Megatron-DeepSpeed launch script and the ds_config its --deepspeed_config names (relative to
// `dir`); where both say TP, CP, recomputation or the micro-batch, the script wins or they agree.
core::Status ImportDsLaunchScript(const std::string& name, const std::string& text,
                                  const std::string& dir, const ImportOptions& options,
                                  Imported& out, DsBatch& b) {
  PM_ASSIGN_OR_RETURN(const Script script, EvaluateScript(name, text, dir, options, out));
  PM_RETURN_IF_ERROR(
      WithFallback(script, CheckParserFlags(name, EntryArgv(script, nullptr), true, options, out)));
  const auto flags = CollectFlags(script.words);
  PM_RETURN_IF_ERROR(
      WithFallback(script, ReadMegatronFlags(name, flags, /*ds=*/true, options, out)));
  PM_ASSIGN_OR_RETURN(const std::optional<ScriptWorldSize> world,
                      ScriptWorld(name, text, dir, flags, options, out));
  if (world) {
    out.gpus = world->gpus;
    b.world_source = world->source;
  }
  const auto cfg = flags.find("--deepspeed_config") != flags.end()
                       ? flags.find("--deepspeed_config")
                       : flags.find("--deepspeed-config");
  if (cfg == flags.end() || cfg->second.values.empty()) {
    return WithFallback(script, core::Status::Error(fmt::format(
                                    "{}: no --deepspeed_config names the ds_config", name)));
  }
  // Relative to where the launcher ran under bash (a config the script wrote, such as a heredoc,
  // is in the sandbox) when that file exists, else to the script's directory.
  std::filesystem::path path = std::filesystem::path(dir) / cfg->second.values.front();
  std::string shown = path.string();  // the name in messages
  if (!script.cwd.empty()) {
    const std::filesystem::path ran =
        std::filesystem::path(script.cwd) / cfg->second.values.front();
    std::error_code ec;
    if (std::filesystem::is_regular_file(ran, ec)) {
      path = ran;
      shown = cfg->second.values.front() + " (as the script wrote it under bash)";
    }
  }
  PM_ASSIGN_OR_RETURN(std::string cfg_text, spec::ReadFile(path.string()));
  const int64_t tp = out.layout.tp, cp = out.layout.cp;
  const spec::Recompute recompute = out.layout.recompute;
  PM_RETURN_IF_ERROR(ReadDsConfig(shown, cfg_text, options, out, &b.train_batch, &b.micro, &b.gas));
  out.layout.tp = tp;  // Megatron-DeepSpeed's TP, not AutoTP
  if (cp > 1 && out.layout.cp != cp) {
    return core::Status::Error(fmt::format(
        "{}: {}--ds-sequence-parallel-size {} disagrees with {}'s sequence_parallel_size {}", name,
        LinePrefix(flags.at("--ds-sequence-parallel-size").line), cp, shown, out.layout.cp));
  }
  if (recompute != spec::Recompute::kNone) out.layout.recompute = recompute;
  if (b.micro > 0 && b.micro != out.layout.mbs) {
    return core::Status::Error(
        fmt::format("{}: --micro-batch-size {} disagrees with train_micro_batch_size_per_gpu {}",
                    name, out.layout.mbs, b.micro));
  }
  return core::Status::Ok();
}

// World size and data parallelism: the batch triple gives DP = train / (micro x gas), else
// --gpus (or the script's world) over the model-parallel ranks; then the global batch.
core::Status ImportDsWorld(const std::string& name, const ImportOptions& options, DsBatch b,
                           Imported& out) {
  if (b.micro <= 0) b.micro = out.layout.mbs;
  int64_t dp = 0;
  if (b.train_batch > 0 && b.gas > 0) {
    if (b.train_batch % (b.micro * b.gas) != 0) {
      return core::Status::Error(
          fmt::format("{}: train_batch_size {} is not train_micro_batch_size_per_gpu {} x "
                      "gradient_accumulation_steps {} x a data-parallel degree",
                      name, b.train_batch, b.micro, b.gas));
    }
    dp = b.train_batch / (b.micro * b.gas);
  }
  PM_ASSIGN_OR_RETURN(
      const int64_t model_par,
      spec::GpuProduct(name + ": tp x pp x cp", {out.layout.tp, out.layout.pp, out.layout.cp}));
  const auto gpus = options.gpus ? options.gpus : out.gpus;
  const std::string source = options.gpus ? "--gpus" : b.world_source;
  if (gpus && *gpus % model_par != 0) {
    return core::Status::Error(
        fmt::format("{}: world size {} (from {}) is not a multiple of tp x pp x cp = {}", name,
                    *gpus, source, model_par));
  }
  if (dp > 0 && gpus && dp * model_par != *gpus) {
    return core::Status::Error(fmt::format(
        "{}: the ds_config's data-parallel degree {} (train_batch_size {} / "
        "(train_micro_batch_size_per_gpu {} x gradient_accumulation_steps {})) x tp x pp x cp {} "
        "is not the world size {} (from {})",
        name, dp, b.train_batch, b.micro, b.gas, model_par, *gpus, source));
  }
  if (dp == 0) {
    if (!gpus) {
      return core::Status::Error(
          fmt::format("{}: the config gives no data-parallel degree (train_batch_size with "
                      "gradient_accumulation_steps) and the script no world size: pass --gpus",
                      name));
    }
    dp = *gpus / model_par;
  }
  out.layout.dp = dp;
  out.gpus = dp * model_par;
  if (b.train_batch == 0) b.train_batch = dp * b.micro * std::max<int64_t>(b.gas, 1);
  if (out.train.global_batch_tokens > 0 &&
      out.train.global_batch_tokens != b.train_batch * out.train.seq_len) {
    return core::Status::Error(
        fmt::format("{}: --global-batch-size {} disagrees with train_batch_size {}", name,
                    out.train.global_batch_tokens / out.train.seq_len, b.train_batch));
  }
  out.train.global_batch_tokens = b.train_batch * out.train.seq_len;
  return core::Status::Ok();
}

}  // namespace

core::Result<Imported> ImportDeepSpeed(const std::string& name, const std::string& text,
                                       const std::string& dir, const ImportOptions& options) {
  Imported out;
  out.engine = Engine::kDeepSpeed;
  DsBatch b;
  if (StartsWithBrace(text)) {
    PM_RETURN_IF_ERROR(ImportBareDsConfig(name, text, options, out, b));
  } else {
    PM_RETURN_IF_ERROR(ImportDsLaunchScript(name, text, dir, options, out, b));
  }
  PM_RETURN_IF_ERROR(ImportDsWorld(name, options, b, out));
  if (out.layout.pp > 1) out.layout.schedule = spec::Schedule::kOneFOneB;
  out.layout.ep_placement =
      out.layout.ep > 1 ? spec::EpPlacement::kFolded : spec::EpPlacement::kSeparate;
  if (out.layout.tp == 1) out.layout.sp = true;
  return out;
}

}  // namespace pentamesh::launch::internal
