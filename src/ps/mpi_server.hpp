#pragma once
// A parameter-server rank of the MPI core: one shard of the weights, the
// protocol's update rule (ps::ShardCore), and the messages of the wire format
// (ps/transport.hpp). Server 0 also evaluates, decides when to stop, and its
// result is the run's; every server checkpoints its shard.
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "io/results.hpp"
#include "ps/mpi_util.hpp"
#include "ps/session.hpp"
#include "ps/shard_core.hpp"
#include "ps/shards.hpp"
#include "ps/shm_windows.hpp"
#include "ps/transport.hpp"

namespace asgd::ps {

class Server {
 public:
  Server(RunSession& session, const Comm& comm, data::DataPair* data, engine::Engine& eng);

  // Restores this shard from its checkpoint if there is one. Returns whether it did.
  bool resume();
  // Weights in the shared window from now on (after resume / warm start).
  void use_shared(const SharedWindows* shm);
  // The warm-up steps were training: they count on the clock.
  void warm_up_took(double s);
  // This shard's weights from a full parameter buffer (warm start).
  void load_weights(const real_t* full);
  const Shard& shard() const { return shard_; }

  // Serves until the run ends; server 0 returns the run's result (without
  // its header), the others an empty one.
  io::RunResult run();
  // What was trained until the watchdog fired, marked failed.
  io::RunResult failed_result();

 private:
  template <class T>
  void recv(T& v, int src, int tag);
  void on_hello(int src);
  void on_bye(int src, bool& finish, int& byes);
  void serve_eval(int src);
  double epoch() const { return core_.epoch(); }
  double train_clock() const;
  void reply(int learner_rank, ReplyHeader h);
  void on_push(int src);
  void drain_readers();
  void finish_replies();
  void post_landing(int l);
  void cancel_landing(int l);
  void after_update();
  void progress();
  void run_eval();
  void checkpoint_paused();
  void checkpoint();
  void wait_for_finish();
  io::RunResult finish_result();

  RunSession& s_;
  const TrainConfig& cfg_;
  const Comm& comm_;
  data::DataPair* data_;
  engine::Engine& eng_;  // server 0 evaluates with it
  int k_, S_, L_;
  index_t n_train_;
  Shard shard_;
  ShardCore core_;
  const SharedWindows* shm_ = nullptr;
  int readers_ = 0;  // learners sent a reply that have not said kPullDone
  // Replies by message still on their way, per learner (header, weights):
  // the server goes on serving while they go out, and completes them all
  // before the weights change (finish_replies).
  std::vector<ReplyHeader> reply_heads_;
  std::vector<MPI_Request> replies_;  // 2 per learner; MPI_REQUEST_NULL when none
  // Per learner, where its next pushed gradient lands: a receive posted
  // before its header comes, so that gradients from several learners arrive
  // at once instead of one after another. Empty when L shard-sized buffers
  // would pass kLandingBudgetBytes: then each lands in the core's inbox,
  // received when its header is read.
  static constexpr double kLandingBudgetBytes = 1 << 30;
  bool landing_on_ = false;
  std::vector<nn::View> landing_;
  std::vector<MPI_Request> landing_req_;
  double train_s_ = 0, paused_s_ = 0, warm_up_s_ = 0, started_unix_ = 0;
  Clock::time_point start_;
  std::int64_t win_samples_ = 0;
  double win_t_ = 0;
  bool stopping_ = false;
  RunStatus status_ = RunStatus::completed;
  std::vector<io::LearnerTiming> timing_;
  std::vector<std::int64_t> pushed_before_;  // per learner: applied pushes of the checkpoint resumed from
  std::vector<io::EvalRecord> evals_;
};

}  // namespace asgd::ps
