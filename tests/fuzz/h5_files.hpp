#pragma once
// The HDF5 targets: the fuzzed bytes are written as a file and read back by
// the project's reader, as `asgd report`, `asgd validate` and a resuming
// `asgd train` do. Each input gets a new file name, so that HDF5 can never
// hand back a file it still has open from an earlier input; after the reader
// returns, no HDF5 object may be left open (a leaked handle keeps the file
// open and, on the next open of that path, stale metadata in use).
#include <hdf5.h>

#include <cstdio>

#include "fuzz_util.hpp"

namespace asgd::fuzz {

template <class Read>
void read_h5(const std::uint8_t* data, std::size_t size, Read&& read) {
  static unsigned long counter = 0;
  const std::string path = work_dir() + "/in" + std::to_string(counter++ % 1000000) + ".h5";
  write_file(path, as_text(data, size));
  read(path);
  std::remove(path.c_str());
  const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open != 0) bug(std::to_string(open) + " HDF5 objects left open after the reader returned");
}

}  // namespace asgd::fuzz
