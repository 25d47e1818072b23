// The precision policy of training: bytes per parameter of each copy of the model state, by the
// run's precision and the stack's gradient flag. Memory (weights, grads, optimizer), the DP/ZeRO
// byte counts and the optimizer step's traffic all read it; no other file states these bytes.
//
// Invariant: kPrecisionPolicy holds one row per (precision, fp32_main_grads); PrecisionPolicyOf
// finds it. FP16 with loss scaling costs the bytes of BF16 (the loss scale is one scalar).
#pragma once

#include "spec/train_spec.h"

namespace pentamesh::cost {

// Bytes per parameter of the model state under one policy.
struct StateBytes {
  double weight = 2;       // the copy forward and backward read (fp16/bf16; fp32)
  double grad = 2;         // the gradient accumulation buffer (Megatron's main_grad)
  double grad_reduce = 2;  // one gradient element on the DP wire (all-reduce / reduce-scatter)
  double master = 4;       // fp32 master weights (none when the weights are fp32)
  double moments = 8;      // Adam m and v, fp32
  // Without ZeRO: 16 (bf16, Rajbhandari et al. 2020), 18 (fp32 main grads), 16 (fp32).
  double total() const { return weight + grad + master + moments; }
};

struct PrecisionRow {
  spec::Precision precision;
  // Gradients accumulated and reduced in fp32: Megatron-LM's
  // --accumulate-allreduce-grads-in-fp32 (the 2021-22 papers' runs, Llama 3), the CPU engine.
  bool fp32_main_grads;
  StateBytes bytes;
  const char* source;
};

inline constexpr PrecisionRow kPrecisionPolicy[] = {
    {spec::Precision::kBf16,
     false,
     {2, 2, 2, 4, 8},
     "bf16 (or fp16) weights and grads, fp32 master and Adam m, v: 16 B (ZeRO, Rajbhandari 2020)"},
    {spec::Precision::kBf16,
     true,
     {2, 4, 4, 4, 8},
     "fp32 main grads accumulated and all-reduced (Megatron --accumulate-allreduce-grads-in-fp32): "
     "18 B (Korthikanti 2022 Fig. 1)"},
    // FP8 GEMMs cast their bf16 inputs per GEMM (cost/terms.cc): the stored state is bf16's.
    {spec::Precision::kFp8, false, {2, 2, 2, 4, 8}, "FP8 GEMMs over bf16 weights: as bf16"},
    {spec::Precision::kFp8, true, {2, 4, 4, 4, 8}, "FP8 GEMMs, fp32 main grads: as bf16's"},
    {spec::Precision::kFp32, false, {4, 4, 4, 0, 8}, "fp32 weights and grads, no master copy"},
    {spec::Precision::kFp32, true, {4, 4, 4, 0, 8}, "fp32: the grads are fp32 already"},
};

// The row of (precision, fp32_main_grads).
constexpr const StateBytes& PrecisionPolicyOf(spec::Precision precision, bool fp32_main_grads) {
  for (const PrecisionRow& r : kPrecisionPolicy) {
    if (r.precision == precision && r.fp32_main_grads == fp32_main_grads) return r.bytes;
  }
  return kPrecisionPolicy[0].bytes;  // unreachable: the table covers every pair
}

}  // namespace pentamesh::cost
