// Checks every generated HTML page shares (namespace pentamesh::testing):
//   ExpectSelfContained(html)      no script, and no URL but the SVG namespace (nothing fetched);
//   FindChromium()                 the headless browser's path, or "" when none is installed;
//   Screenshot(chromium, html, png) renders the page at 1280 x 2000 and reads back the PNG's size
//                                  and colour count (tests/report/png_check.py).
// Invariant: a page these accept opens offline and renders to a non-blank image.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace pentamesh::testing {

inline void ExpectSelfContained(const std::string& html) {
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // The only URL is the SVG namespace (an identifier, never fetched).
  size_t pos = 0;
  while ((pos = html.find("http", pos)) != std::string::npos) {
    EXPECT_EQ(html.compare(pos, 26, "http://www.w3.org/2000/svg"), 0) << html.substr(pos, 40);
    ++pos;
  }
}

inline std::string FindChromium() {
  for (const char* name : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(name)) return name;
  }
  return "";
}

struct PngInfo {
  uintmax_t bytes = 0;
  int width = 0, height = 0, colours = 0;
};

// Screenshots `html` (a file in `dir`, which also holds the browser profile) into `png`; fails the
// test (fatally: wrap in ASSERT_NO_FATAL_FAILURE) when the browser or the PNG check fails.
inline void Screenshot(const std::string& chromium, const std::string& dir, const std::string& html,
                       const std::string& png, PngInfo* info) {
  const std::string cmd = "cd " + dir + " && timeout 120 " + chromium +
                          " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                          "--user-data-dir=" +
                          dir + "/profile --screenshot=" + png +
                          " --window-size=1280,2000 file://" + html + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(std::filesystem::exists(png));
  info->bytes = std::filesystem::file_size(png);
  const std::string check = "/usr/bin/python3 " PM_SOURCE_DIR "/tests/report/png_check.py " + png;
  FILE* pipe = popen(check.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  ASSERT_EQ(fscanf(pipe, "%d %d %d", &info->width, &info->height, &info->colours), 3);
  EXPECT_EQ(pclose(pipe), 0);
}

}  // namespace pentamesh::testing
