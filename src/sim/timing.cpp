#include "sim/timing.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/nesting.hpp"

namespace asgd::sim {

namespace {
// words per generator: mt19937_64's 312 state words and its position
constexpr std::size_t kWords = std::mt19937_64::state_size + 1;
}  // namespace

TimingFigures figures_from_json(const std::string& json, const std::string& where) {
  const auto j = parse_json_bounded<nlohmann::json>(json);
  if (!j.is_object() || !j.contains("compute_s") || !j.contains("comm_s") || !j["compute_s"].is_number() ||
      !j["comm_s"].is_number())
    throw Error(where + ": the checkpoint holds no timing model to continue with");
  return {j["compute_s"].get<double>(), j["comm_s"].get<double>(), j.value("calibrated", false)};
}

Timing::Timing(const TrainConfig& cfg, double compute_s, double comm_s, double cv)
    : cfg_(cfg),
      kind_(cfg.timing == "fixed"       ? Kind::fixed
            : cfg.timing == "lognormal" ? Kind::lognormal
                                        : Kind::normal),  // normal, and calibrate (a normal model)
      compute_s_(compute_s), comm_s_(comm_s), cv_(cv < 0 ? cfg.compute_cv : cv) {
  for (int l = 0; l < cfg.learners; ++l)
    rng_.emplace_back(mix(cfg.seed ^ 0x7153, static_cast<std::uint64_t>(l)));
}

double Timing::compute(int l) {
  double t = compute_s_;
  const double cv = cv_;
  if (kind_ == Kind::normal) {
    t = std::max(0.05 * compute_s_, compute_s_ * (1 + cv * normal(l)));
  } else if (kind_ == Kind::lognormal) {
    const double s2 = std::log(1 + cv * cv);
    t = compute_s_ * std::exp(std::sqrt(s2) * normal(l) - s2 / 2);
  }
  return cfg_.straggler && l == *cfg_.straggler ? t * cfg_.straggler_factor : t;
}

nlohmann::json Timing::describe(bool calibrated) const {
  return {{"kind", cfg_.timing == "calibrate" ? "normal" : cfg_.timing},
          {"compute_s", compute_s_},
          {"compute_cv", cv_},
          {"comm_s", comm_s_},
          {"straggler", cfg_.straggler ? nlohmann::json(*cfg_.straggler) : nlohmann::json(nullptr)},
          {"straggler_factor", cfg_.straggler_factor},
          {"calibrated", calibrated},
          {"note", "virtual clock: gradients are computed for real on each learner's stale "
                   "weights; times are drawn from this model"}};
}

double Timing::normal(int l) {
  auto& g = rng_[static_cast<std::size_t>(l)];
  const double u1 = 1.0 - static_cast<double>(g() >> 11) * 0x1.0p-53;
  const double u2 = static_cast<double>(g() >> 11) * 0x1.0p-53;
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

// The standard library writes an engine's state as text and reads it back
// (libstdc++: the 312 state words, then the position): kept as words.
std::vector<std::uint64_t> Timing::save() const {
  std::vector<std::uint64_t> words;
  for (const auto& g : rng_) {
    std::stringstream ss;
    ss << g;
    std::uint64_t w = 0;
    std::size_t n = 0;
    while (ss >> w) {
      words.push_back(w);
      ++n;
    }
    for (; n < kWords; ++n) words.push_back(0);  // a fixed stride per learner
  }
  return words;
}

void Timing::restore(const std::vector<std::uint64_t>& words) {
  if (words.size() != kWords * rng_.size())
    throw Error("virtual state: the timing model's generator states do not fit " +
                std::to_string(rng_.size()) + " learners");
  for (std::size_t l = 0; l < rng_.size(); ++l) {
    std::stringstream ss;
    for (std::size_t i = 0; i < kWords; ++i) ss << words[l * kWords + i] << ' ';
    ss >> rng_[l];
    if (!ss) throw Error("virtual state: a timing generator state does not read back");
  }
}

}  // namespace asgd::sim
