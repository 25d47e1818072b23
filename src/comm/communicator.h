// Communicator: the one interface for collectives and point-to-point messages within one group
// of ranks (tp, dp, ...), with per-operation counters of calls, bytes and time. A backend (the MPI
// one, comm/mpi_communicator.h) implements the protected Do* hooks; this base class validates
// arguments, handles groups of one rank locally and does all the counting, so backends count alike.
//
// Invariant: the counters follow docs/comm.md exactly: bytes_wire is what THIS rank sends for
// the assumed algorithm (core/collective_bytes.h, shared with the cost model), bytes_payload is
// the raw size of the op's buffer; a group of size 1 never communicates and counts nothing.
//
// Contract for every collective: every member of the group calls it, in the same order, with
// the same count, dtype and root; calls block until this rank's part is complete. A call that
// does not complete within the backend's timeout aborts the whole job with a message naming
// the rank, the group and the operation (never a silent hang). Buffers are contiguous element
// arrays of `count` elements of `dtype`. Reductions are sums, on f32, i32 or i64 only.
// Thread safety: a communicator is used by one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace pentamesh::comm {

enum class Op : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAllV,
  kSend,
  kRecv,
  kSendRecv,
  kBroadcast,
  kBarrier,
};
inline constexpr int kOpCount = 9;
const char* OpName(Op op);  // "all_reduce", "all_gather", ... as in docs/comm.md

// Counters of one operation kind on one communicator.
struct OpStats {
  int64_t calls = 0;
  int64_t bytes_payload = 0;  // raw bytes of the op's buffer (per-op definition in docs/comm.md)
  double bytes_wire = 0;      // bytes this rank sent on the wire (core/collective_bytes.h)
  double time_s = 0;          // wall time spent inside the calls
};

// Counters of one communicator, per operation kind.
struct CommStats {
  std::array<OpStats, kOpCount> ops{};
  const OpStats& operator[](Op op) const { return ops[static_cast<size_t>(op)]; }
  OpStats& operator[](Op op) { return ops[static_cast<size_t>(op)]; }
  OpStats total() const;  // summed over all operation kinds
};

// One counted operation as a trace event (Communicator::set_event_sink): its start on the host's
// steady clock and its duration in microseconds, and the bytes this rank put on the wire.
struct CommEvent {
  std::string group;  // the communicator's name
  Op op = Op::kAllReduce;
  double start_us = 0, dur_us = 0;
  double bytes_wire = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& name() const { return name_; }
  // World ranks of the members, ascending; member i has group rank i.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(world_ranks_.size()); }
  // "tp {2,3}": the name and the members' world ranks, for messages.
  std::string Describe() const;

