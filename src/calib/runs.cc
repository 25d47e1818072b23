// Published rows -> (model, cluster, train, layout, facts, measured throughput). Every default
// filled in is recorded in Run::assumptions; docs/COST_MODEL.md "Published runs" lists the rules.
#include "calib/runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/numeric.h"
#include "spec/json_input.h"
#include "spec/limits.h"
#include "spec/load_toml.h"
#include "spec/validate.h"

namespace pentamesh::calib {
namespace {

using nlohmann::json;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool Has(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

// The whole number that `text` starts with (digits only), clamped to [0, 2^31 - 1]; 0 for none.
int64_t LeadingCount(const char* text) {
  int64_t n = 0;
  for (; *text >= '0' && *text <= '9'; ++text) {
    n = std::min<int64_t>(n * 10 + (*text - '0'), spec::kMaxField);
  }
  return n;
}

// Reads one row's fields; the first bad value becomes `error` (row id and field named).
class RowReader {
 public:
  RowReader(const json& row, std::string id) : row_(row), id_(std::move(id)) {}

  const json* Find(const char* section, const char* field) const {
    const auto s = row_.find(section);
    if (s == row_.end() || !s->is_object()) return nullptr;
    const auto f = s->find(field);
    if (f == s->end() || f->is_null()) return nullptr;
    return &*f;
  }
  // A positive finite number, or nullopt when absent (null). Any other value is an error.
  std::optional<double> Positive(const char* section, const char* field) {
    const json* v = Find(section, field);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      Fail(section, field, fmt::format("must be a number, not {}", v->type_name()));
      return std::nullopt;
    }
    const double x = v->get<double>();
    if (!std::isfinite(x) || x <= 0) {
      Fail(section, field, fmt::format("must be a positive finite number, got {}", x));
      return std::nullopt;
    }
    return x;
  }
  // A positive whole number below 2^31 (degrees, sizes, counts).
  std::optional<int64_t> Count(const char* section, const char* field) {
    const std::optional<double> x = Positive(section, field);
    if (!x) return std::nullopt;
    if (*x != std::floor(*x) || *x >= 2147483648.0) {
      Fail(section, field, fmt::format("must be a whole number below 2^31, got {}", *x));
      return std::nullopt;
    }
    return static_cast<int64_t>(*x);
  }
  std::string Text(const char* section, const char* field) {
    const json* v = Find(section, field);
    if (v == nullptr) return "";
    if (v->is_string()) return v->get<std::string>();
    if (v->is_boolean() || v->is_number()) return v->dump();
    Fail(section, field, fmt::format("must be a string, not {}", v->type_name()));
    return "";
  }
  std::optional<bool> Bool(const char* section, const char* field) {
    const json* v = Find(section, field);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      Fail(section, field, fmt::format("must be true, false or null, not {}", v->type_name()));
      return std::nullopt;
    }
    return v->get<bool>();
  }
  void Fail(const char* section, const char* field, const std::string& why) {
    if (error.empty()) error = fmt::format("row '{}': {}.{} {}", id_, section, field, why);
  }
  std::string error;

