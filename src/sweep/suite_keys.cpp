// The suite reader's building blocks: problems with their lines, YAML
// scalars, and the config keys a suite may set, made from the config's field
// table (config/fields.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <type_traits>

#include "common/error.hpp"
#include "config/fields.hpp"
#include "sweep/suite_detail.hpp"

namespace asgd::sweep::detail {

// ---------------------------------------------------------------- problems

void fail(const std::string& path, Problems& pr) {
  std::stable_sort(pr.list.begin(), pr.list.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string msg = fmt::format("{}: {} problem{}: ", path, pr.list.size(),
                                pr.list.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < pr.list.size(); ++i)
    msg += fmt::format("{}{}:{}: {}", i ? "; " : "", path, pr.list[i].first, pr.list[i].second);
  throw Error(msg);
}

int line_of(const YAML::Node& n, int fallback) {
  if (!n.IsDefined() || n.IsNull()) return fallback;
  const YAML::Mark m = n.Mark();
  return m.line >= 0 ? m.line + 1 : fallback;
}

std::string describe(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.IsNull() || !n.IsDefined()) return "nothing";
  if (quoted(n)) return fmt::format("the text \"{}\"", shorten(n.Scalar()));
  return fmt::format("'{}'", shorten(n.Scalar()));
}

// A quoted scalar is text, never a number or a boolean ("4", 'true'), as in
// a site file and a JSON configuration.
bool quoted(const YAML::Node& n) { return n.IsScalar() && n.Tag() == "!"; }

// ------------------------------------------------------------ scalar values

namespace {

// A number in s, whole: an optional '+', then what from_chars reads of T.
template <class T>
bool parse_number(const std::string& s, T& out) {
  std::string_view v = s;
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  if (v.empty()) return false;
  if constexpr (std::is_unsigned_v<T>)
    if (v.front() == '-') return false;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size();
}

}  // namespace

bool convert(const YAML::Node& n, int& out, std::string& expected) {
  expected = "an integer";
  std::int64_t v = 0;
  if (!n.IsScalar() || quoted(n) || !parse_number(n.Scalar(), v) || v < INT_MIN || v > INT_MAX) return false;
  out = static_cast<int>(v);
  return true;
}
bool convert(const YAML::Node& n, std::int64_t& out, std::string& expected) {
  expected = "an integer";
  return n.IsScalar() && !quoted(n) && parse_number(n.Scalar(), out);
}
bool convert(const YAML::Node& n, std::uint64_t& out, std::string& expected) {
  expected = "a non-negative integer";
  return n.IsScalar() && !quoted(n) && parse_number(n.Scalar(), out);
}
bool convert(const YAML::Node& n, double& out, std::string& expected) {
  expected = "a number";
  return n.IsScalar() && !quoted(n) && parse_number(n.Scalar(), out);
}
bool convert(const YAML::Node& n, bool& out, std::string& expected) {
  expected = "true or false";
  if (!n.IsScalar() || quoted(n)) return false;
  std::string s = n.Scalar();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "yes" || s == "on") out = true;
  else if (s == "false" || s == "no" || s == "off") out = false;
  else return false;
  return true;
}
bool convert(const YAML::Node& n, std::string& out, std::string& expected) {
  expected = "a text value";
  if (!n.IsScalar()) return false;
  out = n.Scalar();
  return true;
}
bool convert(const YAML::Node& n, std::vector<double>& out, std::string& expected) {
  expected = "a list of numbers";
  if (!n.IsSequence()) return false;
  out.clear();
  std::string ignored;
  for (const auto& e : n) {
    double d = 0;
    if (!convert(e, d, ignored)) return false;
    out.push_back(d);
  }
  return true;
}

std::string text_of(const std::string& v) { return v; }
std::string text_of(bool v) { return v ? "true" : "false"; }
std::string text_of(double v) { return fmt::format("{}", v); }
std::string text_of(int v) { return fmt::format("{}", v); }
std::string text_of(std::int64_t v) { return fmt::format("{}", v); }
std::string text_of(std::uint64_t v) { return fmt::format("{}", v); }
std::string text_of(const std::vector<double>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + text_of(v[i]);
  return s;
}

