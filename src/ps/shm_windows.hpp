#pragma once
// Node-local shared memory for the MPI core (see SharedWindows).
#include <mpi.h>

#include <exception>
#include <vector>

#include "common/types.hpp"
#include "config/config.hpp"
#include "ps/doorbell.hpp"
#include "ps/mpi_util.hpp"

namespace asgd::ps {

// Node-local shared memory. When every rank is on one node, weights and
// gradients move through MPI-3 shared windows instead of messages: a learner
// writes its gradient into its own window and sends only a header; a server
// updates its shard in its own window and replies with a header; the learner
// copies the shard and says kPullDone. Each byte is copied once instead of
// twice, and the server does no copying at all. A server never changes its
// weights while a learner is copying them (it waits for kPullDone first).
// ASGD_SHM=0 turns this off (messages only). With the windows come the
// ranks' doorbells (ps/doorbell.hpp) for sends on the same communicator.
struct SharedWindows {
  bool on = false;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win weights = MPI_WIN_NULL, grads = MPI_WIN_NULL;
  MPI_Win bells = MPI_WIN_NULL;  // one doorbell per rank (ps/doorbell.hpp); ASGD_DOORBELL=0: none
  std::vector<real_t*> weight_base;  // per server rank: its shard
  std::vector<real_t*> grad_base;    // per learner: its whole gradient
  int unwinding_ = std::uncaught_exceptions();
  SharedWindows() = default;
  SharedWindows(const SharedWindows&) = delete;
  SharedWindows& operator=(const SharedWindows&) = delete;
  ~SharedWindows() {
    // Freeing a window is collective: while an exception unwinds (the
    // watchdog, a failed rank) the other ranks may never get here, and
    // main() ends the job with MPI_Abort anyway.
    set_doorbells(MPI_COMM_NULL, {}, 0);
    if (std::uncaught_exceptions() > unwinding_) return;
    for (MPI_Win* w : {&weights, &grads, &bells})
      if (*w != MPI_WIN_NULL) {
        MPI_Win_unlock_all(*w);
        MPI_Win_free(w);
      }
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  }
};

// ASGD_IN_PLACE unset or 1: learners read the weights in the servers'
// windows where they may (below); 0: they copy them out at each reply
// (asgd::Error for any other value).
bool in_place_wanted();
// Where the learners of run cfg read the weights in place: the servers'
// windows as one array of n_params floats (shard s at its offset, as MPI lays
// out a window's segments by default), when the windows are on, the rule
// allows it (UpdateRule::weights_read_in_place), the learners are CPU ones
// and ASGD_IN_PLACE is not 0; nullptr where they copy. Every rank decides alike.
real_t* weights_in_place(const SharedWindows& shm, const TrainConfig& cfg, index_t n_params);

// Opens the windows when every rank of comm is on this node and ASGD_SHM is
// not 0 (collective over comm): a server rank exposes its shard of
// shard_len floats, a learner its gradient of n_params floats. shm.on says
// whether they are in use; shm.node is the node's communicator either way.
void open_shared_windows(SharedWindows& shm, const Comm& comm, bool server, index_t floats,
                         int servers, int learners);

}  // namespace asgd::ps
