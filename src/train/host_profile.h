// HostProfile: this machine measured as the cost model's "GPU" and intra-node link.
//  - GEMM: the engine's own sgemm (kernels::matmul over OpenBLAS) timed on a set of shapes at
//    `threads` BLAS threads and at one thread, each fitted to the cost model's GEMM form
//    (cost/gemm.h: time = 2MNK / rate * (1 + d (1/M + 1/N + 1/K)), the one cost/terms.cc uses).
//  - Memory: a triad's bandwidth over arrays far larger than the caches, all threads and one.
//  - Attention: the engine's single-threaded flash attention, forward + backward.
//  - Collectives (`[[comm]]`, one entry per rank count N): Open MPI's p2p, all-reduce,
//    all-gather, reduce-scatter and all-to-all through the engine's own comm::MpiCommunicator at N
//    ranks on this host (shared memory), fitted jointly to the cost model's collective forms
//    (cost/collective_time.h) as one latency, one bandwidth and one reduction rate (the CPU's
//    sum in all-reduce and reduce-scatter), the three numbers the model's intra-node link has.
//    MeasureCollectives runs inside `mpirun -np N`; MeasureCommAtRanks launches that mpirun from
//    the calling process.
// `pentamesh calibrate --host [--np N]` writes it; `run.host_profile` in a run config makes
// train::HostCluster and EngineCostParams use it. Every timing is the median of repetitions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"
#include "cost/collective_time.h"
#include "cost/gemm.h"

namespace pentamesh::train {

struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0;  // median of the repetitions
  double flops() const {
    return cost::GemmFlops(static_cast<double>(m), static_cast<double>(n), static_cast<double>(k));
  }
  double gflops() const { return seconds > 0 ? flops() / seconds / 1e9 : 0.0; }
};

// The GEMM form's two parameters at one thread count.
struct GemmForm {
  double gflops = 0;                          // rate of a large GEMM (the form's 1 / a)
  double dim_overhead = 0;                    // d (elements per dimension)
  double Predict(const GemmSample& s) const;  // seconds
};

// One collective timed at `ranks` ranks; bytes in the cost model's convention
// (cost::IntraNodeCollectiveTime: full tensor for AG/RS/AR, local buffer for all-to-all, message
// for p2p).
struct CommSample {
  cost::Collective op = cost::Collective::kAllReduce;
  int64_t bytes = 0;
  double seconds = 0;  // median of the repetitions
};

// The cost model's intra-node link: latency per message, bus bandwidth and the rate at which
// all-reduce and reduce-scatter sum their (g-1)/g n bytes (0 = free).
struct CommFit {
  double latency_us = 0;
  double bus_gbps = 0;
  double reduce_gbps = 0;
  double Predict(cost::Collective op, int ranks, double bytes) const;  // seconds
};

// How well a fit describes samples: relative errors (predicted - measured) / measured.
struct FitResiduals {
  int samples = 0;
  double median_abs = 0, max_abs = 0;
  double median = 0;  // signed: a systematic bias shows here
};

// Collectives at one rank count: the joint fit over every sample.
struct CommProfile {
  int ranks = 0;
  CommFit fit;
  std::vector<CommSample> samples;
};

// A measured rate (GFLOP/s, GB/s) of a host, in a profile or as run.peak_gflops / run.mem_gbps:
// within [kMinRate, kMaxRate]. The cost model divides by rates; a subnormal one (4e-320) made
// that quotient inf and the predicted step time NaN (host_fuzz).
inline constexpr double kMinRate = 1e-6, kMaxRate = 1e12;

struct HostProfile {
  int threads = 0;  // BLAS / triad threads of the all-threads measurement
  int cores = 0;    // hardware threads of the host (a rank's share of the cores is cores / ranks)
  double peak_gflops = 0;        // the GEMM form at `threads` threads: its large-GEMM rate...
  double gemm_dim_overhead = 0;  // ...and its d
  double peak_gflops_1t = 0;     // the GEMM form at one thread
  double gemm_dim_overhead_1t = 0;
  double mem_gbps = 0;  // triad bandwidth, STREAM's byte count (3 x 4 bytes an element)
  // The engine's own single-threaded kernels: its flash attention (forward + backward, in the
  // cost model's causal FLOP count: 3.5 x 2 T S h_attn) and a one-thread triad.
  double attention_gflops = 0;
  double stream_1t_gbps = 0;
  // The engine's one-row matmul (kernels::matmul with M = 1, sgemv: a decode step) streaming
  // 512 MiB of fp32 weights: bytes of the weights per second at `threads` threads and at one.
  // 0 in a profile written before they were measured (WeightReadGbps falls back to the triad).
  double gemv_gbps = 0, gemv_1t_gbps = 0;
  std::vector<GemmSample> gemms;     // at `threads` threads
  std::vector<GemmSample> gemms_1t;  // at one thread (empty when threads == 1: the same)
  std::vector<CommProfile> comm;     // ascending ranks, at most one entry per rank count

