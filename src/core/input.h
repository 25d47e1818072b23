// The input layer's file side: every file the program reads (TOML specs, JSON, runs files,
// engine configs, metrics.jsonl and traces, checkpoint manifests and tensors, corpora,
// tokenizers) is opened through OpenInputFile or read whole through ReadInputFile, so a FIFO, a
// directory, a device (/dev/zero) or a file over its stated limit is refused promptly, naming
// the path and the reason, instead of hanging or reading without end (exit 2 at the command line).
//
// Invariant: a successful open is of a regular file no larger than its limit; ReadInputFile
// never returns more than max_bytes (a file that grows past the limit while read is an error).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace pentamesh::core {

// The stated limits (docs/commands.md, "Input rules and limits"), by kind of file.
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;  // TOML, JSON, scripts: 16 MiB
inline constexpr int64_t kMaxLogFileBytes = int64_t{1} << 30;      // metrics.jsonl, traces: 1 GiB
inline constexpr int64_t kMaxDataFileBytes = int64_t{1} << 40;  // corpora, tensors, shards: 1 TiB

// Opens `path` read-only (without blocking on a FIFO, without becoming its controlling
// terminal), checks it is a regular file of at most `max_bytes`, and returns the descriptor
// (close-on-exec; the caller closes it). Errors: "<path>: is a directory", "<path>: is a FIFO
// (named pipe), not a regular file", "<path>: is a character device, not a regular file",
// "<path>: N bytes is over the limit of M bytes for <what>", "<path>: cannot open: <errno>".
Result<int> OpenInputFile(const std::string& path, int64_t max_bytes, std::string_view what);

// The whole content of `path` through OpenInputFile.
Result<std::string> ReadInputFile(const std::string& path, int64_t max_bytes,
                                  std::string_view what);

// OpenInputFile's checks alone (the file is opened and closed again), for readers that stream
// the file with their own reader (xz, sentencepiece, mmap).
Status CheckInputFile(const std::string& path, int64_t max_bytes, std::string_view what);

}  // namespace pentamesh::core
