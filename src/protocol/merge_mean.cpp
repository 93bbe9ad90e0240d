// The mean merge rule: w += d / L, the mean over the L clients' changes. The
// update's row records the clients' rate over L.
#include <KokkosBlas1_axpby.hpp>

#include "protocol/protocols.hpp"
#include "protocol/views.hpp"

namespace asgd::protocol {
namespace {

class Mean final : public MergeRule {
 public:
  const char* name() const override { return "mean"; }
  double merge(const MergeStep& step, Vec w, Vec /*state*/, CVec d) const override {
    const double scale = 1.0 / static_cast<double>(step.learners);
    KokkosBlas::axpy(static_cast<real_t>(scale), view(d), view(w));
    return step.lr * scale;
  }
};

}  // namespace

Entry<MergeRule> mean_entry() {
  return {"mean", "w += d / L: the mean of the clients' changes", no_options,
          [](const Options&) -> std::unique_ptr<MergeRule> { return std::make_unique<Mean>(); }, {}};
}

}  // namespace asgd::protocol
