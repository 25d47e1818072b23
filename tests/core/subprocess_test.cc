// core/subprocess.h against /bin/sh: the exit status and signals are reported as they happened,
// the log holds stdout and stderr, a missing program is "cannot start", and a time limit kills
// the whole process group (a grandchild that outlives its parent included).
#include "core/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "testing/temp_dir.h"

namespace pentamesh::core {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RunProcess, ExitStatusSignalAndLog) {
  const std::string dir = testing::MakeTempDir("subprocess");
  const std::string log = dir + "/log.txt";
  EXPECT_TRUE(RunProcess({"/bin/sh", "-c", "echo out; echo err >&2"}, {.log = log}).ok());
  EXPECT_EQ(Read(log), "out\nerr\n");
  const Status three = RunProcess({"/bin/sh", "-c", "exit 3"});
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.message(), "exit status 3");
  const Status killed = RunProcess({"/bin/sh", "-c", "kill -9 $$"});
  ASSERT_FALSE(killed.ok());
  EXPECT_EQ(killed.message(), "killed by signal 9");
  const Status missing = RunProcess({dir + "/no-such-program"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message().rfind("cannot start " + dir + "/no-such-program: ", 0), 0u)
      << missing.message();
  // stdin is /dev/null: a reader sees end of file at once instead of waiting on the terminal.
  EXPECT_TRUE(RunProcess({"/bin/sh", "-c", "cat > /dev/null"}).ok());
}

TEST(RunProcess, TimeLimitKillsTheProcessGroup) {
  const std::string dir = testing::MakeTempDir("subprocess");
  const std::string pid_file = dir + "/grandchild.pid";
  // The shell starts a grandchild that would outlive it, records its pid, and waits.
  const Status s = RunProcess({"/bin/sh", "-c", "sleep 60 & echo $! > " + pid_file + "; wait"},
                              {.log = "", .timeout_s = 0.5});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "killed after the time limit of 0.5 s");
  const pid_t grandchild = static_cast<pid_t>(std::stol(Read(pid_file)));
  // Killed with its group (it may linger as a zombie of init for a moment: poll briefly).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0;
    if (!gone) usleep(20000);
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived the time limit";
}

TEST(MpirunArgs, SharedMemoryOversubscribed) {
  EXPECT_EQ(MpirunArgs("/usr/bin/mpirun", 4),
            (std::vector<std::string>{"/usr/bin/mpirun", "-np", "4", "--oversubscribe", "--mca",
                                      "btl", "self,vader"}));
}

TEST(FindLauncher, MissingNamesTheField) {
  const auto r = FindLauncher("pentamesh-no-such-launcher", "--mpirun");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("--mpirun: 'pentamesh-no-such-launcher' is not on PATH", 0),
            0u)
      << r.status().message();
  EXPECT_EQ(*FindLauncher("/bin/sh", "--mpirun"), "/bin/sh");
  EXPECT_FALSE(SelfExecutable().empty());
}

}  // namespace
}  // namespace pentamesh::core
