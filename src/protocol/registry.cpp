#include "protocol/registry.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/text.hpp"
#include "protocol/protocols.hpp"

namespace asgd::protocol {

// The registry: one line per type.
namespace {

std::vector<Entry<Protocol>>& protocol_table() {
  static std::vector<Entry<Protocol>> all{hardsync_entry(),  softsync_entry(), nsync_entry(),
                                          allreduce_entry(), ssp_entry(),      easgd_entry(),
                                          dcasgd_entry()};
  return all;
}

}  // namespace

const std::vector<Entry<RatePolicy>>& rate_policies() {
  static const std::vector<Entry<RatePolicy>> all{constant_entry(), staleness_entry(),
                                                  mean_staleness_entry()};
  return all;
}

namespace {

std::vector<Entry<MergeRule>>& merge_table() {
  static std::vector<Entry<MergeRule>> all{sum_entry(), mean_entry(), server_sgd_entry(), adagrad_entry()};
  return all;
}

}  // namespace

const std::vector<Entry<Protocol>>& protocols() { return protocol_table(); }
const std::vector<Entry<MergeRule>>& merge_rules() { return merge_table(); }

namespace {

template <class T>
std::vector<std::string> names(const std::vector<Entry<T>>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.emplace_back(e.name);
  return out;
}

template <class T>
const Entry<T>* find(const std::vector<Entry<T>>& entries, const std::string& name) {
  for (const auto& e : entries)
    if (name == e.name) return &e;
  return nullptr;
}

template <class T>
std::unique_ptr<T> make(const std::vector<Entry<T>>& entries, const std::string& name,
                        const Options& cfg, const char* what) {
  const Entry<T>* e = find(entries, name);
  if (!e)
    throw Error(fmt::format("{} '{}' unknown ({})", what, shorten(name),
                            fmt::join(names(entries), ", ")));
  std::vector<std::string> problems;
  e->check(cfg, problems);
  if (!problems.empty()) throw Error(problems.front());
  return e->make(cfg);
}

template <class T>
void add(std::vector<Entry<T>>& entries, Entry<T> e, const char* what) {
  if (e.name == nullptr || *e.name == '\0' || find(entries, e.name) != nullptr)
    throw Error(fmt::format("{} '{}' is registered already (or has no name)", what, e.name ? e.name : ""));
  entries.push_back(std::move(e));
}

}  // namespace

void register_protocol(Entry<Protocol> e) { add(protocol_table(), std::move(e), "protocol"); }
void register_merge_rule(Entry<MergeRule> e) { add(merge_table(), std::move(e), "merge rule"); }

std::vector<std::string> protocol_names() { return names(protocols()); }
std::vector<std::string> rate_policy_names() { return names(rate_policies()); }
std::vector<std::string> merge_rule_names() { return names(merge_rules()); }

std::unique_ptr<Protocol> make_protocol(const Options& cfg) {
  return make(protocols(), cfg.protocol, cfg, "protocol");
}

std::unique_ptr<RatePolicy> make_rate_policy(const Options& cfg) {
  return make(rate_policies(), cfg.lr_policy, cfg, "lr policy");
}

std::unique_ptr<MergeRule> make_merge_rule(const Options& cfg) {
  return make(merge_rules(), cfg.merge_rule(), cfg, "merge rule");
}

}  // namespace asgd::protocol
