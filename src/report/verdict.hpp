#pragma once
// Verdicts beside a paper's claims, each decided by the seeds of a
// configuration, never by one value (results/reference/README.md gives the
// rule of each kind of claim):
// - a claimed direction (8 clients below 1, n_sync 100 lowest, a larger
//   saw-tooth): the interval of the difference excludes 0 on the claimed
//   side -> reproduced; on the other side -> not reproduced; includes 0 ->
//   undecided (not told from seed noise);
// - a claimed value or range (3.2x, 22x-28x): our interval overlaps it ->
//   reproduced; lies wholly above or below it -> not reproduced;
// - one seed: no interval, so undecided.
#include <string>

#include "report/stats.hpp"

namespace asgd::report::detail {

enum class Verdict { reproduced, not_reproduced, undecided, not_tested };

struct Judged {
  Verdict v = Verdict::not_tested;
  std::string why;
};

const char* verdict_word(Verdict v);
// The table cell: "**reproduced**: why".
std::string verdict_cell(const Judged& j);

// How a difference is printed in a verdict's reason: scale multiplies the
// values (100 for fractions shown in points), unit follows each ("pp").
struct Shown {
  double scale = 1;
  const char* unit = "";
  int digits = 2;
};

// Claimed: d > 0. what names the difference ("L=8 minus L=1").
Judged positive(const Interval& d, const std::string& what, const Shown& s);
// Claimed: the value lies in [lo, hi] (lo == hi: one value; hi may be inf).
Judged overlaps(const Interval& ours, double lo, double hi, const std::string& what, const Shown& s);
// Claimed: no difference, d within [-margin, margin]: reproduced when the
// interval lies within it, not reproduced when wholly outside it.
Judged within(const Interval& d, double margin, const std::string& what, const Shown& s);
// Both parts of a claim: not reproduced if either is, reproduced if both
// are, else undecided; the reasons joined.
Judged both(const Judged& a, const Judged& b);
// Every part of a claim, as both() over all (none: not tested).
Judged all_of(const std::vector<Judged>& parts);

}  // namespace asgd::report::detail
