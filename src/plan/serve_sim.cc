// The continuous-batching simulation (plan/serve_sim.h).
#include "plan/serve_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <random>
#include <vector>

#include "core/check.h"

namespace pentamesh::plan {
namespace {

struct Request {
  double sent_s = 0;     // the client sent it
  double arrival_s = 0;  // it reached the scheduler (after the engine's front end)
  double first_s = -1, last_s = -1;
  int64_t input_tokens = 0, output_tokens = 0;
  int64_t generated = 0;  // tokens emitted
  int64_t computed = 0;   // tokens whose KV is cached
  int64_t blocks = 0;     // KV blocks held
};

// One scheduled piece of work: `tokens` tokens of request `id` (1 = a decode).
struct Work {
  int64_t id = 0, tokens = 0;
};

int64_t BlocksFor(int64_t tokens, int64_t block_tokens) {
  return (tokens + block_tokens - 1) / block_tokens;
}

// Nearest-rank percentiles and the mean of `v` (reordered).
Percentiles Summarize(std::vector<double>& v) {
  Percentiles p;
  if (v.empty()) return p;
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  auto rank = [&v](double q) {
    const auto n = static_cast<double>(v.size());
    const auto k = static_cast<size_t>(std::max(1.0, std::ceil(q * n)) - 1.0);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  };
  p.p50 = rank(0.50);
  p.p95 = rank(0.95);
  p.p99 = rank(0.99);
  p.max = *std::max_element(v.begin(), v.end());
  return p;
}

// Poisson arrival times: exponential gaps from a 53-bit uniform (the same on every platform).
std::vector<double> PoissonArrivals(double rate_per_s, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> out(static_cast<size_t>(n));
  double t = 0;
  for (double& a : out) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
    t += -std::log1p(-u) / rate_per_s;
    a = t;
  }
  return out;
}

class Engine {
 public:
  Engine(const cost::ServeStepCost& cost, const cost::ServeWorkload& w, int64_t kv_blocks,
         const ServeTraffic& traffic)
      : cost_(cost),
        w_(w),
        traffic_(traffic),
        free_blocks_(kv_blocks),
        closed_(traffic.trace.empty() && traffic.rate_per_s <= 0) {
    result_.kv_blocks = kv_blocks;
  }

  ServeSimResult Run() {
    const std::vector<TraceRequest>& trace = traffic_.trace;
    const int64_t total = trace.empty() ? traffic_.requests : static_cast<int64_t>(trace.size());
    // The longest request and the longest prompt.
    int64_t len = trace.empty() ? w_.input_tokens + w_.output_tokens : 0;
    max_input_ = trace.empty() ? w_.input_tokens : 0;
    for (const TraceRequest& t : trace) {
      len = std::max(len, t.input_tokens + t.output_tokens);
      max_input_ = std::max(max_input_, t.input_tokens);
    }
    if (total < 1 || BlocksFor(len, w_.engine.block_tokens) > free_blocks_) return result_;
    if (!trace.empty()) {
      for (const TraceRequest& t : trace) {
        requests_.push_back(Sent(t.arrival_s, t.input_tokens, t.output_tokens));
      }
    } else if (!closed_) {
      const std::vector<double> arrivals =
          PoissonArrivals(traffic_.rate_per_s, total, traffic_.seed);
      for (double a : arrivals) requests_.push_back(Fixed(a));
    } else {
      const int64_t clients = std::min(std::max<int64_t>(1, traffic_.concurrency), total);
      for (int64_t i = 0; i < clients; ++i) Issue(0.0);
    }
    while (completed_ < total) {
      AdmitArrivals();
      if (running_.empty() && waiting_.empty()) {
        now_s_ = requests_[static_cast<size_t>(next_arrival_)].arrival_s;
        continue;
      }
      Step();
    }
    Finish();
    return result_;
  }

