// libFuzzer target for the Hugging Face config.json reader (ckpt/hf.h ImportHf, as `import --hf`
// reads it): arbitrary bytes as DIR/config.json of a directory with no weights. ImportHf must
// return a Status naming the file (the config's field, or the missing weights), never crash,
// throw, or allocate for the model before its config is accepted.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "ckpt/hf.h"

namespace {

const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/pm_hf_fuzz_XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  {
    std::ofstream out(Dir() + "/config.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto imported = ckpt::ImportHf(Dir());
  if (imported.ok()) __builtin_trap();  // there are no weights to import
  if (imported.status().message().empty()) __builtin_trap();
  return 0;
}
