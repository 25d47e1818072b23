// Emit: refuses what the engine cannot run (capability table), then calls the engine's emitter;
// the header every emitted file starts with; the sbatch script; writing the files.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>

#include "core/output.h"
#include "core/quote.h"
#include "launch/internal.h"
#include "spec/validate.h"

namespace pentamesh::launch {
namespace internal {

std::string Header(Engine engine, const EmitInput& in, const std::string& prefix) {
  const cost::Estimate& e = in.estimate;
  const StackChoice stack = in.stack.profile.empty() ? ChooseStack("", engine) : in.stack;
  std::string out;
  // Each line holds names and paths the user gave (model name, GPU, command line, --stack): a
  // newline there must not end the comment, so every line goes through core::CommentText.
  const auto line = [&](const std::string& text) {
    out += prefix + core::CommentText(text) + "\n";
  };
  line(fmt::format("Emitted by pentamesh {} for {}.", PM_VERSION, ToString(engine)));
  // import-config costs the file with the engine's own profile unless told --stack.
  line(fmt::format("cost stack profile: {}, {}{}", stack.profile, stack.reason,
                   stack.profile == StackProfile(engine)
                       ? std::string()
                       : fmt::format(" (import-config ... --stack {} costs it the same way)",
                                     core::ShellQuote(stack.profile))));
  line(fmt::format("command: {}", in.command));
  line(fmt::format("model {} on {} x {} ({} nodes x {}), seq {}, {} tokens/step", in.model.name,
                   in.cluster.gpus(), in.cluster.gpu, Nodes(in), GpusPerNode(in), in.train.seq_len,
                   in.train.global_batch_tokens));
  line(fmt::format("layout: {}", spec::FormatLayout(in.layout)));
  line(fmt::format(
      "predicted: memory {:.2f} GB of {:.2f} GB per GPU, step {:.3f} s, {:.0f} tokens/s, "
      "MFU {:.1f}%",
      e.memory.total / 1e9, e.memory.capacity / 1e9, e.time.step, e.tokens_per_s, 100 * e.mfu));
  return out;
}

int64_t TrainIters(const spec::TrainSpec& train) {
  if (train.global_batch_tokens <= 0) return 1;
  return std::max<int64_t>(
      1, static_cast<int64_t>(
             std::ceil(train.total_tokens / static_cast<double>(train.global_batch_tokens))));
}

int64_t GpusPerNode(const EmitInput& in) {
  return std::min(in.cluster.gpus_per_node, in.cluster.gpus());
}
int64_t Nodes(const EmitInput& in) { return in.cluster.gpus() / GpusPerNode(in); }

std::string SbatchPreamble(Engine engine, const EmitInput& in, int64_t tasks_per_node) {
  std::string s = "#!/bin/bash\n";
  s += Header(engine, in, "# ");
  s += fmt::format(
      "#SBATCH --job-name=pentamesh-{}\n"
      "#SBATCH --nodes={}\n"
      "#SBATCH --ntasks-per-node={}\n"
      "#SBATCH --gpus-per-node={}\n"
      "#SBATCH --exclusive\n",
      ToString(engine), Nodes(in), tasks_per_node, GpusPerNode(in));
  s += "set -euo pipefail\n"
       "cd \"${SLURM_SUBMIT_DIR:-$(dirname \"$0\")}\"\n"
       "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
       "export MASTER_PORT=${MASTER_PORT:-29500}\n";
  return s;
}

std::string Sbatch(Engine engine, const EmitInput& in, const std::string& per_task) {
  return SbatchPreamble(engine, in, GpusPerNode(in)) +
         "srun --kill-on-bad-exit=1 bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID "
         "WORLD_SIZE=$SLURM_NTASKS " +
         per_task + "'\n";
}

}  // namespace internal

core::Result<std::vector<File>> Emit(Engine engine, const EmitInput& in) {
  const std::vector<std::string> invalid =
      spec::Validate(in.model, in.cluster, in.train, in.layout);
  if (!invalid.empty()) {
    std::string msg = "--emit: the layout is not valid for this model and cluster:";
    for (const auto& v : invalid) msg += "\n  " + v;
    return core::Status::Error(msg);
  }
  if (internal::PerNodeDispatch(in) && engine != Engine::kMegatron) {
    return core::Status::Error(fmt::format(
        "--emit {}: refused: the stack profile costs the MoE dispatch per node "
        "(ep_dispatch_per_node: DeepEP / HybridEP), which {} has no launch flag for; emit "
        "megatron, or cost with a profile without it",
        ToString(engine), ToString(engine)));
  }
  if (internal::EpOverlap(in) && engine != Engine::kMegatron) {
    return core::Status::Error(fmt::format(
        "--emit {}: refused: the stack profile costs the EP all-to-all overlap (ep_a2a_overlap: "
        "Megatron-Core's --overlap-moe-expert-parallel-comm), which {} has no launch flag for; "
        "emit megatron, or cost with a profile without it",
        ToString(engine), ToString(engine)));
  }
  const auto violations = Violations(engine, in.model, in.layout);
  if (!violations.empty()) {
    return core::Status::Error(fmt::format("--emit {}: refused\n{}", ToString(engine),
                                           DescribeViolations(engine, violations)));
  }
  switch (engine) {
    case Engine::kMegatron:
      return internal::EmitMegatron(in);
    case Engine::kTorchtitan:
      return internal::EmitTorchtitan(in);
    case Engine::kDeepSpeed:
      return internal::EmitDeepSpeed(in);
  }
  return core::Status::Error("--emit: unknown engine");
}

core::Status WriteFiles(const std::string& dir, const std::vector<File>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return core::Status::Error(fmt::format("--out {}: {}", dir, ec.message()));
  for (const File& f : files) {
    // Temporary name, fsync, rename: a symlinked train.sh is refused, never followed.
    PM_RETURN_IF_ERROR(core::WriteFileAtomic((std::filesystem::path(dir) / f.name).string(), f.text,
                                             f.executable));
  }
  return core::Status::Ok();
}

}  // namespace pentamesh::launch
