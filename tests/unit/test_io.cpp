#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/files.hpp"
#include "io/results.hpp"

namespace fs = std::filesystem;
using asgd::io::Checkpoint;
using asgd::io::RunResult;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Runs fn and returns the asgd::Error message; fails the test if none is thrown.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const asgd::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected asgd::Error";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Equal, or both NaN.
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

RunResult sample_result() {
  RunResult r;
  r.run_id = "run-0042";
  r.suite = "smoke";
  // Larger than HDF5's 64 KiB compact-attribute limit, with quotes and UTF-8.
  r.config_json = R"({"model":"lenet","note":"µ-batch \"quoted\"","pad":")" + std::string(70000, 'x') + "\"}";
  r.git_commit = "0123456789abcdef";
  r.host = "node017";
  r.mpi_version = "Open MPI v4.1.4";
  r.kokkos_version = "4.0.1";
  r.hdf5_version = "ignored: the writer fills this";
  r.slurm_job_id = "123";
  r.slurm_array_job_id = "";
  r.slurm_array_task_id = "7";
  r.mode = asgd::RunMode::virtual_learners;
  r.status = asgd::RunStatus::diverged;
  r.model = "lenet";
  r.protocol = "async";
  r.timing_model_json = R"({"compute_s":0.01})";
  r.updates = {
      {1, 0.5, 4, 1.25, 0.1, 2.3, 0.9, 512},
      {2, 1.0, 3, kNaN, 0.05, kNaN, 0.8, 384},
      {3, 1.5, 4, 0.0, 0.025, std::numeric_limits<double>::infinity(), 1.0, 512},
  };
  r.evals = {
      {0.5, 2, 1.0, 1.9, 0.6, 0.25},
      {1.0, 3, 1.5, kNaN, 0.55, 0.2},
  };
  r.staleness_histogram = {10, 0, 3, 1};
  r.learners = {
      {0, 1.5, 0.25, 0.125, 0.0625, 6, 768},
      {1, 1.4, 0.3, 0.1, 0.07, 5, 640},
  };
  r.summary.target_error = 0.1;
  r.summary.time_to_target_s = kNaN;
  r.summary.final_test_error = 0.55;
  r.summary.best_test_error = 0.55;
  r.summary.samples_per_s = 1024.5;
  r.summary.updates = 3;
  r.summary.epochs = 1.0;
  r.summary.train_time_s = 1.5;
  return r;
}

Checkpoint sample_checkpoint() {
  Checkpoint c;
  c.run_id = "run-0042";
  c.model = "lenet";
  c.config_hash = "sha256:abcdef";
  c.n_params = 1000;
  c.shard_index = 1;
  c.shard_count = 4;
  c.shard_offset = 250;
  c.clock = 77;
  c.schedule_step = 70;
  c.epochs = 2.5;
  c.wall_s = 12.75;
  for (int i = 0; i < 250; ++i) {
    c.weights.push_back(0.001f * static_cast<float>(i) - 0.1f);
    c.momentum.push_back(-0.0005f * static_cast<float>(i));
  }
  c.weights[3] = std::numeric_limits<float>::quiet_NaN();
  c.cursors = {{2, 17}, {2, 19}, {3, 0}};
  c.rng_state = {0x0123456789abcdefULL, 0xfedcba9876543210ULL, 0, std::numeric_limits<std::uint64_t>::max()};
  c.progress = sample_result();
  return c;
}

