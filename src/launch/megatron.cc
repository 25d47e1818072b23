// Megatron-LM: train.sh (pretrain_gpt.py and its arguments) plus sbatch.sh, and the reverse:
// reading a Megatron-LM (or Megatron-DeepSpeed) command line back into model, batch and layout.
//
// Layout -> flags: TP --tensor-model-parallel-size (+ --sequence-parallel), PP
// --pipeline-model-parallel-size (+ --num-virtual-stages-per-pipeline-rank V for interleaved;
// --account-for-{embedding,loss}-in-pipeline-split when the first/last chunk hold a layer fewer,
// spec::ChunkLayers' split), CP --context-parallel-size with --cp-comm-type p2p (ring) or a2a
// (Ulysses), EP --expert-model-parallel-size with --expert-tensor-parallel-size
// (ExpertTensorParallel), ZeRO 1 --use-distributed-optimizer, ZeRO 2/3 Megatron-FSDP
// (--data-parallel-sharding-strategy optim_grads / optim_grads_params). The data-parallel size is
// implied by the world size (EngineDataParallel).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <regex>

#include "core/quote.h"
#include "launch/internal.h"
#include "spec/limits.h"
#include "spec/load_toml.h"

namespace pentamesh::launch::internal {
namespace {

std::string Num(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

}  // namespace

int64_t SplitDeficit(const spec::ModelSpec& m, const spec::Layout& l) {
  const int64_t chunks = l.pp * l.virtual_stages;
  const int64_t n = spec::ChunkLayers(m.layers, chunks, chunks > 1 ? 1 : 0);
  return chunks * n - m.layers;
}

Flags MegatronModelFlags(const spec::ModelSpec& m, const spec::TrainSpec& t, bool ds,
                         bool per_node_dispatch) {
  Flags f = {{"--num-layers", Num(m.layers)},
             {"--hidden-size", Num(m.hidden)},
             {"--ffn-hidden-size", Num(m.ffn_hidden)},
             {"--num-attention-heads", Num(m.heads)}};
  if (ds) {
    f.push_back({"--num-key-value-heads", Num(m.kv_heads)});
  } else if (m.kv_heads != m.heads) {
    f.push_back({"--group-query-attention", ""});
    f.push_back({"--num-query-groups", Num(m.kv_heads)});
  }
  f.push_back({"--kv-channels", Num(m.head_dim)});
  if (m.is_mla() && !ds) {  // Megatron-Core's MLA (MLATransformerConfig); --qk-head-dim: nope part
    f.push_back({"--multi-latent-attention", ""});
    if (m.mla.q_lora_rank > 0) f.push_back({"--q-lora-rank", Num(m.mla.q_lora_rank)});
    f.push_back({"--kv-lora-rank", Num(m.mla.kv_lora_rank)});
    f.push_back({"--qk-head-dim", Num(m.mla.qk_nope_head_dim)});
    f.push_back({"--qk-pos-emb-head-dim", Num(m.mla.qk_rope_head_dim)});
    f.push_back({"--v-head-dim", Num(m.mla.v_head_dim)});
  }
  if (m.sliding_window > 0 && m.global_every != 1 && !ds) {
    // Flash-attention's (left, right) window: the query and w - 1 keys before it.
    f.push_back({"--window-size", fmt::format("{},0", m.sliding_window - 1)});
    if (m.global_every > 1) f.push_back({"--window-attn-skip-freq", Num(m.global_every)});
  }
  f.push_back({"--seq-length", Num(t.seq_len)});
  f.push_back({"--max-position-embeddings", Num(m.max_seq_len)});
  if (ds) {
    // Megatron-DeepSpeed's theta flag takes an integer (rule ds-rope-theta-int).
    f.push_back({"--use-rotary-position-embeddings", ""});
    f.push_back({"--rotary-position-embeddings-theta", Num(m.rope_theta)});
    f.push_back({"--normalization", "rmsnorm"});
    f.push_back({"--layernorm-epsilon", fmt::format("{}", m.norm_eps)});
    // FlashAttention-2 (pentamesh costs attention without the s x s score matrix); without a
    // --use-flash-attn* flag Megatron-DeepSpeed's attention materialises it.
    f.push_back({"--use-flash-attn-v2", ""});
  } else {
    f.push_back({"--position-embedding-type", "rope"});
    f.push_back({"--rotary-base", Num(m.rope_theta)});
    f.push_back({"--normalization", "RMSNorm"});
    f.push_back({"--norm-epsilon", fmt::format("{}", m.norm_eps)});
  }
  if (m.activation == spec::Activation::kSwiGLU) f.push_back({"--swiglu", ""});
  if (!m.tied_embeddings) f.push_back({"--untie-embeddings-and-output-weights", ""});
  f.push_back({"--disable-bias-linear", ""});
  f.push_back({"--attention-dropout", "0.0"});
  f.push_back({"--hidden-dropout", "0.0"});
  f.push_back({"--tokenizer-type", "NullTokenizer"});
  f.push_back({"--vocab-size", Num(m.vocab)});
  f.push_back({"--make-vocab-size-divisible-by", "1"});
  if (m.is_moe()) {
    const auto& e = m.moe;
    if (ds) {
      // DeepSpeed-MoE (deepspeed/moe/sharded_moe.py): dropless top-k (capacity_factor 0) or
      // capacity cf * tokens * k / experts with dropping; the second of two experts the argmax,
      // not a Gumbel sample; the optimizer's MoE parameter group ZeRO asserts. Router and aux-loss
      // scope are what DeepSpeed's gate does (rules ds-moe-router, ds-moe-aux-scope).
      f.push_back({"--num-experts", Num(e.experts)});
      f.push_back({"--topk", Num(e.top_k)});
      f.push_back({"--expert-interval", Num(e.moe_layer_freq)});
      f.push_back({"--mlp-type", "standard"});
      if (e.capacity_factor > 0) {
        f.push_back({"--moe-train-capacity-factor", fmt::format("{}", e.capacity_factor)});
        f.push_back({"--moe-eval-capacity-factor", fmt::format("{}", e.capacity_factor)});
      } else {
        f.push_back({"--disable-moe-token-dropping", ""});
      }
      if (e.top_k == 2) f.push_back({"--disable-moe-top2-2nd-expert-sampling", ""});
      f.push_back({"--create-moe-param-group", ""});
    } else {
      f.push_back({"--num-experts", Num(e.experts)});
      f.push_back({"--moe-router-topk", Num(e.top_k)});
      f.push_back({"--moe-ffn-hidden-size", Num(e.expert_ffn_hidden)});
      f.push_back({"--moe-layer-freq", MoeLayerFreq(m)});
      if (e.shared_experts > 0) {
        f.push_back(
            {"--moe-shared-expert-intermediate-size", Num(e.shared_experts * e.expert_ffn_hidden)});
      }
      // Megatron-Core's default router takes the top k logits and softmaxes them (the gates
      // renormalised over the chosen k); --moe-router-pre-softmax softmaxes over every expert
      // first and keeps those probabilities (model/moe.h's two routers).
      if (e.router == spec::MoeRouter::kSoftmaxTopK) f.push_back({"--moe-router-pre-softmax", ""});
      // aux_loss: the micro-batch's tokens (over its tp and cp ranks); global_aux_loss: also over
      // the data-parallel ranks (model.moe.aux_loss_scope).
      f.push_back(
          {"--moe-router-load-balancing-type",
           e.aux_loss_scope == spec::AuxLossScope::kGlobal ? "global_aux_loss" : "aux_loss"});
      f.push_back({"--moe-aux-loss-coeff", "1e-2"});
      f.push_back({"--moe-grouped-gemm", ""});
      // The dispatch the estimate costed: DeepEP's sends a token once per remote node.
      f.push_back({"--moe-token-dispatcher-type", per_node_dispatch ? "flex" : "alltoall"});
      if (per_node_dispatch) f.push_back({"--moe-flex-dispatcher-backend", "deepep"});
      if (e.capacity_factor > 0) {
        f.push_back({"--moe-expert-capacity-factor", fmt::format("{}", e.capacity_factor)});
      }
    }
  }
  return f;
}

std::string MoeLayerFreq(const spec::ModelSpec& m) {
  const int64_t d = m.moe.first_dense_layers;
  if (d == 0) return Num(m.moe.moe_layer_freq);
  if (m.moe.moe_layer_freq == 1) return fmt::format("([0]*{}+[1]*{})", d, m.layers - d);
  std::string list = "[";
  for (int64_t l = 0; l < m.layers; ++l) {
    list += fmt::format("{}{}", l == 0 ? "" : ",", m.IsMoeLayer(l) ? 1 : 0);
  }
  return list + "]";
}

Flags MegatronParallelFlags(const spec::ModelSpec& m, const spec::TrainSpec& t,
                            const spec::Layout& l, bool ds) {
  Flags f = {{"--tensor-model-parallel-size", Num(l.tp)}};
  if (l.tp > 1 && l.sp) f.push_back({"--sequence-parallel", ""});
  f.push_back({"--pipeline-model-parallel-size", Num(l.pp)});
  if (ds && l.pp == 1) f.push_back({"--no-pipeline-parallel", ""});
  if (!ds && l.pp > 1) {
    if (l.schedule == spec::Schedule::kInterleaved) {
      f.push_back({"--num-virtual-stages-per-pipeline-rank", Num(l.virtual_stages)});
    }
    const int64_t d = SplitDeficit(m, l);
    if (d == 2) f.push_back({"--account-for-embedding-in-pipeline-split", ""});
    if (d >= 1) f.push_back({"--account-for-loss-in-pipeline-split", ""});
  }
  if (ds) {
    if (l.cp > 1) f.push_back({"--ds-sequence-parallel-size", Num(l.cp)});
    if (l.ep > 1) f.push_back({"--moe-expert-parallel-size", Num(l.ep)});
    // Experts split over tp like the dense FFN (etp = tp); without the flag each tp rank holds
    // whole experts and routes its 1/tp of the tokens (etp = 1).
    if (m.is_moe() && l.tp > 1 && ExpertTensorParallel(l) == l.tp) {
      f.push_back({"--enable-expert-tensor-parallelism", ""});
    }
    f.push_back({"--zero-stage", Num(l.zero)});
  } else {
    f.push_back({"--context-parallel-size", Num(l.cp)});
    if (l.cp > 1)
      f.push_back({"--cp-comm-type", l.cp_kind == spec::CpKind::kUlysses ? "a2a" : "p2p"});
    if (m.is_moe()) {
      f.push_back({"--expert-model-parallel-size", Num(l.ep)});
      f.push_back({"--expert-tensor-parallel-size", Num(ExpertTensorParallel(l))});
    }
    if (l.zero == 1) {
      f.push_back({"--use-distributed-optimizer", ""});
      f.push_back({"--overlap-grad-reduce", ""});
      f.push_back({"--overlap-param-gather", ""});
    } else if (l.zero >= 2) {
      // The flags the Megatron-FSDP user guide of core_v0.16.1 lists as required.
      f.push_back({"--use-megatron-fsdp", ""});
      f.push_back({"--data-parallel-sharding-strategy",
                   l.zero == 2 ? "optim_grads" : "optim_grads_params"});
      f.push_back({"--no-gradient-accumulation-fusion", ""});
      f.push_back({"--use-distributed-optimizer", ""});
      f.push_back({"--ckpt-format", "fsdp_dtensor"});
    }
  }
  if (l.recompute == spec::Recompute::kSelective) {
    f.push_back({"--recompute-granularity", "selective"});
    // --recompute-modules takes its words as separate arguments (nargs '+'): the first after the
    // flag, the others as entries of their own.
    const char* flag = "--recompute-modules";
    for (uint32_t bit = spec::kRecomputeCoreAttn; bit <= spec::kRecomputeMlp; bit <<= 1) {
      if ((l.recompute_modules & bit) == 0) continue;
      const std::string word = spec::RecomputeModulesText(bit);
      f.push_back(*flag != '\0' ? Flags::value_type{flag, word} : Flags::value_type{word, ""});
      flag = "";
    }
  } else if (l.recompute == spec::Recompute::kFull) {
    f.push_back({"--recompute-granularity", "full"});
    f.push_back({"--recompute-method", "uniform"});
    f.push_back({"--recompute-num-layers", "1"});
  }
  f.push_back({"--micro-batch-size", Num(l.mbs)});
  f.push_back({"--global-batch-size", Num(t.global_batch_seqs())});
  switch (t.precision) {
    case spec::Precision::kBf16:
      f.push_back({"--bf16", ""});
      break;
    case spec::Precision::kFp8:
      f.push_back({"--bf16", ""});
      if (!ds) f.push_back({"--fp8-format", "hybrid"});
      break;
    case spec::Precision::kFp32:
      break;
  }
  return f;
}

// The arrays of a launch script: NAME=( --flag value ... ).
std::string FlagArray(const std::string& name, const Flags& flags) {
  std::string s = name + "=(\n";
  for (const auto& [flag, value] : flags) {
    s += "  " + core::ShellQuote(flag);
    // The checkpoint directory is the script's variable (expanded, one word); every other value
    // is literal.
    if (value == kCheckpointDirRef) {
      s += " \"" + value + "\"";
    } else if (!value.empty()) {
      s += " " + core::ShellQuote(value);
    }
    s += "\n";
  }
  return s + ")\n";
}

Flags TrainingLoopFlags(const spec::TrainSpec& t, bool ds) {
  const int64_t iters = TrainIters(t);
  Flags f = {{"--train-iters", Num(iters)},
             {"--lr", "3e-4"},
             {"--min-lr", "3e-5"},
             {"--lr-decay-style", "cosine"},
             {"--lr-warmup-iters", Num(std::min<int64_t>(2000, std::max<int64_t>(1, iters / 100)))},
             {"--weight-decay", "0.1"},
             {"--clip-grad", "1.0"},
             {"--adam-beta1", "0.9"},
             {"--adam-beta2", "0.95"},
             {"--init-method-std", "0.02"},
             {"--log-interval", "10"},
             {"--save-interval", "1000"},
             {"--eval-interval", "1000"},
             {"--eval-iters", "0"},
             {"--save", kCheckpointDirRef},
             {"--load", kCheckpointDirRef}};
  if (!ds) f.push_back({"--mock-data", ""});  // replace with --data-path for real data
  return f;
}

std::vector<File> EmitMegatron(const EmitInput& in) {
  std::string s = "#!/bin/bash\n" + Header(Engine::kMegatron, in, "# ");
  s += "# One process per GPU: sbatch.sh runs this script on every rank with RANK, LOCAL_RANK,\n"
       "# WORLD_SIZE, MASTER_ADDR and MASTER_PORT set. MEGATRON_LM: a Megatron-LM checkout.\n"
       "# --mock-data trains on synthetic tokens: replace it with --data-path and a tokenizer.\n"
       "set -euo pipefail\n";
  // Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS is not 1 (validate_args). The EP overlap
  // needs the communication stream to run beside the compute: 8 connections, 32 with DeepEP
  // (Megatron-Bridge's performance launcher, perf_plugins.py, for Hopper).
  if (EpOverlap(in)) {
    s += PerNodeDispatch(in) ? "export CUDA_DEVICE_MAX_CONNECTIONS=32\n"
                             : "export CUDA_DEVICE_MAX_CONNECTIONS=8\n";
  } else {
    s += in.layout.zero < 2 ? "export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                            : "unset CUDA_DEVICE_MAX_CONNECTIONS\n";
  }
  s += "CHECKPOINT_DIR=${CHECKPOINT_DIR:-checkpoints}\n";
  s += FlagArray("MODEL_ARGS", MegatronModelFlags(in.model, in.train, false, PerNodeDispatch(in)));
  Flags parallel = MegatronParallelFlags(in.model, in.train, in.layout, false);
  if (EpOverlap(in)) {
    // The overlap as the estimate costed it (the calibration's overlapped runs also delay the
    // weight gradients: Megatron-Bridge's moe_a2a_overlap).
    parallel.push_back({"--overlap-moe-expert-parallel-comm", ""});
    parallel.push_back({"--delay-wgrad-compute", ""});
  }
  s += FlagArray("PARALLEL_ARGS", parallel);
  s += FlagArray("TRAINING_ARGS", TrainingLoopFlags(in.train, false));
  s += "${PYTHON:-python} \"${MEGATRON_LM:-.}/pretrain_gpt.py\" \"${MODEL_ARGS[@]}\" "
       "\"${PARALLEL_ARGS[@]}\" \"${TRAINING_ARGS[@]}\" \"$@\"\n";
  return {File{"train.sh", s, true},
          File{"sbatch.sh", Sbatch(Engine::kMegatron, in, "bash train.sh"), true}};
}

namespace {

struct FlagReader {
  const std::string& name;
  const std::map<std::string, FlagValue>& flags;

