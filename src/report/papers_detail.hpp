#pragma once
// The pieces of the "beside the paper" section shared by papers.cpp (claims
// matched by setting) and papers_curves.cpp (claims about learning curves:
// training error at the same time, early against late, n_sync order, the
// saw-tooth).
#include <string>
#include <vector>

#include "report/analysis.hpp"
#include "report/verdict.hpp"

namespace asgd::report::detail {

using Groups = std::vector<const ConfigGroup*>;

// The rows of one claim: the first names the claim, the paper's value and
// the paper's data set; each row has its verdict (verdict.hpp).
struct ClaimRows {
  std::string text, pv, paper_data;
  std::vector<std::vector<std::string>> rows;
  std::vector<Verdict> verdicts;
  void add(const std::string& ours, const Judged& j, const std::string& our_data, const std::string& cfg) {
    rows.push_back({rows.empty() ? text : "", rows.empty() ? pv : "", rows.empty() ? paper_data : "", ours,
                    verdict_cell(j), our_data, cfg});
    verdicts.push_back(j.v);
  }
  // A row that compares nothing (no matching configuration).
  void none(const std::string& ours) { add(ours, {Verdict::not_tested, ""}, "", ""); }
};

// The group's runs, the first of each seed: a seed run again into the same
// folder is not a second seed, so it adds nothing to an interval.
std::vector<const RunInfo*> seed_runs(const ConfigGroup& g);
// Each seed's final test error (seeds that completed with a finite one).
std::vector<double> final_errors(const ConfigGroup& g);
// The percent form of verdicts on error fractions: "0.31pp".
inline constexpr Shown kPoints{100, "pp", 2};
inline constexpr Shown kTimes{1, "x", 2};

// "fashion-mnist, mlp": the data set and model a group trained.
std::string data_of(const ConfigGroup& g);
std::string seeds_text(const ConfigGroup& g);
// Whether value is one the claim is about by its list field `name` or range
// `name`_range (neither: every value).
bool value_match(const json& claim, const std::string& name, double value);
// A number from a config field's text; NaN if it is not one.
double number_of(const std::string& text);
bool warm_match(const json& claim, const RunInfo& r);
// Whether learner count L is one the claim is about (learners / learners_range).
bool learners_match(const json& claim, int learners);

// The configuration key of a group without the named fields: groups that
// differ only in those fall in one family.
std::string family_key(const ConfigGroup& g, const std::vector<const char*>& drop);
// A group's training time (the end of its learning curve), the smallest over its runs.
double end_time(const ConfigGroup& g);

void train_error_rows(const json& claim, const Groups& all, ClaimRows& out);
void early_late_rows(const json& claim, const Groups& all, ClaimRows& out);
void n_sync_order_rows(const json& claim, const Groups& all, ClaimRows& out);
void saw_tooth_rows(const json& claim, const Groups& all, ClaimRows& out);
// The paper's speedup claims beside our throughput speedup at each learner
// count, a column per clock (modelled with a profile, or measured); "" with
// fewer than two learner counts.
std::string throughput_table(const json& ref, const Groups& all);

}  // namespace asgd::report::detail