void expect_same(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(a.schema_version, b.schema_version);
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.suite, b.suite);
  EXPECT_EQ(a.config_json, b.config_json);
  EXPECT_EQ(a.git_commit, b.git_commit);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.mpi_version, b.mpi_version);
  EXPECT_EQ(a.kokkos_version, b.kokkos_version);
  EXPECT_EQ(a.slurm_job_id, b.slurm_job_id);
  EXPECT_EQ(a.slurm_array_job_id, b.slurm_array_job_id);
  EXPECT_EQ(a.slurm_array_task_id, b.slurm_array_task_id);
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.protocol, b.protocol);
  EXPECT_EQ(a.timing_model_json, b.timing_model_json);

  ASSERT_EQ(a.updates.size(), b.updates.size());
  for (std::size_t i = 0; i < a.updates.size(); ++i) {
    SCOPED_TRACE("update " + std::to_string(i));
    const auto &x = a.updates[i], &y = b.updates[i];
    EXPECT_EQ(x.clock, y.clock);
    EXPECT_TRUE(same(x.wall_s, y.wall_s));
    EXPECT_EQ(x.gradients, y.gradients);
    EXPECT_TRUE(same(x.mean_tau, y.mean_tau));
    EXPECT_TRUE(same(x.rate, y.rate));
    EXPECT_TRUE(same(x.train_loss, y.train_loss));
    EXPECT_TRUE(same(x.train_error, y.train_error));
    EXPECT_EQ(x.samples, y.samples);
  }
  ASSERT_EQ(a.evals.size(), b.evals.size());
  for (std::size_t i = 0; i < a.evals.size(); ++i) {
    SCOPED_TRACE("eval " + std::to_string(i));
    const auto &x = a.evals[i], &y = b.evals[i];
    EXPECT_TRUE(same(x.epoch, y.epoch));
    EXPECT_EQ(x.clock, y.clock);
    EXPECT_TRUE(same(x.wall_s, y.wall_s));
    EXPECT_TRUE(same(x.test_loss, y.test_loss));
    EXPECT_TRUE(same(x.test_error, y.test_error));
    EXPECT_TRUE(same(x.eval_s, y.eval_s));
  }
  EXPECT_EQ(a.staleness_histogram, b.staleness_histogram);
  ASSERT_EQ(a.learners.size(), b.learners.size());
  for (std::size_t i = 0; i < a.learners.size(); ++i) {
    SCOPED_TRACE("learner " + std::to_string(i));
    const auto &x = a.learners[i], &y = b.learners[i];
    EXPECT_EQ(x.learner, y.learner);
    EXPECT_TRUE(same(x.compute_s, y.compute_s));
    EXPECT_TRUE(same(x.wait_s, y.wait_s));
    EXPECT_TRUE(same(x.push_s, y.push_s));
    EXPECT_TRUE(same(x.pull_s, y.pull_s));
    EXPECT_EQ(x.gradients, y.gradients);
    EXPECT_EQ(x.samples, y.samples);
  }
  EXPECT_TRUE(same(a.summary.target_error, b.summary.target_error));
  EXPECT_TRUE(same(a.summary.time_to_target_s, b.summary.time_to_target_s));
  EXPECT_TRUE(same(a.summary.final_test_error, b.summary.final_test_error));
  EXPECT_TRUE(same(a.summary.best_test_error, b.summary.best_test_error));
  EXPECT_TRUE(same(a.summary.samples_per_s, b.summary.samples_per_s));
  EXPECT_EQ(a.summary.updates, b.summary.updates);
  EXPECT_TRUE(same(a.summary.epochs, b.summary.epochs));
  EXPECT_TRUE(same(a.summary.train_time_s, b.summary.train_time_s));
}

// Bitwise, so NaN payloads and -0.0 count too.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("asgd_test_io_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Names in dir_ that look like abandoned temp files.
  std::vector<std::string> temp_leftovers() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (contains(name, ".tmp.")) found.push_back(name);
    }
    return found;
  }

  fs::path dir_;
};

