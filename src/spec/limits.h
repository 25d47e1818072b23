// The one set of rules for numbers a user gives pentamesh, on the command line (cli/flags.h wraps
// them as CLI11 validators) and in its TOML files (spec/load_toml.cc, train/run_config.cc; not the
// engine files import-config reads, which launch/ parses itself): a number must parse completely,
// be finite, lie in its range, and be whole where the field is integral; products of counts are
// formed with core/numeric.h's CheckedProduct and held to the documented limits below, so no
// enumeration or product downstream (plan::Divisors, layout degrees, nodes x GPUs per node) can
// overflow or run unbounded. Every error names the field and the reason. README ("Input rules
// and limits") lists these values.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/status.h"

namespace pentamesh::spec {

// Documented limits (README, "Input rules and limits"). File sizes: core/input.h.
inline constexpr int64_t kMaxGpus = int64_t{1} << 20;  // GPUs in one cluster or layout: 1,048,576
inline constexpr int64_t kMaxField = std::numeric_limits<int32_t>::max();  // any integral field
inline constexpr int64_t kMaxBatchTokens = int64_t{1} << 40;  // train.global_batch_tokens
inline constexpr double kMaxMoeImbalance = 1024;              // --moe-imbalance

// `value` within [min_value, max_value]; the error reads "<field>: must be >= 1 (got 0)" (the
// reason alone when `field` is empty, as for CLI11 validators, which prefix the flag themselves).
core::Status CheckInt(std::string_view field, int64_t value, int64_t min_value,
                      int64_t max_value = kMaxField);
// Finite and within [min_value, max_value] (strictly above min_value when `strictly_above`).
core::Status CheckNumber(std::string_view field, double value, double min_value,
                         double max_value = std::numeric_limits<double>::max(),
                         bool strictly_above = false);

// Whole-text parses (no trailing characters; "1e6" is an integer, "1.5" is not), then the checks
// above. Used for command-line values.
core::Result<int64_t> ParseInt(std::string_view field, std::string_view text, int64_t min_value,
                               int64_t max_value = kMaxField);
core::Result<double> ParseNumber(std::string_view field, std::string_view text, double min_value,
                                 double max_value = std::numeric_limits<double>::max(),
                                 bool strictly_above = false);

// A GPU count formed as a product (nodes x gpus_per_node, dp x tp x pp x cp x ep): the product
// computed without overflow and at most kMaxGpus. `what` names the product in the error.
core::Result<int64_t> GpuProduct(std::string_view what, std::initializer_list<int64_t> factors);

}  // namespace pentamesh::spec
