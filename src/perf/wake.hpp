#pragma once
// When a waiting rank notices its event: the MPI core's waits
// (ps/mpi_util.cpp) poll without pause for `spin_s`, then sleep 1, 2, 4, ...
// microseconds up to `max_pause_s` between polls, each sleep `overshoot_s`
// longer than asked. An event `waited` seconds into a wait is noticed at the
// first poll at or after it.
namespace asgd::perf {

struct WakeSchedule {
  double spin_s = 0, max_pause_s = 0, overshoot_s = 0;
  bool on = false;  // false: a wait ends at its event
};

// The seconds between the event and the poll that notices it (>= 0).
double wake_delay(const WakeSchedule& w, double waited);

}  // namespace asgd::perf
