// Pipeline executor: see pipeline.h for the p2p contract.
#include "train/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "kernels/cpu/elementwise.h"
#include "spec/layout.h"

namespace pentamesh::train {

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

model::StageConfig ChunkConfig(model::StageConfig base, int stage, int stages) {
  PM_CHECK(spec::ChunkLayers(base.model.layers, stages, 0) >= 0)
      << base.model.layers << " layers cannot be split into " << stages
      << " pipeline chunks (spec::ChunkLayers)";
  base.first_layer = spec::ChunkFirstLayer(base.model.layers, stages, stage);
  base.last_layer = base.first_layer + spec::ChunkLayers(base.model.layers, stages, stage);
  base.has_embedding = stage == 0;
  base.has_head = stage == stages - 1;
  return base;
}

PipelineExecutor::PipelineExecutor(const schedule::ScheduleSpec& spec, comm::Communicator& pp,
                                   std::vector<model::Stage*> chunks, core::Allocator& alloc)
    : spec_(spec), topology_(spec.topology()), pp_(pp), chunks_(std::move(chunks)), alloc_(alloc) {
  const core::Status valid = schedule::ValidateSchedule(spec);
  PM_CHECK(valid.ok()) << valid.message();
  PM_CHECK(pp.size() == spec.pp) << "pp communicator " << pp.Describe() << " for pp=" << spec.pp;
  PM_CHECK(static_cast<int>(chunks_.size()) == spec.virtual_stages)
      << chunks_.size() << " chunks for V=" << spec.virtual_stages;
  auto program =
      schedule::Make(spec.kind, spec.pp, pp.rank(), spec.microbatches, spec.virtual_stages);
  PM_CHECK(program.ok()) << program.status().message();
  program_ = std::move(*program);
  split_.assign(static_cast<size_t>(spec.virtual_stages),
                std::vector<bool>(static_cast<size_t>(spec.microbatches), false));
  for (const schedule::Action& a : program_) {
    if (a.kind == schedule::ActionKind::kWeight) split_[a.chunk][a.microbatch] = true;
  }
  const int64_t max_tag = 2 + 2 * (int64_t{spec.microbatches} * topology_.stages());
  PM_CHECK(spec.pp == 1 || max_tag <= pp.TagBound())
      << "pipeline tags up to " << max_tag << " exceed the backend's bound " << pp.TagBound()
      << " (fewer micro-batches or stages)";
}

int PipelineExecutor::Tag(bool gradient, int microbatch, int stage) const {
  return 1 + (gradient ? 1 : 0) + 2 * (microbatch + spec_.microbatches * stage);
}

void PipelineExecutor::Record(const std::string& name, const std::string& cat, double start_us,
                              int mb, int chunk, int64_t bytes) {
  if (!tracing_) return;
  trace_.push_back({.name = name,
                    .cat = cat,
                    .ts_us = start_us,
                    .dur_us = NowUs() - start_us,
                    .microbatch = mb,
                    .chunk = chunk,
                    .bytes = bytes});
}

// The activation (gradient = false) produced by `stage`, or the gradient produced by `stage`.
void PipelineExecutor::Receive(core::Buffer& into, bool gradient, int mb, int stage, int chunk) {
  const int tag = Tag(gradient, mb, stage);
  const int peer = topology_.RankOf(stage);
  const double start = tracing_ ? NowUs() : 0.0;
  if (peer == pp_.rank()) {
    auto it = local_.find(tag);
    PM_CHECK(it != local_.end()) << "local hand-over of tag " << tag << " missing";
    into = std::move(it->second);
    local_.erase(it);
    return;
  }
  into = core::Buffer(alloc_, core::MemTag::kComm, core::Dtype::kF32, {tokens_, hidden_});
  pp_.recv_tagged(into.f32(), into.view().numel(), core::Dtype::kF32, peer, tag);
  Record(fmt::format("recv {}{}", gradient ? 'B' : 'F', mb), "p2p", start, mb, chunk, into.bytes());
}

void PipelineExecutor::Send(const core::Buffer& from, bool gradient, int mb, int stage, int chunk) {
  const int tag = Tag(gradient, mb, stage);
  const int peer = topology_.RankOf(gradient ? stage - 1 : stage + 1);
  const double start = tracing_ ? NowUs() : 0.0;
  if (peer == pp_.rank()) {
    core::Buffer copy(alloc_, core::MemTag::kComm, core::Dtype::kF32, {tokens_, hidden_});
    kernels::copy(copy.view(), from.view());
    local_.emplace(tag, std::move(copy));
    return;
  }
  pp_.post_send(from.f32(), from.view().numel(), core::Dtype::kF32, peer, tag);
  Record(fmt::format("send {}{}", gradient ? 'B' : 'F', mb), "p2p", start, mb, chunk, from.bytes());
}

void PipelineExecutor::BeginStep(const std::vector<model::MicroBatch>& mbs, int64_t hidden) {
  PM_CHECK(static_cast<int>(mbs.size()) == spec_.microbatches)
      << mbs.size() << " micro-batches for a schedule of " << spec_.microbatches;
  tokens_ = chunks_.front()->ResidualRows(mbs.front().dims);  // T/tp rows under SP
  hidden_ = hidden;
}

PipelineStepResult PipelineExecutor::Run(const std::vector<model::MicroBatch>& mbs,
                                         int64_t hidden) {
  BeginStep(mbs, hidden);
  PipelineStepResult result;
  result.timing.start_us = NowUs();
  for (const schedule::Action& a : program_) RunAction(a, mbs, result);
  result.timing.end_us = NowUs();
  const double start = result.timing.end_us;
  if (pp_.size() > 1) pp_.wait_sends();
  Record("wait sends", "p2p", start, 0, 0, 0);
  PM_CHECK(local_.empty()) << "unconsumed local hand-overs";
  return result;
}

void PipelineExecutor::RunAction(const schedule::Action& a,
                                 const std::vector<model::MicroBatch>& mbs,
                                 PipelineStepResult& result) {
  const int S = topology_.stages();
  const int s = topology_.Stage(pp_.rank(), a.chunk), mb = a.microbatch;
  model::Stage& stage = *chunks_[static_cast<size_t>(a.chunk)];
  const std::string name = schedule::ToString(a, spec_.virtual_stages > 1);
  const auto kind = static_cast<size_t>(a.kind == schedule::ActionKind::kForward    ? 0
                                        : a.kind == schedule::ActionKind::kBackward ? 1
                                                                                    : 2);
  core::Buffer in, out;  // F: activation in/out; B: gradient in (dy) / out (dx)
  const bool forward = kind == 0, backward = kind == 1;
  if (forward && s > 0) Receive(in, /*gradient=*/false, mb, s - 1, a.chunk);
  if (backward && s < S - 1) Receive(in, /*gradient=*/true, mb, s + 1, a.chunk);
  if ((forward && s < S - 1) || (backward && s > 0))
    out = core::Buffer(alloc_, core::MemTag::kComm, core::Dtype::kF32, {tokens_, hidden_});
  const double start = NowUs();
  if (forward) {
    const model::StageForward f =
        stage.Forward(mb, mbs[static_cast<size_t>(mb)], in.view(), out.view());
    result.loss_sum += f.loss_sum;
    result.valid_tokens += f.valid_tokens;
    result.moe.Add(f.moe);
  } else if (backward && split_[a.chunk][mb]) {
    stage.BackwardInput(mb, in.view(), out.view());
  } else if (backward) {
    stage.Backward(mb, in.view(), out.view());
  } else {
    stage.BackwardWeight(mb);
  }
  result.timing.busy_us[kind] += NowUs() - start;
  ++result.timing.count[kind];
  Record(name, forward ? "F" : backward ? "B" : "W", start, mb, a.chunk, 0);
  if (forward && s < S - 1) Send(out, /*gradient=*/false, mb, s, a.chunk);
  if (backward && s > 0) Send(out, /*gradient=*/true, mb, s, a.chunk);
}

PipelineStepResult PipelineExecutor::Forward(const std::vector<model::MicroBatch>& mbs,
                                             int64_t hidden) {
  BeginStep(mbs, hidden);
  const int S = topology_.stages(), rank = pp_.rank();
  PipelineStepResult result;
  for (int mb = 0; mb < spec_.microbatches; ++mb) {
    for (int s = 0; s < S; ++s) {
      if (topology_.RankOf(s) != rank) continue;
      int chunk = 0;
      while (topology_.Stage(rank, chunk) != s) ++chunk;
      core::Buffer x_in, x_out;
      if (s > 0) Receive(x_in, /*gradient=*/false, mb, s - 1, chunk);
      if (s < S - 1)
        x_out = core::Buffer(alloc_, core::MemTag::kComm, core::Dtype::kF32, {tokens_, hidden_});
      model::Stage& stage = *chunks_[static_cast<size_t>(chunk)];
      const model::StageForward f =
          stage.Forward(mb, mbs[static_cast<size_t>(mb)], x_in.view(), x_out.view());
      stage.Drop(mb);
      result.loss_sum += f.loss_sum;
      result.valid_tokens += f.valid_tokens;
      result.moe.Add(f.moe);
      if (s < S - 1) Send(x_out, /*gradient=*/false, mb, s, chunk);
    }
  }
  if (pp_.size() > 1) pp_.wait_sends();
  PM_CHECK(local_.empty()) << "unconsumed local hand-overs";
  return result;
}

namespace {

// Every rank's values of `mine` (the same count on each), in rank order: the doubles' bit
// patterns all-gathered as i64 (the communicator reduces no fp64).
std::vector<double> GatherDoubles(comm::Communicator& group, const std::vector<double>& mine) {
  const size_t k = mine.size();
  std::vector<double> all(k * static_cast<size_t>(group.size()));
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(k * group.rank()));
  double* base = all.data();
  group.all_gather(base, base + k * static_cast<size_t>(group.rank()), static_cast<int64_t>(k),
                   core::Dtype::kI64);
  return all;
}

}  // namespace

