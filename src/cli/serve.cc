// `pentamesh serve`: inference planning. With --tp (and optionally --ep --pp --replicas) it costs
// that serving layout (cost::EstimateServe); without, it searches the layouts that meet
// --ttft-p95 / --itl at the lowest cost per request (plan::SearchServe). Table by default,
// --json, --html; a layout that breaks a rule or does not fit, or no layout meeting the targets,
// exits 2 naming the field. With --tp and --concurrency or --rate it also simulates the layout
// under that load (plan::SimulateLayout: continuous batching, chunked prefill, paged KV), or with
// --request-trace under a trace's requests (plan/serve_trace.h), each with its own arrival and
// lengths; the estimate is then of the trace's longest prompt and longest request.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/plan_common.h"
#include "cli/serve_json.h"
#include "core/output.h"
#include "cost/inference.h"
#include "launch/serve_engines.h"
#include "plan/serve.h"
#include "plan/serve_sim.h"
#include "plan/serve_trace.h"
#include "report/serve_html.h"
#include "spec/load_toml.h"

namespace pentamesh::cli {
namespace {

constexpr double kGB = 1e9;
constexpr double kMs = 1e3;
constexpr int64_t kMaxRequests = 1 << 20;
constexpr int64_t kSimRequests = 1000;

struct ServeArgs {
  std::string model, cluster = "h100-sxm", stack = "megatron", precision = "bf16";
  std::optional<int64_t> gpus;
  cost::ServeWorkload workload;
  std::optional<int64_t> tp;
  int64_t ep = 1, pp = 1, replicas = 1;
  double ttft_p95_ms = 0, itl_ms = 0;
  // Simulation under load (with --tp): a closed loop of clients or Poisson arrivals.
  std::optional<int64_t> concurrency;
  std::optional<int64_t> max_batched_tokens;  // --max-batched-tokens (else the profile's)
  std::optional<double> rate;
  std::optional<int64_t> sim_requests;  // --sim-requests (default kSimRequests)
  int64_t seed = 1;
  double length_range_ratio = 1;  // --length-range-ratio
  std::string request_trace;      // --request-trace FILE
  std::vector<plan::TraceRequest> trace;
  plan::TraceSummary trace_summary;
  double slo_ttft_ms = 0, slo_itl_ms = 0;
  std::string engine = "none";              // profile (cost::FindServeEngineProfile)
  std::vector<std::string> weight_formats;  // --weight-formats (capacity search)
  std::vector<std::string> emit;            // --emit ENGINE DIR
  int top = 5;
  bool json = false;
  std::string html;
};

// " (H of each prompt in the prefix cache)" when --prefix-hit-rate is given.
std::string PrefixNote(const cost::ServeWorkload& w) {
  return w.prefix_hit_rate > 0
             ? fmt::format(" ({:g} of each prompt in the prefix cache)", w.prefix_hit_rate)
             : "";
}

// " (lengths drawn from [R x, 1 x] these)" when --length-range-ratio is below 1.
std::string LengthsNote(const ServeArgs& a) {
  return a.length_range_ratio < 1
             ? fmt::format(" (lengths drawn from [{:g} x, 1 x] these)", a.length_range_ratio)
             : "";
}

std::string Describe(const ServeArgs& a, const Inputs& in) {
  const cost::ServeWorkload& w = a.workload;
  if (!a.trace.empty()) {
    return fmt::format(
        "{} on {}, request trace {} (estimate: its longest prompt, {} tokens, and longest "
        "request, {} tokens), {} weights, {} KV, engine profile {}",
        in.model.name, in.cluster.name, a.request_trace, w.input_tokens,
        w.input_tokens + w.output_tokens, a.precision, w.kv_fp8 ? "fp8" : "bf16",
        w.engine.profile.name);
  }
  return fmt::format(
      "{} on {}, {} input + {} output tokens{}, {} concurrent request(s), {} weights, {} KV, "
      "engine profile {}",
      in.model.name, in.cluster.name, w.input_tokens, w.output_tokens, PrefixNote(w), w.requests,
      a.precision, w.kv_fp8 ? "fp8" : "bf16", w.engine.profile.name);
}

void PrintEstimate(const cost::ServeEstimate& e) {
  const cost::ServeMemory& m = e.memory;
  fmt::print(
      "  memory GB/GPU  weights {:.2f}  kv_cache {:.2f}  activations {:.2f}  framework {:.2f}"
      "  total {:.2f} of {:.2f}\n",
      m.weights / kGB, m.kv_cache / kGB, m.activations / kGB, m.framework / kGB, m.total / kGB,
      m.capacity / kGB);
  fmt::print(
      "  KV cache       {:.0f} KB/token (model), {:.0f} KB/token/GPU, {:.2f} GB/request/GPU;"
      " {} requests fit per replica ({:.0f} tokens per ep group)\n",
      e.kv_bytes_per_token / 1e3, e.kv_bytes_per_token_gpu / 1e3, e.kv_bytes_per_request_gpu / kGB,
      e.requests_fit, e.tokens_fit);
  if (e.experts_per_gpu > 0) {
    fmt::print(
        "  MoE            {:.0f} routed experts/GPU per MoE layer (1/tp of each); a decode "
        "step touches {:.1f}\n",
        e.experts_per_gpu, e.experts_touched);
  }
  fmt::print(
      "  prefill ms     compute {:.1f}  offload {:.1f}  overhead {:.1f}  tp {:.1f}  ep {:.1f}  "
      "pp {:.1f}  total {:.1f}\n",
      e.prefill_compute_s * kMs, e.prefill_offload_s * kMs, e.prefill_overhead_s * kMs,
      e.prefill_tp_s * kMs, e.prefill_ep_s * kMs, e.prefill_pp_s * kMs, e.prefill_s * kMs);
  fmt::print(
      "  decode ms      weights {:.2f}  kv {:.2f}  compute {:.2f}  offload {:.2f}  overhead {:.2f}"
      "  tp {:.2f}  ep {:.2f}  pp {:.2f}  itl {:.2f} (batch {})\n",
      e.decode_weights_s * kMs, e.decode_kv_s * kMs, e.decode_compute_s * kMs,
      e.decode_offload_s * kMs, e.decode_overhead_s * kMs, e.decode_tp_s * kMs, e.decode_ep_s * kMs,
      e.decode_pp_s * kMs, e.itl_s * kMs, e.requests_per_group);
  fmt::print("  latency ms     TTFT mean {:.0f}  p95 {:.0f}  ITL {:.1f}  batch done {:.0f}\n",
             e.ttft_mean_s * kMs, e.ttft_p95_s * kMs, e.itl_s * kMs, e.request_s * kMs);
  fmt::print(
      "  cost           {:.1f} output tokens/s/GPU  USD {:.4f}/request  USD {:.2f}/M output "
      "tokens\n",
      e.output_tokens_per_s_gpu, e.usd_per_request, e.usd_per_million_output_tokens);
}

std::string Describe(const ServeArgs& a, const plan::ServeLoad& load) {
  if (!a.trace.empty()) {
    const plan::TraceSummary& t = a.trace_summary;
    return fmt::format(
        "request trace {}: {} requests, mean {:.1f} input + {:.1f} output tokens, arrivals over "
        "{:.3f} s, on {} engine(s)",
        a.request_trace, t.requests, t.mean_input_tokens, t.mean_output_tokens, t.duration_s,
        load.groups);
  }
  const std::string arrivals = a.concurrency
                                   ? fmt::format("closed loop of {} clients", *a.concurrency)
                                   : fmt::format("Poisson arrivals at {} requests/s", *a.rate);
  return fmt::format("{}, {} requests over {} engine(s) (replicas x ep){}", arrivals,
                     a.sim_requests.value_or(kSimRequests), load.groups, LengthsNote(a));
}

void PrintPercentiles(const char* name, const plan::Percentiles& p) {
  fmt::print("  {:<14} mean {:.1f}  p50 {:.1f}  p95 {:.1f}  p99 {:.1f}  max {:.1f}\n", name,
             p.mean * kMs, p.p50 * kMs, p.p95 * kMs, p.p99 * kMs, p.max * kMs);
}

void PrintLoad(const ServeArgs& a, const plan::ServeLoad& load, int64_t block_tokens) {
  const plan::ServeSimResult& g = load.group;
  fmt::print("\nsimulated: {}\n", Describe(a, load));
  // A dealt trace's steps and preemptions are of all engines (plan::SimulateServeTrace).
  const bool all = !a.trace.empty() && load.groups > 1;
  fmt::print(
      "  {:<14} {} steps, {:.0f} tokens/step, up to {} running, {} preemptions, {} KV "
      "blocks of {} tokens{}\n",
      all ? "all engines" : "engine", g.steps, g.mean_batch_tokens, g.max_running, g.preemptions,
      g.kv_blocks, block_tokens, all ? " each" : "");
  PrintPercentiles("TTFT ms", g.ttft_s);
  PrintPercentiles("ITL ms", g.itl_s);
  PrintPercentiles("TPOT ms", g.tpot_s);
  PrintPercentiles("end-to-end ms", g.e2e_s);
  fmt::print(
      "  throughput     {:.2f} requests/s  {:.0f} output tokens/s ({:.1f}/GPU)  {:.1f} requests "
      "in the system\n",
      load.requests_per_s, load.output_tokens_per_s, load.output_tokens_per_s_gpu,
      g.mean_in_system * static_cast<double>(load.groups));
  fmt::print("  goodput        {:.2f} requests/s with TTFT <= {} ms and TPOT <= {} ms (0 = none)\n",
             load.goodput_requests_per_s, a.slo_ttft_ms, a.slo_itl_ms);
}

nlohmann::json PercentilesJson(const plan::Percentiles& p) {
  return {{"mean", p.mean * kMs},
          {"p50", p.p50 * kMs},
          {"p95", p.p95 * kMs},
          {"p99", p.p99 * kMs},
          {"max", p.max * kMs}};
}

nlohmann::json LoadJson(const ServeArgs& a, const plan::ServeLoad& load) {
  const plan::ServeSimResult& g = load.group;
  nlohmann::json j = {{"engines", load.groups},
                      {"requests", a.trace.empty() ? a.sim_requests.value_or(kSimRequests)
                                                   : a.trace_summary.requests},
                      {"seed", a.seed},
                      {"length_range_ratio", a.length_range_ratio},
                      {"steps", g.steps},
                      {"mean_batch_tokens", g.mean_batch_tokens},
                      {"max_running", g.max_running},
                      {"preemptions", g.preemptions},
                      {"kv_blocks", g.kv_blocks},
                      {"ttft_ms", PercentilesJson(g.ttft_s)},
                      {"itl_ms", PercentilesJson(g.itl_s)},
                      {"tpot_ms", PercentilesJson(g.tpot_s)},
                      {"e2e_ms", PercentilesJson(g.e2e_s)},
                      {"duration_ms", g.duration_s * kMs},
                      {"requests_per_s", load.requests_per_s},
                      {"output_tokens_per_s", load.output_tokens_per_s},
                      {"output_tokens_per_s_gpu", load.output_tokens_per_s_gpu},
                      {"goodput_requests_per_s", load.goodput_requests_per_s},
                      {"slo_ttft_ms", a.slo_ttft_ms},
                      {"slo_itl_ms", a.slo_itl_ms},
                      {"mean_in_system", g.mean_in_system * static_cast<double>(load.groups)}};
  if (a.concurrency) j["concurrency"] = *a.concurrency;
  if (a.rate) j["rate_per_s"] = *a.rate;
  if (!a.trace.empty()) {
    const plan::TraceSummary& t = a.trace_summary;
    j["trace"] = {{"file", a.request_trace},
                  {"requests", t.requests},
                  {"mean_input_tokens", t.mean_input_tokens},
                  {"mean_output_tokens", t.mean_output_tokens},
                  {"duration_ms", t.duration_s * kMs}};
  }
  return j;
}

void PrintTable(const std::vector<cost::ServeEstimate>& rows) {
  fmt::print("  {:>2}  {:<30} {:>5} {:>7} {:>12} {:>8} {:>10} {:>11} {:>10}\n", "#", "layout",
             "GPUs", "mem GB", "TTFT p95 ms", "ITL ms", "tok/s/GPU", "USD/request", "USD/M out");
  for (size_t i = 0; i < rows.size(); ++i) {
    const cost::ServeEstimate& e = rows[i];
    fmt::print("  {:>2}  {:<30} {:>5} {:>7.1f} {:>12.0f} {:>8.1f} {:>10.1f} {:>11.4f} {:>10.2f}\n",
               i + 1, cost::FormatServeLayout(e.layout), e.layout.gpus(), e.memory.total / kGB,
               e.ttft_p95_s * kMs, e.itl_s * kMs, e.output_tokens_per_s_gpu, e.usd_per_request,
               e.usd_per_million_output_tokens);
  }
}

}  // namespace

nlohmann::json ServeEstimateJson(const cost::ServeEstimate& e) {
  const cost::ServeMemory& m = e.memory;
  return {{"layout", cost::FormatServeLayout(e.layout)},
          {"gpus", e.layout.gpus()},
          {"fits", e.fits},
          {"violations", e.violations},
          {"memory_bytes",
           {{"weights", m.weights},
            {"kv_cache", m.kv_cache},
            {"activations", m.activations},
            {"activation_reserve", m.activation_reserve},
            {"framework", m.framework},
            {"total", m.total},
            {"capacity", m.capacity}}},
          {"kv_bytes_per_token", e.kv_bytes_per_token},
          {"kv_bytes_per_token_gpu", e.kv_bytes_per_token_gpu},
          {"kv_bytes_per_request_gpu", e.kv_bytes_per_request_gpu},
          {"requests_fit", e.requests_fit},
          {"tokens_fit", e.tokens_fit},
          {"experts_per_gpu", e.experts_per_gpu},
          {"experts_touched", e.experts_touched},
          {"prefill_ms",
           {{"compute", e.prefill_compute_s * kMs},
            {"offload", e.prefill_offload_s * kMs},
            {"overhead", e.prefill_overhead_s * kMs},
            {"tp", e.prefill_tp_s * kMs},
            {"ep", e.prefill_ep_s * kMs},
            {"pp", e.prefill_pp_s * kMs},
            {"total", e.prefill_s * kMs}}},
          {"decode_ms",
           {{"weights", e.decode_weights_s * kMs},
            {"kv", e.decode_kv_s * kMs},
            {"compute", e.decode_compute_s * kMs},
            {"offload", e.decode_offload_s * kMs},
            {"overhead", e.decode_overhead_s * kMs},
            {"tp", e.decode_tp_s * kMs},
            {"ep", e.decode_ep_s * kMs},
            {"pp", e.decode_pp_s * kMs},
            {"itl", e.itl_s * kMs}}},
          {"batch", e.requests_per_group},
          {"ttft_mean_ms", e.ttft_mean_s * kMs},
          {"ttft_p95_ms", e.ttft_p95_s * kMs},
          {"itl_ms", e.itl_s * kMs},
          {"batch_done_ms", e.request_s * kMs},
          {"output_tokens_per_s_gpu", e.output_tokens_per_s_gpu},
          {"usd_per_request", e.usd_per_request},
          {"usd_per_million_output_tokens", e.usd_per_million_output_tokens}};
}

namespace {

core::Status WriteHtml(const ServeArgs& a, const std::string& title,
                       const std::vector<cost::ServeEstimate>& rows) {
  if (a.html.empty()) return core::Status::Ok();
  const core::Status st = core::WriteFileAtomic(a.html, report::ServeHtml(title, rows));
  return st.ok() ? st : core::Status::Error("--html: " + st.message());
}

// --emit ENGINE DIR: the engine's launch script of the layout, DIR/launch_ENGINE.sh.
// --emit ENGINE DIR: DIR/launch_ENGINE.sh, or for a pool of a disaggregated deployment
// DIR/launch_ENGINE_prefill.sh / _decode.sh.
core::Status Emit(const ServeArgs& a, const std::string& title, const cost::ServeLayout& l,
                  const cost::ServeWorkload& w,
                  launch::ServeRole role = launch::ServeRole::kColocated) {
  if (a.emit.empty()) return core::Status::Ok();
  auto engine = launch::ParseServeEngine(a.emit[0]);
  if (!engine.ok()) return engine.status();
  std::error_code ec;
  std::filesystem::create_directories(a.emit[1], ec);
  if (ec) return core::Status::Error("--emit: cannot create " + a.emit[1] + ": " + ec.message());
  const char* suffix = role == launch::ServeRole::kPrefill  ? "_prefill"
                       : role == launch::ServeRole::kDecode ? "_decode"
                                                            : "";
  const std::string path =
      (std::filesystem::path(a.emit[1]) / fmt::format("launch_{}{}.sh", a.emit[0], suffix))
          .string();
  const std::string script = launch::ServeLaunchScript(
      *engine, l, w,
      {"pentamesh serve: " + title,
       "weights " + cost::ServeWeightsName(w.precision, w.weight_only_bits, w.fp4) + ", KV " +
           (w.kv_fp8 ? "fp8" : "bf16")},
      role);
  const core::Status st = core::WriteFileAtomic(path, script, /*executable=*/true);
  if (!st.ok()) return core::Status::Error("--emit: " + st.message());
  fmt::print(stderr, "wrote {}\n", path);
  return core::Status::Ok();
}

std::string ListViolations(const std::vector<std::string>& violations) {
  std::string out;
  for (const std::string& v : violations) out += (out.empty() ? "" : "; ") + v;
  return out;
}

int RunOne(const ServeArgs& a, const Inputs& in, const cost::Context& ctx) {
  const cost::ServeLayout l{.tp = *a.tp, .ep = a.ep, .pp = a.pp, .replicas = a.replicas};
  const cost::ServeEstimate e = cost::EstimateServe(ctx, l, a.workload);
  if (!e.fits) return Fail(ListViolations(e.violations));
  const std::string title = Describe(a, in);
  if (const core::Status s = WriteHtml(a, title, {e}); !s.ok()) return Fail(s.message());
  if (const core::Status s = Emit(a, title, l, a.workload); !s.ok()) return Fail(s.message());
  std::optional<plan::ServeLoad> load;
  if (a.concurrency || a.rate || !a.trace.empty()) {
    const plan::ServeTraffic traffic{.rate_per_s = a.rate.value_or(0.0),
                                     .concurrency = a.concurrency.value_or(0),
                                     .think_s = plan::kClientTurnaroundS,
                                     .requests = a.sim_requests.value_or(kSimRequests),
                                     .seed = static_cast<uint64_t>(a.seed),
                                     .length_range_ratio = a.length_range_ratio,
                                     .slo_ttft_s = a.slo_ttft_ms / kMs,
                                     .slo_itl_s = a.slo_itl_ms / kMs,
                                     .trace = a.trace};
    load = plan::SimulateLayout(ctx, l, a.workload, traffic);
  }
  if (a.json) {
    nlohmann::json j = ServeEstimateJson(e);
    if (load) j["simulation"] = LoadJson(a, *load);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("pentamesh serve: {}\nlayout: {} ({} GPUs)\n", title, cost::FormatServeLayout(l),
             l.gpus());
  PrintEstimate(e);
  if (load) PrintLoad(a, *load, a.workload.engine.block_tokens);
  return 0;
}

int RunSearch(const ServeArgs& a, const Inputs& in, const cost::Context& ctx) {
  const plan::ServeTargets targets{.ttft_p95_s = a.ttft_p95_ms / kMs, .itl_s = a.itl_ms / kMs};
  const plan::ServeSearchResult r = plan::SearchServe(ctx, a.workload, targets, a.top);
  if (r.top.empty()) {
    std::string why = fmt::format(
        "no serving layout meets --ttft-p95 {} ms / --itl {} ms ({} "
        "costed, {} fit)",
        a.ttft_p95_ms, a.itl_ms, r.costed, r.fit);
    if (r.nearest_miss) {
      why += fmt::format("; nearest: {} with TTFT p95 {:.0f} ms, ITL {:.1f} ms",
                         cost::FormatServeLayout(r.nearest_miss->layout),
                         r.nearest_miss->ttft_p95_s * kMs, r.nearest_miss->itl_s * kMs);
    }
    return Fail(why);
  }
  const std::string title = Describe(a, in);
  if (const core::Status s = WriteHtml(a, title, r.top); !s.ok()) return Fail(s.message());
  if (const core::Status s = Emit(a, title, r.top.front().layout, a.workload); !s.ok()) {
    return Fail(s.message());
  }
  if (a.json) {
    nlohmann::json j = {{"costed", r.costed}, {"fit", r.fit}, {"met", r.met}, {"top", {}}};
    for (const cost::ServeEstimate& e : r.top) j["top"].push_back(ServeEstimateJson(e));
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("pentamesh serve: {}\ntargets: TTFT p95 <= {} ms, ITL <= {} ms (0 = none)\n", title,
             a.ttft_p95_ms, a.itl_ms);
  fmt::print("layouts: {} costed, {} fit, {} meet the targets\n", r.costed, r.fit, r.met);
  const cost::ServeEstimate& best = r.top.front();
  fmt::print("\nbest (lowest cost per request): {} ({} GPUs)\n",
             cost::FormatServeLayout(best.layout), best.layout.gpus());
  PrintEstimate(best);
  fmt::print("\ntop {}:\n", r.top.size());
  PrintTable(r.top);
  return 0;
}

nlohmann::json DeploymentJson(const plan::ServeDeployment& d) {
  const plan::ServeSimResult& r = d.replica;
  return {{"layout", cost::FormatServeLayout(d.layout)},
          {"gpus", d.layout.gpus()},
          {"precision", cost::ServeWeightsName(d.precision, d.weight_only_bits, d.fp4)},
          {"kv", d.kv_fp8 ? "fp8" : "bf16"},
          {"experts_in_hbm", d.experts_in_hbm},
          {"meets", d.meets},
          {"ttft_p95_ms", r.ttft_s.p95 * kMs},
          {"itl_p95_ms", r.itl_s.p95 * kMs},
          {"tpot_p95_ms", r.tpot_s.p95 * kMs},
          {"preemptions", r.preemptions},
          {"usd_per_hour", d.usd_per_hour},
          {"usd_per_million_output_tokens", d.usd_per_million_output_tokens},
          {"usd_per_million_tokens", d.usd_per_million_tokens}};
}

// The disaggregated deployment in one line: both pools, its p95s and its price.
std::string DisaggregatedLine(const plan::ServeDisaggregated& d) {
  auto pool = [](const plan::ServeDeployment& p) { return cost::FormatServeLayout(p.layout); };
  return fmt::format(
      "prefill {} + decode {} ({} GPUs), {} weights, {} KV: TTFT p95 {:.0f} ms (KV transfer {:.1f} "
      "ms), ITL p95 {:.1f} ms, USD/h {:.2f}, USD/M out {:.3f}",
      pool(d.prefill), pool(d.decode), d.gpus(),
      cost::ServeWeightsName(d.prefill.precision, d.prefill.weight_only_bits, d.prefill.fp4),
      d.prefill.kv_fp8 ? "fp8" : "bf16", d.ttft_p95_s * kMs, d.kv_transfer_s * kMs,
      d.itl_p95_s * kMs, d.usd_per_hour, d.usd_per_million_output_tokens);
}

// --rate without --tp: the cheapest deployment under --slo-ttft / --slo-itl (p95), simulated.
int RunCapacity(const ServeArgs& a, const Inputs& in, const cost::Context& ctx) {
  plan::ServeCapacityQuery q;
  q.workload = a.workload;
  q.rate_per_s = *a.rate;
  q.slo_ttft_p95_s = a.slo_ttft_ms / kMs;
  q.slo_itl_p95_s = a.slo_itl_ms / kMs;
  q.sim_requests = a.sim_requests.value_or(kSimRequests);
  q.seed = static_cast<uint64_t>(a.seed);
  q.length_range_ratio = a.length_range_ratio;
  q.weights = a.weight_formats;
  const plan::ServeCapacityResult r = plan::SearchServeCapacity(ctx, q, a.top);
  if (r.top.empty()) {
    std::string why = fmt::format(
        "--slo-ttft/--slo-itl: no deployment serves {} requests/s with TTFT p95 <= {} ms and ITL "
        "p95 <= {} ms ({} replica shapes fit, {} simulations)",
        q.rate_per_s, a.slo_ttft_ms, a.slo_itl_ms, r.candidates, r.simulations);
    if (r.nearest_miss) {
      const plan::ServeDeployment& m = *r.nearest_miss;
      why += fmt::format(
          "; nearest: {} {} weights {} KV with TTFT p95 {:.0f} ms, ITL p95 {:.1f} ms",
          cost::FormatServeLayout(m.layout),
          cost::ServeWeightsName(m.precision, m.weight_only_bits, m.fp4), m.kv_fp8 ? "fp8" : "bf16",
          m.replica.ttft_s.p95 * kMs, m.replica.itl_s.p95 * kMs);
    }
    if (r.disaggregated)
      why += "; disaggregated meets them: " + DisaggregatedLine(*r.disaggregated);
    return Fail(why);
  }
  {
    const plan::ServeDeployment& best = r.top.front();
    cost::ServeWorkload w = plan::DeployedWorkload(best, a.workload);
    const std::string title =
        fmt::format("{} on {}, {} requests/s of {} + {} tokens", in.model.name, in.cluster.name,
                    q.rate_per_s, w.input_tokens, w.output_tokens);
    // The disaggregated deployment when it is cheaper: a script for each pool.
    if (r.disaggregated && r.disaggregated->usd_per_hour < best.usd_per_hour) {
      const plan::ServeDisaggregated& d = *r.disaggregated;
      w = plan::DeployedWorkload(d.prefill, a.workload);
      for (const auto& [pool, role] : {std::pair{&d.prefill, launch::ServeRole::kPrefill},
                                       std::pair{&d.decode, launch::ServeRole::kDecode}}) {
        if (const core::Status s = Emit(a, title, pool->layout, w, role); !s.ok()) {
          return Fail(s.message());
        }
      }
    } else if (const core::Status s = Emit(a, title, best.layout, w); !s.ok()) {
      return Fail(s.message());
    }
  }
  if (a.json) {
    nlohmann::json j = {{"candidates", r.candidates}, {"simulations", r.simulations}, {"top", {}}};
    for (const plan::ServeDeployment& d : r.top) j["top"].push_back(DeploymentJson(d));
    if (r.disaggregated) {
      const plan::ServeDisaggregated& d = *r.disaggregated;
      j["disaggregated"] = {{"prefill", DeploymentJson(d.prefill)},
                            {"decode", DeploymentJson(d.decode)},
                            {"gpus", d.gpus()},
                            {"kv_transfer_ms", d.kv_transfer_s * kMs},
                            {"ttft_p95_ms", d.ttft_p95_s * kMs},
                            {"itl_p95_ms", d.itl_p95_s * kMs},
                            {"usd_per_hour", d.usd_per_hour},
                            {"usd_per_million_output_tokens", d.usd_per_million_output_tokens},
                            {"usd_per_million_tokens", d.usd_per_million_tokens}};
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print(
      "pentamesh serve: {} on {}, {} input + {} output tokens{}{}, Poisson arrivals at {} "
      "requests/s, engine profile {}\ntargets: TTFT p95 <= {} ms, ITL p95 <= {} ms (0 = none); {} "
      "replica shapes, {} simulations of {} requests\n\n",
      in.model.name, in.cluster.name, a.workload.input_tokens, a.workload.output_tokens,
      LengthsNote(a), PrefixNote(a.workload), q.rate_per_s, a.workload.engine.profile.name,
      a.slo_ttft_ms, a.slo_itl_ms, r.candidates, r.simulations, q.sim_requests);
  // With --experts-in-hbm the search weighs offloading: a column says each row's experts.
  const bool offload = a.workload.experts_in_hbm > 0;
  fmt::print("  {:>2}  {:<30} {:>5} {:>5} {:>4}{} {:>12} {:>11} {:>8} {:>10} {:>9}\n", "#",
             "layout", "GPUs", "wts", "KV", offload ? fmt::format(" {:>8}", "experts") : "",
             "TTFT p95 ms", "ITL p95 ms", "USD/h", "USD/M out", "USD/M tok");
  for (size_t i = 0; i < r.top.size(); ++i) {
    const plan::ServeDeployment& d = r.top[i];
    const std::string experts =
        !offload
            ? ""
            : fmt::format(" {:>8}", d.experts_in_hbm > 0 ? fmt::format("{} HBM", d.experts_in_hbm)
                                                         : std::string("all"));
    fmt::print(
        "  {:>2}  {:<30} {:>5} {:>5} {:>4}{} {:>12.0f} {:>11.1f} {:>8.2f} {:>10.3f} {:>9.3f}\n",
        i + 1, cost::FormatServeLayout(d.layout), d.layout.gpus(),
        cost::ServeWeightsName(d.precision, d.weight_only_bits, d.fp4), d.kv_fp8 ? "fp8" : "bf16",
        experts, d.replica.ttft_s.p95 * kMs, d.replica.itl_s.p95 * kMs, d.usd_per_hour,
        d.usd_per_million_output_tokens, d.usd_per_million_tokens);
  }
  if (r.disaggregated) {
    const plan::ServeDisaggregated& d = *r.disaggregated;
    const double best = r.top.front().usd_per_hour;
    fmt::print("\ndisaggregated (prefill and decode pools, the KV sent between them): {}; {}\n",
               DisaggregatedLine(d),
               d.usd_per_hour < best    ? "cheaper than #1"
               : d.usd_per_hour == best ? "the same price as #1"
                                        : "costs more than #1");
  }
  return 0;
}

// --request-trace: the trace read against the model's context, the fixed-traffic flags refused,
// and the estimate's workload set to the trace's longest prompt and longest request.
core::Status LoadTrace(ServeArgs& a, const spec::ModelSpec& model) {
  const std::string flag = "--request-trace";
  if (a.workload.input_tokens > 0 || a.workload.output_tokens > 0) {
    return core::Status::Error(flag +
                               " and --input-tokens/--output-tokens: give one of them (the "
                               "trace gives each request's lengths)");
  }
  if (a.rate) return core::Status::Error(flag + " and --rate: give one of them");
  if (a.concurrency) return core::Status::Error(flag + " and --concurrency: give one of them");
  if (a.length_range_ratio < 1) {
    return core::Status::Error(flag +
                               " and --length-range-ratio: give one of them (the trace gives each "
                               "request's lengths)");
  }
  if (a.sim_requests) {
    return core::Status::Error(flag +
                               " and --sim-requests: give one of them (the trace's requests are "
                               "simulated)");
  }
  if (!a.tp) return core::Status::Error(flag + ": simulate one layout: give --tp (and --pp)");
  auto trace = plan::ReadServeTrace(a.request_trace, model.max_seq_len);
  if (!trace.ok()) return core::Status::Error(flag + ": " + trace.status().message());
  a.trace = std::move(*trace);
  a.trace_summary = plan::SummarizeTrace(a.trace);
  a.workload.input_tokens = a.trace_summary.max_input_tokens;
  a.workload.output_tokens = a.trace_summary.max_total_tokens - a.trace_summary.max_input_tokens;
  return core::Status::Ok();
}

int RunServe(const ServeArgs& args) {
  ServeArgs a = args;
  Inputs in;
  auto model = spec::LoadModel(a.model);
  if (!model.ok()) return Fail(model.status().message());
  in.model = *model;
  if (!a.request_trace.empty()) {
    if (const core::Status s = LoadTrace(a, in.model); !s.ok()) return Fail(s.message());
  } else if (a.workload.input_tokens == 0 || a.workload.output_tokens == 0) {
    return Fail("--input-tokens and --output-tokens are required (or --request-trace FILE)");
  }
  auto cluster = spec::LoadCluster(a.cluster, a.gpus);
  if (!cluster.ok()) return Fail(cluster.status().message());
  in.cluster = *cluster;
  if (const core::Status s = ApplyStack(a.stack, in); !s.ok()) return Fail(s.message());
  if (!cost::ParseServeWeights(a.precision, a.workload)) {
    return Fail(fmt::format("--precision: \"{}\" is not one of {}", a.precision,
                            fmt::join(cost::ServeWeightsNames(), ", ")));
  }
  const cost::ServeEngineProfile* profile = cost::FindServeEngineProfile(a.engine);
  if (profile == nullptr) return Fail("--engine: no profile named \"" + a.engine + "\"");
  a.workload.engine.profile = *profile;
  // The emitted script launches vLLM or SGLang: it must not carry another engine's scheduler
  // settings (TensorRT-LLM's 16,384-token budget as vLLM's --max-num-batched-tokens).
  if (!a.emit.empty() && profile->name != "none" && profile->name != a.emit[0]) {
    return Fail(fmt::format(
        "--emit {0}/--engine {1}: the script launches {0}, the {1} profile models another "
        "engine's scheduler; give --engine none to emit it, or leave out --emit",
        a.emit[0], profile->name));
  }
  if (a.max_batched_tokens) {
    a.workload.engine.max_batched_tokens = *a.max_batched_tokens;
  } else if (profile->max_batched_tokens > 0) {
    a.workload.engine.max_batched_tokens = profile->max_batched_tokens;
  }
  spec::TrainSpec train;
  train.seq_len = a.workload.input_tokens + a.workload.output_tokens;
  const cost::Context ctx = cost::ServeContext(in.model, in.cluster, in.params, train);
  if (a.concurrency && a.rate) return Fail("--concurrency/--rate: give one of them, not both");
  if (a.concurrency && !a.tp) {
    return Fail("--concurrency: simulate one layout: give --tp (and --ep --pp --replicas)");
  }
  if (!a.weight_formats.empty()) {
    if (a.tp || !a.rate) {
      return Fail(
          "--weight-formats: only the capacity search (--rate without --tp) uses it; give "
          "--precision for one layout");
    }
    for (const std::string& f : a.weight_formats) {
      if (!plan::ServeWeightsSearchable(in.cluster, f)) {
        std::string upper = f;
        for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        return Fail(fmt::format("--weight-formats: {} needs a GPU with an {} peak; {} has none", f,
                                upper, in.cluster.name));
      }
    }
  }
  if (a.tp) return RunOne(a, in, ctx);
  // The searches skip layouts that break a rule: a rule the workload breaks on one GPU (a rate or
  // a length out of range) is named here, not reported as no layout meeting the targets.
  cost::ServeWorkload one = a.workload;
  one.requests = 1;
  if (const std::vector<std::string> v =
          cost::ServeRuleViolations(ctx, {.tp = 1, .ep = 1, .pp = 1, .replicas = 1}, one);
      !v.empty()) {
    return Fail(v.front());
  }
  return a.rate ? RunCapacity(a, in, ctx) : RunSearch(a, in, ctx);
}

void AddFlags(CLI::App* sub, ServeArgs* a) {
  cost::ServeWorkload& w = a->workload;
  sub->add_option("--model", a->model, "model preset or TOML file")->required();
  sub->add_option("--cluster", a->cluster, "cluster preset or TOML file");
  sub->add_option("--gpus", a->gpus, "GPUs available (default: the cluster's)")
      ->transform(IntIn(1, spec::kMaxGpus));
  sub->add_option("--stack", a->stack, "stack whose calibrated GPU parameters to use");
  sub->add_option("--input-tokens", w.input_tokens,
                  "prompt tokens per request (required without --request-trace)")
      ->transform(IntIn(1));
  sub->add_option("--output-tokens", w.output_tokens,
                  "generated tokens per request (required without --request-trace)")
      ->transform(IntIn(1));
  sub->add_option("--requests", w.requests, "concurrent requests over all replicas")
      ->transform(IntIn(1, kMaxRequests));
  sub->add_option("--precision", a->precision,
                  "weights and GEMMs: bf16, fp8, fp4 (NVFP4, Blackwell), or weight-only int8 / "
                  "int4 (a pre-quantized AWQ/GPTQ checkpoint, BF16 GEMMs)")
      ->check(CLI::IsMember(cost::ServeWeightsNames()));
  sub->add_option("--weight-formats", a->weight_formats,
                  "capacity search (--rate without --tp): weight formats to consider, of bf16, "
                  "fp8, fp4, int8, int4 (default bf16 and, where the GPU has it, fp8)")
      ->delimiter(',')
      ->check(CLI::IsMember(cost::ServeWeightsNames()));
  sub->add_flag("--kv-fp8", w.kv_fp8, "KV cache in FP8 (default BF16)");
  sub->add_option("--experts-in-hbm", w.experts_in_hbm,
                  "routed experts per MoE layer and ep group kept in HBM (0 = all; the rest "
                  "offloaded to host memory)")
      ->transform(IntIn(0));
  sub->add_option("--expert-hit-rate", w.expert_hit_rate,
                  "fraction of touched experts resident in HBM when offloading")
      ->check(NumberIn(0, 1));
  sub->add_option("--prefix-hit-rate", w.prefix_hit_rate,
                  "share of each prompt's tokens found in the prefix cache, in [0, 1) (default 0)")
      ->check(NumberIn(0, 1));
  sub->add_option("--pcie-gbps", w.pcie_gbps, "host-to-GPU GB/s achieved per GPU")
      ->check(NumberIn(0.1, 1e4));
  sub->add_option("--usd-per-gpu-hour", w.usd_per_gpu_hour, "GPU price")->check(NumberIn(0, 1e4));
  cost::ServeEngine& engine = w.engine;
  sub->add_option("--gpu-memory-utilization", engine.gpu_memory_utilization,
                  "fraction of the device memory the engine uses (vLLM's default 0.9); with "
                  "--engine trtllm the fraction of what is free after the weights it gives the "
                  "KV cache (free_gpu_memory_fraction, default 0.9)")
      ->check(NumberIn(0.01, 1));
  sub->add_option("--max-batched-tokens", a->max_batched_tokens,
                  "token budget of a step: chunked prefill (vLLM's max_num_batched_tokens; "
                  "default 8192, the --engine profile's when it has one)")
      ->transform(IntIn(1, kMaxRequests));
  sub->add_option("--max-seqs", engine.max_seqs, "requests in one step at most (max_num_seqs)")
      ->transform(IntIn(1, kMaxRequests));
  sub->add_option("--block-size", engine.block_tokens, "tokens per paged KV block")
      ->transform(IntIn(1, 1024));
  sub->add_option("--concurrency", a->concurrency,
                  "simulate a closed loop of N clients (with --tp), each sending its next "
                  "request 1 ms after its last token")
      ->transform(IntIn(1, kMaxRequests));
  sub->add_option("--engine", a->engine,
                  "engine profile of the simulation: per-step overheads, attention efficiency")
      ->check(CLI::IsMember(cost::ServeEngineProfileNames()));
  sub->add_option("--rate", a->rate,
                  "Poisson arrivals, requests/s: simulate the --tp layout, or without --tp find "
                  "the cheapest deployment meeting --slo-ttft/--slo-itl (p95)")
      ->check(NumberIn(1e-6, 1e9));
  sub->add_option("--sim-requests", a->sim_requests,
                  "requests the simulation serves (default 1000)")
      ->transform(IntIn(1, kMaxRequests));
  sub->add_option("--request-trace", a->request_trace,
                  "simulate the --tp layout under a request trace: JSON Lines of "
                  "{\"timestamp\": ms, \"input_length\": N, \"output_length\": N} (the Mooncake "
                  "format; sorted, at most 1,048,576 requests and 1 GiB; docs/commands.md)");
  sub->add_option("--seed", a->seed, "simulation: seed of the arrivals")->transform(IntIn(0));
  sub->add_option("--length-range-ratio", a->length_range_ratio,
                  "simulation and capacity search: each request's input and output lengths "
                  "drawn uniformly from [R x --input-tokens, --input-tokens] (and the same for "
                  "output), bench_serving's --random-range-ratio; 1 = fixed lengths (default)")
      ->check(NumberIn(0, 1));
  sub->add_option("--slo-ttft", a->slo_ttft_ms,
                  "TTFT target, ms: goodput of a simulation, p95 of the capacity search")
      ->check(NumberIn(0, 1e9));
  sub->add_option("--slo-itl", a->slo_itl_ms,
                  "ITL target, ms: goodput's TPOT in a simulation, p95 of every token gap in the "
                  "capacity search")
      ->check(NumberIn(0, 1e9));
}

}  // namespace

RunFn AddServeCommand(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Plan inference: memory, TTFT, inter-token latency and cost of serving layouts");
  AddFlags(sub, args.get());
  sub->add_option("--tp", args->tp, "cost this layout (tensor parallel)")->transform(IntIn(1, 64));
  sub->add_option("--ep", args->ep, "expert parallel groups per replica")
      ->transform(IntIn(1, 1024));
  sub->add_option("--pp", args->pp, "pipeline stages per replica")->transform(IntIn(1, 1024));
  sub->add_option("--replicas", args->replicas, "replicas")->transform(IntIn(1, spec::kMaxGpus));
  sub->add_option("--ttft-p95", args->ttft_p95_ms, "search: p95 time to first token target, ms")
      ->check(NumberIn(0, 1e9));
  sub->add_option("--itl", args->itl_ms, "search: inter-token latency target, ms")
      ->check(NumberIn(0, 1e9));
  sub->add_option("--top", args->top, "search: layouts to list")->transform(IntIn(1, 1000));
  sub->add_option("--emit", args->emit,
                  "ENGINE DIR: write the launch script of the layout (the best one when "
                  "searching) for vllm or sglang to DIR/launch_ENGINE.sh")
      ->expected(2)
      ->allow_extra_args(false);
  sub->add_flag("--json", args->json, "print JSON instead of the table");
  sub->add_option("--html", args->html, "write a self-contained HTML report to this file")
      ->check(OutputFile());
  return [args] { return RunServe(*args); };
}

}  // namespace pentamesh::cli
