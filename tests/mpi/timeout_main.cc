// The timeout path, run under mpirun -np 4 with layout dp=2 tp=2 (tp groups {0,1} {2,3}, dp
// groups {0,2} {1,3}) by expect_timeout.sh, which checks the exit code, the time and the message.
//   collective: world rank 1 never joins the tp all_reduce; rank 0 must abort naming itself,
//               group tp {0,1} and all_reduce.
//   recv:       rank 0 waits for a message rank 2 never sends; rank 0 must abort naming dp {0,2}
//               and recv.
// Ranks that are not meant to report sleep far longer than the timeout, so only the abort ends
// the job; a hang would show as the wrapper's time limit.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "comm/mpi_communicator.h"
#include "mesh/mesh.h"

int main(int argc, char** argv) {
  using namespace pentamesh;
  if (argc != 2 || (std::strcmp(argv[1], "collective") != 0 && std::strcmp(argv[1], "recv") != 0)) {
    std::fprintf(stderr, "usage: %s collective|recv\n", argv[0]);
    return 2;
  }
  const bool collective = std::strcmp(argv[1], "collective") == 0;
  auto world = comm::MpiWorld::Create();
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().message().c_str());
    return 2;
  }
  spec::Layout layout;
  layout.dp = 2;
  layout.tp = 2;
  auto mesh = mesh::Mesh::Create(layout, **world);
  if (!mesh.ok()) {
    std::fprintf(stderr, "%s\n", mesh.status().message().c_str());
    return 2;
  }
  const int rank = (*world)->rank();
  float x = 1.0f;
  if (collective && rank == 0) mesh->tp().all_reduce(&x, 1, core::Dtype::kF32);
  if (!collective && rank == 0) mesh->dp().recv(&x, 1, core::Dtype::kF32, /*peer=*/1);
  std::this_thread::sleep_for(std::chrono::seconds(120));
  std::fprintf(stderr, "rank %d: the job was not aborted\n", rank);
  return 0;
}