PipelineBubble MeasureBubble(comm::Communicator& world, int pp_rank,
                             const schedule::ScheduleSpec& spec, const ActionTiming& t) {
  constexpr size_t kValues = 9;  // pp rank, start, end, busy F/B/W, count F/B/W
  const std::vector<double> all =
      GatherDoubles(world, {static_cast<double>(pp_rank), t.start_us, t.end_us, t.busy_us[0],
                            t.busy_us[1], t.busy_us[2], static_cast<double>(t.count[0]),
                            static_cast<double>(t.count[1]), static_cast<double>(t.count[2])});
  // Per pp rank: sums over its replicas of every value, and the replica count.
  std::vector<std::array<double, kValues>> per(static_cast<size_t>(spec.pp));
  std::vector<double> replicas(static_cast<size_t>(spec.pp), 0);
  for (size_t r = 0; r < all.size() / kValues; ++r) {
    const auto p = static_cast<size_t>(all[r * kValues]);
    PM_CHECK(p < per.size()) << "pp rank " << p << " of " << spec.pp;
    for (size_t v = 1; v < kValues; ++v) per[p][v] += all[r * kValues + v];
    replicas[p] += 1;
  }
  double first = 0, last = 0;
  std::array<double, 3> busy_all{}, count_all{};
  schedule::Costs costs;
  costs.per_stage.assign(static_cast<size_t>(spec.topology().stages()), {});
  std::vector<schedule::ActionCosts> rank_costs(per.size());
  for (size_t p = 0; p < per.size(); ++p) {
    PM_CHECK(replicas[p] > 0) << "no rank reported pp rank " << p;
    const double start = per[p][1] / replicas[p], end = per[p][2] / replicas[p];
    first = p == 0 ? start : std::min(first, start);
    last = p == 0 ? end : std::max(last, end);
    auto mean = [&](size_t k) { return per[p][6 + k] > 0 ? per[p][3 + k] / per[p][6 + k] : 0.0; };
    rank_costs[p] = {
        .time_f_s = mean(0) * 1e-6, .time_b_s = mean(1) * 1e-6, .time_w_s = mean(2) * 1e-6};
    for (size_t k = 0; k < 3; ++k) {
      busy_all[k] += per[p][3 + k];
      count_all[k] += per[p][6 + k];
    }
  }
  PipelineBubble b{.microbatches = spec.microbatches};
  const double makespan = last - first;
  for (size_t p = 0; p < per.size(); ++p) {
    const double busy = (per[p][3] + per[p][4] + per[p][5]) / replicas[p];
    b.measured += makespan > 0 ? (makespan - busy) / makespan / static_cast<double>(spec.pp) : 0;
  }
  auto overall = [&](size_t k) {
    return count_all[k] > 0 ? busy_all[k] / count_all[k] * 1e-6 : 0.0;
  };
  b.time_f_s = overall(0);
  b.time_b_s = overall(1);
  b.time_w_s = overall(2);
  const schedule::Topology topo = spec.topology();
  for (int s = 0; s < topo.stages(); ++s)
    costs.per_stage[static_cast<size_t>(s)] = rank_costs[static_cast<size_t>(topo.RankOf(s))];
  auto programs = schedule::MakeAll(spec);
  PM_CHECK(programs.ok()) << programs.status().message();
  auto sim = schedule::Simulate(*programs, topo, costs);
  PM_CHECK(sim.ok() && sim->complete) << (sim.ok() ? sim->deadlock : sim.status().message());
  b.simulated = sim->bubble_fraction;
  return b;
}

