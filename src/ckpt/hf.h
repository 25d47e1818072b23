// Hugging Face interop: a pentamesh model <-> a Hugging Face model directory (config.json,
// model.safetensors or shards + model.safetensors.index.json, the SentencePiece tokenizer).
//   dense -> LlamaForCausalLM      (model_type "llama")
//   MoE, router topk_renorm, no shared experts, every layer MoE
//         -> MixtralForCausalLM    (model_type "mixtral": softmax, top-k, gates renormalised)
//   other MoE
//         -> Qwen2MoeForCausalLM   (model_type "qwen2_moe", norm_topk_prob = (router ==
//         topk_renorm))
// Both MoE forms compute exactly pentamesh's MoE (model/moe.h: softmax over all experts in fp32,
// top-k, the router option's gates, dropless). For Qwen2-MoE, pentamesh's dense leading layers
// map to mlp_only_layers, its ungated shared experts to Qwen2's sigmoid-gated shared_expert with a
// zero gate (sigmoid(0) = 1/2) and down_proj scaled by 2 (exact in floating point), and its
// missing attention biases to zero q/k/v biases. Details and the refused fields:
// docs/checkpoint_format.md.
// Invariants:
//  - Every pentamesh parameter becomes contiguous HF tensors (an expert stack splits along dim 0)
//    times an exact power-of-two scale, so export -> import is bitwise the identity.
//  - RoPE: pentamesh rotates the pairs (i, i + D/2) (kernels/cpu/rope.h), as HF Llama's
//    rotate_half does, so q/k rows are NOT permuted.
//  - Import accepts only what pentamesh can compute exactly: every HF-only tensor (biases, the
//    shared-expert gate) must be zero, and each violation is an error naming the file and field.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/param_set.h"
#include "spec/model_spec.h"

namespace pentamesh::ckpt {

// A whole (global) fp32 tensor.
struct FullTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major
};

// The Hugging Face architectures pentamesh writes and reads.
enum class HfArch { kLlama, kQwen2Moe, kMixtral };

// The architecture `model` is exported as (the table above).
HfArch HfArchOf(const spec::ModelSpec& model);
// "LlamaForCausalLM", "Qwen2MoeForCausalLM", "MixtralForCausalLM".
const char* HfArchName(HfArch arch);

// The parameters of `model` (global names and shapes), as model::Stage registers them.
std::vector<std::pair<std::string, std::vector<int64_t>>> ModelParams(const spec::ModelSpec& model);

// config.json for `model`, or an error naming the model field HF cannot express.
core::Result<nlohmann::json> HfConfig(const spec::ModelSpec& model);

struct HfExportOptions {
  std::string dir;              // created if absent; existing HF files in it are replaced
  std::string tokenizer_model;  // SentencePiece .model copied as tokenizer.model; "" = none
  int64_t max_shard_bytes = int64_t{4} << 30;  // larger models are sharded with an index
};

// Full fp32 tensor of pentamesh parameter `name` (global shape `shape`).
using TensorSource = std::function<core::Result<std::vector<float>>(
    const std::string& name, const std::vector<int64_t>& shape)>;

// Writes the HF directory. Returns the written file names (relative to dir).
core::Result<std::vector<std::string>> ExportHf(const spec::ModelSpec& model,
                                                const TensorSource& source,
                                                const HfExportOptions& options);

// An HF directory read back into pentamesh terms.
struct HfModel {
  spec::ModelSpec model;                      // from config.json (capacity_factor = 0: dropless)
  HfArch arch = HfArch::kLlama;               // from config.json's model_type
  std::map<std::string, FullTensor> tensors;  // pentamesh global name -> fp32 tensor
  // config.json keys transformers does not read for its model_type (a typo such as
  // "num_key_value_head" leaves the field at its default there too), named for the user.
  std::vector<std::string> warnings;
};

// Reads config.json and the safetensors (single file or index + shards; F32, BF16 or F16).
// Errors name the file and the field. Keys of config.json that transformers 4.44.2's
// configuration class for the model_type does not take (src/ckpt/data/
// hf_config_keys_transformers_4.44.2.txt) are named in HfModel::warnings, not refused: HF configs
// carry keys of other tools, which transformers keeps as attributes its model never reads; the
// keys it does read and that would change the model pentamesh builds are checked one by one
// (refused unless they match pentamesh's architecture).
core::Result<HfModel> ImportHf(const std::string& dir);

// OK iff the architecture fields of `hf` equal those of `run` (the run config's [model]); the
// error lists every differing field as model.<field>: run value vs HF value.
core::Status CheckSameArchitecture(const spec::ModelSpec& hf, const spec::ModelSpec& run,
                                   const std::string& what);

// Copies the imported tensors into this rank's shards of `params` (fp32 master weights; Adam m
// and v are left as they are) and refreshes the compute weights. Every parameter must be present
// with its global shape.
core::Status LoadHfIntoParams(const HfModel& hf, model::ParamSet& params);

}  // namespace pentamesh::ckpt