  // In place: buffer <- sum over the group of every member's buffer.
  void all_reduce(void* buffer, int64_t count, core::Dtype dtype);
  // output[i * count_per_rank ...] <- input of group rank i; output holds size()*count_per_rank
  // elements. input may be output + rank()*count_per_rank (in place); otherwise no overlap.
  void all_gather(void* output, const void* input, int64_t count_per_rank, core::Dtype dtype);
  // output <- sum over members of their input[rank() * count_per_rank ...]; input holds
  // size()*count_per_rank elements; output and input do not overlap.
  void reduce_scatter(void* output, const void* input, int64_t count_per_rank, core::Dtype dtype);
  // Sends send_counts[p] elements to group rank p (slices packed in rank order) and receives
  // recv_counts[p] elements from p (packed in rank order). Counts may be uneven or zero;
  // REQUIRES: both spans have size() entries, send_counts[rank()] == recv_counts[rank()], and
  // recv_counts[p] equals what p sends here.
  void all_to_all_v(void* recv, std::span<const int64_t> recv_counts, const void* send,
                    std::span<const int64_t> send_counts, core::Dtype dtype);
  // Point-to-point with a peer given as a group rank (peer != rank()); messages between a pair
  // are matched in the order they are posted.
  void send(const void* buffer, int64_t count, core::Dtype dtype, int peer);
  void recv(void* buffer, int64_t count, core::Dtype dtype, int peer);
  // Sends to `dst` and receives from `src` concurrently (a ring shift when dst = rank+1 and
  // src = rank-1). dst == src == rank() copies locally.
  void send_recv(void* recv_buffer, int64_t recv_count, int src, const void* send_buffer,
                 int64_t send_count, int dst, core::Dtype dtype);
  // Pipeline point-to-point with a message tag (1 <= tag <= TagBound()): post_send copies the
  // buffer into a staging buffer the communicator owns and returns at once (the caller may reuse
  // its buffer), so a rank never blocks on a send and only ever waits in recv_tagged; messages
  // are matched by (peer, tag), whatever the posting order. wait_sends() completes every posted
  // send (call it before the sent data's peer could be gone, e.g. at the end of a step).
  // Counted as send (calls, bytes at post; time includes the final wait) and recv.
  void post_send(const void* buffer, int64_t count, core::Dtype dtype, int peer, int tag);
  void recv_tagged(void* buffer, int64_t count, core::Dtype dtype, int peer, int tag);
  void wait_sends();
  // The largest tag the backend supports (MPI_TAG_UB; at least 32767).
  virtual int TagBound() const { return 32767; }
  // buffer <- root's buffer on every member.
  void broadcast(void* buffer, int64_t count, core::Dtype dtype, int root);
  void barrier();

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }
  // When set, every counted operation also appends a CommEvent to *sink (for --trace); nullptr
  // (the default) records nothing. The sink must outlive its use.
  void set_event_sink(std::vector<CommEvent>* sink) { sink_ = sink; }

 protected:
  // REQUIRES: world_ranks ascending and non-empty, 0 <= rank < world_ranks.size().
  Communicator(std::string name, std::vector<int> world_ranks, int rank);

  // Backend hooks: only called with size() > 1 and validated arguments.
  virtual void DoAllReduce(void* buffer, int64_t count, core::Dtype dtype) = 0;
  virtual void DoAllGather(void* output, const void* input, int64_t count_per_rank,
                           core::Dtype dtype) = 0;
  virtual void DoReduceScatter(void* output, const void* input, int64_t count_per_rank,
                               core::Dtype dtype) = 0;
  virtual void DoAllToAllV(void* recv, std::span<const int64_t> recv_counts, const void* send,
                           std::span<const int64_t> send_counts, core::Dtype dtype) = 0;
  virtual void DoSend(const void* buffer, int64_t count, core::Dtype dtype, int peer) = 0;
  virtual void DoRecv(void* buffer, int64_t count, core::Dtype dtype, int peer) = 0;
  virtual void DoSendRecv(void* recv_buffer, int64_t recv_count, int src, const void* send_buffer,
                          int64_t send_count, int dst, core::Dtype dtype) = 0;
  virtual void DoBroadcast(void* buffer, int64_t count, core::Dtype dtype, int root) = 0;
  // Tagged non-blocking send / blocking receive / completion of all posted sends (see post_send).
  virtual void DoPostSend(const void* buffer, int64_t count, core::Dtype dtype, int peer,
                          int tag) = 0;
  virtual void DoRecvTagged(void* buffer, int64_t count, core::Dtype dtype, int peer, int tag) = 0;
  virtual void DoWaitSends() = 0;
  virtual void DoBarrier() = 0;

 private:
  template <typename Fn>
  void Counted(Op op, int64_t bytes_payload, double bytes_wire, Fn&& fn);

  std::string name_;
  std::vector<int> world_ranks_;
  int rank_;
  CommStats stats_;
  std::vector<CommEvent>* sink_ = nullptr;
};

// A group of one rank: every operation is local (a copy at most) and counts nothing.
class SelfCommunicator final : public Communicator {
 public:
  SelfCommunicator(std::string name, int world_rank);

 protected:
  void DoAllReduce(void*, int64_t, core::Dtype) override;
  void DoAllGather(void*, const void*, int64_t, core::Dtype) override;
  void DoReduceScatter(void*, const void*, int64_t, core::Dtype) override;
  void DoAllToAllV(void*, std::span<const int64_t>, const void*, std::span<const int64_t>,
                   core::Dtype) override;
  void DoSend(const void*, int64_t, core::Dtype, int) override;
  void DoRecv(void*, int64_t, core::Dtype, int) override;
  void DoSendRecv(void*, int64_t, int, const void*, int64_t, int, core::Dtype) override;
  void DoBroadcast(void*, int64_t, core::Dtype, int) override;
  void DoBarrier() override;
  void DoPostSend(const void*, int64_t, core::Dtype, int, int) override;
  void DoRecvTagged(void*, int64_t, core::Dtype, int, int) override;
  void DoWaitSends() override {}  // nothing is ever posted on a group of one
};

// The set of all ranks of a job and the factory of sub-communicators. One per process.
class World {
 public:
  virtual ~World() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The group of all ranks, named "world".
  virtual Communicator& world() = 0;
  // A communicator over `world_ranks` (ascending, containing this rank) named `name`.
  // Collective over those members: each calls it with the same list, and every rank issues its
  // CreateGroup calls in the same order. A single-rank list makes a SelfCommunicator.
  virtual std::unique_ptr<Communicator> CreateGroup(const std::string& name,
                                                    const std::vector<int>& world_ranks) = 0;
};

}  // namespace pentamesh::comm
