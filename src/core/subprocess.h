// Starting other programs, the one way: RunProcess (no shell; its own process group, killed as a
// group after a time limit; output to a log or inherited; stdin from /dev/null), the local
// launcher's argument prefix (MpirunArgs: `mpirun -np N` over shared memory, oversubscribed, the
// form tune/ and calibrate --host use), FindLauncher (a launcher on $PATH or a clear error naming
// the flag) and SelfExecutable (this program's path, to launch it again as a worker or a rank).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace pentamesh::core {

struct ProcessOptions {
  std::string log;       // stdout and stderr to this file (truncated); "" = inherited
  double timeout_s = 0;  // SIGTERM to the group after this long, SIGKILL 2 s later; 0 = none
};

// Runs argv[0] (a path: FindLauncher / SelfExecutable resolve names) with argv and waits. OK on
// exit status 0; else an error saying what happened: "cannot start X: reason", "exit status N",
// "killed by signal N" or "killed after the time limit of T s".
Status RunProcess(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// `mpirun -np ranks --oversubscribe --mca btl self,vader`: ranks of one host over shared memory.
std::vector<std::string> MpirunArgs(const std::string& mpirun, int ranks);

// The executable `name` resolves to on $PATH (FindOnPath), or an error naming `field` and what to
// install.
Result<std::string> FindLauncher(const std::string& name, const std::string& field);

// This program's executable (/proc/self/exe), or "" when it cannot be read.
std::string SelfExecutable();

}  // namespace pentamesh::core
