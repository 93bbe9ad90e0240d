// The memory a run needs, estimated from the model (nn::model_spec), the data
// and the batch before anything is allocated, against what this process may use.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "common/error.hpp"
#include "common/text.hpp"
#include "config/config.hpp"
#include "nn/zoo.hpp"
#include "protocol/registry.hpp"

namespace asgd {

namespace {

std::string bytes_text(double b) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  if (b >= 1024) return fmt::format("{:.3g} EB", b);
  return fmt::format("{:.1f} {}", b, units[u]);
}

struct DataFacts {
  double n_train = 0, n_test = 0;
  nn::Shape shape;
  std::int32_t classes = 10;
  double transient = 0;  // bytes held while loading (file bytes, prototypes)
};

DataFacts data_facts(const TrainConfig& c) {
  DataFacts f;
  if (c.data.kind == "synthetic") {
    f.n_train = static_cast<double>(c.data.n_train);
    f.n_test = static_cast<double>(c.data.n_test);
    f.shape = {c.data.h, c.data.w, c.data.c};
    f.classes = c.data.classes;
    f.transient = static_cast<double>(c.data.classes) * static_cast<double>(f.shape.size()) * 8;
  } else if (c.data.kind == "cifar10") {
    f.n_train = 50000;
    f.n_test = 10000;
    f.shape = {32, 32, 3};
    f.transient = 10000.0 * 3073;
  } else {  // fashion-mnist, mnist
    f.n_train = 60000;
    f.n_test = 10000;
    f.shape = {28, 28, 1};
    f.transient = 60000.0 * 784 * 2;  // file bytes and their gzip buffer
  }
  return f;
}

}  // namespace

MemoryEstimate estimate_memory(const TrainConfig& c) {
  const DataFacts f = data_facts(c);
  const double sample = static_cast<double>(f.shape.size());
  const nn::ModelSpec m = nn::model_spec(c.model, f.shape, f.classes);
  double params = 0, acts = 0, widest = sample, work = 0;
  for (const auto& l : m.layers) {
    params += static_cast<double>(l.n_params);
    const double out = static_cast<double>(l.out.size());
    acts += out;
    widest = std::max(widest, out);
    work += static_cast<double>(l.in.size());  // lrn, dropout, pooling masks
  }
  const double L = c.learners;
  const bool virt = c.virtual_learners;
  MemoryEstimate e;
  // weights, gradient, momentum, and the host copies a checkpoint makes
  double copies = 5;
  if (virt) {  // the shard and every learner in this one process: what the protocol keeps
    protocol::Footprint fp;
    try {
      fp = protocol::footprint(*protocol::make_protocol(protocol_options(c)));
    } catch (const Error&) {  // a protocol or option the checks refuse: they say so
    }
    copies += fp.per_shard + L * (fp.per_learner + fp.per_shard_per_learner);
  }
  e.model = params * 4 * copies;
  // an MPI server shard: where each learner's next gradient lands (at most 1 GiB, ps::Server)
  if (!virt) e.model += std::min(L * params * 4 / std::max(1, c.servers), 1024.0 * 1024 * 1024);
  // the training and test images, loading buffers, and each sampler's permutation
  e.data = (f.n_train + f.n_test) * sample * 4 + f.transient + f.n_train * 8 * (virt ? L + 1 : 1);
  const double batch = static_cast<double>(std::max(c.batch, c.eval_batch));
  // im2col of at least one sample (chunks of about 1 MiB on the host), and its gradient
  double conv_cols = 0;
  for (const auto& l : m.layers)
    if (l.kind == "conv") {
      const double f_out = static_cast<double>(l.out.c);
      const double k_len = static_cast<double>(l.n_params) / f_out - 1;
      const double pixels = static_cast<double>(l.out.h) * static_cast<double>(l.out.w);
      conv_cols += 2 * std::max(pixels * k_len, 262144.0);
    }
  e.activations = batch * (acts + 2 * widest + f.classes + work) * 4 +
                  (static_cast<double>(c.batch) + static_cast<double>(c.eval_batch)) * sample * 4 + conv_cols * 4;
  return e;
}

double available_memory() {
  double avail = -1;
  if (std::ifstream in("/proc/meminfo"); in) {
    std::string key;
    double kb = 0;
    std::string unit;
    while (in >> key >> kb) {
      std::getline(in, unit);
      if (key == "MemAvailable:") {
        avail = kb * 1024;
        break;
      }
    }
  }
  if (avail < 0) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = static_cast<double>(pages) * static_cast<double>(page);
  }
  // a cgroup (v2) limit below what the machine has
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  double max = 0, cur = 0;
  if (max_in >> max && cur_in >> cur && max > cur) avail = avail < 0 ? max - cur : std::min(avail, max - cur);
  return avail < 0 ? std::numeric_limits<double>::infinity() : avail;
}

