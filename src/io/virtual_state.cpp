#include "io/virtual_state.hpp"

#include <cmath>
#include <string>

namespace asgd::io {

namespace {

void check_state(const VirtualState& v, std::int64_t n_params) {
  const std::size_t L = v.timestamp.size();
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error("virtual state: " + what);
  };
  need(L > 0, "no learners");
  need(v.steps.size() == L && v.cursors.size() == L && v.timing.size() == L && v.push_at.size() == L,
       "per-learner arrays of different lengths");
  need(v.event_time.size() == v.event_seq.size() && v.event_time.size() == v.event_learner.size() &&
           v.event_time.size() <= L,
       "event queue arrays of different lengths, or more events than learners");
  for (auto l : v.event_learner) need(l >= 0 && static_cast<std::size_t>(l) < L, "an event of no learner");
  for (double t : v.event_time) need(std::isfinite(t) && t >= 0, "an event at no time");
  need(std::isfinite(v.now) && v.now >= 0, "virtual time is not a time");
  const auto P = static_cast<std::size_t>(n_params);
  need(v.weights.size() == L * P, "learners' weights are not learners x n_params floats");
  need(v.inc.empty() || v.inc.size() == L * P, "local momentum is not learners x n_params floats");
  need(v.centre.empty() || v.centre.size() == L * P, "centres are not learners x n_params floats");
  for (auto l : v.held) need(l >= 0 && static_cast<std::size_t>(l) < L, "a held learner that is none");
}

}  // namespace

void write_virtual_state(const h5::Loc& root, const VirtualState& v, std::int64_t n_params) {
  check_state(v, n_params);
  h5::Group g = h5::create_group(root, "virtual");
  const h5::Loc loc{g.get(), "/virtual"};
  h5::write_attr(loc, "now", v.now);
  h5::write_attr(loc, "seq", static_cast<std::int64_t>(v.seq));
  h5::write_vector(loc, "event_time", v.event_time);
  h5::write_vector(loc, "event_seq", v.event_seq);
  h5::write_vector(loc, "event_learner", v.event_learner);
  h5::write_vector(loc, "timestamp", v.timestamp);
  h5::write_vector(loc, "steps", v.steps);
  h5::write_column(loc, "cursor_epoch", v.cursors, &LearnerCursor::epoch);
  h5::write_column(loc, "cursor_batch", v.cursors, &LearnerCursor::batch);
  h5::write_column(loc, "compute_s", v.timing, &LearnerTiming::compute_s);
  h5::write_column(loc, "wait_s", v.timing, &LearnerTiming::wait_s);
  h5::write_column(loc, "push_s", v.timing, &LearnerTiming::push_s);
  h5::write_column(loc, "pull_s", v.timing, &LearnerTiming::pull_s);
  h5::write_vector(loc, "push_at", v.push_at);
  h5::write_vector(loc, "timing_rng", v.timing_rng);
  h5::write_vector(loc, "weights", v.weights);
  h5::write_vector(loc, "inc", v.inc);
  h5::write_vector(loc, "centre", v.centre);
  h5::write_vector(loc, "held", v.held);
}

VirtualState read_virtual_state(const h5::Loc& root, std::int64_t n_params) {
  h5::Group g = h5::open_group(root, "virtual");
  const h5::Loc loc{g.get(), "/virtual"};
  VirtualState v;
  v.now = h5::read_attr_f64(loc, "now");
  v.seq = static_cast<std::uint64_t>(h5::read_attr_i64(loc, "seq"));
  v.event_time = h5::read_vector<double>(loc, "event_time");
  v.event_seq = h5::read_vector<std::uint64_t>(loc, "event_seq");
  v.event_learner = h5::read_vector<std::int32_t>(loc, "event_learner");
  v.timestamp = h5::read_vector<std::int64_t>(loc, "timestamp");
  v.steps = h5::read_vector<std::int64_t>(loc, "steps");
  h5::read_column(loc, "cursor_epoch", v.cursors, &LearnerCursor::epoch, true);
  h5::read_column(loc, "cursor_batch", v.cursors, &LearnerCursor::batch, false);
  h5::read_column(loc, "compute_s", v.timing, &LearnerTiming::compute_s, true);
  h5::read_column(loc, "wait_s", v.timing, &LearnerTiming::wait_s, false);
  h5::read_column(loc, "push_s", v.timing, &LearnerTiming::push_s, false);
  h5::read_column(loc, "pull_s", v.timing, &LearnerTiming::pull_s, false);
  v.push_at = h5::read_vector<double>(loc, "push_at");
  v.timing_rng = h5::read_vector<std::uint64_t>(loc, "timing_rng");
  v.weights = h5::read_vector<float>(loc, "weights");
  v.inc = h5::read_vector<float>(loc, "inc");
  v.centre = h5::read_vector<float>(loc, "centre");
  v.held = h5::read_vector<std::int32_t>(loc, "held");
  check_state(v, n_params);
  return v;
}

}  // namespace asgd::io
