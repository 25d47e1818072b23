// Measures Communicator ops on the world group (mpirun -np N comm_bench [max_bytes]): time per
// call and bus bandwidth (bytes_wire / time, the counters' own convention), next to the plain
// blocking MPI call on the same ranks, so the cost of deadline polling is visible.
// Registered as a small smoke test; run by hand for the record, e.g.
//   mpirun --oversubscribe -np 8 build/tests/mpi/comm_bench 16777216
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/timing.h"

namespace pentamesh {
namespace {

// Seconds per call of fn: one batch of enough calls to take ~0.2 s, the same on every rank.
double TimePerCall(comm::Communicator& world, const std::function<void()>& fn) {
  return comm::MedianSecondsPerCall(world, fn, {.repetitions = 1, .min_batch_s = 0.2});
}

void Run(comm::Communicator& world, int64_t max_bytes) {
  const int g = world.size();
  if (world.rank() == 0) {
    std::printf("ranks=%d  op            bytes      us/call   busbw GB/s   blocking MPI us/call\n",
                g);
  }
  for (int64_t bytes = 1024; bytes <= max_bytes; bytes *= 16) {
    const int64_t count = bytes / 4;
    std::vector<float> buf(static_cast<size_t>(count), 1.0f);
    std::vector<float> out(static_cast<size_t>(count) * static_cast<size_t>(g));
    world.reset_stats();
    const double t_ar =
        TimePerCall(world, [&] { world.all_reduce(buf.data(), count, core::Dtype::kF32); });
    const double wire_ar = world.stats()[comm::Op::kAllReduce].bytes_wire /
                           static_cast<double>(world.stats()[comm::Op::kAllReduce].calls);
    const double t_mpi = TimePerCall(world, [&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    const int64_t shard = count / g;
    world.reset_stats();
    const double t_ag = TimePerCall(
        world, [&] { world.all_gather(out.data(), buf.data(), shard, core::Dtype::kF32); });
    const double wire_ag = world.stats()[comm::Op::kAllGather].bytes_wire /
                           static_cast<double>(world.stats()[comm::Op::kAllGather].calls);
    const double t_mpi_ag = TimePerCall(world, [&] {
      MPI_Allgather(buf.data(), static_cast<int>(shard), MPI_FLOAT, out.data(),
                    static_cast<int>(shard), MPI_FLOAT, MPI_COMM_WORLD);
    });
    if (world.rank() == 0) {
      std::printf("ranks=%d  all_reduce %10lld %12.1f %12.3f %14.1f\n", g,
                  static_cast<long long>(bytes), t_ar * 1e6, wire_ar / t_ar / 1e9, t_mpi * 1e6);
      std::printf("ranks=%d  all_gather %10lld %12.1f %12.3f %14.1f\n", g,
                  static_cast<long long>(shard * g * 4), t_ag * 1e6, wire_ag / t_ag / 1e9,
                  t_mpi_ag * 1e6);
      std::fflush(stdout);
    }
  }
}

}  // namespace
}  // namespace pentamesh

int main(int argc, char** argv) {
  using namespace pentamesh;
  const int64_t max_bytes = argc > 1 ? std::atoll(argv[1]) : 1 << 16;
  auto world = comm::MpiWorld::Create();
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().message().c_str());
    return 2;
  }
  if ((*world)->size() < 2) {
    std::fprintf(stderr, "comm_bench: run under mpirun with at least 2 ranks\n");
    return 2;
  }
  Run((*world)->world(), max_bytes);
  return 0;
}
