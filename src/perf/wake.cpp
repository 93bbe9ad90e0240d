#include "perf/wake.hpp"

#include <algorithm>
#include <cmath>

namespace asgd::perf {

double wake_delay(const WakeSchedule& w, double waited) {
  if (!w.on || waited <= w.spin_s) return 0;
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

}  // namespace asgd::perf
