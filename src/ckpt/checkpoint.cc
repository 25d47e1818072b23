#include "ckpt/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "ckpt/crc32c.h"
#include "core/check.h"
#include "core/input.h"

namespace pentamesh::ckpt {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kLatest = "latest";

std::string RankFile(int rank) { return fmt::format("rank-{:05d}.safetensors", rank); }
std::string RankPart(int rank) { return fmt::format("rank-{:05d}.json", rank); }

core::Result<std::string> ReadAll(const std::string& path) {
  return core::ReadInputFile(path, core::kMaxDataFileBytes, "checkpoint file");
}

std::string Hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Rank 0: merges the parts into manifest.json inside tmp.
core::Status WriteManifest(const std::string& tmp, const Snapshot& s, Env* env) {
  json files = json::array(), tensors = json::object();
  for (int r = 0; r < s.world; ++r) {
    PM_ASSIGN_OR_RETURN(std::string text, ReadAll(tmp + "/" + RankPart(r)));
    json part = json::parse(text, nullptr, false);
    if (part.is_discarded()) return core::Status::Error("unreadable manifest part " + RankPart(r));
    for (const json& sl : part["slices"]) {
      json& t = tensors[sl["name"].get<std::string>()];
      if (t.is_null())
        t = {{"dtype", sl["dtype"]}, {"shape", sl["global_shape"]}, {"slices", json::array()}};
      json entry = {{"file", part["file"]}, {"start", sl["start"]}, {"shape", sl["shape"]}};
      if (sl.contains("key")) entry["key"] = sl["key"];
      t["slices"].push_back(std::move(entry));
    }
    files.push_back({{"file", part["file"]}, {"bytes", part["bytes"]}, {"crc32c", part["crc32c"]}});
  }
  const json manifest = {{"format", "pentamesh-checkpoint"},
                         {"version", 1},
                         {"step", s.step},
                         {"world", s.world},
                         {"checksum", "crc32c"},
                         {"files", files},
                         {"tensors", tensors},
                         {"state", s.state}};
  return env->WriteFile(tmp + "/" + kManifest, manifest.dump(1));
}

std::optional<std::string> LatestName(const std::string& root) {
  auto text = ReadAll(root + "/" + kLatest);
  if (!text.ok()) return std::nullopt;
  std::string name = *text;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name;
}

}  // namespace

std::string StepTmpDir(const std::string& root, int64_t step) {
  return root + "/" + StepDirName(step) + ".tmp";
}

core::Status PublishStep(const SaveOptions& o, int64_t step) {
  Env* env = o.env ? o.env : Env::Default();
  const std::string tmp = StepTmpDir(o.root, step);
  const std::string final_dir = o.root + "/" + StepDirName(step);
  PM_RETURN_IF_ERROR(env->SyncDir(tmp));
  if (fs::exists(final_dir)) PM_RETURN_IF_ERROR(env->RemoveAll(final_dir));
  PM_RETURN_IF_ERROR(env->Rename(tmp, final_dir));
  PM_RETURN_IF_ERROR(env->SyncDir(o.root));
  PM_RETURN_IF_ERROR(env->WriteFile(o.root + "/latest.tmp", StepDirName(step) + "\n"));
  PM_RETURN_IF_ERROR(env->Rename(o.root + "/latest.tmp", o.root + "/" + kLatest));
  PM_RETURN_IF_ERROR(env->SyncDir(o.root));
  // Newest first, the one just published (now `latest`) always first: a run resumed from an
  // older checkpoint never has its fresh checkpoints deleted in favour of stale newer-named ones.
  const std::vector<std::string> all = ListCheckpoints(o.root);
  for (size_t i = static_cast<size_t>(std::max(o.keep, 1)); i < all.size(); ++i)
    PM_RETURN_IF_ERROR(env->RemoveAll(all[i]));
  return core::Status::Ok();
}

std::string StepDirName(int64_t step) { return fmt::format("step-{:08d}", step); }

std::optional<int64_t> StepOfDir(const std::string& dir) {
  const std::string name = fs::path(dir).filename().string();
  int64_t step = 0;
  if (name.size() <= 5 || name.rfind("step-", 0) != 0) return std::nullopt;
  const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return step;
}

