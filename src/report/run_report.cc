#include "report/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "core/input.h"
#include "core/output.h"
#include "cost/cost.h"
#include "report/chart.h"
#include "report/page.h"
#include "report/svg.h"

namespace pentamesh::report {
namespace {

using Json = nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Where a line's error happened: "metrics.jsonl:7".
struct Where {
  const std::string& source;
  size_t line;
  core::Status Error(const std::string& what) const {
    return core::Status::Error(fmt::format("{}:{}: {}", source, line, what));
  }
};

// A number, or null (the writer prints NaN/inf as null): NaN.
core::Result<double> Number(const Json& j, const char* key, const Where& where) {
  const auto it = j.find(key);
  if (it == j.end()) return where.Error(fmt::format("missing required key '{}'", key));
  if (it->is_null()) return kNaN;
  if (!it->is_number()) return where.Error(fmt::format("'{}' must be a number", key));
  return it->get<double>();
}

core::Result<std::optional<double>> OptionalNumber(const Json& j, const char* key,
                                                   const Where& where) {
  if (!j.contains(key)) return std::optional<double>();
  PM_ASSIGN_OR_RETURN(const double v, Number(j, key, where));
  return std::optional<double>(v);
}

core::Result<std::map<std::string, double>> Bytes(const Json& j, const std::string& key,
                                                  const Where& where) {
  if (!j.is_object()) return where.Error(fmt::format("'{}' must be an object", key));
  std::map<std::string, double> out;
  for (const auto& [tag, value] : j.items()) {
    if (!value.is_number()) return where.Error(fmt::format("'{}.{}' must be a number", key, tag));
    out[tag] = value.get<double>();
  }
  if (!out.contains("total")) return where.Error(fmt::format("'{}' has no 'total'", key));
  return out;
}

// An object of finite, non-negative seconds per key.
core::Result<std::map<std::string, double>> Seconds(const Json& j, const std::string& key,
                                                    const Where& where) {
  if (!j.is_object()) return where.Error(fmt::format("'{}' must be an object", key));
  std::map<std::string, double> out;
  for (const auto& [name, value] : j.items()) {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
      return where.Error(fmt::format("'{}.{}' must be a non-negative number", key, name));
    }
    out[name] = value.get<double>();
  }
  return out;
}

core::Result<RunStep> ParseStep(const Json& j, const Where& where) {
  if (!j.is_object()) return where.Error("a metrics line must be a JSON object");
  RunStep s;
  if (!j.contains("step")) return where.Error("missing required key 'step'");
  if (!j["step"].is_number_integer()) return where.Error("'step' must be an integer");
  s.step = j["step"].get<int64_t>();
  PM_ASSIGN_OR_RETURN(s.loss, Number(j, "loss", where));
  PM_ASSIGN_OR_RETURN(s.lr, Number(j, "lr", where));
  PM_ASSIGN_OR_RETURN(s.grad_norm, Number(j, "grad_norm", where));
  PM_ASSIGN_OR_RETURN(s.tokens_per_s, Number(j, "tokens_per_s", where));
  PM_ASSIGN_OR_RETURN(s.mfu, Number(j, "mfu", where));
  PM_ASSIGN_OR_RETURN(s.step_time_s, Number(j, "step_time_s", where));
  if (!j.contains("peak_bytes")) return where.Error("missing required key 'peak_bytes'");
  PM_ASSIGN_OR_RETURN(s.peak_bytes, Bytes(j["peak_bytes"], "peak_bytes", where));
  PM_ASSIGN_OR_RETURN(s.eval_loss, OptionalNumber(j, "eval_loss", where));
  PM_ASSIGN_OR_RETURN(s.aux_loss, OptionalNumber(j, "aux_loss", where));
  PM_ASSIGN_OR_RETURN(s.expert_load_imbalance, OptionalNumber(j, "expert_load_imbalance", where));
  PM_ASSIGN_OR_RETURN(s.max_expert_share, OptionalNumber(j, "max_expert_share", where));
  if (j.contains("tokens_per_expert")) {
    const Json& t = j["tokens_per_expert"];
    if (!t.is_array()) return where.Error("'tokens_per_expert' must be an array");
    for (const Json& v : t) {
      if (!v.is_number()) return where.Error("'tokens_per_expert' must hold numbers");
      s.tokens_per_expert.push_back(v.get<double>());
    }
  }
  PM_ASSIGN_OR_RETURN(s.dropped_tokens, OptionalNumber(j, "dropped_tokens", where));
  if (j.contains("expert_collapse")) {
    if (!j["expert_collapse"].is_boolean()) return where.Error("'expert_collapse' must be a bool");
    s.expert_collapse = j["expert_collapse"].get<bool>();
  }
  PM_ASSIGN_OR_RETURN(s.expert_collapse_share, OptionalNumber(j, "expert_collapse_share", where));
  if (j.contains("predicted")) {
    const Json& p = j["predicted"];
    if (!p.is_object() || !p.contains("peak_bytes"))
      return where.Error("'predicted' must be an object with 'peak_bytes'");
    PM_ASSIGN_OR_RETURN(s.predicted_peak_bytes,
                        Bytes(p["peak_bytes"], "predicted.peak_bytes", where));
    if (p.contains("time_s")) {
      PM_ASSIGN_OR_RETURN(s.predicted_time_s, Seconds(p["time_s"], "predicted.time_s", where));
    }
  }
  if (j.contains("comm_time_s")) {
    PM_ASSIGN_OR_RETURN(s.comm_time_s, Seconds(j["comm_time_s"], "comm_time_s", where));
  }
  PM_ASSIGN_OR_RETURN(s.bubble, OptionalNumber(j, "bubble", where));
  return s;
}

// Finite (step, value) points from the steps that have the value.
template <typename F>
std::vector<std::pair<double, double>> Points(const RunMetrics& run, F&& value) {
  std::vector<std::pair<double, double>> out;
  for (const RunStep& s : run.steps) {
    const std::optional<double> v = value(s);
    if (v && std::isfinite(*v)) out.emplace_back(static_cast<double>(s.step), *v);
  }
  return out;
}

// Measured peak per category (the maximum over steps) against the last line's prediction.
std::string MemorySection(const RunMetrics& run) {
  std::map<std::string, double> measured;
  for (const RunStep& s : run.steps) {
    for (const auto& [tag, bytes] : s.peak_bytes) measured[tag] = std::max(measured[tag], bytes);
  }
  std::map<std::string, double> predicted;
  for (const RunStep& s : run.steps) {
    if (!s.predicted_peak_bytes.empty()) predicted = s.predicted_peak_bytes;
  }
  std::vector<std::string> categories;
  for (const auto& [tag, bytes] : measured) {
    if (tag != "total" && (bytes > 0 || predicted.contains(tag))) categories.push_back(tag);
  }
  for (const auto& [tag, bytes] : predicted) {
    if (tag != "total" && !measured.contains(tag)) categories.push_back(tag);
  }
  categories.push_back("total");
  BarChart chart("memory", "allocator category", categories,
                 ChartAxis("bytes per rank", kFormatSi));
  chart.series.emplace_back("measured peak", std::vector<double>{});
  if (!predicted.empty())
    chart.series.emplace_back("predicted (cost model)", std::vector<double>{});
  std::vector<std::vector<double>> values(chart.series.size());
  for (const std::string& c : categories) {
    values[0].push_back(measured.contains(c) ? measured[c] : kNaN);
    if (!predicted.empty()) values[1].push_back(predicted.contains(c) ? predicted[c] : kNaN);
  }
  for (size_t i = 0; i < values.size(); ++i) chart.series[i].values = values[i];
  std::string html = "<h2>Memory: measured vs predicted per category</h2>\n";
  if (predicted.empty()) html += "<p class=note>The run logged no prediction.</p>\n";
  html += "<table><tr><th>category</th><th>measured bytes</th><th>predicted bytes</th></tr>\n";
  for (size_t i = 0; i < categories.size(); ++i) {
    const double p = predicted.empty() ? kNaN : values[1][i];
    html +=
        fmt::format("<tr><td class=l>{}</td><td>{}</td><td>{}</td></tr>\n", Escape(categories[i]),
                    std::isfinite(values[0][i]) ? fmt::format("{:.0f}", values[0][i]) : "-",
                    std::isfinite(p) ? fmt::format("{:.0f}", p) : "-");
  }
  return html + "</table>\n" + BarChartHtml(chart);
}

// Step time by term, the cost model's prediction next to the measurement (medians over the steps
// after the first quarter): each communication term's measured collective time, the measured bubble
// (fraction x step time) when the run has one, and the rest of the measured step as compute.
std::string TimeSection(const RunMetrics& run) {
  std::vector<const RunStep*> steps;
  for (size_t i = run.steps.size() / 4; i < run.steps.size(); ++i) {
    if (!run.steps[i].predicted_time_s.empty()) steps.push_back(&run.steps[i]);
  }
  std::string html = "<h2>Step time: predicted vs measured per term</h2>\n";
  if (steps.empty()) return html + "<p class=note>The run logged no time prediction.</p>\n";
  auto median = [&](auto&& value) {
    std::vector<double> v;
    for (const RunStep* s : steps) v.push_back(value(*s));
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  std::vector<std::string> terms, colors;  // colour: ChartColor of the term's kTimeTerms index
  std::vector<double> predicted, measured;
  double accounted = 0;
  auto get = [](const std::map<std::string, double>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? 0.0 : it->second;
  };
  for (size_t i = 0; i < cost::kTimeTerms.size(); ++i) {  // the terms in report order
    const std::string term = cost::kTimeTerms[i].name;
    if (!steps.back()->predicted_time_s.contains(term)) continue;
    terms.push_back(term);
    colors.push_back(ChartColor(i));
    predicted.push_back(median([&](const RunStep& s) { return get(s.predicted_time_s, term); }));
    double m = 0;
    if (steps.back()->comm_time_s.contains(term)) {
      m = median([&](const RunStep& s) { return get(s.comm_time_s, term); });
    } else if (term == "bubble" && steps.back()->bubble) {
      m = median([](const RunStep& s) { return s.bubble.value_or(0) * s.step_time_s; });
    }
    measured.push_back(m);
    accounted += m;
  }
  const double step = median([](const RunStep& s) { return s.step_time_s; });
  const auto compute = std::find(terms.begin(), terms.end(), "compute");
  if (compute != terms.end()) {
    measured[static_cast<size_t>(compute - terms.begin())] = std::max(0.0, step - accounted);
  }
  StackedBarChart chart("time", "", terms, ChartAxis("seconds per step", ".3~f"));
  chart.colors = colors;
  chart.bars.emplace_back("step", "predicted", predicted);
  chart.bars.emplace_back("step", "measured", measured);
  html += fmt::format(
      "<p>Median over steps {}-{}: measured {:.4f} s, predicted {:.4f} s. Measured: each "
      "communication term's collective time as the engine timed it (including the wait for the "
      "slowest rank), the bubble where the run measured it, the rest of the step as compute.</p>\n",
      steps.front()->step, steps.back()->step, step,
      median([&](const RunStep& s) { return get(s.predicted_time_s, "step"); }));
  html += "<table><tr><th>term</th><th>predicted s</th><th>measured s</th></tr>\n";
  for (size_t i = 0; i < terms.size(); ++i) {
    html += fmt::format("<tr><td class=l>{}</td><td>{:.4f}</td><td>{:.4f}</td></tr>\n",
                        Escape(terms[i]), predicted[i], measured[i]);
  }
  return html + "</table>\n" + StackedBarChartHtml(chart);
}

// Whether the step tripped the expert-collapse warning: the engine's own flag when the line carries
// it (metrics.jsonl "expert_collapse"), else the same test (cost::ExpertCollapseShare) on its
// tokens_per_expert with the line's threshold; a line with neither is not marked (the threshold
// depends on the router's top_k, which only the engine knows).
bool Collapsed(const RunStep& s, double total, double most) {
  if (s.expert_collapse) return *s.expert_collapse;
  return s.expert_collapse_share && total > 0 && most / total > *s.expert_collapse_share;
}

// Consecutive steps with tokens_per_expert grouped into at most max_columns heatmap columns.
struct ExpertColumn {
  int64_t first_step = 0, last_step = 0;
  std::vector<double> tokens;  // summed over the group's steps
  double total = 0;
  std::vector<std::pair<int64_t, double>> collapses;  // (step, max share) above the threshold
};

std::vector<ExpertColumn> ExpertColumns(const RunMetrics& run, size_t experts, size_t max_columns) {
  std::vector<const RunStep*> steps;
  for (const RunStep& s : run.steps) {
    if (!s.tokens_per_expert.empty()) steps.push_back(&s);
  }
  const size_t stride = (steps.size() + max_columns - 1) / std::max<size_t>(max_columns, 1);
  std::vector<ExpertColumn> columns;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (i % stride == 0) columns.push_back({steps[i]->step, steps[i]->step, {}, 0, {}});
    ExpertColumn& c = columns.back();
    c.last_step = steps[i]->step;
    c.tokens.resize(experts, 0.0);
    double total = 0, most = 0;
    for (size_t e = 0; e < steps[i]->tokens_per_expert.size(); ++e) {
      c.tokens[e] += steps[i]->tokens_per_expert[e];
      total += steps[i]->tokens_per_expert[e];
      most = std::max(most, steps[i]->tokens_per_expert[e]);
    }
    c.total += total;
    if (Collapsed(*steps[i], total, most))
      c.collapses.emplace_back(steps[i]->step, total > 0 ? most / total : 0.0);
  }
  return columns;
}

// Load relative to uniform (share * E): blue at 0, white at 1, red at 2 and above.
std::string LoadColor(double ratio) {
  auto mix = [](int a, int b, double t) { return static_cast<int>(a + (b - a) * t); };
  if (ratio < 1) {
    const double t = std::clamp(ratio, 0.0, 1.0);
    return fmt::format("#{:02x}{:02x}{:02x}", mix(44, 247, t), mix(123, 247, t), mix(182, 247, t));
  }
  const double t = std::clamp(ratio - 1, 0.0, 1.0);
  return fmt::format("#{:02x}{:02x}{:02x}", mix(247, 215, t), mix(247, 25, t), mix(247, 28, t));
}

std::string StepRange(const ExpertColumn& c) {
  return c.first_step == c.last_step ? fmt::format("step {}", c.first_step)
                                     : fmt::format("steps {}-{}", c.first_step, c.last_step);
}

std::string MoeSection(const RunMetrics& run) {
  const auto imbalance = Points(run, [](const RunStep& s) { return s.expert_load_imbalance; });
  const auto aux = Points(run, [](const RunStep& s) { return s.aux_loss; });
  const auto dropped = Points(run, [](const RunStep& s) { return s.dropped_tokens; });
  size_t experts = 0, collapsed = 0, with_tokens = 0;
  std::optional<double> share;  // the collapse threshold, from the first line that states it
  std::string collapse_steps;
  for (const RunStep& s : run.steps) {
    experts = std::max(experts, s.tokens_per_expert.size());
    if (!share) share = s.expert_collapse_share;
    if (s.tokens_per_expert.empty()) continue;
    ++with_tokens;
    const double total =
        std::accumulate(s.tokens_per_expert.begin(), s.tokens_per_expert.end(), 0.0);
    const double most = *std::max_element(s.tokens_per_expert.begin(), s.tokens_per_expert.end());
    if (Collapsed(s, total, most)) {
      if (++collapsed <= 20) collapse_steps += fmt::format(" {}", s.step);
    }
  }
  if (imbalance.empty() && aux.empty() && experts == 0) return "";
  std::string html;
  if (experts > 0) {
    html += fmt::format(
        "<h2>MoE: expert load over time</h2>\n<p class=note>Share of the routed tokens per expert "
        "and step, relative to the uniform share 1/{} (blue below, white equal, red twice or "
        "more). Expert collapse warning (one expert above {} of the routed assignments, midway "
        "between its fair share and every token): {} of {} steps{}{}.</p>\n",
        experts, share ? fmt::format("{:.1f}%", 100 * *share) : "the engine's threshold", collapsed,
        with_tokens, collapsed > 0 ? ", at steps" + collapse_steps : "",
        collapsed > 20 ? " ..." : "");
    html += ExpertLoadHeatmap(run);
  }
  XyChart lines("expert-imbalance", ChartAxis("step"), ChartAxis("imbalance"));
  lines.series.emplace_back("load imbalance (max / mean)", imbalance, SeriesStyle::kLine,
                            ChartColor(2));
  if (experts > 0 && !imbalance.empty() && share) {
    // max share > c  <=>  max / mean > c * E: the collapse threshold on the imbalance axis.
    const double level = *share * static_cast<double>(experts);
    lines.series.emplace_back(
        fmt::format("collapse threshold ({:.1f}% share)", 100 * *share),
        std::vector<std::pair<double, double>>{{imbalance.front().first, level},
                                               {imbalance.back().first, level}},
        SeriesStyle::kDashed, ChartColor(9));
  }
  html +=
      "<h2>MoE: expert load imbalance</h2>\n<p class=note>max over mean of tokens routed per "
      "expert (1 = perfectly balanced).</p>\n" +
      XyChartHtml(lines);
  XyChart aux_chart("aux-loss", ChartAxis("step"), ChartAxis("aux loss"), 240);
  aux_chart.series.emplace_back("aux loss", aux, SeriesStyle::kLine, ChartColor(4));
  html += "<h2>MoE: aux loss</h2>\n" + XyChartHtml(aux_chart);
  if (!dropped.empty()) {
    XyChart chart("dropped-tokens", ChartAxis("step"), ChartAxis("tokens", kFormatSi), 240);
    chart.series.emplace_back("dropped tokens (over capacity)", dropped, SeriesStyle::kLine,
                              ChartColor(5));
    html += "<h2>MoE: dropped tokens</h2>\n" + XyChartHtml(chart);
  }
  return html;
}

// Loss (train and eval), learning rate and tokens/s against the step.
std::string StepCharts(const RunMetrics& run) {
  auto all = [&](double RunStep::*field) {
    return Points(run, [field](const RunStep& s) { return std::optional<double>(s.*field); });
  };
  XyChart loss("loss", ChartAxis("step"), ChartAxis("loss (nats per token)"));
  loss.series.emplace_back("train loss", all(&RunStep::loss));
  loss.series.emplace_back("eval loss", Points(run, [](const RunStep& s) { return s.eval_loss; }));
  XyChart lr("lr", ChartAxis("step"), ChartAxis("learning rate", ".2~e"), 220);
  lr.series.emplace_back("lr", all(&RunStep::lr), SeriesStyle::kLine, ChartColor(6));
  XyChart tps("throughput", ChartAxis("step"), ChartAxis("tokens/s", kFormatSi));
  tps.series.emplace_back("tokens/s", all(&RunStep::tokens_per_s), SeriesStyle::kLine,
                          ChartColor(3));
  return "<h2>Loss</h2>\n" + XyChartHtml(loss) + "<h2>Learning rate</h2>\n" + XyChartHtml(lr) +
         "<h2>Throughput</h2>\n" + XyChartHtml(tps);
}

std::string Summary(const RunMetrics& run) {
  const RunStep& last = run.steps.back();
  double tps = 0, mfu = 0;
  for (const RunStep& s : run.steps) tps += s.tokens_per_s, mfu += s.mfu;
  const double n = static_cast<double>(run.steps.size());
  std::optional<double> eval;
  for (const RunStep& s : run.steps) {
    if (s.eval_loss) eval = s.eval_loss;
  }
  return fmt::format(
      "<p>{} steps logged (last step {}); final loss {:.4f}{}; mean {:.0f} tokens/s, mean MFU "
      "{:.2f}%, last step {:.4f} s, peak {:.0f} bytes per rank.</p>\n",
      run.steps.size(), last.step, last.loss,
      eval ? fmt::format(", last eval loss {:.4f}", *eval) : "", tps / n, 100 * mfu / n,
      last.step_time_s, last.peak_bytes.at("total"));
}

}  // namespace

