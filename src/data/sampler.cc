// The global sequence order (keyed Feistel permutation per epoch), dp/cp slicing and the state.
// Invariant: the tokens of global sequence g depend only on (dataset, seq_len, seed, shuffle, g).
#include "data/sampler.h"

#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace pentamesh::data {

using core::Result;
using core::Status;

namespace {

// splitmix64's finaliser: a strong 64-bit mixer.
uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A keyed bijection of [0, n): a 4-round balanced Feistel network on the smallest even-width
// power-of-two domain >= n, with cycle walking (re-apply until the value lands below n; the domain
// is < 4n, so this takes fewer than 4 rounds on average).
uint64_t FeistelPermute(uint64_t x, uint64_t n, uint64_t key) {
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = Mix64(right ^ Mix64(key + round)) & mask;
      const uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

}  // namespace

uint64_t GlobalWindow(uint64_t seed, bool shuffle, uint64_t windows_per_epoch, uint64_t g) {
  PM_CHECK(windows_per_epoch > 0);
  const uint64_t epoch = g / windows_per_epoch;
  const uint64_t p = g % windows_per_epoch;
  if (!shuffle || windows_per_epoch == 1) return p;
  return FeistelPermute(p, windows_per_epoch, Mix64(seed) ^ Mix64(epoch + 0x5151));
}

std::string SamplerStateToJson(const SamplerState& s) {
  nlohmann::json j = {{"version", 1},
                      {"next_sequence", s.next_sequence},
                      {"seed", s.seed},
                      {"seq_len", s.seq_len},
                      {"windows_per_epoch", s.windows_per_epoch},
                      {"shuffle", s.shuffle},
                      {"data_fingerprint", fmt::format("{:016x}", s.data_fingerprint)},
                      {"split", s.split}};
  return j.dump();
}

Result<SamplerState> SamplerStateFromJson(const std::string& text) {
  SamplerState s;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    for (const char* key : {"version", "next_sequence", "seed", "seq_len", "windows_per_epoch",
                            "shuffle", "split", "data_fingerprint"}) {
      if (!j.contains(key)) return Status::Error(fmt::format("sampler state: {}: missing", key));
    }
    if (j.at("version").get<int>() != 1) {
      return Status::Error("sampler state: version: only version 1 is supported");
    }
    s.next_sequence = j.at("next_sequence").get<uint64_t>();
    s.seed = j.at("seed").get<uint64_t>();
    s.seq_len = j.at("seq_len").get<int64_t>();
    s.windows_per_epoch = j.at("windows_per_epoch").get<uint64_t>();
    s.shuffle = j.at("shuffle").get<bool>();
    s.split = j.at("split").get<std::string>();
    const std::string hex = j.at("data_fingerprint").get<std::string>();
    char* end = nullptr;
    s.data_fingerprint = std::strtoull(hex.c_str(), &end, 16);
    if (hex.size() != 16 || end != hex.c_str() + hex.size()) {
      return Status::Error("sampler state: data_fingerprint: '" + hex + "' is not 16 hex digits");
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(fmt::format("sampler state: invalid: {}", e.what()));
  }
  return s;
}

Result<Sampler> Sampler::Create(const Dataset& dataset, SamplerOptions o) {
  const std::string split = SplitName(o.split);
  if (o.seq_len <= 0)
    return Status::Error(fmt::format("sampler: seq_len={} must be > 0", o.seq_len));
  if (o.global_batch_seqs <= 0) {
    return Status::Error(
        fmt::format("sampler: global_batch_seqs={} must be > 0", o.global_batch_seqs));
  }
  if (o.dp_size <= 0 || o.dp_rank < 0 || o.dp_rank >= o.dp_size) {
    return Status::Error(
        fmt::format("sampler: dp_rank={} must be in [0, dp_size={})", o.dp_rank, o.dp_size));
  }
  if (o.global_batch_seqs % o.dp_size != 0) {
    return Status::Error(
        fmt::format("sampler: global_batch_seqs={} must be divisible by dp_size={}",
                    o.global_batch_seqs, o.dp_size));
  }
  if (o.cp_size <= 0 || o.cp_rank < 0 || o.cp_rank >= o.cp_size) {
    return Status::Error(
        fmt::format("sampler: cp_rank={} must be in [0, cp_size={})", o.cp_rank, o.cp_size));
  }
  if (o.cp_size > 1 && o.seq_len % (2 * o.cp_size) != 0) {
    return Status::Error(fmt::format("sampler: seq_len={} must be divisible by 2*cp_size={}",
                                     o.seq_len, 2 * o.cp_size));
  }
  const uint64_t tokens = dataset.tokens(o.split);
  const uint64_t windows = tokens == 0 ? 0 : (tokens - 1) / static_cast<uint64_t>(o.seq_len);
  if (windows == 0) {
    return Status::Error(fmt::format(
        "sampler: the {} split of {} has {} tokens, too few for one sequence of seq_len={} (+1)",
        split, dataset.dir(), tokens, o.seq_len));
  }
  return Sampler(dataset, o, windows);
}

Sampler::Sampler(const Dataset& dataset, SamplerOptions options, uint64_t windows_per_epoch)
    : dataset_(&dataset),
      options_(options),
      windows_per_epoch_(windows_per_epoch),
      window_(static_cast<size_t>(options.seq_len + 1)) {}

void Sampler::ReadSequence(uint64_t g, int32_t* row_tokens, int32_t* row_targets) {
  const auto seq_len = static_cast<uint64_t>(options_.seq_len);
  const uint64_t w = GlobalWindow(options_.seed, options_.shuffle, windows_per_epoch_, g);
  dataset_->Read(options_.split, w * seq_len, seq_len + 1, window_.data());
  if (options_.cp_size == 1) {
    std::copy(window_.begin(), window_.end() - 1, row_tokens);
    std::copy(window_.begin() + 1, window_.end(), row_targets);
    return;
  }
  const uint64_t chunk = seq_len / (2 * static_cast<uint64_t>(options_.cp_size));
  const uint64_t chunks[2] = {static_cast<uint64_t>(options_.cp_rank),
                              static_cast<uint64_t>(2 * options_.cp_size - 1 - options_.cp_rank)};
  for (int k = 0; k < 2; ++k) {
    const uint64_t begin = chunks[k] * chunk;
    std::copy_n(window_.begin() + static_cast<int64_t>(begin), chunk, row_tokens + k * chunk);
    std::copy_n(window_.begin() + static_cast<int64_t>(begin + 1), chunk, row_targets + k * chunk);
  }
}

void Sampler::NextInto(Batch& out) {
  const int64_t local = local_batch_seqs();
  const int64_t local_seq = options_.seq_len / options_.cp_size;
  out.global_batch_index = static_cast<int64_t>(next_sequence_) / options_.global_batch_seqs;
  out.first_sequence = static_cast<int64_t>(next_sequence_) + options_.dp_rank * local;
  out.local_batch_seqs = local;
  out.local_seq_len = local_seq;
  out.tokens.resize(static_cast<size_t>(local * local_seq));
  out.targets.resize(static_cast<size_t>(local * local_seq));
  out.positions.resize(static_cast<size_t>(local_seq));
  const int64_t chunk = options_.seq_len / (2 * options_.cp_size);
  for (int64_t t = 0; t < local_seq; ++t) {
    const int64_t k = options_.cp_size == 1 ? 0 : t / chunk;
    const int64_t c = k == 0 ? options_.cp_rank : 2 * options_.cp_size - 1 - options_.cp_rank;
    out.positions[static_cast<size_t>(t)] =
        static_cast<int32_t>(options_.cp_size == 1 ? t : c * chunk + t % chunk);
  }
  for (int64_t row = 0; row < local; ++row) {
    ReadSequence(static_cast<uint64_t>(out.first_sequence + row),
                 out.tokens.data() + row * local_seq, out.targets.data() + row * local_seq);
  }
  next_sequence_ += static_cast<uint64_t>(options_.global_batch_seqs);
}

Batch Sampler::Next() {
  Batch batch;
  NextInto(batch);
  return batch;
}

double Sampler::epoch() const {
  return static_cast<double>(next_sequence_) / static_cast<double>(windows_per_epoch_);
}

SamplerState Sampler::state() const {
  return {.next_sequence = next_sequence_,
          .seed = options_.seed,
          .seq_len = options_.seq_len,
          .windows_per_epoch = windows_per_epoch_,
          .shuffle = options_.shuffle,
          .split = SplitName(options_.split),
          .data_fingerprint = dataset_->fingerprint(options_.split)};
}

Status Sampler::Restore(const SamplerState& s) {
  const SamplerState mine = state();
  if (s.split != mine.split) {
    return Status::Error(fmt::format("sampler state: split '{}' differs from this sampler's '{}'",
                                     s.split, mine.split));
  }
  if (s.seed != mine.seed) {
    return Status::Error(
        fmt::format("sampler state: seed {} differs from this sampler's {}", s.seed, mine.seed));
  }
  if (s.seq_len != mine.seq_len) {
    return Status::Error(fmt::format("sampler state: seq_len {} differs from this sampler's {}",
                                     s.seq_len, mine.seq_len));
  }
  if (s.shuffle != mine.shuffle) {
    return Status::Error("sampler state: shuffle differs from this sampler's");
  }
  if (s.windows_per_epoch != mine.windows_per_epoch) {
    return Status::Error(fmt::format(
        "sampler state: windows_per_epoch {} differs from this dataset's {} (a different dataset "
        "or tokenizer?)",
        s.windows_per_epoch, mine.windows_per_epoch));
  }
  if (s.data_fingerprint != mine.data_fingerprint) {
    return Status::Error(fmt::format(
        "sampler state: data_fingerprint {:016x} differs from this dataset's {:016x} (the {} split "
        "of {} holds other tokens)",
        s.data_fingerprint, mine.data_fingerprint, mine.split, dataset_->dir()));
  }
  next_sequence_ = s.next_sequence;
  return Status::Ok();
}

}  // namespace pentamesh::data
