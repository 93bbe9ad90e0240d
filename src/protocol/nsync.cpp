// GPU A-SGD (Paine et al. 2013): a learner takes n_sync local SGD steps on its
// own copy of the weights, then pushes the change of its weights (local minus
// fetched); the server merges each change as it arrives (c = 1) by the
// run's merge rule (merge_rules.cpp; the sum by default).
#include <fmt/format.h>

#include "protocol/protocols.hpp"

namespace asgd::protocol {
namespace {

class Nsync final : public Protocol {
 public:
  explicit Nsync(const Options& cfg) : n_sync_(cfg.n_sync), merge_(cfg.merge_rule()) {}
  const char* name() const override { return "nsync"; }
  int gradients_per_update() const override { return 1; }
  Push push() const override { return Push::weights_delta; }
  int local_steps() const override { return n_sync_; }
  std::string describe() const override {
    return fmt::format(" n_sync={}{}", n_sync_, merge_ == kDefaultMerge ? "" : " merge=" + merge_);
  }

 private:
  int n_sync_;
  std::string merge_;
};

void check_nsync(const Options& c, std::vector<std::string>& problems) {
  if (c.n_sync < 1) problems.push_back(fmt::format("n_sync {} must be >= 1", c.n_sync));
}

}  // namespace

Entry<Protocol> nsync_entry() {
  return entry_of<Nsync>("nsync",
                         "GPU A-SGD: n_sync local steps, then push the weights' change",
                         check_nsync, {"merge"});
}

}  // namespace asgd::protocol
