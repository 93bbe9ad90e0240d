#include "ps/mpi_learner.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/fatal.hpp"
#include "ps/local_steps.hpp"
#include "ps/protocol.hpp"
#include "ps/shards.hpp"
#include "ps/run_parts.hpp"
#include "ps/transport.hpp"

namespace asgd::ps {

namespace {

class Learner {
 public:
  Learner(const TrainConfig& cfg, const Comm& comm, const data::Dataset& train,
          engine::Engine& eng, const SharedWindows& shm, bool cuda_aware)
      : cfg_(cfg), comm_(comm), eng_(eng), shm_(shm), S_(cfg.servers), l_(comm.rank() - S_),
        rule_(cfg), local_(cfg, rule_, train),
        sampler_(train.n, cfg.seed, l_, cfg.learners, cfg.batch), clocks_(static_cast<std::size_t>(S_)),
        replies_(static_cast<std::size_t>(S_)), heads_(static_cast<std::size_t>(S_)),
        bodies_(static_cast<std::size_t>(S_)), released_(static_cast<std::size_t>(S_), MPI_REQUEST_NULL) {
    for (int s = 0; s < S_; ++s) shards_.push_back(shard_of(eng.n_params(), s, S_));
    // CUDA-aware MPI with messages: replies land in and pushes leave from device
    // memory (not EASGD's: its pushes are made on the host)
    if (rule_.elastic_alpha() > 0) centre_.resize(static_cast<std::size_t>(eng.n_params()));
    eng_.set_direct(cuda_aware && !shm.on && centre_.empty());
  }

  void run() {
    const bool stop = hello();
    // Backward passes write straight into this learner's shared window: the
    // servers read the gradient there, no copy. (The window is free to write:
    // a server has consumed the last gradient before it replies.)
    if (shm_.on) eng_.use_grad_memory(shm_.grad_base[static_cast<std::size_t>(l_)]);
    eng_.pin_host_buffers();  // page-locked staging buffers copy at full DMA speed
    // Where no shard changes its weights while this learner computes, the
    // learner reads them in the shards' windows: a reply is then no copy.
    if (real_t* w = weights_in_place(shm_, cfg_, eng_.n_params())) in_place_ = eng_.read_params_from(w);
    if (!stop) cycles();
    if (in_place_) eng_.read_params_from(nullptr);  // the windows go before the engine
    totals_.stage_s = eng_.staging_s();
    std::vector<MPI_Request> r;
    for (int s = 0; s < S_; ++s) r.push_back(isend(totals_, s, kBye, comm_.get()));
    polite_wait_all(S_, r.data(), Wait::event, "bye messages to reach the servers");
  }

 private:
  // Fetches the weights (and, after a resume, this learner's data cursor).
  // Returns whether server 0 said stop.
  bool hello() {
    post_receives();
    std::vector<MPI_Request> r;
    for (int s = 0; s < S_; ++s) r.push_back(isend(totals_, s, kHello, comm_.get()));
    polite_wait_all(S_, r.data(), Wait::event, "hello messages to reach the servers");
    const bool stop = finish_receives(nullptr, nullptr);
    // EASGD: the learner's own weights start as the centre
    if (!centre_.empty()) std::copy(centre_.begin(), centre_.end(), eng_.params());
    if (replies_[0].cursor_epoch > 0 || replies_[0].cursor_batch > 0)
      sampler_.restore({replies_[0].cursor_epoch, replies_[0].cursor_batch});
    return stop;
  }

  // Compute, push, pull until server 0 says stop.
  void cycles() {
    for (bool stop = false; !stop;) {
      eng_.params_changed();  // the pulled weights (staged to the device where there is one)
      if (rule_.weights_delta()) eng_.keep_fetched();
      PushHeader h;
      const auto t0 = Clock::now();
      const LocalResult lr = local_.run(eng_, sampler_, l_, step_);
      h.loss_sum = lr.loss_sum;
      h.wrong = lr.wrong;
      h.samples = lr.samples;
      const auto st = sampler_.state();
      h.cursor_epoch = st.epoch;
      h.cursor_batch = st.batch;
      const double compute = seconds_since(t0);
      totals_.compute_s += compute;
      if (centre_.empty())
        eng_.grads_ready();
      else
        local_.elastic(eng_, centre_.data());  // the exchange with the centre last received
      if (l_ == 0) inject_signal("learner");
      push(h, compute);
      stop = finish_receives(&totals_.wait_s, &totals_.pull_s);
    }
  }

