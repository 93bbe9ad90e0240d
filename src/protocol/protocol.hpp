#pragma once
// A protocol: how learners and server shards exchange. A type per protocol,
// registered by name (registry.hpp) and built once from the configuration, so
// nothing compares protocol names while training. The MPI core and the virtual
// learners ask the same object, so both run the same protocol.
//
// Hooks (defaults fit an asynchronous parameter server):
//   gradients_per_update  pushes the server combines into one update (c)
//   barrier               replies to an update's learners wait for that update
//   push                  what a learner pushes: its gradient, or the change of its
//                         weights over local_steps() minibatches (weights delta)
//   local_steps           minibatches a learner computes per exchange
//   uses_servers          whether the run has server ranks at all (an allreduce
//                         protocol has none)
//   may_reply             whether a shard may answer a learner whose clock (its
//                         pushes applied) is `learner_clock` while the slowest
//                         learner's is `slowest` (SSP holds the fast one back)
//   delay_compensation    DC-ASGD's lambda: the server adds lambda g*g*(w - w_sent)
//                         to a gradient g of a learner it sent w_sent (0: none)
//   elastic_alpha         EASGD's alpha: learners keep their own weights and push
//                         alpha (x - centre); 0 for every other protocol
//   compensate            the maths of a gradient's delay compensation (DC-ASGD)
//   exchange              the maths of a learner's elastic exchange (EASGD)
// The maths of a protocol, a merge rule or a rate policy lives in the type's
// own file; ps::ShardCore and the learners call it and keep the bookkeeping.
#include <cstdint>
#include <memory>
#include <string>

#include "common/types.hpp"
#include "protocol/options.hpp"

namespace asgd::protocol {

// A run's parameters, or a shard's slice of them: `size` floats at `data`, in
// the memory of the run's Kokkos execution space (a shard's views, ps::ShardCore)
// or of the host (a learner's staged copy). The types' own files see it as a
// Kokkos view (views.hpp); the interface stays plain, so the suite and
// configuration layers, which check names through the registry, compile
// without Kokkos.
struct Vec {
  real_t* data = nullptr;
  index_t size = 0;
};
// The same, read only.
struct CVec {
  const real_t* data = nullptr;
  index_t size = 0;
};

// What a learner pushes: its gradient; the change of its weights over
// local_steps() minibatches (the server adds it); or EASGD's elastic
// difference alpha (x - centre) (the server adds it, the learner subtracts it
// and keeps its own weights).
enum class Push { gradient, weights_delta, elastic };

class Protocol {
 public:
  virtual ~Protocol() = default;
  virtual const char* name() const = 0;
  virtual int gradients_per_update() const = 0;
  virtual bool barrier() const { return false; }
  virtual Push push() const { return Push::gradient; }
  virtual int local_steps() const { return 1; }
  virtual bool uses_servers() const { return true; }
  virtual bool may_reply(std::int64_t /*learner_clock*/, std::int64_t /*slowest*/) const { return true; }
  virtual double delay_compensation() const { return 0; }
  virtual double elastic_alpha() const { return 0; }
  // A shard applies `out` in place of the gradient g a learner pushed, computed
  // against the weights w_sent the shard last sent that learner and its
  // weights w now; returns false (out untouched) where g is applied as it came.
  // Device vectors; may run asynchronously (the caller fences).
  virtual bool compensate(Vec /*out*/, CVec /*g*/, CVec /*w*/, CVec /*w_sent*/) const { return false; }
  // A learner's exchange with the centre it holds (elastic protocols): writes
  // the push into d and moves its weights x. Host vectors of equal size.
  virtual void exchange(Vec /*x*/, CVec /*centre*/, Vec /*d*/) const {}
  // Its parameters for progress lines: "", " n=2 (c=4)", " n_sync=10".
  virtual std::string describe() const { return ""; }
};

// Parameter-sized buffers a run of protocol p keeps besides the engine's own
// (weights, gradient, momentum), for the memory estimate before any work: each
// virtual learner's weights, its local steps' momentum where it pushes a change
// of weights or an elastic difference, EASGD's copy of the centre; each
// shard's weights, momentum and inbox, an accumulator where it combines
// c > 1 gradients or compensates delays, and DC-ASGD's weights sent to each
// learner. ps::ShardCore and the virtual learners decide their buffers from
// the same hooks (through ps::UpdateRule).
struct Footprint {
  int per_learner = 1;
  int per_shard = 3;
  int per_shard_per_learner = 0;
};
inline Footprint footprint(const Protocol& p) {
  Footprint f;
  const bool gradient = p.push() == Push::gradient;
  f.per_learner = 1 + (gradient ? 0 : 1) + (p.elastic_alpha() > 0 ? 1 : 0);
  f.per_shard = 3 + (gradient && (p.gradients_per_update() > 1 || p.delay_compensation() > 0) ? 1 : 0);
  f.per_shard_per_learner = p.delay_compensation() > 0 ? 1 : 0;
  return f;
}

// The learning-rate factor of each gradient from its staleness tau, and the
// scale of an update of c gradients: g = final_scale(taus) * sum factor(tau_l) * g_l.
class RatePolicy {
 public:
  virtual ~RatePolicy() = default;
  virtual const char* name() const = 0;
  // rate(tau) / alpha0 for one gradient.
  virtual double factor(std::int64_t /*tau*/) const { return 1.0; }
  // 1/c by default (the mean of the c gradients).
  virtual double final_scale(const std::int64_t* taus, std::size_t n) const;
};

// How a shard merges a pushed change of weights d (protocols whose push is a
// weights delta, nsync; EASGD's elastic push is merged by the sum). One file
// per rule says what it computes (merge_*.cpp).
struct MergeStep {
  double lr = 0;        // the run's rate now (its schedule applied)
  int local_steps = 1;  // minibatches behind each change (n_sync)
  int learners = 1;
};

class MergeRule {
 public:
  virtual ~MergeRule() = default;
  virtual const char* name() const = 0;
  // Merges d into the shard's weights w; `state` is the shard's own
  // per-parameter buffer (its momentum, kept by checkpoints), zero at the
  // start. Device vectors of equal size; may run asynchronously (the caller
  // fences). Returns the rate the update's row records.
  virtual double merge(const MergeStep& step, Vec w, Vec state, CVec d) const = 0;
};

}  // namespace asgd::protocol
