// vLLM and SGLang launch commands of a serving layout (launch/serve_engines.h).
#include "launch/serve_engines.h"

#include <fmt/format.h>

#include "core/quote.h"

namespace pentamesh::launch {

core::Result<ServeEngine> ParseServeEngine(const std::string& name) {
  if (name == "vllm") return ServeEngine::kVllm;
  if (name == "sglang") return ServeEngine::kSglang;
  return core::Status::Error("--emit: \"" + name + "\" is not a serving engine (vllm, sglang)");
}

const char* ToString(ServeEngine engine) {
  return engine == ServeEngine::kVllm ? "vllm" : "sglang";
}

std::vector<std::pair<std::string, std::string>> ServeEngineFlags(ServeEngine engine,
                                                                  const cost::ServeLayout& l,
                                                                  const cost::ServeWorkload& w,
                                                                  ServeRole role) {
  const cost::ServeEngine& e = w.engine;
  const bool fp8 = w.precision == spec::Precision::kFp8 && !w.fp4;  // NVFP4: from the checkpoint
  const std::string max_len = std::to_string(w.input_tokens + w.output_tokens);
  std::vector<std::pair<std::string, std::string>> f;
  auto add = [&f](std::string flag, std::string value) {
    f.emplace_back(std::move(flag), std::move(value));
  };
  if (engine == ServeEngine::kVllm) {
    add("--tensor-parallel-size", std::to_string(l.tp));
    add("--pipeline-parallel-size", std::to_string(l.pp));
    if (l.ep > 1) {
      add("--data-parallel-size", std::to_string(l.ep));
      add("--enable-expert-parallel", "");
    }
    add("--max-model-len", max_len);
    add("--gpu-memory-utilization", fmt::format("{}", e.gpu_memory_utilization));
    add("--max-num-batched-tokens", std::to_string(e.max_batched_tokens));
    add("--enable-chunked-prefill", "");
    add("--max-num-seqs", std::to_string(e.max_seqs));
    add("--block-size", std::to_string(e.block_tokens));
    add("--kv-cache-dtype", w.kv_fp8 ? "fp8" : "auto");
    if (fp8) add("--quantization", "fp8");
    if (w.prefix_hit_rate > 0) add("--enable-prefix-caching", "");  // SGLang's radix cache is on
    if (role != ServeRole::kColocated) {
      add("--kv-transfer-config", R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})");
    }
    return f;
  }
  add("--tp-size", std::to_string(l.tp * l.ep));
  if (l.ep > 1) add("--ep-size", std::to_string(l.tp * l.ep));
  add("--pp-size", std::to_string(l.pp));
  add("--context-length", max_len);
  add("--mem-fraction-static", fmt::format("{}", e.gpu_memory_utilization));
  add("--chunked-prefill-size", std::to_string(e.max_batched_tokens));
  add("--max-running-requests", std::to_string(e.max_seqs));
  add("--page-size", std::to_string(e.block_tokens));
  add("--kv-cache-dtype", w.kv_fp8 ? "fp8_e4m3" : "auto");
  if (fp8) add("--quantization", "fp8");
  if (role != ServeRole::kColocated) {
    add("--disaggregation-mode", role == ServeRole::kPrefill ? "prefill" : "decode");
    add("--disaggregation-transfer-backend", "mooncake");
  }
  return f;
}

std::string ServeLaunchScript(ServeEngine engine, const cost::ServeLayout& l,
                              const cost::ServeWorkload& w, const std::vector<std::string>& header,
                              ServeRole role) {
  std::string out = "#!/usr/bin/env bash\n";
  for (const std::string& line : header) out += "# " + core::CommentText(line) + "\n";
  if (role != ServeRole::kColocated) {
    out += fmt::format(
        "# The {} pool of a prefill/decode disaggregated deployment: start the other pool's script "
        "too, and send requests through {}.\n",
        role == ServeRole::kPrefill ? "prefill" : "decode",
        engine == ServeEngine::kSglang
            ? "python3 -m sglang_router.launch_router --pd-disaggregation --prefill "
              "http://PREFILL_HOST:30000 --decode http://DECODE_HOST:30000"
            : "a proxy that sends each prompt to the prefill pool and its decode to the decode "
              "pool (vLLM's disaggregated serving examples)");
  }
  out += fmt::format("# One replica of {} ({} GPUs); run it on each of the {} replicas.\n",
                     cost::FormatServeLayout(l), l.gpus_per_replica(), l.replicas);
  if (w.fp4) {
    // Neither engine quantizes to NVFP4 at load time: ModelOpt writes the checkpoint and its
    // hf_quant_config.json, from which both read the method.
    out += fmt::format(
        "# Weights fp4 (NVFP4, FP4 GEMMs): MODEL must be an NVFP4 checkpoint (NVIDIA ModelOpt); {} "
        "reads the method from its config.\n",
        engine == ServeEngine::kVllm ? "vLLM" : "SGLang");
  }
  if (w.weight_only_bits > 0) {
    // Neither engine quantizes to INT8/INT4 weight-only at load time: both read the method (AWQ,
    // GPTQ, compressed-tensors) from the checkpoint's quantization_config.
    out += fmt::format(
        "# Weights int{0} weight-only (W{0}A16): MODEL must be a checkpoint quantized so (AWQ, "
        "GPTQ "
        "or compressed-tensors, group size {1}); {2} reads the method from its config.\n",
        w.weight_only_bits, cost::kWeightOnlyGroup,
        engine == ServeEngine::kVllm ? "vLLM" : "SGLang");
  }
  out += "set -euo pipefail\n";
  out += ": \"${MODEL:?set MODEL to the checkpoint: a Hugging Face id or a local path}\"\n";
  out += engine == ServeEngine::kVllm
             ? "exec vllm serve \"$MODEL\""
             : "exec python3 -m sglang.launch_server --model-path \"$MODEL\"";
  for (const auto& [flag, value] : ServeEngineFlags(engine, l, w, role)) {
    out += " \\\n  " + flag;
    if (!value.empty()) out += " " + core::ShellQuote(value);
  }
  out += " \\\n  \"$@\"\n";
  return out;
}

}  // namespace pentamesh::launch
