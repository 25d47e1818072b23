// `pentamesh train` with pipeline parallelism end to end: `mpirun -np 4 pentamesh train --layout
// "pp=2 dp=2 ..." --trace FILE` on a tiny model of the test corpus finishes, its metrics.jsonl
// holds the loss of every step of the one-process run (relative 1e-5) and pp bytes per step, and
// the trace file is Chrome trace-event JSON with every pipeline action (steps x the rank's program)
// and collectives from every one of the 4 ranks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "data/fixtures.h"
#include "testing/cli_run.h"
#include "testing/run_toml.h"
#include "testing/trace_counts.h"

namespace pentamesh {
namespace {

constexpr int kSteps = 5;

using testing::CliRun;
using testing::Shell;

std::string WriteRun(const std::string& tag) {
  const std::string dir = data::testing::MakeTempDir(tag);
  std::ofstream(dir + "/run.toml") << testing::RunTomlText(
      {.name = "pp-cli",
       .layers = 4,
       .model_keys = "tied_embeddings = false",
       .global_batch_seqs = 8,
       .total_tokens = kSteps * 8 * 32,
       .dataset = data::testing::Corpus().dataset,
       .layout = "mbs=1",
       .run_keys = fmt::format("eval_every = 0\neval_batches = 1\nout_dir = \"{}/out\"", dir)});
  return dir;
}

TEST(PipelineCli, MpirunPp2Dp2MatchesOneProcessAndWritesTrace) {
  const std::string one = WriteRun("pp_cli_one");
  const CliRun a = Shell(fmt::format("{} train --config {}/run.toml", PM_BINARY, one));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;

  const std::string pp = WriteRun("pp_cli_pp");
  const std::string trace = pp + "/trace.json";
  const std::string layout = "pp=2 dp=2 schedule=1f1b zero=1 mbs=1";
  const CliRun b =
      Shell(testing::Mpirun(4, fmt::format("{} train --config {}/run.toml --layout '{}' --trace {}",
                                           PM_BINARY, pp, layout, trace)));
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("trace: " + trace), std::string::npos) << b.out;

  const std::vector<nlohmann::json> ma = testing::ReadMetrics(one + "/out"),
                                    mb = testing::ReadMetrics(pp + "/out");
  ASSERT_EQ(ma.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(mb.size(), static_cast<size_t>(kSteps));
  for (size_t i = 0; i < ma.size(); ++i) {
    const double want = ma[i].at("loss").get<double>();
    EXPECT_NEAR(mb[i].at("loss").get<double>(), want, 1e-5 * want) << "step " << i + 1;
    EXPECT_GT(mb[i].at("comm_bytes").at("pp").at("bytes_wire").get<double>(), 0.0);
  }

  const nlohmann::json t =
      nlohmann::json::parse(testing::ReadFile(trace));  // throws (fails) if not JSON
  testing::TraceCounts counts;
  ASSERT_NO_FATAL_FAILURE(testing::CountTraceEvents(t, 4, &counts));
  for (int r = 0; r < 4; ++r) {
    // 1F1B: every rank runs F and B of each of its 4 micro-batches per step.
    EXPECT_EQ(counts.actions[static_cast<size_t>(r)], kSteps * 2 * 4) << "rank " << r;
    EXPECT_GT(counts.collectives[static_cast<size_t>(r)], 0) << "rank " << r;
  }
}

}  // namespace
}  // namespace pentamesh
