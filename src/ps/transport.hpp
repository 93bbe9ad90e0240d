#pragma once
// The wire format of the parameter server: tags, fixed headers, and typed
// non-blocking sends and receives. A push or a reply is a header followed
// (same source, MPI's non-overtaking rule) by one shard of floats. Shared by
// the MPI core and the transport benchmark, so the benchmark measures the
// messages training really sends.
#include <mpi.h>

#include <cstdint>

#include "common/types.hpp"
#include "ps/doorbell.hpp"
#include "ps/mpi_util.hpp"

namespace asgd::ps {

// Message tags. A push or reply is a fixed header followed (same source and
// tag order, MPI's non-overtaking rule) by a float payload of one shard.
enum Tag : int {
  kHello = 1,      // learner -> every server: send me the weights
  kPush = 2,       // learner -> every server: header, then payload (gradient or delta)
  kPushData = 3,
  kReply = 4,      // server -> learner: header, then payload (weights) unless stop
  kReplyData = 5,
  kBye = 6,        // learner -> every server: done (header carries its timing)
  kEvalReq = 7,    // server 0 -> server k: send me your shard
  kEvalData = 8,
  kFinish = 9,     // server 0 -> server k: write your final checkpoint and exit
  kPullDone = 10,  // learner -> server (shared memory): done copying your weights
};

struct PushHeader {
  std::int64_t timestamp = 0;  // server clock of the weights the gradient was computed on
  std::int64_t samples = 0;
  double loss_sum = 0;         // summed over the samples
  std::int64_t wrong = 0;
  std::int64_t cursor_epoch = 0, cursor_batch = 0;  // sampler state after this gradient
  double compute_s = 0, wait_s = 0, push_s = 0, pull_s = 0;  // BYE: totals
  std::int64_t gradients = 0;                                 // BYE: pushes made
  std::int64_t shm = 0;  // the payload is in the learner's shared-memory window, not a message
  double stage_s = 0;    // BYE: host<->GPU copy time (--device cuda)
};

struct ReplyHeader {
  std::int64_t clock = 0;
  std::int32_t stop = 0;
  std::int64_t cursor_epoch = 0, cursor_batch = 0;  // HELLO replies from server 0
  std::int64_t shm = 0;  // the weights are in the server's window: copy, then send kPullDone
};

template <class T>
MPI_Request isend(const T& v, int dest, int tag, MPI_Comm comm) {
  MPI_Request r;
  mpi_check(MPI_Isend(&v, sizeof(T), MPI_BYTE, dest, tag, comm, &r), "Isend");
  ring(dest, comm);
  return r;
}
template <class T>
MPI_Request irecv(T& v, int src, int tag, MPI_Comm comm) {
  MPI_Request r;
  mpi_check(MPI_Irecv(&v, sizeof(T), MPI_BYTE, src, tag, comm, &r), "Irecv");
  return r;
}
inline MPI_Request isend_floats(const real_t* p, index_t n, int dest, int tag, MPI_Comm comm) {
  MPI_Request r;
  mpi_check(MPI_Isend(p, static_cast<int>(n), MPI_FLOAT, dest, tag, comm, &r), "Isend");
  ring(dest, comm);
  return r;
}
inline MPI_Request irecv_floats(real_t* p, index_t n, int src, int tag, MPI_Comm comm) {
  MPI_Request r;
  mpi_check(MPI_Irecv(p, static_cast<int>(n), MPI_FLOAT, src, tag, comm, &r), "Irecv");
  return r;
}

}  // namespace asgd::ps
