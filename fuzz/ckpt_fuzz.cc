// libFuzzer target for the checkpoint readers: arbitrary bytes as (a) a safetensors file and
// (b) a checkpoint manifest.json next to a valid rank file, opened and fully read back. Each must
// return a value or a Status naming the file, never crash, over-read or throw.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"

namespace {

const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/pm_ckpt_fuzz_XXXXXX";
    std::string d = mkdtemp(tmpl);
    const float w[6] = {1, 2, 3, 4, 5, 6};
    std::ofstream(d + "/rank-00000.safetensors", std::ios::binary)
        << pentamesh::ckpt::EncodeSafetensors(
               {{"w",
                 "F32",
                 {2, 3},
                 std::string_view(reinterpret_cast<const char*>(w), sizeof(w))}});
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh::ckpt;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto st = ParseSafetensors(bytes, "fuzz");
  if (st.ok()) {
    for (const StTensor& t : st->tensors) {
      volatile char sink = 0;
      for (char c : t.data) sink = static_cast<char>(sink ^ c);
    }
  }
  std::ofstream(Dir() + "/manifest.json", std::ios::binary | std::ios::trunc) << bytes;
  auto c = Checkpoint::Open(Dir());
  if (c.ok() && c->Has("w")) {
    std::vector<float> out(6);
    (void)c->ReadRegion("w", {2, 3}, {0, 0}, {2, 3}, out.data());
    (void)c->ReadRegion("w", {2, 3}, {1, 1}, {1, 2}, out.data());
  }
  return 0;
}
