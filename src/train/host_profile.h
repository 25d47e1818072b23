// HostProfile: this machine measured as the cost model's "GPU": the engine's own sgemm
// (kernels::matmul over OpenBLAS) timed on a set of shapes and fitted to the cost model's GEMM form
// (cost::CostParams: time = 2MNK / rate * (1 + d (1/M + 1/N + 1/K))), and the streaming bandwidth
// of a triad over arrays far larger than the caches. `pentamesh calibrate --host` writes it;
// `run.host_profile` in a run config makes train::HostCluster and EngineCostParams use it.
// Every timing is the median of several repetitions.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace pentamesh::train {

struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0;  // median of the repetitions
  double gflops() const { return seconds > 0 ? 2.0 * m * n * k / seconds / 1e9 : 0.0; }
};

struct HostProfile {
  int threads = 0;               // BLAS / triad threads the measurement used
  double peak_gflops = 0;        // fitted rate of a large GEMM (the GEMM form's 1 / a)
  double gemm_dim_overhead = 0;  // fitted d (elements per dimension)
  double mem_gbps = 0;           // triad bandwidth, STREAM's byte count (3 x 4 bytes an element)
  // The engine's own single-threaded kernels: its flash attention (forward + backward, in the
  // cost model's causal FLOP count: 3.5 x 2 T S h_attn) and a one-thread triad.
  double attention_gflops = 0;
  double stream_1t_gbps = 0;
  std::vector<GemmSample> gemms;
  // The fitted form's time for one sample (for the fit's residuals).
  double Predict(const GemmSample& s) const;
};

// Runs the measurement with `threads` BLAS and triad threads (0 = all hardware threads) and the
// engine's single-threaded attention and a one-thread triad;
// `repetitions` >= 1 per shape. Takes a few seconds.
HostProfile MeasureHost(int threads, int repetitions = 5);

// Fits peak_gflops and gemm_dim_overhead to `gemms` by least squares on the relative error of
// time / (2MNK) = a + b (1/M + 1/N + 1/K): peak = 1 / a, d = b / a. REQUIRES: >= 2 samples with
// distinct dimension sums.
void FitGemmForm(HostProfile& p);

std::string HostProfileToml(const HostProfile& p);
// Errors name the file and the field.
core::Result<HostProfile> LoadHostProfile(const std::string& path);

}  // namespace pentamesh::train
