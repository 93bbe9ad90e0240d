#include <fmt/format.h>

#include "common/error.hpp"
#include "engine/engines.hpp"

namespace asgd::engine {

std::unique_ptr<Engine> make_engine(const std::string& device, const nn::ModelSpec& spec,
                                    index_t max_batch, int node_learner_index) {
  if (device == "cpu") return make_cpu_engine(spec, max_batch);
  if (device == "cuda") return make_cuda_engine(spec, max_batch, node_learner_index);
  throw Error(fmt::format("unknown device '{}' (known: cpu, cuda)", device));
}

}  // namespace asgd::engine
