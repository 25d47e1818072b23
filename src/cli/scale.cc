// `pentamesh scale`: the best layout and its MFU, tokens/s and scaling efficiency at each GPU count
// of a list, and the step-time term that limits scaling.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/plan_common.h"
#include "plan/scale.h"
#include "report/html.h"

namespace pentamesh::cli {
namespace {

struct ScaleArgs {
  SearchArgs search;
  std::string gpus_list = "128,256,512,1024";
};

nlohmann::json ScaleJson(const std::vector<plan::ScalePoint>& points) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : points) {
    nlohmann::json point = {{"gpus", p.gpus}, {"efficiency", p.efficiency}};
    if (p.best) point["best"] = EstimateJson(*p.best);
    if (!p.why_not.empty()) point["why_not"] = p.why_not;
    if (p.limiting) {
      point["limiting_term"] = p.limiting->name;
      point["limiting_growth"] = p.limiting_growth;
    }
    j.push_back(point);
  }
  return j;
}

void PrintScale(const Inputs& in, const std::vector<plan::ScalePoint>& points) {
  fmt::print("pentamesh scale: {} on {} ({}: seq {}, {} tokens/step)\n", in.model.name,
             in.cluster.name, in.train.name, in.train.seq_len, in.train.global_batch_tokens);
  fmt::print("  {:>6}  {:<46} {:>6} {:>11} {:>10} {:>7}  {}\n", "GPUs", "best layout", "MFU",
             "tokens/s", "efficiency", "days", "term that grew most (GPU-time/token)");
  for (const auto& p : points) {
    if (!p.best) {
      fmt::print("  {:>6}  nothing fits: {}\n", p.gpus, p.why_not.empty() ? "" : p.why_not[0]);
      continue;
    }
    fmt::print(
        "  {:>6}  {:<46} {:>5.1f}% {:>11.0f} {:>9.1f}% {:>7.1f}  {}\n", p.gpus,
        spec::ShortLayout(p.best->layout), 100 * p.best->mfu, p.best->tokens_per_s,
        100 * p.efficiency, p.best->days,
        p.limiting ? fmt::format("{} (+{:.1f}%)", p.limiting->name, 100 * p.limiting_growth) : "-");
  }
  const plan::ScalePoint* last = nullptr;
  for (const auto& p : points) {
    if (p.best) last = &p;
  }
  if (last != nullptr && !last->limiting && last != &points.front()) {
    fmt::print("scaling is ideal over this range: no term's GPU-time per token grew\n");
  }
  if (last != nullptr && last->limiting) {
    fmt::print(
        "scaling is limited by {}: from the first count to {} GPUs its GPU-time per token "
        "grew by {:.1f}% of the first count's step (efficiency {:.1f}%)\n",
        last->limiting->name, last->gpus, 100 * last->limiting_growth, 100 * last->efficiency);
  }
}

int RunScale(const ScaleArgs& a) {
  auto in = LoadInputs(a.search);
  if (!in.ok()) return Fail(in.status().message());
  auto options = MakeSearchOptions(a.search, *in, 1);
  if (!options.ok()) return Fail(options.status().message());
  auto counts = ParseIntList("--gpus-list", a.gpus_list, spec::kMaxGpus);
  if (!counts.ok()) return Fail(counts.status().message());
  auto points = plan::Scale(in->model, in->cluster, in->train, *counts, *options);
  if (!points.ok()) return Fail(points.status().message());
  bool any = false;
  for (const auto& p : *points) any = any || p.best.has_value();
  if (!any) return FailNoFit("scale", points->front().why_not, a.search.json);
  if (!a.search.html.empty()) {
    report::PlanReport r;
    r.model = in->model.name;
    r.cluster = in->cluster.name;
    r.train = in->train.name;
    r.gpus = counts->back();
    r.scale = *points;
    auto status = report::WriteHtml(r, a.search.html);
    if (!status.ok()) return Fail(status.message());
  }
  if (a.search.json) {
    fmt::print("{}\n", nlohmann::json{{"model", in->model.name},
                                      {"cluster", in->cluster.name},
                                      {"train", in->train.name},
                                      {"points", ScaleJson(*points)}}
                           .dump(2));
  } else {
    PrintScale(*in, *points);
  }
  return 0;
}

}  // namespace

RunFn AddScaleCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("scale", "Best layout, MFU and scaling efficiency per GPU count");
  auto args = std::make_shared<ScaleArgs>();
  AddSearchOptions(*sub, args->search, /*with_model=*/true);
  sub->add_option("--train", args->search.train, "train preset or TOML file")->required();
  sub->add_option("--gpus-list", args->gpus_list, "comma-separated GPU counts")
      ->capture_default_str();
  return [args]() { return RunScale(*args); };
}

}  // namespace pentamesh::cli
