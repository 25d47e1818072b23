// Measures Communicator ops on the world group (mpirun -np N comm_bench [max_bytes]): time per
// call and bus bandwidth (bytes_wire / time, the counters' own convention), next to the plain
// blocking MPI call on the same ranks, so the cost of deadline polling is visible.
// Registered as a small smoke test; run by hand for the record, e.g.
//   mpirun --oversubscribe -np 8 build/tests/mpi/comm_bench 16777216
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "comm/mpi_communicator.h"

namespace pentamesh {
namespace {

// Seconds per call of fn, over enough repetitions to take ~0.2 s (at least 3), after a warmup.
// Every rank runs the same number of repetitions (rank 0 decides).
double TimePerCall(const std::function<void()>& fn) {
  fn();
  int reps = 1;
  for (;;) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    MPI_Barrier(MPI_COMM_WORLD);
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int again = elapsed_s < 0.2 && reps < 4096 ? 1 : 0;
    MPI_Bcast(&again, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!again) return elapsed_s / reps;
    reps *= 4;
  }
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
        TimePerCall([&] { world.all_reduce(buf.data(), count, core::Dtype::kF32); });
    const double wire_ar = world.stats()[comm::Op::kAllReduce].bytes_wire /
                           static_cast<double>(world.stats()[comm::Op::kAllReduce].calls);
    const double t_mpi = TimePerCall([&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    const int64_t shard = count / g;
    world.reset_stats();
    const double t_ag =
        TimePerCall([&] { world.all_gather(out.data(), buf.data(), shard, core::Dtype::kF32); });
    const double wire_ag = world.stats()[comm::Op::kAllGather].bytes_wire /
                           static_cast<double>(world.stats()[comm::Op::kAllGather].calls);
    const double t_mpi_ag = TimePerCall([&] {
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