// write_file_atomic writes through a symbolic link (the link stays) and never
// replaces what is not a regular file (`calibrate -o /dev/null` once made
// /dev/null a plain file); check_writable says the same before any work.
TEST_F(IoTest, AtomicWritesKeepLinksAndRefuseSpecialFiles) {
  std::ofstream(path("target.yaml")) << "old";
  fs::create_symlink("target.yaml", path("link.yaml"));
  asgd::write_file_atomic(path("link.yaml"), "new");
  EXPECT_TRUE(fs::is_symlink(path("link.yaml")));
  std::ifstream in(path("target.yaml"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "new");

  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  for (const std::string& special : {path("fifo"), dir_.string()}) {
    try {
      asgd::check_writable(special);
      ADD_FAILURE() << special;
    } catch (const asgd::Error& e) {
      EXPECT_TRUE(contains(e.what(), "is not a regular file")) << e.what();
    }
    EXPECT_THROW(asgd::write_file_atomic(special, "x"), asgd::Error);
  }
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  EXPECT_THROW(asgd::check_writable("/proc/asgd-test.yaml"), asgd::Error);  // no temporary file there
  EXPECT_TRUE(temp_leftovers().empty());
}

TEST_F(IoTest, ResultsRoundTripKeepsEveryFieldAndNaN) {
  const RunResult written = sample_result();
  asgd::io::write_results(path("r.h5"), written);
  const RunResult read = asgd::io::read_results(path("r.h5"));
  expect_same(written, read);
  EXPECT_EQ(read.hdf5_version, asgd::io::hdf5_version());
  EXPECT_TRUE(std::isnan(read.updates[1].train_loss));
  EXPECT_TRUE(std::isinf(read.updates[2].train_loss));
  EXPECT_TRUE(std::isnan(read.summary.time_to_target_s));
  EXPECT_TRUE(temp_leftovers().empty());
}

TEST_F(IoTest, Hdf5VersionLooksLikeARelease) {
  // Three dot-separated numbers; std::regex trips GCC 12 warnings under sanitizers.
  const std::string v = asgd::io::hdf5_version();
  int parts = 1;
  bool digit_before = false, ok = true;
  for (char ch : v) {
    if (ch == '.') {
      ok = ok && digit_before;
      digit_before = false;
      ++parts;
    } else {
      ok = ok && ch >= '0' && ch <= '9';
      digit_before = true;
    }
  }
  EXPECT_TRUE(ok && digit_before && parts == 3) << v;
}

TEST_F(IoTest, ZeroLengthSeriesRoundTrip) {
  RunResult written;  // every series empty, summary NaNs
  written.run_id = "empty";
  written.config_json = "{}";  // a results file's config is a JSON object
  asgd::io::write_results(path("empty.h5"), written);
  const RunResult read = asgd::io::read_results(path("empty.h5"));
  expect_same(written, read);
  EXPECT_TRUE(read.updates.empty());
  EXPECT_TRUE(read.evals.empty());
  EXPECT_TRUE(read.staleness_histogram.empty());
  EXPECT_TRUE(read.learners.empty());
  EXPECT_TRUE(std::isnan(read.summary.best_test_error));
}

TEST_F(IoTest, OverwriteReplacesTheFile) {
  RunResult first = sample_result();
  asgd::io::write_results(path("r.h5"), first);
  RunResult second = sample_result();
  second.run_id = "second";
  second.updates.resize(1);
  asgd::io::write_results(path("r.h5"), second);
  const RunResult read = asgd::io::read_results(path("r.h5"));
  EXPECT_EQ(read.run_id, "second");
  EXPECT_EQ(read.updates.size(), 1u);
  EXPECT_TRUE(temp_leftovers().empty());
}

TEST_F(IoTest, CheckpointRoundTrip) {
  const Checkpoint written = sample_checkpoint();
  asgd::io::write_checkpoint(path("c.h5"), written);
  const Checkpoint read = asgd::io::read_checkpoint(path("c.h5"));
  EXPECT_EQ(read.schema_version, written.schema_version);
  EXPECT_EQ(read.run_id, written.run_id);
  EXPECT_EQ(read.model, written.model);
  EXPECT_EQ(read.config_hash, written.config_hash);
  EXPECT_EQ(read.n_params, written.n_params);
  EXPECT_EQ(read.shard_index, written.shard_index);
  EXPECT_EQ(read.shard_count, written.shard_count);
  EXPECT_EQ(read.shard_offset, written.shard_offset);
  EXPECT_EQ(read.clock, written.clock);
  EXPECT_EQ(read.schedule_step, written.schedule_step);
  EXPECT_EQ(read.epochs, written.epochs);
  EXPECT_EQ(read.wall_s, written.wall_s);
  EXPECT_TRUE(same_bits(read.weights, written.weights));
  EXPECT_TRUE(same_bits(read.momentum, written.momentum));
  ASSERT_EQ(read.cursors.size(), written.cursors.size());
  for (std::size_t i = 0; i < read.cursors.size(); ++i) {
    EXPECT_EQ(read.cursors[i].epoch, written.cursors[i].epoch);
    EXPECT_EQ(read.cursors[i].batch, written.cursors[i].batch);
  }
  EXPECT_EQ(read.rng_state, written.rng_state);
  expect_same(written.progress, read.progress);
}

TEST_F(IoTest, EmptyCheckpointRoundTrip) {
  Checkpoint written;  // no parameters, learners or RNG words
  asgd::io::write_checkpoint(path("c.h5"), written);
  const Checkpoint read = asgd::io::read_checkpoint(path("c.h5"));
  EXPECT_TRUE(read.weights.empty());
  EXPECT_TRUE(read.momentum.empty());
  EXPECT_TRUE(read.cursors.empty());
  EXPECT_TRUE(read.rng_state.empty());
  expect_same(written.progress, read.progress);
}

TEST_F(IoTest, MissingFolderIsAClearErrorAndLeavesOtherFilesAlone) {
  asgd::io::write_results(path("r.h5"), sample_result());
  const std::string before = read_bytes(path("r.h5"));
  const std::string target = path("no/such/folder/r.h5");
  const std::string msg = error_of([&] { asgd::io::write_results(target, sample_result()); });
  EXPECT_TRUE(contains(msg, target)) << msg;
  EXPECT_TRUE(contains(msg, "cannot create")) << msg;
  EXPECT_TRUE(contains(msg, "No such file or directory")) << msg;
  EXPECT_EQ(read_bytes(path("r.h5")), before);
  EXPECT_FALSE(fs::exists(path("no")));
}

TEST_F(IoTest, TargetThatIsADirectoryFailsAndLeavesNoTempFile) {
  fs::create_directory(path("taken"));
  write_bytes(path("taken") + "/inside", "keep me");
  const std::string msg = error_of([&] { asgd::io::write_results(path("taken"), sample_result()); });
  EXPECT_TRUE(contains(msg, path("taken") + ": is a directory")) << msg;
  EXPECT_TRUE(fs::is_directory(path("taken")));
  EXPECT_EQ(read_bytes(path("taken") + "/inside"), "keep me");
  EXPECT_TRUE(temp_leftovers().empty());
}

TEST_F(IoTest, BlockedTempFileKeepsExistingFileByteIdentical) {
  asgd::io::write_results(path("r.h5"), sample_result());
  const std::string before = read_bytes(path("r.h5"));
  // A directory where the temp file would go makes the write fail up front.
  const std::string tmp = path("r.h5") + ".tmp." + std::to_string(::getpid());
  fs::create_directory(tmp);
  RunResult other = sample_result();
  other.run_id = "other";
  const std::string msg = error_of([&] { asgd::io::write_results(path("r.h5"), other); });
  EXPECT_TRUE(contains(msg, path("r.h5"))) << msg;
  EXPECT_EQ(read_bytes(path("r.h5")), before);
  EXPECT_EQ(asgd::io::read_results(path("r.h5")).run_id, "run-0042");
  EXPECT_TRUE(fs::is_directory(tmp)) << "the writer removed something it did not create";
}

TEST_F(IoTest, FailureMidWriteKeepsExistingCheckpointAndRemovesTemp) {
  asgd::io::write_checkpoint(path("c.h5"), sample_checkpoint());
  const std::string before = read_bytes(path("c.h5"));
  Checkpoint bad = sample_checkpoint();
  bad.momentum.pop_back();
  const std::string msg = error_of([&] { asgd::io::write_checkpoint(path("c.h5"), bad); });
  EXPECT_TRUE(contains(msg, path("c.h5"))) << msg;
  EXPECT_TRUE(contains(msg, "momentum")) << msg;
  EXPECT_EQ(read_bytes(path("c.h5")), before);
  EXPECT_TRUE(temp_leftovers().empty());
}

TEST_F(IoTest, CheckpointShardOutsideModelIsRefused) {
  Checkpoint bad = sample_checkpoint();
  bad.shard_offset = 900;  // 900 + 250 > n_params 1000
  const std::string msg = error_of([&] { asgd::io::write_checkpoint(path("c.h5"), bad); });
  EXPECT_TRUE(contains(msg, "n_params")) << msg;
  EXPECT_FALSE(fs::exists(path("c.h5")));
  EXPECT_TRUE(temp_leftovers().empty());
}

TEST_F(IoTest, TruncatedFilesThrowNamingThePath) {
  asgd::io::write_results(path("r.h5"), sample_result());
  asgd::io::write_checkpoint(path("c.h5"), sample_checkpoint());
  for (const std::string name : {"r.h5", "c.h5"}) {
    const std::string bytes = read_bytes(path(name));
    ASSERT_GT(bytes.size(), 1000u);
    const std::string cut = path("cut_" + name);
    write_bytes(cut, bytes.substr(0, bytes.size() / 2));
    const std::string msg_r = error_of([&] { asgd::io::read_results(cut); });
    EXPECT_TRUE(contains(msg_r, cut)) << msg_r;
    const std::string msg_c = error_of([&] { asgd::io::read_checkpoint(cut); });
    EXPECT_TRUE(contains(msg_c, cut)) << msg_c;
  }
}

TEST_F(IoTest, RandomBytesAreNotHdf5) {
  std::mt19937 gen(12345);
  std::string bytes(4096, '\0');
  for (char& b : bytes) b = static_cast<char>(gen() & 0xff);
  write_bytes(path("noise.h5"), bytes);
  const std::string msg = error_of([&] { asgd::io::read_results(path("noise.h5")); });
  EXPECT_TRUE(contains(msg, path("noise.h5") + ": not a readable HDF5 file")) << msg;
  const std::string msg_c = error_of([&] { asgd::io::read_checkpoint(path("noise.h5")); });
  EXPECT_TRUE(contains(msg_c, path("noise.h5") + ": not a readable HDF5 file")) << msg_c;
}

// Found by fuzz_checkpoint (tests/fuzz; tests/data/fuzz/README.md): a dataset
// whose extent claims more values than the file holds made the reader
// allocate the claimed length first (std::bad_alloc, exit 1). Both files are
// refused, naming the dataset, before anything is allocated for it: one
// contiguous dataset without storage, one chunked with nothing stored.
TEST_F(IoTest, DatasetClaimingMoreThanTheFileHoldsIsRefused) {
  const char* src = std::getenv("ASGD_SOURCE_DIR");
  const fs::path root = src ? fs::path(src) : fs::absolute(fs::path(__FILE__)).parent_path().parent_path().parent_path();
  const fs::path data = root / "tests/data/fuzz";
  const std::string results = (data / "results_clock_claims_2e33.h5").string();
  const std::string checkpoint = (data / "checkpoint_weights_claims_2e31.h5").string();
  ASSERT_TRUE(fs::exists(results) && fs::exists(checkpoint)) << data;
  const std::string r = error_of([&] { asgd::io::read_results(results); });
  EXPECT_TRUE(contains(r, "dataset /updates/clock declares 8589934592 values of 8 bytes, more than the file's"))
      << r;
  const std::string c = error_of([&] { asgd::io::read_checkpoint(checkpoint); });
  EXPECT_TRUE(contains(c, "dataset /weights declares 2147483648 values of 4 bytes")) << c;
}

TEST_F(IoTest, EmptyAndMissingFilesThrow) {
  write_bytes(path("empty.h5"), "");
  const std::string msg = error_of([&] { asgd::io::read_results(path("empty.h5")); });
  EXPECT_TRUE(contains(msg, path("empty.h5") + ": not a readable HDF5 file")) << msg;
  const std::string missing = error_of([&] { asgd::io::read_results(path("absent.h5")); });
  EXPECT_TRUE(contains(missing, path("absent.h5"))) << missing;
  EXPECT_TRUE(contains(missing, "No such file or directory")) << missing;
}

TEST_F(IoTest, WrongKindOfFileIsNamed) {
  asgd::io::write_results(path("r.h5"), sample_result());
  asgd::io::write_checkpoint(path("c.h5"), sample_checkpoint());
  const std::string as_checkpoint = error_of([&] { asgd::io::read_checkpoint(path("r.h5")); });
  EXPECT_TRUE(contains(as_checkpoint, path("r.h5") + ": not an asgd checkpoint")) << as_checkpoint;
  const std::string as_results = error_of([&] { asgd::io::read_results(path("c.h5")); });
  EXPECT_TRUE(contains(as_results, path("c.h5") + ": is an asgd checkpoint")) << as_results;
}

TEST_F(IoTest, NewerSchemaVersionIsRefused) {
  RunResult r = sample_result();
  r.schema_version = 7;
  asgd::io::write_results(path("r7.h5"), r);
  const std::string msg = error_of([&] { asgd::io::read_results(path("r7.h5")); });
  EXPECT_TRUE(contains(msg, path("r7.h5") + ": schema version 7 is newer than this build (1)")) << msg;

  Checkpoint c = sample_checkpoint();
  c.schema_version = 7;
  asgd::io::write_checkpoint(path("c7.h5"), c);
  const std::string msg_c = error_of([&] { asgd::io::read_checkpoint(path("c7.h5")); });
  EXPECT_TRUE(contains(msg_c, "schema version 7 is newer than this build (2)")) << msg_c;

  // Version 1 stored dense weights [inputs, outputs]: refused, not misread.
  Checkpoint old = sample_checkpoint();
  old.schema_version = 1;
  asgd::io::write_checkpoint(path("c1.h5"), old);
  const std::string msg_old = error_of([&] { asgd::io::read_checkpoint(path("c1.h5")); });
  EXPECT_TRUE(contains(msg_old, "checkpoint schema version 1 stores dense weights [inputs, outputs]"))
      << msg_old;

  Checkpoint p = sample_checkpoint();
  p.progress.schema_version = 9;
  asgd::io::write_checkpoint(path("p9.h5"), p);
  const std::string msg_p = error_of([&] { asgd::io::read_checkpoint(path("p9.h5")); });
  EXPECT_TRUE(contains(msg_p, "/progress: schema version 9 is newer")) << msg_p;
}

}  // namespace

