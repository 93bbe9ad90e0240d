#pragma once
// One exception type for every bad input and failed operation; main() prints
// what() on one line and exits non-zero.
#include <stdexcept>
#include <string>

namespace asgd {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace asgd
