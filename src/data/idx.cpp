// IDX (MNIST-family) reader and the shared whole-file reader.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <zlib.h>

#include "data/dataset.hpp"
#include "data/detail.hpp"

namespace asgd::data {
namespace {

constexpr std::uint32_t kImageMagic = 0x00000803;  // unsigned byte, 3 dims
constexpr std::uint32_t kLabelMagic = 0x00000801;  // unsigned byte, 1 dim
constexpr std::size_t kChunk = 1 << 20;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string errno_text(int err) { return err != 0 ? std::strerror(err) : "unknown error"; }

std::vector<std::uint8_t> read_gz(const std::string& path) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw Error(path + ": cannot open: " + errno_text(errno));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  std::vector<std::uint8_t> bytes;
  for (;;) {
    const std::size_t old = bytes.size();
    bytes.resize(old + kChunk);
    const int got = gzread(f, bytes.data() + old, static_cast<unsigned>(kChunk));
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw Error(path + ": byte " + std::to_string(old) +
                  ": gzip read error: " + (code == Z_ERRNO ? errno_text(errno) : std::string(msg)));
    }
    bytes.resize(old + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  // zlib hands back what it could decompress of a cut-off stream and only
  // flags the early end (Z_BUF_ERROR) in the error state.
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  if (code != Z_OK) {
    std::string text = msg;
    // zlib prefixes the message with the path, which we already lead with.
    if (text.starts_with(path + ": ")) text.erase(0, path.size() + 2);
    throw Error(path + ": byte " + std::to_string(bytes.size()) +
                " (decompressed): gzip error: " + text);
  }
  return bytes;
}

std::vector<std::uint8_t> read_raw(const std::string& path) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error(path + ": cannot open: " + errno_text(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, std::fclose);
  std::vector<std::uint8_t> bytes;
  for (;;) {
    const std::size_t old = bytes.size();
    bytes.resize(old + kChunk);
    const std::size_t got = std::fread(bytes.data() + old, 1, kChunk, f);
    bytes.resize(old + got);
    if (got < kChunk) {
      if (std::ferror(f)) {
        throw Error(path + ": byte " + std::to_string(bytes.size()) +
                    ": read error: " + errno_text(errno));
      }
      break;
    }
  }
  return bytes;
}

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) |
         (std::uint32_t{b[at + 2]} << 8) | std::uint32_t{b[at + 3]};
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

void check_header(const std::string& path, const std::vector<std::uint8_t>& b,
                  std::size_t header_bytes, std::uint32_t magic, const char* what) {
  // Magic first when at least its 4 bytes exist: a wrong file type is the
  // more useful diagnosis than its length.
  if (b.size() >= 4 && be32(b, 0) != magic) {
    throw Error(path + ": byte 0: bad magic " + hex32(be32(b, 0)) + " (expected " + hex32(magic) +
                ", an IDX " + what + " file)");
  }
  if (b.size() < header_bytes) {
    throw Error(path + ": byte 0: truncated: expected " + std::to_string(header_bytes) +
                "-byte IDX " + what + " header, got " + std::to_string(b.size()) + " bytes");
  }
}

// Checks that b holds exactly `expected` payload bytes after the header.
void check_payload(const std::string& path, const std::vector<std::uint8_t>& b,
                   std::size_t header_bytes, std::uint64_t expected, const char* what) {
  const std::uint64_t got = b.size() - header_bytes;
  if (got < expected) {
    throw Error(path + ": byte " + std::to_string(header_bytes) + ": truncated: expected " +
                std::to_string(expected) + " bytes of " + what + ", got " + std::to_string(got));
  }
  if (got > expected) {
    throw Error(path + ": byte " + std::to_string(header_bytes + expected) + ": " +
                std::to_string(got - expected) + " unexpected trailing bytes after " +
                std::to_string(expected) + " bytes of " + what);
  }
}

std::string find_idx_file(const std::string& dir, const std::string& base) {
  namespace fs = std::filesystem;
  const fs::path gz = fs::path(dir) / (base + ".gz");
  const fs::path raw = fs::path(dir) / base;
  std::error_code ec;
  if (fs::exists(gz, ec)) return gz.string();
  if (fs::exists(raw, ec)) return raw.string();
  throw Error(raw.string() + "[.gz]: cannot open: " + std::strerror(ENOENT));
}

}  // namespace

