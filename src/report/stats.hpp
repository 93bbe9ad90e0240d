#pragma once
// Statistics behind the reports: mean and 95% interval over seeds, the
// Mann-Whitney rank test of `asgd compare`, the smoothed training error and
// the mean staleness of a run. Plain functions over plain vectors.
#include <cstdint>
#include <limits>
#include <vector>

#include "io/results.hpp"

namespace asgd::report {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Two-sided 95% quantile of Student's t with df degrees of freedom
// (t_{0.975, df}), from Boost.Math; NaN for df < 1.
double t_quantile_975(int df);

// Mean and 95% interval mean -/+ t_{0.975, n-1} * s / sqrt(n), s the sample
// standard deviation. n == 1: lo = hi = NaN; n == 0: everything NaN.
struct Interval {
  double mean = kNaN, lo = kNaN, hi = kNaN;
  int n = 0;
};
Interval mean_ci95(const std::vector<double>& x);
// mean(a) - mean(b) with Welch's 95% interval (Student's t at the
// Welch-Satterthwaite degrees of freedom): the samples need not have equal
// spreads. n is the smaller sample's size; lo and hi are NaN when either has
// fewer than 2 values, and both equal the difference when neither varies.
Interval diff_ci95(const std::vector<double>& a, const std::vector<double>& b);

double median(std::vector<double> x);  // NaN when empty

// Two-sided Mann-Whitney U test of a against b (midranks for ties).
// Exact null distribution (all C(n_a + n_b, n_a) assignments of the pooled
// ranks, ties included) when n_a + n_b <= 50, else the normal approximation
// with tie and continuity corrections (Boost.Math has no Mann-Whitney
// distribution; its normal tail is used). min_p is the smallest p-value the
// sample sizes allow (exact case): when it exceeds alpha the test cannot
// reject and callers fall back to a threshold rule.
struct RankTest {
  double u = kNaN;      // U of a: pairs (a_i, b_j) with a_i > b_j, ties counting 1/2
  double p = kNaN;      // two-sided p-value
  double min_p = kNaN;  // smallest attainable p-value
  bool exact = false;
};
RankTest mann_whitney(const std::vector<double>& a, const std::vector<double>& b);

// P(Z > z) for a standard normal Z, from Boost.Math.
double normal_upper_tail(double z);

// Training error smoothed over the last `window` minibatches (400 in the
// reports): an update row stands for `gradients` minibatches whose mean error
// is its train_error, so rows are taken from the last one backwards, each
// weighted by its gradients, until the weights add up to `window`; the row
// that crosses the window's start counts only with the minibatches inside
// it. The result is the weighted mean of train_error over those rows. Rows
// with gradients <= 0 or a non-finite train_error are skipped. Fewer than
// `window` minibatches in all: the weighted mean over every row. NaN when no
// row counts. per_gradient: minibatches in one gradient (nsync's n_sync: its
// push is the change over n_sync minibatches and its train_error their mean).
inline constexpr double kSmoothingWindow = 400;  // minibatches, in every report figure
double smoothed_train_error(const std::vector<io::UpdateRecord>& updates, double window = kSmoothingWindow,
                            double per_gradient = 1);
// The same over the rows trained by time t (wall_s <= t): the smoothed error
// a learning curve shows at t. NaN when no row is that early.
double smoothed_train_error_at(const std::vector<io::UpdateRecord>& updates, double t, double window = 400,
                               double per_gradient = 1);
// Time to target at the resolution of the training: the wall_s of the first
// update row at which the training error smoothed over the last `window`
// minibatches (as smoothed_train_error_at counts them) is at or below
// `target`, read only once a whole window has been trained (so the first few
// minibatches' noise cannot cross it). NaN when no row does, when the run has
// fewer than `window` minibatches, or when target or window is not a positive
// finite number.
double time_to_train_target(const std::vector<io::UpdateRecord>& updates, double target, double window = 400,
                            double per_gradient = 1);

// The periodic component at period p of a sequence of minibatch errors made
// of consecutive blocks of p (nsync's pushes: /minibatches/error): each
// block less its own mean (so the slow trend of training goes), then the
// amplitude of the first harmonic at period p, 2 |sum_i e_i exp(-2 pi j i / p)| / M
// over the M minibatches of the blocks from `from` (a fraction of the
// blocks: 0.5 is the second half of training). noise is what white noise of
// the same spread gives, 2 s / sqrt(M) (s: the residuals' standard
// deviation). NaN both when p < 2 or no block counts.
struct Periodic {
  double amplitude = std::numeric_limits<double>::quiet_NaN();
  double noise = std::numeric_limits<double>::quiet_NaN();
  std::size_t minibatches = 0;
};
Periodic periodic_component(const std::vector<float>& errors, std::size_t p, double from = 0.5);

// Mean staleness of the gradients of a run: from /staleness/histogram
// (sum tau * count / sum count) when it holds any count, else from
// /updates/mean_tau weighted by gradients; NaN when neither has data.
double mean_staleness(const std::vector<std::int64_t>& histogram,
                      const std::vector<io::UpdateRecord>& updates);

// Staleness value below which a fraction q of the histogram's counts lie
// (the smallest tau with cumulative count >= q * total); NaN when empty.
double histogram_quantile(const std::vector<std::int64_t>& histogram, double q);

}  // namespace asgd::report