 private:
  const json& row_;
  std::string id_;
};

// Vocabulary of a family whose row leaves it out (the sources' tokenizers).
std::optional<int64_t> FamilyVocab(const std::string& family) {
  const std::string f = Lower(family);
  if (Has(f, "grok")) return 131072;
  if (Has(f, "llama 3") || Has(f, "llama3")) return 128256;
  if (Has(f, "nemotron")) return 256000;
  return std::nullopt;
}

void MapModel(RowReader& r, Run& run) {
  spec::ModelSpec& m = run.model;
  const std::string family = r.Text("model", "family");
  m.name = r.Text("model", "name");
  if (m.name.empty()) m.name = run.id;
  const auto layers = r.Count("model", "num_layers");
  const auto hidden = r.Count("model", "hidden_size");
  const auto heads = r.Count("model", "num_attention_heads");
  const auto seq = r.Count("model", "seq_length");
  if (!layers || !hidden || !heads || !seq) {
    run.unusable = "the model's num_layers, hidden_size, num_attention_heads or seq_length is null";
    return;
  }
  m.layers = *layers;
  m.hidden = *hidden;
  m.heads = *heads;
  m.max_seq_len = *seq;
  m.kv_heads = r.Count("model", "num_kv_heads").value_or(m.heads);
  m.head_dim = r.Count("model", "head_dim").value_or(m.hidden / m.heads);
  const std::string act = Lower(r.Text("model", "activation"));
  // Two FFN GEMMs (GELU, squared ReLU) or three (SwiGLU, GEGLU: gated).
  m.activation = Has(act, "glu") ? spec::Activation::kSwiGLU : spec::Activation::kGeLU;
  if (act.empty()) run.assumptions.push_back("activation not published: GELU (2 FFN GEMMs)");
  if (auto f = r.Count("model", "ffn_hidden_size")) {
    m.ffn_hidden = *f;
  } else {
    m.ffn_hidden = 4 * m.hidden;
    run.assumptions.push_back("ffn_hidden_size not published: 4 x hidden (GPT default)");
  }
  if (auto v = r.Count("model", "vocab_size")) {
    m.vocab = *v;
  } else if (auto fv = FamilyVocab(family)) {
    m.vocab = *fv;
    run.assumptions.push_back(
        fmt::format("vocab_size not published: {} ({} tokenizer)", *fv, family));
  } else {
    run.unusable = "model.vocab_size is null and the family's tokenizer is not known";
    return;
  }
  if (auto e = r.Count("model", "num_experts"); e && *e > 1) {
    m.moe.experts = *e;
    m.moe.top_k = r.Count("model", "top_k").value_or(2);
    m.moe.expert_ffn_hidden = r.Count("model", "moe_ffn_hidden_size").value_or(m.ffn_hidden);
    m.moe.shared_experts = r.Count("model", "shared_experts").value_or(0);
    m.moe.capacity_factor = 0;  // dropless (Megatron-Core's default; Bridge force-balances)
  }
  // GPT-style models (Megatron GPT, MPT) tie the LM head to the embedding.
  m.tied_embeddings = Has(Lower(family), "gpt") || Has(Lower(family), "mpt");
}

// ZeRO stage from the source's words for its data-parallel sharding.
int ZeroStage(const std::string& sharding_words, const std::string& stack, Run& run) {
  const std::string s = Lower(sharding_words);
  if (Has(s, "shard_grad_op") || Has(s, "zero-2") || Has(s, "zero2") ||
      Has(s, "not resharded after forward")) {
    return 2;
  }
  if (Has(s, "full_shard") || Has(s, "fsdp") || Has(s, "fully sharded") || Has(s, "zero-3")) {
    return 3;
  }
  if (Has(s, "distributed optimizer") || Has(s, "distributed_fused_adam") || Has(s, "zero-1")) {
    return 1;
  }
  if (s.empty()) {
    // Megatron-Core / NeMo recipes of 2023 on use the distributed optimizer; torchtitan FSDP2.
    const int z = stack == "megatron" ? 1 : stack == "torchtitan" ? 3 : 0;
    run.assumptions.push_back(
        fmt::format("data_parallel_sharding not published: ZeRO-{} ({} default)", z, stack));
    return z;
  }
  return 0;  // DDP, "none"
}

spec::Recompute RecomputeFrom(const std::string& words) {
  const std::string s = Lower(words);
  if (Has(s, "full")) return spec::Recompute::kFull;
  if (Has(s, "selective")) return spec::Recompute::kSelective;
  return spec::Recompute::kNone;
}

void MapLayout(RowReader& r, Run& run) {
  spec::Layout& l = run.layout;
  const int64_t gpus = run.cluster.gpus();
  l.tp = r.Count("parallelism", "tp").value_or(1);
  l.pp = r.Count("parallelism", "pp").value_or(1);
  l.cp = r.Count("parallelism", "cp").value_or(1);
  l.ep = r.Count("parallelism", "ep").value_or(1);
  const std::string notes = Lower(r.Text("parallelism", "notes"));
  // dgxc's Grok tables count EP as its own factor (GPUs = TP PP CP EP DP); everywhere else EP
  // is folded into the data-parallel ranks (Megatron-Core).
  l.ep_placement =
      Has(notes, "not folded") ? spec::EpPlacement::kSeparate : spec::EpPlacement::kFolded;
  // Degrees past the GPU limit make no layout (and would overflow the products below).
  const auto product =
      CheckedProduct({l.tp, l.pp, l.cp, l.ep_placement == spec::EpPlacement::kSeparate ? l.ep : 1});
  if (!product || *product > spec::kMaxGpus) {
    run.unusable = "the parallel degrees multiply past the GPU limit";
    return;
  }
  const int64_t other = *product;
  if (auto dp = r.Count("parallelism", "dp")) {
    l.dp = *dp;
  } else if (auto dpd = r.Count("parallelism", "dp_derived")) {
    l.dp = *dpd;
  } else {
    l.dp = std::max<int64_t>(1, gpus / other);
    run.assumptions.push_back("dp not published: GPUs / (tp pp cp)");
  }
  if (auto v = r.Count("parallelism", "vpp"); v && *v > 1 && l.pp > 1) {
    l.schedule = spec::Schedule::kInterleaved;
    l.virtual_stages = *v;
  } else if (l.pp > 1 && Has(Lower(r.Text("parallelism", "pipeline_schedule")), "interleaved") &&
             !v) {
    l.schedule = spec::Schedule::kInterleaved;
    l.virtual_stages = 4;
    run.assumptions.push_back("interleaved schedule without a published V: V = 4");
  }
  const auto sp = r.Bool("parallelism", "sequence_parallel");
  l.sp = sp.value_or(l.tp > 1 && run.stack != "maxtext");
  if (!sp && l.tp > 1) run.assumptions.push_back("sequence_parallel not published: on with tp > 1");
  if (!l.sp && l.tp == 1) l.sp = false;
  l.recompute = RecomputeFrom(r.Text("parallelism", "activation_recompute"));
  if (auto mbs = r.Count("parallelism", "micro_batch_size")) {
    l.mbs = *mbs;
  } else if (run.stack == "torchtitan" && l.pp > 1) {
    // torchtitan splits each DP rank's local batch into as many micro-batches as pp stages.
    int64_t local = 1;
    if (const auto at = notes.find("local batch size "); at != std::string::npos) {
      local = std::max<int64_t>(1, LeadingCount(notes.c_str() + at + 17));
    } else if (auto g = r.Count("parallelism", "global_batch_size")) {
      local = std::max<int64_t>(1, *g / l.dp);
    }
    l.mbs = std::max<int64_t>(1, local / l.pp);
    run.assumptions.push_back(fmt::format(
        "micro_batch_size not published: local batch {} / pp {} micro-batches (torchtitan's "
        "default)",
        local, l.pp));
  } else {
    l.mbs = 1;
    run.assumptions.push_back("micro_batch_size not published: 1");
  }
  l.zero = ZeroStage(r.Text("parallelism", "data_parallel_sharding"), run.stack, run);
  const auto layout_gpus = CheckedMul(l.dp, other);
  if (!layout_gpus || *layout_gpus != gpus) {
    run.unusable =
        fmt::format("degrees dp{} tp{} pp{} cp{} ep{} ({}) do not occupy the {} GPUs published",
                    l.dp, l.tp, l.pp, l.cp, l.ep, spec::ToString(l.ep_placement), gpus);
  }
}

// Global batch in sequences: published, or from the published token count, or one micro-batch
// per data rank (x pp micro-batches with a pipeline) when the source gives only a local batch.
void MapTrain(RowReader& r, Run& run) {
  spec::TrainSpec& t = run.train;
  t.name = run.id;
  t.seq_len = run.model.max_seq_len;
  const std::string precision = Lower(r.Text("parallelism", "precision"));
  run.facts.fp8 = Has(precision, "fp8") || Has(precision, "float8");
  run.facts.fp8_rowwise = run.facts.fp8 && Has(precision, "rowwise");
  t.precision = run.facts.fp8 ? spec::Precision::kFp8 : spec::Precision::kBf16;
  run.facts.fp32_grads = Has(precision, "fp32 reduce") || Has(precision, "fp32 grad");
  int64_t seqs = 0;
  if (auto g = r.Count("parallelism", "global_batch_size")) {
    seqs = *g;
  } else if (auto tok = r.Positive("parallelism", "global_batch_tokens_derived")) {
    const double n = std::round(*tok / static_cast<double>(t.seq_len));
    if (!(n >= 1 && n <= static_cast<double>(spec::kMaxField))) {
      run.unusable = "parallelism.global_batch_tokens_derived is not a whole number of sequences";
      return;
    }
    seqs = static_cast<int64_t>(n);
  } else {
    const std::string notes = Lower(r.Text("parallelism", "notes"));
    int64_t local = run.layout.mbs * (run.stack == "torchtitan" ? run.layout.pp : 1);
    if (const auto at = notes.find("local batch size "); at != std::string::npos) {
      local = std::max<int64_t>(1, LeadingCount(notes.c_str() + at + 17));
    }
    seqs = CheckedMul(run.layout.data_ranks(), local).value_or(spec::kMaxBatchTokens + 1);
    run.assumptions.push_back(
        fmt::format("global_batch_size not published: data ranks x local batch = {}", seqs));
  }
  const auto tokens = CheckedMul(seqs, t.seq_len);
  if (!tokens || *tokens > spec::kMaxBatchTokens) {
    run.unusable = fmt::format("a global batch of {} sequences of {} tokens is past the limit",
                               seqs, t.seq_len);
    return;
  }
  t.global_batch_tokens = *tokens;
  t.total_tokens = 1e12;
}

void MapFacts(RowReader& r, Run& run) {
  const std::string date = r.Text("source", "date");
  const std::string notes = Lower(r.Text("parallelism", "notes") + " " + r.Text("source", "notes"));
  const std::string sharding = Lower(r.Text("parallelism", "data_parallel_sharding"));
  RunFacts& f = run.facts;
  const bool megatron_2021_22 = run.stack == "megatron" && !date.empty() && date < "2023";
  f.flash_attention = !megatron_2021_22;
  f.dropout = megatron_2021_22;
  if (megatron_2021_22) f.fp32_grads = true;
  f.grad_overlap = !Has(sharding, "ddp-impl=local");
  // NeMo's performance recipes (dgxc, NeMo's published tables) run Transformer Engine's TP
  // communication overlap whenever sequence parallelism is on.
  const bool nemo_recipe = run.group == "dgxc_v24.11.1" || run.group == "nemo_24.07" ||
                           Has(notes, "nemo framework performance");
  f.tp_comm_overlap = (nemo_recipe && run.layout.sp && run.layout.tp > 1) ||
                      Has(notes, "tp-comm-overlap") || Has(notes, "async tp") ||
                      Has(notes, "asynctp") ||
                      (Lower(run.id).size() > 8 && Lower(run.id).ends_with("-asynctp"));
  if (Has(notes, "vanillatp")) f.tp_comm_overlap = false;
  f.compiled = Has(notes, "torch.compile") || Has(Lower(run.id), "torch.compile") ||
               run.stack == "maxtext" || run.stack == "megatron";
  if (run.stack == "torchtitan" && run.layout.recompute == spec::Recompute::kSelective) {
    f.selective_forward_share = 0.5;
    f.selective_op_sac = true;
  }
  // torchtitan's loss is PyTorch's cross_entropy on the fp32-cast logits, compiled with the model
  // only from 2025 (its compile components gained "loss").
  f.unfused_cross_entropy = run.stack == "torchtitan" && !(f.compiled && date >= "2025");
  f.fsdp_unsharded_with_pp = run.stack == "torchtitan";
  f.tp_saves_gathered_input = run.stack == "torchtitan";
  f.pp_buffers_per_microbatch = run.stack == "torchtitan";
  if (const auto at = sharding.find("group size "); at != std::string::npos) {
    const int64_t g = LeadingCount(sharding.c_str() + at + 11);
    if (g > 0 && g < run.layout.dp) f.fsdp_shard_group = g;
  }
}

// Tokens per model FLOP-convention: the published TFLOP/s per GPU converted with the source's own
// formula (docs/COST_MODEL.md lists them).
double SourceFlopsPerToken(const Run& run) {
  const spec::ModelSpec& m = run.model;
  const double L = static_cast<double>(m.layers), h = static_cast<double>(m.hidden);
  const double s = static_cast<double>(run.train.seq_len), V = static_cast<double>(m.vocab);
  if (run.group == "megatron2021_table1") {  // Narayanan et al. 2021, Eq. 3 (with recompute)
    return 96.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
  }
  // Megatron-Core num_floating_point_operations, and PaLM's 6N + 12 L h s (Llama 3): both count
  // every matmul parameter and the full attention square.
  const double q = static_cast<double>(m.heads * m.head_dim);
  const double g_over_a = static_cast<double>(m.kv_heads) / static_cast<double>(m.heads);
  const double ffn = static_cast<double>(m.is_moe() ? m.moe.expert_ffn_hidden : m.ffn_hidden) *
                     static_cast<double>(m.is_moe() ? m.moe.top_k : 1) *
                     (m.activation == spec::Activation::kSwiGLU ? 1.5 : 1.0);
  return 12.0 * L * h * h * ((1.0 + g_over_a + s / h) * q / h + ffn / h + V / (2.0 * L * h));
}

void MapMeasured(RowReader& r, Run& run) {
  const double gpus = static_cast<double>(run.cluster.gpus());
  run.memory_gib = r.Positive("measured", "memory_gib_per_gpu");
  if (auto tps = r.Positive("measured", "tokens_per_sec_per_gpu")) {
    run.tokens_per_s_gpu = *tps;
    run.measured_from = "tokens_per_sec_per_gpu";
  } else if (auto tot = r.Positive("measured", "tokens_per_sec_total")) {
    run.tokens_per_s_gpu = *tot / gpus;
    run.measured_from = "tokens_per_sec_total / GPUs";
  } else if (auto step = r.Positive("measured", "step_time_s")) {
    run.tokens_per_s_gpu = static_cast<double>(run.train.global_batch_tokens) / *step / gpus;
    run.measured_from = "global batch tokens / step_time_s / GPUs";
  } else if (auto tf = r.Positive("measured", "tflops_per_gpu")) {
    run.tokens_per_s_gpu = *tf * 1e12 / SourceFlopsPerToken(run);
    run.measured_from = run.group == "megatron2021_table1"
                            ? "tflops_per_gpu / Eq. 3 FLOPs per token (with recompute)"
                            : "tflops_per_gpu / the source's model FLOPs per token";
  } else if (run.usable()) {
    run.unusable = "no throughput published (tokens/s, step time or TFLOP/s)";
  }
}

void MapCluster(RowReader& r, Run& run) {
  const std::string model = r.Text("hardware", "gpu_model");
  const std::string type = r.Text("hardware", "gpu_type");
  run.sku = SkuForGpu(model, type);
  const auto gpus = r.Count("hardware", "num_gpus");
  if (!gpus) {
    r.Fail("hardware", "num_gpus", "is required");
    return;
  }
  if (run.sku.empty()) {
    run.unusable = fmt::format("GPU '{} / {}' has no cluster preset", model, type);
    return;
  }
  auto cluster = spec::LoadCluster(run.sku);
  if (!cluster.ok()) {
    run.unusable = cluster.status().message();
    return;
  }
  run.cluster = *cluster;
  if (auto gpn = r.Count("hardware", "gpus_per_node")) run.cluster.gpus_per_node = *gpn;
  const core::Status st = spec::SetGpuCount(run.cluster, *gpus);
  if (!st.ok()) run.unusable = st.message();
}

Run MapRow(const json& row, const std::string& id, std::string& error) {
  RowReader r(row, id);
  Run run;
  run.id = id;
  run.group = r.Text("source", "group");
  run.software = r.Text("source", "software");
  run.stack = StackForSoftware(run.software, run.group);
  if (run.stack.empty())
    run.unusable = fmt::format("software '{}' has no stack profile", run.software);
  MapCluster(r, run);
  if (run.usable()) MapModel(r, run);
  if (run.usable()) MapLayout(r, run);
  if (run.usable()) MapTrain(r, run);
  if (run.usable()) MapFacts(r, run);
  if (run.usable()) MapMeasured(r, run);
  if (run.usable()) {
    const auto v = spec::Validate(run.model, run.cluster, run.train, run.layout);
    if (!v.empty()) run.unusable = v.front();
  }
  error = r.error;
  return run;
}

}  // namespace