// ------------------------------------------------ values outside their domain

namespace {

// A valid result of a 2-epoch run; each test breaks one value.
RunResult domain_result() {
  RunResult r = sample_result();
  r.config_json = R"({"model":"lenet","epochs":2,"n_sync":1,"max_steps":0})";
  return r;
}

}  // namespace

// Status and mode are enums in the code and words in the file: every value
// reads back as itself, and no other word reads (an "exploded" status in a
// file is refused by the reader: tests/cli/bad_inputs.sh edits one in).
TEST(RunStatusText, EveryValueReadsBackAndNoOtherWordDoes) {
  for (auto s : {asgd::RunStatus::completed, asgd::RunStatus::diverged, asgd::RunStatus::failed})
    EXPECT_EQ(asgd::parse_run_status(asgd::to_text(s)), s);
  for (auto m : {asgd::RunMode::real, asgd::RunMode::virtual_learners}) EXPECT_EQ(asgd::parse_run_mode(asgd::to_text(m)), m);
  EXPECT_EQ(asgd::to_text(asgd::RunMode::virtual_learners), "virtual");
  for (const char* w : {"exploded", "", "Completed", "completed ", "virtual_learners"}) {
    EXPECT_FALSE(asgd::parse_run_status(w)) << w;
    EXPECT_FALSE(asgd::parse_run_mode(w)) << w;
  }
}

