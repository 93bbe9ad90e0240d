// Steps in a series (detect_steps, report.hpp): binary segmentation with a
// rank test, a minimum effect and a Bonferroni factor, each step re-tested
// between its neighbours.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/error.hpp"
#include "report/history_detail.hpp"

namespace asgd::report {

namespace detail {

double effect_of(double before, double after, bool relative) {
  if (!std::isfinite(before) || !std::isfinite(after)) return kNaN;
  if (!relative) return after - before;
  return before != 0 ? (after - before) / std::fabs(before) : kNaN;
}

}  // namespace detail

using namespace detail;

namespace {

std::vector<double> pooled(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi) {
  std::vector<double> out;
  for (std::size_t i = lo; i < hi; ++i) out.insert(out.end(), points[i].begin(), points[i].end());
  return out;
}

struct Split {
  bool found = false;
  std::size_t at = 0;
  double p = 1, effect = 0, before = kNaN, after = kNaN;
  std::size_t candidates = 0;  // splits with enough samples on both sides (the Bonferroni factor)
};

std::size_t count(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi) {
  std::size_t n = 0;
  for (std::size_t i = lo; i < hi; ++i) n += points[i].size();
  return n;
}

// Tests a split of [lo, hi) at k; fills effect and p (unadjusted) when the
// effect is large enough, else leaves p = 1.
Split test_split(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t k, std::size_t hi,
                 const StepOptions& opt) {
  Split s;
  s.at = k;
  const std::vector<double> left = pooled(points, lo, k), right = pooled(points, k, hi);
  s.before = median(left);
  s.after = median(right);
  s.effect = effect_of(s.before, s.after, opt.relative);
  if (!(std::fabs(s.effect) >= opt.min_effect)) return s;
  const RankTest t = mann_whitney(right, left);
  if (std::isfinite(t.p)) {
    s.p = t.p;
    s.found = true;
  }
  return s;
}

bool enough(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t k, std::size_t hi,
            const StepOptions& opt) {
  const auto min = static_cast<std::size_t>(std::max(1, opt.min_samples));
  return count(points, lo, k) >= min && count(points, k, hi) >= min;
}

Split best_split(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi,
                 const StepOptions& opt) {
  Split best;
  std::size_t candidates = 0;
  for (std::size_t k = lo + 1; k < hi; ++k) {
    if (!enough(points, lo, k, hi, opt)) continue;
    ++candidates;
    const Split s = test_split(points, lo, k, hi, opt);
    if (!s.found) continue;
    if (!best.found || s.p < best.p || (s.p == best.p && std::fabs(s.effect) > std::fabs(best.effect))) best = s;
  }
  best.candidates = candidates;
  return best;
}

bool significant(const Split& s, const StepOptions& opt) {
  return s.found && s.p * static_cast<double>(s.candidates) <= opt.alpha;
}

void segment(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi, const StepOptions& opt,
             std::vector<std::size_t>& out) {
  if (hi - lo < 2) return;
  const Split s = best_split(points, lo, hi, opt);
  if (!significant(s, opt)) return;
  segment(points, lo, s.at, opt, out);
  out.push_back(s.at);
  segment(points, s.at, hi, opt, out);
}

// A step between its neighbours: the split at k of [lo, hi), with the
// Bonferroni factor of a search over [lo, hi).
Split retest(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t k, std::size_t hi,
             const StepOptions& opt) {
  Split s = test_split(points, lo, k, hi, opt);
  for (std::size_t j = lo + 1; j < hi; ++j) s.candidates += enough(points, lo, j, hi, opt);
  return s;
}

}  // namespace

std::vector<Step> detect_steps(const std::vector<std::vector<double>>& points, const StepOptions& opt) {
  if (!(opt.min_effect >= 0) || !(opt.alpha > 0 && opt.alpha < 1))
    throw Error(fmt::format("history: bad step options (min effect {} must be >= 0, alpha {} in (0, 1))",
                            opt.min_effect, opt.alpha));
  std::vector<std::vector<double>> clean(points.size());  // non-finite samples dropped
  for (std::size_t i = 0; i < points.size(); ++i)
    for (double v : points[i])
      if (std::isfinite(v)) clean[i].push_back(v);
  std::vector<std::size_t> at;
  segment(clean, 0, clean.size(), opt, at);

  // Prune: each step again between its neighbours; drop the weakest failing one, repeat.
  for (;;) {
    std::size_t worst = at.size();
    double worst_p = -1;
    for (std::size_t j = 0; j < at.size(); ++j) {
      const std::size_t lo = j == 0 ? 0 : at[j - 1], hi = j + 1 == at.size() ? clean.size() : at[j + 1];
      const Split s = retest(clean, lo, at[j], hi, opt);
      if (significant(s, opt)) continue;
      const double adj = s.found ? s.p * static_cast<double>(s.candidates) : 2;  // no effect: weakest
      if (adj > worst_p) {
        worst_p = adj;
        worst = j;
      }
    }
    if (worst == at.size()) break;
    at.erase(at.begin() + static_cast<std::ptrdiff_t>(worst));
  }

  std::vector<Step> steps;
  for (std::size_t j = 0; j < at.size(); ++j) {
    const std::size_t lo = j == 0 ? 0 : at[j - 1], hi = j + 1 == at.size() ? clean.size() : at[j + 1];
    const Split s = retest(clean, lo, at[j], hi, opt);
    Step st;
    st.at = at[j];
    st.before = s.before;
    st.after = s.after;
    st.change = s.effect;
    st.p = std::min(1.0, s.p * static_cast<double>(s.candidates));
    steps.push_back(st);
  }
  return steps;
}

}  // namespace asgd::report
