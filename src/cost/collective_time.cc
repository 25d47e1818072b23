#include "cost/collective_time.h"

#include "cost/internal.h"

namespace pentamesh::cost {

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kP2p:
      return "p2p";
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

std::optional<Collective> ParseCollective(std::string_view name) {
  for (Collective c : kCollectives) {
    if (name == CollectiveName(c)) return c;
  }
  return std::nullopt;
}

double IntraNodeCollectiveTime(Collective c, double ranks, double alpha_s, double bus_Bps,
                               double n_bytes, double reduce_Bps) {
  const internal::Link link = internal::IntraNodeLink(ranks, bus_Bps, alpha_s, reduce_Bps);
  switch (c) {
    case Collective::kP2p:
      return internal::P2pTime(link, n_bytes);
    case Collective::kAllReduce:
      return internal::AllReduceTime(link, n_bytes);
    case Collective::kAllGather:
      return internal::AllGatherTime(link, n_bytes);
    case Collective::kReduceScatter:
      return internal::ReduceScatterTime(link, n_bytes);
    case Collective::kAllToAll:
      return internal::AllToAllTime(link, n_bytes);
  }
  return 0;
}

}  // namespace pentamesh::cost
