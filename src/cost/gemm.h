// The cost model's GEMM form, written once: the compute time of an (M x K) @ (K x N) product at a
// large GEMM's rate, stretched by a per-dimension overhead d (tiles and waves left partly idle):
//
//   time = 2 M N K / rate * (1 + d (1/M + 1/N + 1/K))
//
// cost/terms.cc (GemmTime: this, or the operands' HBM traffic when that is longer) predicts with
// it; train/host_profile.cc fits rate and d to the engine's own timed sgemm (FitGemmForm, linear in
// time / (2MNK) = 1 / rate + d / rate * GemmInverseDims) and predicts with it (GemmForm::Predict).
#pragma once

namespace pentamesh::cost {

// FLOPs of one forward GEMM: 2 M N K.
inline double GemmFlops(double m, double n, double k) { return 2.0 * m * n * k; }

// 1/M + 1/N + 1/K: the dimensions' share of the overhead.
inline double GemmInverseDims(double m, double n, double k) { return 1.0 / m + 1.0 / n + 1.0 / k; }

// Seconds of the GEMM's compute at `flops_per_s` (a large GEMM's rate) with `dim_overhead` d
// (elements per dimension). REQUIRES: m, n, k > 0.
inline double GemmComputeSeconds(double m, double n, double k, double flops_per_s,
                                 double dim_overhead) {
  return GemmFlops(m, n, k) / flops_per_s * (1.0 + dim_overhead * GemmInverseDims(m, n, k));
}

// Weight-only quantized GEMM kernels (Marlin and its successors: vLLM's and SGLang's AWQ / GPTQ
// paths) tile the M rows (tokens) by 16, the tensor core MMA's m16, so a decode step's few rows
// pay 16 rows of overhead where a BF16 GEMM's 128-wide tile pays 128.
inline constexpr double kWeightOnlyRowTile = 16;

// The same with the M dimension's own overhead `row_overhead`.
inline double GemmComputeSeconds(double m, double n, double k, double flops_per_s,
                                 double dim_overhead, double row_overhead) {
  return GemmFlops(m, n, k) / flops_per_s *
         (1.0 + row_overhead / m + dim_overhead * (1.0 / n + 1.0 / k));
}

}  // namespace pentamesh::cost
