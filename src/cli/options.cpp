#include "cli/options.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <type_traits>

#include "config/fields.hpp"

namespace asgd::cli {

const CLI::Validator kUnsigned64(
    [](std::string& v) -> std::string {
      std::uint64_t x = 0;
      std::string_view t = v;
      if (!t.empty() && t.front() == '+') t.remove_prefix(1);
      const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
      if (t.empty() || ec != std::errc() || p != t.data() + t.size())
        return fmt::format("'{}' is not a whole number from 0 to 18446744073709551615", shorten(v));
      return "";
    },
    "UINT64");

const CLI::Validator kNonEmpty([](std::string& v) -> std::string { return v.empty() ? "must not be empty" : ""; },
                               "TEXT");

// A number as std::stod reads it, whole (an empty value is no 0); its domain
// (finite, positive, ...) is the configuration's to check, by name.
const CLI::Validator kNumber(
    [](std::string& v) -> std::string {
      try {
        std::size_t used = 0;
        (void)std::stod(v, &used);
        if (used == v.size()) return "";
      } catch (const std::out_of_range&) {
        return fmt::format("'{}' is out of the range of a double", shorten(v));
      } catch (const std::exception&) {
      }
      return fmt::format("'{}' is not a number", shorten(v));
    },
    "NUMBER");

const CLI::Validator kExecutable(
    [](std::string& v) -> std::string {
      if (v.empty()) return "must not be empty";
      auto runnable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
      };
      if (v.find('/') != std::string::npos)
        return runnable(v) ? "" : fmt::format("'{}' is not an executable file", shorten(v));
      const char* path = std::getenv("PATH");
      std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
      while (true) {
        const auto colon = dirs.find(':');
        const std::string dir(dirs.substr(0, colon));
        if (runnable((dir.empty() ? "." : dir) + "/" + v)) return "";
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
      }
      return fmt::format("'{}' is not found on PATH", shorten(v));
    },
    "PROGRAM");

CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        double x = 0;
        try {
          std::size_t used = 0;
          x = std::stod(v, &used);
          if (used != v.size()) throw std::invalid_argument(v);
        } catch (const std::exception&) {
          return fmt::format("'{}' is not a number", shorten(v));
        }
        if (!(std::isfinite(x) && x >= lo && x <= hi))
          return fmt::format("{} is not a finite number in [{}, {}]", shorten(v), lo, hi);
        return "";
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}

CLI::Validator whole_in(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        long long x = 0;
        std::string_view t = v;
        if (!t.empty() && t.front() == '+') t.remove_prefix(1);
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
        if (t.empty() || ec != std::errc() || p != t.data() + t.size() || x < lo || x > hi)
          return fmt::format("'{}' is not a whole number in [{}, {}]", shorten(v), lo, hi);
        return "";
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

namespace {

using config::Hwc;
using config::Nested;

// The option of one field of s; its type says how it is parsed and checked.
template <class S>
void add_field(CLI::App& app, S& s, const config::Field<S>& f, TrainConfig& c);

// A parse check whose text --help leaves out: the option's type name says
// its domain instead.
CLI::Validator silent(CLI::Validator v) {
  v.description("");
  return v;
}

// What --help shows after a number's flag: "INT >= 1 (64)", "NUMBER in [0, 1)",
// from the field table's range; the default in brackets where there is one.
template <class V>
std::string number_type(const config::Range& r, const std::string& def) {
  std::string t = std::is_integral_v<V> ? "INT" : "NUMBER";
  if (r.given()) t += " " + r.describe(std::is_integral_v<V>);
  if (!def.empty()) t += " (" + def + ")";
  return t;
}

template <class S, class T>
void add_member(CLI::App& app, S& s, const config::Option& o, const config::Range& range, T S::*m) {
  // CLI11 alone would saturate 99999999999999999999 to 2^63-1 and read 0x10 as 16.
  if constexpr (config::is_optional_v<T>) {
    // given is given, whatever the value (no sentinel): the configuration checks it
    using V = typename T::value_type;
    CLI::Option* opt = app.add_option_function<V>(
        o.flag, [&s, m](const V& v) { s.*m = v; }, o.help);
    if constexpr (std::is_same_v<V, std::string>) {
      opt->check(kNonEmpty);
    } else {
      if constexpr (std::is_integral_v<V>)
        opt->check(silent(whole_in(std::numeric_limits<V>::min(), std::numeric_limits<V>::max())));
      else
        opt->check(silent(kNumber));
      opt->type_name(number_type<V>(range, ""));
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    app.add_flag(o.flag, s.*m, o.help);
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    app.add_option(o.flag, s.*m, o.help)
        ->delimiter(',')
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->check(silent(kNumber))
        ->type_name(number_type<double>(range, ""));
  } else {
    CLI::Option* opt = app.add_option(o.flag, s.*m, o.help);
    if constexpr (std::is_same_v<T, std::string>) {
      if (!(s.*m).empty()) opt->capture_default_str();
      opt->check(kNonEmpty);
    } else if constexpr (std::is_arithmetic_v<T>) {
      if constexpr (std::is_same_v<T, std::uint64_t>)
        opt->check(silent(kUnsigned64));
      else if constexpr (std::is_integral_v<T>)
        opt->check(silent(whole_in(std::numeric_limits<T>::min(), std::numeric_limits<T>::max())));
      else
        opt->check(silent(kNumber));
      opt->type_name(number_type<T>(range, fmt::format("{}", s.*m)));
    } else {
      opt->capture_default_str();
    }
  }
}

template <class S>
void add_field(CLI::App& app, S& s, const config::Field<S>& f, TrainConfig& c) {
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Nested>) {
          for (const auto& d : config::dataset_fields()) add_field(app, c.data, d, c);
        } else if constexpr (std::is_same_v<M, Hwc>) {
          const CLI::Validator int64 =
              silent(whole_in(std::numeric_limits<index_t>::min(), std::numeric_limits<index_t>::max()));
          app.add_option_function<index_t>(
                 f.option.flag, [&c](index_t v) { c.data.h = c.data.w = v; }, f.option.help)
              ->check(int64)
              ->type_name(number_type<index_t>(f.range, ""));
          app.add_option(f.option2.flag, c.data.c, f.option2.help)
              ->check(int64)
              ->type_name(number_type<index_t>(config::depends("in 1..4096"), fmt::format("{}", c.data.c)));
        } else if (f.option.flag) {
          add_member(app, s, f.option, f.range, m);
        }
      },
      f.member);
}

}  // namespace

void add_train_options(CLI::App& app, TrainConfig& c) {
  // A repeated option takes its last value (scripts append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (const auto& f : config::fields()) add_field(app, c, f, c);
  // Read before parsing (see load_config_arg); declared so --help lists it.
  app.add_option("--config", "Start from this resolved configuration (JSON, as written by "
                             "asgd sweep); options given too override it");
}

void load_config_arg(int argc, char** argv, TrainConfig& cfg) {
  int i = 1;
  while (i < argc && std::string(argv[i]) != "train") {
    if (argv[i][0] != '-') return;  // another subcommand
    ++i;
  }
  for (++i; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return;
    if (a == "--config" && i + 1 < argc) cfg = load_config_file(argv[++i]);
    else if (a.starts_with("--config=")) cfg = load_config_file(a.substr(9));
  }
}

}  // namespace asgd::cli
