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
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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

TEST_F(SuiteTest, ModeTargetErrorResources) {
  const Suite s = load(std::string("name: virt\nmode: virtual\ntarget_error: 0.25\n") + kBase + R"(
axes:
  learners: [1, 8]
resources:
  servers: 2
  gpus_per_learner: 1
  time_limit: "1-02:00:00"
)");
  EXPECT_EQ(s.mode, "virtual");
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

// Every file of tests/data/bad_suites must fail with every `# expect:` text.
TEST(BadSuites, Corpus) {
  const fs::path dir = source_dir() / "tests" / "data" / "bad_suites";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 15u);
  int with_three = 0;
  for (const auto& f : files) {
    std::vector<std::string> expects;
    std::istringstream lines(read(f));
    for (std::string line; std::getline(lines, line);)
      if (line.starts_with("# expect: ")) expects.push_back(line.substr(10));
    EXPECT_FALSE(expects.empty()) << f << ": no '# expect:' line";
    const std::string err = load_error(f.string());
    EXPECT_FALSE(err.empty()) << f << ": loaded without error";
    for (const auto& x : expects)
      EXPECT_NE(err.find(x), std::string::npos) << f.filename() << ": missing '" << x << "' in\n  " << err;
    if (expects.size() >= 3) ++with_three;
  }
  EXPECT_GE(with_three, 1);
}

// The suites shipped in suites/ load (their datasets permitting).
TEST(ShippedSuites, Quickstart) {
  const fs::path p = source_dir() / "suites" / "quickstart.yaml";
  std::string err;
  try {
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
  } catch (const asgd::Error& e) {
    // Only an absent dataset is acceptable (machines without Fashion-MNIST).
    err = e.what();
    EXPECT_NE(err.find("dataset fashion-mnist"), std::string::npos) << err;
    EXPECT_EQ(err.find("problems:"), std::string::npos) << err;
  }
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
