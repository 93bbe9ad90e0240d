// allreduce: synchronous SGD without servers (what Horovod and PyTorch DDP
// do). Every learner computes a gradient on its minibatch, the learners sum
// them with MPI_Allreduce and each applies the same update (the mean of the L
// gradients, the server rule of hardsync), so all hold the same weights. On
// virtual learners: hardsync's numerics and barrier, with no server.
#include <fmt/format.h>

#include "protocol/protocols.hpp"

namespace asgd::protocol {
namespace {

class Allreduce final : public Protocol {
 public:
  explicit Allreduce(const Options& cfg) : c_(cfg.learners) {}
  const char* name() const override { return "allreduce"; }
  int gradients_per_update() const override { return c_; }
  bool barrier() const override { return true; }
  bool uses_servers() const override { return false; }

 private:
  int c_;
};

void check_allreduce(const Options& c, std::vector<std::string>& problems) {
  if (c.servers != 1)
    problems.push_back(fmt::format("--servers {}: allreduce has no server ranks (leave --servers out)",
                                   c.servers));
}

}  // namespace

Entry<Protocol> allreduce_entry() {
  return entry_of<Allreduce>("allreduce",
                         "synchronous SGD, no servers: learners sum gradients with MPI_Allreduce",
                         check_allreduce);
}

}  // namespace asgd::protocol
