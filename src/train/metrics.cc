#include "train/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/numeric.h"
#include "core/output.h"
#include "cost/expert_balance.h"

namespace pentamesh::train {

std::string StepStatsToJson(const StepStats& s, const cost::Estimate* predicted,
                            double flops_per_token) {
  nlohmann::ordered_json j;
  j["step"] = s.step;
  j["loss"] = s.loss;
  j["ce_loss"] = s.ce_loss;
  j["lr"] = s.lr;
  j["grad_norm"] = s.grad_norm;
  j["tokens"] = s.tokens;
  j["step_time_s"] = s.step_time_s;
  j["tokens_per_s"] = s.tokens_per_s;
  j["mfu"] = s.mfu;
  j["nonfinite_total"] = s.nonfinite_total;
  j["loss_spike"] = s.loss_spike;
  nlohmann::ordered_json peak;
  for (int i = 0; i < core::kMemTagCount; ++i) {
    peak[core::MemTagName(static_cast<core::MemTag>(i))] = s.peak_bytes[static_cast<size_t>(i)];
  }
  peak["total"] = s.peak_bytes_total;
  j["peak_bytes"] = peak;
  if (!s.moe.routed.empty()) {
    j["aux_loss"] = s.moe.aux_loss;
    j["z_loss"] = s.moe.z_loss;
    j["tokens_per_expert"] = s.moe.routed;
    j["expert_load_imbalance"] = s.moe.LoadImbalance();
    j["dropped_tokens"] = s.moe.dropped;
    j["max_expert_share"] = s.moe.MaxExpertShare();
    j["expert_collapse_share"] =
        cost::ExpertCollapseShare(static_cast<int64_t>(s.moe.routed.size()), s.moe_top_k);
    j["expert_collapse"] = s.moe.CollapseWarning(s.moe_top_k);  // max share above that
  }
  if (s.bubble) {
    j["bubble"] = s.bubble->measured;
    j["bubble_simulated"] = s.bubble->simulated;
    j["microbatches"] = s.bubble->microbatches;
    j["pipeline_action_s"] = {
        {"F", s.bubble->time_f_s}, {"B", s.bubble->time_b_s}, {"W", s.bubble->time_w_s}};
  }
  if (s.eval_loss) j["eval_loss"] = *s.eval_loss;
  if (!s.comm_bytes.empty()) j["comm_bytes"] = s.comm_bytes;  // per mesh group (distributed runs)
  if (predicted) {
    const cost::Memory& m = predicted->memory;
    nlohmann::ordered_json p;
    const auto by_tag = m.ByTag();
    nlohmann::ordered_json bytes;
    for (int i = 0; i < core::kMemTagCount; ++i) {
      const auto tag = static_cast<core::MemTag>(i);
      if (tag != core::MemTag::kOther)
        bytes[core::MemTagName(tag)] = by_tag[static_cast<size_t>(i)];
    }
    bytes["total"] = m.total;
    p["peak_bytes"] = bytes;
    p["flops_per_token"] = flops_per_token;
    // Every step-time term, and each term's measured counterpart where the engine has one: the
    // time its mesh groups spent in collectives during the step (comm_bytes[group].time_s).
    nlohmann::json time = nlohmann::json::object(), measured = nlohmann::json::object();
    for (const cost::TimeTerm& term : cost::kTimeTerms) {
      time[term.name] = predicted->time.*term.field;
      double seconds = 0;
      bool any = false;
      for (const char* group : term.groups) {
        if (group == nullptr || !s.comm_bytes.contains(group)) continue;
        seconds += s.comm_bytes[group].value("time_s", 0.0);
        any = true;
      }
      if (any) measured[term.name] = seconds;
    }
    time["step"] = predicted->time.step;
    p["time_s"] = time;
    if (!measured.empty()) j["comm_time_s"] = measured;
    p["mfu"] = predicted->mfu;
    j["predicted"] = p;
  }
  return j.dump();
}

std::string SkippedStepToJson(const StepStats& s) {
  nlohmann::ordered_json j;
  j["step"] = s.step + 1;  // the attempted step; the trainer stays at s.step
  j["skipped"] = true;
  j["cause"] = std::isfinite(s.ce_loss) ? "non-finite gradient norm" : "non-finite loss";
  j["lr"] = s.lr;
  j["nonfinite_in_row"] = s.nonfinite_in_row;
  j["nonfinite_total"] = s.nonfinite_total;
  return j.dump();
}

namespace {

double Mean(std::vector<double>::const_iterator begin, std::vector<double>::const_iterator end) {
  double sum = 0;
  for (auto it = begin; it != end; ++it) sum += *it;
  return begin == end ? 0 : sum / static_cast<double>(end - begin);
}

}  // namespace

void RunOutcome::AddStep(const StepStats& s) {
  ++steps_;
  losses_.push_back(s.loss);
  if (s.loss_spike) spike_steps_.push_back(s.step);
  if (s.bubble) {
    microbatches_ = s.bubble->microbatches;
    bubble_.push_back(s.bubble->measured);
    bubble_simulated_.push_back(s.bubble->simulated);
  }
  if (!s.moe.routed.empty()) {
    imbalance_.push_back(s.moe.LoadImbalance());
    max_expert_share_last_ = s.moe.MaxExpertShare();
    collapse_steps_ += s.moe.CollapseWarning(s.moe_top_k) ? 1 : 0;
  }
}

nlohmann::ordered_json RunOutcome::ToJson() const {
  nlohmann::ordered_json j;
  j["steps"] = steps_;
  j["skipped_steps"] = skipped_;
  j["loss_spikes"] = static_cast<int64_t>(spike_steps_.size());
  j["spike_steps"] = spike_steps_;
  if (!losses_.empty()) {
    j["first_loss"] = losses_.front();
    j["last_loss"] = losses_.back();
    j["max_loss"] = *std::max_element(losses_.begin(), losses_.end());
  }
  if (!bubble_.empty()) {
    const size_t skip = bubble_.size() > 1 ? 1 : 0;  // the first step's allocations
    j["bubble"] = {
        {"steps", bubble_.size() - skip},
        {"microbatches", microbatches_},
        {"measured", Median({bubble_.begin() + static_cast<std::ptrdiff_t>(skip), bubble_.end()})},
        {"simulated", Median({bubble_simulated_.begin() + static_cast<std::ptrdiff_t>(skip),
                              bubble_simulated_.end()})}};
  }
  if (!imbalance_.empty()) {
    const auto quarter = static_cast<std::ptrdiff_t>(std::max<size_t>(1, imbalance_.size() / 4));
    j["moe"] = {{"imbalance_early", Mean(imbalance_.begin(), imbalance_.begin() + quarter)},
                {"imbalance_late", Mean(imbalance_.end() - quarter, imbalance_.end())},
                {"max_expert_share_last", max_expert_share_last_},
                {"collapse_steps", collapse_steps_}};
  }
  return j;
}

core::Result<MetricsWriter> MetricsWriter::Open(const std::string& dir, bool append) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return core::Status::Error(fmt::format("run.out_dir: cannot create {}: {}", dir, ec.message()));
  const std::string path = (std::filesystem::path(dir) / "metrics.jsonl").string();
  std::FILE* f = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f)
    return core::Status::Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  return MetricsWriter(f, path);
}

MetricsWriter::~MetricsWriter() {
  if (!file_) return;
  std::fclose(file_);
  // Best effort: a destructor cannot report; metrics.jsonl holds everything it summarises.
  const std::string summary =
      (std::filesystem::path(path_).parent_path() / "summary.json").string();
  (void)core::WriteFileAtomic(summary, outcome_.ToJson().dump(2) + "\n");  // whole or not at all
}

core::Status MetricsWriter::Write(const StepStats& s, const cost::Estimate* predicted,
                                  double flops_per_token) {
  outcome_.AddStep(s);
  return WriteLine(StepStatsToJson(s, predicted, flops_per_token) + "\n");
}

core::Status MetricsWriter::WriteSkipped(const StepStats& s) {
  outcome_.AddSkipped();
  return WriteLine(SkippedStepToJson(s) + "\n");
}

core::Status MetricsWriter::WriteLine(const std::string& line) {
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    return core::Status::Error(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
  }
  return core::Status::Ok();
}

}  // namespace pentamesh::train
