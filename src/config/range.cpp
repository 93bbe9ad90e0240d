// Range (fields.hpp): the domain of a number, its text and its check.
#include <fmt/format.h>

#include <cmath>
#include <type_traits>

#include "config/fields.hpp"

namespace asgd::config {

namespace {

std::string number(double v, bool integer) {
  if (integer) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

// "max_steps" -> "max steps", as the other problems name a field
std::string spoken(const char* key) {
  std::string s(key);
  for (char& ch : s)
    if (ch == '_') ch = ' ';
  return s;
}

}  // namespace

Range at_least(double lo) { return {.has_lo = true, .lo = lo}; }
Range above(double lo) { return {.has_lo = true, .lo_open = true, .lo = lo}; }
Range closed(double lo, double hi) { return {.has_lo = true, .has_hi = true, .lo = lo, .hi = hi}; }
Range half_open(double lo, double hi) {
  return {.has_lo = true, .has_hi = true, .hi_open = true, .lo = lo, .hi = hi};
}
Range open(double lo, double hi) {
  return {.has_lo = true, .has_hi = true, .lo_open = true, .hi_open = true, .lo = lo, .hi = hi};
}
Range depends(const char* text) { return {.text = text}; }

bool Range::holds(double v) const {
  if (!std::isfinite(v)) return false;
  if (has_lo && (lo_open ? !(v > lo) : !(v >= lo))) return false;
  if (has_hi && (hi_open ? !(v < hi) : !(v <= hi))) return false;
  return true;
}

std::string Range::describe(bool integer) const {
  if (text != nullptr) return text;
  if (has_lo && has_hi) {
    if (integer && !lo_open && !hi_open) return fmt::format("in {}..{}", number(lo, true), number(hi, true));
    return fmt::format("in {}{}, {}{}", lo_open ? '(' : '[', number(lo, integer), number(hi, integer),
                       hi_open ? ')' : ']');
  }
  if (has_lo) return fmt::format("{} {}", lo_open ? ">" : ">=", number(lo, integer));
  if (has_hi) return fmt::format("{} {}", hi_open ? "<" : "<=", number(hi, integer));
  return "";
}

template <class S>
void check_range(const S& s, const Field<S>& f, std::vector<std::string>& problems) {
  if (!f.range.checked()) return;
  const auto judge = [&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if (!f.range.holds(static_cast<double>(v)))
      problems.push_back(fmt::format("{} {} must be {}", spoken(f.key), v, f.range.describe(std::is_integral_v<V>)));
  };
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_member_object_pointer_v<M>) {
          using T = std::decay_t<decltype(s.*m)>;
          if constexpr (is_optional_v<T>) {
            if constexpr (std::is_arithmetic_v<typename T::value_type>)
              if ((s.*m).has_value()) judge(*(s.*m));
          } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            judge(s.*m);
          }
        }
      },
      f.member);
}

template void check_range(const TrainConfig&, const Field<TrainConfig>&, std::vector<std::string>&);
template void check_range(const data::DatasetSpec&, const Field<data::DatasetSpec>&, std::vector<std::string>&);

}  // namespace asgd::config
