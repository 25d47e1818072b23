// The Trainer of the mpirun equivalence tests: the layout's Mesh over the test world and a Trainer
// on it, as `pentamesh train` builds them. Invariant: the mesh outlives the trainer (both owned
// here); on failure `trainer` is null and the reason is reported as a test failure.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "mesh/mesh.h"
#include "tests/mpi/mpi_test_main.h"
#include "train/trainer.h"

namespace pentamesh::mpitest {

struct DistTrainer {
  std::unique_ptr<mesh::Mesh> mesh;
  std::unique_ptr<train::Trainer> trainer;
};

inline DistTrainer MakeDistTrainer(const train::RunConfig& config) {
  comm::MpiWorld& world = TestWorld();
  auto mesh = mesh::Mesh::Create(config.run.layout, world);
  if (!mesh.ok()) {
    ADD_FAILURE() << mesh.status().message();
    return {};
  }
  DistTrainer d{.mesh = std::make_unique<mesh::Mesh>(std::move(*mesh)), .trainer = nullptr};
  auto created = train::Trainer::Create(config, {.mesh = d.mesh.get(), .world = &world.world()});
  if (!created.ok()) {
    ADD_FAILURE() << created.status().message();
    return {};
  }
  d.trainer = std::move(*created);
  return d;
}

}  // namespace pentamesh::mpitest
