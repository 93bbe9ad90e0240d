#include "perf/wake.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace asgd::perf {
namespace {

// The seconds between the event and the next poll (the wait is past its spin).
double poll_delay(const WakeSchedule& w, double waited) {
  double t = w.spin_s, pause = 1e-6;
  // the doubling pauses, then equal steps of max_pause_s (closed form: a wait of
  // seconds would otherwise walk thousands of polls)
  while (pause < w.max_pause_s) {
    t += pause + w.overshoot_s;
    if (t >= waited) return t - waited;
    pause = std::min(2 * pause, w.max_pause_s);
  }
  const double step = w.max_pause_s + w.overshoot_s;
  if (step <= 0) return 0;
  const double k = std::ceil((waited - t) / step);
  return t + k * step - waited;
}

}  // namespace

double wake_delay(const WakeSchedule& w, double waited) {
  if (!w.on || waited <= w.spin_s) return 0;
  const double polled = poll_delay(w, waited);
  return w.bell_s >= 0 ? std::min(polled, w.bell_s) : polled;
}

namespace {

// The pause in effect `waited` seconds into a wait (0 while it spins) and
// when that stretch ends (infinity once the pauses are at max_pause_s).
std::pair<double, double> stretch(const WakeSchedule& w, double waited) {
  if (waited < w.spin_s) return {0.0, w.spin_s};
  double t = w.spin_s, pause = 1e-6;
  while (pause < w.max_pause_s) {
    t += pause + w.overshoot_s;
    if (waited < t) return {pause, t};
    pause = std::min(2 * pause, w.max_pause_s);
  }
  return {w.max_pause_s, std::numeric_limits<double>::infinity()};
}

}  // namespace

double wait_load(const WakeSchedule& w, const PollCost& c, double waited) {
  const double gap = stretch(w, waited).first + w.overshoot_s;
  return gap > 0 ? std::min(1.0, c.per_wait + c.per_poll_s / gap) : 1.0;
}

double mean_wait_load(const WakeSchedule& w, const PollCost& c, double span) {
  if (span <= 0) return wait_load(w, c, 0);
  double sum = 0;
  for (double x = 0; x < span;) {
    const double end = std::min(stretch(w, x).second, span);
    sum += (end - x) * wait_load(w, c, x);
    x = end;
  }
  return sum / span;
}

PollCost poll_cost(const WakeSchedule& w, double long_load, double brief_load) {
  const double gap = w.max_pause_s + w.overshoot_s;
  if (!w.on || gap <= 0) return {long_load, 0};
  const auto with = [&](double per_poll_s) { return PollCost{std::max(0.0, long_load - per_poll_s / gap), per_poll_s}; };
  const double dense = long_load * gap;  // per_wait 0
  if (brief_load < 0 || brief_load >= mean_wait_load(w, with(dense), kBriefWait_s)) return with(dense);
  if (brief_load <= long_load) return {long_load, 0};
  // the mean over a brief wait grows with the polls' share (each poll's gap
  // is at most the long wait's): bisection
  double lo = 0, hi = dense;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (mean_wait_load(w, with(mid), kBriefWait_s) < brief_load ? lo : hi) = mid;
  }
  return with(0.5 * (lo + hi));
}

double next_load_change(const WakeSchedule& w, double waited) { return stretch(w, waited).second; }

}  // namespace asgd::perf
