#include "io/h5_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace asgd::io::h5 {

void quiet_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

herr_t innermost_message(unsigned n, const H5E_error2_t* err, void* out) {
  // Walking upward, entry 0 is where the error was first detected.
  if (n == 0 && err->desc != nullptr) *static_cast<std::string*>(out) = err->desc;
  return 0;
}

std::string with_detail(const std::string& what) {
  const std::string detail = last_error();
  return detail.empty() ? what : what + " (" + detail + ")";
}

std::string attr_label(const Loc& loc, const std::string& name) {
  return "attribute " + name + " of " + loc.name;
}

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    case H5T_ENUM: return "enum";
    case H5T_VLEN: return "variable-length";
    default: return "other";
  }
}

Attribute open_attr(const Loc& loc, const std::string& name, H5T_class_t want, Datatype& ftype,
                    Dataspace& space) {
  if (!has_attribute(loc, name)) throw Error("missing " + attr_label(loc, name));
  Attribute a(check(H5Aopen(loc.id, name.c_str(), H5P_DEFAULT), "cannot open " + attr_label(loc, name)));
  ftype = Datatype(check(H5Aget_type(a.get()), "cannot get type of " + attr_label(loc, name)));
  const H5T_class_t got = H5Tget_class(ftype.get());
  if (got != want) {
    throw Error(attr_label(loc, name) + " is " + class_name(got) + ", expected " + class_name(want));
  }
  space = Dataspace(check(H5Aget_space(a.get()), "cannot get space of " + attr_label(loc, name)));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw Error(attr_label(loc, name) + " is not a single value");
  }
  return a;
}

void write_scalar_attr(const Loc& loc, const std::string& name, hid_t ftype, hid_t mtype, const void* v) {
  Dataspace space(check(H5Screate(H5S_SCALAR), "cannot create dataspace"));
  Attribute a(check(H5Acreate2(loc.id, name.c_str(), ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                    "cannot create " + attr_label(loc, name)));
  check_status(H5Awrite(a.get(), mtype, v), "cannot write " + attr_label(loc, name));
}

template <class T>
T read_scalar_attr(const Loc& loc, const std::string& name) {
  Datatype ftype;
  Dataspace space;
  Attribute a = open_attr(loc, name, TypeOf<T>::kClass, ftype, space);
  T v{};
  check_status(H5Aread(a.get(), TypeOf<T>::mem(), &v), "cannot read " + attr_label(loc, name));
  return v;
}

Datatype vlen_string_type() {
  Datatype t(check(H5Tcopy(H5T_C_S1), "cannot copy string type"));
  check_status(H5Tset_size(t.get(), H5T_VARIABLE), "cannot size string type");
  check_status(H5Tset_cset(t.get(), H5T_CSET_UTF8), "cannot set string character set");
  return t;
}

std::string errno_text(int err) { return std::strerror(err); }

// Size on disk of the file that holds obj; 0 when HDF5 cannot tell.
hsize_t file_size_of(hid_t obj) {
  File f(H5Iget_file_id(obj));
  hsize_t size = 0;
  if (!f.valid() || H5Fget_filesize(f.get(), &size) < 0) return 0;
  return size;
}

}  // namespace

std::string last_error() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_message, &message);
  return message;
}

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) throw Error(with_detail(what));
  return id;
}

void check_status(herr_t status, const std::string& what) {
  if (status < 0) throw Error(with_detail(what));
}

std::string join(const std::string& parent, const std::string& name) {
  if (parent.empty() || parent == "/") return "/" + name;
  return parent + "/" + name;
}

