// The reader of typed TOML fields: spec files, presets, recipes, the engine's run config, and the
// stack and host profiles (calib/profile.cc, train/host_profile.cc). import-config reads engines'
// TOML with the engines' own rules instead (launch/torchtitan.cc). Every field error is collected
// with its dotted name ("model.hidden: must be an integer"), numbers follow the shared input
// rules (spec/limits.h: finite, in range, whole where integral; integers written as 1e6 are
// accepted when exact), and keys no reader asked for are "unknown key (known: ...)" errors.
#pragma once

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/numeric.h"
#include "core/status.h"
#include "spec/limits.h"
#include "spec/train_spec.h"

namespace pentamesh::spec {

// Reads typed fields from one TOML table, collecting every error with its dotted field name.
class FieldReader {
 public:
  // The table `name` of `root` (absent: every field keeps its default; not a table: an error).
  static FieldReader Table(const toml::table& root, const char* name,
                           std::vector<std::string>* errors) {
    const toml::node* node = root.get(name);
    if (node && !node->is_table()) errors->push_back(fmt::format("{}: must be a table", name));
    return FieldReader(node ? node->as_table() : nullptr, name, errors);
  }
  FieldReader(const toml::table* table, std::string prefix, std::vector<std::string>* errors)
      : table_(table), prefix_(std::move(prefix)), errors_(errors) {}

  // Integers are bounded (default 2^31 - 1) so that the products the cost model and the loader
  // form from them (batch_seqs x seq_len, heads x head_dim, ...) cannot overflow int64_t.
  void Int(const char* key, int64_t& out, bool required, int64_t min_value = 1,
           int64_t max_value = std::numeric_limits<int32_t>::max()) {
    Seen(key);
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    if (!node) {
      if (required) Error(key, "missing (required)");
      return;
    }
    std::optional<int64_t> v = node->value_exact<int64_t>();
    if (!v) {
      // Accept floats that are whole numbers written as 1e6 etc.; inf and nan break the shared
      // finiteness rule first.
      if (std::optional<double> d = node->value_exact<double>()) {
        if (!Keep(CheckNumber(Name(key), *d, std::numeric_limits<double>::lowest()))) return;
        v = ExactInt64(*d);
      }
    }
    if (!v) return Error(key, "must be an integer");
    if (!Keep(CheckInt(Name(key), *v, min_value, max_value))) return;
    out = *v;
  }

  // Any other integral type: read as above, bounded by max_value and the type's own range.
  template <std::integral T>
  requires(!std::same_as<T, int64_t>) void Int(
      const char* key, T& out, bool required, int64_t min_value = 1,
      int64_t max_value = std::numeric_limits<int32_t>::max()) {
    int64_t v = 0;
    const size_t before = errors_->size();
    const int64_t bound = std::cmp_less(std::numeric_limits<T>::max(), max_value)
                              ? static_cast<int64_t>(std::numeric_limits<T>::max())
                              : max_value;
    const bool present = table_ && table_->get(key);
    Int(key, v, required, min_value, bound);
    if (present && errors_->size() == before) out = static_cast<T>(v);
  }

  void Double(const char* key, double& out, bool required, double min_value = 0,
              bool strictly_positive = true,
              double max_value = std::numeric_limits<double>::max()) {
    Seen(key);
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    if (!node) {
      if (required) Error(key, "missing (required)");
      return;
    }
    std::optional<double> v = node->value<double>();  // accepts integers too
    if (!v) return Error(key, "must be a number");
    if (!Keep(CheckNumber(Name(key), *v, min_value, max_value, strictly_positive))) return;
    out = *v;
  }

  void OptDouble(const char* key, std::optional<double>& out, double min_value = 0,
                 double max_value = std::numeric_limits<double>::max(),
                 bool strictly_positive = true) {
    double v = 0;
    if (table_ && table_->get(key)) {
      const size_t before = errors_->size();
      Double(key, v, false, min_value, strictly_positive, max_value);
      if (errors_->size() == before) out = v;
    } else {
      Seen(key);
    }
  }

  void Bool(const char* key, bool& out) {
    Seen(key);
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    if (!node) return;
    std::optional<bool> v = node->value_exact<bool>();
    if (!v) return Error(key, "must be true or false");
    out = *v;
  }

  void String(const char* key, std::string& out, bool required = false) {
    Seen(key);
    const toml::node* node = table_ ? table_->get(key) : nullptr;
    if (!node) {
      if (required) Error(key, "missing (required)");
      return;
    }
    std::optional<std::string> v = node->value_exact<std::string>();
    if (!v) return Error(key, "must be a string");
    out = *v;
  }

