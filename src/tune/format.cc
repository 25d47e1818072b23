// tune's summary (error, rank agreement, measured best) and its two outputs: the terminal table and
// the JSON (`--json`, the HTML's data).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/numeric.h"
#include "spec/layout.h"
#include "tune/tune.h"

namespace pentamesh::tune {
namespace {

// Average ranks (1-based) of v, ties sharing their mean rank.
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean = 0.5 * static_cast<double>(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = mean;
    i = j + 1;
  }
  return rank;
}

std::string Mib(double bytes) { return fmt::format("{:.1f}", bytes / (1 << 20)); }

std::string Pct(double x) { return fmt::format("{:+.1f}%", 100 * x); }

}  // namespace

double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

Summary Summarize(const std::vector<Row>& rows) {
  Summary s;
  std::vector<double> errors, predicted, measured;
  double best = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (!r.measured) continue;
    ++s.measured_runs;
    errors.push_back(std::abs(r.Error()));
    if (r.kind == Kind::kSingle) continue;
    predicted.push_back(r.predicted.time.step);
    measured.push_back(r.measured->step_time_s);
    if (s.best_measured < 0 || r.measured->step_time_s < best) {
      best = r.measured->step_time_s;
      s.best_measured = static_cast<int>(i);
      s.best_predicted_rank = r.predicted_rank;
      s.best_tied_rank = r.tied_rank;
    }
  }
  s.median_abs_error = Median(errors);
  s.spearman = Spearman(predicted, measured);
  return s;
}

std::string Table(const Result& r) {
  std::string out = fmt::format("pentamesh tune: {} on {}; {} layouts costed, {} the engine runs\n",
                                r.model_name, r.host, r.space, r.runnable);
  out += fmt::format("{:>2} {:<7} {:<34} {:>5} {:>9} {:>9} {:>7} {:>8} {:>6} {:>6} {:>8} {:>8}\n",
                     "#", "kind", "layout", "rank", "pred s", "meas s", "error", "tok/s", "MFU p",
                     "MFU m", "mem p", "mem m");
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    const std::string rank = row.kind == Kind::kSingle ? "-" : std::to_string(row.predicted_rank);
    const std::string layout =
        fmt::format("{}{}", row.ranks > 1 ? "" : "1 rank: ", spec::ShortLayout(row.layout));
    std::string line = fmt::format("{:>2} {:<7} {:<34} {:>5} {:>9.4f} ", i + 1, KindName(row.kind),
                                   layout, rank, row.predicted.time.step);
    if (row.measured) {
      const Measured& m = *row.measured;
      line += fmt::format("{:>9.4f} {:>7} {:>8.0f} {:>6.3f} {:>6.3f} {:>8} {:>8}", m.step_time_s,
                          Pct(row.Error()), m.tokens_per_s, row.predicted.mfu, m.mfu,
                          Mib(row.predicted.memory.total), Mib(m.peak_total));
    } else if (!row.error.empty()) {
      line += "FAILED: " + row.error;
    } else {
      line += fmt::format("{:>9} {:>7} {:>8.0f} {:>6.3f} {:>6} {:>8} {:>8}", "-", "-",
                          row.predicted.tokens_per_s, row.predicted.mfu, "-",
                          Mib(row.predicted.memory.total), "-");
    }
    out += line + "\n";
  }
  out += "(pred/meas s: step time, measured = median after the warm-up; mem: peak MiB per rank)\n";
  const Summary& s = r.summary;
  out += fmt::format("median |predicted - measured| / measured step time: {:.1f}% over {} runs\n",
                     100 * s.median_abs_error, s.measured_runs);
  out += fmt::format(
      "rank agreement of predicted and measured step time (Spearman, {}-rank runs): "
      "{:.2f}\n",
      r.options.np, s.spearman);
  if (s.best_measured >= 0) {
    const Row& b = r.rows[static_cast<size_t>(s.best_measured)];
    out += fmt::format(
        "measured best: #{} {} ({:.4f} s/step), the planner's choice number {} ({} counting "
        "predictions within {:.0f}% as ties){}\n",
        s.best_measured + 1, spec::ShortLayout(b.layout), b.measured->step_time_s,
        s.best_predicted_rank, s.best_tied_rank, 100 * kTie,
        s.best_tied_rank <= 3 ? ": within its top 3" : ": NOT in its top 3");
  }
  return out;
}

nlohmann::ordered_json ToJson(const Result& r) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Row& row : r.rows) {
    nlohmann::ordered_json j;
    j["kind"] = KindName(row.kind);
    j["layout"] = spec::FormatLayout(row.layout);
    j["ranks"] = row.ranks;
    j["predicted_rank"] = row.predicted_rank;
    j["tied_rank"] = row.tied_rank;
    nlohmann::ordered_json p, time, mem;
    for (const cost::TimeTerm& t : cost::kTimeTerms) time[t.name] = row.predicted.time.*t.field;
    time["step"] = row.predicted.time.step;
    for (const cost::MemoryCategory& c : cost::kMemoryCategories) {
      mem[c.name] = row.predicted.memory.*c.field;
    }
    mem["total"] = row.predicted.memory.total;
    p["time_s"] = time;
    p["peak_bytes"] = mem;
    p["tokens_per_s"] = row.predicted.tokens_per_s;
    p["mfu"] = row.predicted.mfu;
    p["bubble_fraction"] = row.predicted.bubble_fraction;
    j["predicted"] = p;
    if (row.measured) {
      const Measured& m = *row.measured;
      nlohmann::ordered_json mj, peak;
      mj["step_time_s"] = m.step_time_s;
      mj["tokens_per_s"] = m.tokens_per_s;
      mj["mfu"] = m.mfu;
      for (int t = 0; t < core::kMemTagCount; ++t) {
        peak[core::MemTagName(static_cast<core::MemTag>(t))] = m.peak_bytes[static_cast<size_t>(t)];
      }
      peak["total"] = m.peak_total;
      mj["peak_bytes"] = peak;
      if (m.bubble) mj["bubble_fraction"] = *m.bubble;
      if (m.expert_imbalance) mj["expert_load_imbalance"] = *m.expert_imbalance;
      if (m.max_expert_share) mj["max_expert_share"] = *m.max_expert_share;
      mj["comm_time_s"] = m.comm_time_s;
      mj["final_loss"] = m.final_loss;
      mj["steps_measured"] = m.steps_measured;
      j["measured"] = mj;
      j["error"] = row.Error();
    } else {
      j["failed"] = row.error;
    }
    j["dir"] = row.dir;
    j["wall_s"] = row.wall_s;
    rows.push_back(j);
  }
  nlohmann::ordered_json out;
  out["model"] = r.model_name;
  out["host"] = r.host;
  out["np"] = r.options.np;
  out["steps"] = r.options.steps;
  out["layouts_costed"] = r.space;
  out["layouts_runnable"] = r.runnable;
  out["rows"] = rows;
  const Summary& s = r.summary;
  out["summary"] = {{"measured_runs", s.measured_runs},
                    {"median_abs_error", s.median_abs_error},
                    {"spearman", s.spearman},
                    {"best_measured", s.best_measured >= 0 ? s.best_measured + 1 : 0},
                    {"best_predicted_rank", s.best_predicted_rank},
                    {"best_tied_rank", s.best_tied_rank}};
  return out;
}

}  // namespace pentamesh::tune