  void push(PushHeader h, double compute) {
    inject_delay();
    const auto t1 = Clock::now();
    post_receives();
    if (shm_.on) {  // the gradient already is in this learner's window; headers only
      MPI_Win_sync(shm_.grads);
      h.shm = 1;
    }
    std::vector<PushHeader> hs(static_cast<std::size_t>(S_), h);
    const real_t* send_base = eng_.transfer_grads();
    // Over messages the push goes to one shard at a time, learner l starting
    // at shard l * max(1, S / L) mod S: the learners' pushes spread over the
    // shards (each link carries one transfer at a time where there are
    // enough learners), and a shard that has its part replies while the
    // learner still sends the others (the links are full duplex). Sent to
    // every shard at once, the parts would share the learner's link and end
    // together, and shards that took the same learner first would share its
    // link while the other learners' links idled. Over shared windows only
    // headers go, to every shard at once.
    const int width = shm_.on ? S_ : 1;
    const int first = shm_.on ? 0 : static_cast<int>((static_cast<std::int64_t>(l_) * std::max(1, S_ / cfg_.learners)) % S_);
    for (int i = 0; i < S_; i += width) {
      std::vector<MPI_Request> r;
      for (int j = i; j < std::min(S_, i + width); ++j) {
        const int s = (first + j) % S_;
        hs[s].timestamp = clocks_[s];
        hs[s].compute_s = compute;
        r.push_back(isend(hs[s], s, kPush, comm_.get()));
        if (!shm_.on)
          r.push_back(isend_floats(send_base + shards_[s].offset, shards_[s].len, s, kPushData, comm_.get()));
      }
      polite_wait_all(static_cast<int>(r.size()), r.data(), Wait::transfer, "this learner's push to reach the servers");
    }
    totals_.push_s += seconds_since(t1);
    totals_.gradients += 1;
  }

  // Replies (header + weights) from every server are received into the
  // parameter buffer. Receives are posted BEFORE the matching push is sent,
  // so a server's reply never waits on this learner (no cycle with a server
  // 0 that is busy gathering shards for an evaluation).
  // The weights pulled: the learner's own (EASGD: the centre, kept apart).
  real_t* pulled() { return centre_.empty() ? eng_.params() : centre_.data(); }

  void post_receives() {
    real_t* recv_base = centre_.empty() ? eng_.transfer_params() : centre_.data();
    for (int s = 0; s < S_; ++s) {
      heads_[s] = irecv(replies_[s], s, kReply, comm_.get());
      if (!shm_.on)
        bodies_[s] = irecv_floats(recv_base + shards_[s].offset, shards_[s].len, s, kReplyData,
                                  comm_.get());
    }
  }

  // Returns whether server 0 said stop.
  // With shared memory each shard is copied and released (kPullDone) as soon
  // as its own reply arrives, never after waiting for another shard: a shard
  // that waits for our kPullDone then waits on nothing else (with S >= 2 a
  // release after all replies deadlocked: two shards each holding a reply
  // the other's learner needed).
  bool finish_receives(double* wait_s, double* pull_s) {
    const auto t0 = Clock::now();
    double copy_s = 0;
    if (shm_.on) {
      const char pull_done = 0;
      real_t* params = pulled();
      for (int left = S_; left > 0; --left) {
        const int s = polite_wait_any(S_, heads_.data(), Wait::event, "a reply from a server shard");
        const auto c0 = Clock::now();
        inject_delay();
        MPI_Win_sync(shm_.weights);
        if (!in_place_)
          std::memcpy(params + shards_[s].offset, shm_.weight_base[static_cast<std::size_t>(s)],
                      static_cast<std::size_t>(shards_[s].len) * sizeof(real_t));
        released_[s] = isend(pull_done, s, kPullDone, comm_.get());
        copy_s += seconds_since(c0);
      }
      polite_wait_all(S_, released_.data(), Wait::transfer, "pull-done messages to reach the servers");
    } else {
      polite_wait_all(S_, heads_.data(), Wait::event, "replies from every server shard");
      const auto c0 = Clock::now();
      polite_wait_all(S_, bodies_.data(), Wait::transfer, "the weights from every server shard");
      copy_s = seconds_since(c0);
    }
    for (int s = 0; s < S_; ++s) clocks_[s] = replies_[s].clock;
    if (wait_s) *wait_s += seconds_since(t0) - copy_s;
    if (pull_s) *pull_s += copy_s;
    return replies_[0].stop != 0;
  }

  const TrainConfig& cfg_;
  const Comm& comm_;
  engine::Engine& eng_;
  const SharedWindows& shm_;
  int S_, l_;
  UpdateRule rule_;
  LocalSteps local_;
  data::Sampler sampler_;
  std::vector<Shard> shards_;
  std::vector<std::int64_t> clocks_;
  std::vector<ReplyHeader> replies_;
  std::vector<MPI_Request> heads_, bodies_, released_;
  PushHeader totals_;
  std::int64_t step_ = 0;
  bool in_place_ = false;  // the weights are read in the shards' windows (no copy)
  std::vector<real_t> centre_;  // EASGD: the centre received at the last exchange
};

}  // namespace

void run_learner(const TrainConfig& cfg, const Comm& comm, const data::Dataset& train,
                 engine::Engine& eng, const SharedWindows& shm, bool cuda_aware) {
  Learner(cfg, comm, train, eng, shm, cuda_aware).run();
}

}  // namespace asgd::ps
