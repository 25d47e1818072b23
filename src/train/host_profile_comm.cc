// HostProfile's collectives (train/host_profile.h): timing them over a Communicator, fitting the
// cost model's forms, and launching the measurement under mpirun.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "comm/timing.h"
#include "core/check.h"
#include "core/numeric.h"
#include "core/subprocess.h"
#include "train/host_profile.h"

namespace pentamesh::train {
namespace {

bool Selected(const CommSample& s, std::optional<cost::Collective> only) {
  return !only || s.op == *only;
}

// The unknowns of the fit: latency alpha (s), 1 / bandwidth and 1 / reduction rate (s/byte).
constexpr int kUnknowns = 3;
using Vec3 = std::array<double, kUnknowns>;

// The form's coefficient of each unknown: alpha = 1 s with infinite rates; 1 byte/s with no
// latency and the other rate infinite (a reduction rate of 0 is free). The form is linear in all
// three, so time = alpha x[0] + x[1] / B + x[2] / B_reduce.
Vec3 Coefficients(const CommSample& s, int ranks) {
  const double g = static_cast<double>(ranks), n = static_cast<double>(s.bytes);
  const double inf = std::numeric_limits<double>::infinity();
  return {cost::IntraNodeCollectiveTime(s.op, g, 1.0, inf, n),
          cost::IntraNodeCollectiveTime(s.op, g, 0.0, 1.0, n),
          cost::IntraNodeCollectiveTime(s.op, g, 0.0, inf, n, 1.0)};
}

// One sample of the fit: its coefficients and measured seconds.
struct Row {
  Vec3 x;
  double y = 0;
};

// Sum of squared relative errors of theta on rows: what the fit minimises.
double Objective(const std::vector<Row>& rows, const Vec3& theta) {
  double sum = 0;
  for (const Row& r : rows) {
    const double e = (r.x[0] * theta[0] + r.x[1] * theta[1] + r.x[2] * theta[2]) / r.y - 1.0;
    sum += e * e;
  }
  return sum;
}

// Least squares on the relative error with only the unknowns in `free` (the others 0): rows x / y
// against 1, columns scaled to unit norm, solved by Eigen's column-pivoting QR. Empty when the
// subset's columns are rank-deficient (an unknown the rows do not determine, or two that only
// move together).
std::optional<Vec3> SolveSubset(const std::vector<Row>& rows,
                                const std::array<bool, kUnknowns>& free) {
  std::vector<int> idx;
  for (int i = 0; i < kUnknowns; ++i) {
    if (free[static_cast<size_t>(i)]) idx.push_back(i);
  }
  const auto n = static_cast<Eigen::Index>(rows.size()), k = static_cast<Eigen::Index>(idx.size());
  Eigen::MatrixXd a(n, k);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Row& r = rows[static_cast<size_t>(i)];
    for (Eigen::Index j = 0; j < k; ++j) a(i, j) = r.x[static_cast<size_t>(idx[j])] / r.y;
  }
  const Eigen::VectorXd norms = a.colwise().norm();
  if (!(norms.array() > 0).all()) return std::nullopt;
  a *= norms.cwiseInverse().asDiagonal();
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
  qr.setThreshold(1e-9);  // unit columns: relative
  if (qr.rank() < k) return std::nullopt;
  const Eigen::VectorXd theta = qr.solve(Eigen::VectorXd::Ones(n)).cwiseQuotient(norms);
  Vec3 out{};
  for (Eigen::Index j = 0; j < k; ++j) out[static_cast<size_t>(idx[j])] = theta(j);
  return out;
}

}  // namespace

double CommFit::Predict(cost::Collective op, int ranks, double bytes) const {
  return cost::IntraNodeCollectiveTime(op, static_cast<double>(ranks), latency_us * 1e-6,
                                       bus_gbps * 1e9, bytes, reduce_gbps * 1e9);
}

CommFit FitCollectives(int ranks, const std::vector<CommSample>& samples,
                       std::optional<cost::Collective> only) {
  // Minimise sum ((a xa_i + b xb_i + c xc_i) / y_i - 1)^2 over a = alpha, b = 1 / B,
  // c = 1 / B_reduce: weighted linear least squares with weights 1 / y_i^2. The bandwidth is
  // always fitted; a and c may be pinned at 0: of the subsets {b}, {a,b}, {b,c}, {a,b,c} whose
  // solution has b > 0 and a, c >= 0, the one with the least error (the constrained optimum).
  std::vector<Row> rows;
  for (const CommSample& s : samples) {
    if (Selected(s, only) && s.seconds > 0) rows.push_back({Coefficients(s, ranks), s.seconds});
  }
  PM_CHECK(!rows.empty()) << "FitCollectives: no samples to fit";
  Vec3 best{0, 1e-15, 0};  // times that do not grow with size: bandwidth unmeasurable, 1 PB/s
  double best_error = std::numeric_limits<double>::infinity();
  using Support = std::array<bool, kUnknowns>;
  constexpr std::array<Support, 4> kSupports = {
      {{false, true, false}, {true, true, false}, {false, true, true}, {true, true, true}}};
  for (const Support& free : kSupports) {
    const std::optional<Vec3> theta = SolveSubset(rows, free);
    if (!theta || (*theta)[0] < 0 || !((*theta)[1] > 0) || (*theta)[2] < 0) continue;
    const double error = Objective(rows, *theta);
    if (error < best_error) best = *theta, best_error = error;
  }
  // A reduction faster than 1 PB/s (a rounding residue of c = 0) is free.
  const double c = best[2] > 1e-15 ? best[2] : 0.0;
  return {.latency_us = best[0] * 1e6,
          .bus_gbps = 1.0 / best[1] / 1e9,
          .reduce_gbps = c > 0 ? 1.0 / c / 1e9 : 0.0};
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

core::Result<std::string> FindMpirun() { return core::FindLauncher("mpirun", "--np"); }

core::Result<CommProfile> MeasureCommAtRanks(int ranks, const std::string& mpirun,
                                             const std::string& exe,
                                             const std::vector<std::string>& worker_args) {
  namespace fs = std::filesystem;
  const fs::path file =
      fs::temp_directory_path() / fmt::format("pentamesh-comm-{}-{}.toml", getpid(), ranks);
  std::vector<std::string> args = core::MpirunArgs(mpirun, ranks);
  args.push_back(exe);
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  args.push_back(file.string());
  const core::Status run = core::RunProcess(args);
  if (!run.ok()) {
    std::error_code ec;
    fs::remove(file, ec);
    return core::Status::Error(
        fmt::format("--np {}: `{}`: {}", ranks, fmt::join(args, " "), run.message()));
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
