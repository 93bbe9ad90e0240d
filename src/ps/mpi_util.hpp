#pragma once
// Thin MPI helpers: every return code checked through one function, a
// duplicated communicator owned by RAII, and a wait that does not burn a core.
#include <mpi.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace asgd::ps {

// Throws asgd::Error("MPI <what> failed: <MPI error string>") unless rc == MPI_SUCCESS.
void mpi_check(int rc, const char* what);

// A private duplicate of a communicator (never MPI_COMM_WORLD in library code).
class Comm {
 public:
  explicit Comm(MPI_Comm parent);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// What a wait is for. An event (the next push, a reply that depends on other
// learners) may take long: spin 50 us, then sleep with growing pauses (up to
// 500 us: shorter pauses cost learners ~10% of their compute time in wake-ups
// on a 2-core node), so a waiting server next to busy learners on an oversubscribed node
// yields its core. A transfer whose other side is known to be posted moves
// data only while both sides poll (MPICH's shared-memory copy is driven by
// progress calls): spin up to 20 ms before backing off.
enum class Wait { event, transfer };

// The schedule of a wait for an event under the ASGD_WAIT in effect: polls
// without pause for spin_s, then sleeps 1, 2, 4, ... us up to max_pause_s
// between polls (asgd calibrate writes it into the profile's `wake`).
struct WaitSchedule {
  double spin_s, max_pause_s;
  const char* policy;
};
WaitSchedule event_wait_schedule();

// The watchdog. Every blocking wait of the MPI core goes through the calls
// below; a wait that has completed nothing for the stall timeout throws
// Stalled, naming this rank (set_rank_label) and what it waited for (`what`).
// A hung rank in a Slurm array task would otherwise burn the whole allocation.
// 0 turns the watchdog off. Process-wide; set once before training.
void set_stall_timeout(double seconds);
double stall_timeout();
void set_rank_label(std::string label);

// Not an asgd::Error (bad input, exit 2): a run that stopped making progress
// is a failed run (exit 1).
struct Stalled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Completes req, polling as above. Returns the status.
MPI_Status polite_wait(MPI_Request& req, Wait kind = Wait::event, const char* what = "a transfer");
void polite_wait_all(int n, MPI_Request* reqs, Wait kind = Wait::event,
                     const char* what = "transfers");
// Completes one of reqs[0..n) and returns its index (reqs[i] becomes MPI_REQUEST_NULL).
int polite_wait_any(int n, MPI_Request* reqs, Wait kind, const char* what);
// Blocks (politely) until a message matching (source, tag) is available.
MPI_Status polite_probe(int source, int tag, MPI_Comm comm, const char* what = "a message");

// polite_probe that gives up after `seconds` (false: no message yet): each
// call a wait of its own, from the spin phase on, as a rank whose waits
// last that long has (the calibration's cores probe).
bool polite_probe_for(int source, int tag, MPI_Comm comm, double seconds);

// A message to wait for: (source, tag), MPI_ANY_SOURCE allowed.
struct Want {
  int source, tag;
};
// Blocks (politely) until a message matching any of `wants` is available;
// returns its status. Earlier entries are looked for first.
MPI_Status polite_probe_any(std::initializer_list<Want> wants, MPI_Comm comm, const char* what);

// Fault injection for the stress tests: ASGD_INJECT_DELAY="SEED:MAX_MS[:PROB]"
// makes inject_delay() sleep a uniform 0..MAX_MS milliseconds with probability
// PROB (default 0.5), from a stream seeded by SEED and this rank. Unset: no-op.
// ASGD_INJECT_STALL="RANK:N": world rank RANK hangs for good at its N-th call
// (the watchdog's test).
void inject_delay();

// Costs injected into the real server for the performance model's
// validation (tools/validate_model.sh): ASGD_INJECT_SERVER="UPDATE_S:BYTE_S"
// makes a server shard sleep UPDATE_S seconds per update it applies and
// BYTE_S seconds per byte of each push it receives and each reply it sends
// (a profile's inject: section models the same). Unset: both 0.
struct ServerCosts {
  double update_s = 0, byte_s = 0;
};
const ServerCosts& injected_server_costs();
// An on/off environment switch: unset, empty or 1: on; 0: off; any other
// value: asgd::Error naming the variable and the value.
bool env_switch(const char* name);
// Parses ASGD_INJECT_DELAY, ASGD_INJECT_STALL, ASGD_INJECT_SERVER, ASGD_WAIT and
// the switches ASGD_DOORBELL, ASGD_SHM, ASGD_IN_PLACE and ASGD_CUDA_AWARE now:
// CollectiveError (every rank finds the same problem) when one is bad.
void check_injection();
// Sleeps s seconds (no-op for s <= 0).
void sleep_s(double s);

// The first line of MPI_Get_library_version ("MPICH Version: 4.0.2").
std::string mpi_library_version();

// Whether the MPI library says it accepts CUDA device pointers (MPICH's
// MPIX_GPU_query_support, Open MPI's MPIX_Query_cuda_support);
// ASGD_CUDA_AWARE=0 turns it off.
bool mpi_cuda_aware();

// An error every rank detects identically (bad config, wrong rank count):
// rank 0 reports it, every rank exits with the same code, no MPI_Abort.
struct CollectiveError : Error {
  using Error::Error;
};
// A set-up failure on this rank (it prints it); every rank stops cleanly.
struct SetupFailed : Error {
  using Error::Error;
};
// A rank-local failure that another rank has already reported.
struct ReportedElsewhere : Error {
  using Error::Error;
};

// The host name of every rank (rank 0 gets them all; others get an empty list). Collective.
std::vector<std::string> rank_hosts(const Comm& comm);
// Every rank stops when any failed (error not empty); the lowest failing rank
// throws SetupFailed(error), the others ReportedElsewhere(elsewhere). Collective.
void stop_if_any_failed(const Comm& comm, const std::string& error, const char* elsewhere);

}  // namespace asgd::ps