std::string SkuForGpu(const std::string& gpu_model, const std::string& gpu_type) {
  const std::string s = Lower(gpu_model + " " + gpu_type);
  if (Has(s, "a100")) return Has(s, "40gb") || Has(s, "40 gb") ? "a100-40gb" : "a100-80gb";
  if (Has(s, "h200")) return "h200";
  if (Has(s, "h800")) return "h800";
  if (Has(s, "h100")) return Has(s, "hbm2e") ? "h100-hbm2e" : "h100-sxm";
  if (Has(s, "gb200")) return "gb200-nvl72";
  if (Has(s, "b200")) return "b200";
  if (Has(s, "mi300x")) return "mi300x";
  return "";
}

std::string StackForSoftware(const std::string& software, const std::string& group) {
  const std::string s = Lower(software + " " + group);
  if (Has(s, "llm-foundry") || Has(s, "composer")) return "llm-foundry";
  if (Has(s, "torchtitan")) return "torchtitan";
  if (Has(s, "maxtext")) return "maxtext";
  if (Has(s, "deepspeed")) return "deepspeed";
  // Megatron-LM, Megatron-Core, NeMo (built on Megatron-Core), and Meta's Llama 3 stack (4D
  // parallelism in Megatron's style: TP/SP, interleaved PP, CP, ZeRO-sharded DP).
  if (Has(s, "megatron") || Has(s, "nemo") || Has(s, "llama3_paper") || Has(s, "meta internal")) {
    return "megatron";
  }
  // Stacks without a profile of their own, by kind: JAX/XLA compiled (Pax, Praxis, Levanter, T5X)
  // as MaxText; eager PyTorch FSDP (Hugging Face Accelerate, PyTorch FSDP) as llm-foundry; eager
  // PyTorch with ZeRO-style sharding (Colossal-AI, Nanotron) as DeepSpeed.
  if (Has(s, "pax") || Has(s, "praxis") || Has(s, "levanter") || Has(s, "t5x") || Has(s, "jax")) {
    return "maxtext";
  }
  if (Has(s, "accelerate") || Has(s, "fsdp")) return "llm-foundry";
  if (Has(s, "colossal") || Has(s, "nanotron")) return "deepspeed";
  return "";
}