// ---------------------------------------------------------------- config keys

namespace {

using config::Hwc;
using config::Nested;

template <class T>
KeyDef field(const config::Field<TrainConfig>& f, T TrainConfig::*mp) {
  const config::SuiteUse use = f.suite;
  const std::string name = f.key;
  KeyDef k{name, nullptr, use.check_alone, use.token};
  k.parse = [name, mp, use](const YAML::Node& n, int line, Problems& pr) -> std::optional<Value> {
    // an optional field given in a suite is given (whatever its value)
    using V = typename std::conditional_t<config::is_optional_v<T>, T, std::optional<T>>::value_type;
    V v{};
    std::string expected;
    if (!convert(n, v, expected)) {
      pr.add(line, fmt::format("{}: expected {}, got {}", name, expected, describe(n)));
      return std::nullopt;
    }
    if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
      if (use.has_min && static_cast<std::int64_t>(v) < use.min) {
        pr.add(line, fmt::format("{} {} must be >= {}", name, v, use.min));
        return std::nullopt;
      }
    }
    return Value{name, text_of(v), [mp, v](TrainConfig& c) { c.*mp = v; }, line};
  };
  return k;
}

using DatasetSet = std::function<void(data::DatasetSpec&)>;

// One entry of a dataset mapping: its setter and text, or nullopt with
// `expected` set.
std::optional<std::pair<DatasetSet, std::string>> dataset_entry(const config::Field<data::DatasetSpec>& f,
                                                                const YAML::Node& v, std::string& expected) {
  return std::visit(
      [&](const auto& m) -> std::optional<std::pair<DatasetSet, std::string>> {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Hwc>) {
          std::array<std::int64_t, 3> hwc{};
          bool good = v.IsSequence() && v.size() == 3;
          for (std::size_t i = 0; good && i < 3; ++i) good = convert(v[i], hwc[i], expected);
          if (!good) {
            expected = "[height, width, channels]";
            return std::nullopt;
          }
          return std::pair{DatasetSet([hwc](data::DatasetSpec& d) {
                             d.h = hwc[0];
                             d.w = hwc[1];
                             d.c = hwc[2];
                           }),
                           fmt::format("{}x{}x{}", hwc[0], hwc[1], hwc[2])};
        } else if constexpr (std::is_same_v<M, Nested>) {
          return std::nullopt;  // no nesting below the dataset
        } else {
          using X = std::remove_cvref_t<decltype(data::DatasetSpec{}.*m)>;
          if constexpr (config::is_optional_v<X>) {
            return std::nullopt;  // the dataset has no optional field
          } else {
            X x{};
            if (!convert(v, x, expected)) return std::nullopt;
            return std::pair{DatasetSet([m, x](data::DatasetSpec& d) { d.*m = x; }), text_of(x)};
          }
        }
      },
      f.member);
}

// dataset: a kind name, or a mapping laid over the current dataset spec.
std::optional<Value> parse_dataset(const YAML::Node& n, int line, Problems& pr) {
  if (n.IsScalar()) {
    const std::string kind = n.Scalar();
    return Value{"dataset", kind, [kind](TrainConfig& c) { c.data.kind = kind; }, line};
  }
  if (!n.IsMap()) {
    pr.add(line, fmt::format("dataset: expected a name or a mapping, got {}", describe(n)));
    return std::nullopt;
  }
  const auto& table = config::dataset_fields();
  std::vector<DatasetSet> sets;
  std::string text;
  bool ok = true;
  std::set<std::string> seen;
  for (const auto& kv : n) {
    const int kl = line_of(kv.first, line);
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    const int vl = line_of(kv.second, kl);
    if (!seen.insert(key).second) {
      pr.add(kl, fmt::format("dataset: key '{}' given twice", shorten(key)));
      ok = false;
      continue;
    }
    const auto f = std::find_if(table.begin(), table.end(), [&](const auto& x) { return key == x.key; });
    if (f == table.end()) {
      pr.add(kl, fmt::format("dataset: unknown key '{}'{}", shorten(key), did_you_mean(key, config::keys(table))));
      ok = false;
      continue;
    }
    std::string expected;
    auto entry = dataset_entry(*f, kv.second, expected);
    if (!entry) {
      pr.add(vl, fmt::format("dataset {}: expected {}, got {}", key, expected, describe(kv.second)));
      ok = false;
      continue;
    }
    sets.push_back(std::move(entry->first));
    text += fmt::format("{}{}={}", text.empty() ? "" : ",", key, entry->second);
  }
  if (!ok) return std::nullopt;
  return Value{"dataset", text,
               [sets](TrainConfig& c) {
                 for (const auto& s : sets) s(c.data);
               },
               line};
}