  // Accumulates this engine's run (after Run) into `m`, for one result over several engines.
  struct Merged {
    std::vector<double> ttft, itl, tpot, e2e;
    double first_s = std::numeric_limits<double>::infinity(), last_s = 0;
    double in_system_s = 0, tokens_scheduled = 0;
    int64_t completed = 0, good = 0, output_tokens = 0, steps = 0, preemptions = 0;
    int64_t max_running = 0;
    bool failed = false;
  };
  void MergeInto(Merged& m) const {
    if (requests_.empty() || result_.steps == 0) {
      m.failed = true;
      return;
    }
    m.ttft.insert(m.ttft.end(), ttft_.begin(), ttft_.end());
    m.itl.insert(m.itl.end(), itl_.begin(), itl_.end());
    m.tpot.insert(m.tpot.end(), tpot_.begin(), tpot_.end());
    m.e2e.insert(m.e2e.end(), e2e_.begin(), e2e_.end());
    m.first_s = std::min(m.first_s, requests_.front().sent_s);
    m.last_s = std::max(m.last_s, now_s_);
    m.in_system_s += in_system_s_;
    m.tokens_scheduled += tokens_scheduled_;
    m.completed += completed_;
    m.good += good_;
    m.output_tokens += output_tokens_;
    m.steps += result_.steps;
    m.preemptions += result_.preemptions;
    m.max_running = std::max(m.max_running, result_.max_running);
  }

 private:
  // Closed loop: a client's next request, arriving at `at_s` (AdmitArrivals queues it; clients
  // finish in time order, so arrivals stay sorted).
  void Issue(double at_s) { requests_.push_back(Fixed(at_s)); }

  // A request sent at `at_s`, of the workload's lengths or of lengths drawn below them.
  Request Fixed(double at_s) {
    if (traffic_.length_range_ratio >= 1) return Sent(at_s, w_.input_tokens, w_.output_tokens);
    const int64_t input = Draw(w_.input_tokens, 1);
    return Sent(at_s, input, Draw(w_.output_tokens, traffic_.prefilled ? 2 : 1));
  }

  // Uniform on [max(least, floor(r full)), full] from the traffic's seed (the same on every
  // platform: the generator's raw output, reduced mod the range).
  int64_t Draw(int64_t full, int64_t least) {
    const auto lo =
        std::min(full, std::max(least, static_cast<int64_t>(traffic_.length_range_ratio *
                                                            static_cast<double>(full))));
    return lo + static_cast<int64_t>(lengths_() % static_cast<uint64_t>(full - lo + 1));
  }

  // A request sent at `sent_s` (in sending order): the engine's front end takes frontend_s for
  // each, one after another, and then it reaches the scheduler.
  Request Sent(double sent_s, int64_t input_tokens, int64_t output_tokens) {
    const double f = w_.engine.profile.frontend_s;
    const double arrival_s = f > 0 ? std::max(sent_s, frontend_free_s_) + f : sent_s;
    frontend_free_s_ = arrival_s;
    Request r{.sent_s = sent_s,
              .arrival_s = arrival_s,
              .input_tokens = input_tokens,
              .output_tokens = output_tokens};
    r.computed = cost::CachedPrefixTokens(w_, input_tokens);
    if (traffic_.prefilled) {
      PM_CHECK(output_tokens >= 2);
      r.first_s = r.last_s = sent_s;
      r.generated = 1;
      r.computed = input_tokens;
    }
    return r;
  }

  // Open loop: requests that arrived by now join the queue; the time they waited unseen (in the
  // front end and during the last step) counts toward the number in the system.
  void AdmitArrivals() {
    while (next_arrival_ < static_cast<int64_t>(requests_.size()) &&
           requests_[static_cast<size_t>(next_arrival_)].arrival_s <= now_s_) {
      in_system_s_ += now_s_ - requests_[static_cast<size_t>(next_arrival_)].sent_s;
      waiting_.push_back(next_arrival_++);
    }
  }

