#pragma once
// When a waiting rank notices its event: the MPI core's waits
// (ps/mpi_util.cpp) poll without pause for `spin_s`, then sleep 1, 2, 4, ...
// microseconds up to `max_pause_s` between polls, each sleep `overshoot_s`
// longer than asked. An event `waited` seconds into a wait is noticed at the
// first poll at or after it, or `bell_s` after it where the event rings the
// rank's doorbell (ps/doorbell.hpp: ranks of one node), whichever is first.
namespace asgd::perf {

struct WakeSchedule {
  double spin_s = 0, max_pause_s = 0, overshoot_s = 0;
  bool on = false;     // false: a wait ends at its event
  double bell_s = -1;  // a doorbell's wake-up; negative: no doorbells
};

// The seconds between the event and the poll that notices it (>= 0).
double wake_delay(const WakeSchedule& w, double waited);

// The waits of the calibration's second cores figure (brief_wait_load): a
// rank whose every wait ends after this long.
inline constexpr double kBriefWait_s = 1e-3;

// What a waiting rank takes from the ranks beside it: `per_wait` of a core
// for as long as it waits, and `per_poll_s` of CPU for each poll.
struct PollCost {
  double per_wait = 0, per_poll_s = 0;
};

// The cost from the calibration's two loads: `long_load`, a rank that has
// waited long (one poll per max_pause_s + overshoot_s), and `brief_load` (a
// negative value: not measured), a rank whose waits end after kBriefWait_s,
// whose polls come densely. The share between the two terms is the one whose
// mean_wait_load over kBriefWait_s is brief_load: per_wait = long_load (polls
// cost nothing) where brief_load is at most long_load; per_wait = 0 (polls cost
// everything) where it is at least what that gives, and where it was not
// measured.
PollCost poll_cost(const WakeSchedule& w, double long_load, double brief_load);

// The share of a core a rank `waited` seconds into its wait takes from the
// ranks beside it: per_wait plus per_poll_s over the time between its polls
// then (the overshoot alone while it spins), at most 1. The polls come
// densely at first and then settle at one per max_pause_s + overshoot_s, so a
// rank that waits often, briefly, takes more than one that waits long.
double wait_load(const WakeSchedule& w, const PollCost& c, double waited);

// The mean of wait_load over a wait's first `span` seconds.
double mean_wait_load(const WakeSchedule& w, const PollCost& c, double span);

// When (seconds into the wait, > waited) wait_load next changes; infinity
// once the pauses have reached max_pause_s.
double next_load_change(const WakeSchedule& w, double waited);

}  // namespace asgd::perf
