// The CUDA path when asgd is built without CUDA (the default, CPU-only
// presets): no device, and asking for one says how to get it.
#include "common/error.hpp"
#include "gpu/gpu.hpp"

namespace asgd::gpu {

namespace {
[[noreturn]] void no_cuda() {
  throw Error(
      "--device cuda: this asgd was built without CUDA; configure with `cmake --preset cuda` "
      "(ASGD_ENABLE_CUDA=ON, CUDA toolkit with cuDNN and cuBLAS) to train on NVIDIA GPUs");
}
}  // namespace

struct Net::Impl {};

bool built_with_cuda() { return false; }
int device_count() { return 0; }
std::string DeviceInfo::describe() const { return "no CUDA"; }
DeviceInfo device_info(int) { no_cuda(); }
int pick_device(int) { no_cuda(); }
double sgemm_gflops(int, int, int) { no_cuda(); }

Net::Net(const nn::ModelSpec&, index_t, int) { no_cuda(); }
Net::~Net() = default;
const DeviceInfo& Net::device() const { no_cuda(); }
index_t Net::n_params() const { no_cuda(); }
index_t Net::max_batch() const { no_cuda(); }
void Net::set_params(const real_t*) { no_cuda(); }
void Net::get_params(real_t*) { no_cuda(); }
void Net::get_grads(real_t*) { no_cuda(); }
void Net::set_momentum(const real_t*) { no_cuda(); }
void Net::get_momentum(real_t*) { no_cuda(); }
bool Net::pin(void*, std::size_t) { no_cuda(); }
double Net::staging_s() const { no_cuda(); }
real_t* Net::device_params() { no_cuda(); }
real_t* Net::device_grads() { no_cuda(); }
void Net::zero_grads() { no_cuda(); }
Loss Net::forward_backward(index_t, const real_t*, const std::int32_t*, bool, std::uint64_t, bool) {
  no_cuda();
}
void Net::sgd_update(real_t, real_t, real_t, real_t) { no_cuda(); }
void Net::keep_fetched() { no_cuda(); }
void Net::delta_to_grads() { no_cuda(); }
std::vector<real_t> Net::activation(std::size_t, index_t) { no_cuda(); }
void Net::synchronize() { no_cuda(); }

}  // namespace asgd::gpu
