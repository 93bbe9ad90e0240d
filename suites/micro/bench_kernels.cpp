// Micro-benchmarks of every layer of lenet and cifar10-18pct at batch 64,
// forward and backward, as GFLOP/s, beside a same-run sgemm reference
// (1024^3 through KokkosBlas, i.e. the system BLAS). Each benchmark runs the
// layer once untimed (validation that it runs and yields finite output), then
// times with fences on both sides (manual time).
//
// After the runs a table gives each conv/dense layer's forward+backward
// GFLOP/s as a fraction of the sgemm reference, and paired: against the median
// of ten 1024^3 sgemms timed just before and just after the layer (robust to
// this VM's drift in speed during the run). <model>/step is a whole training
// step, <model>/update its memory-bound part (zeroing the gradients and the
// SGD update, GB/s), triad/N a STREAM-like a = b + s c over arrays of N floats
// (GB/s): 16 Mi, beyond the caches, and each model's parameter count, the
// footprint of its update: the memory-bound phases' limit. A second table breaks each
// step into its phases (the layers' forward and backward passes, the update,
// the rest: the loss, fences, what lies between the layers), each against
// its limit in the same run (sgemm's rate for the passes, triad's for the
// update). A third times each layer inside whole steps beside the layer
// alone: where the step's sequence (inputs that come from the layer before,
// the model's 13 MB of weights, gradients and momentum going out of cache
// between passes) makes a layer slower than its own benchmark, which is the
// "rest" of the second table.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/blas_env.hpp"
#include "common/error.hpp"
#include "common/runinfo.hpp"
#include "kernels/kernels.hpp"
#include "nn/model.hpp"

