#include "core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/find_on_path.h"

extern char** environ;

namespace pentamesh::core {

Status RunProcess(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) return Status::Error("cannot start a process without a command");
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  if (!options.log.empty()) {
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, options.log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  }
  posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &files, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::Error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, options.timeout_s > 0 ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return Status::Error(fmt::format("waiting for {}: {}", argv[0], std::strerror(errno)));
    }
    if (options.timeout_s <= 0) continue;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > options.timeout_s) {
      kill(-pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(2));
      kill(-pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return Status::Error(fmt::format("killed after the time limit of {:g} s", options.timeout_s));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Status::Error(WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                         : fmt::format("killed by signal {}", WTERMSIG(status)));
}

std::vector<std::string> MpirunArgs(const std::string& mpirun, int ranks) {
  return {mpirun, "-np", std::to_string(ranks), "--oversubscribe", "--mca", "btl", "self,vader"};
}

Result<std::string> FindLauncher(const std::string& name, const std::string& field) {
  std::string path = FindOnPath(name);
  if (path.empty()) {
    return Status::Error(fmt::format(
        "{}: '{}' is not on PATH (install Open MPI: apt-get install openmpi-bin, or put its bin "
        "directory on PATH)",
        field, name));
  }
  return path;
}

std::string SelfExecutable() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

}  // namespace pentamesh::core
