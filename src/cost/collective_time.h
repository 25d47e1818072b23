// The cost model's time of one collective on a group inside one node, as a public function: the
// forms of cost/terms.cc (AllGatherTime, ReduceScatterTime, AllReduceTime, AllToAllTime,
// P2pTime) on the link an intra-node group gets (MakeLink: one bandwidth for ring, p2p and
// all-to-all, one latency per message, one reduction rate). A measurement fits its latency,
// bandwidth and reduction rate to these forms (train/host_profile.h) without restating them;
// docs/COST_MODEL.md ("Communication") lists each.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace pentamesh::cost {

enum class Collective { kP2p, kAllReduce, kAllGather, kReduceScatter, kAllToAll };
inline constexpr std::array<Collective, 5> kCollectives = {
    Collective::kP2p, Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
    Collective::kAllToAll};

// "p2p", "all_reduce", "all_gather", "reduce_scatter", "all_to_all" (comm::OpName's names).
const char* CollectiveName(Collective c);
std::optional<Collective> ParseCollective(std::string_view name);

// Seconds of one collective over `ranks` ranks of one node with per-message latency alpha_s,
// bandwidth bus_Bps (bytes/s: the cluster's intra_node_gbps x bus_efficiency_intra) and, for
// all-reduce and reduce-scatter, (ranks-1)/ranks n_bytes summed at reduce_Bps (bytes/s: the
// cluster's intra_node_reduce_gbps; 0 = free). n_bytes as the model counts it: the full tensor
// for all-gather / reduce-scatter / all-reduce, the local buffer for all-to-all, the message for
// p2p. 0 for one rank or no bytes. Linear in alpha_s, 1 / bus_Bps and 1 / reduce_Bps.
double IntraNodeCollectiveTime(Collective c, double ranks, double alpha_s, double bus_Bps,
                               double n_bytes, double reduce_Bps = 0);

}  // namespace pentamesh::cost
