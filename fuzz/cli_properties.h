// What a run of `pentamesh estimate|plan|schedule|sweep|scale` must satisfy, whatever its flags:
// shared by the libFuzzer target (fuzz/cli_fuzz.cc) and the replay of its seeds through the real
// binary (tests/cli/fuzz_replay_test.cc).
//   - the exit code is 0 or 2 (never a signal, never another code);
//   - JSON output (with --json, on exit 0, and on exit 2 when something was printed) parses, holds
//     no null (nlohmann prints a NaN or infinity as null), and every estimate in it (any object
//     with "memory" and "mfu") has finite, non-negative memory terms, 0 <= mfu, hfu <= 1 and,
//     when it was costed (microbatches > 0), fits == (memory.total <= memory.capacity).
// Returns "" when all hold, else the first violation.
#pragma once

#include <stdlib.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pentamesh::fuzz {

inline std::string CheckEstimateJson(const nlohmann::json& e, const std::string& where) {
  const nlohmann::json& m = e["memory"];
  if (!m.is_object()) return where + ": memory is not an object";
  for (const auto& [key, value] : m.items()) {
    if (!value.is_number()) return where + ": memory." + key + " is not a number";
    const double v = value.get<double>();
    if (!std::isfinite(v) || v < 0) return where + ": memory." + key + " = " + value.dump();
  }
  for (const char* rate : {"mfu", "hfu", "mfu_causal"}) {
    if (!e.contains(rate)) continue;
    if (!e[rate].is_number()) return where + ": " + rate + " is not a number";
    const double v = e[rate].get<double>();
    if (!(v >= 0 && v <= 1)) return where + ": " + rate + " = " + e[rate].dump();
  }
  // Structurally invalid layouts are never costed (microbatches 0, fits false).
  const bool costed = !e.contains("microbatches") || e["microbatches"] != 0;
  if (costed && e.contains("fits") && m.contains("total") && m.contains("capacity")) {
    const bool fits = e["fits"].get<bool>();
    const bool under = m["total"].get<double>() <= m["capacity"].get<double>();
    if (fits != under) return where + ": fits=" + e["fits"].dump() + " but total vs capacity";
  }
  return "";
}

inline std::string CheckJsonTree(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return where + ": null (a non-finite number)";
  if (j.is_number_float() && !std::isfinite(j.get<double>())) return where + ": not finite";
  if (j.is_object()) {
    if (j.contains("memory") && j.contains("mfu")) {
      if (std::string bad = CheckEstimateJson(j, where); !bad.empty()) return bad;
    }
    for (const auto& [key, value] : j.items()) {
      if (std::string bad = CheckJsonTree(value, where + "." + key); !bad.empty()) return bad;
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      if (std::string bad = CheckJsonTree(j[i], where + "[" + std::to_string(i) + "]");
          !bad.empty())
        return bad;
    }
  }
  return "";
}

inline std::string CheckCliOutcome(int exit_code, const std::string& out, bool json) {
  if (exit_code != 0 && exit_code != 2) return "exit code " + std::to_string(exit_code);
  if (!json || out.empty()) return "";
  if (exit_code == 0 && out.find_first_not_of(" \n") == std::string::npos) return "no JSON";
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "stdout is not JSON";
  return CheckJsonTree(j, "$");
}

// Whether `out` is a help page (CLI11's "Usage: pentamesh ..." line): what the replay of seeds
// through the binary, which cannot ask CLI11 which app saw -h (a -h after `--` is the main app's),
// uses in place of the fuzz target's parse state.
inline bool PrintedHelp(const std::string& out) {
  return out.rfind("Usage: pentamesh ", 0) == 0 ||
         out.find("\nUsage: pentamesh ") != std::string::npos;
}

// One argument per line of `text` (the first is the subcommand), at most max_args of at most
// max_len bytes each; output-file values (--html, --trace) become /dev/null so a run never writes
// a file.
inline std::vector<std::string> ArgsFromText(const std::string& text, size_t max_args = 24,
                                             size_t max_len = 256) {
  std::vector<std::string> args;
  size_t start = 0;
  while (start <= text.size() && args.size() < max_args) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string arg = text.substr(start, std::min(end - start, max_len));
    start = end + 1;
    if (arg.empty() && start > text.size()) break;
    args.push_back(std::move(arg));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    for (const char* flag : {"--html", "--trace"}) {
      const std::string f = flag;
      if (args[i] == f && i + 1 < args.size()) args[i + 1] = "/dev/null";
      if (args[i].rfind(f + "=", 0) == 0) args[i] = f + "=/dev/null";
    }
  }
  return args;
}

// serve's --emit ENGINE DIR writes DIR/launch_ENGINE.sh: every value after an --emit (up to two)
// that is not an engine name or a flag becomes one temporary directory, so a run never writes
// elsewhere.
inline void EmitToTempDir(std::vector<std::string>& args) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/pm_serve_fuzz_XXXXXX";
    const char* made = mkdtemp(tmpl);
    return std::string(made ? made : "/tmp");
  }();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--emit", 0) != 0) continue;
    for (size_t j = i + 1; j < args.size() && j <= i + 2; ++j) {
      if (args[j] != "vllm" && args[j] != "sglang" && args[j].rfind("-", 0) != 0) args[j] = dir;
    }
    const size_t eq = args[i].find('=');
    if (eq != std::string::npos) {
      const std::string value = args[i].substr(eq + 1);
      if (value != "vllm" && value != "sglang") args[i] = args[i].substr(0, eq + 1) + dir;
    }
  }
}

}  // namespace pentamesh::fuzz
