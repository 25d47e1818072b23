#include "data/xz_text.h"

#include <fmt/format.h>
#include <lzma.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/input.h"

namespace pentamesh::data {

namespace fs = std::filesystem;

namespace {

const char* LzmaReason(lzma_ret ret) {
  switch (ret) {
    case LZMA_FORMAT_ERROR:
      return "not an xz file";
    case LZMA_DATA_ERROR:
      return "corrupt xz data";
    case LZMA_BUF_ERROR:
      return "truncated xz data";
    case LZMA_MEM_ERROR:
      return "out of memory";
    case LZMA_OPTIONS_ERROR:
      return "unsupported xz options";
    case LZMA_UNSUPPORTED_CHECK:
      return "unsupported xz integrity check";
    default:
      return "xz decoder error";
  }
}

// Decodes `in` into `out`; the error is the reason alone (the caller names the file).
core::Status Decode(std::ifstream& in, std::ofstream& out) {
  lzma_stream strm = LZMA_STREAM_INIT;
  lzma_ret ret = lzma_stream_decoder(&strm, UINT64_MAX, LZMA_CONCATENATED);
  if (ret != LZMA_OK) return core::Status::Error(LzmaReason(ret));
  const std::unique_ptr<lzma_stream, void (*)(lzma_stream*)> guard(&strm, lzma_end);
  std::vector<char> inbuf(1 << 16), outbuf(1 << 18);
  lzma_action action = LZMA_RUN;
  strm.next_out = reinterpret_cast<uint8_t*>(outbuf.data());
  strm.avail_out = outbuf.size();
  while (true) {
    if (strm.avail_in == 0 && action == LZMA_RUN) {
      in.read(inbuf.data(), static_cast<std::streamsize>(inbuf.size()));
      if (in.bad()) return core::Status::Error("read error");
      strm.next_in = reinterpret_cast<const uint8_t*>(inbuf.data());
      strm.avail_in = static_cast<size_t>(in.gcount());
      if (in.eof()) action = LZMA_FINISH;
    }
    ret = lzma_code(&strm, action);
    if (strm.avail_out == 0 || ret == LZMA_STREAM_END) {
      out.write(outbuf.data(), static_cast<std::streamsize>(outbuf.size() - strm.avail_out));
      if (!out) return core::Status::Error("write error");
      strm.next_out = reinterpret_cast<uint8_t*>(outbuf.data());
      strm.avail_out = outbuf.size();
    }
    if (ret == LZMA_STREAM_END) return core::Status::Ok();
    if (ret != LZMA_OK) return core::Status::Error(LzmaReason(ret));
  }
}

}  // namespace

bool IsXz(const std::string& path) { return fs::path(path).extension() == ".xz"; }

core::Result<std::string> UnpackedText(const std::string& path, const std::string& dir,
                                       const std::string& field) {
  if (!IsXz(path)) return path;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return core::Status::Error(
        fmt::format("{}: {} does not exist or is not a regular file", field, path));
  }
  const fs::path target = fs::path(dir) / fs::path(path).stem();
  if (fs::is_regular_file(target, ec)) return target.string();
  fs::create_directories(dir, ec);
  if (ec) {
    return core::Status::Error(
        fmt::format("{}: cannot create {} to unpack {}: {}", field, dir, path, ec.message()));
  }
  const fs::path temp = target.string() + fmt::format(".tmp{}", static_cast<long>(getpid()));
  std::ifstream in(path, std::ios::binary);
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  if (!in || !out) {
    return core::Status::Error(
        fmt::format("{}: cannot {} {}", field, !in ? "read" : "write", !in ? path : temp.string()));
  }
  core::Status st = Decode(in, out);
  out.close();
  if (st.ok() && !out) st = core::Status::Error("write error");
  if (!st.ok()) {
    fs::remove(temp, ec);
    return core::Status::Error(fmt::format("{}: cannot unpack {}: {}", field, path, st.message()));
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    return core::Status::Error(
        fmt::format("{}: cannot write {}: {}", field, target.string(), ec.message()));
  }
  return target.string();
}

core::Result<std::vector<std::string>> UnpackedTexts(const std::vector<std::string>& paths,
                                                     const std::string& dir,
                                                     const std::string& field) {
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    PM_ASSIGN_OR_RETURN(std::string text, UnpackedText(path, dir, field));
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace pentamesh::data
