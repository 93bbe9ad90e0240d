#pragma once
// A machine profile: the figures of the performance model of virtual
// learners (perf/cluster.hpp), each with where it comes from. Written by
// `asgd calibrate` (every figure measured, with how) or by hand for a paper's
// system (every figure stated by the paper, with where, or assumed, with
// why). YAML; the format is in docs/MODEL.md ("Profile format").
//
// Kokkos-free and MPI-free: the suite reader checks profiles before any run.
#include <optional>
#include <string>
#include <vector>

namespace asgd::perf {

// The longest time a profile or a virtual run's flags may give (a minibatch,
// a latency, an injected cost): 10^6 s, so that a modelled clock stays finite.
inline constexpr double kMaxSeconds = 1e6;

// One number and its provenance.
struct Figure {
  double value = 0;
  std::string source;  // measured | stated | assumed
  std::string note;    // how it was measured, where the paper states it, why it is assumed
};

// The compute time of one minibatch: of one model at one batch size and
// thread count (seconds), or of any model on a device of a given throughput
// (gflops: the model's training FLOPs per minibatch over it).
struct ComputeEntry {
  std::string model;  // empty with gflops
  int batch = 0;      // 0 with gflops
  std::string device = "cpu";  // cpu | cuda (cuda learners add host staging at pcie_Bps)
  int threads = 1;
  std::optional<Figure> seconds, gflops;
  Figure cv;  // coefficient of variation of one minibatch's time
};

// An endpoint's link: its latency and bandwidth. A transfer between a learner
// and a shard takes both latencies, and its bytes flow at the smaller of the
// two links' shares (a link is shared equally by the transfers on it).
struct Link {
  Figure latency_s, bandwidth_Bps;
};

// How the weights and gradients travel (perf/cluster.hpp, `duplex`):
// "shared-windows" (ranks of one node: a link is one capacity for both
// directions, learners copy their replies at once) or "messages" (ranks on
// different nodes: each direction at its own rate, a shard's replies one at
// a time). Absent: shared-windows.
struct Exchange {
  std::string value, source, note;
};

// How a waiting rank polls (the MPI core's waits, ps/mpi_util.cpp): it polls
// without pause for spin_s, then sleeps 1, 2, 4, ... microseconds up to
// max_pause_s between polls, and each sleep lasts overshoot_s longer than
// asked (the kernel's timer slack and wake-up). A wait therefore ends at the
// first poll after its event (perf/wake.hpp), or, where the ranks share a
// node and ring each other's doorbells (ps/doorbell.hpp), doorbell_s after
// the event when that comes first.
struct Wake {
  Figure spin_s, max_pause_s, overshoot_s;
  std::optional<Figure> doorbell_s;  // absent: no doorbells (ASGD_DOORBELL=0, or an older profile)
};

struct Profile {
  std::string path;  // where it was read from (for messages)
  std::string name, description, machine;
  std::optional<Figure> cores;  // processors shared by every rank's CPU work; absent: one each
  // When ranks outnumber cores: the share of a core a rank that waits (MPI's
  // polite waits: spin, then sleep) still takes from the working ones.
  std::optional<Figure> waiting_rank_load;
  // The same for a rank whose every wait ends after perf::kBriefWait_s (its
  // polls dense): with both, the model tells a wait's cost from its polls'.
  std::optional<Figure> brief_wait_load;
  std::vector<ComputeEntry> compute;
  Link learner, server;
  std::optional<Exchange> exchange;  // link.exchange
  // messages: the bytes a sender's send buffers hold (its send is done when
  // the rest has left); absent: 0
  std::optional<Figure> send_buffer_bytes;
  // messages: the bytes a link lets through at once after a pause (a shaped
  // link's token bucket, refilled at its rate while it is idle); absent: 0
  std::optional<Figure> burst_bytes;
  // messages: the CPU seconds the machine spends per byte moved between two
  // ranks (both ends' kernel network path and MPI progress), taken from the
  // cores the ranks share; absent: 0
  std::optional<Figure> cpu_s_per_byte;
  // messages: the largest message MPI sends at once; a larger one waits for
  // the receiver's poll (rendezvous); absent: every message goes at once
  std::optional<Figure> eager_bytes;
  std::optional<Figure> pcie_Bps;
  Figure accumulate_s_per_param;  // a shard adding one received gradient, per parameter
  Figure update_s_per_param;      // a shard applying one update, per parameter
  // a shard's CPU time per push apart from the per-parameter work (the
  // message's header, the rule's bookkeeping, posting the reply); absent: 0
  std::optional<Figure> per_push_s;
  std::optional<Wake> wake;  // absent: a wait ends at its event
  // Costs injected into the real server (ASGD_INJECT_SERVER) for the
  // validation's server-bound runs; the model adds them the same way.
  std::optional<Figure> inject_update_s, inject_byte_s;
};

// Where a profile named `path` is: the path itself when it exists or is
// absolute, else the same relative path under the search folder (the
// source tree: suites name `profiles/x.yaml` whatever the working folder).
std::string find_profile(const std::string& path);
void set_profile_search_dir(std::string dir);

// Reads and checks a profile. Throws asgd::Error, one line naming the file
// and the key: missing, negative or non-numeric figures, unknown keys, a
// figure without its source.
Profile read_profile(const std::string& path);

// The profile as YAML (every figure with its source), and written atomically.
std::string profile_yaml(const Profile& p);
void write_profile(const Profile& p, const std::string& path);

struct ComputeTime {
  double mean_s = 0, cv = 0;
  bool cuda = false;  // the entry is a GPU's: learners stage to and from the host
  std::string from;   // which entry: "compute[2] (lenet, batch 64, cpu, 1 thread)"
};

// The profile's compute time for a model: the first entry of this model,
// batch and thread count, else the first device throughput (needs the
// model's training FLOPs per sample; 0: unknown, the throughput entry
// matches without a time). nullopt when none applies.
std::optional<ComputeTime> compute_time(const Profile& p, const std::string& model, int batch, int threads,
                                        double flops_per_sample);

// The one-line refusal when compute_time() has nothing for the model.
std::string no_compute_time(const Profile& p, const std::string& model, int batch, int threads);

}  // namespace asgd::perf
