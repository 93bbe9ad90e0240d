// TrainConfig as JSON, written and read through the field table
// (fields.hpp): strict reading with one problem per bad key, config files,
// config hashes and run ids.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/hash.hpp"
#include "common/nesting.hpp"
#include "config/config.hpp"
#include "config/fields.hpp"

namespace asgd {

namespace {

using json = nlohmann::json;
using config::Field;
using config::Hwc;
using config::Nested;

// What a JSON value is, for "expected X, got Y".
std::string json_kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "a list";
    case json::value_t::string: return fmt::format("the text \"{}\"", shorten(v.get<std::string>()));
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    default: return shorten(v.dump());
  }
}

// Reads typed values of an object, collecting one problem per bad key.
struct Reader {
  bool strict = true;
  std::vector<std::string> problems;

  void bad(const std::string& key, const std::string& expected, const json& v) {
    problems.push_back(fmt::format("key '{}': expected {}, got {}", key, expected, json_kind(v)));
  }

  template <class T>
  void get(const json& v, const std::string& key, T& out) {
    if constexpr (std::is_same_v<T, bool>) {
      if (v.is_boolean()) out = v.get<bool>();
      else bad(key, "true or false", v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (v.is_string()) out = v.get<std::string>();
      else bad(key, "a text value", v);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (v.is_number()) out = v.get<T>();
      else bad(key, "a number", v);
    } else if constexpr (std::is_integral_v<T>) {
      constexpr auto lo = std::numeric_limits<T>::min();
      constexpr auto hi = std::numeric_limits<T>::max();
      const std::string expected = std::is_unsigned_v<T>
                                       ? fmt::format("a whole number from 0 to {}", hi)
                                       : fmt::format("a whole number from {} to {}", lo, hi);
      if (v.is_number_unsigned()) {
        const auto u = v.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(hi)) return bad(key, expected, v);
        out = static_cast<T>(u);
      } else if (v.is_number_integer()) {
        const auto i = v.get<std::int64_t>();
        if (i < static_cast<std::int64_t>(lo) ||
            (i > 0 && static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(hi)))
          return bad(key, expected, v);
        out = static_cast<T>(i);
      } else if (v.is_number_float()) {
        // 1e3 is a whole number; 1.5 is not (it would be truncated).
        const double d = v.get<double>();
        if (!(std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
              d < std::ldexp(1.0, std::numeric_limits<T>::digits)))
          return bad(key, expected, v);
        out = static_cast<T>(d);
      } else {
        bad(key, expected, v);
      }
    } else {  // std::vector<double>
      if (!v.is_array()) return bad(key, "a list of numbers", v);
      T list;
      for (const auto& e : v) {
        if (!e.is_number()) return bad(key, "a list of numbers", v);
        list.push_back(e.get<double>());
      }
      out = std::move(list);
    }
  }

  void unknown(const std::string& where, const std::string& key,
               const std::vector<std::string>& names) {
    if (strict)
      problems.push_back(fmt::format("{}unknown key '{}'{}", where, shorten(key),
                                     did_you_mean(key, names)));
  }
};

// Writes the fields of s (one table) into the object j.
template <class S>
void write_fields(json& j, const S& s, const std::vector<Field<S>>& table);

template <class S>
void write_field(json& j, const S& s, const Field<S>& f) {
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Nested>) {
          if constexpr (std::is_same_v<S, TrainConfig>) {
            json d = json::object();
            write_fields(d, s.data, config::dataset_fields());
            j[f.key] = std::move(d);
          }
        } else if constexpr (std::is_same_v<M, Hwc>) {
          if constexpr (std::is_same_v<S, data::DatasetSpec>) j[f.key] = {s.h, s.w, s.c};
        } else if constexpr (config::is_optional_v<std::decay_t<decltype(s.*m)>>) {
          if ((s.*m).has_value()) j[f.key] = *(s.*m);  // absent: not given
        } else {
          if (f.only_if_changed && s.*m == S{}.*m) return;
          j[f.key] = s.*m;
        }
      },
      f.member);
}

template <class S>
void write_fields(json& j, const S& s, const std::vector<Field<S>>& table) {
  for (const auto& f : table) write_field(j, s, f);
}

// dataset.shape: [height, width, channels], all three or none taken.
void read_shape(Reader& r, const json& v, const std::string& k, data::DatasetSpec& d) {
  if (!v.is_array() || v.size() != 3) return r.bad(k, "[height, width, channels]", v);
  index_t hwc[3] = {d.h, d.w, d.c};
  const std::size_t before = r.problems.size();
  for (std::size_t i = 0; i < 3; ++i) r.get(v[i], k, hwc[i]);
  if (r.problems.size() != before) return;
  d.h = hwc[0];
  d.w = hwc[1];
  d.c = hwc[2];
}

void read_dataset(Reader& r, const json& ds, data::DatasetSpec& d);

