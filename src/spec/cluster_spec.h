// ClusterSpec: the GPU and the network. Units are in the field names: GB = 1e9 bytes,
// GB/s = 1e9 bytes per second per direction, TFLOP/s = 1e12 dense (not sparse) FLOP/s.
#pragma once

#include <cstdint>
#include <string>

namespace pentamesh::spec {

struct ClusterSpec {
  std::string name;
  std::string gpu;             // e.g. "H100 SXM"
  double peak_tflops = 0;      // dense BF16 peak per GPU (H100 SXM: 989)
  double peak_fp8_tflops = 0;  // dense FP8 peak per GPU; 0 = unsupported
  double peak_fp4_tflops = 0;  // dense FP4 (NVFP4) peak per GPU; 0 = unsupported (serving only)
  double hbm_gb = 0;           // HBM capacity per GPU
  double hbm_gbps = 0;         // HBM bandwidth per GPU
  int64_t gpus_per_node = 0;
  int64_t nodes = 0;
  double intra_node_gbps = 0;  // NVLink, per GPU, per direction
  double intra_node_latency_us = 0;
  // Rate at which an intra-node all-reduce or reduce-scatter sums its (g-1)/g n bytes, charged on
  // top of the transfer; 0 = free (a GPU's reduction kernels keep up with the link). A CPU host
  // summing in shared memory has one (train/host_profile.h measures it).
  double intra_node_reduce_gbps = 0;
  int64_t nics_per_node = 0;
  double inter_node_gbps = 0;  // per NIC, per direction (400 Gb/s InfiniBand = 50 GB/s)
  double inter_node_latency_us = 0;
  // Fraction of the dense peak that large GEMMs sustain in training (clocks under the power cap,
  // kernel quality); 0 = the cost model's default. Calibrated per GPU in docs/COST_MODEL.md.
  double gemm_efficiency = 0;
  // FP8 GEMM rate / BF16 GEMM rate achieved in training; 0 = peak_fp8_tflops / peak_tflops.
  // Calibrated per GPU (docs/COST_MODEL.md).
  double fp8_gemm_speedup = 0;
  // The GPU's flash-attention rate relative to its GEMMs, as a factor on the software stack's
  // (cost::CostParams::attention_relative): attention kernels reach a different share of each
  // GPU's peak than its GEMMs do (FlashAttention-2: about 70% of an A100's, 35% of an H100's;
  // Shah et al. 2024, FlashAttention-3, arXiv:2407.08608). 0 = 1. Calibrated per GPU; training's
  // attention only (serving's engine profiles carry their own attention efficiency).
  double attention_factor = 0;
  // Device memory the driver exposes, GB (1e9 bytes): nvidia-smi's "Memory-Usage" total, which is
  // what an engine's memory fraction multiplies (vLLM's gpu_memory_utilization x total). An H100
  // 80GB reports 81,559 MiB = 85.52 GB, not 80. 0 = hbm_gb. Serving (cost/inference.h) reads it;
  // the training model keeps hbm_gb minus its safety margin.
  double hbm_usable_gb = 0;
  double usable_hbm_bytes() const { return (hbm_usable_gb > 0 ? hbm_usable_gb : hbm_gb) * 1e9; }

  int64_t gpus() const { return gpus_per_node * nodes; }
};

}  // namespace pentamesh::spec
