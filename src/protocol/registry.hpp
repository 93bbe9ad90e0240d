#pragma once
// Protocols and learning-rate policies by name. Adding one is a new file with
// its type and a line in registry.cpp's table.
#include <memory>
#include <string>
#include <vector>

#include "protocol/options.hpp"
#include "protocol/protocol.hpp"

namespace asgd::protocol {

// The check of a type's options: one message per problem, appended.
using Check = void (*)(const Options&, std::vector<std::string>&);

// An option a type reads: its configuration key, and the check of its domain
// (none: the type's own check covers it), which is run also when the option is
// given under a type that does not read it (one message each, range first).
struct OptionRead {
  OptionRead(const char* k, Check c = nullptr) : key(k), check(c) {}  // NOLINT: implicit from a key
  std::string key;
  Check check;
};

// A registered type: its name, one line for help texts and the docs, the
// checks of the options it reads, its factory (called after check() found no
// problem), and the options only it (and other types that name them) reads:
// such an option given under a type that does not name it is refused
// (config/fields.cpp asks readers_of()).
template <class T>
struct Entry {
  const char* name;
  const char* summary;
  Check check;
  std::unique_ptr<T> (*make)(const Options&);
  std::vector<OptionRead> reads;
};

const std::vector<Entry<Protocol>>& protocols();
const std::vector<Entry<RatePolicy>>& rate_policies();
const std::vector<Entry<MergeRule>>& merge_rules();
// The check of a type without options of its own.
inline void no_options(const Options&, std::vector<std::string>&) {}

// Adds a type to the registry (a type defined outside this part, e.g. in a
// test); the name must be new. Not thread-safe: call before any run starts.
void register_protocol(Entry<Protocol> e);
void register_merge_rule(Entry<MergeRule> e);

// The registered types whose entry reads configuration key `key`, in registry order.
template <class T>
std::vector<const Entry<T>*> readers_of(const std::vector<Entry<T>>& entries, const std::string& key) {
  std::vector<const Entry<T>*> out;
  for (const auto& e : entries)
    for (const auto& r : e.reads)
      if (r.key == key) out.push_back(&e);
  return out;
}

std::vector<std::string> protocol_names();
std::vector<std::string> rate_policy_names();
std::vector<std::string> merge_rule_names();

// Built once per run; throw asgd::Error on an unknown name or an option the
// type's own check refuses (config/fields.cpp runs those checks, with every
// other field's, before any work).
std::unique_ptr<Protocol> make_protocol(const Options& cfg);
std::unique_ptr<RatePolicy> make_rate_policy(const Options& cfg);
std::unique_ptr<MergeRule> make_merge_rule(const Options& cfg);

}  // namespace asgd::protocol
