// Vega's minified JavaScript, embedded at build time by cmake/embed_vega.cmake from Debian's
// libjs-vega (one UMD file per Vega package). report/chart.cc is the only reader: it inlines
// these modules, with a small CommonJS loader, into every page that has a chart.
#pragma once

#include <cstddef>

namespace pentamesh::report {

struct VegaModule {
  const char* name;  // as the files require() it: "vega-util", "vega-selections", ...
  const unsigned char* data;
  size_t size;
};

extern const VegaModule kVegaModules[];
extern const size_t kVegaModuleCount;
extern const char kVegaVersion[];  // "libjs-vega 5.22.1+ds+~3.1.0-4", or "unknown"

}  // namespace pentamesh::report
