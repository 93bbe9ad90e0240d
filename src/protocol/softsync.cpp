// n-softsync (Zhang et al. 2015): the server updates once it holds
// c = floor(L / n) gradients, without a barrier; n = 1 waits for about L
// gradients, n = L updates on every gradient (plain async SGD).
#include <fmt/format.h>

#include "protocol/protocols.hpp"

namespace asgd::protocol {
namespace {

class Softsync final : public Protocol {
 public:
  explicit Softsync(const Options& cfg) : n_(cfg.softsync_n), c_(cfg.learners / cfg.softsync_n) {}
  const char* name() const override { return "softsync"; }
  int gradients_per_update() const override { return c_; }
  std::string describe() const override { return fmt::format(" n={} (c={})", n_, c_); }

 private:
  int n_, c_;
};

void check_softsync(const Options& c, std::vector<std::string>& problems) {
  if (c.learners < 1) return;  // the learners' own check reports it; n has no range then
  if (c.softsync_n < 1 || c.softsync_n > c.learners)
    problems.push_back(fmt::format("softsync n {} must be in 1..learners ({})", c.softsync_n, c.learners));
}

}  // namespace

Entry<Protocol> softsync_entry() {
  return entry_of<Softsync>("softsync",
                         "n-softsync: an update of floor(L/n) gradients, no barrier",
                         check_softsync);
}

}  // namespace asgd::protocol
