// The sum merge rule (nsync's default, and how EASGD's elastic push is
// merged): w += d, every client's whole change, as a server that adds what a
// client pushes. The update's row records the clients' rate.
#include <KokkosBlas1_axpby.hpp>

#include "protocol/protocols.hpp"
#include "protocol/views.hpp"

namespace asgd::protocol {
namespace {

class Sum final : public MergeRule {
 public:
  const char* name() const override { return kDefaultMerge; }
  double merge(const MergeStep& step, Vec w, Vec /*state*/, CVec d) const override {
    KokkosBlas::axpy(real_t(1), view(d), view(w));
    return step.lr;
  }
};

}  // namespace

Entry<MergeRule> sum_entry() {
  return {kDefaultMerge, "w += d: every client's whole change (the default)", no_options,
          [](const Options&) -> std::unique_ptr<MergeRule> { return std::make_unique<Sum>(); }, {}};
}

}  // namespace asgd::protocol
