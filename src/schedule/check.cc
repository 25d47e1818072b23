// Completeness and send/receive pairing of a set of programs (declared in simulate.h).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "schedule/generate.h"
#include "schedule/simulate.h"

namespace pentamesh::schedule {
namespace {

const char* KindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "F";
    case ActionKind::kBackward:
      return "B";
    case ActionKind::kWeight:
      return "W";
  }
  return "?";
}

}  // namespace

core::Status CheckComplete(const std::vector<Program>& programs, const Topology& t,
                           bool require_w) {
  if (static_cast<int>(programs.size()) != t.pp) {
    return core::Status::Error(
        fmt::format("complete: {} programs for pp={}", programs.size(), t.pp));
  }
  if (t.placement == Placement::kVShape && t.virtual_stages != 2) {
    return core::Status::Error(
        fmt::format("complete: the V-shaped placement needs V=2 (V={})", t.virtual_stages));
  }
  if (t.microbatches < 1 || t.virtual_stages < 1 ||
      int64_t{t.microbatches} * t.pp * t.virtual_stages > kMaxScheduledPairs) {
    return core::Status::Error(fmt::format("complete: m={} V={} out of range (m * pp * V <= {})",
                                           t.microbatches, t.virtual_stages, kMaxScheduledPairs));
  }
  const size_t n = static_cast<size_t>(t.microbatches) * static_cast<size_t>(t.stages());
  std::vector<int> count(3 * n, 0);
  for (int rank = 0; rank < t.pp; ++rank) {
    for (const Action& a : programs[rank]) {
      if (a.chunk < 0 || a.chunk >= t.virtual_stages || a.microbatch < 0 ||
          a.microbatch >= t.microbatches) {
        return core::Status::Error(
            fmt::format("complete: rank {} has out-of-range action {}", rank, ToString(a, true)));
      }
      const size_t slot = static_cast<size_t>(a.microbatch) * static_cast<size_t>(t.stages()) +
                          static_cast<size_t>(t.Stage(rank, a.chunk));
      ++count[static_cast<size_t>(a.kind) * n + slot];
    }
  }
  const bool any_w = std::any_of(count.begin() + 2 * static_cast<long>(n), count.end(),
                                 [](int c) { return c > 0; });
  const bool want_w = require_w || any_w;
  for (int mb = 0; mb < t.microbatches; ++mb) {
    for (int s = 0; s < t.stages(); ++s) {
      const size_t slot =
          static_cast<size_t>(mb) * static_cast<size_t>(t.stages()) + static_cast<size_t>(s);
      for (ActionKind kind : {ActionKind::kForward, ActionKind::kBackward, ActionKind::kWeight}) {
        const int expected = kind == ActionKind::kWeight && !want_w ? 0 : 1;
        const int got = count[static_cast<size_t>(kind) * n + slot];
        if (got != expected) {
          return core::Status::Error(
              fmt::format("complete: micro-batch {} stage {} (rank {} chunk {}) has {} {} "
                          "action(s), expected {}",
                          mb, s, t.RankOf(s), t.ChunkOf(s), got, KindName(kind), expected));
        }
      }
    }
  }
  return core::Status::Ok();
}

core::Status CheckCommPairing(const std::vector<Program>& programs, const Topology& t) {
  // (src, dst, forward?) -> the (micro-batch, producing stage) sequence.
  using Key = std::tuple<int, int, bool>;
  std::map<Key, std::vector<std::pair<int, int>>> sends, recvs;
  for (int rank = 0; rank < static_cast<int>(programs.size()); ++rank) {
    for (const CommOp& op : ExpandComm(programs[rank], t, rank)) {
      const bool fwd = op.kind == CommKind::kSendF || op.kind == CommKind::kRecvF;
      const bool send = op.kind == CommKind::kSendF || op.kind == CommKind::kSendB;
      auto& table = send ? sends : recvs;
      const Key key = send ? Key{rank, op.peer, fwd} : Key{op.peer, rank, fwd};
      table[key].emplace_back(op.microbatch, op.stage);
    }
  }
  for (const auto* pair : {&sends, &recvs}) {
    const auto& other = pair == &sends ? recvs : sends;
    for (const auto& [key, seq] : *pair) {
      const auto it = other.find(key);
      const size_t other_size = it == other.end() ? 0 : it->second.size();
      const auto& [src, dst, fwd] = key;
      if (other_size != seq.size()) {
        return core::Status::Error(
            fmt::format("pairing: rank {} -> rank {} ({}): {} sends but {} receives", src, dst,
                        fwd ? "activations" : "gradients", pair == &sends ? seq.size() : other_size,
                        pair == &sends ? other_size : seq.size()));
      }
      for (size_t i = 0; i < seq.size(); ++i) {
        if (seq[i] != it->second[i]) {
          const auto& s = pair == &sends ? seq[i] : it->second[i];
          const auto& r = pair == &sends ? it->second[i] : seq[i];
          return core::Status::Error(fmt::format(
              "pairing: rank {} -> rank {} ({}) message #{}: sent micro-batch {} of stage {}, "
              "received as micro-batch {} of stage {}",
              src, dst, fwd ? "activations" : "gradients", i, s.first, s.second, r.first,
              r.second));
        }
      }
    }
  }
  return core::Status::Ok();
}

}  // namespace pentamesh::schedule
