#include "spec/layout.h"

#include <fmt/format.h>

#include <charconv>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>

#include "spec/limits.h"

namespace pentamesh::spec {
namespace {

core::Result<int64_t> ParsePositive(const std::string& key, const std::string& value) {
  int64_t out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end) {
    return core::Status::Error(fmt::format("layout: {}='{}' is not an integer", key, value));
  }
  if (out <= 0) {
    return core::Status::Error(fmt::format("layout: {}={} must be positive", key, out));
  }
  PM_RETURN_IF_ERROR(CheckInt("layout: " + key, out, 1, kMaxField));
  return out;
}

constexpr int64_t V(auto e) { return static_cast<int64_t>(e); }

constexpr FieldWord kRecomputeWords[] = {{"none", V(Recompute::kNone)},
                                         {"selective", V(Recompute::kSelective)},
                                         {"full", V(Recompute::kFull)}};
// Megatron-Core's --recompute-modules words, one per RecomputeModule bit in bit order.
constexpr FieldWord kRecomputeModuleWords[] = {{"core_attn", kRecomputeCoreAttn},
                                               {"layernorm", kRecomputeLayerNorm},
                                               {"moe_act", kRecomputeMoeAct},
                                               {"mla_up_proj", kRecomputeMlaUpProj},
                                               {"mlp", kRecomputeMlp}};
constexpr FieldWord kScheduleWords[] = {{"gpipe", V(Schedule::kGPipe)},
                                        {"1f1b", V(Schedule::kOneFOneB)},
                                        {"interleaved", V(Schedule::kInterleaved)},
                                        {"zb", V(Schedule::kZeroBubble)},
                                        {"zero-bubble", V(Schedule::kZeroBubble)},
                                        {"zb-h1", V(Schedule::kZeroBubble)}};
constexpr FieldWord kCpKindWords[] = {{"ring", V(CpKind::kRing)}, {"ulysses", V(CpKind::kUlysses)}};
constexpr FieldWord kEpPlacementWords[] = {{"separate", V(EpPlacement::kSeparate)},
                                           {"folded", V(EpPlacement::kFolded)}};
constexpr FieldWord kSwitchWords[] = {{"on", 1},  {"true", 1},  {"1", 1},
                                      {"off", 0}, {"false", 0}, {"0", 0}};

constexpr LayoutFieldInfo kLayoutFields[] = {
    {LayoutField::kDp, "dp", nullptr, {}},
    {LayoutField::kTp, "tp", nullptr, {}},
    {LayoutField::kPp, "pp", nullptr, {}},
    {LayoutField::kCp, "cp", nullptr, {}},
    {LayoutField::kEp, "ep", nullptr, {}},
    {LayoutField::kEtp, "etp", nullptr, {}},
    {LayoutField::kZero, "zero", nullptr, {}},
    {LayoutField::kMbs, "mbs", nullptr, {}},
    {LayoutField::kRecompute, "recompute", nullptr, kRecomputeWords},
    {LayoutField::kRecomputeModules, "recompute_modules", nullptr, {}},
    {LayoutField::kSchedule, "schedule", nullptr, kScheduleWords},
    {LayoutField::kVirtualStages, "virtual_stages", "v", {}},
    {LayoutField::kCpKind, "cp_kind", nullptr, kCpKindWords},
    {LayoutField::kEpPlacement, "ep_placement", nullptr, kEpPlacementWords},
    {LayoutField::kSp, "sp", nullptr, kSwitchWords},
};
static_assert(std::size(kLayoutFields) == static_cast<size_t>(LayoutField::kCount));
constexpr bool FieldsInEnumOrder() {
  for (size_t i = 0; i < std::size(kLayoutFields); ++i) {
    if (static_cast<size_t>(kLayoutFields[i].field) != i) return false;
  }
  return true;
}
static_assert(FieldsInEnumOrder());

// One name per Layout member: a member added to Layout without a LayoutField entry (and a case
// in FieldValue) stops this structured binding from compiling.
[[maybe_unused]] void EveryMemberHasAField(const Layout& l) {
  [[maybe_unused]] const auto& [dp, tp, pp, cp, ep, etp, zero, mbs, recompute, recompute_modules,
                                schedule, virtual_stages, cp_kind, ep_placement, sp] = l;
}

std::string WordList(LayoutField field) {
  std::string out;
  for (const FieldWord& w : FieldInfo(field).words)
    out += (out.empty() ? "" : ", ") + std::string(w.word);
  return out;
}

// The LayoutField a key (or its alias) names; kCount when none.
LayoutField KeyField(const std::string& key) {
  for (const LayoutFieldInfo& f : kLayoutFields) {
    if (key == f.key || (f.alias != nullptr && key == f.alias)) return f.field;
  }
  return LayoutField::kCount;
}

std::string KeyList() {
  std::string out;
  for (const LayoutFieldInfo& f : kLayoutFields) {
    out += (out.empty() ? "" : " ") + std::string(f.key);
    if (f.alias != nullptr) out += fmt::format(" ({})", f.alias);
  }
  return out;
}

struct ParseState {
  std::optional<int64_t> virtual_stages_key;  // virtual_stages=V / v=V
  std::optional<int64_t> schedule_v;          // schedule=interleaved:V
};

core::Status ParseSchedule(const std::string& value, Layout& layout, ParseState& state) {
  const std::string::size_type colon = value.find(':');
  const std::string word = value.substr(0, colon);
  auto kind = ParseFieldWord(LayoutField::kSchedule, word);
  if (!kind.ok()) {
    return core::Status::Error(fmt::format("layout: schedule='{}' is not one of {} (interleaved:V)",
                                           value, WordList(LayoutField::kSchedule)));
  }
  layout.schedule = static_cast<Schedule>(*kind);
  if (layout.schedule != Schedule::kInterleaved) {
    if (colon != std::string::npos) {
      return core::Status::Error(
          fmt::format("layout: schedule='{}': only interleaved takes :V", value));
    }
    return core::Status::Ok();
  }
  layout.virtual_stages = 2;
  if (colon != std::string::npos) {
    PM_ASSIGN_OR_RETURN(state.schedule_v, ParsePositive("schedule", value.substr(colon + 1)));
    layout.virtual_stages = *state.schedule_v;
  }
  return core::Status::Ok();
}

core::Status ParseKey(LayoutField field, const std::string& key, const std::string& value,
                      Layout& layout, ParseState& state) {
  auto degree = [&](int64_t& out) -> core::Status {
    PM_ASSIGN_OR_RETURN(out, ParsePositive(key, value));
    return core::Status::Ok();
  };
  auto word = [&]() -> core::Result<int64_t> {
    auto v = ParseFieldWord(field, value);
    if (!v.ok()) {
      return core::Status::Error(
          fmt::format("layout: {}='{}' is not one of {}", key, value, WordList(field)));
    }
    return *v;
  };
  switch (field) {
    case LayoutField::kDp:
      return degree(layout.dp);
    case LayoutField::kTp:
      return degree(layout.tp);
    case LayoutField::kPp:
      return degree(layout.pp);
    case LayoutField::kCp:
      return degree(layout.cp);
    case LayoutField::kEp:
      return degree(layout.ep);
    case LayoutField::kEtp:
      return degree(layout.etp);
    case LayoutField::kMbs:
      return degree(layout.mbs);
    case LayoutField::kZero:
      if (value.size() != 1 || value[0] < '0' || value[0] > '3') {
        return core::Status::Error(fmt::format("layout: zero='{}' must be 0, 1, 2 or 3", value));
      }
      layout.zero = value[0] - '0';
      return core::Status::Ok();
    case LayoutField::kVirtualStages: {
      int64_t v = 0;
      PM_RETURN_IF_ERROR(degree(v));
      state.virtual_stages_key = v;
      return core::Status::Ok();
    }
    case LayoutField::kSchedule:
      return ParseSchedule(value, layout, state);
    case LayoutField::kRecompute: {
      PM_ASSIGN_OR_RETURN(const int64_t v, word());
      layout.recompute = static_cast<Recompute>(v);
      return core::Status::Ok();
    }
    case LayoutField::kRecomputeModules: {
      auto modules = ParseRecomputeModules(value);
      if (!modules.ok()) {
        return core::Status::Error(
            fmt::format("layout: {}='{}': {}", key, value, modules.status().message()));
      }
      layout.recompute_modules = *modules;
      return core::Status::Ok();
    }
    case LayoutField::kCpKind: {
      PM_ASSIGN_OR_RETURN(const int64_t v, word());
      layout.cp_kind = static_cast<CpKind>(v);
      return core::Status::Ok();
    }
    case LayoutField::kEpPlacement: {
      PM_ASSIGN_OR_RETURN(const int64_t v, word());
      layout.ep_placement = static_cast<EpPlacement>(v);
      return core::Status::Ok();
    }
    case LayoutField::kSp: {
      PM_ASSIGN_OR_RETURN(const int64_t v, word());
      layout.sp = v != 0;
      return core::Status::Ok();
    }
    case LayoutField::kCount:
      break;
  }
  return core::Status::Error(fmt::format("layout: unknown key '{}' (known: {})", key, KeyList()));
}

}  // namespace