std::vector<Slice> SnapshotParams(model::ParamSet& params) {
  std::vector<Slice> out;
  params.ForEach([&](const model::ParamInfo& info, core::Tensor master, core::Tensor,
                     core::Tensor m, core::Tensor v) {
    Slice base;
    for (int d = 0; d < info.global_shape.rank; ++d) {
      base.global_shape.push_back(info.global_shape[d]);
      base.shape.push_back(info.local_shape[d]);
      base.start.push_back(d == info.sharding.dim ? info.sharding.rank * info.local_shape[d] : 0);
    }
    const std::pair<std::string, core::Tensor> parts[] = {
        {info.name, master}, {AdamMName(info.name), m}, {AdamVName(info.name), v}};
    for (const auto& [name, t] : parts) {
      Slice s = base;
      s.name = name;
      s.bytes.assign(static_cast<const char*>(t.data()), static_cast<size_t>(t.bytes()));
      out.push_back(std::move(s));
    }
  });
  return out;
}

namespace {

std::string TmpDir(const SaveOptions& o, int64_t step) { return StepTmpDir(o.root, step); }

bool AllOkOf(const SaveOptions& o, bool ok) { return o.all_ok ? o.all_ok(ok) : ok; }

core::Status NotSaved(const SaveOptions& o, int64_t step, const core::Status& st) {
  const std::optional<std::string> latest = LatestName(o.root);
  return core::Status::Error(
      fmt::format("checkpoint {} NOT saved ({}); {}", StepDirName(step),
                  st.ok() ? "another rank failed" : st.message(),
                  latest ? fmt::format("the previous checkpoint {}/{} is intact", o.root, *latest)
                         : std::string("there is no previous checkpoint")));
}

}  // namespace

bool BeginSave(const SaveOptions& o, int64_t step, int rank, core::Status* status) {
  Env* env = o.env ? o.env : Env::Default();
  const std::string tmp = TmpDir(o, step);
  core::Status st;
  if (rank == 0) {
    st = env->CreateDir(o.root);
    if (st.ok() && fs::exists(tmp)) st = env->RemoveAll(tmp);
    if (st.ok()) st = env->CreateDir(tmp);
  }
  const bool ok = AllOkOf(o, st.ok());
  if (!ok) {
    if (rank == 0 && fs::exists(tmp)) (void)env->RemoveAll(tmp);
    *status = NotSaved(o, step, st);
  }
  return ok;
}

core::Status WriteRankFiles(const SaveOptions& o, const Snapshot& s) {
  Env* env = o.env ? o.env : Env::Default();
  const std::string tmp = TmpDir(o, s.step);
  std::vector<StTensor> st;
  json slices = json::array();
  for (const Slice& t : s.tensors) {
    const std::string& key = t.key.empty() ? t.name : t.key;
    st.push_back({key, t.dtype, t.shape, t.bytes});
    json entry = {{"name", t.name},
                  {"dtype", t.dtype},
                  {"global_shape", t.global_shape},
                  {"start", t.start},
                  {"shape", t.shape}};
    if (key != t.name) entry["key"] = key;
    slices.push_back(std::move(entry));
  }
  const std::string bytes = EncodeSafetensors(st, {{"format", "pentamesh"}});
  PM_RETURN_IF_ERROR(env->WriteFile(tmp + "/" + RankFile(s.rank), bytes));
  const json part = {{"file", RankFile(s.rank)},
                     {"rank", s.rank},
                     {"bytes", bytes.size()},
                     {"crc32c", Hex(Crc32c(bytes.data(), bytes.size()))},
                     {"slices", slices}};
  return env->WriteFile(tmp + "/" + RankPart(s.rank), part.dump(1));
}

