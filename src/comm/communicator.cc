// Argument checks, local single-rank paths and counting shared by every backend.
#include "comm/communicator.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <utility>

#include "core/check.h"
#include "core/collective_bytes.h"

namespace pentamesh::comm {
namespace {

bool IsReducible(core::Dtype dtype) {
  return dtype == core::Dtype::kF32 || dtype == core::Dtype::kI32 || dtype == core::Dtype::kI64;
}

int64_t Bytes(int64_t count, core::Dtype dtype) {
  return count * static_cast<int64_t>(core::DtypeSize(dtype));
}

// True when [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool Overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  if (a_bytes <= 0 || b_bytes <= 0) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a);
  const auto b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + static_cast<uintptr_t>(b_bytes) && b0 < a0 + static_cast<uintptr_t>(a_bytes);
}

void CopyBytes(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(bytes));
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "all_reduce";
    case Op::kAllGather:
      return "all_gather";
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kAllToAllV:
      return "all_to_all_v";
    case Op::kSend:
      return "send";
    case Op::kRecv:
      return "recv";
    case Op::kSendRecv:
      return "send_recv";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kBarrier:
      return "barrier";
  }
  return "?";
}

OpStats CommStats::total() const {
  OpStats sum;
  for (const OpStats& s : ops) {
    sum.calls += s.calls;
    sum.bytes_payload += s.bytes_payload;
    sum.bytes_wire += s.bytes_wire;
    sum.time_s += s.time_s;
  }
  return sum;
}

Communicator::Communicator(std::string name, std::vector<int> world_ranks, int rank)
    : name_(std::move(name)), world_ranks_(std::move(world_ranks)), rank_(rank) {
  PM_CHECK(!world_ranks_.empty()) << "group '" << name_ << "' has no ranks";
  PM_CHECK(rank_ >= 0 && rank_ < size()) << "group '" << name_ << "' rank=" << rank_;
  for (size_t i = 1; i < world_ranks_.size(); ++i) {
    PM_CHECK(world_ranks_[i - 1] < world_ranks_[i])
        << "group '" << name_ << "' ranks must be ascending";
  }
}

std::string Communicator::Describe() const {
  std::string out = name_ + " {";
  for (size_t i = 0; i < world_ranks_.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(world_ranks_[i]);
  }
  return out + "}";
}

template <typename Fn>
void Communicator::Counted(Op op, int64_t bytes_payload, double bytes_wire, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  OpStats& s = stats_[op];
  s.calls += 1;
  s.bytes_payload += bytes_payload;
  s.bytes_wire += bytes_wire;
  s.time_s += elapsed.count();
  if (sink_ != nullptr) {
    const double start_us =
        std::chrono::duration<double, std::micro>(start.time_since_epoch()).count();
    sink_->push_back({.group = name_,
                      .op = op,
                      .start_us = start_us,
                      .dur_us = elapsed.count() * 1e6,
                      .bytes_wire = bytes_wire});
  }
}

void Communicator::all_reduce(void* buffer, int64_t count, core::Dtype dtype) {
  PM_CHECK(count >= 0) << Describe() << " all_reduce count=" << count;
  PM_CHECK(IsReducible(dtype)) << Describe() << " all_reduce of " << core::DtypeName(dtype);
  PM_CHECK(buffer != nullptr || count == 0) << Describe() << " all_reduce null buffer";
  if (size() == 1) return;
  const int64_t n = Bytes(count, dtype);
  Counted(Op::kAllReduce, n, core::AllReduceWireBytes(static_cast<double>(n), size()),
          [&] { DoAllReduce(buffer, count, dtype); });
}

void Communicator::all_gather(void* output, const void* input, int64_t count_per_rank,
                              core::Dtype dtype) {
  PM_CHECK(count_per_rank >= 0) << Describe() << " all_gather count=" << count_per_rank;
  PM_CHECK((output != nullptr && input != nullptr) || count_per_rank == 0)
      << Describe() << " all_gather null buffer";
  const int64_t shard = Bytes(count_per_rank, dtype);
  const int64_t n = shard * size();
  const bool in_place = input == static_cast<const char*>(output) + rank() * shard;
  PM_CHECK(in_place || !Overlap(output, n, input, shard))
      << Describe() << " all_gather: input overlaps output without being this rank's slot";
  if (size() == 1) return CopyBytes(output, input, shard);
  Counted(Op::kAllGather, n, core::AllGatherWireBytes(static_cast<double>(n), size()),
          [&] { DoAllGather(output, input, count_per_rank, dtype); });
}