std::string GatherChromeTrace(comm::Communicator& group, const std::vector<TraceEvent>& events) {
  nlohmann::json mine = nlohmann::json::array();
  const int rank = group.rank();
  for (const TraceEvent& e : events) {
    mine.push_back(
        {{"name", e.name},
         {"cat", e.cat},
         {"ph", "X"},
         {"pid", rank},
         {"tid", e.cat == "p2p"          ? 1
                 : e.cat == "collective" ? 2
                                         : 0},
         {"ts", e.ts_us},
         {"dur", e.dur_us},
         {"args", {{"microbatch", e.microbatch}, {"chunk", e.chunk}, {"bytes", e.bytes}}}});
  }
  const std::string text = mine.dump();
  if (rank != 0) {
    int64_t n = static_cast<int64_t>(text.size());
    group.send(&n, 1, core::Dtype::kI64, 0);
    group.send(text.data(), n, core::Dtype::kU8, 0);
    return "";
  }
  nlohmann::json all = nlohmann::json::array();
  auto add_rank = [&](int r, const nlohmann::json& evs) {
    all.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", r},
                   {"args", {{"name", fmt::format("{} rank {}", group.name(), r)}}}});
    constexpr const char* kThreads[] = {"compute", "p2p", "collectives"};
    for (int tid = 0; tid < 3; ++tid) {
      all.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", r},
                     {"tid", tid},
                     {"args", {{"name", kThreads[tid]}}}});
    }
    for (const auto& e : evs) all.push_back(e);
  };
  add_rank(0, mine);
  for (int r = 1; r < group.size(); ++r) {
    int64_t n = 0;
    group.recv(&n, 1, core::Dtype::kI64, r);
    std::string buf(static_cast<size_t>(n), '\0');
    group.recv(buf.data(), n, core::Dtype::kU8, r);
    add_rank(r, nlohmann::json::parse(buf));
  }
  return nlohmann::json{{"traceEvents", all}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace pentamesh::train
