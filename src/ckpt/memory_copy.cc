#include "ckpt/memory_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "ckpt/crc32c.h"
#include "core/input.h"

namespace pentamesh::ckpt {
namespace fs = std::filesystem;

namespace {

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool GetU64(std::string_view in, size_t* pos, uint64_t* v) {
  if (in.size() - *pos < 8) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i)
    *v |= static_cast<uint64_t>(static_cast<unsigned char>(in[*pos + static_cast<size_t>(i)]))
          << (8 * i);
  *pos += 8;
  return true;
}

}  // namespace

std::string MemoryJobDir(const std::string& shm_root, const std::string& key) {
  return shm_root + "/pentamesh-" + key;
}

std::string OwnCopyRoot(const std::string& job_dir, int rank) {
  return fmt::format("{}/rank-{:05d}", job_dir, rank);
}

std::string HeldCopyRoot(const std::string& job_dir, int of_rank) {
  return fmt::format("{}/partner-of-{:05d}", job_dir, of_rank);
}

std::string MemoryJobKey(const std::string& ckpt_dir) {
  std::error_code ec;
  fs::path path = fs::absolute(ckpt_dir, ec);
  if (ec) path = ckpt_dir;
  const std::string text = path.lexically_normal().string();
  return fmt::format("{:08x}", Crc32c(text.data(), text.size()));
}

std::string MemoryKeyProblem(const std::string& key) {
  if (key.empty() || key.size() > 64) return "must be 1 to 64 characters";
  if (key[0] == '.') return "must not start with '.'";
  for (const char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return fmt::format("character '{}' is not one of A-Z a-z 0-9 . _ -", c);
  }
  return "";
}

core::Result<Files> ReadDirFiles(const std::string& dir) {
  Files files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    PM_ASSIGN_OR_RETURN(std::string bytes,
                        core::ReadInputFile(e.path().string(), core::kMaxDataFileBytes,
                                            "in-memory checkpoint file"));
    files.emplace_back(e.path().filename().string(), std::move(bytes));
  }
  if (ec) return core::Status::Error(fmt::format("cannot list {}: {}", dir, ec.message()));
  std::sort(files.begin(), files.end());
  return files;
}

core::Status PublishFiles(const std::string& root, int64_t step, const Files& files, Env* env) {
  if (env == nullptr) env = Env::Default();
  PM_RETURN_IF_ERROR(env->CreateDir(fs::path(root).parent_path().string()));
  PM_RETURN_IF_ERROR(env->CreateDir(root));
  const std::string tmp = StepTmpDir(root, step);
  if (fs::exists(tmp)) PM_RETURN_IF_ERROR(env->RemoveAll(tmp));
  PM_RETURN_IF_ERROR(env->CreateDir(tmp));
  for (const auto& [name, bytes] : files)
    PM_RETURN_IF_ERROR(env->WriteFile(tmp + "/" + name, bytes));
  return PublishStep({.root = root, .keep = INT_MAX, .env = env, .all_ok = {}}, step);
}

core::Status KeepOnly(const std::string& root, int64_t step, Env* env) {
  if (env == nullptr) env = Env::Default();
  const std::string keep = StepDirName(step);
  std::vector<std::string> doomed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name != keep) doomed.push_back(e.path().string());
  }
  for (const std::string& d : doomed) PM_RETURN_IF_ERROR(env->RemoveAll(d));
  return core::Status::Ok();
}

std::string PackFiles(const Files& files) {
  std::string out;
  PutU64(out, files.size());
  for (const auto& [name, bytes] : files) {
    PutU64(out, name.size());
    out += name;
    PutU64(out, bytes.size());
    out += bytes;
  }
  return out;
}

core::Result<Files> UnpackFiles(std::string_view packed, const std::string& what) {
  size_t pos = 0;
  uint64_t count = 0;
  const auto truncated = [&] {
    return core::Status::Error(
        fmt::format("{}: truncated at byte {} of {}", what, pos, packed.size()));
  };
  if (!GetU64(packed, &pos, &count)) return truncated();
  Files files;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t name_size = 0, size = 0;
    if (!GetU64(packed, &pos, &name_size) || packed.size() - pos < name_size) return truncated();
    std::string name(packed.substr(pos, name_size));
    pos += name_size;
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      return core::Status::Error(fmt::format("{}: bad file name '{}'", what, name));
    if (!GetU64(packed, &pos, &size) || packed.size() - pos < size) return truncated();
    files.emplace_back(std::move(name), std::string(packed.substr(pos, size)));
    pos += size;
  }
  if (pos != packed.size())
    return core::Status::Error(
        fmt::format("{}: {} bytes after the last file", what, packed.size() - pos));
  return files;
}

}  // namespace pentamesh::ckpt