core::Result<RunMetrics> ParseRunMetrics(const std::string& text, const std::string& source) {
  RunMetrics run;
  run.source = source;
  std::istringstream in(text);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Where where{source, number};
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return where.Error("malformed JSON");
    // A skipped (non-finite) step attempt: no update, nothing to plot.
    if (j.is_object() && j.contains("skipped") && j["skipped"] == true) continue;
    PM_ASSIGN_OR_RETURN(RunStep step, ParseStep(j, where));
    run.steps.push_back(std::move(step));
  }
  if (run.steps.empty())
    return core::Status::Error(fmt::format("{}: no metrics (the file is empty)", source));
  return run;
}

core::Result<RunMetrics> LoadRunMetrics(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  PM_ASSIGN_OR_RETURN(const std::string text,
                      core::ReadInputFile(path, core::kMaxLogFileBytes, "metrics.jsonl"));
  return ParseRunMetrics(text, path);
}

std::string ExpertLoadHeatmap(const RunMetrics& run, size_t max_columns) {
  size_t experts = 0;
  for (const RunStep& s : run.steps) experts = std::max(experts, s.tokens_per_expert.size());
  if (experts == 0) return "";
  const std::vector<ExpertColumn> columns = ExpertColumns(run, experts, max_columns);
  const double left = 80, right = 30, top = 46, width = 1180;
  const double cell_h = std::clamp(320.0 / static_cast<double>(experts), 3.0, 24.0);
  const double cell_w = (width - left - right) / static_cast<double>(columns.size());
  const double bottom = top + cell_h * static_cast<double>(experts);
  Svg svg(width, bottom + 44);
  const std::pair<double, const char*> legend[] = {
      {0.0, "0"}, {0.5, "0.5"}, {1.0, "1 = 1/E"}, {1.5, "1.5"}, {2.0, ">= 2 x uniform"}};
  double lx = left;
  for (const auto& [ratio, label] : legend) {
    svg.Rect(lx, 10, 12, 12, LoadColor(ratio));
    svg.Text(lx + 16, 20, label, 11);
    lx += 30 + 6.5 * static_cast<double>(std::strlen(label));
  }
  svg.Rect(lx + 10, 14, 12, 5, "#c00");
  svg.Text(lx + 26, 20, "collapse warning", 11);
  for (size_t col = 0; col < columns.size(); ++col) {
    const ExpertColumn& c = columns[col];
    const double x = left + cell_w * static_cast<double>(col);
    for (size_t e = 0; e < experts; ++e) {
      const double share = c.total > 0 ? c.tokens[e] / c.total : 0.0;
      svg.Rect(x, top + cell_h * static_cast<double>(e), cell_w, cell_h,
               LoadColor(share * static_cast<double>(experts)),
               fmt::format("expert {} {} share {:.9g} tokens {:.9g}", e, StepRange(c), share,
                           c.tokens[e]),
               "expert-cell");
    }
    for (const auto& [step, share] : c.collapses) {
      svg.Rect(
          x + 0.5, top - 9, std::max(cell_w - 1, 1.0), 6, "#c00",
          fmt::format("step {}: one expert took {:.1f}% of the routed tokens", step, 100 * share),
          "collapse");
    }
  }
  if (cell_h >= 10) {
    for (size_t e = 0; e < experts; ++e) {
      svg.Text(left - 6, top + cell_h * (static_cast<double>(e) + 0.5) + 4,
               fmt::format("expert {}", e), 11, "end");
    }
  }
  const size_t ticks = std::min<size_t>(columns.size(), 8);
  for (size_t i = 0; i < ticks; ++i) {
    const size_t col = ticks == 1 ? 0 : i * (columns.size() - 1) / (ticks - 1);
    svg.Text(left + cell_w * (static_cast<double>(col) + 0.5), bottom + 16,
             fmt::format("{}", columns[col].first_step), 11, "middle", "#555");
  }
  svg.Text(left + (width - left - right) / 2, bottom + 36,
           columns.size() == 1 || columns[0].first_step == columns[0].last_step
               ? "step"
               : "step (columns average consecutive steps)",
           12, "middle");
  return svg.Finish();
}

