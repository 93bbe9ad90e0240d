// Suite files: expansion (cartesian, zip, exclude, seeds, dedupe), stable
// run ids, aliases, grouping by resource shape, the corpus of bad suites in
// tests/data/bad_suites (every `# expect:` substring must be in the error),
// and the speed of expanding 10,000 runs.
#include "sweep/suite.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "common/error.hpp"

namespace fs = std::filesystem;
using asgd::sweep::group_by_shape;
using asgd::sweep::load_suite;
using asgd::sweep::Suite;

namespace {

fs::path source_dir() {
  if (const char* e = std::getenv("ASGD_SOURCE_DIR")) return e;
  return fs::absolute(fs::path(__FILE__)).parent_path().parent_path().parent_path();
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The error message of load_suite, or "" when it loads.
std::string load_error(const std::string& path) {
  try {
    load_suite(path, "results");
  } catch (const asgd::Error& e) {
    return e.what();
  }
  return "";
}

class SuiteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("asgd_suite_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  Suite load(const std::string& text, const std::string& results = "results") {
    return load_suite(write("suite.yaml", text), results);
  }

  fs::path dir_;
};

// A small synthetic base so that no dataset files are needed.
const char* kBase = R"(
base:
  model: mlp
  dataset: {kind: synthetic, n_train: 256, n_test: 64}
  epochs: 1
)";

// "<stem>-<8 hex digits>" (no std::regex: GCC 12 warns inside it under ASan).
bool id_is(const std::string& id, const std::string& stem) {
  if (id.size() != stem.size() + 9 || !id.starts_with(stem + "-")) return false;
  return std::all_of(id.end() - 8, id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::string> ids(const Suite& s) {
  std::vector<std::string> v;
  for (const auto& r : s.runs) v.push_back(r.run_id);
  return v;
}

}  // namespace

TEST_F(SuiteTest, CartesianProductInFileOrder) {
  const Suite s = load(std::string("name: cart\n") + kBase + R"(
axes:
  learners: [1, 2, 4]
  lr: [0.1, 0.01]
seeds: [1, 2]
)");
  ASSERT_EQ(s.runs.size(), 12u);
  EXPECT_EQ(s.axes, (std::vector<std::string>{"learners", "lr"}));
  // First axis outermost, seeds innermost.
  EXPECT_EQ(s.runs[0].point.at("learners"), "1");
  EXPECT_EQ(s.runs[0].point.at("lr"), "0.1");
  EXPECT_EQ(s.runs[0].point.at("seed"), "1");
  EXPECT_EQ(s.runs[1].point.at("seed"), "2");
  EXPECT_EQ(s.runs[2].point.at("lr"), "0.01");
  EXPECT_EQ(s.runs[4].point.at("learners"), "2");
  EXPECT_EQ(s.runs[11].config.learners, 4);
  EXPECT_DOUBLE_EQ(s.runs[11].config.lr, 0.01);
  EXPECT_EQ(s.runs[11].config.seed, 2u);
  for (const auto& r : s.runs) {
    EXPECT_EQ(r.config.suite, "cart");
    EXPECT_EQ(r.config.results_dir, "results");
    EXPECT_EQ(r.config.run_id, r.run_id);
    EXPECT_EQ(r.config.model, "mlp");
    EXPECT_EQ(r.config.data.n_train, 256);
    EXPECT_TRUE(asgd::validate(r.config).empty());
  }
  const auto all = ids(s);
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), 12u);
}

TEST_F(SuiteTest, ZipMovesTogether) {
  const Suite s = load(std::string("name: zipped\n") + kBase + R"(
axes:
  lr: [0.1, 0.2]
zip:
  - {learners: [1, 2, 4], batch: [64, 32, 16]}
)");
  ASSERT_EQ(s.runs.size(), 6u);
  EXPECT_EQ(s.axes, (std::vector<std::string>{"lr", "learners", "batch"}));
  for (const auto& r : s.runs) EXPECT_EQ(r.config.learners * r.config.batch, 64);
  EXPECT_EQ(s.runs[0].config.learners, 1);
  EXPECT_EQ(s.runs[0].config.batch, 64);
  EXPECT_EQ(s.runs[1].config.learners, 2);
  EXPECT_EQ(s.runs[1].config.batch, 32);
  EXPECT_EQ(s.runs[2].config.learners, 4);
  EXPECT_EQ(s.runs[2].config.batch, 16);
  EXPECT_DOUBLE_EQ(s.runs[3].config.lr, 0.2);
  EXPECT_EQ(s.runs[3].config.learners, 1);
  EXPECT_TRUE(s.runs[1].run_id.starts_with("zipped-lr_0.1-L2-mu32-s1-")) << s.runs[1].run_id;
}

