// The Open MPI backend of the Communicator; built only when CMake found MPI.
#pragma once

#include <memory>
#include <string>

#include "mixp/dist/communicator.h"
#include "mixp/error.h"

namespace mixp::dist {

/// Initializes MPI unless it already is (by the program itself, say), on a communicator of its
/// own duplicated from MPI_COMM_WORLD whose errors are returned, not fatal.
std::unique_ptr<Communicator> make_mpi_communicator();

/// The mixp::Error for MPI's error `code` in `operation` on `rank` of `size`: the operation,
/// the rank and MPI's own description.
Error mpi_error(int code, const char* operation, int rank, int size);

}  // namespace mixp::dist