namespace detail {

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a folder, not a data file");
  return ends_with(path, ".gz") ? read_gz(path) : read_raw(path);
}

void check_data_dir(const std::string& dir) {
  std::error_code ec;
  const auto st = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_directory(st))
    throw Error(dir + ": is a file, not a data folder (--data-dir)");
}

}  // namespace detail

std::string default_dir(const std::string& kind) {
  if (kind == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";
  if (kind == "mnist") return "/usr/share/datasets/mnist";
  if (kind == "cifar10") return "./data/cifar-10-batches-bin";
  if (kind == "synthetic") return "";
  throw Error("unknown dataset kind '" + kind +
              "' (valid: fashion-mnist, mnist, cifar10, synthetic)");
}

Dataset read_idx(const std::string& images_path, const std::string& labels_path,
                 const std::string& name, std::int32_t classes) {
  if (classes < 1) {
    throw Error(labels_path + ": classes must be >= 1, got " + std::to_string(classes));
  }
  const std::vector<std::uint8_t> img = detail::read_file_bytes(images_path);
  check_header(images_path, img, 16, kImageMagic, "image");
  const std::uint32_t n = be32(img, 4), h = be32(img, 8), w = be32(img, 12);
  std::uint64_t pixels = 0;
  if (__builtin_mul_overflow(std::uint64_t{n}, std::uint64_t{h} * w, &pixels)) {
    throw Error(images_path + ": byte 4: image dimensions " + std::to_string(n) + " x " +
                std::to_string(h) + " x " + std::to_string(w) + " are too large");
  }
  check_payload(images_path, img, 16, pixels, "image data");

  const std::vector<std::uint8_t> lab = detail::read_file_bytes(labels_path);
  check_header(labels_path, lab, 8, kLabelMagic, "label");
  const std::uint32_t n_labels = be32(lab, 4);
  if (n_labels != n) {
    throw Error(labels_path + ": byte 4: " + std::to_string(n_labels) + " labels but " +
                images_path + " has " + std::to_string(n) + " images");
  }
  check_payload(labels_path, lab, 8, n_labels, "label data");

  Dataset d;
  d.name = name;
  d.n = n;
  d.h = h;
  d.w = w;
  d.c = 1;
  d.classes = classes;
  d.labels.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint8_t v = lab[8 + i];
    if (v >= classes) {
      throw Error(labels_path + ": byte " + std::to_string(8 + std::uint64_t{i}) + ": label " +
                  std::to_string(v) + " out of range [0, " + std::to_string(classes) + ")");
    }
    d.labels[i] = v;
  }
  d.images.resize(pixels);
  for (std::uint64_t i = 0; i < pixels; ++i) {
    d.images[i] = static_cast<real_t>(img[16 + i]) / real_t{255};
  }
  return d;
}

DataPair load_idx_dir(const std::string& dir, const std::string& name) {
  detail::check_data_dir(dir);
  // Looked up one by one so a missing file is reported in a fixed order.
  const std::string train_images = find_idx_file(dir, "train-images-idx3-ubyte");
  const std::string train_labels = find_idx_file(dir, "train-labels-idx1-ubyte");
  const std::string test_images = find_idx_file(dir, "t10k-images-idx3-ubyte");
  const std::string test_labels = find_idx_file(dir, "t10k-labels-idx1-ubyte");
  DataPair p;
  p.train = read_idx(train_images, train_labels, name);
  // An empty set would train on nothing or "reach" every target error at 0 s.
  if (p.train.n == 0) throw Error(train_images + ": byte 4: 0 images: the training set is empty");
  p.test = read_idx(test_images, test_labels, name);
  if (p.test.n == 0) throw Error(test_images + ": byte 4: 0 images: the test set is empty");
  if (p.train.sample_size() != p.test.sample_size() || p.train.h != p.test.h) {
    throw Error(dir + ": train images are " + std::to_string(p.train.h) + "x" +
                std::to_string(p.train.w) + " but test images are " + std::to_string(p.test.h) +
                "x" + std::to_string(p.test.w));
  }
  return p;
}

}  // namespace asgd::data
