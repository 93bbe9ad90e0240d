// hardsync: every learner's gradient makes one update (c = L), and no learner
// gets new weights before it (the barrier). Equivalent to one learner with
// batch L x mu.
#include "protocol/protocols.hpp"

namespace asgd::protocol {
namespace {

class Hardsync final : public Protocol {
 public:
  explicit Hardsync(const Options& cfg) : c_(cfg.learners) {}
  const char* name() const override { return "hardsync"; }
  int gradients_per_update() const override { return c_; }
  bool barrier() const override { return true; }

 private:
  int c_;
};

}  // namespace

Entry<Protocol> hardsync_entry() {
  return entry_of<Hardsync>("hardsync",
                         "synchronous: all L gradients make one update, behind a barrier",
                         no_options);
}

}  // namespace asgd::protocol
