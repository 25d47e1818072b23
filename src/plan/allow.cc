#include "plan/allow.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>
#include <utility>

namespace pentamesh::plan {
namespace {

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
  const spec::LayoutFieldInfo* field = nullptr;
  for (const spec::LayoutFieldInfo& f : spec::LayoutFields()) {
    if (key == f.key || (f.alias != nullptr && key == f.alias)) field = &f;
  }
  if (field == nullptr) {
    std::string keys;
    for (const spec::LayoutFieldInfo& f : spec::LayoutFields()) {
      keys += (keys.empty() ? "" : " ") + std::string(f.key);
      if (f.alias != nullptr) keys += fmt::format(" ({})", f.alias);
    }
    return core::Status::Error(fmt::format("unknown key '{}' (keys: {})", key, keys));
  }
  clause.field = field->field;
  // recompute_modules: a '+'-joined set compared whole, = or != (core_attn alone is the default,
  // held as 0).
  const bool modules = clause.field == spec::LayoutField::kRecomputeModules;
  enumerated = !field->words.empty() || modules;
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
    if (modules) {
      auto mask = spec::ParseRecomputeModules(alt);
      if (!mask.ok()) return mask.status();
      clause.values.push_back(*mask == spec::kRecomputeCoreAttn ? 0 : *mask);
      continue;
    }
    auto parsed = enumerated ? spec::ParseFieldWord(clause.field, alt) : IntValue(alt);
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
  for (const spec::LayoutFieldInfo& f : spec::LayoutFields()) {
    if (!Allows(f.field, spec::FieldValue(l, f.field))) return false;
  }
  return PassesFilters(l);
}

void Constraints::AddClauses(const Constraints& other) {
  for (const Clause& c : other.clauses_) {
    clauses_.push_back(c);
    constrained_[static_cast<size_t>(c.field)] = true;
  }
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
