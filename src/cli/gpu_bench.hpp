#pragma once
#include <string>
#include <vector>

#include "common/types.hpp"

namespace asgd::cli {

struct GpuBenchOptions {
  std::vector<std::string> models{"lenet", "alexnet"};
  index_t batch = 64;
  int steps = 50, warmup = 5;
  int device = -1;  // -1: the first learner's choice (ASGD_GPU_DEVICE or 0)
  int sgemm_size = 8192;
  double cpu_lenet_samples_per_s = 957;  // one CPU learner of a 2-vCPU VM (1 thread, batch 64): give your own
};

// Prints the device, the same-run SGEMM rate and one line per model. Throws
// asgd::Error without CUDA or without a device.
int gpu_bench(const GpuBenchOptions& o);

}  // namespace asgd::cli
