#pragma once
// Private to src/io: RAII handles and typed helpers over the HDF5 C API, the
// atomic temp-file-and-rename write, and the results layout written under any
// location (a file root, or /progress inside a checkpoint).
//
// Helpers throw asgd::Error with a message naming the object ("/updates/clock:
// ..."); the public entry points prefix the file path.
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "io/results.hpp"

namespace asgd::io::h5 {

// Root attribute "magic" of every checkpoint file.
inline constexpr const char* kCheckpointMagic = "asgd-checkpoint";

// Move-only owner of one hid_t, closed with the matching H5*close.
template <herr_t (*CloseFn)(hid_t)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

  // Closes now and reports the result; a file's close is where HDF5 writes
  // its metadata, so callers check it instead of leaving it to the destructor.
  herr_t close() {
    herr_t status = 0;
    if (valid()) status = CloseFn(id_);
    id_ = H5I_INVALID_HID;
    return status;
  }

 private:
  void reset() {
    if (valid()) CloseFn(id_);
    id_ = H5I_INVALID_HID;
  }

  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using Attribute = Handle<H5Aclose>;
using PropList = Handle<H5Pclose>;

// Silences HDF5's automatic error-stack printing; errors become asgd::Error.
void quiet_errors();

// The most specific message on HDF5's current error stack, or "".
std::string last_error();

// Throws asgd::Error(what + HDF5 detail) when id / status is negative.
hid_t check(hid_t id, const std::string& what);
void check_status(herr_t status, const std::string& what);

// "/" + name, or parent + "/" + name: object names used in messages.
std::string join(const std::string& parent, const std::string& name);

// A location (file root or group) together with its name for messages.
struct Loc {
  hid_t id;
  std::string name;
};

Group create_group(const Loc& parent, const std::string& name);
Group open_group(const Loc& parent, const std::string& name);
bool has_attribute(const Loc& loc, const std::string& name);
bool has_link(const Loc& loc, const std::string& name);  // a dataset or group of that name

// Scalar attributes. File types are little-endian fixed-width; strings are
// variable-length UTF-8.
void write_attr(const Loc& loc, const std::string& name, std::int32_t v);
void write_attr(const Loc& loc, const std::string& name, std::int64_t v);
void write_attr(const Loc& loc, const std::string& name, double v);
void write_attr(const Loc& loc, const std::string& name, const std::string& v);

std::int32_t read_attr_i32(const Loc& loc, const std::string& name);
std::int64_t read_attr_i64(const Loc& loc, const std::string& name);
double read_attr_f64(const Loc& loc, const std::string& name);
// Accepts variable- and fixed-length strings (h5py writes either).
std::string read_attr_str(const Loc& loc, const std::string& name);

// File (little-endian, fixed width) and memory (native) types per element type.
template <class T>
struct TypeOf;
template <>
struct TypeOf<std::int32_t> {
  static hid_t file() { return H5T_STD_I32LE; }
  static hid_t mem() { return H5T_NATIVE_INT32; }
  static constexpr H5T_class_t kClass = H5T_INTEGER;
  static constexpr const char* kName = "int32";
};
template <>
struct TypeOf<std::int64_t> {
  static hid_t file() { return H5T_STD_I64LE; }
  static hid_t mem() { return H5T_NATIVE_INT64; }
  static constexpr H5T_class_t kClass = H5T_INTEGER;
  static constexpr const char* kName = "int64";
};
template <>
struct TypeOf<std::uint64_t> {
  static hid_t file() { return H5T_STD_U64LE; }
  static hid_t mem() { return H5T_NATIVE_UINT64; }
  static constexpr H5T_class_t kClass = H5T_INTEGER;
  static constexpr const char* kName = "uint64";
};
template <>
struct TypeOf<float> {
  static hid_t file() { return H5T_IEEE_F32LE; }
  static hid_t mem() { return H5T_NATIVE_FLOAT; }
  static constexpr H5T_class_t kClass = H5T_FLOAT;
  static constexpr const char* kName = "float32";
};
template <>
struct TypeOf<double> {
  static hid_t file() { return H5T_IEEE_F64LE; }
  static hid_t mem() { return H5T_NATIVE_DOUBLE; }
  static constexpr H5T_class_t kClass = H5T_FLOAT;
  static constexpr const char* kName = "float64";
};

// Creates a 1-D dataset of n elements with file type `type`.
Dataset create_dataset_1d(const Loc& loc, const std::string& name, hid_t type, hsize_t n);
// Opens a dataset, checks it is 1-D of the given type class, returns its length.
Dataset open_dataset_1d(const Loc& loc, const std::string& name, H5T_class_t type_class,
                        const char* type_name, hsize_t& n);

// 1-D datasets; zero length is allowed.
template <class T>
void write_vector(const Loc& loc, const std::string& name, const std::vector<T>& v) {
  Dataset ds = create_dataset_1d(loc, name, TypeOf<T>::file(), v.size());
  // HDF5 rejects a null buffer even for zero elements, and there is nothing to write.
  if (v.empty()) return;
  check_status(H5Dwrite(ds.get(), TypeOf<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
               join(loc.name, name) + ": cannot write dataset");
}

template <class T>
std::vector<T> read_vector(const Loc& loc, const std::string& name) {
  hsize_t n = 0;
  Dataset ds = open_dataset_1d(loc, name, TypeOf<T>::kClass, TypeOf<T>::kName, n);
  std::vector<T> v(n);
  if (n == 0) return v;
  check_status(H5Dread(ds.get(), TypeOf<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
               join(loc.name, name) + ": cannot read dataset");
  return v;
}

// Columns of a record table: one dataset per member.
template <class Row, class T>
void write_column(const Loc& loc, const std::string& name, const std::vector<Row>& rows,
                  T Row::*member) {
  std::vector<T> column;
  column.reserve(rows.size());
  for (const Row& row : rows) column.push_back(row.*member);
  write_vector(loc, name, column);
}

// Reads one column into rows. The group's first column (first == true) sets
// the row count; every later one must have the same length.
template <class Row, class T>
void read_column(const Loc& loc, const std::string& name, std::vector<Row>& rows,
                 T Row::*member, bool first) {
  const std::vector<T> column = read_vector<T>(loc, name);
  if (first) {
    rows.assign(column.size(), Row{});
  } else if (column.size() != rows.size()) {
    throw Error(loc.name + ": column " + name + " has " + std::to_string(column.size()) +
                " rows, the first column has " + std::to_string(rows.size()));
  }
  for (std::size_t i = 0; i < column.size(); ++i) rows[i].*member = column[i];
}

// Writes "<path>.tmp.<pid>" through fill, flushes, closes, fsyncs and renames
// it onto path. On failure removes the temp file and throws "<path>: ...".
void atomic_write(const std::string& path, const std::function<void(const Loc&)>& fill);

// Opens path read-only for fn; errors are prefixed with "<path>: ".
void read_file(const std::string& path, const std::function<void(const Loc&)>& fn);

// The results layout under loc: root attributes on loc, groups beneath it.
void write_run_result(const Loc& loc, const RunResult& r);
RunResult read_run_result(const Loc& loc);

// Where a run ends, from its stored configuration (JSON text, as results
// files and single-learner checkpoints hold it). object: the text is a JSON
// object; max_epochs: the configured epochs plus one update's worth (an update
// takes at most n_sync epochs of samples: learners x batch <= training
// samples), negative when not configured; max_steps: 0 when unlimited.
struct RunEnd {
  bool object = false;
  double max_epochs = -1;
  std::int64_t max_steps = 0;
};
RunEnd run_end_of(const std::string& config_json);

// Current time as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_now_iso8601();

}  // namespace asgd::io::h5