  GemmForm Form() const { return {peak_gflops, gemm_dim_overhead}; }
  GemmForm Form1t() const { return {peak_gflops_1t, gemm_dim_overhead_1t}; }
  // The GEMM form of a rank whose BLAS runs on `cores` cores (fractional when ranks share a
  // core): the one-thread form scaled by `cores` below one, linear between the one-thread and the
  // all-threads forms up to `threads`, the all-threads form beyond.
  GemmForm FormAt(double cores) const;
  // GB/s at which a rank whose BLAS runs on `rank_cores` cores, one of `ranks_on_host` ranks on
  // the host, streams weights: the one-thread rate times its cores, at most its share of the
  // all-threads rate (the gemv rates; the triad's when the profile has none).
  double WeightReadGbps(double rank_cores, double ranks_on_host) const;
  // The [[comm]] entry measured at `ranks` ranks, or null.
  const CommProfile* CommFor(int ranks) const;
};

// Runs the measurement with `threads` BLAS and triad threads (0 = all hardware threads), then the
// GEMM shapes again at one thread, the engine's single-threaded attention and a one-thread triad;
// `repetitions` >= 1 per shape. Takes a few seconds.
HostProfile MeasureHost(int threads, int repetitions = 5);

// Fits the GEMM form to `gemms` by least squares on the relative error of
// time / (2MNK) = a + b (1/M + 1/N + 1/K): rate = 1 / a, d = b / a. REQUIRES: >= 2 samples with
// distinct dimension sums.
GemmForm FitGemmForm(const std::vector<GemmSample>& gemms);

// Fits latency, bandwidth and reduction rate to `samples` at `ranks` ranks (those of `only`, if
// given) by least squares on the relative error; the forms are linear in latency, 1 / bandwidth
// and 1 / reduction rate, so the fit is closed-form (3 x 3 normal equations). A latency or
// reduction term below 0 is pinned at 0 and the rest refitted; a reduction rate the samples do
// not determine (no reductions among them, or above 1 PB/s) is 0 = free. REQUIRES: samples of
// `only` exist.
CommFit FitCollectives(int ranks, const std::vector<CommSample>& samples,
                       std::optional<cost::Collective> only = std::nullopt);
FitResiduals Residuals(const CommFit& fit, int ranks, const std::vector<CommSample>& samples,
                       std::optional<cost::Collective> only = std::nullopt);

struct CommOptions {
  int64_t min_bytes = 4 << 10;   // sizes min_bytes, 4 x min_bytes, ... up to max_bytes
  int64_t max_bytes = 16 << 20;  // (rounded down to whole f32 elements per rank)
  int repetitions = 5;
};
// Largest rank count `calibrate --host --np` measures (a host's ranks; the time grows with N).
inline constexpr int kMaxCommRanks = 32;

// Every collective of cost::kCollectives at every size over `group` (every member calls it; p2p
// is a ring shift, every rank sending to the next while receiving from the previous, as the cp
// ring does). Returns the same samples on every rank (rank 0's clock decides the batch size).
std::vector<CommSample> MeasureCollectives(comm::Communicator& group, const CommOptions& options);

// The mpirun on PATH; an error naming --np when there is none.
core::Result<std::string> FindMpirun();

// Launches `<mpirun> -np ranks --oversubscribe --mca btl self,vader <exe> <worker_args...> FILE`
// and reads the [[comm]] entry the worker's rank 0 wrote to FILE (a temporary file). Errors: the
// launch failing, a missing or malformed result.
core::Result<CommProfile> MeasureCommAtRanks(int ranks, const std::string& mpirun,
                                             const std::string& exe,
                                             const std::vector<std::string>& worker_args);

std::string HostProfileToml(const HostProfile& p);
std::string CommProfileToml(const CommProfile& c);  // one [[comm]] entry with its samples
// Errors name the file and the field (comm[i].ranks, comm[i].sample[j].op, ...).
core::Result<HostProfile> LoadHostProfile(const std::string& path);
// The [[comm]] entries of a file (what a MeasureCollectives worker writes).
core::Result<std::vector<CommProfile>> LoadCommProfiles(const std::string& path);

}  // namespace pentamesh::train
