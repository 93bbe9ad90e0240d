// What `asgd sweep submit` writes into sbatch scripts: shell_quote (read back
// by a real bash), sbatch_quote (read back by a model of sbatch's #SBATCH
// parser), the %-escape of log file names, and the refusal of control
// characters. tests/slurm/injection.sh runs whole generated scripts.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/process.hpp"
#include "sweep/runner.hpp"
#include "sweep/slurm.hpp"
#include "sweep/suite.hpp"

using asgd::sweep::check_script_value;
using asgd::sweep::sbatch_filename_literal;
using asgd::sweep::sbatch_quote;
using asgd::sweep::shell_quote;

namespace {

// Runs `bash -c CMD` and returns its stdout.
std::string bash_output(const std::string& cmd) {
  // the whole command is itself passed as one single-quoted word to sh
  FILE* f = popen(("bash -c " + shell_quote(cmd)).c_str(), "r");
  if (!f) return "<popen failed>";
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// The arguments sbatch takes from the text after "#SBATCH" on one line, as
// sbatch's parser splits them (src/sbatch/opt.c of Slurm 17.11 and later):
// whitespace separates arguments outside quotes; ' or " opens a quote closed
// by the same character; a backslash makes the next character literal, inside
// quotes too; an unquoted # ends the line. An unmatched quote is an error.
std::vector<std::string> sbatch_args(const std::string& line, bool* unmatched = nullptr) {
  std::vector<std::string> args;
  std::size_t i = 0;
  if (unmatched) *unmatched = false;
  while (true) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i >= line.size()) break;
    std::string arg;
    bool any = false, quoted = false, escape = false, comment = false;
    char q = 0;
    for (; i < line.size() && (quoted || !std::isspace(static_cast<unsigned char>(line[i]))); ++i) {
      const char c = line[i];
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
        continue;
      } else if (quoted) {
        if (c == q) {
          quoted = false;
          continue;
        }
      } else if (c == '\'' || c == '"') {
        quoted = true;
        q = c;
        continue;
      } else if (c == '#') {
        comment = true;
        break;
      }
      arg += c;
      any = true;
    }
    if (quoted && unmatched) *unmatched = true;
    if (any) args.push_back(arg);
    if (comment || !any) break;
  }
  return args;
}

const std::vector<std::string>& hostile() {
  static const std::vector<std::string> v = {
      "",
      "plain",
      "with space",
      "$(touch PWNED)",
      "`touch PWNED`",
      "a;touch PWNED",
      "a && touch PWNED || true",
      "it's",
      "''",
      "'\\''",
      "\"double\" quotes",
      "back\\slash\\",
      "#hash after",
      "a # b",
      "%j and %%",
      "*.glob ?[a-z]",
      "$HOME ${PATH} $'x'",
      "!bang",
      "tab-free but unicode: caf\xc3\xa9 \xe2\x9c\x93",
      "-starts-with-dash",
      "trailing space ",
  };
  return v;
}

}  // namespace

TEST(Slurm, ShellQuoteShape) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("abc"), "'abc'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$(x)"), "'$(x)'");
  EXPECT_EQ(shell_quote("a\\b"), "'a\\b'");  // bash keeps backslashes inside '...'
}

TEST(Slurm, ShellQuoteReadBackByBash) {
  for (const auto& s : hostile()) {
    // printf '[%s]' WORD prints exactly one bracketed argument when the
    // quoted value is one word and nothing in it ran.
    EXPECT_EQ(bash_output("printf '[%s]' " + shell_quote(s)), "[" + s + "]") << s;
  }
  // Random bytes 0x01-0xff (no NUL): still one literal argument.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(1, 255);
  for (int t = 0; t < 50; ++t) {
    std::string s;
    for (int k = 0; k < 40; ++k) s += static_cast<char>(byte(rng));
    EXPECT_EQ(bash_output("printf '[%s]' " + shell_quote(s)), "[" + s + "]") << t;
  }
}