core::Result<Layout> ParseLayout(const std::string& text) {
  Layout layout;
  ParseState state;
  std::istringstream in(text);
  std::string token;
  bool any = false;
  std::set<std::string> seen;
  while (in >> token) {
    // Accept "a=1,b=2" as well as "a=1 b=2".
    std::string::size_type start = 0;
    while (start <= token.size()) {
      auto comma = token.find(',', start);
      std::string item =
          token.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? token.size() + 1 : comma + 1;
      if (item.empty()) continue;
      auto eq = item.find('=');
      if (eq == std::string::npos || eq == 0) {
        return core::Status::Error(fmt::format("layout: '{}' is not of the form key=value", item));
      }
      const std::string key = item.substr(0, eq);
      const LayoutField field = KeyField(key);
      if (field == LayoutField::kCount) {
        return core::Status::Error(
            fmt::format("layout: unknown key '{}' (known: {})", key, KeyList()));
      }
      if (!seen.insert(FieldInfo(field).key).second) {
        return core::Status::Error(fmt::format("layout: key '{}' given twice", key));
      }
      PM_RETURN_IF_ERROR(ParseKey(field, key, item.substr(eq + 1), layout, state));
      any = true;
    }
  }
  if (!any) return core::Status::Error("layout: empty layout string");
  if (state.virtual_stages_key) {
    if (state.schedule_v && *state.schedule_v != *state.virtual_stages_key) {
      return core::Status::Error(
          fmt::format("layout: virtual_stages={} contradicts schedule=interleaved:{}",
                      *state.virtual_stages_key, *state.schedule_v));
    }
    layout.virtual_stages = *state.virtual_stages_key;
  }
  // Degrees bounded so that gpus(), data_ranks() * mbs and every product downstream fit int64_t.
  const bool separate = layout.ep_placement == EpPlacement::kSeparate;
  PM_RETURN_IF_ERROR(
      GpuProduct(separate ? "layout: dp*tp*pp*cp*ep" : "layout: dp*tp*pp*cp",
                 {layout.dp, layout.tp, layout.pp, layout.cp, separate ? layout.ep : 1})
          .status());
  PM_RETURN_IF_ERROR(CheckInt("layout: ep", layout.ep, 1, kMaxGpus));
  if (layout.schedule != Schedule::kInterleaved && layout.virtual_stages != 1) {
    return core::Status::Error("layout: virtual stages need schedule=interleaved:V");
  }
  if (layout.recompute_modules != 0 && layout.recompute != Recompute::kSelective) {
    return core::Status::Error(
        fmt::format("layout: recompute_modules={} needs recompute=selective (is {})",
                    RecomputeModulesText(layout.recompute_modules), ToString(layout.recompute)));
  }
  if (layout.recompute_modules == kRecomputeCoreAttn) layout.recompute_modules = 0;  // default
  if (layout.etp == layout.tp) layout.etp = 0;  // the default: experts split like the dense FFN
  return layout;
}