TEST_F(IoTest, ResultsOutsideTheirDomainAreRefusedByTheReader) {
  EXPECT_TRUE(asgd::io::result_problems(domain_result()).empty());
  struct Case {
    const char* name;
    void (*breaks)(RunResult&);
    const char* expect;
  };
  const Case cases[] = {
      {"config", [](RunResult& r) { r.config_json = "not json {"; }, "config is not a JSON object"},
      {"config array", [](RunResult& r) { r.config_json = "[1, 2]"; }, "config is not a JSON object"},
      {"config nested too deep",
       [](RunResult& r) { r.config_json = "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}"; },
       "config: nested deeper than 64 levels (line 1)"},
      {"timing", [](RunResult& r) { r.timing_model_json = ""; }, "timing_model is not a JSON object"},
      {"run id", [](RunResult& r) { r.run_id = "../x"; }, "run_id \"../x\" is not a file name"},
      {"epochs", [](RunResult& r) { r.summary.epochs = 62e9; }, "/summary epochs 6.2e+10 is beyond the configured run"},
      {"epochs nan", [](RunResult& r) { r.summary.epochs = kNaN; }, "/summary epochs nan"},
      {"updates", [](RunResult& r) { r.summary.updates = -3; }, "/summary updates -3 is negative"},
      {"time", [](RunResult& r) { r.summary.train_time_s = std::numeric_limits<double>::infinity(); }, "train_time_s inf is not a time"},
      {"error", [](RunResult& r) { r.summary.final_test_error = 1.5; }, "final_test_error 1.5 is not in [0, 1]"},
      {"samples", [](RunResult& r) { r.updates[1].samples = -1; }, "/updates/samples row 1: -1 is negative"},
      {"clock", [](RunResult& r) { r.updates[2].clock = 0; }, "/updates/clock row 2"},
      {"eval error", [](RunResult& r) { r.evals[0].test_error = -0.5; }, "/evals/test_error row 0"},
      {"histogram", [](RunResult& r) { r.staleness_histogram[1] = -7; }, "/staleness/histogram row 1: -7"},
      {"learner time", [](RunResult& r) { r.learners[0].wait_s = -1; }, "/learners/times row 0"},
      {"max steps", [](RunResult& r) { r.config_json = R"({"epochs":2,"max_steps":2})"; }, "beyond the configured max_steps 2"},
      // a newline in the run id, counts that wrap in a report, evals out of order
      {"run id newline", [](RunResult& r) { r.run_id = "a\nb"; }, "is not a file name"},
      {"learners", [](RunResult& r) { r.config_json = R"({"epochs":2,"learners":1000000000000})"; },
       "config learners 1000000000000 is not a whole number in 1..65536"},
      {"learners 0", [](RunResult& r) { r.config_json = R"({"epochs":2,"learners":0})"; }, "config learners 0"},
      {"learners text", [](RunResult& r) { r.config_json = R"({"epochs":2,"learners":"two"})"; }, "config learners \"two\""},
      {"batch", [](RunResult& r) { r.config_json = R"({"epochs":2,"batch":0})"; }, "config batch 0 is not a whole number"},
      {"eval clock", [](RunResult& r) { r.evals[1].clock = 1; }, "/evals/clock row 1: 1 is negative or goes backwards"},
  };
  for (const auto& c : cases) {
    RunResult r = domain_result();
    c.breaks(r);
    asgd::io::write_results(path("bad.h5"), r);  // the writer stores what it is given
    const std::string err = error_of([&] { asgd::io::read_results(path("bad.h5")); });
    EXPECT_TRUE(contains(err, path("bad.h5") + ": ")) << c.name << ": " << err;
    EXPECT_TRUE(contains(err, c.expect)) << c.name << ": " << err;
  }
}