// Reads the object j into s through table; prefix names nested keys
// ("dataset."), where names the object in unknown-key problems ("dataset: ").
template <class S>
void read_fields(Reader& r, const json& j, S& s, const std::vector<Field<S>>& table, const std::string& prefix,
                 const std::string& where) {
  for (const auto& item : j.items()) {
    // named, not structured bindings: clang 14 cannot capture those in the lambdas below
    const std::string& key = item.key();
    const json& v = item.value();
    const auto f = std::find_if(table.begin(), table.end(), [&](const auto& x) { return key == x.key; });
    if (f == table.end()) {
      r.unknown(where, key, config::keys(table));
      continue;
    }
    const std::string k = prefix + key;
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, Nested>) {
            if constexpr (std::is_same_v<S, TrainConfig>) read_dataset(r, v, s.data);
          } else if constexpr (std::is_same_v<M, Hwc>) {
            if constexpr (std::is_same_v<S, data::DatasetSpec>) read_shape(r, v, k, s);
          } else if constexpr (config::is_optional_v<std::decay_t<decltype(s.*m)>>) {
            // files written before "not given" was absence held -1 for it (never written, but a
            // stored configuration is read leniently)
            if (!r.strict && v.is_number() && v.get<double>() == -1) return;
            typename std::decay_t<decltype(s.*m)>::value_type x{};
            const std::size_t before = r.problems.size();
            r.get(v, k, x);
            if (r.problems.size() == before) s.*m = x;
          } else {
            r.get(v, k, s.*m);
          }
        },
        f->member);
  }
}

void read_dataset(Reader& r, const json& ds, data::DatasetSpec& d) {
  if (ds.is_string()) {  // a kind name alone
    d.kind = ds.get<std::string>();
    return;
  }
  if (!ds.is_object()) return r.bad("dataset", "an object (kind, dir, shape, ...)", ds);
  read_fields(r, ds, d, config::dataset_fields(), "dataset.", "dataset: ");
}

void read_config(const json& j, TrainConfig& c, bool strict) {
  if (!j.is_object())
    throw Error(fmt::format("expected a JSON object of config keys, got {}", json_kind(j)));
  c = TrainConfig{};
  Reader r;
  r.strict = strict;
  read_fields(r, j, c, config::fields(), "", "");
  if (r.problems.empty()) return;
  std::string msg;
  for (std::size_t i = 0; i < r.problems.size(); ++i) msg += (i ? "; " : "") + r.problems[i];
  throw Error(msg);
}

}  // namespace

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = json::object();
  write_fields(j, c, config::fields());
}

void from_json(const nlohmann::json& j, TrainConfig& c) { read_config(j, c, true); }

TrainConfig load_config_file(const std::string& path) {
  const std::string shown = shorten(path, 200);
  if (path.empty()) throw Error("--config: the file name is empty");
  const std::string text = read_text_file(path, "config file", shown);
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(fmt::format("{}: config file is empty (expected a JSON object of config keys)", shown));
  check_json_nesting(text, shown);
  json j;
  // a key given twice in one object is refused (nlohmann would keep the last)
  std::vector<std::set<std::string>> keys;
  std::string twice;
  const json::parser_callback_t no_twice = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (ev == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
        twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  try {
    j = json::parse(text, no_twice);
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (what.starts_with("[json.exception.")) what.erase(0, what.find("] ") + 2);
    throw Error(fmt::format("{}: not valid JSON: {}", shown, shorten(what, 200)));
  }
  if (!twice.empty()) throw Error(fmt::format("{}: key '{}' is given twice", shown, shorten(twice)));
  TrainConfig c;
  try {
    read_config(j, c, true);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", shown, e.what()));
  }
  return c;
}

std::string config_hash(const TrainConfig& c) {
  nlohmann::json j = c;
  for (const auto& f : config::fields())
    if (!f.hashed) j.erase(f.key);
  // merge sum given is the rule run without one: the same run id as ever
  if (c.merge == protocol::kDefaultMerge) j.erase("merge");
  // no straggler hashes as the -1 that said "none" before it was absence: run ids stay
  if (!c.straggler) j["straggler"] = -1;
  // replace: the same text as dump() for every valid config; a path that is
  // not UTF-8 (refused by validate(), but suites hash runs before validating
  // them) must not throw here.
  const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return fmt::format("{:016x}", fnv1a64(s));
}

std::string resolved_run_id(const TrainConfig& c) {
  if (!c.run_id.empty()) return c.run_id;
  return fmt::format("{}-{}-{}-L{}-{}", c.model, c.data.kind, c.protocol, c.learners,
                     config_hash(c).substr(0, 8));
}

void check_same_config(const TrainConfig& c, const std::string& stored_config_json,
                       const std::string& path) {
  const std::string id = resolved_run_id(c);
  TrainConfig old;
  try {
    // lenient: keys of another version of asgd are not this run's problem
    check_json_nesting(stored_config_json, "stored configuration");
    read_config(json::parse(stored_config_json), old, false);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: run {} already finished, but its stored configuration cannot be "
                            "read ({}); remove the file or choose another --run-id",
                            path, id, shorten(e.what(), 120)));
  }
  const std::string have = config_hash(old), want = config_hash(c);
  if (have != want)
    throw Error(fmt::format("{}: run {} already finished with another configuration (hash {}, this "
                            "run {}); remove it or choose another --run-id",
                            path, id, have, want));
}

}  // namespace asgd
