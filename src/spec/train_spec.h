// TrainSpec: what is trained on the cluster: sequence, batch, precision, how long, at what price.
#pragma once

#include <cstdint>
#include <string>

namespace pentamesh::spec {

enum class Precision { kBf16, kFp8, kFp32 };
enum class Optimizer { kAdamW };

struct TrainSpec {
  std::string name;
  int64_t seq_len = 0;
  int64_t global_batch_tokens = 0;  // tokens per optimizer step; a multiple of seq_len
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdamW;
  double total_tokens = 0;  // tokens of the whole run (for days and cost)
  double usd_per_gpu_hour = 0;

  int64_t global_batch_seqs() const { return seq_len > 0 ? global_batch_tokens / seq_len : 0; }
};

}  // namespace pentamesh::spec