core::Status LoadRunTrace(const std::string& path, RunMetrics* run) {
  PM_ASSIGN_OR_RETURN(const std::string text,
                      core::ReadInputFile(path, core::kMaxLogFileBytes, "trace"));
  PM_ASSIGN_OR_RETURN(run->trace, ParseChromeTrace(text, path));
  run->trace_source = path;
  return core::Status::Ok();
}

namespace {

std::string TraceSection(const RunMetrics& run) {
  if (run.trace.empty()) return "";
  double end = 0;
  size_t events = 0;
  for (const TimelineRow& row : run.trace) {
    events += row.spans.size();
    for (const TimelineSpan& s : row.spans) end = std::max(end, s.end);
  }
  return fmt::format(
             "<h2>Trace: the pipeline as it ran</h2>\n<p class=note>{} events on {} rows from "
             "{}; microseconds from the first event. Compare with the simulated schedule of "
             "<code>pentamesh schedule --html</code>.</p>\n",
             events, run.trace.size(), Escape(run.trace_source)) +
         TimelineSvg(run.trace, end, "us", /*show_legend_chunks=*/true, kMaxTimelineBoxes);
}

}  // namespace

std::string RenderRunHtml(const RunMetrics& run) {
  std::string html = "<h1>pentamesh run: " + Escape(run.source) + "</h1>\n" + Summary(run);
  html += StepCharts(run);
  html += MemorySection(run);
  html += TimeSection(run);
  html += MoeSection(run);
  html += TraceSection(run);
  return HtmlPage("pentamesh run: " + run.source, html, {.charts = true, .extra_style = ""});
}

core::Status WriteRunHtml(const RunMetrics& run, const std::string& path) {
  return WritePage(path, RenderRunHtml(run));
}

}  // namespace pentamesh::report
