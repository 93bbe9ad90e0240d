#include "sim/modelled.hpp"

#include "common/error.hpp"
#include "ps/protocol.hpp"
#include "ps/shards.hpp"
#include "ps/shm_windows.hpp"

namespace asgd::sim {

Modelled modelled(const TrainConfig& cfg, index_t n_params, double flops_per_sample, int c, int local_updates) {
  Modelled m;
  m.profile = perf::read_profile(perf::find_profile(cfg.profile));
  const int batch = static_cast<int>(cfg.batch);
  const auto ct = perf::compute_time(m.profile, cfg.model, batch, cfg.threads, flops_per_sample);
  if (!ct) throw Error(perf::no_compute_time(m.profile, cfg.model, batch, cfg.threads));
  m.compute = *ct;
  perf::ClusterSpec& s = m.spec;
  s.learners = cfg.learners;
  s.shards = cfg.servers;
  for (int k = 0; k < cfg.servers; ++k)
    s.shard_params.push_back(static_cast<double>(ps::shard_of(n_params, k, cfg.servers).len));
  s.gradients_per_update = c;
  const perf::Profile& p = m.profile;
  s.learner_latency_s = p.learner.latency_s.value;
  s.learner_Bps = p.learner.bandwidth_Bps.value;
  s.server_latency_s = p.server.latency_s.value;
  s.server_Bps = p.server.bandwidth_Bps.value;
  s.duplex = p.exchange && p.exchange->value == "messages";
  // as the MPI learner decides (ps/mpi_learner.cpp); GPU learners stage a copy
  const bool in_place = ps::in_place_wanted();  // a bad ASGD_IN_PLACE is refused whatever the exchange
  s.replies_in_place = in_place && !s.duplex && !m.compute.cuda && ps::UpdateRule(cfg).weights_read_in_place(cfg.learners);
  s.send_buffer_bytes = p.send_buffer_bytes ? p.send_buffer_bytes->value : 0;
  s.burst_bytes = p.burst_bytes ? p.burst_bytes->value : 0;
  s.cpu_s_per_byte = p.cpu_s_per_byte ? p.cpu_s_per_byte->value : 0;
  if (p.eager_bytes) s.eager_bytes = p.eager_bytes->value;
  s.accumulate_s_per_param = p.accumulate_s_per_param.value;
  s.update_s_per_param = p.update_s_per_param.value;
  s.per_push_s = p.per_push_s ? p.per_push_s->value : 0;
  if (p.wake) {
    s.wake = {p.wake->spin_s.value, p.wake->max_pause_s.value, p.wake->overshoot_s.value, true};
    // doorbells ring between the ranks of one node: where they share windows
    if (p.wake->doorbell_s && !s.duplex) s.wake.bell_s = p.wake->doorbell_s->value;
  }
  s.inject_update_s = p.inject_update_s ? p.inject_update_s->value : 0;
  s.inject_byte_s = p.inject_byte_s ? p.inject_byte_s->value : 0;
  s.cores = p.cores ? p.cores->value : 0;
  s.waiting_rank_load = p.waiting_rank_load ? p.waiting_rank_load->value : 0;
  s.brief_wait_load = p.brief_wait_load ? p.brief_wait_load->value : -1;
  // a learner's local SGD update costs what a shard's does, per parameter
  s.cycle_cpu_s = local_updates * p.update_s_per_param.value * static_cast<double>(n_params);
  // GPU learners copy the weights to the device and the gradient back
  if (m.compute.cuda) s.stage_s = 2.0 * 4.0 * static_cast<double>(n_params) / p.pcie_Bps->value;
  return m;
}

nlohmann::json describe(const Modelled& m) {
  const perf::Profile& p = m.profile;
  const perf::ClusterSpec& s = m.spec;
  return {{"model", "contention"},
          {"modelled", true},
          {"profile", p.name},
          {"profile_path", p.path},
          {"profile_machine", p.machine},
          {"compute_from", m.compute.from},
          {"learner_latency_s", s.learner_latency_s},
          {"learner_Bps", s.learner_Bps},
          {"server_latency_s", s.server_latency_s},
          {"server_Bps", s.server_Bps},
          {"exchange", s.duplex ? "messages" : "shared-windows"},
          {"replies_in_place", s.replies_in_place},
          {"send_buffer_bytes", s.send_buffer_bytes},
          {"burst_bytes", s.burst_bytes},
          {"cpu_s_per_byte", s.cpu_s_per_byte},
          {"eager_bytes", p.eager_bytes ? nlohmann::json(s.eager_bytes) : nlohmann::json(nullptr)},
          {"accumulate_s_per_param", s.accumulate_s_per_param},
          {"update_s_per_param", s.update_s_per_param},
          {"per_push_s", s.per_push_s},
          {"wake", s.wake.on ? nlohmann::json{{"spin_s", s.wake.spin_s}, {"max_pause_s", s.wake.max_pause_s},
                                              {"overshoot_s", s.wake.overshoot_s},
                                              {"doorbell_s", s.wake.bell_s >= 0 ? nlohmann::json(s.wake.bell_s)
                                                                                : nlohmann::json(nullptr)}}
                             : nlohmann::json(nullptr)},
          {"inject_update_s", s.inject_update_s},
          {"inject_byte_s", s.inject_byte_s},
          {"cores", s.cores},
          {"waiting_rank_load", s.waiting_rank_load},
          {"brief_wait_load", s.brief_wait_load >= 0 ? nlohmann::json(s.brief_wait_load) : nlohmann::json(nullptr)},
          {"cycle_cpu_s", s.cycle_cpu_s},
          {"stage_s", s.stage_s},
          {"shards", s.shards},
          {"note", "virtual clock with server shards, links and cores as resources (perf/cluster.hpp), figures "
                   "from the profile; gradients are computed for real on each learner's stale weights"}};
}

}  // namespace asgd::sim
