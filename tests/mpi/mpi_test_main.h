// Shared by the GoogleTest binaries that run under mpirun: the MpiWorld that mpi_test_main.cc
// creates before RUN_ALL_TESTS and destroys after it.
// Invariant: every rank runs the same tests in the same order, so collectives inside tests
// match up; a test that fails on one rank fails the whole run (the result is reduced).
#pragma once

#include "comm/mpi_communicator.h"

namespace pentamesh::mpitest {

comm::MpiWorld& TestWorld();

}  // namespace pentamesh::mpitest
