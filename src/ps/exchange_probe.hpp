#pragma once
// One push + pull between a learner and a server shard with the training
// code's own messages and waits (ps/transport.hpp): over node-local shared
// windows (header-only push, the learner copies the weights and says
// pull-done) or over messages (header + payload each way). Used by
// `asgd calibrate` (the profile's link figures) and the transport benchmark.
#include "common/types.hpp"
#include "ps/mpi_util.hpp"

namespace asgd::ps {

// Seconds per exchange of `floats` each way, mean of `iters` after one
// untimed, the slower rank's (every rank gets it). comm has 2 ranks: rank 0
// the server, rank 1 the learner. shm: over shared windows (collective;
// throws asgd::Error when the ranks share no node).
double exchange_seconds(const Comm& comm, index_t floats, int iters, bool shm);

// A reply's send against its arrival, over messages: rank 0 sends `floats`
// to rank 1, whose receive is posted first (as a learner's reply is), and
// times its own send until done and until rank 1's acknowledgement of the
// whole arrives. Seconds {sent, arrived}, the median of `repeats` (rank 0's;
// every rank gets them).
struct SendTimes {
  double sent = 0, arrived = 0;
};
SendTimes send_times(const Comm& comm, index_t floats, int repeats);

}  // namespace asgd::ps
