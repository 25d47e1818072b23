// core/output.h: files are replaced whole or not at all (no temporary left behind), symlinks at
// the final path are refused and their targets untouched, devices are written in place with
// errors reported (/dev/full), and a write cut short (RLIMIT_FSIZE, the way a full disk cuts it)
// leaves the previous content.
#include "core/output.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pentamesh::core {
namespace {
namespace fs = std::filesystem;

std::string TempDir(const std::string& tag) {
  std::string pattern = (fs::temp_directory_path() / ("pm_output_" + tag + "_XXXXXX")).string();
  const char* made = ::mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr);
  return pattern;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

TEST(WriteFileAtomic, WritesAndReplacesWholeLeavingNoTemporary) {
  const std::string dir = TempDir("replace");
  const std::string path = dir + "/out.txt";
  ASSERT_TRUE(WriteFileAtomic(path, "first\n").ok());
  EXPECT_EQ(Read(path), "first\n");
  const std::string big(1 << 20, 'x');
  ASSERT_TRUE(WriteFileAtomic(path, big).ok());
  EXPECT_EQ(Read(path), big);
  EXPECT_EQ(Names(dir), std::vector<std::string>{"out.txt"});
  ASSERT_TRUE(WriteFileAtomic(dir + "/run.sh", "#!/bin/sh\n", /*executable=*/true).ok());
  EXPECT_NE(fs::status(dir + "/run.sh").permissions() & fs::perms::owner_exec, fs::perms::none);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::owner_exec, fs::perms::none);
}

TEST(WriteFileAtomic, SymlinkAtTheFinalPathRefusedAndTargetUntouched) {
  const std::string dir = TempDir("symlink");
  const std::string target = dir + "/precious";
  std::ofstream(target) << "keep me";
  fs::create_symlink(target, dir + "/out.html");
  const Status st = WriteFileAtomic(dir + "/out.html", "<html>");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir + "/out.html"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("symbolic link"), std::string::npos) << st.message();
  EXPECT_EQ(Read(target), "keep me");
  EXPECT_TRUE(fs::is_symlink(dir + "/out.html"));
  // A dangling link (a target the program would create) is refused too.
  fs::create_symlink(dir + "/not-yet", dir + "/dangling");
  EXPECT_FALSE(WriteFileAtomic(dir + "/dangling", "x").ok());
  EXPECT_FALSE(fs::exists(dir + "/not-yet"));
}

TEST(WriteFileAtomic, BadPathsNamed) {
  const std::string dir = TempDir("bad");
  const Status missing = WriteFileAtomic(dir + "/no/such/dir/f", "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("directory '" + dir + "/no/such/dir' does not exist"),
            std::string::npos)
      << missing.message();
  const Status is_dir = WriteFileAtomic(dir, "x");
  ASSERT_FALSE(is_dir.ok());
  EXPECT_NE(is_dir.message().find("is a directory"), std::string::npos) << is_dir.message();
}

TEST(WriteFileAtomic, DeviceWrittenInPlaceWithErrorsReported) {
  EXPECT_TRUE(WriteFileAtomic("/dev/null", "anything").ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  const Status full = WriteFileAtomic("/dev/full", "anything");
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.message().find("cannot write /dev/full: No space left on device"),
            std::string::npos)
      << full.message();
}

// A write cut short keeps the previous file whole and leaves no temporary.
TEST(WriteFileAtomic, ShortWriteKeepsThePreviousContent) {
  const std::string dir = TempDir("short");
  const std::string path = dir + "/profile.toml";
  ASSERT_TRUE(WriteFileAtomic(path, "old = 1\n").ok());
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status st = WriteFileAtomic(path, std::string(100000, 'y'));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot write " + path + ": File too large (nothing was written)"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(Read(path), "old = 1\n");
  EXPECT_EQ(Names(dir), std::vector<std::string>{"profile.toml"});
}

}  // namespace
}  // namespace pentamesh::core
