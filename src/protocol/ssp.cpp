// Stale synchronous parallel (Ho et al. 2013): asynchronous, each gradient
// its own update (c = 1), but a learner may run at most s clocks ahead of the
// slowest: a shard holds its reply while its pushes applied exceed the
// slowest learner's by more than s, and answers it when the slowest catches
// up. s = 0 is a barrier every round.
#include <fmt/format.h>

#include "protocol/protocols.hpp"

namespace asgd::protocol {
namespace {

constexpr int kDefaultStaleness = 3;

class Ssp final : public Protocol {
 public:
  explicit Ssp(const Options& cfg) : s_(cfg.staleness.value_or(kDefaultStaleness)) {}
  const char* name() const override { return "ssp"; }
  int gradients_per_update() const override { return 1; }
  bool may_reply(std::int64_t learner_clock, std::int64_t slowest) const override {
    return learner_clock - slowest <= s_;
  }
  std::string describe() const override { return fmt::format(" s={}", s_); }

 private:
  std::int64_t s_;
};

void check_ssp(const Options& c, std::vector<std::string>& problems) {
  if (c.staleness && (*c.staleness < 0 || *c.staleness > 1000000))
    problems.push_back(fmt::format("--staleness {} must be in 0..1000000", *c.staleness));
}

}  // namespace

Entry<Protocol> ssp_entry() {
  return entry_of<Ssp>("ssp",
                         "stale synchronous parallel: async, a learner at most s clocks ahead of the slowest",
                         check_ssp, {"staleness"});
}

}  // namespace asgd::protocol
