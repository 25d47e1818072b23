// libFuzzer target for the host profile reader (train/host_profile.h LoadHostProfile, as
// `run.host_profile`, `tune --host-profile` and `plan --host-profile` read it): arbitrary bytes as
// the profile file. Reading must return the profile or a Status naming the file and the field,
// never crash or throw. A profile it accepts written back by HostProfileToml (what `calibrate
// --host` writes) reads back with the same numbers (to the 6 digits written), and a run config of
// configs/tiny-dense.toml on it (one rank, and two ranks with dp) is costed as the engine's
// prediction (train/host_cost.h PredictRun) with a finite, positive step time.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "train/host_cost.h"
#include "train/host_profile.h"
#include "train/run_config.h"

namespace {

const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/pm_host_fuzz_XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

bool Near(double a, double b) { return std::abs(a - b) <= 1e-5 * std::abs(a); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pentamesh;
  const std::string path = Dir() + "/host.toml";
  Write(path, std::string(reinterpret_cast<const char*>(data), size));
  auto host = train::LoadHostProfile(path);
  if (!host.ok()) {
    if (host.status().message().find(path) == std::string::npos) __builtin_trap();
    return 0;
  }
  const train::HostProfile& h = *host;
  const std::string written = Dir() + "/written.toml";
  Write(written, train::HostProfileToml(h));
  auto back = train::LoadHostProfile(written);
  if (!back.ok()) {
    std::fprintf(stderr, "host_fuzz: written profile unreadable: %s\n",
                 back.status().message().c_str());
    __builtin_trap();
  }
  if (back->threads != h.threads || back->cores != h.cores ||
      !Near(back->peak_gflops, h.peak_gflops) || !Near(back->mem_gbps, h.mem_gbps) ||
      back->comm.size() != h.comm.size()) {
    __builtin_trap();
  }
  for (const char* layout : {"mbs=4", "mbs=2 dp=2"}) {
    auto config = train::LoadRunConfig(
        std::string(PM_SOURCE_DIR) + "/configs/tiny-dense.toml",
        {"run.host_profile=\"" + path + "\"", std::string("run.layout=\"") + layout + "\""});
    if (!config.ok()) {
      // The file read above; the config may still refuse the host's numbers, naming them.
      if (config.status().message().find("host") == std::string::npos) {
        std::fprintf(stderr, "host_fuzz: %s\n", config.status().message().c_str());
        __builtin_trap();
      }
      continue;
    }
    const cost::Estimate e = train::PredictRun(*config);
    if (!(e.time.step > 0) || !std::isfinite(e.time.step)) {
      std::fprintf(stderr, "host_fuzz: step time %g for %s\n", e.time.step, layout);
      __builtin_trap();
    }
  }
  return 0;
}
