// Site files (slurm/sites/<name>.yaml): read strictly, as suites are. Every
// key once, every value of its type (a quoted "4" is text, not a number;
// yes/no and true/false unquoted are the booleans), each problem one
// "<file>:<line>: <key>: ..." naming the value. Every value that goes into
// an sbatch script is checked for control characters here and quoted where
// it is written (slurm.hpp).
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/nesting.hpp"
#include "common/text.hpp"
#include "sweep/slurm.hpp"
#include "sweep/suite_detail.hpp"

namespace asgd::sweep {

namespace {

namespace fs = std::filesystem;

constexpr int kMaxGpusPerNode = 1024;
constexpr int kMaxParallelTasks = 1 << 20;

// Why a site's extra sbatch entry cannot go into the scripts ("" if it can):
// one option per entry, written --name or --name=value; none of the options
// asgd writes itself from the suite (a second --cpus-per-task would change the
// allocation under OMP_NUM_THREADS) and no --export (the tasks need the
// submitting shell's environment: PATH, the modules).
std::string sbatch_entry_problem(const std::string& e) {
  static const char* const kOwn[] = {"account", "array",  "cpus-per-task", "gpus",      "job-name",
                                     "ntasks",  "output", "partition",     "time",      "export"};
  const std::string name =
      e.compare(0, 2, "--") != 0 ? "" : e.substr(2, e.find('=') == std::string::npos ? std::string::npos : e.find('=') - 2);
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
    return "write one option per entry, as --name or --name=value (long names, no short forms)";
  // sbatch (getopt_long) takes any unambiguous abbreviation of a long name:
  // --expo is --export, --arr is --array
  for (const std::string own : kOwn) {
    if (own.compare(0, name.size(), name) != 0) continue;
    const std::string as = name == own ? "" : fmt::format("--{} abbreviates --{}: ", name, own);
    return own == "export" ? as + "--export is not allowed: the tasks need the submitting shell's environment"
                           : as + fmt::format("asgd writes --{} itself (from the suite and the site's own keys); "
                                              "remove this entry",
                                              own);
  }
  return "";
}

const char* const kKeys = "partition, account, mpi, modules, sbatch, gpus_per_node, exclusive, max_parallel_tasks, "
                          "description";

// Reads one site file's entries into a Site, collecting one problem per bad entry.
struct SiteReader {
  std::string path;
  std::vector<std::string> problems;

  void bad(int line, const std::string& key, const std::string& what) {
    problems.push_back(fmt::format("{}:{}: {}: {}", path, line, shorten(key), what));
  }
  bool text(const YAML::Node& v, int line, const std::string& key, std::string& out) {
    if (!v.IsScalar()) {
      bad(line, key, fmt::format("expected a text value, got {}", detail::describe(v)));
      return false;
    }
    try {
      check_script_value(fmt::format("{}:{}: {}", path, line, key), v.Scalar());
    } catch (const Error& e) {
      problems.push_back(e.what());
      return false;
    }
    out = v.Scalar();
    return true;
  }
  void list(const YAML::Node& v, int line, const std::string& key, std::vector<std::string>& out) {
    if (!v.IsSequence()) return bad(line, key, fmt::format("expected a list of text values, got {}", detail::describe(v)));
    out.clear();
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::string e;
      if (!text(v[i], detail::line_of(v[i], line), fmt::format("{}[{}]", key, i), e)) return;
      out.push_back(e);
    }
  }
  void whole(const YAML::Node& v, int line, const std::string& key, int lo, int hi, int& out) {
    int x = 0;
    std::string expected;
    if (!detail::convert(v, x, expected) || x < lo || x > hi)  // a quoted "4" is text
      return bad(line, key, fmt::format("expected a whole number from {} to {}, got {}", lo, hi, detail::describe(v)));
    out = x;
  }
  void flag(const YAML::Node& v, int line, const std::string& key, bool& out) {
    bool x = false;
    std::string expected;
    if (!detail::convert(v, x, expected))
      return bad(line, key, fmt::format("expected true or false, got {}", detail::describe(v)));
    out = x;
  }

  void entry(const std::string& key, const YAML::Node& v, int line, Site& s) {
    std::string ignored;
    if (key == "partition") text(v, line, key, s.partition);
    else if (key == "account") text(v, line, key, s.account);
    else if (key == "mpi") text(v, line, key, s.mpi);
    else if (key == "description") text(v, line, key, ignored);
    else if (key == "modules") list(v, line, key, s.modules);
    else if (key == "sbatch") {
      list(v, line, key, s.sbatch);
      for (std::size_t i = 0; i < s.sbatch.size(); ++i)
        if (auto p = sbatch_entry_problem(s.sbatch[i]); !p.empty())
          bad(line, fmt::format("{}[{}] '{}'", key, i, s.sbatch[i]), p);
    } else if (key == "gpus_per_node") whole(v, line, key, 0, kMaxGpusPerNode, s.gpus_per_node);
    else if (key == "exclusive") flag(v, line, key, s.exclusive);
    else if (key == "max_parallel_tasks") whole(v, line, key, 0, kMaxParallelTasks, s.max_parallel_tasks);
    else bad(line, key, fmt::format("unknown key ({})", kKeys));
  }
};

}  // namespace

Site load_site(const std::string& dir, const std::string& name) {
  check_script_value("--site", name);
  const fs::path path = fs::path(dir) / (name + ".yaml");
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(fmt::format("{}: no such site file (sites live in {})", path.string(), dir));
  SiteReader r{path.string(), {}};
  const std::string text = read_text_file(r.path, "site file", r.path);
  check_yaml_text(text, r.path);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: not YAML: {}", r.path, e.mark.line >= 0 ? e.mark.line + 1 : 1, e.msg));
  }
  check_yaml_depth(root, r.path);
  if (!root.IsNull() && !root.IsMap()) throw Error(fmt::format("{}: a site file must be a mapping of keys", r.path));
  Site s;
  std::map<std::string, int> seen;  // key -> its first line
  for (const auto& kv : root) {
    const int line = detail::line_of(kv.first, 1);
    if (!kv.first.IsScalar()) {
      r.bad(line, "(key)", fmt::format("keys must be plain names, got {}", detail::describe(kv.first)));
      continue;
    }
    const std::string key = kv.first.Scalar();
    if (const auto [it, fresh] = seen.emplace(key, line); !fresh) {
      r.bad(line, key, fmt::format("given twice (first at line {})", it->second));
      continue;
    }
    r.entry(key, kv.second, detail::line_of(kv.second, line), s);
  }
  if (!r.problems.empty()) {
    std::string msg;
    for (const auto& p : r.problems) msg += (msg.empty() ? "" : "; ") + p;
    throw Error(msg);
  }
  return s;
}

}  // namespace asgd::sweep
