// ExplainNoFit: turns an empty search into the nearest miss: which constraint fails and by how
// much.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "plan/search.h"
#include "spec/validate.h"

namespace pentamesh::plan {
namespace {

constexpr double kGB = 1e9;

std::vector<std::string> ExplainGlobal(const spec::ModelSpec& model,
                                       const spec::ClusterSpec& cluster,
                                       const spec::TrainSpec& train) {
  std::vector<std::string> lines;
  if (cluster.gpus() <= 0) {
    lines.push_back(
        fmt::format("cluster: {} GPUs: the GPU count must be positive", cluster.gpus()));
  }
  if (train.seq_len > model.max_seq_len) {
    lines.push_back(fmt::format("train: seq_len={} exceeds the model's max_seq_len={} by {}",
                                train.seq_len, model.max_seq_len,
                                train.seq_len - model.max_seq_len));
  }
  if (train.seq_len > 0 && train.global_batch_tokens % train.seq_len != 0) {
    const int64_t below = train.global_batch_tokens / train.seq_len * train.seq_len;
    lines.push_back(fmt::format(
        "train: global_batch_tokens={} is not a multiple of seq_len={}, so no micro-batch and "
        "gradient accumulation meet it exactly (nearest: {} or {})",
        train.global_batch_tokens, train.seq_len, below, below + train.seq_len));
  } else if (train.global_batch_seqs() <= 0) {
    lines.push_back(fmt::format("train: global_batch_tokens={} holds no sequence of {} tokens",
                                train.global_batch_tokens, train.seq_len));
  }
  return lines;
}

// No layout passes the structural rules: cost nothing, run spec::Validate over every degree
// tuple and name the rules that fail most, and the tuple that fails fewest.
std::vector<std::string> ExplainStructural(const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster,
                                           const spec::TrainSpec& train) {
  const int64_t gpus = cluster.gpus();
  std::map<spec::Rule, int64_t> rules;
  std::vector<std::string> nearest_violations;
  spec::Layout nearest;
  int64_t tuples = 0;
  for (int64_t tp : Divisors(gpus)) {
    for (int64_t pp : Divisors(gpus / tp)) {
      for (int64_t cp : Divisors(gpus / tp / pp)) {
        for (int64_t ep : Divisors(model.is_moe() ? gpus / tp / pp / cp : 1)) {
          const spec::Layout l{
              .dp = gpus / tp / pp / cp / ep, .tp = tp, .pp = pp, .cp = cp, .ep = ep};
          const auto v = spec::Violations(model, cluster, train, l);
          ++tuples;
          std::set<spec::Rule> broken;  // a rule counts once per tuple, whatever its variants
          for (const auto& violation : v) broken.insert(violation.rule);
          for (spec::Rule rule : broken) ++rules[rule];
          if (!v.empty() && (nearest_violations.empty() || v.size() < nearest_violations.size())) {
            nearest_violations.clear();
            for (const auto& violation : v) nearest_violations.push_back(violation.message);
            nearest = l;
          }
        }
      }
    }
  }
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "no layout of {} GPUs meets the structural rules ({} degree combinations checked)", gpus,
      tuples));
  if (!nearest_violations.empty()) {
    lines.push_back(fmt::format("nearest miss: {} breaks {} rule(s):", spec::ShortLayout(nearest),
                                nearest_violations.size()));
    for (const auto& m : nearest_violations) lines.push_back("  " + m);
  }
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (const auto& [rule, n] : rules) sorted.emplace_back(n, spec::RuleName(rule));
  std::sort(sorted.rbegin(), sorted.rend());
  lines.push_back("rules broken most often:");
  for (size_t i = 0; i < sorted.size() && i < 3; ++i) {
    lines.push_back(fmt::format("  {} of {}: {}", sorted[i].first, tuples, sorted[i].second));
  }
  return lines;
}

std::string LargestComponent(const cost::Memory& m) {
  const auto parts = m.components();
  const auto* largest = std::max_element(parts.begin(), parts.end(),
                                         [](auto& a, auto& b) { return a.second < b.second; });
  return fmt::format("{} {:.1f} GB", largest->first, largest->second / kGB);
}

}  // namespace

std::vector<std::string> ExplainNoFit(const spec::ModelSpec& model,
                                      const spec::ClusterSpec& cluster,
                                      const spec::TrainSpec& train, const SearchOptions& options,
                                      const SearchResult& result) {
  std::vector<std::string> lines = ExplainGlobal(model, cluster, train);
  if (!lines.empty()) return lines;
  const Counts& c = result.counts;
  if (c.space == 0) {
    if (!options.space.allow.empty()) {
      SpaceOptions open = options.space;
      open.allow = Constraints();
      const int64_t n = Space(model, cluster, train, open).CountLayouts();
      if (n > 0) {
        return {fmt::format("--allow '{}' excludes all {} structurally valid layouts",
                            options.space.allow.text(), n)};
      }
    }
    return ExplainStructural(model, cluster, train);
  }
  lines.push_back(fmt::format(
      "no layout fits: {} layouts in the space, {} costed, {} pruned as certain not to fit",
      c.space, c.evaluated, c.pruned));
  if (result.nearest_miss) {
    const cost::Estimate& e = *result.nearest_miss;
    lines.push_back(fmt::format(
        "nearest miss: {} needs {:.1f} GB per GPU, {:.1f} GB over the {:.1f} GB capacity "
        "(largest: {})",
        spec::ShortLayout(e.layout), e.memory.total / kGB,
        (e.memory.total - e.memory.capacity) / kGB, e.memory.capacity / kGB,
        LargestComponent(e.memory)));
    for (const auto& v : e.violations) lines.push_back("  " + v);
  }
  std::vector<std::pair<int64_t, size_t>> sorted;
  for (size_t i = 0; i < kReasonCount; ++i) {
    if (c.reasons[i] > 0) sorted.emplace_back(c.reasons[i], i);
  }
  std::sort(sorted.rbegin(), sorted.rend());
  lines.push_back("commonest reasons:");
  for (size_t i = 0; i < sorted.size() && i < 4; ++i) {
    lines.push_back(fmt::format("  {:>10}  {}", sorted[i].first,
                                Describe(static_cast<Reason>(sorted[i].second))));
  }
  return lines;
}

}  // namespace pentamesh::plan
