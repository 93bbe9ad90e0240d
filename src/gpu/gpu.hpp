#pragma once
// The native CUDA path: a model on one NVIDIA GPU, built from the same
// architecture (nn::ModelSpec) and flat parameter layout as the Kokkos model,
// with cuDNN (convolution, pooling, cross-map LRN, ReLU, softmax), cuBLAS
// (dense layers, weight transposes) and a few kernels of its own (update rule,
// dropout, loss, delta, and the ceil-mode pools / same-map LRN cuDNN cannot
// express). Plain C++ interface: no CUDA, Kokkos or MPI types.
//
// Built only with ASGD_ENABLE_CUDA (the `cuda` preset); otherwise
// built_with_cuda() is false, device_count() is 0 and constructing a Net
// throws asgd::Error saying how to build with CUDA.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/types.hpp"
#include "nn/spec.hpp"

namespace asgd::gpu {

bool built_with_cuda();
// CUDA devices this process sees (0 without CUDA, driver or device).
int device_count();

struct DeviceInfo {
  int index = -1;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  double memory_gib = 0;
  std::string cudnn_version, cublas_version, runtime_version;
  std::string describe() const;  // "cuda:0 NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
};
DeviceInfo device_info(int device);

// The device for a learner: ASGD_GPU_DEVICE=k wins; else index % device_count()
// where index is the learner's rank among the learners on its node (under
// Slurm with one GPU per task, CUDA_VISIBLE_DEVICES leaves one device: 0).
// Throws asgd::Error when no device is visible.
int pick_device(int node_learner_index);

struct Loss {
  double loss = 0;  // summed over the batch
  index_t wrong = 0;
};

class Net {
 public:
  // Allocates parameters, gradients, momentum, activations and workspaces for
  // batches up to max_batch on `device`, and makes it the current device.
  Net(const nn::ModelSpec& spec, index_t max_batch, int device);
  ~Net();
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  const DeviceInfo& device() const;
  index_t n_params() const;
  index_t max_batch() const;

  // Host staging of the flat buffers (n_params() floats; `host` may also be a
  // device pointer: copies use unified addressing). Each call waits for the
  // copy; its time is added to staging_s().
  void set_params(const real_t* host);
  void get_params(real_t* host);
  void get_grads(real_t* host);
  void set_momentum(const real_t* host);
  void get_momentum(real_t* host);
  // Page-locks host memory that set_params/get_grads use again and again (a
  // learner's weight buffer, its shared-memory gradient window), so copies
  // run at full DMA speed. Best effort: returns false if CUDA refuses.
  bool pin(void* host, std::size_t bytes);
  double staging_s() const;

  // Device pointers of the flat buffers (for CUDA-aware MPI).
  real_t* device_params();
  real_t* device_grads();

  void zero_grads();
  // Forward over n samples (x: n * input size floats, labels: n, both in host
  // memory); with backward, ADDS the gradient of the MEAN loss to the
  // gradient buffer. Dropout masks come from `seed` exactly as on the CPU.
  Loss forward_backward(index_t n, const real_t* x, const std::int32_t* labels, bool train,
                        std::uint64_t seed, bool backward);
  // inc = m*inc - lr*(grad_scale*g + wd*w); w += inc (the CPU kernel's rule).
  void sgd_update(real_t lr, real_t momentum, real_t weight_decay, real_t grad_scale = 1);
  // GPU A-SGD's n_sync: remember the fetched weights, later push the change.
  void keep_fetched();     // fetched := params
  void delta_to_grads();   // grads := params - fetched
  // Output of layer i for the first n samples of the last forward pass.
  std::vector<real_t> activation(std::size_t i, index_t n);
  void synchronize();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Same-run cuBLAS SGEMM rate (GFLOP/s) for m x m x m, the yardstick the GPU
// timings are compared with.
double sgemm_gflops(int device, int m, int repeats);

}  // namespace asgd::gpu