std::vector<std::string> data_fit_problems(const TrainConfig& c) {
  std::vector<std::string> out;
  const int learners = std::max(1, c.learners);
  const double n_train = data_facts(c).n_train;
  if (c.batch < 1) return out;  // validate() names it
  if (static_cast<double>(c.batch) * learners > n_train) {
    if (c.data.kind == "synthetic")
      out.push_back(fmt::format("--synthetic-train {} has fewer samples than one round of {} learner{} x --batch {}",
                                c.data.n_train, learners, learners == 1 ? "" : "s", c.batch));
    else
      out.push_back(fmt::format("--batch {} x {} learner{} is more than {}'s {:.0f} training samples", c.batch,
                                learners, learners == 1 ? "" : "s", c.data.kind, n_train));
  }
  if (c.warm_steps > 0 && std::isfinite(c.epochs) && c.epochs > 0) {
    // the run's updates: epochs of n_train samples in minibatches (and --max-steps)
    double updates = std::floor(c.epochs * n_train / static_cast<double>(c.batch));
    if (c.max_steps > 0) updates = std::min(updates, static_cast<double>(c.max_steps));
    if (static_cast<double>(c.warm_steps) > updates)
      out.push_back(fmt::format("--warm-steps {} is more than the run's {:.0f} updates (--epochs {:g} of {:.0f} "
                                "samples at --batch {}{})",
                                c.warm_steps, updates, c.epochs, n_train, c.batch,
                                c.max_steps > 0 ? fmt::format(", --max-steps {}", c.max_steps) : ""));
  }
  return out;
}

std::string warm_start_problem(const TrainConfig& c) {
  if (c.warm_start.empty()) return "";
  std::error_code ec;
  const auto st = std::filesystem::status(c.warm_start, ec);
  if (!std::filesystem::exists(st)) return fmt::format("--warm-start '{}': no such file", shorten(c.warm_start, 200));
  if (!std::filesystem::is_regular_file(st))
    return fmt::format("--warm-start '{}': not a regular file (a folder, device or pipe)", shorten(c.warm_start, 200));
  return "";
}

void check_resources(const TrainConfig& c) {
  if (const auto problems = data_fit_problems(c); !problems.empty()) throw Error(problems.front());
  if (const auto problem = warm_start_problem(c); !problem.empty()) throw Error(problem);
  MemoryEstimate e;
  try {
    e = estimate_memory(c);
  } catch (const Error& err) {  // the model cannot take this input shape
    const DataFacts f = data_facts(c);
    throw Error(fmt::format("model {} cannot take {}x{}x{} inputs{}: {}", c.model, f.shape.h,
                            f.shape.w, f.shape.c,
                            c.data.kind == "synthetic" ? " (--synthetic-size, --synthetic-channels)"
                                                       : " of " + c.data.kind,
                            err.what()));
  }
  const double avail = available_memory();
  if (e.total() <= avail) return;
  // Which flag to change: the per-sample size, the sample counts, the learners or the batch.
  TrainConfig one = c;
  one.batch = one.eval_batch = 1;
  one.learners = 1;
  std::string flag;
  if (c.data.kind == "synthetic") {
    TrainConfig tiny = one;
    tiny.data.n_train = tiny.data.n_test = 1;
    TrainConfig two = tiny;  // the classes alone: the last layer's weights
    two.data.classes = std::min<std::int32_t>(c.data.classes, 2);
    const bool tiny_too_large = estimate_memory(tiny).total() > avail;
    if (tiny_too_large && estimate_memory(two).total() <= avail)
      flag = fmt::format("--synthetic-classes {}", c.data.classes);
    else if (tiny_too_large)
      flag = c.data.c > std::max(c.data.h, c.data.w)
                 ? fmt::format("--synthetic-channels {}", c.data.c)
                 : fmt::format("--synthetic-size {}", c.data.h == c.data.w ? c.data.h : std::max(c.data.h, c.data.w));
  }
  if (flag.empty() && estimate_memory(one).total() > avail) {
    if (c.data.kind == "synthetic")
      flag = c.data.n_train >= c.data.n_test ? fmt::format("--synthetic-train {}", c.data.n_train)
                                             : fmt::format("--synthetic-test {}", c.data.n_test);
    else
      flag = fmt::format("--model {}", c.model);
  }
  if (flag.empty()) {
    TrainConfig learners = c;
    learners.batch = learners.eval_batch = 1;
    if (estimate_memory(learners).total() > avail) flag = fmt::format("--learners {}", c.learners);
  }
  if (flag.empty())
    flag = c.batch >= c.eval_batch ? fmt::format("--batch {}", c.batch)
                                   : fmt::format("--eval-batch {}", c.eval_batch);
  throw Error(fmt::format("{}: the run would need about {} of memory (model {}, data {}, "
                          "activations of {} samples {}), more than the {} available",
                          flag, bytes_text(e.total()), bytes_text(e.model), bytes_text(e.data),
                          std::max(c.batch, c.eval_batch), bytes_text(e.activations),
                          bytes_text(avail)));
}

}  // namespace asgd
