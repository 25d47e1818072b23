// launch/serve_engines: a serving layout (cost::ServeLayout and the engine policy of
// cost::ServeWorkload) as the launch command of vLLM (`vllm serve`) or SGLang
// (`python3 -m sglang.launch_server`), written by `pentamesh serve --emit ENGINE DIR`.
// Every value is shell-quoted (core/quote.h). The flags are those of vLLM 0.19.1 and SGLang
// 0.5.23 (src/launch/data/vllm_flags_0.19.1.tsv, sglang_flags_0.5.23.tsv, read from the released
// packages by scripts/serving_engine_flags.py); tests/launch/serve_engines_test.cc checks every
// emitted flag against them.
//
// Mapping (one command per replica; run it on each of layout.replicas nodes or groups):
//   vLLM:   --tensor-parallel-size tp, --pipeline-parallel-size pp; ep > 1: --data-parallel-size
//           ep --enable-expert-parallel (vLLM's EP spans DP x TP, attention data parallel over
//           the ep groups as in cost/inference.h); --max-model-len input + output;
//           --gpu-memory-utilization; --max-num-batched-tokens and --enable-chunked-prefill;
//           --max-num-seqs; --block-size; --kv-cache-dtype fp8 or auto; --quantization fp8.
//   SGLang: --tp-size tp x ep, --ep-size tp x ep when ep > 1 (SGLang's experts split over the TP
//           group), --pp-size pp; --context-length; --mem-fraction-static; --chunked-prefill-size;
//           --max-running-requests; --page-size; --kv-cache-dtype fp8_e4m3 or auto;
//           --quantization fp8.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "cost/inference.h"

namespace pentamesh::launch {

enum class ServeEngine { kVllm, kSglang };
// "vllm" or "sglang"; the error names --emit and both.
core::Result<ServeEngine> ParseServeEngine(const std::string& name);
const char* ToString(ServeEngine engine);

// A replica's part in the deployment: the whole request, or one pool of prefill/decode
// disaggregation (plan::ServeDisaggregated). SGLang: --disaggregation-mode prefill|decode, the KV
// sent by the Mooncake transfer engine (--disaggregation-transfer-backend mooncake), a
// sglang_router with --pd-disaggregation in front; vLLM: its NIXL connector on both pools
// (--kv-transfer-config, kv_role kv_both), a proxy in front.
enum class ServeRole { kColocated, kPrefill, kDecode };

// The command's flags in order: (flag, value); a switch has an empty value.
std::vector<std::pair<std::string, std::string>> ServeEngineFlags(
    ServeEngine engine, const cost::ServeLayout& layout, const cost::ServeWorkload& w,
    ServeRole role = ServeRole::kColocated);

// A bash script: the model path from $MODEL (required), then the command, every value quoted.
// `header`: comment lines describing the plan (made safe with core::CommentText).
// A pool's script says so in its header and names the router that pairs the pools.
std::string ServeLaunchScript(ServeEngine engine, const cost::ServeLayout& layout,
                              const cost::ServeWorkload& w, const std::vector<std::string>& header,
                              ServeRole role = ServeRole::kColocated);

}  // namespace pentamesh::launch