void Communicator::reduce_scatter(void* output, const void* input, int64_t count_per_rank,
                                  core::Dtype dtype) {
  PM_CHECK(count_per_rank >= 0) << Describe() << " reduce_scatter count=" << count_per_rank;
  PM_CHECK(IsReducible(dtype)) << Describe() << " reduce_scatter of " << core::DtypeName(dtype);
  PM_CHECK((output != nullptr && input != nullptr) || count_per_rank == 0)
      << Describe() << " reduce_scatter null buffer";
  const int64_t shard = Bytes(count_per_rank, dtype);
  const int64_t n = shard * size();
  PM_CHECK(!Overlap(output, shard, input, n)) << Describe() << " reduce_scatter: buffers overlap";
  if (size() == 1) return CopyBytes(output, input, shard);
  Counted(Op::kReduceScatter, n, core::ReduceScatterWireBytes(static_cast<double>(n), size()),
          [&] { DoReduceScatter(output, input, count_per_rank, dtype); });
}

void Communicator::all_to_all_v(void* recv, std::span<const int64_t> recv_counts, const void* send,
                                std::span<const int64_t> send_counts, core::Dtype dtype) {
  PM_CHECK(static_cast<int>(recv_counts.size()) == size())
      << Describe() << " all_to_all_v recv_counts has " << recv_counts.size() << " entries";
  PM_CHECK(static_cast<int>(send_counts.size()) == size())
      << Describe() << " all_to_all_v send_counts has " << send_counts.size() << " entries";
  int64_t send_total = 0;
  int64_t recv_total = 0;
  for (int p = 0; p < size(); ++p) {
    const auto i = static_cast<size_t>(p);
    PM_CHECK(send_counts[i] >= 0 && recv_counts[i] >= 0)
        << Describe() << " all_to_all_v negative count for peer " << p;
    send_total += send_counts[i];
    recv_total += recv_counts[i];
  }
  const auto self = static_cast<size_t>(rank());
  PM_CHECK(send_counts[self] == recv_counts[self])
      << Describe() << " all_to_all_v sends " << send_counts[self] << " to itself but expects "
      << recv_counts[self];
  PM_CHECK(send != nullptr || send_total == 0) << Describe() << " all_to_all_v null send";
  PM_CHECK(recv != nullptr || recv_total == 0) << Describe() << " all_to_all_v null recv";
  PM_CHECK(!Overlap(recv, Bytes(recv_total, dtype), send, Bytes(send_total, dtype)))
      << Describe() << " all_to_all_v: buffers overlap";
  if (size() == 1) return CopyBytes(recv, send, Bytes(send_total, dtype));
  const int64_t n = Bytes(send_total, dtype);
  const double wire = static_cast<double>(Bytes(send_total - send_counts[self], dtype));
  Counted(Op::kAllToAllV, n, wire,
          [&] { DoAllToAllV(recv, recv_counts, send, send_counts, dtype); });
}

void Communicator::send(const void* buffer, int64_t count, core::Dtype dtype, int peer) {
  PM_CHECK(peer >= 0 && peer < size() && peer != rank())
      << Describe() << " send: peer " << peer << " is not another member (rank " << rank() << ")";
  PM_CHECK(count >= 0 && (buffer != nullptr || count == 0)) << Describe() << " send count";
  const int64_t n = Bytes(count, dtype);
  Counted(Op::kSend, n, core::SendWireBytes(static_cast<double>(n)),
          [&] { DoSend(buffer, count, dtype, peer); });
}

void Communicator::recv(void* buffer, int64_t count, core::Dtype dtype, int peer) {
  PM_CHECK(peer >= 0 && peer < size() && peer != rank())
      << Describe() << " recv: peer " << peer << " is not another member (rank " << rank() << ")";
  PM_CHECK(count >= 0 && (buffer != nullptr || count == 0)) << Describe() << " recv count";
  Counted(Op::kRecv, Bytes(count, dtype), 0.0, [&] { DoRecv(buffer, count, dtype, peer); });
}

void Communicator::post_send(const void* buffer, int64_t count, core::Dtype dtype, int peer,
                             int tag) {
  PM_CHECK(peer >= 0 && peer < size() && peer != rank())
      << Describe() << " post_send: peer " << peer << " is not another member (rank " << rank()
      << ")";
  PM_CHECK(tag >= 1 && tag <= TagBound())
      << Describe() << " post_send: tag " << tag << " outside [1, " << TagBound() << "]";
  PM_CHECK(count >= 0 && (buffer != nullptr || count == 0)) << Describe() << " post_send count";
  const int64_t n = Bytes(count, dtype);
  Counted(Op::kSend, n, core::SendWireBytes(static_cast<double>(n)),
          [&] { DoPostSend(buffer, count, dtype, peer, tag); });
}

