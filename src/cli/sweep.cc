// `pentamesh sweep`: the heatmap of the seeds' benchmarking study (seeds/004 section 5): for each
// model size and node count, the best layout and its MFU.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/plan_common.h"
#include "plan/scale.h"
#include "report/html.h"

namespace pentamesh::cli {
namespace {

struct SweepArgs {
  SearchArgs search;
  std::string models = kSweepModels;
  std::string nodes = kSweepNodes;
  int64_t batch_tokens = kSweepBatchTokens;
};

void PrintSweep(const plan::SweepResult& s) {
  fmt::print("{:<16}", "MFU (layout)");
  for (int64_t n : s.nodes) fmt::print(" {:>22}", fmt::format("{} node{}", n, n == 1 ? "" : "s"));
  fmt::print("\n");
  for (size_t r = 0; r < s.models.size(); ++r) {
    fmt::print("{:<16}", s.models[r]);
    for (size_t c = 0; c < s.nodes.size(); ++c) {
      const plan::SweepCell& cell = s.at(r, c);
      if (!cell.best) {
        fmt::print(" {:>22}", "does not fit");
        continue;
      }
      const spec::Layout& l = cell.best->layout;
      fmt::print(" {:>22}", fmt::format("{:.1f}% tp{} pp{} dp{}{}", 100 * cell.best->mfu, l.tp,
                                        l.pp, l.dp, l.cp > 1 ? fmt::format(" cp{}", l.cp) : ""));
    }
    fmt::print("\n");
  }
}

int RunSweepCommand(const SweepArgs& a) {
  auto in = LoadInputs(a.search);
  if (!in.ok()) return Fail(in.status().message());
  if (a.batch_tokens > 0) {
    if (a.batch_tokens % in->train.seq_len != 0) {
      return Fail(fmt::format("--global-batch-tokens: {} is not a multiple of seq_len={}",
                              a.batch_tokens, in->train.seq_len));
    }
    in->train.global_batch_tokens = a.batch_tokens;
  }
  auto options = MakeSearchOptions(a.search, *in, 1);
  if (!options.ok()) return Fail(options.status().message());
  auto nodes = ParseIntList("--nodes", a.nodes, spec::kMaxGpus);
  if (!nodes.ok()) return Fail(nodes.status().message());
  auto sweep = RunSweep(a.models, in->cluster, in->train, *nodes, *options);
  if (!sweep.ok()) return Fail(sweep.status().message());
  if (!a.search.html.empty()) {
    report::PlanReport r;
    r.model = a.models;
    r.cluster = in->cluster.name;
    r.train = in->train.name;
    r.sweep = *sweep;
    auto status = report::WriteHtml(r, a.search.html);
    if (!status.ok()) return Fail(status.message());
  }
  if (a.search.json) {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& cell : sweep->cells) {
      nlohmann::json j = {{"model", cell.model}, {"nodes", cell.nodes}};
      if (cell.best)
        j["best"] = EstimateJson(*cell.best);
      else
        j["why_not"] = cell.why_not;
      cells.push_back(j);
    }
    fmt::print("{}\n", nlohmann::json{{"cluster", in->cluster.name},
                                      {"train", in->train.name},
                                      {"global_batch_tokens", in->train.global_batch_tokens},
                                      {"cells", cells}}
                           .dump(2));
  } else {
    fmt::print("pentamesh sweep: {} nodes of {}, seq {}, {} tokens/step\n", a.nodes,
               in->cluster.name, in->train.seq_len, in->train.global_batch_tokens);
    PrintSweep(*sweep);
  }
  return 0;
}

}  // namespace

RunFn AddSweepCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("sweep", "Best layout and MFU for model sizes x node counts");
  auto args = std::make_shared<SweepArgs>();
  args->search.train = kSweepTrain;
  AddSearchOptions(*sub, args->search, /*with_model=*/false);
  sub->add_option("--train", args->search.train, "train preset or TOML file")
      ->capture_default_str();
  sub->add_option("--models", args->models, "comma-separated model presets or files")
      ->capture_default_str();
  sub->add_option("--nodes", args->nodes, "comma-separated node counts")->capture_default_str();
  sub->add_option("--global-batch-tokens", args->batch_tokens,
                  "override the train spec's batch (0 = keep it)")
      ->capture_default_str()
      ->transform(IntIn(0, spec::kMaxBatchTokens));
  return [args]() { return RunSweepCommand(*args); };
}

}  // namespace pentamesh::cli
