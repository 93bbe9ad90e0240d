// The sbatch scripts of `asgd sweep submit` (dry run: scripts written, sbatch
// not called), with fuzzed strings in every value a user controls: the
// --results folder, the asgd executable's path, every site-file value
// (partition, account, mpi, modules, sbatch), the suite's benchmark filter and
// description (and, by choice, its name and time limit), across the modes
// real / virtual / micro, GPUs, exclusive and task limits.
//
// The check: every input value appears in a script only inside single quotes,
// or submit refuses it (asgd::Error). A second submission, the twin, uses the
// same input with every character of those values replaced by 'a' (quotes,
// backslashes and slashes kept, see benign()); the scripts of
// both are reduced to their skeleton -- bash's view outside single quotes
// (#SBATCH lines: sbatch's view outside its quotes), each quoted word one
// mark Q, each escaped character E, comments C -- and the skeletons must be
// equal. A value that leaked out of its quotes shows in the skeleton as its
// own text ($, `, ;, |, &, spaces, ...) where the twin has a's, or as quotes
// that do not pair. Values holding control characters must be refused.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz_util.hpp"
#include "sweep/runner.hpp"
#include "sweep/slurm.hpp"
#include "sweep/suite.hpp"

using namespace asgd;
namespace fs = std::filesystem;

namespace {

// A YAML double-quoted scalar that yaml-cpp reads back as s.
std::string yq(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '"') q += "\\\"";
    else if (c == '\\') q += "\\\\";
    else if (b < 0x20 || b == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      q += buf;
    } else q += c;
  }
  return q + "\"";
}

struct Input {
  std::string results, self, partition, account, mpi, filter, description, name, time_limit;
  std::vector<std::string> modules, sbatch;
  int mode = 0, gpus = 0, cpus = 1, suite_limit = -1, site_limit = 0;
  bool suite_exclusive = false, site_exclusive = false, two_shapes = false;
};

Input read_input(FuzzedDataProvider& in) {
  Input v;
  v.mode = in.ConsumeIntegralInRange(0, 2);
  v.gpus = in.ConsumeIntegralInRange(0, 1);
  v.cpus = in.ConsumeIntegralInRange(1, 4);
  v.suite_limit = in.ConsumeIntegralInRange(-1, 3);
  v.site_limit = in.ConsumeIntegralInRange(0, 3);
  v.suite_exclusive = in.ConsumeBool();
  v.site_exclusive = in.ConsumeBool();
  v.two_shapes = in.ConsumeBool();
  v.name = in.ConsumeBool() ? in.ConsumeRandomLengthString(140) : "tiny";
  v.time_limit = in.ConsumeBool() ? in.ConsumeRandomLengthString(20) : "00:05:00";
  v.results = in.ConsumeRandomLengthString(300);
  // the executable's path (never empty: /proc/self/exe, else "asgd")
  v.self = in.ConsumeRandomLengthString(300);
  if (v.self.empty()) v.self = "asgd";
  v.partition = in.ConsumeRandomLengthString(200);
  v.account = in.ConsumeRandomLengthString(200);
  v.mpi = in.ConsumeRandomLengthString(200);
  v.filter = in.ConsumeRandomLengthString(200);
  v.description = in.ConsumeRandomLengthString(200);
  for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i) v.modules.push_back(in.ConsumeRandomLengthString(100));
  // mostly as a site writes them (--name=value: the value is free text), else anything
  for (int i = in.ConsumeIntegralInRange(0, 3); i > 0; --i)
    v.sbatch.push_back((in.ConsumeBool() ? "--comment=" : "") + in.ConsumeRandomLengthString(100));
  // No '/' in the part of --results that comes from the input: the folder
  // stays inside the scratch folder (slashes are no shell metacharacter).
  std::replace(v.results.begin(), v.results.end(), '/', '_');
  return v;
}

// The twin's values: same length, every character 'a' except ' and \ (quoting
// changes shape around them) and / (the path of asgd_micro is the folder of
// the executable's path).
std::string benign(std::string s) {
  for (char& c : s)
    if (c != '\'' && c != '\\' && c != '/') c = 'a';
  return s;
}

