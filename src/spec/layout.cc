#include "spec/layout.h"

#include <fmt/format.h>

#include <charconv>
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

core::Status ParseSchedule(const std::string& value, Layout& layout) {
  if (value == "1f1b") {
    layout.schedule = Schedule::kOneFOneB;
  } else if (value == "gpipe") {
    layout.schedule = Schedule::kGPipe;
  } else if (value == "zb" || value == "zero-bubble" || value == "zb-h1") {
    layout.schedule = Schedule::kZeroBubble;
  } else if (value.rfind("interleaved", 0) == 0) {
    layout.schedule = Schedule::kInterleaved;
    layout.virtual_stages = 2;
    if (value.size() > 11) {
      if (value[11] != ':') {
        return core::Status::Error(fmt::format(
            "layout: schedule='{}' is not valid (use interleaved or interleaved:V)", value));
      }
      PM_ASSIGN_OR_RETURN(layout.virtual_stages, ParsePositive("schedule", value.substr(12)));
    }
  } else {
    return core::Status::Error(
        fmt::format("layout: schedule='{}' is not one of gpipe, 1f1b, interleaved:V, zb", value));
  }
  return core::Status::Ok();
}

core::Status ParseKey(const std::string& key, const std::string& value, Layout& layout) {
  auto degree = [&](int64_t& field) -> core::Status {
    PM_ASSIGN_OR_RETURN(field, ParsePositive(key, value));
    return core::Status::Ok();
  };
  if (key == "dp") return degree(layout.dp);
  if (key == "tp") return degree(layout.tp);
  if (key == "pp") return degree(layout.pp);
  if (key == "cp") return degree(layout.cp);
  if (key == "ep") return degree(layout.ep);
  if (key == "etp") return degree(layout.etp);
  if (key == "mbs") return degree(layout.mbs);
  if (key == "zero") {
    if (value.size() != 1 || value[0] < '0' || value[0] > '3') {
      return core::Status::Error(fmt::format("layout: zero='{}' must be 0, 1, 2 or 3", value));
    }
    layout.zero = value[0] - '0';
    return core::Status::Ok();
  }
  if (key == "recompute") {
    if (value == "none")
      layout.recompute = Recompute::kNone;
    else if (value == "selective")
      layout.recompute = Recompute::kSelective;
    else if (value == "full")
      layout.recompute = Recompute::kFull;
    else
      return core::Status::Error(
          fmt::format("layout: recompute='{}' is not one of none, selective, full", value));
    return core::Status::Ok();
  }
  if (key == "schedule") return ParseSchedule(value, layout);
  if (key == "cp_kind") {
    if (value == "ring")
      layout.cp_kind = CpKind::kRing;
    else if (value == "ulysses")
      layout.cp_kind = CpKind::kUlysses;
    else
      return core::Status::Error(
          fmt::format("layout: cp_kind='{}' is not one of ring, ulysses", value));
    return core::Status::Ok();
  }
  if (key == "ep_placement") {
    if (value == "separate")
      layout.ep_placement = EpPlacement::kSeparate;
    else if (value == "folded")
      layout.ep_placement = EpPlacement::kFolded;
    else
      return core::Status::Error(
          fmt::format("layout: ep_placement='{}' is not one of separate, folded", value));
    return core::Status::Ok();
  }
  if (key == "sp") {
    if (value == "on" || value == "true" || value == "1")
      layout.sp = true;
    else if (value == "off" || value == "false" || value == "0")
      layout.sp = false;
    else
      return core::Status::Error(fmt::format("layout: sp='{}' must be on or off", value));
    return core::Status::Ok();
  }
  return core::Status::Error(fmt::format(
      "layout: unknown key '{}' (known: dp tp pp cp ep etp zero mbs recompute schedule cp_kind "
      "ep_placement sp)",
      key));
}

}  // namespace

core::Result<Layout> ParseLayout(const std::string& text) {
  Layout layout;
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
      if (!seen.insert(key).second) {
        return core::Status::Error(fmt::format("layout: key '{}' given twice", key));
      }
      PM_RETURN_IF_ERROR(ParseKey(key, item.substr(eq + 1), layout));
      any = true;
    }
  }
  if (!any) return core::Status::Error("layout: empty layout string");
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
  if (layout.etp == layout.tp) layout.etp = 0;  // the default: experts split like the dense FFN
  return layout;
}

const char* ToString(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

const char* ToString(Schedule s) {
  switch (s) {
    case Schedule::kGPipe:
      return "gpipe";
    case Schedule::kOneFOneB:
      return "1f1b";
    case Schedule::kInterleaved:
      return "interleaved";
    case Schedule::kZeroBubble:
      return "zb";
  }
  return "?";
}

const char* ToString(CpKind k) { return k == CpKind::kRing ? "ring" : "ulysses"; }
const char* ToString(EpPlacement p) { return p == EpPlacement::kSeparate ? "separate" : "folded"; }

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

int64_t ChunkFirstLayer(int64_t layers, int64_t chunks, int64_t chunk) {
  const int64_t n = (layers + chunks - 1) / chunks;
  const int64_t short_by = chunks * n - layers;
  return chunk * n - (chunk > 0 && short_by == 2 ? 1 : 0);
}

std::string FormatLayout(const Layout& l) {
  // etp is written only when it differs from tp (the default), so layouts without expert tensor
  // parallelism of their own read as before.
  const std::string etp = l.etp > 0 && l.etp != l.tp ? fmt::format(" etp={}", l.etp) : "";
  return fmt::format(
      "dp={} tp={} pp={} cp={} ep={}{} zero={} mbs={} recompute={} schedule={} cp_kind={} "
      "ep_placement={} sp={}",
      l.dp, l.tp, l.pp, l.cp, l.ep, etp, l.zero, l.mbs, ToString(l.recompute), ScheduleText(l),
      ToString(l.cp_kind), ToString(l.ep_placement), l.sp ? "on" : "off");
}

std::string ShortLayout(const Layout& l) {
  std::string s = fmt::format("dp{} tp{} pp{} cp{} ep{}{}{} z{} mbs{} {} {}", l.dp, l.tp, l.pp,
                              l.cp, l.ep, l.ep_placement == EpPlacement::kFolded ? "f" : "",
                              l.etp > 0 && l.etp != l.tp ? fmt::format(" etp{}", l.etp) : "",
                              l.zero, l.mbs, ToString(l.recompute), ScheduleText(l));
  if (l.cp > 1 && l.cp_kind == CpKind::kUlysses) s += " ulysses";
  if (!l.sp && l.tp > 1) s += " no-sp";
  return s;
}

}  // namespace pentamesh::spec