namespace {

using asgd::index_t;
using asgd::real_t;
using asgd::nn::Space;
using asgd::nn::View;
using Clock = std::chrono::steady_clock;

constexpr index_t kBatch = 64;

struct Bench {
  std::unique_ptr<asgd::nn::Model> model;
  View x, dy, dx;
};

std::map<std::string, Bench>& benches() {
  static std::map<std::string, Bench> b;
  return b;
}

Bench& get(const std::string& name) {
  auto& all = benches();
  auto it = all.find(name);
  if (it != all.end()) return it->second;
  asgd::nn::Shape in = name == "lenet" ? asgd::nn::Shape{28, 28, 1} : asgd::nn::Shape{32, 32, 3};
  Bench b;
  b.model = std::make_unique<asgd::nn::Model>(asgd::nn::make_model(name, in, 10));
  b.model->finalize(kBatch);
  b.model->init(7);
  index_t widest = in.size();
  for (const auto& l : b.model->layers()) widest = std::max(widest, l->out_shape().size());
  b.x = View("bench::x", kBatch * in.size());
  b.dy = View("bench::dy", kBatch * widest);
  b.dx = View("bench::dx", kBatch * widest);
  auto fill = [](const View& v, std::uint64_t seed) {
    Kokkos::parallel_for(
        "bench::fill", Kokkos::RangePolicy<Space>(0, v.extent(0)), KOKKOS_LAMBDA(index_t i) {
          v(i) = asgd::kernels::hash_uniform(seed, static_cast<std::uint64_t>(i)) - real_t(0.5);
        });
  };
  fill(b.x, 1);
  fill(b.dy, 2);
  asgd::nn::IView labels("bench::labels", kBatch);
  b.model->forward_backward(kBatch, b.x, labels, {true, 3}, false);
  Kokkos::fence();
  return all.emplace(name, std::move(b)).first->second;
}

double elapsed(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

enum class Pass { forward, backward, both };

// The 1024^3 sgemm operands, freed with the benches before Kokkos finalizes.
struct SgemmOperands {
  asgd::kernels::View2<Space> a, b, c;
};
std::unique_ptr<SgemmOperands>& sgemm_operands() {
  static std::unique_ptr<SgemmOperands> ops;
  return ops;
}

// GFLOP/s of one 1024^3 sgemm through KokkosBlas, timed now. The fused
// forward+backward benchmarks time a few before and after the layer, so each
// layer is also compared with the BLAS speed of the same moment (this VM's
// speed drifts by 10% and more over a minute).
// The sgemm reference runs on OpenBLAS's own threads (as many as --threads):
// an OpenMP build keeps the BLAS at 1 thread otherwise (kernels split GEMMs).
int g_threads = 1;
struct ReferenceBlasThreads {
  using Set = void (*)(int);
  Set set = reinterpret_cast<Set>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  ReferenceBlasThreads() {
    if (set) set(g_threads);
  }
  ~ReferenceBlasThreads() { asgd::set_blas_threads(g_threads); }
};

double sgemm_gflops_now() {
  ReferenceBlasThreads blas_threads;
  constexpr index_t n = 1024;
  auto& ops = sgemm_operands();
  if (!ops) {
    using M = asgd::kernels::View2<Space>;
    ops = std::make_unique<SgemmOperands>(SgemmOperands{M("a", n, n), M("b", n, n), M("c", n, n)});
    Kokkos::deep_copy(ops->a, real_t(1));
    Kokkos::deep_copy(ops->b, real_t(2));
  }
  Kokkos::fence();
  const auto t0 = Clock::now();
  KokkosBlas::gemm("N", "N", real_t(1), ops->a, ops->b, real_t(0), ops->c);
  Kokkos::fence();
  return 2.0 * n * n * n * 1e-9 / elapsed(t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.empty() ? 0.0 : v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

void bm_layer(benchmark::State& state, const std::string& model, std::size_t li, Pass pass) {
  Bench& b = get(model);
  auto& layer = *b.model->layers()[li];
  const View& in = li == 0 ? b.x : b.model->activation(li - 1);
  const View& out = b.model->activation(li);
  const View dx = li == 0 ? View() : b.dx;
  asgd::nn::Context ctx{true, 5};
  // validation: one untimed pass, outputs must be finite
  layer.forward(kBatch, in, out, ctx);
  layer.backward(kBatch, in, out, b.dy, dx);
  Kokkos::fence();
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  for (index_t i = 0; i < kBatch * layer.out_shape().size(); ++i)
    if (!std::isfinite(host(i))) {
      state.SkipWithError("non-finite layer output");
      return;
    }
  double flops = 0;
  if (pass != Pass::backward) flops += layer.flops_forward(kBatch);
  if (pass != Pass::forward) flops += layer.flops_backward(kBatch, li != 0);
  std::vector<double> sgemm;  // GFLOP/s of sgemms timed just before and just after
  auto time_sgemm = [&] {
    for (int i = 0; i < 5 && pass == Pass::both; ++i) sgemm.push_back(sgemm_gflops_now());
  };
  time_sgemm();
  // the layer's own data back in cache
  if (pass != Pass::backward) layer.forward(kBatch, in, out, ctx);
  if (pass != Pass::forward) layer.backward(kBatch, in, out, b.dy, dx);
  double total_s = 0;
  for (auto _ : state) {
    Kokkos::fence();
    const auto t0 = Clock::now();
    if (pass != Pass::backward) layer.forward(kBatch, in, out, ctx);
    if (pass != Pass::forward) layer.backward(kBatch, in, out, b.dy, dx);
    Kokkos::fence();
    const double t = elapsed(t0);
    state.SetIterationTime(t);
    total_s += t;
  }
  time_sgemm();
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (pass == Pass::both && total_s > 0)
    state.counters["of_sgemm"] =
        flops * 1e-9 * static_cast<double>(state.iterations()) / total_s / median(sgemm);
}

void bm_sgemm(benchmark::State& state) {
  const index_t n = state.range(0);
  using M = asgd::kernels::View2<Space>;
  M a("a", n, n), b("b", n, n), c("c", n, n);
  Kokkos::deep_copy(a, real_t(1));
  Kokkos::deep_copy(b, real_t(2));
  KokkosBlas::gemm("N", "N", real_t(1), a, b, real_t(0), c);
  Kokkos::fence();
  auto hc = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  if (hc(0, 0) != real_t(2 * n)) {
    state.SkipWithError("sgemm reference gave a wrong result");
    return;
  }
  ReferenceBlasThreads blas_threads;
  for (auto _ : state) {
    Kokkos::fence();
    const auto t0 = Clock::now();
    KokkosBlas::gemm("N", "N", real_t(1), a, b, real_t(0), c);
    Kokkos::fence();
    state.SetIterationTime(elapsed(t0));
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The step's memory-bound part: zeroing the gradients and the SGD update with
// momentum over every parameter, as GB/s of the six streams of n_params floats
// they read or write (zero: g; update: g, inc, w read, inc, w written).
// The step's SGD update (a tiny rate, momentum 0.9) with the momentum buffer inc.
void sgd_update(asgd::nn::Model& m, const View& inc) {
  asgd::kernels::sgd_update<Space>(m.n_params(), real_t(1e-6), real_t(0.9), real_t(0), m.grads(),
                                   inc, m.params());
}

void bm_update(benchmark::State& state, const std::string& model) {
  Bench& b = get(model);
  asgd::nn::Model& m = *b.model;
  View inc("bench::inc", m.n_params());
  auto update = [&] {
    m.zero_grads();
    sgd_update(m, inc);
  };
  update();
  for (auto _ : state) {
    Kokkos::fence();
    const auto t0 = Clock::now();
    update();
    Kokkos::fence();
    state.SetIterationTime(elapsed(t0));
  }
  state.counters["GB/s"] = benchmark::Counter(6.0 * sizeof(real_t) * static_cast<double>(m.n_params()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// a[i] = b[i] + s c[i] over three arrays of range(0) floats, as GB/s of the
// 12 bytes per element read or written.
void bm_triad(benchmark::State& state) {
  const index_t n = state.range(0);
  View a("triad::a", n), b("triad::b", n), c("triad::c", n);
  Kokkos::deep_copy(b, real_t(1));
  Kokkos::deep_copy(c, real_t(2));
  const real_t s = 3;
  auto triad = [&] {
    Kokkos::parallel_for(
        "bench::triad", Kokkos::RangePolicy<Space>(0, n), KOKKOS_LAMBDA(index_t i) { a(i) = b(i) + s * c(i); });
    Kokkos::fence();
  };
  triad();
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Kokkos::subview(a, std::make_pair(index_t(0), index_t(1))));
  if (h(0) != real_t(7)) {
    state.SkipWithError("triad gave a wrong result");
    return;
  }
  for (auto _ : state) {
    const auto t0 = Clock::now();
    triad();
    state.SetIterationTime(elapsed(t0));
  }
  state.counters["GB/s"] =
      benchmark::Counter(12.0 * static_cast<double>(n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// One whole training step of a model at batch 64 (forward, loss, backward,
// the SGD update), as GFLOP/s of the model's forward+backward FLOPs, paired
// with sgemms timed just before and after, like the layers.
void bm_step(benchmark::State& state, const std::string& model) {
  Bench& b = get(model);
  asgd::nn::Model& m = *b.model;
  asgd::nn::IView labels("bench::labels", kBatch);
  View inc("bench::inc", m.n_params());
  const double flops = m.flops_per_sample_train() * kBatch;
  auto step = [&] {
    m.zero_grads();
    m.forward_backward(kBatch, b.x, labels, {true, 3}, true);  // with the backward pass
    sgd_update(m, inc);
  };
  std::vector<double> sgemm;
  for (int i = 0; i < 5; ++i) sgemm.push_back(sgemm_gflops_now());
  step();
  Kokkos::fence();
  double total_s = 0;
  for (auto _ : state) {
    Kokkos::fence();
    const auto t0 = Clock::now();
    step();
    Kokkos::fence();
    const double t = elapsed(t0);
    state.SetIterationTime(t);
    total_s += t;
  }
  for (int i = 0; i < 5; ++i) sgemm.push_back(sgemm_gflops_now());
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (total_s > 0)
    state.counters["of_sgemm"] =
        flops * 1e-9 * static_cast<double>(state.iterations()) / total_s / median(sgemm);
}

// `--threads T` (or `--threads=T`): T threads for Kokkos and the BLAS
// together, as `asgd train --threads` (default 1); removed from argv.
int take_threads(int& argc, char** argv) {
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    int used = 0;
    std::string value;
    if (a == "--threads") {
      value = i + 1 < argc ? argv[i + 1] : "";
      used = i + 1 < argc ? 2 : 1;
    } else if (a.rfind("--threads=", 0) == 0) {
      value = a.substr(10);
      used = 1;
    }
    if (used == 0) continue;
    const bool digits = !value.empty() && value.size() <= 4 &&
                        value.find_first_not_of("0123456789") == std::string::npos;
    threads = digits ? std::stoi(value) : 0;
    if (threads < 1 || threads > asgd::kMaxThreadsPerRank) {
      fmt::print(stderr, "asgd_micro: --threads '{}': want a whole number in 1..{}\n", value,
                 asgd::kMaxThreadsPerRank);
      std::exit(2);
    }
    for (int j = i; j + used <= argc; ++j) argv[j] = argv[j + used];
    argc -= used;
    --i;
  }
  return threads;
}

// Prints the usual console output and keeps GFLOP/s per benchmark name.
class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      auto it = r.counters.find("GFLOP/s");
      // run_name.function_name is the registered name, without the /min_time... suffixes
      if (it != r.counters.end()) gflops[r.run_name.function_name] = it->second.value;
      auto paired = r.counters.find("of_sgemm");
      if (paired != r.counters.end()) of_sgemm[r.run_name.function_name] = paired->second.value;
      auto bw = r.counters.find("GB/s");
      // by name and argument: triad/16777216, triad/<a model's parameter count>
      if (bw != r.counters.end())
        gbps[r.run_name.function_name + (r.run_name.args.empty() ? "" : "/" + r.run_name.args)] = bw->second.value;
      // manual time: the accumulated real time is the timed part alone
      if (r.iterations > 0)
        seconds[r.run_name.function_name] = r.real_accumulated_time / static_cast<double>(r.iterations);
    }
  }
  std::map<std::string, double> gflops, of_sgemm, gbps, seconds;
};

// The step of each model by phase: its layers' forward and backward passes
// (each layer timed alone), the update, and the rest of the step, each in ms
// and against the same run's limit: the passes' FLOPs at sgemm's rate, the
// update's six streams of floats at triad's rate.
void print_in_step(const Reporter& rep, const std::string& model);

void print_phases(const Reporter& rep, double sgemm_gflops) {
  fmt::print("\n{:<42} {:>9} {:>8} {:>11} {:>9}\n", "step by phase (batch 64)", "ms", "of step", "limit ms",
             "of limit");
  auto row = [](const std::string& what, double ms, double step_ms, double limit_ms) {
    fmt::print("{:<42} {:>9.3f} {:>7.0f}% {:>11.3f} {:>8.0f}%\n", what, ms, 100 * ms / step_ms, limit_ms,
               limit_ms > 0 && ms > 0 ? 100 * limit_ms / ms : 0.0);
  };
  std::vector<std::string> whole;  // the models with every part measured
  for (const std::string model : {"lenet", "cifar10-18pct"}) {
    const auto step = rep.seconds.find(model + "/step");
    const auto update = rep.seconds.find(model + "/update");
    if (step == rep.seconds.end() || update == rep.seconds.end()) continue;
    Bench& b = get(model);
    double fwd = 0, bwd = 0, fwd_flops = 0, bwd_flops = 0;
    bool all = true;
    for (std::size_t i = 0; i < b.model->layers().size(); ++i) {
      const auto& l = *b.model->layers()[i];
      const std::string base = fmt::format("{}/{}", model, l.name());
      const auto f = rep.seconds.find(base + "/forward"), k = rep.seconds.find(base + "/backward");
      if (f == rep.seconds.end() || k == rep.seconds.end()) {
        all = false;
        break;
      }
      fwd += f->second;
      bwd += k->second;
      fwd_flops += l.flops_forward(kBatch);
      bwd_flops += l.flops_backward(kBatch, i != 0);
    }
    if (!all) continue;  // a filter left some layers out: no breakdown
    whole.push_back(model);
    const double T = 1e3 * step->second, rate = sgemm_gflops * 1e9;
    const auto triad = rep.gbps.find(fmt::format("triad/{}", b.model->n_params()));
    const double triad_gbps = triad == rep.gbps.end() ? 0 : triad->second;
    const double update_limit = triad_gbps > 0
                                    ? 1e3 * 6.0 * sizeof(real_t) * static_cast<double>(b.model->n_params()) /
                                          (triad_gbps * 1e9)
                                    : 0;
    row(model + " forward (layers)", 1e3 * fwd, T, 1e3 * fwd_flops / rate);
    row(model + " backward (layers)", 1e3 * bwd, T, 1e3 * bwd_flops / rate);
    row(model + " update (zero + SGD)", 1e3 * update->second, T, update_limit);
    row(model + " rest (loss, between layers)", T - 1e3 * (fwd + bwd + update->second), T, 0);
    row(model + " step", T, T, 1e3 * (fwd_flops + bwd_flops) / rate + update_limit);
    fmt::print("{:<42} triad over {} floats: {:.1f} GB/s\n", "", b.model->n_params(), triad_gbps);
  }
  fmt::print("limit: the passes' FLOPs at the sgemm reference's rate, the update's 6 streams of floats at the "
             "rate of a triad of the same length; of limit = limit / measured\n");
  for (const auto& model : whole) print_in_step(rep, model);
}

// Each layer inside whole steps: the step's own sequence (zero the
// gradients, the layers forward, the loss, the layers backward, the update)
// with a fence and a clock read after each part, the median of `rounds` steps
// after one to warm up. Beside each layer alone (its benchmark, which runs it
// over and over with its data in cache) it shows what the step's sequence
// costs each layer: its inputs come from the layer before, not from cache.
struct InStep {
  std::vector<double> fwd, bwd;  // per layer, seconds
  double loss = 0, update = 0, step = 0;
};

InStep time_in_step(const std::string& model, int rounds) {
  Bench& b = get(model);
  asgd::nn::Model& m = *b.model;
  const auto& layers = m.layers();
  const std::size_t nl = layers.size();
  asgd::nn::IView labels("bench::labels", kBatch);
  View inc("bench::inc", m.n_params());
  View dy("bench::in_step_dy", b.dy.extent(0)), dx("bench::in_step_dx", b.dx.extent(0));
  std::vector<std::vector<double>> f(nl), k(nl);
  std::vector<double> loss, update, step;
  auto t = Clock::now();
  auto lap = [&t] {
    Kokkos::fence();
    const auto now = Clock::now();
    const double s = std::chrono::duration<double>(now - t).count();
    t = now;
    return s;
  };
  for (int r = 0; r <= rounds; ++r) {
    Kokkos::fence();
    const auto t0 = t = Clock::now();
    m.zero_grads();
    double upd = lap();
    std::vector<double> fr(nl), kr(nl);
    for (std::size_t i = 0; i < nl; ++i) {
      layers[i]->forward(kBatch, i == 0 ? b.x : m.activation(i - 1), m.activation(i), {true, 3});
      fr[i] = lap();
    }
    asgd::kernels::softmax_xent<Space>(kBatch, m.classes(), m.activation(nl - 1), labels,
                                       real_t(1) / static_cast<real_t>(kBatch), dy);
    const double ls = lap();
    View g = dy, h = dx;
    for (std::size_t i = nl; i-- > 0;) {
      layers[i]->backward(kBatch, i == 0 ? b.x : m.activation(i - 1), m.activation(i), g, i == 0 ? View() : h);
      kr[i] = lap();
      std::swap(g, h);
    }
    sgd_update(m, inc);
    upd += lap();
    if (r == 0) continue;  // the warm-up step
    for (std::size_t i = 0; i < nl; ++i) {
      f[i].push_back(fr[i]);
      k[i].push_back(kr[i]);
    }
    loss.push_back(ls);
    update.push_back(upd);
    step.push_back(std::chrono::duration<double>(t - t0).count());
  }
  InStep out{{}, {}, median(loss), median(update), median(step)};
  for (std::size_t i = 0; i < nl; ++i) {
    out.fwd.push_back(median(f[i]));
    out.bwd.push_back(median(k[i]));
  }
  return out;
}

// The layers of one model in the step against alone, in ms; the rows where the
// two differ most are where the "rest" of the phases table goes.
void print_in_step(const Reporter& rep, const std::string& model) {
  Bench& b = get(model);
  const InStep in = time_in_step(model, 9);
  fmt::print("\n{:<42} {:>9} {:>9} {:>9} {:>9}\n", model + " in the step (median of 9)", "alone ms",
             "in step", "extra ms", "of step");
  double alone_sum = 0, extra_sum = 0;
  auto row = [&](const std::string& what, double alone, double inside) {
    fmt::print("{:<42} {:>9.3f} {:>9.3f} {:>9.3f} {:>8.0f}%\n", what, 1e3 * alone, 1e3 * inside,
               1e3 * (inside - alone), 100 * inside / in.step);
    alone_sum += alone;
    extra_sum += inside - alone;
  };
  const auto& layers = b.model->layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto f = rep.seconds.find(model + "/" + layers[i]->name() + "/forward");
    if (f != rep.seconds.end()) row(layers[i]->name() + " forward", f->second, in.fwd[i]);
  }
  fmt::print("{:<42} {:>9} {:>9.3f}\n", "loss", "", 1e3 * in.loss);
  for (std::size_t i = layers.size(); i-- > 0;) {
    const auto k = rep.seconds.find(model + "/" + layers[i]->name() + "/backward");
    if (k != rep.seconds.end()) row(layers[i]->name() + " backward", k->second, in.bwd[i]);
  }
  if (const auto u = rep.seconds.find(model + "/update"); u != rep.seconds.end())
    row("update (zero + SGD)", u->second, in.update);
  fmt::print("{:<42} {:>9.3f} {:>9.3f} {:>9.3f}\n", "step (parts timed apart; the sum)", 1e3 * alone_sum,
             1e3 * in.step, 1e3 * extra_sum);
}

}  // namespace

int main(int argc, char** argv) {
  asgd::ensure_blas_core(argc, argv);
  const int threads = take_threads(argc, argv);
  try {  // OMP_NUM_THREADS and the OpenMP runtime's limits, as `asgd train` checks them
    g_threads = asgd::kokkos_threads(threads);
  } catch (const asgd::Error& e) {
    fmt::print(stderr, "asgd_micro: {}\n", e.what());
    return 2;
  }
  asgd::set_blas_threads(threads);
  {
    Kokkos::InitArguments args;
    args.disable_warnings = true;
    args.num_threads = g_threads;
    Kokkos::initialize(args);
  }
  int rc = 0;
  {
    benchmark::Initialize(&argc, argv);
    {  // the machine, for `asgd compare` (which refuses to compare across machines)
      const asgd::RunInfo info = asgd::collect_run_info();
      benchmark::AddCustomContext("asgd_cpu_model", info.cpu_model);
      benchmark::AddCustomContext("asgd_blas", info.blas);
      const std::string kernel = asgd::blas_kernel(info.blas);
      benchmark::AddCustomContext("asgd_blas_kernel", kernel.empty() ? "unknown" : kernel);
      benchmark::AddCustomContext("asgd_commit", info.git_commit);
      benchmark::AddCustomContext("asgd_execution", fmt::format("Kokkos {}, {} thread{} per rank",
                                                                info.kokkos_backend, g_threads,
                                                                g_threads == 1 ? "" : "s"));
      benchmark::AddCustomContext("asgd_kokkos", fmt::format("{} ({} threads)", info.kokkos_version,
                                                             info.kokkos_concurrency));
    }
    benchmark::RegisterBenchmark("sgemm/1024", bm_sgemm)->Arg(1024)->UseManualTime()->MinTime(0.5);
    benchmark::RegisterBenchmark("triad", bm_triad)
        ->Arg(index_t(1) << 24)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
    std::vector<std::string> fused;
    for (const std::string model : {"lenet", "cifar10-18pct"}) {
      const std::string name = model + "/step";
      benchmark::RegisterBenchmark(name.c_str(), bm_step, model)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
      fused.push_back(name);
      benchmark::RegisterBenchmark("triad", bm_triad)
          ->Arg(get(model).model->n_params())
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
      benchmark::RegisterBenchmark((model + "/update").c_str(), bm_update, model)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
    for (const std::string model : {"lenet", "cifar10-18pct"}) {
      Bench& b = get(model);
      for (std::size_t i = 0; i < b.model->layers().size(); ++i) {
        const auto& l = *b.model->layers()[i];
        const std::string base = fmt::format("{}/{}", model, l.name());
        for (auto [suffix, pass] : {std::pair{"forward", Pass::forward},
                                    {"backward", Pass::backward},
                                    {"forward+backward", Pass::both}}) {
          if (pass == Pass::both && l.kind() != "conv" && l.kind() != "dense") continue;
          const std::string name = base + "/" + suffix;
          benchmark::RegisterBenchmark(name.c_str(), bm_layer, model, i, pass)
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond)
              ->MinTime(0.2);
          if (pass == Pass::both) fused.push_back(name);
        }
      }
    }
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    Reporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    auto ref = reporter.gflops.find("sgemm/1024");
    if (ref != reporter.gflops.end()) {
      fmt::print("\nKokkos {} ({} threads), BLAS {}\nsgemm 1024^3 reference: {:.1f} GFLOP/s\n", Kokkos::DefaultExecutionSpace::name(),
                 Kokkos::DefaultExecutionSpace::concurrency(), asgd::blas_info(), ref->second);
      fmt::print("{:<44} {:>10} {:>12} {:>14}\n", "layer (batch 64, forward+backward)", "GFLOP/s",
                 "of sgemm", "paired sgemm");
      for (const auto& name : fused) {
        auto it = reporter.gflops.find(name);
        if (it == reporter.gflops.end()) continue;
        fmt::print("{:<44} {:>10.1f} {:>11.0f}% {:>13.0f}%\n", name, it->second,
                   100 * it->second / ref->second, 100 * reporter.of_sgemm[name]);
      }
      fmt::print("of sgemm: against the reference above; paired sgemm: against the median of "
                 "10 sgemms timed just before and just after the layer\n");
      print_phases(reporter, ref->second);
    }
    benches().clear();
    sgemm_operands().reset();
    benchmark::Shutdown();
  }
  Kokkos::finalize();
  return rc;
}