  Request& At(int64_t id) { return requests_[static_cast<size_t>(id)]; }
  int64_t Known(const Request& r) const { return r.input_tokens + r.generated; }

  void Preempt(int64_t id) {
    Request& r = At(id);
    free_blocks_ += r.blocks;
    r.blocks = 0;
    r.computed = 0;  // recompute: the prompt and the generated tokens are prefilled again
    waiting_.push_front(id);
    ++result_.preemptions;
  }

  // Gives request `id` blocks for `tokens` more tokens; false when not enough are free.
  bool Grow(int64_t id, int64_t tokens) {
    Request& r = At(id);
    const int64_t need =
        std::max<int64_t>(0, BlocksFor(r.computed + tokens, w_.engine.block_tokens) - r.blocks);
    if (need > free_blocks_) return false;
    free_blocks_ -= need;
    r.blocks += need;
    return true;
  }

  // The running requests first (admission order), preempting from the back when blocks run
  // out; then the queue, unless this step preempted. Without chunked prefill a request's
  // remaining tokens go whole or not at all, and the first that does not fit ends the step's
  // list (first come first served); a prompt longer than the whole budget runs alone.
  void Schedule() {
    work_.clear();
    const bool chunked = w_.engine.profile.chunked_prefill;
    const bool reserve = w_.engine.profile.reserve_full_length;
    // Without chunking an engine must take its longest prompt in one step (TensorRT-LLM refuses
    // a context longer than max_num_tokens): the budget is at least a prompt beside a decode of
    // every other request.
    const int64_t full =
        chunked ? w_.engine.max_batched_tokens
                : std::max(w_.engine.max_batched_tokens, max_input_ + w_.engine.max_seqs - 1);
    int64_t budget = full;
    // The tokens request `id` may schedule now; 0 = it does not fit.
    auto take = [&](int64_t id) {
      const int64_t left = Known(At(id)) - At(id).computed;
      if (chunked) return std::min(left, budget);
      const bool alone = work_.empty() && budget == full;
      return left <= budget || alone ? left : int64_t{0};
    };
    bool preempted = false;
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      const int64_t id = running_[i];
      const int64_t n = take(id);
      if (n == 0) break;
      bool self = false;
      while (!Grow(id, n)) {
        const int64_t victim = running_.back();
        running_.pop_back();
        Preempt(victim);
        preempted = true;
        if (victim == id) {
          self = true;
          break;
        }
      }
      if (self) break;
      work_.push_back({.id = id, .tokens = n});
      budget -= n;
    }
    while (!preempted && budget > 0 && !waiting_.empty() &&
           static_cast<int64_t>(running_.size()) < w_.engine.max_seqs) {
      const int64_t id = waiting_.front();
      const int64_t n = take(id);
      if (n == 0) break;
      // Reserving: the blocks of the request's whole length, held until it completes.
      const int64_t whole = At(id).input_tokens + At(id).output_tokens - At(id).computed;
      if (!Grow(id, reserve ? std::max(n, whole) : n)) break;
      waiting_.pop_front();
      running_.push_back(id);
      work_.push_back({.id = id, .tokens = n});
      budget -= n;
    }
  }

  void Step() {
    Schedule();
    cost::ServeStepBatch batch;
    for (const Work& k : work_) {
      const auto prior = static_cast<double>(At(k.id).computed);
      const auto n = static_cast<double>(k.tokens);
      batch.tokens += n;
      batch.sequences += 1;
      batch.pairs_global += cost::CausalPairs(prior, n, 0);
      batch.kv_tokens_global += prior + n;
      if (cost_.window > 0) {
        batch.pairs_local += cost::CausalPairs(prior, n, cost_.window);
        batch.kv_tokens_local += std::min(prior + n, cost_.window);
      }
    }
    const double dt = cost::ServeStepTime(cost_, batch);
    in_system_s_ += dt * static_cast<double>(running_.size() + waiting_.size());
    now_s_ += dt;
    ++result_.steps;
    tokens_scheduled_ += batch.tokens;
    result_.max_running = std::max(result_.max_running, static_cast<int64_t>(running_.size()));
    bool done_any = false;
    for (const Work& k : work_) {
      Request& r = At(k.id);
      r.computed += k.tokens;
      if (r.computed < Known(r)) continue;  // a prefill chunk short of the prompt's end
      if (r.generated == 0) {
        r.first_s = now_s_;
      } else {
        itl_.push_back(now_s_ - r.last_s);
      }
      r.last_s = now_s_;
      if (++r.generated == r.output_tokens) {
        Complete(k.id);
        done_any = true;
      }
    }
    if (done_any) {
      std::erase_if(running_,
                    [this](int64_t id) { return At(id).generated == At(id).output_tokens; });
    }
  }