TEST(Slurm, SbatchQuoteShape) {
  EXPECT_EQ(sbatch_quote("abc"), "'abc'");
  EXPECT_EQ(sbatch_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(sbatch_quote("a\\b"), "'a\\\\b'");  // sbatch's parser escapes inside quotes
  EXPECT_EQ(sbatch_quote("a # b"), "'a # b'");
}

TEST(Slurm, SbatchQuoteReadBackBySbatchParser) {
  for (const auto& s : hostile()) {
    bool unmatched = true;
    const auto args = sbatch_args("--comment=" + sbatch_quote(s) + " --next", &unmatched);
    EXPECT_FALSE(unmatched) << s;
    ASSERT_EQ(args.size(), 2u) << s;
    EXPECT_EQ(args[0], "--comment=" + s);
    EXPECT_EQ(args[1], "--next");
  }
  // The model itself: unquoted space splits, unquoted # ends the line.
  EXPECT_EQ(sbatch_args("--a=b c # d"), (std::vector<std::string>{"--a=b", "c"}));
  EXPECT_EQ(sbatch_args("--x='a b'\"c d\"e\\#f"), (std::vector<std::string>{"--x=a bc de#f"}));
  // (as in sbatch, a backslash does not keep an unquoted space: the loop ends at it first)
  EXPECT_EQ(sbatch_args("e\\ f"), (std::vector<std::string>{"e", "f"}));
  // Unquoted, a hostile value splits into several arguments: why quoting matters.
  EXPECT_GT(sbatch_args("--partition=gpu --uid=0 # x").size(), 1u);
}

TEST(Slurm, SbatchQuoteIsAlsoOneBashWordWithoutBackslashes) {
  // #SBATCH lines are comments to bash; still, a value without backslashes
  // quotes the same way for both.
  for (const auto& s : hostile()) {
    if (s.find('\\') == std::string::npos) {
      EXPECT_EQ(sbatch_quote(s), shell_quote(s)) << s;
    }
  }
}

TEST(Slurm, FilenameLiteralDoublesPercent) {
  EXPECT_EQ(sbatch_filename_literal("/r/%j/%%x"), "/r/%%j/%%%%x");
  EXPECT_EQ(sbatch_filename_literal("/plain/path"), "/plain/path");
}

TEST(Slurm, ControlCharactersRefused) {
  for (int b = 0; b < 0x20; ++b) {
    const std::string s = std::string("ab") + static_cast<char>(b) + "cd";
    try {
      check_script_value("--results", s);
      ADD_FAILURE() << "byte " << b << " accepted";
    } catch (const asgd::Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("--results: control character", 0), 0u) << msg;
      EXPECT_NE(msg.find("at byte 2"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "the message is one line";
      for (char c : msg) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << "byte " << b << ": " << msg;
    }
  }
  EXPECT_THROW(check_script_value("mpi", "pmi2\x7f"), asgd::Error);
  EXPECT_THROW(check_script_value("mpi", "pmi2\ntouch PWNED"), asgd::Error);
  EXPECT_THROW(check_script_value("mpi", std::string("pmi2\0x", 6)), asgd::Error);
  // Printable ASCII and UTF-8 pass.
  std::string printable;
  for (int b = 0x20; b < 0x7f; ++b) printable += static_cast<char>(b);
  EXPECT_NO_THROW(check_script_value("x", printable));
  EXPECT_NO_THROW(check_script_value("x", "caf\xc3\xa9 \xe2\x9c\x93"));
  EXPECT_NO_THROW(check_script_value("x", ""));
}

TEST(Slurm, ControlCharacterMessageShowsEscapes) {
  try {
    check_script_value("site.yaml:3: mpi", "pmi2\ntouch PWNED");
    FAIL();
  } catch (const asgd::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("site.yaml:3: mpi: control character 0x0a at byte 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'pmi2\\x0atouch PWNED'"), std::string::npos) << msg;
  }
}

// Found by fuzz_sbatch (tests/fuzz; tests/data/fuzz/README.md): a --results
// folder that is not valid UTF-8 reached nlohmann::json's dump() when submit
// wrote the run configs, and its type_error escaped (exit 1, "failed"; a micro
// suite's run config was not validated at all). Both kinds of suite are now
// refused with asgd::Error naming the results folder, before any script.
TEST(Slurm, SubmitRefusesAResultsFolderThatIsNotUtf8) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("asgd_test_slurm_utf8_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  write("site.yaml", "partition: debug\n");
  const std::string real = write("real.yaml",
                                 "name: real\nbase: {model: mlp, dataset: {kind: synthetic, shape: [8, 8, 1]}}\n"
                                 "axes: {learners: [1, 2]}\nseeds: [1]\n");
  const std::string micro = write("micro.yaml", "name: micro\nmode: micro\nbenchmark: {filter: BM_x}\n");
  asgd::sweep::SubmitOptions opt;
  opt.site = "site";
  opt.sites_dir = dir.string();
  opt.self = "/opt/asgd/bin/asgd";
  opt.dry_run = true;
  for (const std::string& suite : {real, micro}) {
    for (const std::string& tail : {std::string("r\x83"), std::string("caf\xc3")}) {
      const std::string results = (dir / tail).string();
      try {
        const auto s = asgd::sweep::load_suite(suite, results);
        asgd::sweep::submit(s, results, opt);
        ADD_FAILURE() << suite << ": accepted";
      } catch (const asgd::Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("results folder"), std::string::npos) << m;
        EXPECT_NE(m.find("is not valid UTF-8"), std::string::npos) << m;
      }
      EXPECT_FALSE(fs::exists(results)) << "something was written under " << results;
    }
  }
  // the same suites with a UTF-8 folder are submitted
  for (const std::string& suite : {real, micro}) {
    const std::string results = (dir / "r\xc3\xa9sultats").string();
    EXPECT_GT(asgd::sweep::submit(asgd::sweep::load_suite(suite, results), results, opt), 0);
  }
  fs::remove_all(dir);
}