TEST_F(IoTest, OneShardCheckpointWithTheWrongWeightCountIsRefused) {
  Checkpoint c = sample_checkpoint();
  c.shard_index = 0;
  c.shard_count = 1;
  c.shard_offset = 0;  // 250 weights, but n_params says 1000
  EXPECT_TRUE(contains(error_of([&] { asgd::io::write_checkpoint(path("c.h5"), c); }),
                       "holds 250 weights, but its one shard should hold all 1000 parameters"));
}

TEST_F(IoTest, CheckpointClockOrEpochsOutOfRangeAreRefused) {
  Checkpoint c = sample_checkpoint();
  c.epochs = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(contains(error_of([&] { asgd::io::write_checkpoint(path("c.h5"), c); }), "epochs inf"));
  c = sample_checkpoint();
  c.clock = -1;
  EXPECT_TRUE(contains(error_of([&] { asgd::io::write_checkpoint(path("c.h5"), c); }), "clock -1"));
  c = sample_checkpoint();
  c.cursors[1].batch = -4;
  EXPECT_TRUE(contains(error_of([&] { asgd::io::write_checkpoint(path("c.h5"), c); }), "learner 1's data cursor"));
  // past the end of the run whose config the checkpoint carries
  c = sample_checkpoint();
  c.progress.config_json = R"({"epochs":1,"n_sync":1})";
  c.epochs = 62e9;
  EXPECT_TRUE(contains(error_of([&] { asgd::io::write_checkpoint(path("c.h5"), c); }),
                       "epochs 6.2e+10 lies past the run's end"));
  c.epochs = 1.5;
  c.progress.config_json = R"({"epochs":1,"max_steps":10})";
  EXPECT_TRUE(contains(error_of([&] { asgd::io::write_checkpoint(path("c.h5"), c); }),
                       "clock 77 lies past the run's end (max_steps 10)"));
}