core::Status CommitSave(const SaveOptions& o, const Snapshot& s, const core::Status& written) {
  Env* env = o.env ? o.env : Env::Default();
  const std::string tmp = TmpDir(o, s.step);
  core::Status st = written;
  bool ok = AllOkOf(o, st.ok());  // every rank's files are durable
  if (ok && s.rank == 0) {
    st = WriteManifest(tmp, s, env);
    if (st.ok()) st = PublishStep(o, s.step);
  }
  ok = AllOkOf(o, st.ok()) && ok;
  if (ok) return core::Status::Ok();
  if (s.rank == 0 && fs::exists(tmp)) (void)env->RemoveAll(tmp);
  return NotSaved(o, s.step, st);
}

core::Status SaveCheckpoint(const SaveOptions& o, const Snapshot& s) {
  core::Status st;
  if (!BeginSave(o, s.step, s.rank, &st)) return st;
  return CommitSave(o, s, WriteRankFiles(o, s));
}

std::vector<Box> FlatRangeBoxes(const std::vector<int64_t>& shape, int64_t begin, int64_t end) {
  std::vector<Box> out;
  if (begin >= end) return out;
  if (shape.empty()) return {Box{{}, {}, begin}};
  // Recursive split: (prefix indices fixed on dims < d) x the range [b, e) of the sub-tensor.
  std::function<void(size_t, std::vector<int64_t>&, int64_t, int64_t, int64_t)> split =
      [&](size_t d, std::vector<int64_t>& prefix, int64_t b, int64_t e, int64_t base) {
        int64_t inner = 1;
        for (size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
        auto emit = [&](int64_t lo_row, int64_t hi_row) {
          Box box;
          box.start = prefix;
          box.shape.assign(prefix.size(), 1);
          box.start.push_back(lo_row);
          box.shape.push_back(hi_row - lo_row);
          for (size_t k = d + 1; k < shape.size(); ++k) {
            box.start.push_back(0);
            box.shape.push_back(shape[k]);
          }
          box.flat_begin = base + lo_row * inner;
          out.push_back(std::move(box));
        };
        if (b % inner == 0 && e % inner == 0) return emit(b / inner, e / inner);
        const int64_t first = b / inner, last = (e - 1) / inner;
        auto row = [&](int64_t r, int64_t rb, int64_t re) {
          prefix.push_back(r);
          split(d + 1, prefix, rb, re, base + r * inner);
          prefix.pop_back();
        };
        if (first == last) return row(first, b - first * inner, e - first * inner);
        int64_t full_lo = first;
        if (b % inner != 0) {
          row(first, b % inner, inner);
          full_lo = first + 1;
        }
        if (full_lo < e / inner) emit(full_lo, e / inner);
        if (e % inner != 0) row(e / inner, 0, e % inner);
      };
  std::vector<int64_t> prefix;
  split(0, prefix, begin, end, 0);
  return out;
}

std::vector<std::string> ListStepDirs(const std::string& root) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (e.is_directory() && StepOfDir(e.path().string())) dirs.push_back(e.path().string());
  }
  std::sort(dirs.begin(), dirs.end(), std::greater<>());
  if (const auto latest = LatestName(root)) {
    const std::string path = (fs::path(root) / *latest).string();
    auto it = std::find(dirs.begin(), dirs.end(), path);
    if (it != dirs.end()) std::rotate(dirs.begin(), it, it + 1);
  }
  return dirs;
}

std::vector<std::string> ListCheckpoints(const std::string& root) {
  std::vector<std::string> dirs = ListStepDirs(root);
  std::erase_if(dirs, [](const std::string& d) { return !fs::exists(fs::path(d) / kManifest); });
  return dirs;
}

core::Result<std::vector<std::string>> SetAsideDamaged(const std::vector<std::string>& dirs,
                                                       Env* env) {
  if (env == nullptr) env = Env::Default();
  std::vector<std::string> moved;
  for (const std::string& dir : dirs) {
    std::string to = dir + ".damaged";
    for (int k = 2; fs::exists(to); ++k) to = fmt::format("{}.damaged-{}", dir, k);
    PM_RETURN_IF_ERROR(env->Rename(dir, to));
    moved.push_back(to);
  }
  if (!dirs.empty()) PM_RETURN_IF_ERROR(env->SyncDir(fs::path(dirs[0]).parent_path().string()));
  return moved;
}