// The array script gives each rank the suite's cpus_per_rank: Slurm's
// --cpus-per-task (and srun's, through SRUN_CPUS_PER_TASK) and the OpenMP
// threads of Kokkos' OpenMP backend, bound close to each other on cores.
TEST(Slurm, ThreadsPerRankFromCpusPerRank) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("asgd_test_slurm_omp_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "site.yaml") << "partition: debug\n";
  const std::string suite = (dir / "omp.yaml").string();
  std::ofstream(suite) << "name: omp\nbase: {model: mlp, dataset: {kind: synthetic, shape: [8, 8, 1]}}\n"
                          "axes: {learners: [2]}\nseeds: [1]\nresources: {cpus_per_rank: 4}\n";
  asgd::sweep::SubmitOptions opt;
  opt.site = "site";
  opt.sites_dir = dir.string();
  opt.self = "/opt/asgd/bin/asgd";
  opt.dry_run = true;
  const std::string results = (dir / "results").string();
  ASSERT_GT(asgd::sweep::submit(asgd::sweep::load_suite(suite, results), results, opt), 0);
  int scripts = 0;
  for (const auto& e : fs::recursive_directory_iterator(results)) {
    if (e.path().extension() != ".sbatch") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("#SBATCH --array=") == std::string::npos) continue;  // the report job
    ++scripts;
    for (const char* want : {"#SBATCH --cpus-per-task=4\n", "export OPENBLAS_NUM_THREADS=4\n",
                             "export OMP_NUM_THREADS=4 OMP_PROC_BIND=close OMP_PLACES=cores "
                             "SRUN_CPUS_PER_TASK=4\n"})
      EXPECT_NE(text.find(want), std::string::npos) << e.path() << " lacks " << want << "\n" << text;
  }
  EXPECT_EQ(scripts, 1);
  fs::remove_all(dir);
}

