#include "plan/allow.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>
#include <utility>

namespace pentamesh::plan {
namespace {

struct FieldName {
  const char* name;
  Field field;
  bool enumerated;
};
constexpr FieldName kFieldNames[] = {
    {"dp", Field::kDp, false},
    {"tp", Field::kTp, false},
    {"pp", Field::kPp, false},
    {"cp", Field::kCp, false},
    {"ep", Field::kEp, false},
    {"zero", Field::kZero, false},
    {"mbs", Field::kMbs, false},
    {"v", Field::kVirtualStages, false},
    {"recompute", Field::kRecompute, true},
    {"schedule", Field::kSchedule, true},
    {"cp_kind", Field::kCpKind, true},
    {"ep_placement", Field::kEpPlacement, true},
    {"sp", Field::kSp, true},
    {"etp", Field::kEtp, false},
};

core::Result<int64_t> EnumValue(Field field, const std::string& v) {
  using spec::CpKind, spec::EpPlacement, spec::Recompute, spec::Schedule;
  auto e = [](auto x) { return static_cast<int64_t>(x); };
  switch (field) {
    case Field::kRecompute:
      if (v == "none") return e(Recompute::kNone);
      if (v == "selective") return e(Recompute::kSelective);
      if (v == "full") return e(Recompute::kFull);
      break;
    case Field::kSchedule:
      if (v == "gpipe") return e(Schedule::kGPipe);
      if (v == "1f1b") return e(Schedule::kOneFOneB);
      if (v == "interleaved") return e(Schedule::kInterleaved);
      if (v == "zb") return e(Schedule::kZeroBubble);
      break;
    case Field::kCpKind:
      if (v == "ring") return e(CpKind::kRing);
      if (v == "ulysses") return e(CpKind::kUlysses);
      break;
    case Field::kEpPlacement:
      if (v == "separate") return e(EpPlacement::kSeparate);
      if (v == "folded") return e(EpPlacement::kFolded);
      break;
    case Field::kSp:
      if (v == "on") return int64_t{1};
      if (v == "off") return int64_t{0};
      break;
    default:
      break;
  }
  return core::Status::Error(fmt::format("value '{}' is not valid here", v));
}

core::Result<int64_t> IntValue(const std::string& v) {
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size() || out < 0) {
    return core::Status::Error(fmt::format("value '{}' is not a non-negative integer", v));
  }
  return out;
}

// Splits "tp<=8" into key, op, value. The operator is the first run of <>=! characters.
core::Result<Clause> ParseClause(const std::string& token, bool& enumerated) {
  const size_t op_begin = token.find_first_of("<>=!");
  if (op_begin == std::string::npos || op_begin == 0) {
    return core::Status::Error("expected KEY OP VALUE, e.g. tp<=8");
  }
  size_t op_end = token.find_first_not_of("<>=!", op_begin);
  if (op_end == std::string::npos) return core::Status::Error("missing value after the operator");
  const std::string key = token.substr(0, op_begin);
  const std::string op = token.substr(op_begin, op_end - op_begin);
  const std::string value = token.substr(op_end);
  Clause clause;
  const FieldName* field = nullptr;
  for (const auto& f : kFieldNames) {
    if (key == f.name) field = &f;
  }
  if (field == nullptr) {
    return core::Status::Error(
        fmt::format("unknown key '{}' (keys: dp tp pp cp ep zero mbs v recompute schedule cp_kind "
                    "ep_placement sp etp)",
                    key));
  }
  clause.field = field->field;
  enumerated = field->enumerated;
  if (op == "=" || op == "==")
    clause.op = Op::kEq;
  else if (op == "!=")
    clause.op = Op::kNe;
  else if (op == "<")
    clause.op = Op::kLt;
  else if (op == "<=")
    clause.op = Op::kLe;
  else if (op == ">")
    clause.op = Op::kGt;
  else if (op == ">=")
    clause.op = Op::kGe;
  else
    return core::Status::Error(fmt::format("unknown operator '{}' (use = != < <= > >=)", op));
  if (enumerated && clause.op != Op::kEq && clause.op != Op::kNe) {
    return core::Status::Error(fmt::format("'{}' takes only = or !=", key));
  }
  std::istringstream alternatives(value);
  std::string alt;
  while (std::getline(alternatives, alt, '|')) {
    auto parsed = enumerated ? EnumValue(clause.field, alt) : IntValue(alt);
    if (!parsed.ok()) return parsed.status();
    clause.values.push_back(*parsed);
  }
  if (clause.values.empty()) return core::Status::Error("missing value");
  if (clause.values.size() > 1 && clause.op != Op::kEq && clause.op != Op::kNe) {
    return core::Status::Error("alternatives (a|b) need = or !=");
  }
  return clause;
}

bool Holds(const Clause& c, int64_t v) {
  auto any_equal = [&] {
    for (int64_t x : c.values) {
      if (x == v) return true;
    }
    return false;
  };
  switch (c.op) {
    case Op::kEq:
      return any_equal();
    case Op::kNe:
      return !any_equal();
    case Op::kLt:
      return v < c.values[0];
    case Op::kLe:
      return v <= c.values[0];
    case Op::kGt:
      return v > c.values[0];
    case Op::kGe:
      return v >= c.values[0];
  }
  return false;
}

}  // namespace

core::Result<Constraints> Constraints::Parse(const std::string& text) {
  Constraints out;
  out.text_ = text;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    bool enumerated = false;
    auto clause = ParseClause(token, enumerated);
    if (!clause.ok()) {
      return core::Status::Error(
          fmt::format("--allow: clause '{}': {}", token, clause.status().message()));
    }
    out.constrained_[static_cast<size_t>(clause->field)] = true;
    out.clauses_.push_back(std::move(*clause));
  }
  return out;
}

bool Constraints::Allows(Field field, int64_t value) const {
  if (!constrained_[static_cast<size_t>(field)]) return true;
  for (const Clause& c : clauses_) {
    if (c.field == field && !Holds(c, value)) return false;
  }
  return true;
}

bool Constraints::AllowsLayout(const spec::Layout& l) const {
  auto e = [](auto x) { return static_cast<int64_t>(x); };
  return Allows(Field::kDp, l.dp) && Allows(Field::kTp, l.tp) && Allows(Field::kPp, l.pp) &&
         Allows(Field::kCp, l.cp) && Allows(Field::kEp, l.ep) && Allows(Field::kZero, l.zero) &&
         Allows(Field::kMbs, l.mbs) && Allows(Field::kVirtualStages, l.virtual_stages) &&
         Allows(Field::kRecompute, e(l.recompute)) && Allows(Field::kSchedule, e(l.schedule)) &&
         Allows(Field::kCpKind, e(l.cp_kind)) && Allows(Field::kEpPlacement, e(l.ep_placement)) &&
         Allows(Field::kSp, l.sp ? 1 : 0) && Allows(Field::kEtp, l.expert_tp()) && PassesFilters(l);
}

void Constraints::AddFilter(const std::string& name,
                            std::function<bool(const spec::Layout&)> filter) {
  filters_.push_back(std::move(filter));
  text_ += text_.empty() ? name : " " + name;
}

bool Constraints::PassesFilters(const spec::Layout& l) const {
  for (const auto& f : filters_) {
    if (!f(l)) return false;
  }
  return true;
}

}  // namespace pentamesh::plan
