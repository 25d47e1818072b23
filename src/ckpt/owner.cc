#include "ckpt/owner.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/input.h"

namespace pentamesh::ckpt {
namespace fs = std::filesystem;

namespace {

bool IsRunId(const std::string& id) {
  return id.size() == 16 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The owner's id; nullopt when root has no owner file.
core::Result<std::optional<std::string>> ReadOwner(const std::string& root) {
  const fs::path path = fs::path(root) / kOwnerFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::optional<std::string>();
  if (!fs::is_regular_file(fs::symlink_status(path, ec)))
    return core::Status::Error(
        fmt::format("{}: the owner file is not a regular file", path.string()));
  PM_ASSIGN_OR_RETURN(
      const std::string text,
      core::ReadInputFile(path.string(), core::kMaxConfigFileBytes, "checkpoint owner file"));
  const std::string id = text.substr(0, text.find('\n'));
  if (!IsRunId(id))
    return core::Status::Error(
        fmt::format("{}: the owner file should hold a run id (16 hex digits), not '{}'",
                    path.string(), id.substr(0, 40)));
  return std::optional<std::string>(id);
}

// Entries a run leaves in a root: step-N (and step-N.tmp, step-N.damaged...) and `latest`.
std::vector<fs::path> RunEntries(const std::string& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 || name == "latest" || name == "latest.tmp")
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

core::Status WriteOwner(const std::string& root, const std::string& id, Env* env) {
  const std::string tmp = fmt::format("{}/{}.tmp", root, kOwnerFile);
  PM_RETURN_IF_ERROR(env->WriteFile(tmp, id + "\n"));
  PM_RETURN_IF_ERROR(env->Rename(tmp, root + "/" + kOwnerFile));
  return env->SyncDir(root);
}

}  // namespace

std::string NewRunId() {
  std::random_device rd;
  const uint64_t id = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  return fmt::format("{:016x}", id);
}

core::Result<std::string> ClaimRoot(const std::string& root, const ClaimOptions& o) {
  Env* env = o.env ? o.env : Env::Default();
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    return core::Status::Error(
        fmt::format("ckpt.dir: {} exists and is not a directory; no checkpoint could be saved "
                    "there",
                    root));
  // The claim comes before anything else of the run is written, so the parents of ckpt.dir
  // (e.g. inside run.out_dir) may not exist yet; a failure here shows in CreateDir below.
  if (const fs::path parent = fs::path(root).parent_path(); !parent.empty()) {
    fs::create_directories(parent, ec);
  }
  PM_RETURN_IF_ERROR(env->CreateDir(root));
  PM_ASSIGN_OR_RETURN(const std::optional<std::string> owner, ReadOwner(root));
  const std::vector<fs::path> entries = RunEntries(root);
  if (o.resume) {
    if (owner) return *owner;
    const std::string id = NewRunId();
    PM_RETURN_IF_ERROR(WriteOwner(root, id, env));
    return id;
  }
  if ((owner || !entries.empty()) && !o.overwrite) {
    const std::vector<std::string> ckpts = ListCheckpoints(root);
    return core::Status::Error(fmt::format(
        "ckpt.dir {} holds the checkpoints of run {} ({}); a fresh run would overwrite and prune "
        "them. Pass "
        "--resume auto to continue that run, --overwrite to replace it, or choose another "
        "ckpt.dir",
        root, owner ? *owner : std::string("(no owner file: saved before run ids)"),
        ckpts.empty() ? fmt::format("{} step entries, none complete", entries.size())
                      : fmt::format("{} checkpoints, newest {}", ckpts.size(), ckpts.front())));
  }
  for (const fs::path& p : entries) PM_RETURN_IF_ERROR(env->RemoveAll(p.string()));
  const std::string id = NewRunId();
  PM_RETURN_IF_ERROR(WriteOwner(root, id, env));
  return id;
}

}  // namespace pentamesh::ckpt