// An sbatch entry's twin keeps "--name=" (the site check reads the name;
// names are letters, digits and dashes) and makes the value benign.
std::string benign_option(const std::string& s) {
  if (s.rfind("--", 0) != 0) return benign(s);
  const std::size_t keep = s.find('=') == std::string::npos ? s.size() : s.find('=') + 1;
  return s.substr(0, keep) + benign(s.substr(keep));
}

Input twin_of(const Input& v) {
  Input t = v;
  for (std::string* s : {&t.results, &t.self, &t.partition, &t.account, &t.mpi, &t.filter, &t.description})
    *s = benign(*s);
  for (auto& m : t.modules) m = benign(m);
  for (auto& m : t.sbatch) m = benign_option(m);
  return t;
}

std::string site_yaml(const Input& v) {
  std::string y = "description: fuzzed\npartition: " + yq(v.partition) + "\naccount: " + yq(v.account) +
                  "\nmpi: " + yq(v.mpi) + "\nmodules: [";
  for (std::size_t i = 0; i < v.modules.size(); ++i) y += (i ? ", " : "") + yq(v.modules[i]);
  y += "]\nsbatch: [";
  for (std::size_t i = 0; i < v.sbatch.size(); ++i) y += (i ? ", " : "") + yq(v.sbatch[i]);
  y += "]\ngpus_per_node: 0\nexclusive: " + std::string(v.site_exclusive ? "true" : "false") +
       "\nmax_parallel_tasks: " + std::to_string(v.site_limit) + "\n";
  return y;
}

std::string suite_yaml(const Input& v) {
  static const char* modes[] = {"real", "virtual", "micro"};
  std::string y = "name: " + yq(v.name) + "\ndescription: " + yq(v.description) + "\nmode: " + modes[v.mode] + "\n";
  std::string res = "resources:\n  time_limit: " + yq(v.time_limit) + "\n  exclusive: " +
                    (v.suite_exclusive ? "true" : "false") + "\n";
  // -1: not given (the site's limit)
  if (v.suite_limit >= 0) res += "  max_parallel_tasks: " + std::to_string(v.suite_limit) + "\n";
  if (v.mode == 2) {
    return y + "benchmark:\n  filter: " + yq(v.filter) + "\n  repetitions: 1\n" + res;
  }
  y += "base:\n  model: mlp\n  dataset: {kind: synthetic, shape: [8, 8, 1], classes: 4, n_train: 64, n_test: 16}\n"
       "  batch: 16\n  epochs: 1\n";
  if (v.mode == 0 && v.gpus > 0) y += "  device: cuda\n";
  y += v.two_shapes ? "zip:\n  - learners: [1, 2]\n    protocol: [hardsync, softsync]\n"
                    : "axes:\n  lr: [0.01, 0.02]\n";
  y += "seeds: [1, 2]\n" + res;
  y += "  servers: 1\n  cpus_per_rank: " + std::to_string(v.cpus) + "\n";
  if (v.mode == 0) y += "  gpus_per_learner: " + std::to_string(v.gpus) + "\n";
  return y;
}

struct Outcome {
  bool accepted = false;
  std::vector<std::string> values;                  // as loaded: what reaches the scripts
  std::vector<std::pair<std::string, std::string>> scripts;  // file name, text
};

Outcome submit(const Input& v, const std::string& tag) {
  Outcome o;
  const std::string dir = fuzz::fresh_dir(tag);
  fuzz::write_file(dir + "/site.yaml", site_yaml(v));
  fuzz::write_file(dir + "/suite.yaml", suite_yaml(v));
  const std::string results = dir + "/r/" + v.results;
  sweep::SubmitOptions opt;
  opt.site = "site";
  opt.sites_dir = dir;
  opt.self = v.self;
  opt.dry_run = true;
  sweep::Suite s;
  o.accepted = fuzz::accepted("sweep submit", [&] {
    s = sweep::load_suite(dir + "/suite.yaml", results);
    const sweep::Site site = sweep::load_site(dir, "site");
    o.values = {results, v.self, site.partition, site.account, site.mpi, s.bench_filter};
    o.values.insert(o.values.end(), site.modules.begin(), site.modules.end());
    o.values.insert(o.values.end(), site.sbatch.begin(), site.sbatch.end());
    sweep::submit(s, results, opt);
  });
  if (!o.accepted) return o;
  const std::string slurm = sweep::suite_paths(s, results).slurm;
  for (const auto& e : fs::directory_iterator(slurm)) {
    if (e.path().extension() != ".sbatch") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    o.scripts.emplace_back(e.path().filename().string(), ss.str());
  }
  std::sort(o.scripts.begin(), o.scripts.end());
  return o;
}