// The config keys a suite may set: the field table less its reserved keys.
const std::vector<KeyDef>& key_defs() {
  static const std::vector<KeyDef> defs = [] {
    std::vector<KeyDef> v;
    for (const auto& f : config::fields()) {
      if (f.suite.reserved) continue;
      std::visit(
          [&](const auto& m) {
            using M = std::decay_t<decltype(m)>;
            if constexpr (std::is_same_v<M, Nested>)
              v.push_back(KeyDef{f.key, parse_dataset, f.suite.check_alone, f.suite.token});
            else if constexpr (!std::is_same_v<M, Hwc>)
              v.push_back(field(f, m));
          },
          f.member);
    }
    return v;
  }();
  return defs;
}

// Why a TrainConfig key cannot be written in a suite file ("" if it can).
std::string reserved_reason(const std::string& key) {
  for (const auto& f : config::fields())
    if (f.suite.reserved && key == f.key) return f.suite.reserved;
  return "";
}

}  // namespace

const KeyDef* find_key(const std::string& name) {
  static const std::unordered_map<std::string, const KeyDef*> index = [] {
    std::unordered_map<std::string, const KeyDef*> m;
    for (const auto& d : key_defs()) m[d.name] = &d;
    return m;
  }();
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

const std::vector<std::string>& config_key_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& d : key_defs()) v.push_back(d.name);
    v.push_back(config::kAliasN);
    return v;
  }();
  return names;
}

std::string canonical(const std::string& key) { return key == config::kAliasN ? "softsync_n" : key; }

std::optional<Value> parse_value(const KeyDef& def, const YAML::Node& n, int line, Problems& pr) {
  auto v = def.parse(n, line, pr);
  if (!v || !def.check_alone) return v;
  TrainConfig d;
  v->apply(d);
  const auto problems = validate(d);
  if (problems.empty()) return v;
  for (const auto& p : problems) pr.add(line, p);
  return std::nullopt;
}

const KeyDef* resolve_key(const YAML::Node& key_node, int line, const char* where, Problems& pr) {
  if (!key_node.IsScalar()) {
    pr.add(line, fmt::format("{}: keys must be plain names, got {}", where, describe(key_node)));
    return nullptr;
  }
  const std::string key = key_node.Scalar();
  if (const std::string why = reserved_reason(key); !why.empty()) {
    pr.add(line, fmt::format("{}: '{}' cannot be set in a suite file ({})", where, shorten(key), why));
    return nullptr;
  }
  const KeyDef* def = find_key(canonical(key));
  if (!def)
    pr.add(line, fmt::format("{}: unknown config key '{}'{}", where, shorten(key),
                             did_you_mean(key, config_key_names())));
  return def;
}

namespace {
bool id_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
}

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!id_char(ch)) ch = '_';
  return s;
}
}  // namespace

std::string token(const std::string& key, const std::string& text) {
  const KeyDef* def = find_key(key);
  if (def && def->token) return def->token + sanitize(text);
  return sanitize(key + "=" + text);
}

}  // namespace asgd::sweep::detail