TEST_F(IoTest, CheckCheckpointNamesTheFileAndTheMismatch) {
  const Checkpoint c = sample_checkpoint();
  asgd::io::CheckpointExpect want;
  want.model = "lenet";
  want.n_params = 1000;
  want.shard_count = 4;
  want.shard_index = 1;
  want.shard_offset = 250;
  want.shard_len = 250;
  want.learners = 3;
  asgd::io::check_checkpoint(c, "ck.h5", want);  // fits
  auto err = [&](asgd::io::CheckpointExpect w) {
    return error_of([&] { asgd::io::check_checkpoint(c, "ck.h5", w); });
  };
  auto w = want;
  w.config_hash = "other";
  EXPECT_TRUE(contains(err(w), "ck.h5: checkpoint was written by another configuration"));
  w = want;
  w.shard_len = 300;
  EXPECT_TRUE(contains(err(w), "ck.h5: checkpoint holds 250 weights, this run needs 300"));
  w = want;
  w.max_clock = 50;
  EXPECT_TRUE(contains(err(w), "is at update 77, past the run's end at update 50"));
  w = want;
  w.max_epochs = 2;
  EXPECT_TRUE(contains(err(w), "is at epoch 2.5, past the run's end"));
  w = want;
  w.learners = 2;
  EXPECT_TRUE(contains(err(w), "data cursors of 3 learners, this run has 2"));
  // a warm start from a diverged run: weight 3 is NaN
  w = want;
  w.finite_weights = true;
  w.what = "warm start checkpoint";
  EXPECT_TRUE(contains(err(w), "ck.h5: warm start checkpoint holds a non-finite weight (NaN at index 3)"));
}