TEST_F(SuiteTest, ZipBeforeAxesIsOuter) {
  const Suite s = load(std::string("name: zf\n") + kBase + R"(
zip:
  - {learners: [1, 2], batch: [64, 32]}
axes:
  lr: [0.1, 0.2]
)");
  ASSERT_EQ(s.runs.size(), 4u);
  EXPECT_EQ(s.axes, (std::vector<std::string>{"learners", "batch", "lr"}));
  EXPECT_EQ(s.runs[1].config.learners, 1);
  EXPECT_DOUBLE_EQ(s.runs[1].config.lr, 0.2);
}

TEST_F(SuiteTest, ExcludeAndDedupe) {
  const Suite s = load(std::string("name: ex\n") + kBase + R"(
axes:
  learners: [1, 2]
  protocol: [hardsync, softsync]
  n: [1, 2]
exclude:
  - {learners: 1, protocol: softsync}
)");
  // L1: hardsync n1 (n2 normalises to n1: same run). L2: hardsync n1,
  // softsync n1, softsync n2.
  ASSERT_EQ(s.runs.size(), 4u) << fmt::format("{}", fmt::join(ids(s), " "));
  EXPECT_EQ(s.axes, (std::vector<std::string>{"learners", "protocol", "softsync_n"}));
  EXPECT_EQ(s.runs[0].point.at("softsync_n"), "1");
  EXPECT_EQ(s.runs[1].config.learners, 2);
  EXPECT_EQ(s.runs[1].config.protocol, "hardsync");
  EXPECT_EQ(s.runs[3].config.protocol, "softsync");
  EXPECT_EQ(s.runs[3].config.softsync_n, 2);
  EXPECT_TRUE(id_is(s.runs[3].run_id, "ex-L2-softsync-n2-s1"))
      << s.runs[3].run_id;
}

TEST_F(SuiteTest, ExcludeListsAndSeeds) {
  const Suite s = load(std::string("name: ex2\n") + kBase + R"(
axes:
  lr: [0.1, 0.2, 0.3]
seeds: [1, 2, 3]
exclude:
  - {lr: [0.10, 0.3], seeds: 2}
)");
  // 9 runs, minus (0.1, 2) and (0.3, 2); 0.10 is compared as the number 0.1.
  EXPECT_EQ(s.runs.size(), 7u);
}

TEST_F(SuiteTest, SeedsDefaultToBaseSeed) {
  const Suite s = load(R"(
name: one
base: {model: mlp, dataset: {kind: synthetic}, seed: 7}
)");
  ASSERT_EQ(s.runs.size(), 1u);
  EXPECT_EQ(s.runs[0].config.seed, 7u);
  EXPECT_EQ(s.runs[0].point.at("seed"), "7");
  EXPECT_TRUE(s.runs[0].run_id.starts_with("one-s7-"));
  EXPECT_TRUE(s.axes.empty());
}

TEST_F(SuiteTest, DedupeIdenticalConfigsKeepsDistinctOnes) {
  const Suite s = load(std::string("name: dd\n") + kBase + R"(
axes:
  protocol: [hardsync, softsync, nsync]
  n_sync: [1, 4]
  lr: [0.1, 0.10]
)");
  // lr 0.1 == 0.10; n_sync only matters for nsync: hardsync 1, softsync 1, nsync 2.
  ASSERT_EQ(s.runs.size(), 4u);
  EXPECT_EQ(s.runs[0].config.protocol, "hardsync");
  EXPECT_EQ(s.runs[1].config.protocol, "softsync");
  EXPECT_EQ(s.runs[2].config.n_sync, 1);
  EXPECT_EQ(s.runs[3].config.n_sync, 4);
  EXPECT_EQ(s.runs[3].point.at("n_sync"), "4");
}

TEST_F(SuiteTest, StableIds) {
  const std::string text = std::string("name: st\n") + kBase + R"(
axes:
  learners: [1, 2]
  protocol: [hardsync, softsync]
seeds: [1, 2]
)";
  const auto a = ids(load_suite(write("a.yaml", text), "results"));
  const auto b = ids(load_suite(write("b.yaml", text), "elsewhere"));
  EXPECT_EQ(a, b);
  std::string changed = text;
  changed.replace(changed.find("epochs: 1"), 9, "epochs: 1\n  lr: 0.05");
  const auto c = ids(load_suite(write("c.yaml", changed), "results"));
  ASSERT_EQ(a.size(), c.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NE(a[i], c[i]);
    EXPECT_EQ(a[i].substr(0, a[i].size() - 8), c[i].substr(0, c[i].size() - 8));
  }
  EXPECT_TRUE(id_is(a[0], "st-L1-hardsync-s1")) << a[0];
  EXPECT_TRUE(id_is(a[1], "st-L1-hardsync-s2")) << a[1];
  EXPECT_TRUE(id_is(a[7], "st-L2-softsync-s2")) << a[7];
}

