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
#include <sstream>

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
  if (j.contains("tokens_per_expert")) {
    const Json& t = j["tokens_per_expert"];
    if (!t.is_array()) return where.Error("'tokens_per_expert' must be an array");
    for (const Json& v : t) {
      if (!v.is_number()) return where.Error("'tokens_per_expert' must hold numbers");
      s.tokens_per_expert.push_back(v.get<double>());
    }
  }
  if (j.contains("predicted")) {
    const Json& p = j["predicted"];
    if (!p.is_object() || !p.contains("peak_bytes"))
      return where.Error("'predicted' must be an object with 'peak_bytes'");
    PM_ASSIGN_OR_RETURN(s.predicted_peak_bytes,
                        Bytes(p["peak_bytes"], "predicted.peak_bytes", where));
  }
  return s;
}

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string Color(size_t i) { return kPalette[i % std::size(kPalette)]; }

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
  std::vector<std::vector<double>> values(predicted.empty() ? 1 : 2);
  for (const std::string& c : categories) {
    values[0].push_back(measured.contains(c) ? measured[c] : kNaN);
    if (!predicted.empty()) values[1].push_back(predicted.contains(c) ? predicted[c] : kNaN);
  }
  std::vector<std::pair<std::string, std::string>> names = {{"measured peak", Color(0)}};
  if (!predicted.empty()) names.emplace_back("predicted (cost model)", Color(1));
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
  return html + "</table>\n" + GroupedBars(categories, names, values, "bytes per rank");
}

std::string MoeSection(const RunMetrics& run) {
  const auto imbalance = Points(run, [](const RunStep& s) { return s.expert_load_imbalance; });
  const auto aux = Points(run, [](const RunStep& s) { return s.aux_loss; });
  if (imbalance.empty() && aux.empty()) return "";
  std::string html =
      "<h2>MoE: expert load imbalance</h2>\n<p class=note>max over mean of tokens routed per "
      "expert (1 = perfectly balanced).</p>\n" +
      LineChart({{"load imbalance", Color(2), imbalance}, {"aux loss", Color(4), aux}}, "step",
                "imbalance / aux loss");
  size_t experts = 0;
  for (const RunStep& s : run.steps) experts = std::max(experts, s.tokens_per_expert.size());
  if (experts == 0) return html;
  std::vector<Series> per_expert;
  for (size_t e = 0; e < experts; ++e) {
    per_expert.push_back({fmt::format("expert {}", e), Color(e), Points(run, [e](const RunStep& s) {
                            return e < s.tokens_per_expert.size()
                                       ? std::optional<double>(s.tokens_per_expert[e])
                                       : std::nullopt;
                          })});
  }
  return html + "<h2>MoE: tokens per expert</h2>\n" +
         LineChart(per_expert, "step", "tokens routed");
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
  RunMetrics run{.source = source, .steps = {}};
  std::istringstream in(text);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Where where{source, number};
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return where.Error("malformed JSON");
    PM_ASSIGN_OR_RETURN(RunStep step, ParseStep(j, where));
    run.steps.push_back(std::move(step));
  }
  if (run.steps.empty())
    return core::Status::Error(fmt::format("{}: no metrics (the file is empty)", source));
  return run;
}

core::Result<RunMetrics> LoadRunMetrics(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return core::Status::Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseRunMetrics(text.str(), path);
}

std::string RenderRunHtml(const RunMetrics& run) {
  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>pentamesh run: " +
                     Escape(run.source) + "</title>\n" + kPageStyle + "</head><body>\n";
  html += "<h1>pentamesh run: " + Escape(run.source) + "</h1>\n" + Summary(run);
  html += "<h2>Loss</h2>\n" +
          LineChart(
              {{"train loss", Color(0),
                Points(run, [](const RunStep& s) { return std::optional<double>(s.loss); })},
               {"eval loss", Color(1), Points(run, [](const RunStep& s) { return s.eval_loss; })}},
              "step", "loss");
  html +=
      "<h2>Throughput</h2>\n" +
      LineChart(
          {{"tokens/s", Color(3),
            Points(run, [](const RunStep& s) { return std::optional<double>(s.tokens_per_s); })}},
          "step", "tokens/s");
  html += MemorySection(run);
  html += MoeSection(run);
  return html + "</body></html>\n";
}

core::Status WriteRunHtml(const RunMetrics& run, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    return core::Status::Error(
        fmt::format("--html: cannot write '{}': {}", path, std::strerror(errno)));
  }
  out << RenderRunHtml(run);
  out.close();
  if (!out) return core::Status::Error(fmt::format("--html: writing '{}' failed", path));
  return core::Status::Ok();
}

}  // namespace pentamesh::report
