// The output layer: every file the program creates goes through WriteFileAtomic, and stdout is
// checked once at exit (FinishStdout), so a full disk, a closed pipe or a hostile symlink never
// leaves a partial file or a silent exit 0.
//
// Invariant: after WriteFileAtomic returns OK, `path` holds exactly `data` (written to a
// temporary name in the same directory, fsync'd, its size checked, renamed over `path`, the
// directory fsync'd); after an error, `path` is as it was and no temporary is left.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace pentamesh::core {

// Writes `data` as the whole content of `path` (see above). Refused, naming the path: a symbolic
// link at `path` (never followed: its target is not written and the link is not replaced), a
// directory, a missing or unwritable directory. An existing device or fifo (/dev/null, a named
// pipe) is written in place, since it cannot be replaced; a short write there is an error too.
// Errors start with "cannot write <path>:" and say that nothing was written. `executable`: the
// file is created with mode 0777 (less the umask) instead of 0666, e.g. an emitted script.
Status WriteFileAtomic(const std::string& path, std::string_view data, bool executable = false);

// "" when a file may be created at `path` (through WriteFileAtomic); otherwise the reason it may
// not (a symlink, a directory, a missing directory), for flag validation before any work.
std::string OutputPathProblem(const std::string& path);

// Flushes std::cout and stdout and reports whether everything written to standard output got
// there (a full disk, a closed pipe, /dev/full are errors). Called once, at exit.
Status FinishStdout();

}  // namespace pentamesh::core