  // Every key of the table that no reader asked for is a typo or an unsupported option: "unknown
  // key (known: ...)", the keys asked for in their order, then `sub_tables`.
  void RejectUnknown(const std::vector<std::string>& sub_tables = {}) {
    if (!table_) return;
    std::string known;
    for (const std::string& k : asked_) known += (known.empty() ? "" : ", ") + k;
    for (const std::string& k : sub_tables) known += (known.empty() ? "" : ", ") + k;
    for (const auto& [k, v] : *table_) {
      std::string key(k.str());
      if (seen_.count(key) ||
          std::find(sub_tables.begin(), sub_tables.end(), key) != sub_tables.end()) {
        continue;
      }
      Error(key, fmt::format("unknown key (known: {})", known));
    }
  }

  // How many errors the file has so far (a field read without adding one was accepted).
  size_t ErrorCount() const { return errors_->size(); }

  void Error(const std::string& key, const std::string& reason) {
    errors_->push_back(fmt::format("{}: {}", Name(key), reason));
  }

 private:
  // "<prefix>.<key>", or the key alone in a file's top level (prefix "").
  std::string Name(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }
  void Seen(const char* key) {
    if (seen_.insert(key).second) asked_.emplace_back(key);
  }
  // Records a failed shared rule (spec/limits.h); true when `st` is OK.
  bool Keep(const core::Status& st) {
    if (!st.ok()) errors_->push_back(st.message());
    return st.ok();
  }

  const toml::table* table_;
  std::string prefix_;
  std::vector<std::string>* errors_;
  std::set<std::string> seen_;
  std::vector<std::string> asked_;  // seen_ in the order asked
};

// "<source>: N invalid field(s):" followed by one error per line; Ok when there are none.
inline core::Status JoinFieldErrors(const std::string& source,
                                    const std::vector<std::string>& errors) {
  if (errors.empty()) return core::Status::Ok();
  std::string msg =
      fmt::format("{}: {} invalid field{}:", source, errors.size(), errors.size() == 1 ? "" : "s");
  for (const auto& e : errors) msg += "\n  " + e;
  return core::Status::Error(msg);
}

// `precision` (default bf16) through Precision's name table (spec/train_spec.h).
inline void ReadPrecision(FieldReader& r, Precision& out) {
  std::string word = PrecisionName(out);
  r.String("precision", word);
  if (const std::optional<Precision> p = PrecisionFromName(word)) {
    out = *p;
  } else {
    r.Error("precision", fmt::format("'{}' is not one of bf16, fp8, fp32", word));
  }
}

// A training shape, the keys a [train] table and a recipe's [[recipe.phase]] share: seq_len
// (required); the global batch as global_batch_tokens or global_batch_seqs (exactly one; a
// multiple of seq_len, at most kMaxBatchTokens); precision. Into s.seq_len, s.global_batch_tokens
// and s.precision.
inline void ReadTrainShape(const toml::table& t, FieldReader& r, TrainSpec& s) {
  r.Int("seq_len", s.seq_len, true);
  int64_t batch_seqs = 0;
  const bool has_tokens = t.get("global_batch_tokens") != nullptr;
  const bool has_seqs = t.get("global_batch_seqs") != nullptr;
  r.Int("global_batch_tokens", s.global_batch_tokens, false, 1, kMaxBatchTokens);
  r.Int("global_batch_seqs", batch_seqs, false);
  if (has_tokens == has_seqs) {
    r.Error("global_batch_tokens", "give exactly one of global_batch_tokens, global_batch_seqs");
  }
  ReadPrecision(r, s.precision);
  if (has_seqs && s.seq_len > 0) {
    s.global_batch_tokens = batch_seqs * s.seq_len;  // both <= 2^31 - 1: no overflow
    if (s.global_batch_tokens > kMaxBatchTokens) {
      r.Error("global_batch_seqs",
              fmt::format("{} x seq_len={} = {} tokens exceeds the limit of {} tokens", batch_seqs,
                          s.seq_len, s.global_batch_tokens, kMaxBatchTokens));
    }
  }
  if (has_tokens && s.seq_len > 0 && s.global_batch_tokens % s.seq_len != 0) {
    r.Error("global_batch_tokens",
            fmt::format("{} is not a multiple of seq_len={}", s.global_batch_tokens, s.seq_len));
  }
}

}  // namespace pentamesh::spec
