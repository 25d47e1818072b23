// `--allow` constraints: a conjunction of clauses such as "tp<=8 pp>=2 schedule=1f1b|zb
// recompute!=none" that restricts the planner's search space.
// Invariant: a Constraints value only filters; an empty one allows every layout.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "spec/layout.h"

namespace pentamesh::plan {

// The layout fields a clause may name: spec's field table (spec/layout.h), so --allow takes the
// keys and words --layout takes. Enumerated fields compare by their enum's integer value.
using Field = spec::LayoutField;
enum class Op : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

struct Clause {
  Field field = Field::kDp;
  Op op = Op::kEq;
  std::vector<int64_t> values;  // kEq / kNe: any of (a|b); comparisons: exactly one value
};

class Constraints {
 public:
  // Parses space-separated clauses KEY OP VALUE, OP one of = == != < <= > >=. Keys and words are
  // spec::LayoutFields()'s (dp tp pp cp ep etp zero mbs recompute schedule virtual_stages/v cp_kind
  // ep_placement sp). Enumerated keys take = or != and alternatives separated by '|'
  // (schedule=1f1b|zb). Errors name the clause.
  static core::Result<Constraints> Parse(const std::string& text);

  // True when every clause on `field` holds for `value`.
  bool Allows(Field field, int64_t value) const;
  // True when every clause and every filter holds for the whole layout.
  bool AllowsLayout(const spec::Layout& layout) const;
  // Adds a rule across fields that clauses cannot say (an engine's capability table). A filter
  // must not look at mbs or recompute: the space applies it to a mesh's branches, before those
  // are chosen. Its name is appended to text() for messages.
  void AddFilter(const std::string& name, std::function<bool(const spec::Layout&)> filter);
  // Adds other's clauses (not its filters or text): a rule that holds for every layout of an
  // engine (launch::RestrictToEngine), so the space sees the fields filters may not look at.
  void AddClauses(const Constraints& other);
  // True when every filter holds.
  bool PassesFilters(const spec::Layout& layout) const;
  bool empty() const { return clauses_.empty() && filters_.empty(); }
  const std::string& text() const { return text_; }

 private:
  std::vector<Clause> clauses_;
  std::vector<std::function<bool(const spec::Layout&)>> filters_;
  std::array<bool, static_cast<size_t>(Field::kCount)> constrained_{};
  std::string text_;
};

}  // namespace pentamesh::plan