TEST_F(SuiteTest, NAlias) {
  const Suite s = load(std::string("name: nal\n") + kBase + R"(
  learners: 4
  protocol: softsync
  n: 2
axes:
  n: [1, 4]
)");
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].config.softsync_n, 1);
  EXPECT_EQ(s.runs[1].config.softsync_n, 4);
  EXPECT_EQ(s.runs[1].point.at("softsync_n"), "4");
  EXPECT_NE(s.runs[1].run_id.find("-n4-"), std::string::npos);
  // Base alias alone.
  const Suite t = load(std::string("name: nal2\n") + kBase + "  learners: 4\n  protocol: softsync\n  n: 2\n");
  EXPECT_EQ(t.runs.at(0).config.softsync_n, 2);
}

// A virtual suite on a machine profile: `profile: FILE`, or the timing
// model as one mapping `timing: {profile: FILE, kind: K}`; a bad profile is
// refused at planning, naming the suite line and the profile's key.
TEST_F(SuiteTest, ProfileKeyAndTimingMapping) {
  const std::string prof = write("p.yaml", R"(name: p
compute:
  - device: cpu
    gflops: {value: 10, assumed: "t"}
    cv: {value: 0.1, assumed: "t"}
link:
  learner: {latency_s: {value: 1e-6, assumed: "t"}, bandwidth_Bps: {value: 1e+9, assumed: "t"}}
  server: {latency_s: {value: 1e-6, assumed: "t"}, bandwidth_Bps: {value: 1e+9, assumed: "t"}}
server:
  accumulate_s_per_param: {value: 1e-9, assumed: "t"}
  update_s_per_param: {value: 1e-9, assumed: "t"}
)");
  const Suite a = load("name: pa\nmode: virtual\n" + std::string(kBase) + "  learners: 2\n  profile: " + prof + "\n");
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].config.profile, prof);
  const Suite b = load("name: pb\nmode: virtual\n" + std::string(kBase) + "  learners: 2\n  timing: {profile: " + prof +
                       ", kind: fixed}\n");
  EXPECT_EQ(b.runs.at(0).config.profile, prof);
  EXPECT_EQ(b.runs.at(0).config.timing, "fixed");
  const std::string bad = load_error(write("bad.yaml", "name: pc\nmode: virtual\n" + std::string(kBase) +
                                                           "  learners: 2\n  timing: {profile: " + dir_.string() +
                                                           "/none.yaml, speed: 3}\n"));
  EXPECT_NE(bad.find("timing: unknown key 'speed' (profile, kind)"), std::string::npos) << bad;
  const std::string missing = load_error(write("missing.yaml", "name: pd\nmode: virtual\n" + std::string(kBase) +
                                                                   "  learners: 2\n  profile: " + dir_.string() +
                                                                   "/none.yaml\n"));
  EXPECT_NE(missing.find("none.yaml: cannot open profile file"), std::string::npos) << missing;
}

TEST_F(SuiteTest, DatasetStringAlias) {
  const fs::path data = dir_ / "idx";
  fs::create_directories(data);
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte"})
    std::ofstream(data / f) << "x";
  const Suite s = load(fmt::format(R"(
name: ds
base:
  dataset: {{kind: synthetic, dir: {}}}
axes:
  dataset: [mnist, fashion-mnist]
)",
                                   data.string()));
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].config.data.kind, "mnist");
  EXPECT_EQ(s.runs[0].config.data.dir, data.string());
  EXPECT_EQ(s.runs[1].config.data.kind, "fashion-mnist");
  EXPECT_EQ(s.runs[1].point.at("dataset"), "fashion-mnist");
  EXPECT_TRUE(s.runs[1].run_id.starts_with("ds-fashion-mnist-s1-"));

  // A base string alias: the default cifar10 folder (relative) is absent here.
  const std::string err = load_error(write("c.yaml", "name: c\nbase:\n  dataset: cifar10\n  model: cifar10-18pct\n"));
  EXPECT_NE(err.find("c.yaml:3: dataset cifar10: folder './data/cifar-10-batches-bin' does not exist"),
            std::string::npos)
      << err;
}

