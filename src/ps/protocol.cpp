#include "ps/protocol.hpp"

#include "protocol/registry.hpp"

namespace asgd::ps {

UpdateRule::UpdateRule(const TrainConfig& cfg) : UpdateRule(protocol_options(cfg)) {}

UpdateRule::UpdateRule(const protocol::Options& o)
    : protocol_(protocol::make_protocol(o)), policy_(protocol::make_rate_policy(o)) {
  // asked once: the hooks are constant for a run
  c_ = protocol_->gradients_per_update();
  barrier_ = protocol_->barrier();
  push_ = protocol_->push();
  delta_ = push_ != protocol::Push::gradient;
  local_steps_ = protocol_->local_steps();
  servers_ = protocol_->uses_servers();
  alpha_ = protocol_->elastic_alpha();
  lambda_ = protocol_->delay_compensation();
  protocol::Options merge = o;
  if (push_ == protocol::Push::elastic) merge.merge.reset();  // elastic differences are summed
  merge_ = protocol::make_merge_rule(merge);
}

UpdateRule::~UpdateRule() = default;

}  // namespace asgd::ps
