// Bytes one rank sends on the wire for one collective: the single definition shared by the cost
// model (which predicts them) and comm::Communicator (whose counters measure them). Header-only
// and free of MPI, so the planner builds without it. docs/comm.md states the convention.
//
// Invariant: every function is the bytes THIS rank sends for the algorithm assumed (ring for
// all-reduce, all-gather and reduce-scatter; direct exchange for all-to-all(v) and p2p), given the
// op's payload bytes and the group size; a group of 1 sends 0. Broadcast (pipelined chain) is the
// exception: every rank counts the average over the group, so the count does not depend on root.
// Results are exact rationals evaluated in double: 2*(g-1)*n/g is an integer whenever g divides
// n (the usual case: shards are padded to a multiple of the group size).
#pragma once

#include <cstdint>

namespace pentamesh::core {

// The share of n bytes that belongs to the OTHER g-1 ranks of a group of g: (g-1)/g * n, the
// ring's per-rank traffic of one pass and an even exchange's. 0 for a group of 1.
constexpr double OthersShare(double bytes, int64_t group_size) {
  if (group_size <= 1) return 0.0;
  return static_cast<double>(group_size - 1) * bytes / static_cast<double>(group_size);
}

// Ring all-reduce (reduce-scatter then all-gather) of an n-byte buffer: 2(g-1)/g * n.
constexpr double AllReduceWireBytes(double bytes_buffer, int64_t group_size) {
  return 2.0 * OthersShare(bytes_buffer, group_size);  // 2x exactly: the same double as 2(g-1)n/g
}

// Ring all-gather whose OUTPUT is n bytes (each rank contributes n/g): (g-1)/g * n.
constexpr double AllGatherWireBytes(double bytes_output, int64_t group_size) {
  return OthersShare(bytes_output, group_size);
}

// Ring reduce-scatter whose INPUT is n bytes (each rank keeps n/g): (g-1)/g * n.
constexpr double ReduceScatterWireBytes(double bytes_input, int64_t group_size) {
  return OthersShare(bytes_input, group_size);
}

// Pipelined chain broadcast of n bytes: g-1 of the g ranks forward n bytes each; every rank
// counts the average (g-1)/g * n, so the count does not depend on the root.
constexpr double BroadcastWireBytes(double bytes_buffer, int64_t group_size) {
  return OthersShare(bytes_buffer, group_size);
}

// All-to-all(v): the bytes this rank sends to the OTHER ranks (its own slice stays local).
// For an even all-to-all of n bytes per rank that is (g-1)/g * n.
constexpr double AllToAllEvenWireBytes(double bytes_send_total, int64_t group_size) {
  return OthersShare(bytes_send_total, group_size);
}

// Point-to-point: a send of n bytes puts n bytes on the wire; a receive sends nothing.
constexpr double SendWireBytes(double bytes_message) { return bytes_message; }

}  // namespace pentamesh::core