  void Complete(int64_t id) {
    Request& r = At(id);
    free_blocks_ += r.blocks;
    r.blocks = 0;
    ++completed_;
    ttft_.push_back(r.first_s - r.sent_s);
    e2e_.push_back(r.last_s - r.sent_s);
    output_tokens_ += r.output_tokens;
    const double tpot = r.output_tokens > 1
                            ? (r.last_s - r.first_s) / static_cast<double>(r.output_tokens - 1)
                            : 0.0;
    tpot_.push_back(tpot);
    const bool met = (traffic_.slo_ttft_s <= 0 || ttft_.back() <= traffic_.slo_ttft_s) &&
                     (traffic_.slo_itl_s <= 0 || tpot <= traffic_.slo_itl_s);
    good_ += met ? 1 : 0;
    if (closed_ && static_cast<int64_t>(requests_.size()) < traffic_.requests)
      Issue(now_s_ + traffic_.think_s);
  }

  void Finish() {
    ServeSimResult& s = result_;
    const double first = requests_.front().sent_s;
    s.duration_s = now_s_ - first;
    const auto n = static_cast<double>(completed_);
    if (s.duration_s > 0) {
      s.requests_per_s = n / s.duration_s;
      s.output_tokens_per_s = static_cast<double>(output_tokens_) / s.duration_s;
      s.goodput_requests_per_s = static_cast<double>(good_) / s.duration_s;
      s.mean_in_system = in_system_s_ / s.duration_s;
    }
    s.mean_batch_tokens = s.steps > 0 ? tokens_scheduled_ / static_cast<double>(s.steps) : 0;
    s.ttft_s = Summarize(ttft_);
    s.itl_s = Summarize(itl_);
    s.tpot_s = Summarize(tpot_);
    s.e2e_s = Summarize(e2e_);
  }

  const cost::ServeStepCost& cost_;
  const cost::ServeWorkload& w_;
  const ServeTraffic& traffic_;
  int64_t free_blocks_;
  const bool closed_;      // a closed loop of clients (no trace, no rate)
  int64_t max_input_ = 0;  // the longest prompt
  std::vector<Request> requests_;
  std::deque<int64_t> waiting_;
  std::vector<int64_t> running_;
  std::vector<Work> work_;
  int64_t next_arrival_ = 0, completed_ = 0, good_ = 0, output_tokens_ = 0;
  double now_s_ = 0, in_system_s_ = 0, tokens_scheduled_ = 0;
  double frontend_free_s_ = 0;  // the front end's last request reached the scheduler
  std::mt19937_64 lengths_{traffic_.seed + 0x9e3779b97f4a7c15ULL};  // Fixed's drawn lengths
  std::vector<double> ttft_, itl_, tpot_, e2e_;
  ServeSimResult result_;
};

}  // namespace

ServeSimResult SimulateServe(const cost::ServeStepCost& cost, const cost::ServeWorkload& w,
                             int64_t kv_blocks, const ServeTraffic& traffic) {
  return Engine(cost, w, kv_blocks, traffic).Run();
}

