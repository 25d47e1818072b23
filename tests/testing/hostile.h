// Hostile strings for the injection tests (namespace pentamesh::testing): names and paths a user
// (or an attacker who controls a spec file) could hand pentamesh, each trying to end a quote, a
// comment or a line and run `touch <canary>`; and running bash on a script with a given
// environment and working directory, without a shell in between.
// Invariant: no string holds a NUL byte (none can be a shell word); Canary() names the file any
// successful injection creates.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "testing/cli_run.h"

namespace pentamesh::testing {

// The one string of HostileStrings that is not valid UTF-8.
inline constexpr const char* kInvalidUtf8 = "\xff\xfe invalid utf-8 \xc3";

// `canary`: an absolute path without quotes or spaces (a temp dir), the file an injection makes.
inline std::vector<std::string> HostileStrings(const std::string& canary) {
  const std::string t = "touch " + canary;
  std::vector<std::string> s = {
      "",
      " ",
      "a b",
      "it's",
      "'",
      "''",
      "\"",
      "\"'\"",
      "$(" + t + ")",
      "`" + t + "`",
      "x\n" + t + "\n",
      "x\r\n" + t,
      "x; " + t,
      "x && " + t,
      "x | " + t,
      "'; " + t + "; '",
      "\"; " + t + "; \"",
      "\"$(" + t + ")\"",
      "'$(" + t + ")'",
      "\\'$(" + t + ")",
      "$'\\n'" + t,
      "*",
      "?",
      "[a-z]*",
      "/*",
      "~",
      "~root",
      "{a,b}",
      "-rf",
      "--help",
      "-",
      "#x",
      "x #y",
      "!!",
      "$HOME",
      "${HOME}",
      "${PATH:+$(" + t + ")}",
      "%s%n",
      ">" + canary,
      "<" + canary,
      "=x",
      "A=B",
      "\\",
      "a\\",
      "\t",
      "\x01\x1b[31m\x7f",
      kInvalidUtf8,
      "ünïcödé ✓ 模型 \U0001F600",
      "\u202e reversed",
      "name]\n[table]\nkey = 1",
      "x\"\n" + t + "\n#",
  };
  // Random strings over the characters shells and TOML treat specially (fixed seed); valid
  // UTF-8, so the one invalid string above is the only one.
  const std::vector<std::string> alphabet = {
      " ", "\t", "\n", "\r", "'", "\"", "`", "$", "(", ")",    "[",      "]",     "{", "}",
      "*", "?",  "~",  "!",  "#", ";",  "&", "|", "<", ">",    "\\",     "=",     "-", ",",
      ".", "/",  ":",  "%",  "@", "+",  "^", "a", "b", "\x01", "\u00e9", "\u2713"};
  std::mt19937 rng(31);
  for (int i = 0; i < 60; ++i) {
    std::string r;
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) r += alphabet[rng() % alphabet.size()];
    s.push_back(r);
  }
  return s;
}

struct BashRun {
  int exit_code;       // -1: killed by a signal
  std::string output;  // stdout and stderr
};

// bash with `args` (a script path and its arguments, or -n / -c ...), exactly `env` as its
// environment and `cwd` as its working directory; stdout and stderr captured.
inline BashRun RunBash(const std::vector<std::string>& args, const std::vector<std::string>& env,
                       const std::string& cwd) {
  const std::string out = MakeTempDir("bash_run") + "/out";
  std::vector<char*> argv = {const_cast<char*>("bash")};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || chdir(cwd.c_str()) != 0) _exit(127);
    dup2(fd, 1);
    dup2(fd, 2);
    const int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, 0);
    execve("/bin/bash", argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return {-1, "fork/wait failed"};
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(out)};
}

// The NUL-separated fields of `text` (what printf '%s\0' wrote).
inline std::vector<std::string> SplitNul(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\0', start);
    if (end == std::string::npos) {
      out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace pentamesh::testing