// A process asgd starts (an mpiexec for calibrate's probes) must not inherit what an MPI
// launcher or Open MPI's singleton start set for asgd itself; the user's own settings stay.
TEST(Process, ChildrenDoNotInheritTheLaunchersEnvironment) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("asgd-env-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<const char*, const char*>> set = {
      {"PMI_RANK", "3"},          {"PMIX_NAMESPACE", "x"},   {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_MCA_ess", "singleton"},
      {"OMPI_MCA_pmix", "^s1"},   {"ORTE_SCHIZO", "x"},      {"OPAL_PREFIX", "/x"},         {"HYDI_CONTROL_FD", "9"},
      {"OMPI_MCA_btl", "tcp,self"}, {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"ASGD_KEEP_ME", "yes"}};
  for (const auto& [k, v] : set) setenv(k, v, 1);
  const std::string out = (dir / "env.txt").string();
  EXPECT_EQ(asgd::run_process({"/bin/sh", "-c", "env > " + out}, (dir / "log").string(), 30), "");
  std::ifstream in(out);
  const std::string env = "\n" + std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  for (const char* gone : {"PMI_RANK=", "PMIX_NAMESPACE=", "OMPI_COMM_WORLD_RANK=", "OMPI_MCA_ess=", "OMPI_MCA_pmix=",
                           "ORTE_SCHIZO=", "OPAL_PREFIX=", "HYDI_CONTROL_FD="})
    EXPECT_EQ(env.find(std::string("\n") + gone), std::string::npos) << gone;
  for (const char* kept : {"OMPI_MCA_btl=tcp,self", "OMPI_ALLOW_RUN_AS_ROOT=1", "ASGD_KEEP_ME=yes"})
    EXPECT_NE(env.find(kept), std::string::npos) << kept;
  for (const auto& [k, v] : set) unsetenv(k);
  std::filesystem::remove_all(dir);
}

// Site files are read strictly: each problem names the file, line and key,
// never yaml-cpp's own text ("bad conversion").
TEST(Slurm, SiteFileKeysOnceAndTyped) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("asgd_test_site_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto refusal = [&](const std::string& text) {
    std::ofstream(dir / "s.yaml") << text;
    try {
      (void)asgd::sweep::load_site(dir.string(), "s");
    } catch (const asgd::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string f = (dir / "s.yaml").string();
  EXPECT_EQ(refusal("partition: a\nmpi: pmi2\npartition: b\n"), f + ":3: partition: given twice (first at line 1)");
  EXPECT_EQ(refusal("max_parallel_tasks: \"x\"\n"),
            f + ":1: max_parallel_tasks: expected a whole number from 0 to 1048576, got the text \"x\"");
  EXPECT_EQ(refusal("max_parallel_tasks: 1e12\n"),
            f + ":1: max_parallel_tasks: expected a whole number from 0 to 1048576, got '1e12'");
  EXPECT_EQ(refusal("exclusive: \"yes\"\n"), f + ":1: exclusive: expected true or false, got the text \"yes\"");
  EXPECT_EQ(refusal("modules: gcc\n"), f + ":1: modules: expected a list of text values, got 'gcc'");
  EXPECT_EQ(refusal("partition: [a]\n"), f + ":1: partition: expected a text value, got a list");
  EXPECT_NE(refusal("partition: " + std::string(100, '[') + std::string(100, ']') + "\n").find("nested deeper than 64 levels"),
            std::string::npos);
  EXPECT_NE(refusal("partition: \"open\n").find("a quote opened here is never closed"), std::string::npos);
  EXPECT_EQ(refusal("partition: a\nexclusive: yes\nmax_parallel_tasks: 2\ngpus_per_node: 4\n"), "accepted");
  const auto s = asgd::sweep::load_site(dir.string(), "s");
  EXPECT_TRUE(s.exclusive);
  EXPECT_EQ(s.max_parallel_tasks, 2);
  EXPECT_EQ(s.gpus_per_node, 4);
  fs::remove_all(dir);
}