  bool Has(const std::string& f) const { return flags.count(f) > 0; }
  std::string Where(const std::string& f) const {
    const auto it = flags.find(f);
    return it == flags.end() || it->second.line == 0
               ? name
               : fmt::format("{}: line {}", name, it->second.line);
  }
  core::Result<std::string> Str(const std::string& f) const {
    const auto it = flags.find(f);
    if (it == flags.end() || it->second.values.empty()) {
      return core::Status::Error(fmt::format("{}: {} needs a value", Where(f), f));
    }
    return it->second.values.front();
  }
  core::Result<std::string> StrOr(const std::string& f, const std::string& def) const {
    if (!Has(f)) return def;
    return Str(f);
  }
  // Reads the flag into v when it is given, else leaves v.
  core::Status RealIfGiven(const std::string& f, double& v) const {
    if (!Has(f)) return core::Status::Ok();
    PM_ASSIGN_OR_RETURN(v, Real(f));
    return core::Status::Ok();
  }
  core::Result<double> Real(const std::string& f) const {
    PM_ASSIGN_OR_RETURN(std::string s, Str(f));
    try {
      size_t pos = 0;
      const double v = std::stod(s, &pos);
      if (pos == s.size()) return v;
    } catch (const std::exception&) {
    }
    return core::Status::Error(fmt::format("{}: {} '{}' is not a number", Where(f), f, s));
  }
  core::Result<int64_t> Int(const std::string& f, std::optional<int64_t> def = std::nullopt,
                            bool positive = true) const {
    if (!Has(f)) {
      if (def) return *def;
      return core::Status::Error(fmt::format("{}: {} is missing", name, f));
    }
    PM_ASSIGN_OR_RETURN(std::string s, Str(f));
    int64_t v = 0;
    size_t pos = 0;
    try {
      v = std::stoll(s, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != s.size() || s.empty()) {
      return core::Status::Error(
          fmt::format("{}: {} '{}' is not an integer (a shell variable the importer could not "
                      "resolve?)",
                      Where(f), f, s));
    }
    if (positive && v <= 0) {
      return core::Status::Error(fmt::format("{}: {} {} must be positive", Where(f), f, v));
    }
    return v;
  }
};

// --window-size "left,right" (or "(left, right)", flash-attention's window; right 0 for a causal
// model) -> sliding_window = left + 1; --window-attn-skip-freq N -> global_every.
core::Status ReadWindow(const FlagReader& r, spec::ModelSpec& m) {
  PM_ASSIGN_OR_RETURN(const std::string text, r.Str("--window-size"));
  static const std::regex pair(R"(\s*\(?\s*(-?\d{1,9})\s*,\s*(-?\d{1,9})\s*\)?\s*)");
  std::smatch match;
  if (!std::regex_match(text, match, pair) || std::stoll(match[1].str()) < 0 ||
      std::stoll(match[2].str()) != 0) {
    return core::Status::Error(
        fmt::format("{}: --window-size '{}' is not 'left,0' with left >= 0 (a causal window)",
                    r.Where("--window-size"), text));
  }
  m.sliding_window = std::stoll(match[1].str()) + 1;
  PM_ASSIGN_OR_RETURN(m.global_every, r.Int("--window-attn-skip-freq", 0, false));
  return core::Status::Ok();
}

// --moe-layer-freq: k, "([0]*a+[1]*b)" or "[0,1,...]" -> first_dense_layers, moe_layer_freq.
core::Status ReadLayerFreq(const FlagReader& r, spec::ModelSpec& m) {
  if (!r.Has("--moe-layer-freq")) return core::Status::Ok();
  PM_ASSIGN_OR_RETURN(std::string s, r.Str("--moe-layer-freq"));
  std::vector<int> pattern;
  static const std::regex kInt(R"(^\d+$)");
  static const std::regex kRuns(R"(^\(?\s*((?:\[[01]\]\s*\*\s*\d+\s*\+?\s*)+)\)?$)");
  static const std::regex kList(R"(^\[\s*[01](\s*,\s*[01])*\s*\]$)");
  if (std::regex_match(s, kInt)) {
    PM_ASSIGN_OR_RETURN(m.moe.moe_layer_freq,
                        spec::ParseInt(r.Where("--moe-layer-freq") + ": --moe-layer-freq", s, 0));
    m.moe.first_dense_layers = 0;
    if (m.moe.moe_layer_freq <= 0) {
      return core::Status::Error(
          fmt::format("{}: --moe-layer-freq must be positive", r.Where("--moe-layer-freq")));
    }
    return core::Status::Ok();
  }
  if (std::regex_match(s, kRuns)) {
    static const std::regex kRun(R"(\[([01])\]\s*\*\s*(\d+))");
    for (auto it = std::sregex_iterator(s.begin(), s.end(), kRun); it != std::sregex_iterator();
         ++it) {
      // Each count is bounded by the layers still to describe (a huge count is an error, not an
      // allocation of that many entries).
      const int64_t room = std::max<int64_t>(m.layers - static_cast<int64_t>(pattern.size()), 0);
      PM_ASSIGN_OR_RETURN(
          const int64_t count,
          spec::ParseInt(fmt::format("{}: --moe-layer-freq '{}' (the model has {} layers)",
                                     r.Where("--moe-layer-freq"), s, m.layers),
                         (*it)[2].str(), 0, room));
      pattern.insert(pattern.end(), static_cast<size_t>(count), (*it)[1].str() == "1" ? 1 : 0);
    }
  } else if (std::regex_match(s, kList)) {
    for (char c : s) {
      if (c == '0' || c == '1') pattern.push_back(c - '0');
    }
  } else {
    return core::Status::Error(
        fmt::format("{}: --moe-layer-freq '{}' is not an integer, ([0]*a+[1]*b) or a list of 0/1",
                    r.Where("--moe-layer-freq"), s));
  }
  if (static_cast<int64_t>(pattern.size()) != m.layers) {
    return core::Status::Error(fmt::format("{}: --moe-layer-freq lists {} layers, not {}",
                                           r.Where("--moe-layer-freq"), pattern.size(), m.layers));
  }
  int64_t first = 0;
  while (first < m.layers && pattern[first] == 0) ++first;
  int64_t freq = 1;
  while (first + freq < m.layers && pattern[first + freq] == 0) ++freq;
  m.moe.first_dense_layers = first;
  m.moe.moe_layer_freq = freq;
  for (int64_t l = 0; l < m.layers; ++l) {
    if (m.IsMoeLayer(l) != (pattern[l] == 1)) {
      return core::Status::Error(fmt::format(
          "{}: --moe-layer-freq: the MoE layers are not 'first k dense, then every n-th' (layer "
          "{} breaks it)",
          r.Where("--moe-layer-freq"), l));
    }
  }
  return core::Status::Ok();
}

// Vocabulary sizes of the tokenizers Megatron's examples name, for scripts without --vocab-size.
std::optional<int64_t> TokenizerVocab(const std::string& type) {
  if (type == "Llama2Tokenizer") return 32000;
  if (type == "Llama3Tokenizer") return 128256;
  if (type == "GPT2BPETokenizer") return 50257;
  return std::nullopt;
}

// An integer flag read into a field of Spec, in table order (the order of the checks).
template <typename Spec>
struct IntFlag {
  const char* flag;
  int64_t Spec::*field;
  std::optional<int64_t> def = std::nullopt;  // the value when the flag is missing; none: required
  bool positive = true;
  const char* ds_flag = nullptr;  // Megatron-DeepSpeed's name, where it differs
};

template <typename Spec, size_t N>
core::Status ReadInts(const FlagReader& r, bool ds, const IntFlag<Spec> (&table)[N], Spec& s) {
  for (const IntFlag<Spec>& f : table) {
    PM_ASSIGN_OR_RETURN(s.*f.field, r.Int(ds && f.ds_flag ? f.ds_flag : f.flag, f.def, f.positive));
  }
  return core::Status::Ok();
}

constexpr IntFlag<spec::ModelSpec> kShapeFlags[] = {
    {.flag = "--num-layers", .field = &spec::ModelSpec::layers},
    {.flag = "--hidden-size", .field = &spec::ModelSpec::hidden},
    {.flag = "--num-attention-heads", .field = &spec::ModelSpec::heads}};

constexpr IntFlag<spec::MlaSpec> kMlaFlags[] = {
    {.flag = "--q-lora-rank", .field = &spec::MlaSpec::q_lora_rank, .def = 0, .positive = false},
    {.flag = "--kv-lora-rank", .field = &spec::MlaSpec::kv_lora_rank},
    {.flag = "--qk-head-dim", .field = &spec::MlaSpec::qk_nope_head_dim},
    {.flag = "--qk-pos-emb-head-dim", .field = &spec::MlaSpec::qk_rope_head_dim},
    {.flag = "--v-head-dim", .field = &spec::MlaSpec::v_head_dim}};

constexpr IntFlag<spec::Layout> kDegreeFlags[] = {
    {.flag = "--micro-batch-size", .field = &spec::Layout::mbs},
    {.flag = "--tensor-model-parallel-size", .field = &spec::Layout::tp, .def = 1},
    {.flag = "--pipeline-model-parallel-size", .field = &spec::Layout::pp, .def = 1},
    {.flag = "--context-parallel-size",
     .field = &spec::Layout::cp,
     .def = 1,
     .ds_flag = "--ds-sequence-parallel-size"},
    {.flag = "--expert-model-parallel-size",
     .field = &spec::Layout::ep,
     .def = 1,
     .ds_flag = "--moe-expert-parallel-size"}};

// The flag values that name a choice, and the choice each names.
struct CpCommType {
  const char* name;
  spec::CpKind kind;
};
constexpr CpCommType kCpCommTypes[] = {{"p2p", spec::CpKind::kRing},
                                       {"all_gather", spec::CpKind::kRing},
                                       {"a2a", spec::CpKind::kUlysses}};

struct ShardingStrategy {
  const char* name;
  int zero;
};
constexpr ShardingStrategy kShardingStrategies[] = {
    {"optim_grads_params", 3}, {"optim_grads", 2}, {"optim", 1}, {"no_shard", 0}};

struct RecomputeGranularity {
  const char* name;
  spec::Recompute recompute;
};
constexpr RecomputeGranularity kRecomputeGranularities[] = {
    {"selective", spec::Recompute::kSelective}, {"full", spec::Recompute::kFull}};

// The entry of table named name, or nullptr.
template <typename Entry, size_t N>
const Entry* FindByName(const Entry (&table)[N], const std::string& name) {
  for (const Entry& e : table) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

// Layers, hidden and heads; query groups (GQA), head and FFN sizes; MLA's ranks and dims.
core::Status ReadAttentionShape(const FlagReader& r, bool ds, spec::ModelSpec& m) {
  PM_RETURN_IF_ERROR(ReadInts(r, ds, kShapeFlags, m));
  m.kv_heads = m.heads;
  if (ds) {
    PM_ASSIGN_OR_RETURN(m.kv_heads, r.Int("--num-key-value-heads", m.heads));
  } else if (r.Has("--group-query-attention")) {
    // Without --group-query-attention Megatron ignores --num-query-groups; without a count,
    // TransformerConfig takes one group per head.
    PM_ASSIGN_OR_RETURN(m.kv_heads, r.Int("--num-query-groups", m.heads));
  }
  PM_ASSIGN_OR_RETURN(m.head_dim, r.Int("--kv-channels", m.hidden / m.heads));
  // Both engines' default FFN: 4h, or with SwiGLU 2/3 of it rounded down to a multiple of 64.
  const int64_t ffn_default = r.Has("--swiglu") ? (4 * m.hidden * 2 / 3) / 64 * 64 : 4 * m.hidden;
  PM_ASSIGN_OR_RETURN(m.ffn_hidden, r.Int("--ffn-hidden-size", ffn_default));
  if (r.Has("--multi-latent-attention")) {
    m.kv_heads = m.heads;
    PM_RETURN_IF_ERROR(ReadInts(r, ds, kMlaFlags, m.mla));
  }
  return core::Status::Ok();
}

// --vocab-size, else the vocabulary of a known --tokenizer-type, else --model's (each with a note
// saying so).
core::Status ReadVocab(const FlagReader& r, const spec::ModelSpec* given, Imported& out) {
  if (r.Has("--vocab-size")) {
    PM_ASSIGN_OR_RETURN(out.model.vocab, r.Int("--vocab-size"));
    return core::Status::Ok();
  }
  // Without the flag both engines' pretrain_gpt.py default to GPT-2's BPE (args_defaults
  // tokenizer_type 'GPT2BPETokenizer': Megatron-LM core_v0.16.1 pretrain_gpt.py line 347,
  // Megatron-DeepSpeed 4efb479d line 364).
  PM_ASSIGN_OR_RETURN(const std::string type, r.StrOr("--tokenizer-type", "GPT2BPETokenizer"));
  const auto v = TokenizerVocab(type);
  if (!v && given != nullptr) {
    out.model.vocab = given->vocab;
    out.notes.push_back(fmt::format(
        "vocabulary {} from --model {} (--tokenizer-type {} names no vocabulary size; the "
        "model's shape is the file's)",
        given->vocab, given->name, type));
    return core::Status::Ok();
  }
  if (!v) {
    return core::Status::Error(fmt::format(
        "{}: no --vocab-size, and the vocabulary of --tokenizer-type {} is not known (pass "
        "--model: a preset or TOML whose vocabulary it is)",
        r.name, type));
  }
  out.model.vocab = *v;
  out.notes.push_back(fmt::format("vocabulary {} from --tokenizer-type {}", *v, type));
  return core::Status::Ok();
}

// --moe-shared-expert-intermediate-size, a multiple of the expert size -> shared_experts.
core::Status ReadSharedExperts(const FlagReader& r, spec::ModelSpec& m) {
  const std::string flag = "--moe-shared-expert-intermediate-size";
  if (!r.Has(flag)) return core::Status::Ok();
  PM_ASSIGN_OR_RETURN(int64_t shared, r.Int(flag));
  if (shared % m.moe.expert_ffn_hidden != 0) {
    return core::Status::Error(
        fmt::format("{}: {} {} is not a multiple of --moe-ffn-hidden-size {}", r.Where(flag), flag,
                    shared, m.moe.expert_ffn_hidden));
  }
  m.moe.shared_experts = shared / m.moe.expert_ffn_hidden;
  return core::Status::Ok();
}

// --moe-router-pre-softmax -> softmax_topk (else Megatron-Core's top-k-then-softmax:
// topk_renorm); --moe-router-load-balancing-type -> aux_loss_scope (seq_aux_loss's per-sequence
// statistics and none cost what the micro-batch's do: sequence; sinkhorn is not modelled).
core::Status ReadRouter(const FlagReader& r, spec::ModelSpec& m) {
  m.moe.router = r.Has("--moe-router-pre-softmax") ? spec::MoeRouter::kSoftmaxTopK
                                                   : spec::MoeRouter::kTopKRenorm;
  const std::string flag = "--moe-router-load-balancing-type";
  if (!r.Has(flag)) return core::Status::Ok();
  PM_ASSIGN_OR_RETURN(std::string type, r.Str(flag));
  if (type == "global_aux_loss") {
    m.moe.aux_loss_scope = spec::AuxLossScope::kGlobal;
  } else if (type == "aux_loss" || type == "seq_aux_loss" || type == "none") {
    m.moe.aux_loss_scope = spec::AuxLossScope::kSequence;
  } else {
    return core::Status::Error(fmt::format(
        "{}: {} '{}' is not modelled (pentamesh's routers are softmax top-k with an auxiliary "
        "loss: aux_loss, seq_aux_loss, global_aux_loss or none)",
        r.Where(flag), flag, type));
  }
  return core::Status::Ok();
}

// The MoE flags, given --num-experts; Megatron-DeepSpeed's experts are FFN-sized.
core::Status ReadMoe(const FlagReader& r, bool ds, spec::ModelSpec& m) {
  // Megatron-DeepSpeed's --num-experts takes a list (nargs '+'): one count per MoE layer, the
  // pyramid MoE of its PR-MoE examples, which pentamesh's one expert count cannot say.
  const std::vector<std::string>& counts = r.flags.at("--num-experts").values;
  if (std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) != counts.end()) {
    return core::Status::Error(fmt::format(
        "{}: --num-experts gives {} per-layer expert counts, not all equal (a pyramid MoE): "
        "pentamesh models one count for every MoE layer",
        r.Where("--num-experts"), counts.size()));
  }
  PM_ASSIGN_OR_RETURN(m.moe.experts, r.Int("--num-experts"));
  if (ds) {
    // Megatron-DeepSpeed's defaults: top-1, an MoE layer every 2nd layer, capacity factor 1.0
    // with token dropping (--disable-moe-token-dropping: dropless).
    PM_ASSIGN_OR_RETURN(m.moe.top_k, r.Int("--topk", 1));
    PM_ASSIGN_OR_RETURN(m.moe.moe_layer_freq, r.Int("--expert-interval", 2));
    m.moe.expert_ffn_hidden = m.ffn_hidden;
    // DeepSpeed's gate: top-1 keeps the softmax probability, top-k >= 2 renormalises over the k.
    m.moe.router = m.moe.top_k == 1 ? spec::MoeRouter::kSoftmaxTopK : spec::MoeRouter::kTopKRenorm;
    m.moe.aux_loss_scope = spec::AuxLossScope::kSequence;
    m.moe.capacity_factor = 1.0;
    PM_RETURN_IF_ERROR(r.RealIfGiven("--moe-train-capacity-factor", m.moe.capacity_factor));
    if (r.Has("--disable-moe-token-dropping")) m.moe.capacity_factor = 0;
    return core::Status::Ok();
  }
  PM_ASSIGN_OR_RETURN(m.moe.top_k, r.Int("--moe-router-topk", 2));
  PM_ASSIGN_OR_RETURN(m.moe.expert_ffn_hidden, r.Int("--moe-ffn-hidden-size", m.ffn_hidden));
  PM_RETURN_IF_ERROR(ReadLayerFreq(r, m));
  PM_RETURN_IF_ERROR(ReadSharedExperts(r, m));
  PM_RETURN_IF_ERROR(ReadRouter(r, m));
  m.moe.capacity_factor = 0;  // Megatron's default: dropless
  return r.RealIfGiven("--moe-expert-capacity-factor", m.moe.capacity_factor);
}

// The model from the flags; `given` (--model, may be null) supplies only a vocabulary they leave
// unknown.
core::Status ReadMegatronModel(const FlagReader& r, bool ds, const spec::ModelSpec* given,
                               Imported& out) {
  spec::ModelSpec& m = out.model;
  m.name = "imported";
  PM_RETURN_IF_ERROR(ReadAttentionShape(r, ds, m));
  if (r.Has("--window-size")) PM_RETURN_IF_ERROR(ReadWindow(r, m));
  PM_RETURN_IF_ERROR(ReadVocab(r, given, out));
  PM_ASSIGN_OR_RETURN(m.max_seq_len, r.Int("--max-position-embeddings", 0, false));
  m.activation = r.Has("--swiglu") ? spec::Activation::kSwiGLU : spec::Activation::kGeLU;
  m.tied_embeddings = !r.Has("--untie-embeddings-and-output-weights");
  PM_RETURN_IF_ERROR(r.RealIfGiven(ds ? "--layernorm-epsilon" : "--norm-epsilon", m.norm_eps));
  PM_RETURN_IF_ERROR(
      r.RealIfGiven(ds ? "--rotary-position-embeddings-theta" : "--rotary-base", m.rope_theta));
  if (r.Has("--num-experts")) PM_RETURN_IF_ERROR(ReadMoe(r, ds, m));
  return core::Status::Ok();
}

// Both engines pad the vocabulary to a multiple of --make-vocab-size-divisible-by (default 128)
// times tp (_vocab_size_with_padding): the embedding and output layer the run builds.
core::Status PadVocab(const FlagReader& r, int64_t tp, Imported& out) {
  PM_ASSIGN_OR_RETURN(const int64_t divisible, r.Int("--make-vocab-size-divisible-by", 128));
  const int64_t multiple = divisible * tp;
  const int64_t padded = (out.model.vocab + multiple - 1) / multiple * multiple;
  if (padded != out.model.vocab) {
    out.notes.push_back(
        fmt::format("vocabulary {} padded to {} (--make-vocab-size-divisible-by {} x tp {}, as the "
                    "engine pads)",
                    out.model.vocab, padded, divisible, tp));
    out.model.vocab = padded;
  }
  return core::Status::Ok();
}

// --expert-tensor-parallel-size: 1 or tp (Megatron only).
core::Status ReadExpertTp(const FlagReader& r, bool ds, spec::Layout& l) {
  if (ds) {  // Megatron-DeepSpeed: experts split over tp only with this flag
    const bool moe = r.Has("--num-experts");
    if (moe && l.tp > 1 && !r.Has("--enable-expert-tensor-parallelism")) l.etp = 1;
    return core::Status::Ok();
  }
  if (!r.Has("--expert-tensor-parallel-size")) return core::Status::Ok();
  PM_ASSIGN_OR_RETURN(int64_t etp, r.Int("--expert-tensor-parallel-size"));
  if (etp != l.tp && etp != 1) {
    return core::Status::Error(fmt::format(
        "{}: --expert-tensor-parallel-size {} is neither 1 nor --tensor-model-parallel-size {}: "
        "pentamesh's layouts split experts over tp or keep them whole",
        r.Where("--expert-tensor-parallel-size"), etp, l.tp));
  }
  l.etp = etp == l.tp ? 0 : etp;
  return core::Status::Ok();
}

// The context-parallel kind: --cp-comm-type (Megatron); Ulysses for Megatron-DeepSpeed.
core::Status ReadCpKind(const FlagReader& r, bool ds, spec::Layout& l) {
  l.cp_kind = spec::CpKind::kRing;
  if (!ds && r.Has("--cp-comm-type")) {
    PM_ASSIGN_OR_RETURN(std::string kind, r.Str("--cp-comm-type"));
    const CpCommType* type = FindByName(kCpCommTypes, kind);
    if (type == nullptr) {
      return core::Status::Error(fmt::format(
          "{}: --cp-comm-type {} has no pentamesh equivalent (p2p = ring, a2a = Ulysses)",
          r.Where("--cp-comm-type"), kind));
    }
    l.cp_kind = type->kind;
  } else if (ds && l.cp > 1) {
    l.cp_kind = spec::CpKind::kUlysses;
  }
  if (l.cp == 1) l.cp_kind = spec::CpKind::kRing;
  return core::Status::Ok();
}

// Model chunks per pipeline rank, directly or from the layers per virtual stage; the schedule.
core::Status ReadVirtualStages(const FlagReader& r, bool ds, const spec::ModelSpec& m,
                               spec::Layout& l) {
  l.schedule = spec::Schedule::kOneFOneB;
  l.virtual_stages = 1;
  if (!ds && r.Has("--num-virtual-stages-per-pipeline-rank")) {
    PM_ASSIGN_OR_RETURN(l.virtual_stages, r.Int("--num-virtual-stages-per-pipeline-rank"));
  } else if (!ds && r.Has("--num-layers-per-virtual-pipeline-stage")) {
    PM_ASSIGN_OR_RETURN(int64_t per, r.Int("--num-layers-per-virtual-pipeline-stage"));
    const int64_t total = m.layers + (r.Has("--account-for-embedding-in-pipeline-split") ? 1 : 0) +
                          (r.Has("--account-for-loss-in-pipeline-split") ? 1 : 0);
    if (total % (l.pp * per) != 0) {
      return core::Status::Error(fmt::format(
          "{}: --num-layers-per-virtual-pipeline-stage {} does not divide the {} layers per "
          "pipeline stage",
          r.Where("--num-layers-per-virtual-pipeline-stage"), per, total / l.pp));
    }
    l.virtual_stages = total / (l.pp * per);
  }
  if (l.virtual_stages > 1) l.schedule = spec::Schedule::kInterleaved;
  return core::Status::Ok();
}

// The ZeRO stage: --zero-stage (DeepSpeed), Megatron-FSDP's sharding strategy or the
// distributed optimizer.
core::Status ReadZero(const FlagReader& r, bool ds, spec::Layout& l) {
  if (ds) {
    PM_ASSIGN_OR_RETURN(int64_t z, r.Int("--zero-stage", 0, false));
    l.zero = static_cast<int>(z);
  } else if (r.Has("--use-megatron-fsdp") || r.Has("--use-torch-fsdp2")) {
    PM_ASSIGN_OR_RETURN(const std::string strategy,
                        r.StrOr("--data-parallel-sharding-strategy", "optim_grads_params"));
    const ShardingStrategy* s = FindByName(kShardingStrategies, strategy);
    if (s == nullptr) {
      return core::Status::Error(
          fmt::format("{}: --data-parallel-sharding-strategy '{}' is unknown",
                      r.Where("--data-parallel-sharding-strategy"), strategy));
    }
    l.zero = s->zero;
  } else {
    l.zero = r.Has("--use-distributed-optimizer") ? 1 : 0;
  }
  return core::Status::Ok();
}

// --recompute-granularity, else the older --recompute-activations / --checkpoint-activations.
core::Status ReadRecompute(const FlagReader& r, bool ds, spec::Layout& l) {
  l.recompute = spec::Recompute::kNone;
  if (r.Has("--recompute-granularity")) {
    PM_ASSIGN_OR_RETURN(std::string g, r.Str("--recompute-granularity"));
    const RecomputeGranularity* granularity = FindByName(kRecomputeGranularities, g);
    if (granularity == nullptr) {
      return core::Status::Error(
          fmt::format("{}: --recompute-granularity '{}' is not full or "
                      "selective",
                      r.Where("--recompute-granularity"), g));
    }
    l.recompute = granularity->recompute;
  } else if (r.Has("--recompute-activations") || r.Has("--checkpoint-activations")) {
    l.recompute = ds ? spec::Recompute::kFull : spec::Recompute::kSelective;
  }
  return core::Status::Ok();
}

// --moe-token-dispatcher-type (Megatron's default allgather) and --moe-enable-deepep: whether the
// dispatch is DeepEP's / HybridEP's per-node one (Imported::ep_dispatch_per_node).
core::Status ReadDispatcher(const FlagReader& r, Imported& out) {
  PM_ASSIGN_OR_RETURN(const std::string type, r.StrOr("--moe-token-dispatcher-type", "allgather"));
  const bool per_node = type == "flex" || r.Has("--moe-enable-deepep");
  out.ep_dispatch_per_node = per_node;
  if (per_node) {
    PM_ASSIGN_OR_RETURN(const std::string backend,
                        r.StrOr("--moe-flex-dispatcher-backend", "deepep"));
    out.notes.push_back(fmt::format(
        "MoE dispatcher {} ({}): costed as a per-node dispatch (ep_dispatch_per_node), whatever "
        "the stack profile says",
        r.Has("--moe-enable-deepep") ? "--moe-enable-deepep" : "flex", backend));
  }
  return core::Status::Ok();
}

// --recompute-modules: the modules pentamesh costs (spec::RecomputeModule); the others (moe,
// shared_experts) are noted and costed as not recomputed.
void ReadRecomputeModules(const FlagReader& r, spec::Layout& l, std::vector<std::string>& notes) {
  uint32_t modules = 0;
  for (const std::string& w : r.flags.at("--recompute-modules").values) {
    auto m = spec::ParseRecomputeModules(w);
    if (m.ok()) {
      modules |= *m;
    } else {
      notes.push_back(fmt::format("{}: --recompute-modules {} is not costed (not recomputed)",
                                  r.Where("--recompute-modules"), w));
    }
  }
  // An empty list recomputes nothing selectively.
  if (modules == 0) l.recompute = spec::Recompute::kNone;
  l.recompute_modules = modules == spec::kRecomputeCoreAttn ? 0 : modules;
}

// Precision, global batch and run length (t.seq_len already read).
core::Status ReadBatch(const FlagReader& r, spec::TrainSpec& t) {
  t.precision =
      r.Has("--fp8-format")
          ? spec::Precision::kFp8
          : (r.Has("--bf16") || r.Has("--fp16") ? spec::Precision::kBf16 : spec::Precision::kFp32);
  if (r.Has("--global-batch-size")) {
    PM_ASSIGN_OR_RETURN(int64_t gbs, r.Int("--global-batch-size"));
    t.global_batch_tokens = gbs * t.seq_len;
  }
  if (r.Has("--train-iters")) {
    PM_ASSIGN_OR_RETURN(int64_t iters, r.Int("--train-iters"));
    t.total_tokens = static_cast<double>(iters) * static_cast<double>(t.global_batch_tokens);
  }
  return core::Status::Ok();
}

}  // namespace

core::Status ReadMegatronFlags(const std::string& name,
                               const std::map<std::string, FlagValue>& flags, bool ds,
                               const ImportOptions& options, Imported& out) {
  const FlagReader r{name, flags};
  spec::Layout& l = out.layout;
  // --model is the model where the file does not say it: all of it when the file has no
  // --num-layers, else only the vocabulary its tokenizer leaves unknown.
  std::optional<spec::ModelSpec> given;
  if (options.model) {
    PM_ASSIGN_OR_RETURN(given, spec::LoadModel(*options.model));
  }
  const bool whole_model_given = given && !r.Has("--num-layers");
  if (whole_model_given) {
    out.model = *given;
  } else {
    PM_RETURN_IF_ERROR(ReadMegatronModel(r, ds, given ? &*given : nullptr, out));
  }
  PM_ASSIGN_OR_RETURN(out.train.seq_len, r.Int("--seq-length", options.seq_len));
  if (out.model.max_seq_len == 0) out.model.max_seq_len = out.train.seq_len;
  PM_RETURN_IF_ERROR(ReadInts(r, ds, kDegreeFlags, l));
  if (!whole_model_given) PM_RETURN_IF_ERROR(PadVocab(r, l.tp, out));
  PM_RETURN_IF_ERROR(ReadExpertTp(r, ds, l));
  l.sp = l.tp == 1 || r.Has("--sequence-parallel");
  PM_RETURN_IF_ERROR(ReadCpKind(r, ds, l));
  PM_RETURN_IF_ERROR(ReadVirtualStages(r, ds, out.model, l));
  PM_RETURN_IF_ERROR(ReadZero(r, ds, l));
  PM_RETURN_IF_ERROR(ReadRecompute(r, ds, l));
  if (!ds && l.recompute == spec::Recompute::kSelective && r.Has("--recompute-modules")) {
    ReadRecomputeModules(r, l, out.notes);
  }
  if (!ds && out.model.is_moe()) PM_RETURN_IF_ERROR(ReadDispatcher(r, out));
  if (l.schedule == spec::Schedule::kInterleaved) {
    // Megatron-LM overlaps an interleaved pipeline's sends unless told not to; Megatron-DeepSpeed
    // only when asked (cost::CostParams::pp_p2p_overlap).
    out.pp_p2p_overlap =
        ds ? r.Has("--overlap-p2p-communication") : !r.Has("--no-overlap-p2p-communication");
    out.notes.push_back(fmt::format(
        "interleaved pipeline: sends {} (pp_p2p_overlap), whatever the "
        "stack profile says",
        *out.pp_p2p_overlap ? "overlapped with the next chunk's compute" : "on the critical path"));
  }
  PM_RETURN_IF_ERROR(ReadBatch(r, out.train));
  l.ep_placement = l.ep > 1 ? spec::EpPlacement::kFolded : spec::EpPlacement::kSeparate;
  return core::Status::Ok();
}

}  // namespace pentamesh::launch::internal