void Communicator::recv_tagged(void* buffer, int64_t count, core::Dtype dtype, int peer, int tag) {
  PM_CHECK(peer >= 0 && peer < size() && peer != rank())
      << Describe() << " recv_tagged: peer " << peer << " is not another member (rank " << rank()
      << ")";
  PM_CHECK(tag >= 1 && tag <= TagBound())
      << Describe() << " recv_tagged: tag " << tag << " outside [1, " << TagBound() << "]";
  PM_CHECK(count >= 0 && (buffer != nullptr || count == 0)) << Describe() << " recv_tagged count";
  Counted(Op::kRecv, Bytes(count, dtype), 0.0,
          [&] { DoRecvTagged(buffer, count, dtype, peer, tag); });
}

void Communicator::wait_sends() {
  const auto start = std::chrono::steady_clock::now();
  DoWaitSends();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  stats_[Op::kSend].time_s += elapsed.count();
}

void Communicator::send_recv(void* recv_buffer, int64_t recv_count, int src,
                             const void* send_buffer, int64_t send_count, int dst,
                             core::Dtype dtype) {
  PM_CHECK(src >= 0 && src < size()) << Describe() << " send_recv src=" << src;
  PM_CHECK(dst >= 0 && dst < size()) << Describe() << " send_recv dst=" << dst;
  PM_CHECK(recv_count >= 0 && send_count >= 0) << Describe() << " send_recv negative count";
  PM_CHECK(recv_buffer != nullptr || recv_count == 0) << Describe() << " send_recv null recv";
  PM_CHECK(send_buffer != nullptr || send_count == 0) << Describe() << " send_recv null send";
  if (src == rank() || dst == rank()) {
    PM_CHECK(src == rank() && dst == rank())
        << Describe() << " send_recv with itself on one side only (rank " << rank()
        << " src=" << src << " dst=" << dst << ")";
    PM_CHECK(recv_count == send_count) << Describe() << " send_recv to itself, counts differ";
    return CopyBytes(recv_buffer, send_buffer, Bytes(send_count, dtype));
  }
  const int64_t sent = Bytes(send_count, dtype);
  Counted(Op::kSendRecv, sent + Bytes(recv_count, dtype),
          core::SendWireBytes(static_cast<double>(sent)),
          [&] { DoSendRecv(recv_buffer, recv_count, src, send_buffer, send_count, dst, dtype); });
}

void Communicator::broadcast(void* buffer, int64_t count, core::Dtype dtype, int root) {
  PM_CHECK(root >= 0 && root < size()) << Describe() << " broadcast root=" << root;
  PM_CHECK(count >= 0 && (buffer != nullptr || count == 0)) << Describe() << " broadcast count";
  if (size() == 1) return;
  const int64_t n = Bytes(count, dtype);
  Counted(Op::kBroadcast, n, core::BroadcastWireBytes(static_cast<double>(n), size()),
          [&] { DoBroadcast(buffer, count, dtype, root); });
}

void Communicator::barrier() {
  if (size() == 1) return;
  Counted(Op::kBarrier, 0, 0.0, [&] { DoBarrier(); });
}

// SelfCommunicator: the base class never calls a hook for a group of one.

SelfCommunicator::SelfCommunicator(std::string name, int world_rank)
    : Communicator(std::move(name), {world_rank}, 0) {}

#define PM_SELF_UNREACHABLE PM_CHECK(false) << "SelfCommunicator " << Describe() << ": hook called"
void SelfCommunicator::DoAllReduce(void*, int64_t, core::Dtype) { PM_SELF_UNREACHABLE; }
void SelfCommunicator::DoAllGather(void*, const void*, int64_t, core::Dtype) {
  PM_SELF_UNREACHABLE;
}
void SelfCommunicator::DoReduceScatter(void*, const void*, int64_t, core::Dtype) {
  PM_SELF_UNREACHABLE;
}
void SelfCommunicator::DoAllToAllV(void*, std::span<const int64_t>, const void*,
                                   std::span<const int64_t>, core::Dtype) {
  PM_SELF_UNREACHABLE;
}
void SelfCommunicator::DoSend(const void*, int64_t, core::Dtype, int) { PM_SELF_UNREACHABLE; }
void SelfCommunicator::DoRecv(void*, int64_t, core::Dtype, int) { PM_SELF_UNREACHABLE; }
void SelfCommunicator::DoSendRecv(void*, int64_t, int, const void*, int64_t, int, core::Dtype) {
  PM_SELF_UNREACHABLE;
}
void SelfCommunicator::DoBroadcast(void*, int64_t, core::Dtype, int) { PM_SELF_UNREACHABLE; }
void SelfCommunicator::DoBarrier() { PM_SELF_UNREACHABLE; }
void SelfCommunicator::DoPostSend(const void*, int64_t, core::Dtype, int, int) {
  PM_SELF_UNREACHABLE;
}
void SelfCommunicator::DoRecvTagged(void*, int64_t, core::Dtype, int, int) { PM_SELF_UNREACHABLE; }
#undef PM_SELF_UNREACHABLE

}  // namespace pentamesh::comm