Group create_group(const Loc& parent, const std::string& name) {
  return Group(check(H5Gcreate2(parent.id, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     "cannot create group " + join(parent.name, name)));
}

Group open_group(const Loc& parent, const std::string& name) {
  const std::string full = join(parent.name, name);
  const htri_t exists = H5Lexists(parent.id, name.c_str(), H5P_DEFAULT);
  check_status(exists, "cannot look up group " + full);
  if (exists == 0) throw Error("missing group " + full);
  return Group(check(H5Gopen2(parent.id, name.c_str(), H5P_DEFAULT), "cannot open group " + full));
}

bool has_link(const Loc& loc, const std::string& name) {
  const htri_t exists = H5Lexists(loc.id, name.c_str(), H5P_DEFAULT);
  check_status(exists, "cannot look up " + join(loc.name, name));
  return exists > 0;
}

bool has_attribute(const Loc& loc, const std::string& name) {
  const htri_t exists = H5Aexists(loc.id, name.c_str());
  check_status(exists, "cannot look up " + attr_label(loc, name));
  return exists > 0;
}

void write_attr(const Loc& loc, const std::string& name, std::int32_t v) {
  write_scalar_attr(loc, name, TypeOf<std::int32_t>::file(), TypeOf<std::int32_t>::mem(), &v);
}

void write_attr(const Loc& loc, const std::string& name, std::int64_t v) {
  write_scalar_attr(loc, name, TypeOf<std::int64_t>::file(), TypeOf<std::int64_t>::mem(), &v);
}

void write_attr(const Loc& loc, const std::string& name, double v) {
  write_scalar_attr(loc, name, TypeOf<double>::file(), TypeOf<double>::mem(), &v);
}

void write_attr(const Loc& loc, const std::string& name, const std::string& v) {
  Datatype t = vlen_string_type();
  const char* p = v.c_str();
  write_scalar_attr(loc, name, t.get(), t.get(), &p);
}

std::int32_t read_attr_i32(const Loc& loc, const std::string& name) {
  return read_scalar_attr<std::int32_t>(loc, name);
}

std::int64_t read_attr_i64(const Loc& loc, const std::string& name) {
  return read_scalar_attr<std::int64_t>(loc, name);
}

double read_attr_f64(const Loc& loc, const std::string& name) { return read_scalar_attr<double>(loc, name); }

std::string read_attr_str(const Loc& loc, const std::string& name) {
  Datatype ftype;
  Dataspace space;
  Attribute a = open_attr(loc, name, H5T_STRING, ftype, space);
  const htri_t variable = H5Tis_variable_str(ftype.get());
  check_status(variable, "cannot inspect " + attr_label(loc, name));
  if (variable > 0) {
    Datatype mtype = vlen_string_type();
    check_status(H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get())), "cannot set string character set");
    char* buf = nullptr;
    check_status(H5Aread(a.get(), mtype.get(), &buf), "cannot read " + attr_label(loc, name));
    std::string s = buf != nullptr ? buf : "";
    H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, &buf);
    return s;
  }
  const std::size_t size = H5Tget_size(ftype.get());
  if (size == 0) throw Error("cannot get size of " + attr_label(loc, name));
  std::string s(size, '\0');
  check_status(H5Aread(a.get(), ftype.get(), s.data()), "cannot read " + attr_label(loc, name));
  s.resize(std::strlen(s.c_str()));
  if (H5Tget_strpad(ftype.get()) == H5T_STR_SPACEPAD) s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