ServeSimResult SimulateServeTrace(const cost::ServeStepCost& cost, const cost::ServeWorkload& w,
                                  int64_t kv_blocks, const ServeTraffic& traffic, int64_t engines) {
  PM_CHECK(engines >= 1 && !traffic.trace.empty());
  if (engines == 1) return SimulateServe(cost, w, kv_blocks, traffic);
  // Round robin in arrival order: request i goes to engine i mod engines.
  std::vector<ServeTraffic> dealt(static_cast<size_t>(engines), traffic);
  for (ServeTraffic& t : dealt) t.trace.clear();
  for (size_t i = 0; i < traffic.trace.size(); ++i) {
    dealt[i % dealt.size()].trace.push_back(traffic.trace[i]);
  }
  Engine::Merged m;
  for (const ServeTraffic& t : dealt) {
    if (t.trace.empty()) continue;
    Engine engine(cost, w, kv_blocks, t);
    engine.Run();
    engine.MergeInto(m);
  }
  ServeSimResult s;
  s.kv_blocks = kv_blocks;
  if (m.failed) return s;
  s.steps = m.steps;
  s.preemptions = m.preemptions;
  s.max_running = m.max_running;
  s.duration_s = m.last_s - m.first_s;
  if (s.duration_s > 0) {
    s.requests_per_s = static_cast<double>(m.completed) / s.duration_s;
    s.output_tokens_per_s = static_cast<double>(m.output_tokens) / s.duration_s;
    s.goodput_requests_per_s = static_cast<double>(m.good) / s.duration_s;
    s.mean_in_system = m.in_system_s / s.duration_s;
  }
  s.mean_batch_tokens = s.steps > 0 ? m.tokens_scheduled / static_cast<double>(s.steps) : 0;
  s.ttft_s = Summarize(m.ttft);
  s.itl_s = Summarize(m.itl);
  s.tpot_s = Summarize(m.tpot);
  s.e2e_s = Summarize(m.e2e);
  return s;
}

ServeLoad SimulateLayout(const cost::Context& ctx, const cost::ServeLayout& layout,
                         const cost::ServeWorkload& w, const ServeTraffic& traffic) {
  ServeLoad load;
  load.groups = layout.replicas * layout.ep;
  const auto groups = static_cast<double>(load.groups);
  auto share = [&load](int64_t n) { return (n + load.groups - 1) / load.groups; };
  ServeTraffic one = traffic;
  one.rate_per_s = traffic.rate_per_s / groups;
  one.concurrency = share(traffic.concurrency);
  one.requests = share(traffic.requests);
  const cost::ServeEstimate e = cost::EstimateServe(ctx, layout, w);
  const cost::ServeStepCost step = cost::MakeServeStepCost(ctx, layout, w);
  if (!traffic.trace.empty()) {
    // The trace dealt over every engine: latencies over all its requests, throughputs of all
    // engines (shared out per engine as `group` holds them).
    load.group = SimulateServeTrace(step, w, e.kv_blocks, traffic, load.groups);
    load.requests_per_s = load.group.requests_per_s;
    load.output_tokens_per_s = load.group.output_tokens_per_s;
    load.goodput_requests_per_s = load.group.goodput_requests_per_s;
    load.group.requests_per_s /= groups;
    load.group.output_tokens_per_s /= groups;
    load.group.goodput_requests_per_s /= groups;
    load.group.mean_in_system /= groups;
    load.output_tokens_per_s_gpu = load.output_tokens_per_s / static_cast<double>(layout.gpus());
    return load;
  }
  load.group = SimulateServe(step, w, e.kv_blocks, one);
  load.requests_per_s = load.group.requests_per_s * groups;
  load.output_tokens_per_s = load.group.output_tokens_per_s * groups;
  load.output_tokens_per_s_gpu = load.output_tokens_per_s / static_cast<double>(layout.gpus());
  load.goodput_requests_per_s = load.group.goodput_requests_per_s * groups;
  return load;
}

}  // namespace pentamesh::plan
