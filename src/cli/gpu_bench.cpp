// asgd gpu-bench: training-step throughput of zoo models on one GPU through
// the native CUDA path, beside the same-run cuBLAS SGEMM rate.
#include "cli/gpu_bench.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "common/error.hpp"
#include "gpu/gpu.hpp"
#include "nn/model.hpp"

namespace asgd::cli {

namespace {

nn::Shape natural_input(const std::string& model) {
  if (model == "alexnet") return {227, 227, 3};
  if (model == "cifar10-18pct") return {32, 32, 3};
  return {28, 28, 1};
}

}  // namespace

int gpu_bench(const GpuBenchOptions& o) {
  if (!gpu::built_with_cuda() || gpu::device_count() == 0)
    throw Error(gpu::built_with_cuda()
                    ? "gpu-bench: no CUDA device visible on this machine"
                    : "gpu-bench: this asgd was built without CUDA; configure with `cmake --preset cuda`");
  const int dev = o.device >= 0 ? o.device : gpu::pick_device(0);
  const gpu::DeviceInfo info = gpu::device_info(dev);
  fmt::print("device {}\n", info.describe());
  const double sgemm = gpu::sgemm_gflops(dev, o.sgemm_size, 10);
  fmt::print("same-run cuBLAS SGEMM {}^3: {:.0f} GFLOP/s{}\n", o.sgemm_size, sgemm,
             std::getenv("ASGD_CUDA_TF32") ? " (TF32 allowed)" : " (FP32)");
  fmt::print("{:<14} {:>6} {:>12} {:>12} {:>10} {:>14}\n", "model", "batch", "samples/s",
             "GFLOP/s", "of SGEMM", "vs CPU learner");
  std::mt19937 gen(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const auto& name : o.models) {
    const nn::Shape in = natural_input(name);
    nn::Model m = nn::make_model(name, in, 10);
    m.finalize(o.batch);
    m.init(1);
    gpu::Net net(m.spec(), o.batch, dev);
    Kokkos::fence();
    net.set_params(m.params().data());
    constexpr int kPool = 4;  // a few distinct batches, generated up front
    std::vector<std::vector<real_t>> xs(kPool);
    std::vector<std::vector<std::int32_t>> ys(kPool);
    for (int b = 0; b < kPool; ++b) {
      xs[b].resize(static_cast<std::size_t>(o.batch * in.size()));
      for (auto& v : xs[b]) v = nd(gen);
      ys[b].resize(static_cast<std::size_t>(o.batch));
      for (auto& v : ys[b]) v = static_cast<std::int32_t>(gen() % 10);
    }
    auto step = [&](int i) {
      net.zero_grads();
      net.forward_backward(o.batch, xs[i % kPool].data(), ys[i % kPool].data(), true,
                           static_cast<std::uint64_t>(i), true);
      net.sgd_update(1e-4f, 0.9f, 5e-4f);
    };
    for (int i = 0; i < o.warmup; ++i) step(i);
    net.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.steps; ++i) step(i);
    net.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double rate = static_cast<double>(o.batch) * o.steps / s;
    const double gflops = rate * m.flops_per_sample_train() / 1e9;
    const std::string vs_cpu = name == "lenet" && o.cpu_lenet_samples_per_s > 0
                                   ? fmt::format("{:.1f}x", rate / o.cpu_lenet_samples_per_s)
                                   : "-";
    fmt::print("{:<14} {:>6} {:>12.0f} {:>12.0f} {:>9.1f}% {:>14}\n", name, o.batch, rate, gflops,
               100 * gflops / sgemm, vs_cpu);
  }
  if (o.cpu_lenet_samples_per_s > 0)
    fmt::print("vs CPU learner: lenet samples/s over {:.0f} (one CPU learner, 1 thread, batch 64, "
               "measured on the 2-vCPU dev machine; --cpu-samples-per-s to change)\n",
               o.cpu_lenet_samples_per_s);
  return 0;
}

}  // namespace asgd::cli
