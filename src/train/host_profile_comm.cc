// HostProfile's collectives (train/host_profile.h): timing them over a Communicator, fitting the
// cost model's forms, and launching the measurement under mpirun.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "comm/timing.h"
#include "core/check.h"
#include "core/find_on_path.h"
#include "core/numeric.h"
#include "train/host_profile.h"

extern char** environ;

namespace pentamesh::train {
namespace {

bool Selected(const CommSample& s, std::optional<cost::Collective> only) {
  return !only || s.op == *only;
}

// The form's coefficients of latency (alpha = 1 s, infinite bandwidth) and of 1 / bandwidth
// (alpha = 0, 1 byte/s): the form is linear in both, so time = alpha x_alpha + x_beta / B.
std::pair<double, double> Coefficients(const CommSample& s, int ranks) {
  const double g = static_cast<double>(ranks), n = static_cast<double>(s.bytes);
  return {cost::IntraNodeCollectiveTime(s.op, g, 1.0, std::numeric_limits<double>::infinity(), n),
          cost::IntraNodeCollectiveTime(s.op, g, 0.0, 1.0, n)};
}

// Runs argv[0] with argv (no shell) and waits: its exit status, or -1 when it could not start.
int Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

double CommFit::Predict(cost::Collective op, int ranks, double bytes) const {
  return cost::IntraNodeCollectiveTime(op, static_cast<double>(ranks), latency_us * 1e-6,
                                       bus_gbps * 1e9, bytes);
}

CommFit FitCollectives(int ranks, const std::vector<CommSample>& samples,
                       std::optional<cost::Collective> only) {
  // Minimise sum ((a xa_i + b xb_i) / y_i - 1)^2 over a = alpha, b = 1 / B: weighted linear least
  // squares with weights 1 / y_i^2 (2 x 2 normal equations).
  double saa = 0, sab = 0, sbb = 0, say = 0, sby = 0;
  for (const CommSample& s : samples) {
    if (!Selected(s, only) || !(s.seconds > 0)) continue;
    const auto [xa, xb] = Coefficients(s, ranks);
    const double w = 1.0 / (s.seconds * s.seconds);
    saa += w * xa * xa, sab += w * xa * xb, sbb += w * xb * xb;
    say += w * xa * s.seconds, sby += w * xb * s.seconds;
  }
  PM_CHECK(sbb > 0) << "FitCollectives: no samples to fit";
  const double det = saa * sbb - sab * sab;
  double a = 0, b = sby / sbb;  // latency pinned at 0: bandwidth alone
  if (det > 0) {
    const double a_free = (sbb * say - sab * sby) / det;
    const double b_free = (saa * sby - sab * say) / det;
    if (a_free >= 0 && b_free > 0) a = a_free, b = b_free;
  }
  // Times that do not grow with size (b <= 0) leave the bandwidth unmeasurable: call it 1 PB/s.
  b = std::max(b, 1e-15);
  return {.latency_us = a * 1e6, .bus_gbps = 1.0 / b / 1e9};
}

FitResiduals Residuals(const CommFit& fit, int ranks, const std::vector<CommSample>& samples,
                       std::optional<cost::Collective> only) {
  std::vector<double> rel, abs;
  for (const CommSample& s : samples) {
    if (!Selected(s, only)) continue;
    const double e =
        (fit.Predict(s.op, ranks, static_cast<double>(s.bytes)) - s.seconds) / s.seconds;
    rel.push_back(e);
    abs.push_back(std::fabs(e));
  }
  FitResiduals r;
  r.samples = static_cast<int>(rel.size());
  r.median = Median(rel);
  r.median_abs = Median(abs);
  r.max_abs = abs.empty() ? 0.0 : *std::max_element(abs.begin(), abs.end());
  return r;
}

std::vector<CommSample> MeasureCollectives(comm::Communicator& group, const CommOptions& o) {
  const int64_t g = group.size();
  const int next = static_cast<int>((group.rank() + 1) % g);
  const int prev = static_cast<int>((group.rank() + g - 1) % g);
  std::vector<float> send(static_cast<size_t>(o.max_bytes / 4), 1.0f), recv(send.size());
  const comm::TimingOptions timing{.repetitions = o.repetitions};
  const auto f32 = core::Dtype::kF32;
  std::vector<CommSample> out;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 4) {
    const int64_t count = bytes / 4;     // a whole buffer (all-reduce, p2p)
    const int64_t per_rank = count / g;  // a rank's part (AG input, RS output, A2A slice)
    const std::vector<int64_t> split(static_cast<size_t>(g), per_rank);
    for (cost::Collective op : cost::kCollectives) {
      std::function<void()> fn;
      int64_t n = count;  // elements the model's n counts
      switch (op) {
        case cost::Collective::kP2p:
          fn = [&] { group.send_recv(recv.data(), count, prev, send.data(), count, next, f32); };
          break;
        case cost::Collective::kAllReduce:
          fn = [&] { group.all_reduce(send.data(), count, f32); };
          break;
        case cost::Collective::kAllGather:
          fn = [&] { group.all_gather(recv.data(), send.data(), per_rank, f32); };
          n = per_rank * g;
          break;
        case cost::Collective::kReduceScatter:
          fn = [&] { group.reduce_scatter(recv.data(), send.data(), per_rank, f32); };
          n = per_rank * g;
          break;
        case cost::Collective::kAllToAll:
          fn = [&] { group.all_to_all_v(recv.data(), split, send.data(), split, f32); };
          n = per_rank * g;
          break;
      }
      out.push_back({op, n * 4, comm::MedianSecondsPerCall(group, fn, timing)});
    }
  }
  // Every rank reports rank 0's medians (the group's collective time is the slowest rank's).
  std::vector<double> seconds;
  for (const CommSample& s : out) seconds.push_back(s.seconds);
  group.broadcast(seconds.data(), static_cast<int64_t>(seconds.size() * sizeof(double)),
                  core::Dtype::kU8, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i].seconds = seconds[i];
  return out;
}

core::Result<std::string> FindMpirun() {
  std::string mpirun = core::FindOnPath("mpirun");
  if (mpirun.empty()) {
    return core::Status::Error(
        "--np: mpirun is not on PATH (install Open MPI, or put its bin directory on PATH)");
  }
  return mpirun;
}

core::Result<CommProfile> MeasureCommAtRanks(int ranks, const std::string& mpirun,
                                             const std::string& exe,
                                             const std::vector<std::string>& worker_args) {
  namespace fs = std::filesystem;
  const fs::path file =
      fs::temp_directory_path() / fmt::format("pentamesh-comm-{}-{}.toml", getpid(), ranks);
  std::vector<std::string> args = {mpirun,  "-np", std::to_string(ranks), "--oversubscribe",
                                   "--mca", "btl", "self,vader",          exe};
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  args.push_back(file.string());
  const int status = Spawn(args);
  if (status != 0) {
    std::error_code ec;
    fs::remove(file, ec);
    return core::Status::Error(
        fmt::format("--np {}: `{}` {}", ranks, fmt::join(args, " "),
                    status < 0 ? "could not start" : fmt::format("exited with {}", status)));
  }
  auto loaded = LoadCommProfiles(file.string());
  std::error_code ec;
  fs::remove(file, ec);
  if (!loaded.ok()) return loaded.status();
  if (loaded->size() != 1 || loaded->front().ranks != ranks) {
    return core::Status::Error(
        fmt::format("--np {}: the measurement wrote no [[comm]] entry for {} ranks", ranks, ranks));
  }
  return loaded->front();
}

}  // namespace pentamesh::train