core::Result<std::vector<Run>> RunsFromJson(const json& rows, const std::string& source) {
  if (!rows.is_array()) {
    return core::Status::Error(fmt::format("{}: must be a JSON array of runs", source));
  }
  std::vector<Run> runs;
  std::set<std::string> ids;
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    if (!row.is_object()) {
      return core::Status::Error(fmt::format("{}: row {} is not an object", source, i));
    }
    const auto id_it = row.find("id");
    if (id_it == row.end() || !id_it->is_string() || id_it->get<std::string>().empty()) {
      return core::Status::Error(
          fmt::format("{}: row {}: id must be a non-empty string", source, i));
    }
    const std::string id = id_it->get<std::string>();
    if (!ids.insert(id).second) {
      return core::Status::Error(fmt::format("{}: row '{}': id is used twice", source, id));
    }
    std::string error;
    Run run = MapRow(row, id, error);
    if (!error.empty()) return core::Status::Error(fmt::format("{}: {}", source, error));
    runs.push_back(std::move(run));
  }
  return runs;
}

core::Result<std::vector<Run>> LoadRuns(const std::string& path) {
  PM_ASSIGN_OR_RETURN(std::string text, spec::ReadFile(path));
  PM_ASSIGN_OR_RETURN(const json rows, spec::ParseJson(text, path));  // spec/json_input.h
  return RunsFromJson(rows, path);
}

}  // namespace pentamesh::calib
