#pragma once
// Internal to the suite reader: problems with their lines, YAML scalars, the
// config keys a suite may set (suite_keys.cpp, from the config's field
// table), the parts of a suite file as read (suite_parse.cpp) and their
// expansion into runs (suite_expand.cpp).
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sweep/suite.hpp"

namespace asgd::sweep::detail {

// ---------------------------------------------------------------- problems

struct Problems {
  std::vector<std::pair<int, std::string>> list;  // (1-based line, text)
  void add(int line, std::string msg) { list.emplace_back(line, std::move(msg)); }
  bool empty() const { return list.empty(); }
};

// Throws asgd::Error "<path>: N problems: <path>:<line>: <text>; ..." in line order.
[[noreturn]] void fail(const std::string& path, Problems& pr);

// 1-based line of a node; fallback for missing and empty nodes (yaml-cpp
// marks an empty value at the next token, often the next line).
int line_of(const YAML::Node& n, int fallback);
// "a list", "a mapping", "nothing", `the text "..."` for a quoted scalar, or
// the scalar in single quotes (cut short).
std::string describe(const YAML::Node& n);
// Whether n is a quoted scalar (text: never a number or a boolean).
bool quoted(const YAML::Node& n);

// node -> value; on failure `expected` names what was wanted.
bool convert(const YAML::Node& n, int& out, std::string& expected);
bool convert(const YAML::Node& n, std::int64_t& out, std::string& expected);
bool convert(const YAML::Node& n, std::uint64_t& out, std::string& expected);
bool convert(const YAML::Node& n, double& out, std::string& expected);
bool convert(const YAML::Node& n, bool& out, std::string& expected);
bool convert(const YAML::Node& n, std::string& out, std::string& expected);
bool convert(const YAML::Node& n, std::vector<double>& out, std::string& expected);

// Canonical text of a value (what a run's point holds and exclusions compare).
std::string text_of(const std::string& v);
std::string text_of(bool v);
std::string text_of(double v);
std::string text_of(int v);
std::string text_of(std::int64_t v);
std::string text_of(std::uint64_t v);
std::string text_of(const std::vector<double>& v);

// ------------------------------------------------------------- config keys

struct Value {
  std::string key;   // canonical config key
  std::string text;  // canonical text (what `point` holds and exclusions compare)
  std::function<void(TrainConfig&)> apply;
  int line = 0;
};

struct KeyDef {
  std::string name;
  // Parses one value; on failure adds problems and returns nullopt.
  std::function<std::optional<Value>(const YAML::Node&, int, Problems&)> parse;
  // Whether validate() of a default config with only this value set is a
  // fair check of the value alone (false where validity depends on other keys).
  bool check_alone = true;
  // Short form of a value in run ids: nullptr "key=value", "" the value alone,
  // else a prefix.
  const char* token = nullptr;
};

const KeyDef* find_key(const std::string& name);
// Every config key a suite may set, and "n".
const std::vector<std::string>& config_key_names();
// "n" -> "softsync_n"; other keys as they are.
std::string canonical(const std::string& key);
// Parses a value of a config key and checks it alone where that is fair.
std::optional<Value> parse_value(const KeyDef& def, const YAML::Node& n, int line, Problems& pr);
// Resolves a key of base/axes/zip: its definition, or nullptr with a problem.
const KeyDef* resolve_key(const YAML::Node& key_node, int line, const char* where, Problems& pr);
// Short form of one axis value in a run id ("L4", "n2", "lenet", "lr=0.1").
std::string token(const std::string& key, const std::string& text);

// ---------------------------------------------------------- a suite as read

// One axis of the expansion: a plain axis (one key) or a zip group (several
// keys moving together). Each choice sets every key of the dimension.
struct Dim {
  std::vector<std::string> keys;
  std::vector<std::vector<Value>> choices;
};

struct Exclusion {
  std::vector<std::pair<std::string, std::set<std::string>>> match;  // key -> any of texts
};

// The top-level keys of a suite file, once each, in file order.
struct Top {
  struct Entry {
    YAML::Node value;
    int line = 1;
  };
  std::unordered_map<std::string, Entry> entries;
  std::vector<std::string> order;
  bool has(const char* k) const { return entries.count(k) > 0; }
  const Entry& at(const char* k) const { return entries.at(k); }
  int value_line(const char* k) const { return line_of(at(k).value, at(k).line); }
  // Whether key a comes before key b in the file (both present).
  bool before(const char* a, const char* b) const;
};

// Everything read from a suite file before expansion.
struct Parsed {
  Suite suite;
  bool name_ok = false;
  std::string prefix;              // run id prefix: the name, or "suite"
  std::vector<Value> base_values;
  std::set<std::string> base_keys;
  std::set<std::string> axis_keys;  // every key swept (axes and zip)
  std::vector<Dim> dims;            // outer first
  bool empty_dim = false;           // a dimension lost every value to problems
  bool servers_given = false;       // resources.servers
  std::optional<double> target_error;
  std::vector<std::pair<std::uint64_t, std::string>> seeds;
  std::vector<Exclusion> exclusions;
  int dataset_line = 0;             // where the dataset is chosen, for dataset problems
};

// suite_parse.cpp: each reads one part of the file into p, adding problems.
void read_header(const Top& top, Parsed& p, Problems& pr);
void read_resources(const Top& top, Parsed& p, Problems& pr);
void read_base(const Top& top, Parsed& p, Problems& pr);
void read_dims(const Top& top, Parsed& p, Problems& pr);
void read_micro(const Top& top, Parsed& p, Problems& pr);
void read_seeds(const Top& top, const TrainConfig& base, Parsed& p, Problems& pr);
void read_exclusions(const Top& top, Parsed& p, Problems& pr);

// suite_expand.cpp: the runs of p over base, with their problems.
void expand(const Top& top, const TrainConfig& base, Parsed& p, Problems& pr, const std::string& path);

}  // namespace asgd::sweep::detail
