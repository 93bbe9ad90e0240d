#pragma once
// The two engines (engine.hpp); make_engine chooses between them.
#include <memory>

#include "engine/engine.hpp"

namespace asgd::engine {

std::unique_ptr<Engine> make_cpu_engine(const nn::ModelSpec& spec, index_t max_batch);
std::unique_ptr<Engine> make_cuda_engine(const nn::ModelSpec& spec, index_t max_batch,
                                         int node_learner_index);

}  // namespace asgd::engine
