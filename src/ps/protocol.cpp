#include "ps/protocol.hpp"

#include "protocol/registry.hpp"

namespace asgd::ps {

UpdateRule::UpdateRule(const TrainConfig& cfg)
    : protocol_(protocol::make_protocol(cfg)), policy_(protocol::make_rate_policy(cfg)) {
  // asked once: the hooks are constant for a run
  c_ = protocol_->gradients_per_update();
  barrier_ = protocol_->barrier();
  delta_ = protocol_->push() == protocol::Push::weights_delta;
  local_steps_ = protocol_->local_steps();
}

UpdateRule::~UpdateRule() = default;

}  // namespace asgd::ps
