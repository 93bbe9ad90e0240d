#pragma once
// One interface for what a trainer does with a model, whatever runs it: the
// CPU engine (the Kokkos nn::Model) or the CUDA engine (gpu::Net, cuDNN and
// cuBLAS). Plain C++: no Kokkos, CUDA or MPI types. Drivers fill the host
// batch buffers, call forward_backward, and move parameters and gradients
// through the host buffers (or, with CUDA-aware MPI, the transfer pointers)
// without asking which device it is.
//
// Buffers: params() and grads() are host memory of n_params() floats, the
// flat layout of nn::ModelSpec. On the CPU they are the model's own buffers;
// on the GPU they are staging copies, synchronised at the points named below.
#include <cstdint>
#include <memory>
#include <string>

#include "common/types.hpp"
#include "nn/spec.hpp"

namespace asgd::engine {

struct Loss {
  double loss = 0;  // summed over the batch
  index_t wrong = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const std::string& device() const = 0;  // "cpu" or "cuda"
  // "cpu" or the GPU ("cuda:0 NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)").
  virtual std::string describe() const = 0;
  virtual const nn::ModelSpec& spec() const = 0;  // with n_params
  index_t n_params() const { return spec().n_params; }
  virtual index_t max_batch() const = 0;
  virtual std::string summary() const = 0;           // the model's layer table
  virtual double flops_per_sample_train() const = 0;  // forward + backward

  // Deterministic initial weights from seed (the CPU model's initialisation on
  // every device); params() holds them and the device has them.
  virtual void init(std::uint64_t seed) = 0;

  // Host flat buffers.
  virtual real_t* params() = 0;
  virtual real_t* grads() = 0;
  // Keeps the gradient in `memory` (n_params() floats, e.g. a shared-memory
  // window the servers read) instead of the engine's own host buffer.
  virtual void use_grad_memory(real_t* memory) = 0;
  // Reads the weights from `memory` (n_params() host floats that nothing
  // changes while this engine computes: the servers' shared windows, where the
  // protocol allows it) instead of copying them into params(); nullptr: back
  // to the engine's own buffer, which first takes what memory holds. Returns
  // whether the engine reads there (an engine with device memory does not:
  // it stages the weights to the device as before).
  virtual bool read_params_from(real_t* memory) = 0;
  // params() was written on the host (a pull, a checkpoint): the device takes it.
  virtual void params_changed() = 0;
  // Before params() is read on the host (checkpoint, final weights).
  virtual void params_to_host() = 0;
  // After synchronize(), before the gradient is pushed from grads().
  virtual void grads_ready() = 0;

  // Transfers that may use device memory (CUDA-aware MPI): set_direct(true)
  // asks for it; where the engine has device memory, transfer_params() and
  // transfer_grads() then are device pointers and params_changed() and
  // grads_ready() copy nothing. Otherwise they are params() and grads().
  // Returns whether transfers are direct.
  virtual bool set_direct(bool want) = 0;
  virtual real_t* transfer_params() = 0;
  virtual real_t* transfer_grads() = 0;
  // Page-locks the host buffers params() and grads() (call after
  // use_grad_memory) where that speeds up staging; best effort.
  virtual void pin_host_buffers() = 0;
  // Seconds spent copying between host and device so far (0 on the CPU).
  virtual double staging_s() const = 0;

  // Host input of the next batch: max_batch() * input size floats, max_batch() labels.
  virtual real_t* batch_x() = 0;
  virtual std::int32_t* batch_labels() = 0;
  // Forward over the first n samples of the batch buffers (dropout masks
  // from seed when train); when backward, ADDS the gradient of the MEAN loss.
  virtual Loss forward_backward(index_t n, bool train, std::uint64_t seed, bool backward) = 0;
  virtual void zero_grads() = 0;
  // inc = m*inc - lr*(grad_scale*g + wd*w); w += inc, with the engine's own
  // momentum buffer inc (zero at first).
  virtual void sgd_update(real_t lr, real_t momentum, real_t weight_decay,
                          real_t grad_scale = 1) = 0;
  virtual void set_momentum(const real_t* host) = 0;
  virtual void get_momentum(real_t* host) = 0;
  // n_sync: remember the fetched weights; later, grads := params - fetched.
  virtual void keep_fetched() = 0;
  virtual void delta_to_grads() = 0;
  // Waits for the queued work (a fence; the GPU stream).
  virtual void synchronize() = 0;
};

// The engine for `device` ("cpu" or "cuda") running `spec` for batches up
// to max_batch. node_learner_index chooses the GPU (gpu::pick_device). Throws
// asgd::Error for an unknown device, or "cuda" in a build without CUDA (the
// message says to build with the cuda preset).
std::unique_ptr<Engine> make_engine(const std::string& device, const nn::ModelSpec& spec,
                                    index_t max_batch, int node_learner_index = 0);

}  // namespace asgd::engine
