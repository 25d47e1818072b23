// Running the real pentamesh binary from a test (namespace pentamesh::testing):
//   Shell(cmd)             runs a shell command, returns its exit code, stdout and stderr;
//   Pentamesh(args)        Shell of the binary the target names in PM_BINARY;
//   Mpirun(np, cmd, env)   the command line that runs `cmd` on np ranks under PM_MPIEXEC_BIN;
//   ReadFile(path)         a whole file as text;
//   ReadMetrics(dir)       every line of <dir>/metrics.jsonl as JSON; LastMetrics(dir) the last.
// Invariant: a command's stdout and stderr land in files of a fresh temp dir (no pipe to fill), and
// an exit by signal reads as exit code -1.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "testing/temp_dir.h"

namespace pentamesh::testing {

struct CliRun {
  int exit_code;
  std::string out, err;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline CliRun Shell(const std::string& cmd) {
  const std::string dir = MakeTempDir("cli_run");
  const int status = std::system((cmd + " >" + dir + "/out 2>" + dir + "/err").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(dir + "/out"),
          ReadFile(dir + "/err")};
}

#ifdef PM_BINARY
inline CliRun Pentamesh(const std::string& args) {
  return Shell(fmt::format("{} {}", PM_BINARY, args));
}
#endif

#ifdef PM_MPIEXEC_BIN
// `cmd` on np ranks (oversubscribed, shared memory only), after `env` ("NAME=value " pairs).
// Under ASan the mpirun-launched ranks run without LeakSanitizer: at their exit its report is
// dominated by Open MPI allocations from plugins it has dlclose'd (frames no suppression can
// match), and its stop-the-world tracer crashes on some runs. Leaks in pentamesh code are checked
// by the single-process CLI tests and the gtest mpirun tests (tests/mpi). Release ignores this.
// Each launch has its own Open MPI session directory base: mpiruns of one user share
// <base>/ompi.<node>.<uid>, which the last one to end removes, and one starting at that instant
// fails in orte_session_dir ("mkdir ... File exists"); ctest runs two tests at a time.
inline std::string Mpirun(int np, const std::string& cmd, const std::string& env = "") {
  return fmt::format(
      "env {}ASAN_OPTIONS=detect_leaks=0 OMPI_MCA_orte_tmpdir_base={} "
      "{} --oversubscribe --allow-run-as-root --mca btl self,vader -np {} {}",
      env, MakeTempDir("ompi"), PM_MPIEXEC_BIN, np, cmd);
}
#endif

// Every non-empty line of <dir>/metrics.jsonl, parsed (a line that is not JSON throws).
inline std::vector<nlohmann::json> ReadMetrics(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// The last non-empty line of <dir>/metrics.jsonl, parsed (only that line: a run killed mid-write
// may leave a torn line before it). Throws when there is none.
inline nlohmann::json LastMetrics(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return nlohmann::json::parse(last);
}

}  // namespace pentamesh::testing
