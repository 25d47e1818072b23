// The job of the mpirun equivalence tests: train::Job over the test world, as `pentamesh train`
// builds it (mesh, rank-0 dataset preparation, Trainer). On failure null, and the reason is
// reported as a test failure.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "tests/mpi/mpi_test_main.h"
#include "train/job.h"

namespace pentamesh::mpitest {

inline std::unique_ptr<train::Job> MakeDistTrainer(const train::RunConfig& config) {
  auto job = train::Job::Create(config, &TestWorld());
  if (!job.ok()) {
    ADD_FAILURE() << job.status().message();
    return nullptr;
  }
  return std::make_unique<train::Job>(std::move(*job));
}

}  // namespace pentamesh::mpitest