Dataset create_dataset_1d(const Loc& loc, const std::string& name, hid_t type, hsize_t n) {
  Dataspace space(check(H5Screate_simple(1, &n, nullptr), "cannot create dataspace"));
  return Dataset(check(H5Dcreate2(loc.id, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                       "cannot create dataset " + join(loc.name, name)));
}

Dataset open_dataset_1d(const Loc& loc, const std::string& name, H5T_class_t type_class,
                        const char* type_name, hsize_t& n) {
  const std::string full = join(loc.name, name);
  const htri_t exists = H5Lexists(loc.id, name.c_str(), H5P_DEFAULT);
  check_status(exists, "cannot look up dataset " + full);
  if (exists == 0) throw Error("missing dataset " + full);
  Dataset ds(check(H5Dopen2(loc.id, name.c_str(), H5P_DEFAULT), "cannot open dataset " + full));
  Datatype ftype(check(H5Dget_type(ds.get()), "cannot get type of dataset " + full));
  const H5T_class_t got = H5Tget_class(ftype.get());
  if (got != type_class) {
    throw Error("dataset " + full + " is " + class_name(got) + ", expected " + type_name);
  }
  Dataspace space(check(H5Dget_space(ds.get()), "cannot get space of dataset " + full));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank != 1) throw Error("dataset " + full + " has rank " + std::to_string(rank) + ", expected 1");
  check_status(H5Sget_simple_extent_dims(space.get(), &n, nullptr), "cannot get size of dataset " + full);
  // A corrupt file can declare any length: refuse one the file cannot hold
  // before anything is allocated for it. Contiguous and compact data are
  // stored whole; chunked data may be compressed (h5repack, h5py), and
  // deflate packs at most 1032 bytes into one.
  const std::size_t elem = H5Tget_size(ftype.get());
  PropList dcpl(H5Dget_create_plist(ds.get()));
  const bool chunked = dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED;
  if (const hsize_t file = file_size_of(ds.get()); file > 0 && elem > 0) {
    const long double most = static_cast<long double>(file) * (chunked ? 1032 : 1);
    if (static_cast<long double>(n) * static_cast<long double>(elem) > most)
      throw Error("dataset " + full + " declares " + std::to_string(n) + " values of " + std::to_string(elem) +
                  " bytes, more than the file's " + std::to_string(file) + " bytes can hold (a corrupt file)");
  }
  return ds;
}

void atomic_write(const std::string& path, const std::function<void(const Loc&)>& fill) {
  quiet_errors();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // rename(2) would refuse too, but only after the whole file was written.
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0 && S_ISDIR(target.st_mode)) {
    throw Error(path + ": is a directory, cannot replace it with a file");
  }
  // Probe with open(2) first: HDF5's own message for a missing or read-only
  // folder does not carry errno.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw Error(path + ": cannot create " + tmp + ": " + errno_text(errno));
  ::close(fd);
  try {
    {
      PropList fapl(check(H5Pcreate(H5P_FILE_ACCESS), "cannot create file access list"));
      // SEMI makes H5Fclose fail if an object is still open, instead of
      // silently deferring the close (and the final metadata write) past rename.
      check_status(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_SEMI), "cannot set close degree");
      File file(check(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
                      "cannot create HDF5 file " + tmp));
      fill(Loc{file.get(), "/"});
      check_status(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "cannot flush " + tmp);
      check_status(file.close(), "cannot close " + tmp);
    }
    // Data on disk before the rename, so a crash leaves the old or the new file.
    const int sync_fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (sync_fd < 0) throw Error("cannot reopen " + tmp + ": " + errno_text(errno));
    const int sync_rc = ::fsync(sync_fd);
    const int sync_errno = errno;
    ::close(sync_fd);
    if (sync_rc != 0) throw Error("cannot sync " + tmp + ": " + errno_text(sync_errno));
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw Error("cannot rename " + tmp + " to " + path + ": " + errno_text(errno));
    }
  } catch (const Error& e) {
    std::remove(tmp.c_str());
    throw Error(path + ": " + e.what());
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  // Best effort: makes the rename itself durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void read_file(const std::string& path, const std::function<void(const Loc&)>& fn) {
  quiet_errors();
  // stat(2) before open(2): opening a pipe with no writer would block forever.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot open: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory, not a file");
  if (!S_ISREG(st.st_mode)) throw Error(path + ": is not a regular file (a device, pipe or socket)");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + errno_text(errno));
  ::close(fd);
  try {
    File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!file.valid()) throw Error(with_detail("not a readable HDF5 file"));
    fn(Loc{file.get(), "/"});
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace asgd::io::h5
