// The CUDA devices: how many this process sees, what each is, which one a
// learner takes, and the cuBLAS SGEMM yardstick (gpu.hpp).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gpu/cuda_util.hpp"
#include "gpu/gpu.hpp"

namespace asgd::gpu {

using namespace detail;  // NOLINT(google-build-using-namespace): src/gpu's own helpers

bool built_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error here
    return 0;
  }
  return n;
}

std::string DeviceInfo::describe() const {
  return fmt::format("cuda:{} {} (sm_{}{}, {} SMs, {:.1f} GiB; CUDA runtime {}, cuDNN {}, cuBLAS {})",
                     index, name, cc_major, cc_minor, multiprocessors, memory_gib, runtime_version,
                     cudnn_version, cublas_version);
}

DeviceInfo device_info(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  const std::size_t dnn = cudnnGetVersion();
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return {.index = device, .name = p.name, .cc_major = p.major, .cc_minor = p.minor,
          .multiprocessors = p.multiProcessorCount,
          .memory_gib = static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
          .cudnn_version = fmt::format("{}.{}.{}", dnn / 10000, dnn % 10000 / 100, dnn % 100),
          .cublas_version = fmt::format("{}.{}.{}", major, minor, patch),
          .runtime_version = fmt::format("{}.{}", rt / 1000, rt % 1000 / 10)};
}

int pick_device(int node_learner_index) {
  const int n = device_count();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (n == 0)
    throw Error(fmt::format("--device cuda: no CUDA device visible (CUDA_VISIBLE_DEVICES={})",
                            visible ? visible : "unset"));
  if (const char* forced = std::getenv("ASGD_GPU_DEVICE")) {
    char* end = nullptr;
    const long k = std::strtol(forced, &end, 10);
    if (end == forced || *end != '\0' || k < 0 || k >= n)
      throw Error(fmt::format("ASGD_GPU_DEVICE={}: not a device index in [0, {})", forced, n));
    return static_cast<int>(k);
  }
  return std::max(node_learner_index, 0) % n;
}

double sgemm_gflops(int device, int m, int repeats) {
  check(cudaSetDevice(device), "cudaSetDevice");
  const auto len = static_cast<std::size_t>(m) * static_cast<std::size_t>(m);
  DevBuf<float> a(len), b(len), c(len);
  check(cudaMemset(a.get(), 0, len * sizeof(float)), "cudaMemset");
  check(cudaMemset(b.get(), 0, len * sizeof(float)), "cudaMemset");
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  float ms = 0;
  try {
    check(cublasSetMathMode(h, env_on("ASGD_CUDA_TF32") ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "cublasSetMathMode");
    for (int i = 0; i < 2; ++i)
      check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &kOne, a.get(), m, b.get(), m, &kZero,
                        c.get(), m),
            "cublasSgemm");
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    check(cudaEventRecord(e0), "cudaEventRecord");
    for (int i = 0; i < repeats; ++i)
      check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &kOne, a.get(), m, b.get(), m, &kZero,
                        c.get(), m),
            "cublasSgemm");
    check(cudaEventRecord(e1), "cudaEventRecord");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  } catch (...) {
    cublasDestroy(h);
    throw;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasDestroy(h);
  return 2.0 * static_cast<double>(m) * m * m * repeats / (static_cast<double>(ms) * 1e-3) / 1e9;
}

}  // namespace asgd::gpu
