// TrainSpec: what is trained on the cluster: sequence, batch, precision, how long, at what price.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace pentamesh::spec {

enum class Precision { kBf16, kFp8, kFp32 };
enum class Optimizer { kAdamW };

// The one name table of Precision: the words TOML files and output use.
inline constexpr std::pair<Precision, std::string_view> kPrecisionNames[] = {
    {Precision::kBf16, "bf16"}, {Precision::kFp8, "fp8"}, {Precision::kFp32, "fp32"}};
inline const char* PrecisionName(Precision p) {
  for (const auto& [value, name] : kPrecisionNames) {
    if (value == p) return name.data();
  }
  return "?";
}
inline std::optional<Precision> PrecisionFromName(std::string_view name) {
  for (const auto& [value, word] : kPrecisionNames) {
    if (word == name) return value;
  }
  return std::nullopt;
}

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
