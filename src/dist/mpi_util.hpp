#pragma once
// Thin MPI helpers: every return code checked through one function, a
// duplicated communicator owned by RAII, and a wait that does not burn a core.
#include <mpi.h>

#include <string>

#include "common/error.hpp"

namespace asgd::dist {

// Throws asgd::Error("MPI <what> failed: <MPI error string>") unless rc == MPI_SUCCESS.
void mpi_check(int rc, const char* what);

// A private duplicate of a communicator (never MPI_COMM_WORLD in library code).
class Comm {
 public:
  explicit Comm(MPI_Comm parent);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// What a wait is for. An event (the next push, a reply that depends on other
// learners) may take long: spin 50 us, then sleep with growing pauses (up to
// 500 us: shorter pauses cost learners ~10% of their compute time in wake-ups
// on a 2-core node), so a waiting server next to busy learners on an oversubscribed node
// yields its core. A transfer whose other side is known to be posted moves
// data only while both sides poll (MPICH's shared-memory copy is driven by
// progress calls): spin up to 20 ms before backing off.
enum class Wait { event, transfer };

// Completes req, polling as above. Returns the status.
MPI_Status polite_wait(MPI_Request& req, Wait kind = Wait::event);
void polite_wait_all(int n, MPI_Request* reqs, Wait kind = Wait::event);
// Blocks (politely) until a message matching (source, tag) is available.
MPI_Status polite_probe(int source, int tag, MPI_Comm comm);

// Whether the MPI library says it accepts CUDA device pointers (MPICH's
// MPIX_GPU_query_support, Open MPI's MPIX_Query_cuda_support);
// ASGD_CUDA_AWARE=0 turns it off.
bool mpi_cuda_aware();

}  // namespace asgd::dist