// sbatch's reading of the arguments after "#SBATCH" (tests/slurm/injection.sh
// models the same parser): ' and " quote, a backslash takes the next character
// literally (inside quotes too), an unquoted # ends the line.
std::string sbatch_skeleton(const std::string& line) {
  std::string out;
  for (std::size_t i = 0; i < line.size();) {
    const char c = line[i];
    if (c == '\\') {
      out += 'E';
      i += 2;
    } else if (c == '\'' || c == '"') {
      std::size_t j = i + 1;
      while (j < line.size() && line[j] != c) j += line[j] == '\\' ? 2 : 1;
      if (j >= line.size()) return out + "<unmatched quote>";
      out += 'Q';
      i = j + 1;
    } else if (c == '#') {
      return out + 'C';
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// bash's view of a script outside single quotes; #SBATCH lines as sbatch sees them.
std::string skeleton(const std::string& t) {
  std::string out;
  bool line_start = true;
  for (std::size_t i = 0; i < t.size();) {
    if (line_start && t.compare(i, 7, "#SBATCH") == 0) {
      const std::size_t end = std::min(t.find('\n', i), t.size());
      out += "#SBATCH" + sbatch_skeleton(t.substr(i + 7, end - i - 7));
      i = end;
      continue;
    }
    line_start = false;
    const char c = t[i];
    if (c == '\n') {
      out += '\n';
      line_start = true;
      ++i;
    } else if (c == '\'') {
      const std::size_t j = t.find('\'', i + 1);
      if (j == std::string::npos) return out + "<unterminated single quote>";
      out += 'Q';
      i = j + 1;
    } else if (c == '\\') {
      out += 'E';
      i += 2;
    } else if (c == '#' && (i == 0 || std::string_view(" \t\n;&|()<>").find(t[i - 1]) != std::string_view::npos)) {
      out += 'C';
      i = std::min(t.find('\n', i), t.size());
    } else if (c == '"') {
      out += '"';
      for (++i; i < t.size() && t[i] != '"'; ++i) {
        if (t[i] == '\\' && i + 1 < t.size()) out += t[i++];
        out += t[i];
      }
      out += '"';
      ++i;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // submit prints what it would submit; libFuzzer reports on stderr.
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, STDOUT_FILENO);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const Input v = read_input(in);
  const Outcome hostile = submit(v, "hostile");
  if (!hostile.accepted) return 0;
  for (const auto& value : hostile.values)
    for (char c : value)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        fuzz::bug("a value with a control character reached a script: " + value);
  if (hostile.scripts.empty()) fuzz::bug("submit accepted the suite but wrote no script");
  const Outcome twin = submit(twin_of(v), "twin");
  if (!twin.accepted) fuzz::bug("the hostile values were accepted but their benign twin was refused");
  if (twin.scripts.size() != hostile.scripts.size()) fuzz::bug("the twin wrote another number of scripts");
  for (std::size_t k = 0; k < hostile.scripts.size(); ++k) {
    const std::string a = skeleton(hostile.scripts[k].second), b = skeleton(twin.scripts[k].second);
    if (a != b)
      fuzz::bug("a value reached " + hostile.scripts[k].first + " outside single quotes:\n--- script\n" +
                hostile.scripts[k].second + "\n--- its skeleton\n" + a + "\n--- the twin's skeleton\n" + b);
  }
  return 0;
}
