#include "report/verdict.hpp"

#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace asgd::report::detail {

const char* verdict_word(Verdict v) {
  switch (v) {
    case Verdict::reproduced: return "reproduced";
    case Verdict::not_reproduced: return "not reproduced";
    case Verdict::undecided: return "undecided";
    case Verdict::not_tested: break;
  }
  return "not tested";
}

std::string verdict_cell(const Judged& j) {
  return fmt::format("**{}**{}{}", verdict_word(j.v), j.why.empty() ? "" : ": ", j.why);
}

namespace {

std::string value(double x, const Shown& s) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{:.{}f}{}", x * s.scale, s.digits, s.unit);
}

std::string interval(const Interval& iv, const Shown& s) {
  return fmt::format("{} [{}, {}]", value(iv.mean, s), value(iv.lo, s), value(iv.hi, s));
}

}  // namespace

Judged positive(const Interval& d, const std::string& what, const Shown& s) {
  if (std::isnan(d.mean)) return {Verdict::undecided, what + ": no value on one side"};
  if (std::isnan(d.lo) || std::isnan(d.hi))
    return {Verdict::undecided, fmt::format("{} {} from one seed: no interval", what, value(d.mean, s))};
  const std::string shown = what + " " + interval(d, s);
  if (d.lo > 0) return {Verdict::reproduced, shown + ", excludes 0"};
  if (d.hi < 0) return {Verdict::not_reproduced, shown + ", excludes 0 on the other side"};
  return {Verdict::undecided, shown + ", includes 0 (not told from seed noise)"};
}

Judged overlaps(const Interval& ours, double lo, double hi, const std::string& what, const Shown& s) {
  const std::string paper = lo == hi ? value(lo, s) : std::isinf(hi) ? "at least " + value(lo, s)
                                                                     : value(lo, s) + "–" + value(hi, s);
  if (std::isnan(ours.mean)) return {Verdict::undecided, what + ": no value"};
  if (std::isnan(ours.lo) || std::isnan(ours.hi))
    return {Verdict::undecided, fmt::format("{} {} from one seed: no interval", what, value(ours.mean, s))};
  const std::string shown = fmt::format("{} {} against {}", what, interval(ours, s), paper);
  if (ours.hi < lo) return {Verdict::not_reproduced, shown + ": wholly below"};
  if (ours.lo > hi) return {Verdict::not_reproduced, shown + ": wholly above"};
  return {Verdict::reproduced, shown + ": overlaps"};
}

Judged within(const Interval& d, double margin, const std::string& what, const Shown& s) {
  if (std::isnan(d.lo) || std::isnan(d.hi)) return positive(d, what, s);  // undecided, with its reason
  const std::string shown = fmt::format("{} {} against a margin of +-{}", what, interval(d, s), value(margin, s));
  if (d.lo >= -margin && d.hi <= margin) return {Verdict::reproduced, shown + ": within it"};
  if (d.lo > margin || d.hi < -margin) return {Verdict::not_reproduced, shown + ": wholly outside it"};
  return {Verdict::undecided, shown + ": not told from seed noise"};
}

Judged both(const Judged& a, const Judged& b) {
  if (a.v == Verdict::not_tested) return b;
  if (b.v == Verdict::not_tested) return a;
  Judged out;
  out.why = a.why + "; " + b.why;
  if (a.v == Verdict::not_reproduced || b.v == Verdict::not_reproduced) out.v = Verdict::not_reproduced;
  else if (a.v == Verdict::reproduced && b.v == Verdict::reproduced) out.v = Verdict::reproduced;
  else out.v = Verdict::undecided;
  return out;
}

Judged all_of(const std::vector<Judged>& parts) {
  Judged out;
  for (const auto& p : parts) out = both(out, p);
  return out;
}

}  // namespace asgd::report::detail
