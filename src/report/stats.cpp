#include "report/stats.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <deque>
#include <numeric>
#include <utility>

#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

namespace asgd::report {

double t_quantile_975(int df) {
  if (df < 1) return kNaN;
  return boost::math::quantile(boost::math::students_t(static_cast<double>(df)), 0.975);
}

Interval mean_ci95(const std::vector<double>& x) {
  Interval r;
  r.n = static_cast<int>(x.size());
  if (x.empty()) return r;
  const double n = static_cast<double>(x.size());
  r.mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
  if (x.size() < 2) return r;
  double ss = 0;
  for (double v : x) ss += (v - r.mean) * (v - r.mean);
  const double half = t_quantile_975(r.n - 1) * std::sqrt(ss / (n - 1)) / std::sqrt(n);
  r.lo = r.mean - half;
  r.hi = r.mean + half;
  return r;
}

namespace {
double variance(const std::vector<double>& x, double mean) {
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return ss / static_cast<double>(x.size() - 1);
}
}  // namespace

Interval diff_ci95(const std::vector<double>& a, const std::vector<double>& b) {
  const Interval ia = mean_ci95(a), ib = mean_ci95(b);
  Interval r;
  r.n = static_cast<int>(std::min(a.size(), b.size()));
  r.mean = ia.mean - ib.mean;
  if (a.size() < 2 || b.size() < 2) return r;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double qa = variance(a, ia.mean) / na, qb = variance(b, ib.mean) / nb;
  const double se2 = qa + qb;
  if (!(se2 > 0)) {
    r.lo = r.hi = r.mean;
    return r;
  }
  const double df = se2 * se2 / (qa * qa / (na - 1) + qb * qb / (nb - 1));
  if (!std::isfinite(df) || !(df > 0)) return r;
  const double half = boost::math::quantile(boost::math::students_t(df), 0.975) * std::sqrt(se2);
  r.lo = r.mean - half;
  r.hi = r.mean + half;
  return r;
}

double median(std::vector<double> x) {
  if (x.empty()) return kNaN;
  std::sort(x.begin(), x.end());
  const std::size_t m = x.size() / 2;
  return x.size() % 2 ? x[m] : 0.5 * (x[m - 1] + x[m]);
}

namespace {

// The pooled sample's doubled midranks (tied ranks stay integral), which of
// them come from a, and the sum of t^3 - t over the tie groups.
struct Ranks {
  std::vector<long> rank2;
  std::vector<bool> from_a;
  double tie_term = 0;
};

Ranks midranks(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = a.size() + b.size();
  std::vector<std::pair<double, bool>> pool;  // value, from a
  pool.reserve(n);
  for (double v : a) pool.emplace_back(v, true);
  for (double v : b) pool.emplace_back(v, false);
  std::sort(pool.begin(), pool.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  Ranks r;
  r.rank2.resize(n);
  r.from_a.resize(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && pool[j].first == pool[i].first) ++j;
    const long first = static_cast<long>(i) + 1, last = static_cast<long>(j);
    for (std::size_t k = i; k < j; ++k) r.rank2[k] = first + last;  // 2 * (first + last) / 2
    const double t = static_cast<double>(j - i);
    r.tie_term += t * t * t - t;
    i = j;
  }
  for (std::size_t k = 0; k < n; ++k) r.from_a[k] = pool[k].second;
  return r;
}

// The exact two-sided p of a's doubled rank sum w2 (and the smallest p the
// samples' sizes and ties allow) from the permutation distribution:
// count[k][s], the subsets of k pooled items whose doubled ranks add up to s.
void exact_p(const Ranks& rk, std::size_t na, long w2, RankTest& r) {
  const std::size_t n = rk.rank2.size();
  const long max_sum = static_cast<long>(n) * static_cast<long>(n + 1);
  std::vector<std::vector<double>> count(na + 1, std::vector<double>(static_cast<std::size_t>(max_sum) + 1, 0.0));
  count[0][0] = 1;
  for (std::size_t item = 0; item < n; ++item) {
    const long r2 = rk.rank2[item];
    for (std::size_t k = std::min(na, item + 1); k >= 1; --k) {
      auto& to = count[k];
      const auto& from = count[k - 1];
      for (long s = max_sum; s >= r2; --s) to[static_cast<std::size_t>(s)] += from[static_cast<std::size_t>(s - r2)];
    }
  }
  const auto& dist = count[na];
  const double total = std::accumulate(dist.begin(), dist.end(), 0.0);
  double le = 0, ge = 0;
  for (long s = 0; s <= max_sum; ++s) {
    const double c = dist[static_cast<std::size_t>(s)];
    if (s <= w2) le += c;
    if (s >= w2) ge += c;
  }
  r.exact = true;
  r.p = std::min(1.0, 2 * std::min(le, ge) / total);
  long lo = 0, hi = max_sum;
  while (dist[static_cast<std::size_t>(lo)] == 0) ++lo;
  while (dist[static_cast<std::size_t>(hi)] == 0) --hi;
  r.min_p = std::min(1.0, 2 * std::min(dist[static_cast<std::size_t>(lo)], dist[static_cast<std::size_t>(hi)]) / total);
}

// The normal approximation with the tie correction and a continuity
// correction of 1/2, two-sided (Boost.Math's normal tail).
void normal_p(const Ranks& rk, double na, double nb, RankTest& r) {
  const double dn = na + nb;
  const double mu = na * nb / 2;
  const double var = na * nb / 12 * ((dn + 1) - rk.tie_term / (dn * (dn - 1)));
  if (var <= 0) {
    r.p = r.min_p = 1;
    return;
  }
  auto p_of = [&](double u) {
    const double z = std::max(0.0, std::fabs(u - mu) - 0.5) / std::sqrt(var);
    return std::min(1.0, 2 * normal_upper_tail(z));
  };
  r.p = p_of(r.u);
  r.min_p = p_of(0);
}

}  // namespace

double normal_upper_tail(double z) {
  return boost::math::cdf(boost::math::complement(boost::math::normal_distribution<double>(), z));
}

RankTest mann_whitney(const std::vector<double>& a, const std::vector<double>& b) {
  RankTest r;
  const std::size_t na = a.size(), nb = b.size();
  if (na == 0 || nb == 0) return r;
  const Ranks rk = midranks(a, b);
  long w2 = 0;  // doubled rank sum of a
  for (std::size_t k = 0; k < rk.rank2.size(); ++k)
    if (rk.from_a[k]) w2 += rk.rank2[k];
  const double dna = static_cast<double>(na);
  r.u = static_cast<double>(w2) / 2 - dna * (dna + 1) / 2;
  if (na + nb <= 50) exact_p(rk, na, w2, r);
  else normal_p(rk, dna, static_cast<double>(nb), r);
  return r;
}

double smoothed_train_error(const std::vector<io::UpdateRecord>& updates, double window, double per_gradient) {
  return smoothed_train_error_at(updates, std::numeric_limits<double>::infinity(), window, per_gradient);
}

double smoothed_train_error_at(const std::vector<io::UpdateRecord>& updates, double t, double window,
                               double per_gradient) {
  double weight = 0, sum = 0;
  auto it = updates.rbegin();
  if (std::isfinite(t))
    while (it != updates.rend() && !(it->wall_s <= t)) ++it;
  for (; it != updates.rend() && weight < window; ++it) {
    if (it->gradients <= 0 || !std::isfinite(it->train_error)) continue;
    const double w = std::min(static_cast<double>(it->gradients) * per_gradient, window - weight);
    weight += w;
    sum += w * it->train_error;
  }
  return weight > 0 ? sum / weight : kNaN;
}

double time_to_train_target(const std::vector<io::UpdateRecord>& updates, double target, double window,
                            double per_gradient) {
  if (!(std::isfinite(target) && target >= 0 && std::isfinite(window) && window > 0)) return kNaN;
  std::deque<std::pair<double, double>> rows;  // (minibatches, error), oldest first
  double weight = 0, sum = 0;
  for (const auto& u : updates) {
    if (u.gradients <= 0 || !std::isfinite(u.train_error)) continue;
    const double w = static_cast<double>(u.gradients) * per_gradient;
    rows.emplace_back(w, u.train_error);
    weight += w;
    sum += w * u.train_error;
    while (weight - rows.front().first >= window) {  // the oldest row lies wholly outside the window
      weight -= rows.front().first;
      sum -= rows.front().first * rows.front().second;
      rows.pop_front();
    }
    if (weight < window) continue;
    // the oldest row counts only with its minibatches inside the window
    const auto& [w0, e0] = rows.front();
    const double inside = window - (weight - w0);
    if ((sum - w0 * e0 + inside * e0) / window <= target) return u.wall_s;
  }
  return kNaN;
}

Periodic periodic_component(const std::vector<float>& errors, std::size_t p, double from) {
  Periodic out;
  if (p < 2 || errors.size() < p) return out;
  const std::size_t blocks = errors.size() / p;
  const auto first = static_cast<std::size_t>(std::clamp(from, 0.0, 1.0) * static_cast<double>(blocks));
  const double pi = std::acos(-1.0);
  double re = 0, im = 0, sq = 0;
  std::size_t m = 0;
  for (std::size_t b = std::min(first, blocks - 1); b < blocks; ++b) {
    double mean = 0;
    for (std::size_t i = 0; i < p; ++i) mean += errors[b * p + i];
    mean /= static_cast<double>(p);
    for (std::size_t i = 0; i < p; ++i) {
      const double r = errors[b * p + i] - mean, phase = 2 * pi * static_cast<double>(i) / static_cast<double>(p);
      re += r * std::cos(phase);
      im -= r * std::sin(phase);
      sq += r * r;
      ++m;
    }
  }
  const double dm = static_cast<double>(m);
  out.minibatches = m;
  out.amplitude = 2 * std::hypot(re, im) / dm;
  out.noise = 2 * std::sqrt(sq / dm) / std::sqrt(dm);
  return out;
}

double mean_staleness(const std::vector<std::int64_t>& histogram, const std::vector<io::UpdateRecord>& updates) {
  double count = 0, sum = 0;
  for (std::size_t tau = 0; tau < histogram.size(); ++tau) {
    if (histogram[tau] <= 0) continue;
    count += static_cast<double>(histogram[tau]);
    sum += static_cast<double>(tau) * static_cast<double>(histogram[tau]);
  }
  if (count > 0) return sum / count;
  for (const auto& u : updates) {
    if (u.gradients <= 0 || !std::isfinite(u.mean_tau)) continue;
    count += u.gradients;
    sum += u.gradients * u.mean_tau;
  }
  return count > 0 ? sum / count : kNaN;
}

double histogram_quantile(const std::vector<std::int64_t>& histogram, double q) {
  double total = 0;
  for (auto c : histogram) total += static_cast<double>(std::max<std::int64_t>(c, 0));
  if (total <= 0) return kNaN;
  double cum = 0;
  for (std::size_t tau = 0; tau < histogram.size(); ++tau) {
    cum += static_cast<double>(std::max<std::int64_t>(histogram[tau], 0));
    if (cum >= q * total) return static_cast<double>(tau);
  }
  return static_cast<double>(histogram.size() - 1);
}

}  // namespace asgd::report
