#pragma once
// Protocols and learning-rate policies by name. Adding one is a new file with
// its type and a line in registry.cpp's table.
#include <memory>
#include <string>
#include <vector>

#include "protocol/options.hpp"
#include "protocol/protocol.hpp"

namespace asgd::protocol {

// A registered type: its name, one line for help texts and the docs, the
// checks of the options it reads (one message per problem, appended), and its
// factory (called after check() found no problem). An option only one
// protocol reads is refused under the others by its configuration field
// (config/fields.cpp).
template <class T>
struct Entry {
  const char* name;
  const char* summary;
  void (*check)(const Options&, std::vector<std::string>&);
  std::unique_ptr<T> (*make)(const Options&);
};

const std::vector<Entry<Protocol>>& protocols();
const std::vector<Entry<RatePolicy>>& rate_policies();
const std::vector<Entry<MergeRule>>& merge_rules();
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
