#include "train/host_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "comm/mpi_communicator.h"
#include "core/output.h"
#include "data/token_shards.h"
#include "kernels/cpu/matmul.h"

namespace pentamesh::train {

namespace fs = std::filesystem;

namespace {

// Printable ASCII only (library version strings may end in a NUL or hold newlines), one line.
std::string OneLine(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch >= 0x20 && ch < 0x7f)
      out += ch;
    else if (ch == '\n' || ch == '\t')
      out += ' ';
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "unknown";
}

// An exclusive flock on a file, released (and the descriptor closed) when it goes out of scope.
class FileLock {
 public:
  static core::Result<FileLock> Acquire(const std::string& path) {
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0) {
      return core::Status::Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    }
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return core::Status::Error(fmt::format("cannot lock {}: {}", path, std::strerror(err)));
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

std::string ProfileFile(const HostKey& key, const HostProfile& profile) {
  std::string header =
      "# This host, measured by `pentamesh train` for runs without run.host_profile\n"
      "# (train/host_cache.h). Its key; a change of any of these measures anew:\n";
  std::string key_text = key.Text();
  for (size_t start = 0; start < key_text.size();) {
    const size_t end = key_text.find('\n', start);
    header += "#   " + key_text.substr(start, end - start) + "\n";
    start = end == std::string::npos ? key_text.size() : end + 1;
  }
  return header + HostProfileToml(profile);
}

// The cache file's profile, measuring and writing it under the lock when it is missing or cannot
// be read (a file of an older format is measured anew).
core::Result<HostProfile> LoadOrMeasureHost(const HostKey& key, const std::string& path,
                                            HostCacheOutcome& outcome) {
  PM_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(path + ".lock"));
  (void)lock;
  if (fs::exists(path)) {
    auto cached = LoadHostProfile(path);
    if (cached.ok()) return *cached;
  }
  const auto start = std::chrono::steady_clock::now();
  const int blas_threads = kernels::BlasThreads();
  HostProfile profile = MeasureHost(/*threads=*/0, /*repetitions=*/3);
  kernels::SetBlasThreads(blas_threads);
  outcome.measured_host = true;
  outcome.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PM_RETURN_IF_ERROR(core::WriteFileAtomic(path, ProfileFile(key, profile)));
  return profile;
}

// Adds `comm` to the cache file (re-read under the lock: another job may have added entries).
core::Status StoreComm(const HostKey& key, const std::string& path, const CommProfile& comm) {
  PM_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(path + ".lock"));
  (void)lock;
  PM_ASSIGN_OR_RETURN(HostProfile profile, LoadHostProfile(path));
  if (profile.CommFor(comm.ranks) != nullptr) return core::Status::Ok();
  profile.comm.push_back(comm);
  std::sort(profile.comm.begin(), profile.comm.end(),
            [](const CommProfile& a, const CommProfile& b) { return a.ranks < b.ranks; });
  return core::WriteFileAtomic(path, ProfileFile(key, profile));
}

}  // namespace

std::string HostKey::Text() const {
  return fmt::format("cpu: {}\nhardware threads: {}\nblas: {}\nmpi: {}\nmeasurement: {}", cpu_model,
                     cores, blas, mpi, kHostMeasureVersion);
}

std::string HostKey::FileName() const {
  const std::string text = Text();
  return fmt::format("host-{:016x}.toml", data::Fnv1a64(text.data(), text.size()));
}

HostKey ThisHostKey() {
  return {.cpu_model = OneLine(CpuModel()),
          .cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
          .blas = OneLine(kernels::BlasConfig()),
          .mpi = OneLine(comm::MpiLibraryVersion())};
}

core::Result<std::string> HostCacheDir() {
  if (const char* dir = std::getenv("PENTAMESH_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return std::string(dir);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "pentamesh").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".cache" / "pentamesh").string();
  }
  return core::Status::Error(
      "no directory to cache it in (none of PENTAMESH_CACHE_DIR, XDG_CACHE_HOME, HOME is set)");
}

namespace {

// UseCachedHostProfile on one rank; `world` is null or has several ranks. Every rank of `world`
// reaches each of its collectives (the failures are agreed on by the caller), so a rank that
// fails here still takes part in the decision and in the measurement.
core::Status ResolveOnRank(RunConfig& config, comm::Communicator* world, HostCacheOutcome& outcome,
                           HostProfile& profile) {
  core::Status status = core::Status::Ok();
  const HostKey key = ThisHostKey();
  auto dir = HostCacheDir();
  if (!dir.ok()) {
    status = dir.status();
  } else {
    std::error_code ec;
    fs::create_directories(*dir, ec);
    outcome.path = (fs::path(*dir) / key.FileName()).string();
    if (ec) {
      status = core::Status::Error(fmt::format("cannot create {}: {}", *dir, ec.message()));
    } else if (auto loaded = LoadOrMeasureHost(key, outcome.path, outcome); loaded.ok()) {
      profile = *loaded;
    } else {
      status = loaded.status();
    }
  }
  if (world == nullptr) return status;
  const int ranks = world->size();
  const int per_host = config.run.ranks_per_host > 0 ? config.run.ranks_per_host : ranks;
  // Rank 0 decides for every rank, so all of them enter the measurement or none does.
  int32_t measure = 0;
  if (world->rank() == 0) {
    measure = status.ok() && per_host == ranks && profile.CommFor(ranks) == nullptr ? 1 : 0;
  }
  world->broadcast(&measure, 1, core::Dtype::kI32, 0);
  outcome.comm_nominal = per_host != ranks;
  if (measure == 0) return status;
  const auto start = std::chrono::steady_clock::now();
  CommProfile comm;
  comm.ranks = ranks;
  comm.samples =
      MeasureCollectives(*world, {.min_bytes = 4 << 10, .max_bytes = 16 << 20, .repetitions = 3});
  comm.fit = FitCollectives(ranks, comm.samples);
  outcome.measured_comm = true;
  outcome.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) return status;
  profile.comm.push_back(comm);
  if (world->rank() == 0) return StoreComm(key, outcome.path, comm);
  return core::Status::Ok();
}

}  // namespace

core::Result<HostCacheOutcome> UseCachedHostProfile(RunConfig& config, comm::Communicator* world) {
  HostCacheOutcome outcome;
  if (!config.run.auto_host_profile) return outcome;
  if (world != nullptr && world->size() == 1) world = nullptr;
  HostProfile profile;
  const core::Status status = ResolveOnRank(config, world, outcome, profile);
  int32_t failed = status.ok() ? 0 : 1;
  if (world != nullptr) world->all_reduce(&failed, 1, core::Dtype::kI32);
  if (failed != 0) {
    return core::Status::Error(fmt::format(
        "run.host_profile: measuring this host into its cache failed: {} (set run.host_profile "
        "to a `pentamesh calibrate --host` file, PENTAMESH_CACHE_DIR to a writable directory, or "
        "run.host_profile = \"none\" for nominal numbers)",
        status.ok() ? "on another rank (see its message)" : status.message()));
  }
  UseHostProfile(config.run, profile);
  config.run.host_profile = outcome.path;  // where the numbers came from, for the run's messages
  return outcome;
}

}  // namespace pentamesh::train