TEST_F(SuiteTest, QuotedValueIsText) {
  // a quoted scalar is text wherever a number or a boolean is expected; unquoted, the same loads
  const std::pair<const char*, const char*> cases[] = {
      {"resources: {servers: \"2\"}\n", "resources servers: expected an integer, got the text \"2\""},
      {"resources: {exclusive: 'true'}\n", "resources exclusive: expected true or false, got the text \"true\""},
      {"axes:\n  lr: [0.1, \"0.2\"]\n", "got the text \"0.2\""},
      {"seeds: [\"1\"]\n", "got the text \"1\""},
  };
  int k = 0;
  for (const auto& [extra, want] : cases) {
    const std::string err = load_error(write(fmt::format("q{}.yaml", k++), std::string("name: q\n") + kBase + extra));
    EXPECT_NE(err.find(want), std::string::npos) << extra << " -> " << err;
  }
  EXPECT_EQ(load_error(write("u.yaml", std::string("name: u\n") + kBase +
                                       "resources: {servers: 2, exclusive: true}\naxes:\n  lr: [0.1, 0.2]\nseeds: [1]\n")),
            "");
}

TEST_F(SuiteTest, ModeTargetErrorResources) {
  const Suite s = load(std::string("name: virt\nmode: virtual\ntarget_error: 0.25\n") + kBase + R"(
axes:
  learners: [1, 4]
resources:
  servers: 2
  gpus_per_learner: 1
  time_limit: "1-02:00:00"
)");
  EXPECT_EQ(s.mode, asgd::sweep::SuiteMode::virtual_learners);
  EXPECT_DOUBLE_EQ(s.target_error, 0.25);
  EXPECT_EQ(s.resources.servers, 2);
  ASSERT_EQ(s.runs.size(), 2u);
  for (const auto& r : s.runs) {
    EXPECT_TRUE(r.config.virtual_learners);
    EXPECT_DOUBLE_EQ(r.config.target_error, 0.25);
    EXPECT_EQ(r.config.servers, 2);
    EXPECT_EQ(r.ranks, 1);
    EXPECT_EQ(r.shape, "ranks1-gpu0-1-02:00:00");
  }
  EXPECT_EQ(group_by_shape(s).size(), 1u);
}

TEST_F(SuiteTest, GroupByShape) {
  // GPUs without device: cuda would run CPU learners on a GPU allocation.
  const std::string err = load_error(write("g.yaml", std::string("name: g\n") + kBase + R"(
resources:
  gpus_per_learner: 1
)"));
  EXPECT_NE(err.find("gpus_per_learner > 0 asks Slurm for GPUs, but device is cpu"), std::string::npos)
      << err;

  const Suite s = load(std::string("name: shapes\n") + kBase + R"(
axes:
  device: [cuda]
  learners: [1, 2, 4, 2]
  lr: [0.1, 0.2]
resources:
  gpus_per_learner: 1
  time_limit: "00:30:00"
)");
  // learners 2 twice: the second is the same run as the first (deduped).
  ASSERT_EQ(s.runs.size(), 6u);
  EXPECT_EQ(s.runs[0].ranks, 1);
  EXPECT_EQ(s.runs[0].shape, "ranks1-gpu1-00:30:00");
  EXPECT_EQ(s.runs[2].ranks, 3);
  EXPECT_EQ(s.runs[2].shape, "ranks3-gpu2-00:30:00");
  EXPECT_EQ(s.runs[4].shape, "ranks5-gpu4-00:30:00");
  const auto groups = group_by_shape(s);
  ASSERT_EQ(groups.size(), 3u);
  for (const auto& g : groups) {
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(g[0]->shape, g[1]->shape);
  }
  EXPECT_EQ(groups[0][0]->config.learners, 1);
  EXPECT_EQ(groups[1][0]->config.learners, 2);
  EXPECT_EQ(groups[2][0]->config.learners, 4);
}

TEST_F(SuiteTest, ErrorFormatCollectsEverything) {
  const std::string path = write("bad.yaml", R"(name: bad
base:
  lerners: 2
  batch: big
axes:
  lr: 0.1
)");
  const std::string err = load_error(path);
  EXPECT_TRUE(err.starts_with(path + ": 3 problems: ")) << err;
  EXPECT_NE(err.find(path + ":3: base: unknown config key 'lerners' (did you mean 'learners'?)"), std::string::npos) << err;
  EXPECT_NE(err.find(path + ":4: batch: expected an integer, got 'big'"), std::string::npos) << err;
  EXPECT_NE(err.find(path + ":6: axis 'lr': expected a list of values"), std::string::npos) << err;
}

TEST_F(SuiteTest, MissingFile) {
  EXPECT_THROW(load_suite((dir_ / "nope.yaml").string(), "results"), asgd::Error);
}

// Every file of tests/data/bad_suites must fail, with an error that starts
// with the file's path and holds every `# expect:` text. The corpus is exactly
// kBadSuites files, numbered 01..kBadSuites with no gap: a file that goes
// missing fails the test instead of shrinking it. (tests/cli/bad_suites.sh
// checks each through `asgd sweep plan`: exit 2.)
constexpr std::size_t kBadSuites = 35;
TEST(BadSuites, Corpus) {
  const fs::path dir = source_dir() / "tests" / "data" / "bad_suites";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), kBadSuites) << dir;
  for (std::size_t i = 0; i < files.size(); ++i)
    EXPECT_TRUE(files[i].filename().string().starts_with(fmt::format("{:02}_", i + 1))) << files[i];
  int with_three = 0;
  for (const auto& f : files) {
    std::vector<std::string> expects;
    std::istringstream lines(read(f));
    for (std::string line; std::getline(lines, line);)
      if (line.starts_with("# expect: ")) expects.push_back(line.substr(10));
    EXPECT_FALSE(expects.empty()) << f << ": no '# expect:' line";
    const std::string err = load_error(f.string());
    EXPECT_FALSE(err.empty()) << f << ": loaded without error";
    EXPECT_TRUE(err.starts_with(f.string() + ":")) << f.filename() << ": the error does not start with the file:\n  " << err;
    for (const auto& x : expects)
      EXPECT_NE(err.find(x), std::string::npos) << f.filename() << ": missing '" << x << "' in\n  " << err;
    if (expects.size() >= 3) ++with_three;
  }
  EXPECT_GE(with_three, 1);
}

