#include "ps/mpi_learner.hpp"

#include <cstring>
#include <vector>

#include "ps/local_steps.hpp"
#include "ps/protocol.hpp"
#include "ps/shards.hpp"
#include "ps/shared.hpp"
#include "ps/transport.hpp"

namespace asgd::ps {

using namespace detail;

void run_learner(const TrainConfig& cfg, const Comm& comm, const data::Dataset& train,
                 nn::Model& model, const SharedWindows& shm, gpu::Net* net, bool cuda_aware) {
  const int S = cfg.servers, L = cfg.learners, l = comm.rank() - S;
  const UpdateRule rule(cfg);
  std::vector<Shard> shards;
  for (int s = 0; s < S; ++s) shards.push_back(shard_of(model.n_params(), s, S));
  data::Sampler sampler(train.n, cfg.seed, l, L, cfg.batch);
  std::vector<std::int64_t> clocks(S, 0);
  std::vector<ReplyHeader> replies(S);
  PushHeader totals;
  real_t* params = model.params().data();
  const bool direct = net != nullptr && cuda_aware && !shm.on;  // MPI moves device memory
  real_t* recv_base = direct ? net->device_params() : params;

  // Replies (header + weights) from every server are received into the
  // parameter buffer. Receives are posted BEFORE the matching push is sent,
  // so a server's reply never waits on this learner (no cycle with a server
  // 0 that is busy gathering shards for an evaluation).
  std::vector<MPI_Request> heads(S), bodies(S);
  auto post_receives = [&] {
    for (int s = 0; s < S; ++s) {
      heads[s] = irecv(replies[s], s, kReply, comm.get());
      if (!shm.on)
        bodies[s] = irecv_floats(recv_base + shards[s].offset, shards[s].len, s, kReplyData, comm.get());
    }
  };
  // Returns whether server 0 said stop.
  // With shared memory each shard is copied and released (kPullDone) as soon
  // as its own reply arrives, never after waiting for another shard: a shard
  // that waits for our kPullDone then waits on nothing else (with S >= 2 a
  // release after all replies deadlocked: two shards each holding a reply
  // the other's learner needed).
  const char pull_done = 0;
  std::vector<MPI_Request> released(S, MPI_REQUEST_NULL);
  auto finish_receives = [&](double* wait_s, double* pull_s) {
    const auto t0 = Clock::now();
    double copy_s = 0;
    if (shm.on) {
      for (int left = S; left > 0; --left) {
        const int s = polite_wait_any(S, heads.data(), Wait::event, "a reply from a server shard");
        const auto c0 = Clock::now();
        inject_delay();
        MPI_Win_sync(shm.weights);
        std::memcpy(params + shards[s].offset, shm.weight_base[static_cast<std::size_t>(s)],
                    static_cast<std::size_t>(shards[s].len) * sizeof(real_t));
        released[s] = isend(pull_done, s, kPullDone, comm.get());
        copy_s += seconds_since(c0);
      }
      polite_wait_all(S, released.data(), Wait::transfer, "pull-done messages to reach the servers");
    } else {
      polite_wait_all(S, heads.data(), Wait::event, "replies from every server shard");
      const auto c0 = Clock::now();
      polite_wait_all(S, bodies.data(), Wait::transfer, "the weights from every server shard");
      copy_s = seconds_since(c0);
    }
    for (int s = 0; s < S; ++s) clocks[s] = replies[s].clock;
    if (wait_s) *wait_s += seconds_since(t0) - copy_s;
    if (pull_s) *pull_s += copy_s;
    return replies[0].stop != 0;
  };

  // hello: fetch the weights (and, after a resume, this learner's data cursor)
  post_receives();
  {
    std::vector<MPI_Request> r;
    for (int s = 0; s < S; ++s) r.push_back(isend(totals, s, kHello, comm.get()));
    polite_wait_all(S, r.data(), Wait::event, "hello messages to reach the servers");
  }
  bool stop = finish_receives(nullptr, nullptr);
  if (replies[0].cursor_epoch > 0 || replies[0].cursor_batch > 0)
    sampler.restore({replies[0].cursor_epoch, replies[0].cursor_batch});

  // Backward passes write straight into this learner's shared window: the
  // servers read the gradient there, no copy. (The window is free to write:
  // a server has consumed the last gradient before it replies.)
  if (shm.on) model.use_grad_memory(shm.grad_base[static_cast<std::size_t>(l)]);
  if (net && !direct) {  // page-locked staging buffers copy at full DMA speed
    const auto bytes = static_cast<std::size_t>(model.n_params()) * sizeof(real_t);
    net->pin(params, bytes);
    net->pin(model.grads().data(), bytes);
  }
  const real_t* send_base = direct ? net->device_grads() : model.grads().data();
  nn::View local_inc, fetched;
  if (rule.delta() && !net) {
    local_inc = nn::View("asgd::learner::inc", model.n_params());
    fetched = nn::View("asgd::learner::fetched", model.n_params());
    Kokkos::deep_copy(fetched, model.params());
  }
  LocalSteps local(cfg, rule, train, train.sample_size());
  std::int64_t step = 0;
  while (!stop) {
    PushHeader h;
    if (net) {
      if (!direct) net->set_params(params);
      if (rule.delta()) net->keep_fetched();
    }
    const auto t0 = Clock::now();
    const LocalResult lr = local.run(model, sampler, l, step, local_inc, fetched, net);
    h.loss_sum = lr.loss_sum;
    h.wrong = lr.wrong;
    h.samples = lr.samples;
    const auto st = sampler.state();
    h.cursor_epoch = st.epoch;
    h.cursor_batch = st.batch;
    const double compute = seconds_since(t0);
    totals.compute_s += compute;
    if (net && !direct) net->get_grads(model.grads().data());

    inject_delay();
    const auto t1 = Clock::now();
    post_receives();
    if (shm.on) {  // the gradient already is in this learner's window; headers only
      MPI_Win_sync(shm.grads);
      h.shm = 1;
    }
    std::vector<PushHeader> hs(S, h);
    std::vector<MPI_Request> r;
    for (int s = 0; s < S; ++s) {
      hs[s].timestamp = clocks[s];
      hs[s].compute_s = compute;
      r.push_back(isend(hs[s], s, kPush, comm.get()));
      if (!shm.on)
        r.push_back(isend_floats(send_base + shards[s].offset, shards[s].len, s, kPushData,
                                 comm.get()));
    }
    polite_wait_all(static_cast<int>(r.size()), r.data(), Wait::transfer,
                    "this learner's push to reach the servers");
    totals.push_s += seconds_since(t1);
    totals.gradients += 1;
    stop = finish_receives(&totals.wait_s, &totals.pull_s);
    if (rule.delta() && !stop && !net) Kokkos::deep_copy(fetched, model.params());
  }
  if (net) totals.stage_s = net->staging_s();
  std::vector<MPI_Request> r;
  for (int s = 0; s < S; ++s) r.push_back(isend(totals, s, kBye, comm.get()));
  polite_wait_all(S, r.data(), Wait::event, "bye messages to reach the servers");
}

}  // namespace asgd::ps
