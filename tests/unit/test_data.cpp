// Tests for src/data: IDX and CIFAR-10 readers, synthetic data, mean
// subtraction, Sampler and gather_batch.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.hpp"

namespace fs = std::filesystem;
using asgd::index_t;
using asgd::data::DataPair;
using asgd::data::Dataset;
using asgd::data::DatasetSpec;
using asgd::data::Sampler;
using Bytes = std::vector<std::uint8_t>;

namespace {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / ("asgd_test_data_" + std::to_string(::getpid()) + "_" +
                                     std::to_string(counter++) + "_" + (info ? info->name() : "x"));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void put_be32(Bytes& b, std::uint32_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 24));
  b.push_back(static_cast<std::uint8_t>(v >> 16));
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}

Bytes idx_images(std::uint32_t n, std::uint32_t h, std::uint32_t w, const Bytes& pixels) {
  Bytes b;
  put_be32(b, 0x00000803);
  put_be32(b, n);
  put_be32(b, h);
  put_be32(b, w);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

Bytes idx_labels(const Bytes& labels) {
  Bytes b;
  put_be32(b, 0x00000801);
  put_be32(b, static_cast<std::uint32_t>(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

void write_file(const std::string& path, const Bytes& b) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    if (!b.empty()) {
      ASSERT_EQ(gzwrite(f, b.data(), static_cast<unsigned>(b.size())), static_cast<int>(b.size()));
    }
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    ASSERT_TRUE(f.good()) << path;
  }
}

// Pixels 0, 1, ..., n*h*w - 1 (mod 256) and labels i % 10.
constexpr std::uint32_t kN = 3, kH = 2, kW = 3;
Bytes test_pixels() {
  Bytes p(kN * kH * kW);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::uint8_t>(i * 13 % 256);
  return p;
}
const Bytes kLabels = {7, 0, 9};

void expect_small_idx(const Dataset& d) {
  EXPECT_EQ(d.n, kN);
  EXPECT_EQ(d.h, kH);
  EXPECT_EQ(d.w, kW);
  EXPECT_EQ(d.c, 1);
  EXPECT_EQ(d.sample_size(), kH * kW);
  ASSERT_EQ(d.images.size(), kN * kH * kW);
  ASSERT_EQ(d.labels.size(), kN);
  const Bytes p = test_pixels();
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_FLOAT_EQ(d.images[i], p[i] / 255.0f) << i;
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(d.labels[i], kLabels[i]);
}

// Runs f, which must throw asgd::Error whose message holds every part.
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const asgd::Error& e) {
    const std::string msg = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return;
  }
  ADD_FAILURE() << "no exception thrown";
}

}  // namespace

// ---------------------------------------------------------------- IDX

TEST(Idx, ReadsRawFiles) {
  TempDir dir;
  write_file(dir.file("img"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab"), idx_labels(kLabels));
  const Dataset d = asgd::data::read_idx(dir.file("img"), dir.file("lab"), "tiny");
  EXPECT_EQ(d.name, "tiny");
  EXPECT_EQ(d.classes, 10);
  expect_small_idx(d);
}

TEST(Idx, ReadsGzipFiles) {
  TempDir dir;
  write_file(dir.file("img.gz"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab.gz"), idx_labels(kLabels));
  // The .gz file must really be compressed, not a raw copy.
  std::ifstream f(dir.file("img.gz"), std::ios::binary);
  unsigned char head[2] = {0, 0};
  f.read(reinterpret_cast<char*>(head), 2);
  EXPECT_EQ(head[0], 0x1f);
  EXPECT_EQ(head[1], 0x8b);
  expect_small_idx(asgd::data::read_idx(dir.file("img.gz"), dir.file("lab.gz"), "tiny"));
}

TEST(Idx, LoadDirAcceptsGzAndRawNames) {
  TempDir dir;
  write_file(dir.file("train-images-idx3-ubyte.gz"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("train-labels-idx1-ubyte.gz"), idx_labels(kLabels));
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_images(1, kH, kW, Bytes(kH * kW, 255)));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_labels({4}));
  const DataPair p = asgd::data::load_idx_dir(dir.str(), "tiny");
  expect_small_idx(p.train);
  EXPECT_EQ(p.test.n, 1);
  EXPECT_EQ(p.test.labels.at(0), 4);
  for (float v : p.test.images) EXPECT_FLOAT_EQ(v, 1.0f);
}

TEST(Idx, LoadDirMissingFileNamesIt) {
  TempDir dir;
  expect_error([&] { asgd::data::load_idx_dir(dir.str(), "tiny"); },
               {dir.file("train-images-idx3-ubyte"), "cannot open"});
}

// An empty test set would "reach" every target error at 0 s; an empty
// training set trains on nothing. Both are refused naming the file.
TEST(Idx, EmptyTestSetIsRefused) {
  TempDir dir;
  write_file(dir.file("train-images-idx3-ubyte"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_labels(kLabels));
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_images(0, kH, kW, {}));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_labels({}));
  expect_error([&] { asgd::data::load_idx_dir(dir.str(), "tiny"); },
               {dir.file("t10k-images-idx3-ubyte"), "0 images", "test set is empty"});
  DatasetSpec s;
  s.kind = "mnist";
  s.dir = dir.str();
  expect_error([&] { asgd::data::load_dataset(s); }, {"test set is empty"});
}

TEST(Idx, EmptyTrainingSetIsRefused) {
  TempDir dir;
  write_file(dir.file("train-images-idx3-ubyte"), idx_images(0, kH, kW, {}));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_labels({}));
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_labels(kLabels));
  expect_error([&] { asgd::data::load_idx_dir(dir.str(), "tiny"); },
               {dir.file("train-images-idx3-ubyte"), "training set is empty"});
}