// The transport attribute and the learners' own push counts (/learners/pushed)
// round-trip; a file without them (written before, or a single/virtual run
// without pushed) reads as "" and -1; values outside their domain are refused.
TEST_F(IoTest, TransportAndPushedAreOptionalAndChecked) {
  RunResult r = domain_result();
  r.transport = "messages";
  r.learners[0].pushed = 7;  // one push answered "stop"
  r.learners[1].pushed = 5;
  asgd::io::write_results(path("t.h5"), r);
  RunResult back = asgd::io::read_results(path("t.h5"));
  EXPECT_EQ(back.transport, "messages");
  ASSERT_EQ(back.learners.size(), 2u);
  EXPECT_EQ(back.learners[0].pushed, 7);
  EXPECT_EQ(back.learners[1].pushed, 5);

  asgd::io::write_results(path("old.h5"), domain_result());  // neither recorded: neither written
  back = asgd::io::read_results(path("old.h5"));
  EXPECT_EQ(back.transport, "");
  EXPECT_EQ(back.learners[0].pushed, -1);
  EXPECT_EQ(back.learners[1].pushed, -1);

  RunResult bad = domain_result();
  bad.transport = "pigeon";
  asgd::io::write_results(path("bad.h5"), bad);
  EXPECT_TRUE(contains(error_of([&] { asgd::io::read_results(path("bad.h5")); }),
                       "transport \"pigeon\" is not shared-memory, messages, allreduce or none"));
  // the weights attribute: round-trips with shared memory, refused elsewhere or outside its domain
  r = domain_result();
  r.transport = "shared-memory";
  r.weights = "in-place";
  asgd::io::write_results(path("w.h5"), r);
  EXPECT_EQ(asgd::io::read_results(path("w.h5")).weights, "in-place");
  EXPECT_EQ(asgd::io::read_results(path("old.h5")).weights, "");
  for (const auto& [transport, weights] : {std::pair<std::string, std::string>{"shared-memory", "borrowed"},
                                           {"messages", "copied"}}) {
    bad = domain_result();
    bad.transport = transport;
    bad.weights = weights;
    asgd::io::write_results(path("bad.h5"), bad);
    EXPECT_TRUE(contains(error_of([&] { asgd::io::read_results(path("bad.h5")); }),
                         "weights \"" + weights + "\" is not in-place or copied with transport shared-memory"));
  }
  bad = domain_result();
  bad.learners[0].pushed = 6;  // recorded, so the column is written
  bad.learners[1].pushed = -5;
  asgd::io::write_results(path("bad.h5"), bad);
  EXPECT_TRUE(contains(error_of([&] { asgd::io::read_results(path("bad.h5")); }),
                       "/learners/pushed row 1: -5 is neither a count nor -1"));
}