// The quickstart suite shipped in suites/ loads. It names Debian's
// Fashion-MNIST, which the suite check requires on disk: without it this test
// cannot run, and says so as a skip (never a pass); with it, any error fails.
TEST(ShippedSuites, Quickstart) {
  const fs::path data = "/usr/share/datasets/fashion-mnist";  // data::default_dir("fashion-mnist")
  for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                        "t10k-labels-idx1-ubyte"})
    if (!fs::exists(data / f) && !fs::exists(data / (std::string(f) + ".gz")))
      GTEST_SKIP() << "cannot check suites/quickstart.yaml: " << (data / f).string()
                   << "[.gz] not present (apt-get install dataset-fashion-mnist)";
  const fs::path p = source_dir() / "suites" / "quickstart.yaml";
  const Suite s = load_suite(p.string(), "results");
  ASSERT_EQ(s.runs.size(), 4u);
  EXPECT_EQ(s.name, "quickstart");
  EXPECT_FALSE(s.description.empty());
  for (const auto& r : s.runs) {
    EXPECT_EQ(r.config.model, "lenet");
    EXPECT_EQ(r.config.data.kind, "fashion-mnist");
    EXPECT_DOUBLE_EQ(r.config.target_error, 0.2);
    std::cout << r.run_id << "  " << r.shape << "\n";
  }
  EXPECT_EQ(s.runs[0].ranks, 1);
  EXPECT_EQ(s.runs[1].ranks, 3);
  EXPECT_EQ(s.runs[2].config.protocol, "softsync");
  EXPECT_EQ(s.runs[2].config.softsync_n, 2);
  EXPECT_EQ(s.runs[3].config.protocol, "nsync");
  EXPECT_EQ(s.runs[3].config.n_sync, 4);
}

TEST_F(SuiteTest, TenThousandRuns) {
  std::string lrs, batches, seeds;
  for (int i = 0; i < 100; ++i) lrs += fmt::format("{}{}", i ? ", " : "", 0.001 * (i + 1));
  for (int i = 0; i < 10; ++i) batches += fmt::format("{}{}", i ? ", " : "", 16 * (i + 1));
  for (int i = 0; i < 10; ++i) seeds += fmt::format("{}{}", i ? ", " : "", i + 1);
  const std::string path = write("big.yaml", fmt::format(R"(
name: big
base: {{model: mlp, dataset: {{kind: synthetic}}, learners: 2, protocol: softsync, n: 2}}
axes:
  lr: [{}]
  batch: [{}]
seeds: [{}]
)",
                                                        lrs, batches, seeds));
  const auto t0 = std::chrono::steady_clock::now();
  const Suite s = load_suite(path, "results");
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("expanded and validated {} runs in {:.3f} s\n", s.runs.size(), sec);
  EXPECT_EQ(s.runs.size(), 10000u);
  const auto all = ids(s);
  const std::set<std::string> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), 10000u);
  // The time is printed, not asserted: timings on shared CI machines are noise.
}

