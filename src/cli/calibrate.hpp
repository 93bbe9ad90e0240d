#pragma once
// asgd calibrate (calibrate.cpp): a machine profile measured with the
// project's own code.
#include <string>
#include <vector>

#include "common/types.hpp"
#include "perf/profile.hpp"

namespace asgd::cli {

struct CalibrateOptions {
  std::string out = "profile.yaml", name, mpiexec = "mpiexec";
  std::vector<std::string> models{"lenet", "cifar10-18pct", "mlp"};
  std::vector<int> batches{64};
  int threads = 1, steps = 10;
  double inject_update_s = 0, inject_byte_s = 0;
  std::string link_probe;   // hidden: this rank is one of the link probe's two
  std::string cores_probe;  // hidden: this rank is one of the cores probe's (cores + 1)
  index_t largest = 1 << 20;
};

int cmd_calibrate(const CalibrateOptions& o);
// Under mpiexec -n 2: the push + pull times, written as JSON to out by rank 0.
int cmd_calibrate_probe(const std::string& out, index_t largest);
// Under mpiexec -n C+1: C ranks time minibatches of the first model alone
// (rank 1) then together, while rank 0 waits politely; JSON to out.
int cmd_calibrate_cores_probe(const CalibrateOptions& o);

}  // namespace asgd::cli
