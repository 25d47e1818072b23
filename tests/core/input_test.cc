// core/input.h: a FIFO (no writer), /dev/zero, a directory and a file over its limit are refused
// at once naming the path and the reason; a regular file within the limit reads whole.
#include "core/input.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "testing/temp_dir.h"

namespace pentamesh::core {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(InputFile, FifoRefusedPromptly) {
  const std::string fifo = testing::MakeTempDir("input") + "/pipe.toml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const auto r = ReadInputFile(fifo, kMaxConfigFileBytes, "config file");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status().message(), fifo + ": is a FIFO")) << r.status().message();
  EXPECT_LT(seconds, 1.0);  // no writer ever comes: a blocking open would never return
}

TEST(InputFile, DevicesAndDirectoriesRefused) {
  const auto zero = ReadInputFile("/dev/zero", kMaxConfigFileBytes, "config file");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(Has(zero.status().message(), "/dev/zero: is a character device, not a regular file"))
      << zero.status().message();
  const std::string dir = testing::MakeTempDir("input");
  const auto d = ReadInputFile(dir, kMaxConfigFileBytes, "config file");
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(Has(d.status().message(), dir + ": is a directory")) << d.status().message();
  const auto missing = CheckInputFile(dir + "/nope", kMaxConfigFileBytes, "corpus file");
  EXPECT_TRUE(Has(missing.message(), dir + "/nope: cannot open: No such file"))
      << missing.message();
}

TEST(InputFile, SizeLimitIsExact) {
  const std::string path = testing::MakeTempDir("input") + "/f.json";
  std::ofstream(path) << std::string(100, 'x');
  const auto at = ReadInputFile(path, 100, "config file");
  ASSERT_TRUE(at.ok()) << at.status().message();
  EXPECT_EQ(*at, std::string(100, 'x'));
  const auto over = ReadInputFile(path, 99, "config file");
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(Has(over.status().message(),
                  path + ": 100 bytes is over the limit of 99 bytes for a config file"))
      << over.status().message();
  // The descriptor OpenInputFile returns reads the file (blocking mode restored).
  auto fd = OpenInputFile(path, 100, "config file");
  ASSERT_TRUE(fd.ok());
  char c = 0;
  EXPECT_EQ(read(*fd, &c, 1), 1);
  EXPECT_EQ(c, 'x');
  close(*fd);
}

}  // namespace
}  // namespace pentamesh::core
