// Compressed text inputs: a corpus shipped as an .xz file (data/finance_corpus.txt.xz) is
// unpacked once to a plain text file beside the data it feeds, and the tokenizer reads that.
// The output is written to a temporary name and renamed, so an existing unpacked file is always
// complete and is reused as it is.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace pentamesh::data {

// True when `path` names an .xz file (by its suffix).
bool IsXz(const std::string& path);

// `path` itself when it is not an .xz file; else the path of its contents unpacked into `dir`
// (created if missing) under the file's name without ".xz", unpacking it if that file does not
// exist yet. Errors name `field` (e.g. "data.corpus") and the reason: a missing file, data that
// is not xz or is truncated, a directory that cannot be written.
core::Result<std::string> UnpackedText(const std::string& path, const std::string& dir,
                                       const std::string& field);

// UnpackedText of each path, in order.
core::Result<std::vector<std::string>> UnpackedTexts(const std::vector<std::string>& paths,
                                                     const std::string& dir,
                                                     const std::string& field);

}  // namespace pentamesh::data
