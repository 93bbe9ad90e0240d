#pragma once
// The one table of TrainConfig's fields. Each row names a field once: its JSON
// and suite key, where it lives, its `asgd train` option and help, how suite
// files may use it, whether it is hashed, and the checks of its value. The
// JSON reader and writer (json.cpp), validate() (validate.cpp), the suite keys
// (sweep/suite_keys.cpp) and the command-line options (cli/train_options.cpp)
// are all made from it; defaults are the struct's own (config.hpp).
// Checks that involve several fields stay code (validate.cpp).
#include <cstdint>
#include <optional>
#include <type_traits>
#include <string>
#include <variant>
#include <vector>

#include "config/config.hpp"

namespace asgd::config {

// The dataset spec, nested under "dataset" (TrainConfig::data).
struct Nested {};
// The synthetic image shape: JSON "shape": [h, w, c]; options
// --synthetic-size (h = w) and --synthetic-channels (c).
struct Hwc {};

// Where a field's value lives in S (TrainConfig or data::DatasetSpec).
// std::optional members: "not given" is absence, never a value a user can type.
template <class S>
using Member = std::variant<std::string S::*, bool S::*, int S::*, std::int64_t S::*, std::uint64_t S::*,
                            double S::*, std::vector<double> S::*, std::optional<int> S::*,
                            std::optional<double> S::*, std::optional<std::string> S::*, Nested, Hwc>;

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
inline constexpr bool is_optional_v = is_optional<T>::value;

// One `asgd train` option. flag: CLI11's names ("--batch,--mu"; a leading '!'
// makes a flag that sets false); nullptr: not an option. The default shown in
// --help is the struct's, unless it is empty.
struct Option {
  const char* flag = nullptr;
  const char* help = "";
};

// How a suite file may use a key.
struct SuiteUse {
  const char* reserved = nullptr;  // why it cannot be set in a suite file; nullptr: it can
  // Whether validate() of a default config with only this value set is a
  // fair check of the value alone (false where validity depends on other keys).
  bool check_alone = true;
  bool has_min = false;            // integers below min are refused before any run is built
  std::int64_t min = 0;
  // The value's short form in run ids: nullptr "key=value", "" the value
  // alone, else a prefix ("L" -> "L4").
  const char* token = nullptr;
};

template <class S>
using Check = void (*)(const S&, std::vector<std::string>&);

// The values a number may take. `asgd train --help` shows it (`--batch INT >= 1
// (64)`) and validate() checks it: a value outside (or not finite) is one
// problem, "<key, _ as space> <value> must be <text>". `text` alone (no bound
// given) describes a domain that depends on other fields: shown, and checked
// by the row's own check.
struct Range {
  bool has_lo = false, has_hi = false, lo_open = false, hi_open = false;
  double lo = 0, hi = 0;
  const char* text = nullptr;
  bool given() const { return has_lo || has_hi || text != nullptr; }
  bool checked() const { return has_lo || has_hi; }
  bool holds(double v) const;
  std::string describe(bool integer) const;  // ">= 1", "> 0", "in 1..512", "in [0, 1)"
};
Range at_least(double lo);
Range above(double lo);
Range closed(double lo, double hi);     // [lo, hi]
Range half_open(double lo, double hi);  // [lo, hi)
Range open(double lo, double hi);       // (lo, hi)
Range depends(const char* text);        // shown only: the row's check holds it

template <class S>
struct Field {
  const char* key;  // JSON and suite key
  Member<S> member;
  Option option;
  SuiteUse suite;
  Check<S> check = nullptr;  // problems of this value, one message each, appended
  bool hashed = true;        // part of config_hash (false: paths, ids, threads, bookkeeping)
  bool only_if_changed = false;  // written to JSON only when not the default
  Option option2;            // Hwc: the second option (--synthetic-channels)
  Range range;               // numbers: the domain (see Range)
};

// The problem of f's value in s when it lies outside f.range (none when it
// does, when the range is not checked, or when an optional value is absent).
template <class S>
void check_range(const S& s, const Field<S>& f, std::vector<std::string>& problems);

// In option order (what `asgd train --help` lists); suite keys and JSON
// suggestions follow it too.
const std::vector<Field<TrainConfig>>& fields();
const std::vector<Field<data::DatasetSpec>>& dataset_fields();

// Keys of a table, in order.
template <class S>
std::vector<std::string> keys(const std::vector<Field<S>>& table) {
  std::vector<std::string> out;
  for (const auto& f : table) out.emplace_back(f.key);
  return out;
}

// Suite files may write `n` for softsync_n.
inline constexpr const char* kAliasN = "n";

}  // namespace asgd::config