std::string RecomputeModulesText(uint32_t modules) {
  std::string out;
  for (const FieldWord& w : kRecomputeModuleWords) {
    if ((modules & static_cast<uint32_t>(w.value)) != 0)
      out += (out.empty() ? "" : "+") + std::string(w.word);
  }
  return out;
}

core::Result<uint32_t> ParseRecomputeModules(const std::string& text) {
  uint32_t out = 0;
  std::string::size_type start = 0;
  while (start <= text.size()) {
    const auto plus = text.find('+', start);
    const std::string word =
        text.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    start = plus == std::string::npos ? text.size() + 1 : plus + 1;
    const FieldWord* found = nullptr;
    for (const FieldWord& w : kRecomputeModuleWords) {
      if (word == w.word) found = &w;
    }
    if (found == nullptr) {
      std::string known;
      for (const FieldWord& w : kRecomputeModuleWords)
        known += (known.empty() ? "" : ", ") + std::string(w.word);
      return core::Status::Error(
          fmt::format("module '{}' is not one of {} ('+'-joined)", word, known));
    }
    out |= static_cast<uint32_t>(found->value);
  }
  return out;
}

const char* ToString(Recompute r) { return FieldWordFor(LayoutField::kRecompute, V(r)); }
const char* ToString(Schedule s) { return FieldWordFor(LayoutField::kSchedule, V(s)); }
const char* ToString(CpKind k) { return FieldWordFor(LayoutField::kCpKind, V(k)); }
const char* ToString(EpPlacement p) { return FieldWordFor(LayoutField::kEpPlacement, V(p)); }

std::span<const LayoutFieldInfo> LayoutFields() { return kLayoutFields; }

const LayoutFieldInfo& FieldInfo(LayoutField field) {
  return kLayoutFields[static_cast<size_t>(field)];
}