// ------------------------------------------------------- bad input, counted and cut

// A product of long axes is counted (overflow-safe) before anything is
// expanded, and refused with the count, at once.
TEST_F(SuiteTest, HugeProductIsCountedNotExpanded) {
  auto axis = [](const char* key, int n, double first, double step) {
    std::string s = fmt::format("  {}: [", key);
    for (int i = 0; i < n; ++i) s += fmt::format("{}{}", i ? ", " : "", first + step * i);
    return s + "]\n";
  };
  std::string axes = "axes:\n" + axis("lr", 100, 0.001, 0.001) + axis("weight_decay", 100, 0, 1e-4) +
                     axis("lr_gamma", 100, 0.01, 0.01) + axis("eval_every", 100, 0.1, 0.1) +
                     axis("compute_cv", 100, 0, 0.01) + axis("straggler_factor", 100, 1, 0.1);
  const auto t0 = std::chrono::steady_clock::now();
  std::string err = load_error(write("huge.yaml", std::string("name: huge\n") + kBase + axes));
  EXPECT_NE(err.find("make 1000000000000 runs, more than the 1000000"), std::string::npos) << err;
  // 100^10 does not fit 64 bits
  axes += axis("momentum", 100, 0, 0.005) + axis("target_error", 100, 0, 0.005) +
          axis("comm_s", 100, 0, 0.1) + axis("compute_s", 100, 0, 0.1);
  err = load_error(write("huger.yaml", std::string("name: huger\n") + kBase + axes));
  EXPECT_NE(err.find("make more than 18446744073709551615 runs"), std::string::npos) << err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST_F(SuiteTest, NameIsOneSafePathComponent) {
  for (const char* name : {"..", ".", "'a/b'", "'x y'"}) {
    const std::string err = load_error(write("n.yaml", fmt::format("name: {}\n{}", name, kBase)));
    EXPECT_NE(err.find("n.yaml:1: name"), std::string::npos) << name << ": " << err;
  }
  // a 1 MB name: refused, and the message does not echo it whole
  const std::string err =
      load_error(write("long.yaml", "name: " + std::string(1 << 20, 'a') + "\n" + kBase));
  EXPECT_NE(err.find("is too long (1048576 characters, at most 128)"), std::string::npos) << err.substr(0, 300);
  EXPECT_LT(err.size(), 1000u);
}

TEST_F(SuiteTest, LongValuesAreCutInMessages) {
  const std::string err = load_error(write(
      "v.yaml", "name: v\nbase:\n  model: " + std::string(1 << 20, 'm') + "\n  " +
                    std::string(1000, 'k') + ": 1\n  dataset: {kind: synthetic}\n"));  // YAML keys: < 1024
  EXPECT_NE(err.find("model 'mmmm"), std::string::npos) << err.substr(0, 300);
  EXPECT_NE(err.find("unknown config key 'kkkk"), std::string::npos) << err.substr(0, 300);
  EXPECT_LT(err.size(), 1000u);
}

// ---------------------------------------------------------- configurations

namespace {

std::string config_error(const std::string& json_text) {
  try {
    (void)nlohmann::json::parse(json_text).get<asgd::TrainConfig>();
  } catch (const asgd::Error& e) {
    return e.what();
  }
  return "";
}

std::string problems_of(const asgd::TrainConfig& c) {
  std::string s;
  for (const auto& p : asgd::validate(c)) s += p + "; ";
  return s;
}

}  // namespace

TEST(Config, FromJsonIsStrict) {
  // round trip of everything to_json writes
  asgd::TrainConfig c;
  c.device = "cuda";
  c.lr_steps = {2, 4};
  EXPECT_EQ(config_error(nlohmann::json(c).dump()), "");
  EXPECT_EQ(config_error("{}"), "");
  EXPECT_EQ(config_error(R"({"batch": 1e2})"), "");  // a whole number written as a float
  EXPECT_EQ(config_error(R"({"lerners": 2})"), "unknown key 'lerners' (did you mean 'learners'?)");
  EXPECT_EQ(config_error(R"({"dataset": {"n_tset": 2}})"),
            "dataset: unknown key 'n_tset' (did you mean 'n_test'?)");
  EXPECT_NE(config_error(R"({"batch": "64"})").find("key 'batch': expected a whole number"), std::string::npos);
  EXPECT_NE(config_error(R"({"batch": 64.5})").find("key 'batch': expected a whole number"), std::string::npos);
  EXPECT_NE(config_error(R"({"learners": 10000000000})").find("key 'learners'"), std::string::npos);
  EXPECT_NE(config_error(R"({"seed": -1})").find("key 'seed': expected a whole number from 0"), std::string::npos);
  EXPECT_NE(config_error(R"({"lr": "fast"})").find("key 'lr': expected a number, got the text \"fast\""),
            std::string::npos);
  EXPECT_NE(config_error(R"({"virtual": 1})").find("key 'virtual': expected true or false"), std::string::npos);
  EXPECT_NE(config_error(R"({"dataset": {"shape": [28, 28]}})").find("dataset.shape"), std::string::npos);
  EXPECT_NE(config_error("[1, 2]").find("expected a JSON object of config keys, got a list"), std::string::npos);
  // every problem at once
  const std::string both = config_error(R"({"batch": 1.5, "lerners": 2})");
  EXPECT_NE(both.find("batch"), std::string::npos) << both;
  EXPECT_NE(both.find("lerners"), std::string::npos) << both;
}

TEST_F(SuiteTest, ConfigFileProblemsNameTheFile) {
  auto err = [](const std::string& path) -> std::string {
    try {
      asgd::load_config_file(path);
    } catch (const asgd::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(err((dir_ / "none.json").string()).find("none.json: cannot open config file"), std::string::npos);
  EXPECT_NE(err(dir_.string()).find(": is a folder, not a config file"), std::string::npos);
  EXPECT_NE(err(write("empty.json", "")).find("empty.json: config file is empty"), std::string::npos);
  EXPECT_NE(err(write("cut.json", R"({"batch": 6)")).find("cut.json: not valid JSON"), std::string::npos);
  EXPECT_NE(err(write("list.json", "[]")).find("list.json: expected a JSON object"), std::string::npos);
  EXPECT_NE(err(write("str.json", "\"lenet\"")).find("str.json: expected a JSON object"), std::string::npos);
  EXPECT_NE(err(write("key.json", R"({"epoch": 3})")).find("key.json: unknown key 'epoch' (did you mean 'epochs'?)"),
            std::string::npos);
  const std::string big = err(write("big.json", "{\"model\": 5, \"" + std::string(1 << 20, 'x') + "\": 1}"));
  EXPECT_NE(big.find("key 'model': expected a text value, got 5"), std::string::npos) << big.substr(0, 300);
  EXPECT_LT(big.size(), 1000u);
  EXPECT_EQ(err(write("ok.json", R"({"batch": 32, "model": "mlp"})")), "");
}

TEST(Config, ValidateRefusesNonFiniteAbsurdAndUnsafeValues) {
  auto with = [](auto set) {
    asgd::TrainConfig c;
    set(c);
    return problems_of(c);
  };
  EXPECT_EQ(with([](asgd::TrainConfig&) {}), "");
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_NE(with([&](asgd::TrainConfig& c) { c.epochs = inf; }).find("epochs inf must be a finite number"), std::string::npos);
  EXPECT_NE(with([&](asgd::TrainConfig& c) { c.epochs = nan; }).find("epochs nan"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.epochs = 1e300; }).find("epochs 1e+300 is beyond"), std::string::npos);
  EXPECT_NE(with([&](asgd::TrainConfig& c) { c.weight_decay = inf; }).find("weight decay inf"), std::string::npos);
  EXPECT_NE(with([&](asgd::TrainConfig& c) { c.momentum = nan; }).find("momentum nan"), std::string::npos);
  EXPECT_NE(with([&](asgd::TrainConfig& c) { c.diverge_loss = inf; }).find("diverge loss inf"), std::string::npos);
  EXPECT_NE(with([&](asgd::TrainConfig& c) { c.eval_every = nan; }).find("eval every nan"), std::string::npos);
  EXPECT_NE(with([&](asgd::TrainConfig& c) { c.lr_steps = {nan}; }).find("lr step nan"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.threads = 100000; }).find("threads 100000"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.suite = ".."; }).find("suite '..' is not a name"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.suite = ""; }).find("suite must not be empty"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.run_id = "."; }).find("run id '.' is not a name"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.run_id = "a/b"; }).find("run id 'a/b' may hold only"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.run_id = std::string(201, 'r'); }).find("at most 200"), std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) {
              c.data.kind = "synthetic";
              c.data.n_test = 0;
            }).find("--synthetic-test 0"),
            std::string::npos);
  EXPECT_NE(with([](asgd::TrainConfig& c) { c.model = std::string(1 << 20, 'x'); }).size(), 0u);
  EXPECT_LT(with([](asgd::TrainConfig& c) { c.model = std::string(1 << 20, 'x'); }).size(), 300u);
}

