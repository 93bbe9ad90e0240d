#include "ps/exchange_probe.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/clock.hpp"
#include "common/error.hpp"
#include "ps/shm_windows.hpp"
#include "ps/transport.hpp"

namespace asgd::ps {

namespace {

// The learner's side (rank 1): pre-post the reply, push, wait, copy.
void learner_side(const Comm& comm, const SharedWindows* shm, std::vector<float>& grad,
                  std::vector<float>& weights, int i) {
  const auto n = static_cast<index_t>(grad.size());
  ReplyHeader rh;
  PushHeader ph;
  ph.timestamp = i;
  MPI_Request head = irecv(rh, 0, kReply, comm.get());
  if (shm != nullptr) {
    MPI_Win_sync(shm->grads);
    ph.shm = 1;
    MPI_Request push = isend(ph, 0, kPush, comm.get());
    polite_wait(push, Wait::transfer);
    polite_wait(head, Wait::event);
    MPI_Win_sync(shm->weights);
    std::memcpy(weights.data(), shm->weight_base[0], static_cast<std::size_t>(n) * sizeof(float));
    const char done = 0;
    MPI_Request r = isend(done, 0, kPullDone, comm.get());
    polite_wait(r, Wait::transfer);
    return;
  }
  MPI_Request body = irecv_floats(weights.data(), n, 0, kReplyData, comm.get());
  MPI_Request push[2] = {isend(ph, 0, kPush, comm.get()), isend_floats(grad.data(), n, 0, kPushData, comm.get())};
  polite_wait_all(2, push, Wait::transfer);
  polite_wait(head, Wait::event);
  polite_wait(body, Wait::transfer);
}

// The server's side (rank 0): probe, receive, reply; with shared windows
// wait for pull-done before the next push (as Server::drain_readers).
void server_side(const Comm& comm, const SharedWindows* shm, std::vector<float>& grad,
                 std::vector<float>& weights) {
  const auto n = static_cast<index_t>(grad.size());
  const MPI_Status st = polite_probe(1, kPush, comm.get());
  PushHeader ph;
  ReplyHeader rh;
  if (shm != nullptr) {
    MPI_Request r = irecv(ph, st.MPI_SOURCE, kPush, comm.get());
    polite_wait(r, Wait::transfer);
    MPI_Win_sync(shm->grads);
    rh.clock = ph.timestamp + 1;
    rh.shm = 1;
    MPI_Win_sync(shm->weights);
    r = isend(rh, 1, kReply, comm.get());
    polite_wait(r, Wait::transfer);
    char done = 0;
    polite_probe(1, kPullDone, comm.get());
    r = irecv(done, 1, kPullDone, comm.get());
    polite_wait(r, Wait::event);
    return;
  }
  MPI_Request r[2];
  r[0] = irecv(ph, 1, kPush, comm.get());
  r[1] = irecv_floats(grad.data(), n, 1, kPushData, comm.get());
  polite_wait_all(2, r, Wait::transfer);
  rh.clock = ph.timestamp + 1;
  r[0] = isend(rh, 1, kReply, comm.get());
  r[1] = isend_floats(weights.data(), n, 1, kReplyData, comm.get());
  polite_wait_all(2, r, Wait::transfer);
}

}  // namespace

double exchange_seconds(const Comm& comm, index_t floats, int iters, bool shm) {
  if (comm.size() != 2) throw Error("exchange probe: needs exactly 2 ranks");
  SharedWindows windows;
  if (shm) {
    open_shared_windows(windows, comm, comm.rank() == 0, floats, 1, 1);
    if (!windows.on) throw Error("exchange probe: the two ranks share no node (or ASGD_SHM=0)");
  }
  const SharedWindows* w = shm ? &windows : nullptr;
  std::vector<float> grad(static_cast<std::size_t>(floats), 1.0f), weights(grad.size(), 2.0f);
  auto once = [&](int i) {
    if (comm.rank() == 1)
      learner_side(comm, w, grad, weights, i);
    else
      server_side(comm, w, grad, weights);
  };
  once(-1);
  MPI_Barrier(comm.get());
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) once(i);
  double t = seconds_since(t0) / iters, slowest = 0;
  mpi_check(MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm.get()), "Allreduce");
  return slowest;
}

SendTimes send_times(const Comm& comm, index_t floats, int repeats) {
  if (comm.size() != 2) throw Error("send probe: needs exactly 2 ranks");
  std::vector<float> data(static_cast<std::size_t>(floats), 1.0f);
  std::vector<double> sent, arrived;
  for (int i = 0; i < repeats; ++i) {
    char ack = 0;
    if (comm.rank() == 1) {
      MPI_Request body = irecv_floats(data.data(), floats, 0, kReplyData, comm.get());
      MPI_Barrier(comm.get());
      polite_wait(body, Wait::transfer);
      MPI_Request r = isend(ack, 0, kPullDone, comm.get());
      polite_wait(r, Wait::transfer);
      continue;
    }
    MPI_Barrier(comm.get());
    const auto t0 = Clock::now();
    MPI_Request r = isend_floats(data.data(), floats, 1, kReplyData, comm.get());
    polite_wait(r, Wait::transfer);
    sent.push_back(seconds_since(t0));
    r = irecv(ack, 1, kPullDone, comm.get());
    polite_wait(r, Wait::event);
    arrived.push_back(seconds_since(t0));
  }
  double out[2] = {0, 0};
  if (comm.rank() == 0) {
    std::sort(sent.begin(), sent.end());
    std::sort(arrived.begin(), arrived.end());
    out[0] = sent[sent.size() / 2];
    out[1] = arrived[arrived.size() / 2];
  }
  mpi_check(MPI_Bcast(out, 2, MPI_DOUBLE, 0, comm.get()), "Bcast");
  return {out[0], out[1]};
}

}  // namespace asgd::ps