namespace {

core::Status CheckSlices(const json& manifest, const std::map<std::string, StFile>& files,
                         const std::string& dir) {
  if (!manifest.contains("tensors") || !manifest["tensors"].is_object())
    return core::Status::Error(fmt::format("{}/{}: no tensors object", dir, kManifest));
  for (const auto& [name, t] : manifest.at("tensors").items()) {
    for (const json& sl : t.value("slices", json::array())) {
      const std::string file = sl.value("file", "");
      auto it = files.find(file);
      const StTensor* st =
          it == files.end() ? nullptr : it->second.Find(sl.value("key", std::string(name)));
      if (!st || st->shape != sl.at("shape").get<std::vector<int64_t>>() ||
          st->dtype != t.at("dtype").get<std::string>())
        return core::Status::Error(fmt::format(
            "{}/{}: tensor '{}' is not in {} as the manifest says", dir, kManifest, name, file));
      const auto start = sl.at("start").get<std::vector<int64_t>>();
      const auto global = t.at("shape").get<std::vector<int64_t>>();
      if (start.size() != global.size() || st->shape.size() != global.size())
        return core::Status::Error(fmt::format("{}: tensor '{}': slice rank mismatch", dir, name));
      for (size_t d = 0; d < global.size(); ++d)
        if (start[d] < 0 || start[d] + st->shape[d] > global[d])
          return core::Status::Error(
              fmt::format("{}: tensor '{}': slice outside the global shape", dir, name));
    }
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<Checkpoint> Checkpoint::Open(const std::string& dir) {
  Checkpoint c;
  c.dir_ = dir;
  PM_ASSIGN_OR_RETURN(std::string text, ReadAll(dir + "/" + kManifest));
  c.manifest_ = json::parse(text, nullptr, false);
  const std::string mpath = dir + "/" + kManifest;
  if (c.manifest_.is_discarded() || !c.manifest_.is_object() || !c.manifest_.contains("format") ||
      !c.manifest_["format"].is_string() ||
      c.manifest_["format"].get<std::string>() != "pentamesh-checkpoint" ||
      !c.manifest_.contains("files") || !c.manifest_["files"].is_array() ||
      !c.manifest_.contains("step") || !c.manifest_["step"].is_number_integer())
    return core::Status::Error(fmt::format("{}: not a pentamesh checkpoint manifest", mpath));
  try {
    c.step_ = c.manifest_["step"].get<int64_t>();
    c.state_ = c.manifest_.value("state", json::object());
    for (const json& f : c.manifest_["files"]) {
      const std::string name = f.at("file").get<std::string>();
      if (name.find('/') != std::string::npos || name.empty())
        return core::Status::Error(fmt::format("{}: bad file name '{}'", mpath, name));
      const std::string path = dir + "/" + name;
      PM_ASSIGN_OR_RETURN(std::string bytes, ReadAll(path));
      const uint64_t want = f.at("bytes").get<uint64_t>();
      if (bytes.size() != want)
        return core::Status::Error(fmt::format("{}: {} bytes, the manifest says {} (truncated?)",
                                               path, bytes.size(), want));
      const std::string crc = Hex(Crc32c(bytes.data(), bytes.size()));
      if (crc != f.at("crc32c").get<std::string>())
        return core::Status::Error(fmt::format("{}: CRC32C {} does not match the manifest's {}",
                                               path, crc, f.at("crc32c").get<std::string>()));
      c.file_bytes_[name] = std::move(bytes);
      PM_ASSIGN_OR_RETURN(c.files_[name], ParseSafetensors(c.file_bytes_[name], path));
    }
    PM_RETURN_IF_ERROR(CheckSlices(c.manifest_, c.files_, dir));
  } catch (const json::exception& e) {
    return core::Status::Error(fmt::format("{}: malformed manifest: {}", mpath, e.what()));
  }
  return c;
}

core::Status Checkpoint::ReadRegion(const std::string& name,
                                    const std::vector<int64_t>& global_shape,
                                    const std::vector<int64_t>& start,
                                    const std::vector<int64_t>& shape, float* out) const {
  try {
    if (!Has(name)) return core::Status::Error(fmt::format("{}: has no tensor '{}'", dir_, name));
    const json& t = manifest_.at("tensors").at(name);
    if (t.at("shape").get<std::vector<int64_t>>() != global_shape || t.at("dtype") != "F32")
      return core::Status::Error(fmt::format("{}: tensor '{}' is {} {}, the model wants F32 {}",
                                             dir_, name, t.at("dtype").dump(), t.at("shape").dump(),
                                             json(global_shape).dump()));
    const size_t rank = global_shape.size();
    int64_t covered = 0;
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> seen;
    for (const json& sl : t.at("slices")) {
      const auto s_start = sl.at("start").get<std::vector<int64_t>>();
      const auto s_shape = sl.at("shape").get<std::vector<int64_t>>();
      if (std::find(seen.begin(), seen.end(), std::make_pair(s_start, s_shape)) != seen.end())
        continue;  // a replica of a slice already used
      seen.emplace_back(s_start, s_shape);
      std::vector<int64_t> lo(rank), hi(rank);
      bool empty = false;
      for (size_t d = 0; d < rank; ++d) {
        lo[d] = std::max(start[d], s_start[d]);
        hi[d] = std::min(start[d] + shape[d], s_start[d] + s_shape[d]);
        empty |= lo[d] >= hi[d];
      }
      if (empty && rank > 0) continue;
      const auto* src = reinterpret_cast<const float*>(
          files_.at(sl.at("file").get<std::string>()).Find(sl.value("key", name))->data.data());
      // Walk the intersection box in row-major order, copying runs along the last dim.
      std::vector<int64_t> idx = lo;
      const int64_t run = rank ? hi[rank - 1] - lo[rank - 1] : 1;
      while (true) {
        int64_t src_off = 0, dst_off = 0;
        for (size_t d = 0; d < rank; ++d) {
          src_off = src_off * s_shape[d] + (idx[d] - s_start[d]);
          dst_off = dst_off * shape[d] + (idx[d] - start[d]);
        }
        std::memcpy(out + dst_off, src + src_off, static_cast<size_t>(run) * sizeof(float));
        covered += run;
        int d = static_cast<int>(rank) - 2;
        while (d >= 0 && ++idx[static_cast<size_t>(d)] == hi[static_cast<size_t>(d)]) {
          idx[static_cast<size_t>(d)] = lo[static_cast<size_t>(d)];
          --d;
        }
        if (d < 0) break;
      }
    }
    if (covered != Numel(shape))
      return core::Status::Error(
          fmt::format("{}: the slices of '{}' cover {} of the {} elements asked", dir_, name,
                      covered, Numel(shape)));
    return core::Status::Ok();
  } catch (const json::exception& e) {
    return core::Status::Error(
        fmt::format("{}: malformed manifest entry for '{}': {}", dir_, name, e.what()));
  }
}

core::Status RestoreParams(const Checkpoint& ckpt, model::ParamSet& params) {
  core::Status st;
  params.ForEach([&](const model::ParamInfo& info, core::Tensor master, core::Tensor,
                     core::Tensor m, core::Tensor v) {
    if (!st.ok()) return;
    std::vector<int64_t> global, start, shape;
    for (int d = 0; d < info.global_shape.rank; ++d) {
      global.push_back(info.global_shape[d]);
      shape.push_back(info.local_shape[d]);
      start.push_back(d == info.sharding.dim ? info.sharding.rank * info.local_shape[d] : 0);
    }
    st = ckpt.ReadRegion(info.name, global, start, shape, master.f32());
    if (st.ok()) st = ckpt.ReadRegion(AdamMName(info.name), global, start, shape, m.f32());
    if (st.ok()) st = ckpt.ReadRegion(AdamVName(info.name), global, start, shape, v.f32());
    // Loaded state must be finite: a NaN weight or moment would only show up as a diverged step.
    const std::pair<std::string, core::Tensor> loaded[] = {
        {info.name, master}, {AdamMName(info.name), m}, {AdamVName(info.name), v}};
    for (const auto& [name, t] : loaded) {
      if (!st.ok()) break;
      const float* p = t.f32();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (!std::isfinite(p[i])) {
          st =
              core::Status::Error(fmt::format("{}: tensor {}: element {} of this rank's slice is "
                                              "not finite ({})",
                                              ckpt.dir(), name, i, p[i]));
          break;
        }
      }
    }
  });
  PM_RETURN_IF_ERROR(st);
  params.SyncWeightsFromMaster();
  return core::Status::Ok();
}

core::Result<std::optional<Checkpoint>> ResolveResume(
    const std::string& spec, const std::string& root,
    const std::function<void(const std::string&)>& log, std::vector<std::string>* damaged) {
  if (damaged != nullptr) damaged->clear();
  if (spec != "auto") {
    std::string dir = spec;
    if (!fs::exists(fs::path(dir) / kManifest)) {
      const auto latest = LatestName(dir);
      if (!latest)
        return core::Status::Error(
            fmt::format("--resume {}: neither a checkpoint (no {}) nor a root with '{}'", spec,
                        kManifest, kLatest));
      dir = (fs::path(dir) / *latest).string();
    }
    PM_ASSIGN_OR_RETURN(Checkpoint c, Checkpoint::Open(dir));
    return std::optional<Checkpoint>(std::move(c));
  }
  if (root.empty()) return core::Status::Error("--resume auto: set ckpt.dir (the checkpoint root)");
  std::vector<std::string> passed_over;
  for (const std::string& dir : ListStepDirs(root)) {
    auto c = Checkpoint::Open(dir);
    if (c.ok()) {
      if (damaged != nullptr) *damaged = std::move(passed_over);
      return std::optional<Checkpoint>(std::move(*c));
    }
    log(fmt::format("checkpoint {} is damaged: {}; falling back to the previous one", dir,
                    c.status().message()));
    passed_over.push_back(dir);
  }
  if (!passed_over.empty())
    return core::Status::Error(fmt::format(
        "--resume auto: every checkpoint under {} is damaged ({}); not starting again from step 0 "
        "over them. Resume from a good copy with --resume PATH, or start a new run with "
        "--overwrite (which deletes them)",
        root, fmt::join(passed_over, ", ")));
  return std::optional<Checkpoint>();
}

core::Status AsyncSaver::Save(Snapshot snapshot) {
  core::Status prev = Wait();
  if (!async_) {
    core::Status st = SaveCheckpoint(options_, snapshot);
    return prev.ok() ? st : prev;
  }
  if (!options_.all_ok) {  // one process: the whole save in the background
    thread_ =
        std::thread([this, s = std::move(snapshot)]() { status_ = SaveCheckpoint(options_, s); });
    return prev;
  }
  core::Status begun;
  if (!BeginSave(options_, snapshot.step, snapshot.rank, &begun)) return prev.ok() ? begun : prev;
  pending_snapshot_ = {.step = snapshot.step,
                       .rank = snapshot.rank,
                       .world = snapshot.world,
                       .state = snapshot.state,
                       .tensors = {}};
  pending_ = true;
  written_ = false;
  thread_ = std::thread([this, s = std::move(snapshot)]() {
    status_ = WriteRankFiles(options_, s);
    written_ = true;
  });
  return prev;
}

core::Status AsyncSaver::Finish() {
  if (thread_.joinable()) thread_.join();
  if (!pending_) return core::Status::Ok();
  pending_ = false;
  const core::Status written = status_;
  status_ = CommitSave(options_, pending_snapshot_, written);
  return core::Status::Ok();
}

core::Status AsyncSaver::Poll() {
  if (!pending_) return core::Status::Ok();
  if (!options_.all_ok(written_.load())) return core::Status::Ok();  // a rank is still writing
  (void)Finish();
  core::Status st = status_;
  status_ = core::Status::Ok();
  return st;
}

core::Status AsyncSaver::Wait() {
  (void)Finish();
  core::Status st = status_;
  status_ = core::Status::Ok();
  return st;
}

}  // namespace pentamesh::ckpt