TEST(Config, HelpersCutNameAndSuggest) {
  EXPECT_EQ(asgd::shorten("abc"), "abc");
  EXPECT_EQ(asgd::shorten("a\nb"), "a\\nb");
  EXPECT_EQ(asgd::shorten(std::string(100, 'x'), 10), "xxxxxxxxxx... (100 characters)");
  // UTF-8 text is kept whole, a character at a time; bytes that are not text are escaped
  EXPECT_EQ(asgd::shorten("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(asgd::shorten("a\xff" "b"), "a\\xffb");
  EXPECT_EQ(asgd::shorten("\xc3"), "\\xc3");                // cut short
  EXPECT_EQ(asgd::shorten("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(asgd::shorten("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  std::string e_acute;
  for (int i = 0; i < 100; ++i) e_acute += "\xc3\xa9";
  EXPECT_EQ(asgd::shorten(e_acute, 3), "\xc3\xa9\xc3\xa9\xc3\xa9... (100 characters)");
  std::mt19937 gen(7);
  for (int k = 0; k < 2000; ++k) {  // whatever the bytes, the message is UTF-8
    std::string v(static_cast<std::size_t>(gen() % 80), '\0');
    for (char& c : v) c = static_cast<char>(gen() % 256);
    const std::string out = asgd::shorten(v, static_cast<std::size_t>(gen() % 70));
    ASSERT_TRUE(asgd::valid_utf8(out)) << k;
  }
  EXPECT_EQ(asgd::did_you_mean("lerners", {"learners", "lr"}), " (did you mean 'learners'?)");
  EXPECT_EQ(asgd::did_you_mean("zzzzzz", {"learners"}), "");
  EXPECT_EQ(asgd::name_problem("suite", "ok-name_1.2", 128), "");
  EXPECT_NE(asgd::name_problem("suite", "..", 128), "");
}

TEST(Config, SameRunIdWithAnotherConfigurationIsNotFinished) {
  asgd::TrainConfig c;
  c.run_id = "r";
  const std::string stored = nlohmann::json(c).dump();
  asgd::check_same_config(c, stored, "runs/r.h5");  // the same run
  asgd::TrainConfig other = c;
  other.threads = 2;  // not part of the numerics: the same run
  other.results_dir = "elsewhere";
  asgd::check_same_config(other, stored, "runs/r.h5");
  other.lr = 0.5;
  try {
    asgd::check_same_config(other, stored, "runs/r.h5");
    ADD_FAILURE() << "another lr was taken for the finished run";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs/r.h5: run r already finished with another configuration"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(asgd::check_same_config(c, "not json", "runs/r.h5"), asgd::Error);
}

TEST(Config, MemoryIsEstimatedBeforeAllocatingAndNamesTheFlag) {
  asgd::TrainConfig c;
  c.model = "mlp";
  c.data.kind = "synthetic";
  c.data.h = c.data.w = 8;
  c.data.n_train = 256;
  c.data.n_test = 64;
  c.batch = 16;
  asgd::check_resources(c);  // small: fits
  const auto small = asgd::estimate_memory(c);
  EXPECT_GT(small.model, 0);
  EXPECT_GT(small.data, 256 * 64 * 4);
  auto err = [](const asgd::TrainConfig& x) -> std::string {
    try {
      asgd::check_resources(x);
    } catch (const asgd::Error& e) {
      return e.what();
    }
    return "";
  };
  asgd::TrainConfig b = c;
  b.data.n_train = 1000000;
  b.batch = 99999999999;
  EXPECT_TRUE(err(b).starts_with("--synthetic-train 1000000 has fewer samples than one round"));
  b.data.n_train = 100000000000;  // 10^11 samples of 8x8
  EXPECT_TRUE(err(b).starts_with("--synthetic-train 100000000000: the run would need")) << err(b);
  b.data.n_train = 100000000000;
  b.data.h = b.data.w = 2;
  b.model = "mlp";
  b.batch = 99999999999;
  b.data.n_train = 999999999999;
  const std::string batch_err = err(b);
  EXPECT_TRUE(batch_err.find("the run would need") != std::string::npos) << batch_err;
  asgd::TrainConfig s = c;
  s.data.h = s.data.w = 100000;
  EXPECT_TRUE(err(s).starts_with("--synthetic-size 100000: the run would need about")) << err(s);
  asgd::TrainConfig v = c;
  v.virtual_learners = true;
  v.learners = 65536;
  v.model = "lenet";
  v.data.h = v.data.w = 28;
  v.data.n_train = 65536 * 16;
  EXPECT_TRUE(err(v).starts_with("--learners 65536: the run would need")) << err(v);
}