TEST(Idx, FolderInsteadOfFileOrFileInsteadOfFolder) {
  TempDir dir;
  fs::create_directories(dir.file("train-images-idx3-ubyte"));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_labels(kLabels));
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_labels(kLabels));
  expect_error([&] { asgd::data::load_idx_dir(dir.str(), "tiny"); },
               {dir.file("train-images-idx3-ubyte"), "is a folder"});
  expect_error([&] { asgd::data::load_idx_dir(dir.file("t10k-images-idx3-ubyte"), "tiny"); },
               {dir.file("t10k-images-idx3-ubyte"), "not a data folder"});
  expect_error([&] { asgd::data::load_cifar10(dir.file("t10k-images-idx3-ubyte")); },
               {"not a data folder"});
}

TEST(Idx, MissingFile) {
  TempDir dir;
  write_file(dir.file("lab"), idx_labels(kLabels));
  const std::string img = dir.file("nope");
  expect_error([&] { asgd::data::read_idx(img, dir.file("lab"), "x"); },
               {img + ": cannot open: No such file or directory"});
  expect_error([&] { asgd::data::read_idx(img + ".gz", dir.file("lab"), "x"); },
               {img + ".gz: cannot open"});
}

TEST(Idx, WrongMagic) {
  TempDir dir;
  write_file(dir.file("img"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab"), idx_labels(kLabels));
  // Swapped arguments: each file has the other's magic.
  expect_error([&] { asgd::data::read_idx(dir.file("lab"), dir.file("img"), "x"); },
               {dir.file("lab"), "byte 0", "bad magic 0x00000801", "expected 0x00000803"});
  write_file(dir.file("lab2.gz"), idx_images(kN, kH, kW, test_pixels()));
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab2.gz"), "x"); },
               {dir.file("lab2.gz"), "byte 0", "bad magic 0x00000803", "expected 0x00000801"});
}

TEST(Idx, TruncatedImageData) {
  TempDir dir;
  Bytes img = idx_images(kN, kH, kW, test_pixels());
  img.resize(img.size() - 5);
  write_file(dir.file("img.gz"), img);
  write_file(dir.file("lab"), idx_labels(kLabels));
  expect_error([&] { asgd::data::read_idx(dir.file("img.gz"), dir.file("lab"), "x"); },
               {dir.file("img.gz"), "byte 16", "truncated", "expected 18 bytes", "got 13"});
}

TEST(Idx, CutGzipStream) {
  TempDir dir;
  write_file(dir.file("img.gz"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab.gz"), idx_labels(kLabels));
  // Dropping the 4-byte length trailer leaves all data decodable; the cut
  // must still be reported rather than silently accepted.
  const auto size = fs::file_size(dir.file("img.gz"));
  fs::resize_file(dir.file("img.gz"), size - 4);
  expect_error([&] { asgd::data::read_idx(dir.file("img.gz"), dir.file("lab.gz"), "x"); },
               {dir.file("img.gz") + ": byte", "gzip"});
}

TEST(Idx, TrailingBytes) {
  TempDir dir;
  Bytes img = idx_images(kN, kH, kW, test_pixels());
  img.push_back(0);
  write_file(dir.file("img"), img);
  write_file(dir.file("lab"), idx_labels(kLabels));
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab"), "x"); },
               {dir.file("img"), "byte 34", "trailing"});
}

TEST(Idx, TruncatedHeader) {
  TempDir dir;
  Bytes img = idx_images(kN, kH, kW, test_pixels());
  img.resize(10);
  write_file(dir.file("img"), img);
  write_file(dir.file("lab"), idx_labels(kLabels));
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab"), "x"); },
               {dir.file("img"), "byte", "truncated", "header"});
  Bytes lab = idx_labels(kLabels);
  lab.resize(6);
  write_file(dir.file("img"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab"), lab);
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab"), "x"); },
               {dir.file("lab"), "byte", "truncated", "header"});
  write_file(dir.file("empty"), {});
  expect_error([&] { asgd::data::read_idx(dir.file("empty"), dir.file("lab"), "x"); },
               {dir.file("empty"), "byte 0", "truncated"});
}

TEST(Idx, TruncatedLabels) {
  TempDir dir;
  Bytes lab = idx_labels(kLabels);
  lab.pop_back();
  write_file(dir.file("img"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab"), lab);
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab"), "x"); },
               {dir.file("lab"), "byte 8", "truncated"});
}

TEST(Idx, LabelOutOfRange) {
  TempDir dir;
  write_file(dir.file("img"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab"), idx_labels({1, 2, 12}));
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab"), "x"); },
               {dir.file("lab"), "byte 10", "label 12 out of range [0, 10)"});
  // The classes argument sets the bound.
  write_file(dir.file("lab"), idx_labels({1, 2, 3}));
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab"), "x", 3); },
               {dir.file("lab"), "byte 10", "label 3 out of range [0, 3)"});
}

TEST(Idx, CountMismatch) {
  TempDir dir;
  write_file(dir.file("img"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("lab"), idx_labels({1, 2}));
  expect_error([&] { asgd::data::read_idx(dir.file("img"), dir.file("lab"), "x"); },
               {dir.file("lab"), "byte 4", "2 labels", "3 images"});
}

TEST(Idx, DefaultDirs) {
  EXPECT_EQ(asgd::data::default_dir("fashion-mnist"), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(asgd::data::default_dir("mnist"), "/usr/share/datasets/mnist");
  EXPECT_EQ(asgd::data::default_dir("cifar10"), "./data/cifar-10-batches-bin");
  EXPECT_THROW(asgd::data::default_dir("imagenet"), asgd::Error);
}

TEST(Idx, RealFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " not present";
  const DataPair p = asgd::data::load_idx_dir(dir, "fashion-mnist");
  EXPECT_EQ(p.train.n, 60000);
  EXPECT_EQ(p.test.n, 10000);
  for (const Dataset* d : {&p.train, &p.test}) {
    EXPECT_EQ(d->h, 28);
    EXPECT_EQ(d->w, 28);
    EXPECT_EQ(d->c, 1);
    ASSERT_EQ(d->images.size(), static_cast<std::size_t>(d->n * 28 * 28));
    ASSERT_EQ(d->labels.size(), static_cast<std::size_t>(d->n));
    std::vector<int> count(10, 0);
    for (auto l : d->labels) {
      ASSERT_GE(l, 0);
      ASSERT_LT(l, 10);
      ++count[static_cast<std::size_t>(l)];
    }
    // Fashion-MNIST is balanced: 6000 / 1000 per class.
    for (int c : count) EXPECT_EQ(c, d->n / 10);
    const auto [lo, hi] = std::minmax_element(d->images.begin(), d->images.end());
    EXPECT_EQ(*lo, 0.0f);
    EXPECT_EQ(*hi, 1.0f);
  }
}

// ---------------------------------------------------------------- CIFAR-10

namespace {

constexpr std::size_t kRec = 3073;

// Record r of file f: label (f + r) % 10, channel ch pixel p = (ch * 50 + p * 7 + r + f) % 256.
Bytes cifar_records(int f, int records) {
  Bytes b;
  for (int r = 0; r < records; ++r) {
    b.push_back(static_cast<std::uint8_t>((f + r) % 10));
    for (int ch = 0; ch < 3; ++ch) {
      for (int p = 0; p < 1024; ++p)
        b.push_back(static_cast<std::uint8_t>((ch * 50 + p * 7 + r + f) % 256));
    }
  }
  return b;
}

void write_cifar(const TempDir& dir, int records_per_file) {
  for (int f = 1; f <= 5; ++f) {
    write_file(dir.file("data_batch_" + std::to_string(f) + ".bin"),
               cifar_records(f, records_per_file));
  }
  write_file(dir.file("test_batch.bin"), cifar_records(0, records_per_file));
}

void expect_cifar_record(const Dataset& d, index_t i, int f, int r) {
  EXPECT_EQ(d.labels.at(static_cast<std::size_t>(i)), (f + r) % 10);
  const float* x = d.images.data() + i * 32 * 32 * 3;
  for (int y = 0; y < 32; ++y) {
    for (int xx = 0; xx < 32; ++xx) {
      for (int ch = 0; ch < 3; ++ch) {
        const int p = y * 32 + xx;
        const float want = static_cast<float>((ch * 50 + p * 7 + r + f) % 256) / 255.0f;
        ASSERT_FLOAT_EQ(x[(y * 32 + xx) * 3 + ch], want)
            << "y " << y << " x " << xx << " ch " << ch;
      }
    }
  }
}

}  // namespace

TEST(Cifar, ConvertsChwToHwc) {
  TempDir dir;
  write_cifar(dir, 2);
  const DataPair p = asgd::data::load_cifar10(dir.str());
  EXPECT_EQ(p.train.n, 10);
  EXPECT_EQ(p.test.n, 2);
  for (const Dataset* d : {&p.train, &p.test}) {
    EXPECT_EQ(d->h, 32);
    EXPECT_EQ(d->w, 32);
    EXPECT_EQ(d->c, 3);
    EXPECT_EQ(d->classes, 10);
    EXPECT_EQ(d->images.size(), static_cast<std::size_t>(d->n * 3072));
  }
  for (int f = 1; f <= 5; ++f) {
    for (int r = 0; r < 2; ++r) expect_cifar_record(p.train, (f - 1) * 2 + r, f, r);
  }
  for (int r = 0; r < 2; ++r) expect_cifar_record(p.test, r, 0, r);
}

TEST(Cifar, TruncatedRecord) {
  TempDir dir;
  write_cifar(dir, 2);
  Bytes b = cifar_records(3, 2);
  b.resize(kRec + 5);
  write_file(dir.file("data_batch_3.bin"), b);
  expect_error([&] { asgd::data::load_cifar10(dir.str()); },
               {dir.file("data_batch_3.bin"), "truncated at byte 3078", "record 1"});
}

TEST(Cifar, BadLabel) {
  TempDir dir;
  write_cifar(dir, 2);
  Bytes b = cifar_records(0, 2);
  b[kRec] = 10;
  write_file(dir.file("test_batch.bin"), b);
  expect_error([&] { asgd::data::load_cifar10(dir.str()); },
               {dir.file("test_batch.bin"), "byte 3073", "label 10"});
}

TEST(Cifar, MissingFile) {
  TempDir dir;
  write_cifar(dir, 1);
  fs::remove(dir.file("data_batch_5.bin"));
  expect_error([&] { asgd::data::load_cifar10(dir.str()); },
               {dir.file("data_batch_5.bin"), "cannot open"});
}

// ---------------------------------------------------------------- synthetic

namespace {

DatasetSpec small_synthetic(std::uint64_t seed) {
  DatasetSpec s;
  s.kind = "synthetic";
  s.h = 6;
  s.w = 5;
  s.c = 2;
  s.classes = 4;
  s.n_train = 200;
  s.n_test = 80;
  s.seed = seed;
  return s;
}

}  // namespace

TEST(Synthetic, ShapesAndRanges) {
  const DataPair p = asgd::data::make_synthetic(small_synthetic(3));
  EXPECT_EQ(p.train.n, 200);
  EXPECT_EQ(p.test.n, 80);
  for (const Dataset* d : {&p.train, &p.test}) {
    EXPECT_EQ(d->h, 6);
    EXPECT_EQ(d->w, 5);
    EXPECT_EQ(d->c, 2);
    EXPECT_EQ(d->classes, 4);
    ASSERT_EQ(d->images.size(), static_cast<std::size_t>(d->n * 60));
    ASSERT_EQ(d->labels.size(), static_cast<std::size_t>(d->n));
    for (float v : d->images) {
      ASSERT_GE(v, 0.0f);
      ASSERT_LE(v, 1.0f);
    }
    std::set<int> seen;
    for (auto l : d->labels) {
      ASSERT_GE(l, 0);
      ASSERT_LT(l, 4);
      seen.insert(l);
    }
    EXPECT_EQ(seen.size(), 4u);
  }
}

TEST(Synthetic, DeterministicFromSeed) {
  const DataPair a = asgd::data::make_synthetic(small_synthetic(7));
  const DataPair b = asgd::data::make_synthetic(small_synthetic(7));
  const DataPair c = asgd::data::make_synthetic(small_synthetic(8));
  EXPECT_EQ(a.train.images, b.train.images);
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_EQ(a.test.images, b.test.images);
  EXPECT_EQ(a.test.labels, b.test.labels);
  EXPECT_NE(a.train.images, c.train.images);
  EXPECT_NE(a.train.labels, c.train.labels);
  EXPECT_NE(a.test.images, c.test.images);
}

TEST(Synthetic, LabelIsLearnable) {
  // Nearest class mean (from train) must classify test well above chance.
  const DataPair p = asgd::data::make_synthetic(small_synthetic(11));
  const index_t size = p.train.sample_size();
  std::vector<double> mean(static_cast<std::size_t>(4 * size), 0.0);
  std::vector<int> count(4, 0);
  for (index_t i = 0; i < p.train.n; ++i) {
    const int l = p.train.labels[static_cast<std::size_t>(i)];
    ++count[static_cast<std::size_t>(l)];
    for (index_t j = 0; j < size; ++j)
      mean[static_cast<std::size_t>(l * size + j)] +=
          p.train.images[static_cast<std::size_t>(i * size + j)];
  }
  for (int l = 0; l < 4; ++l) {
    for (index_t j = 0; j < size; ++j)
      mean[static_cast<std::size_t>(l * size + j)] /= count[static_cast<std::size_t>(l)];
  }
  int correct = 0;
  for (index_t i = 0; i < p.test.n; ++i) {
    int best = -1;
    double best_d = 1e300;
    for (int l = 0; l < 4; ++l) {
      double dist = 0;
      for (index_t j = 0; j < size; ++j) {
        const double diff = p.test.images[static_cast<std::size_t>(i * size + j)] -
                            mean[static_cast<std::size_t>(l * size + j)];
        dist += diff * diff;
      }
      if (dist < best_d) {
        best_d = dist;
        best = l;
      }
    }
    correct += best == p.test.labels[static_cast<std::size_t>(i)];
  }
  EXPECT_GE(correct, 72);  // >= 90% of 80
}

TEST(Synthetic, BadSpecThrows) {
  DatasetSpec s = small_synthetic(1);
  s.classes = 0;
  EXPECT_THROW(asgd::data::make_synthetic(s), asgd::Error);
  s = small_synthetic(1);
  s.h = 0;
  EXPECT_THROW(asgd::data::make_synthetic(s), asgd::Error);
  s = small_synthetic(1);
  s.n_train = 0;
  EXPECT_THROW(asgd::data::make_synthetic(s), asgd::Error);
  s = small_synthetic(1);
  s.n_test = 0;  // no test set: nothing to measure the error on
  expect_error([&] { asgd::data::make_synthetic(s); }, {"n_test >= 1"});
  expect_error([&] { asgd::data::load_dataset(s); }, {"n_test >= 1"});
}

TEST(SubtractMean, ZeroTrainMeanPerPixel) {
  DataPair p = asgd::data::make_synthetic(small_synthetic(5));
  const DataPair orig = p;
  asgd::data::subtract_pixel_mean(p);
  const index_t size = p.train.sample_size();
  std::vector<double> mean(static_cast<std::size_t>(size), 0.0);
  for (index_t i = 0; i < p.train.n; ++i) {
    for (index_t j = 0; j < size; ++j)
      mean[static_cast<std::size_t>(j)] += p.train.images[static_cast<std::size_t>(i * size + j)];
  }
  for (index_t j = 0; j < size; ++j) {
    EXPECT_NEAR(mean[static_cast<std::size_t>(j)] / static_cast<double>(p.train.n), 0.0, 1e-6) << j;
  }
  // Test is shifted by the same per-pixel amount as train.
  for (index_t j = 0; j < size; ++j) {
    const double shift_train = orig.train.images[static_cast<std::size_t>(j)] -
                               p.train.images[static_cast<std::size_t>(j)];
    const double shift_test = orig.test.images[static_cast<std::size_t>(size + j)] -
                              p.test.images[static_cast<std::size_t>(size + j)];
    EXPECT_NEAR(shift_train, shift_test, 1e-6) << j;
    EXPECT_GT(shift_train, 0.1);  // the mean of values around 0.5 was removed
  }
  EXPECT_EQ(p.train.labels, orig.train.labels);
}

TEST(LoadDataset, DispatchesAndSubtractsMean) {
  DatasetSpec s = small_synthetic(9);
  s.subtract_mean = false;
  const DataPair raw = asgd::data::load_dataset(s);
  EXPECT_EQ(raw.train.images, asgd::data::make_synthetic(s).train.images);
  s.subtract_mean = true;
  const DataPair centred = asgd::data::load_dataset(s);
  double sum = 0;
  for (float v : centred.train.images) sum += v;
  EXPECT_NEAR(sum / static_cast<double>(centred.train.images.size()), 0.0, 1e-6);
  EXPECT_NE(centred.train.images, raw.train.images);
}

TEST(LoadDataset, UnknownKindListsValidKinds) {
  DatasetSpec s;
  s.kind = "imagenet";
  expect_error([&] { asgd::data::load_dataset(s); },
               {"imagenet", "fashion-mnist", "mnist", "cifar10", "synthetic"});
}

TEST(LoadDataset, IdxFromDir) {
  TempDir dir;
  write_file(dir.file("train-images-idx3-ubyte"), idx_images(kN, kH, kW, test_pixels()));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_labels(kLabels));
  write_file(dir.file("t10k-images-idx3-ubyte.gz"), idx_images(1, kH, kW, Bytes(kH * kW, 0)));
  write_file(dir.file("t10k-labels-idx1-ubyte.gz"), idx_labels({4}));
  DatasetSpec s;
  s.kind = "mnist";
  s.dir = dir.str();
  s.subtract_mean = false;
  const DataPair p = asgd::data::load_dataset(s);
  expect_small_idx(p.train);
  EXPECT_EQ(p.test.n, 1);
}

// ---------------------------------------------------------------- Sampler

TEST(SamplerTest, IndicesInRangeAndEpochIsDuplicateFree) {
  const index_t n = 103, mu = 10;
  Sampler s(n, 42, 0, 1, mu);
  ASSERT_EQ(s.batches_per_epoch(), 10);
  std::vector<index_t> idx;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<index_t> seen;
    for (index_t k = 0; k < s.batches_per_epoch(); ++k) {
      EXPECT_EQ(s.state().epoch, epoch);
      EXPECT_EQ(s.state().batch, k);
      s.next(idx);
      ASSERT_EQ(idx.size(), static_cast<std::size_t>(mu));
      for (index_t i : idx) {
        ASSERT_GE(i, 0);
        ASSERT_LT(i, n);
        EXPECT_TRUE(seen.insert(i).second) << "duplicate " << i << " in epoch " << epoch;
      }
    }
    EXPECT_EQ(seen.size(), 100u);
  }
  EXPECT_EQ(s.state().epoch, 3);
  EXPECT_EQ(s.state().batch, 0);
}

TEST(SamplerTest, WholeEpochCoversAllWhenDivisible) {
  Sampler s(60, 1, 0, 1, 6);
  std::vector<index_t> idx, all;
  for (int k = 0; k < 10; ++k) {
    s.next(idx);
    all.insert(all.end(), idx.begin(), idx.end());
  }
  std::sort(all.begin(), all.end());
  for (index_t i = 0; i < 60; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
}

TEST(SamplerTest, LearnersTileOneBigBatch) {
  const index_t n = 50, mu = 4;
  const std::int32_t L = 3;
  std::vector<Sampler> learners;
  for (std::int32_t l = 0; l < L; ++l) learners.emplace_back(n, 99, l, L, mu);
  Sampler big(n, 99, 0, 1, L * mu);
  ASSERT_EQ(big.batches_per_epoch(), 4);
  for (const auto& s : learners) ASSERT_EQ(s.batches_per_epoch(), 4);
  std::vector<index_t> idx, want;
  for (int k = 0; k < 13; ++k) {  // crosses three epoch boundaries
    std::vector<index_t> got;
    for (auto& s : learners) {
      s.next(idx);
      ASSERT_EQ(idx.size(), static_cast<std::size_t>(mu));
      got.insert(got.end(), idx.begin(), idx.end());
    }
    big.next(want);
    EXPECT_EQ(std::multiset<index_t>(got.begin(), got.end()),
              std::multiset<index_t>(want.begin(), want.end()))
        << "round " << k;
    EXPECT_EQ(std::set<index_t>(got.begin(), got.end()).size(), got.size());
  }
}

TEST(SamplerTest, StateRestoreReplays) {
  Sampler a(37, 5, 1, 2, 3);  // 6 batches per epoch
  std::vector<index_t> idx;
  for (int k = 0; k < 8; ++k) a.next(idx);
  const Sampler::State saved = a.state();
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.batch, 2);
  std::vector<std::vector<index_t>> first;
  for (int k = 0; k < 10; ++k) {
    a.next(idx);
    first.push_back(idx);
  }
  // A fresh sampler (no cached permutation) and the same one both replay.
  Sampler b(37, 5, 1, 2, 3);
  b.restore(saved);
  a.restore(saved);
  for (int k = 0; k < 10; ++k) {
    b.next(idx);
    EXPECT_EQ(idx, first[static_cast<std::size_t>(k)]) << k;
    a.next(idx);
    EXPECT_EQ(idx, first[static_cast<std::size_t>(k)]) << k;
  }
  EXPECT_THROW(b.restore({0, 6}), asgd::Error);
  EXPECT_THROW(b.restore({-1, 0}), asgd::Error);
  EXPECT_THROW(b.restore({0, -1}), asgd::Error);
}

TEST(SamplerTest, SeedsAndEpochsDiffer) {
  Sampler a(1000, 1, 0, 1, 100), b(1000, 2, 0, 1, 100);
  std::vector<index_t> x, y;
  a.next(x);
  b.next(y);
  EXPECT_NE(x, y);
  // Epoch 1 of the same seed uses a different permutation than epoch 0.
  Sampler c(1000, 1, 0, 1, 100);
  c.restore({1, 0});
  c.next(y);
  EXPECT_NE(x, y);
  // Same seed, same sequence.
  Sampler d(1000, 1, 0, 1, 100);
  d.next(y);
  EXPECT_EQ(x, y);
}

TEST(SamplerTest, BadArgumentsThrow) {
  EXPECT_THROW(Sampler(100, 1, 0, 1, 0), asgd::Error);
  EXPECT_THROW(Sampler(100, 1, 0, 0, 4), asgd::Error);
  EXPECT_THROW(Sampler(100, 1, 3, 3, 4), asgd::Error);
  EXPECT_THROW(Sampler(100, 1, -1, 3, 4), asgd::Error);
  expect_error([] { Sampler(11, 1, 0, 3, 4); }, {"dataset has 11 samples", "3 learners x 4"});
  EXPECT_NO_THROW(Sampler(12, 1, 2, 3, 4));
}

TEST(GatherBatch, CopiesSamplesAndLabels) {
  const DataPair p = asgd::data::make_synthetic(small_synthetic(2));
  const std::vector<index_t> idx = {5, 0, 199, 5};
  const index_t size = p.train.sample_size();
  std::vector<float> x(idx.size() * static_cast<std::size_t>(size), -1.0f);
  std::vector<std::int32_t> y(idx.size(), -1);
  asgd::data::gather_batch(p.train, idx, x.data(), y.data());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    EXPECT_EQ(y[i], p.train.labels[static_cast<std::size_t>(idx[i])]);
    for (index_t j = 0; j < size; ++j) {
      ASSERT_EQ(x[i * static_cast<std::size_t>(size) + static_cast<std::size_t>(j)],
                p.train.images[static_cast<std::size_t>(idx[i] * size + j)]);
    }
  }
  const std::vector<index_t> bad = {200};
  EXPECT_THROW(asgd::data::gather_batch(p.train, bad, x.data(), y.data()), asgd::Error);
}
