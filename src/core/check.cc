#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace pentamesh::core {

CheckFailure::CheckFailure(const char* expr, const char* file, int line) {
  stream_ << file << ":" << line << ": check failed: " << expr << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace pentamesh::core
