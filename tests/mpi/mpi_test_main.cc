// main() for GoogleTest binaries under mpirun: initialises MPI, runs the tests on every rank,
// prints failures prefixed with the rank (rank 0 prints the full report) and exits non-zero on
// every rank when any rank had a failure. Without mpirun it runs as a single rank.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "tests/mpi/mpi_test_main.h"

namespace pentamesh::mpitest {
namespace {

comm::MpiWorld* g_world = nullptr;

// Prints each failed assertion with the rank that saw it.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The test's name is kept from OnTestStart: UnitTest::current_test_info() would deadlock here
  // (gtest holds its mutex while it reports a part result).
  void OnTestStart(const ::testing::TestInfo& info) override {
    test_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d\n%s\n", rank_, test_.c_str(),
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

comm::MpiWorld& TestWorld() { return *g_world; }

}  // namespace pentamesh::mpitest

int main(int argc, char** argv) {
  using namespace pentamesh;
  ::testing::InitGoogleTest(&argc, argv);
  auto world = comm::MpiWorld::Create();
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().message().c_str());
    return 2;
  }
  mpitest::g_world = world->get();
  const int rank = mpitest::g_world->rank();
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  if (rank != 0) listeners.Append(new mpitest::RankFailurePrinter(rank));
  const int result = RUN_ALL_TESTS();
  int64_t failures = result == 0 ? 0 : 1;
  mpitest::g_world->world().all_reduce(&failures, 1, core::Dtype::kI64);
  if (rank == 0 && failures > 0) {
    std::fprintf(stderr, "%lld rank(s) had failures\n", static_cast<long long>(failures));
  }
  mpitest::g_world = nullptr;
  world->reset();  // MPI_Finalize
  return failures > 0 ? 1 : 0;
}