int64_t FieldValue(const Layout& l, LayoutField field) {
  switch (field) {
    case LayoutField::kDp:
      return l.dp;
    case LayoutField::kTp:
      return l.tp;
    case LayoutField::kPp:
      return l.pp;
    case LayoutField::kCp:
      return l.cp;
    case LayoutField::kEp:
      return l.ep;
    case LayoutField::kEtp:
      return l.expert_tp();
    case LayoutField::kZero:
      return l.zero;
    case LayoutField::kMbs:
      return l.mbs;
    case LayoutField::kRecompute:
      return V(l.recompute);
    case LayoutField::kRecomputeModules:
      return l.recompute_modules;
    case LayoutField::kSchedule:
      return V(l.schedule);
    case LayoutField::kVirtualStages:
      return l.virtual_stages;
    case LayoutField::kCpKind:
      return V(l.cp_kind);
    case LayoutField::kEpPlacement:
      return V(l.ep_placement);
    case LayoutField::kSp:
      return l.sp ? 1 : 0;
    case LayoutField::kCount:
      break;
  }
  return 0;
}

core::Result<int64_t> ParseFieldWord(LayoutField field, const std::string& word) {
  for (const FieldWord& w : FieldInfo(field).words) {
    if (word == w.word) return w.value;
  }
  return core::Status::Error(fmt::format("'{}' is not one of {}", word, WordList(field)));
}

const char* FieldWordFor(LayoutField field, int64_t value) {
  for (const FieldWord& w : FieldInfo(field).words) {
    if (w.value == value) return w.word;
  }
  return "?";
}

namespace {
std::string ScheduleText(const Layout& l) {
  if (l.schedule == Schedule::kInterleaved) return fmt::format("interleaved:{}", l.virtual_stages);
  return ToString(l.schedule);
}
}  // namespace

int64_t ChunkLayers(int64_t layers, int64_t chunks, int64_t chunk) {
  if (layers <= 0 || chunks <= 0 || chunk < 0 || chunk >= chunks) return -1;
  const int64_t n = (layers + chunks - 1) / chunks;
  const int64_t short_by = chunks * n - layers;
  if (short_by > 2 || (short_by > 0 && n < 2) || (short_by == 2 && chunks < 2)) return -1;
  if (chunk == chunks - 1 && short_by >= 1) return n - 1;
  if (chunk == 0 && short_by == 2) return n - 1;
  return n;
}

bool EpOverlapRuns(const Layout& l) {
  return l.ep > 1 && l.recompute != Recompute::kFull &&
         (l.pp == 1 || (l.schedule == Schedule::kInterleaved && l.virtual_stages > 1));
}

int64_t ChunkFirstLayer(int64_t layers, int64_t chunks, int64_t chunk) {
  const int64_t n = (layers + chunks - 1) / chunks;
  const int64_t short_by = chunks * n - layers;
  return chunk * n - (chunk > 0 && short_by == 2 ? 1 : 0);
}

std::string FormatLayout(const Layout& l) {
  // etp is written only when it differs from tp (the default), so layouts without expert tensor
  // parallelism of their own read as before.
  // recompute_modules likewise only when it names modules other than core_attn alone.
  const std::string etp = l.etp > 0 && l.etp != l.tp ? fmt::format(" etp={}", l.etp) : "";
  const std::string modules =
      l.recompute_modules != 0
          ? fmt::format(" recompute_modules={}", RecomputeModulesText(l.recompute_modules))
          : "";
  return fmt::format(
      "dp={} tp={} pp={} cp={} ep={}{} zero={} mbs={} recompute={}{} schedule={} cp_kind={} "
      "ep_placement={} sp={}",
      l.dp, l.tp, l.pp, l.cp, l.ep, etp, l.zero, l.mbs, ToString(l.recompute), modules,
      ScheduleText(l), ToString(l.cp_kind), ToString(l.ep_placement), l.sp ? "on" : "off");
}

std::string ShortLayout(const Layout& l) {
  std::string s = fmt::format(
      "dp{} tp{} pp{} cp{} ep{}{}{} z{} mbs{} {} {}", l.dp, l.tp, l.pp, l.cp, l.ep,
      l.ep_placement == EpPlacement::kFolded ? "f" : "",
      l.etp > 0 && l.etp != l.tp ? fmt::format(" etp{}", l.etp) : "", l.zero, l.mbs,
      l.recompute_modules != 0 ? fmt::format("sel:{}", RecomputeModulesText(l.recompute_modules))
                               : ToString(l.recompute),
      ScheduleText(l));
  if (l.cp > 1 && l.cp_kind == CpKind::kUlysses) s += " ulysses";
  if (!l.sp && l.tp > 1) s += " no-sp";
  return s;
}

}  // namespace pentamesh::spec
