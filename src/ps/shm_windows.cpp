#include "ps/shm_windows.hpp"

#include <cstdint>
#include <utility>
#include <vector>

#include "ps/protocol.hpp"
#include "ps/shards.hpp"

namespace asgd::ps {
namespace {

// One cache line per rank (a bell's word at its start), so ringing one rank
// does not bounce the line another rank sleeps on.
constexpr MPI_Aint kBellBytes = 64;

void open_doorbells(SharedWindows& shm, const Comm& comm) {
  if (!doorbells_wanted()) return;
  void* base = nullptr;
  mpi_check(MPI_Win_allocate_shared(kBellBytes, 1, MPI_INFO_NULL, shm.node, &base, &shm.bells),
            "Win_allocate_shared");
  mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, shm.bells), "Win_lock_all");
  *static_cast<std::uint32_t*>(base) = 0;
  mpi_check(MPI_Win_sync(shm.bells), "Win_sync");
  mpi_check(MPI_Barrier(shm.node), "Barrier");
  // every rank of comm is on this node (the windows' condition) and shm.node
  // keeps comm's order (split with key comm.rank())
  std::vector<std::uint32_t*> words;
  for (int r = 0; r < comm.size(); ++r) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    mpi_check(MPI_Win_shared_query(shm.bells, r, &size, &disp, &p), "Win_shared_query");
    words.push_back(static_cast<std::uint32_t*>(p));
  }
  set_doorbells(comm.get(), std::move(words), comm.rank());
}

}  // namespace

void open_shared_windows(SharedWindows& shm, const Comm& comm, bool server, index_t floats,
                         int servers, int learners) {
  mpi_check(MPI_Comm_split_type(comm.get(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL,
                                &shm.node),
            "Comm_split_type");
  int node_size = 0;
  mpi_check(MPI_Comm_size(shm.node, &node_size), "Comm_size");
  int want = (node_size == comm.size() && env_switch("ASGD_SHM")) ? 1 : 0;
  int everyone = 0;
  mpi_check(MPI_Allreduce(&want, &everyone, 1, MPI_INT, MPI_MIN, comm.get()), "Allreduce");
  if (!everyone) return;
  void* base = nullptr;
  const auto bytes = floats * static_cast<MPI_Aint>(sizeof(real_t));
  mpi_check(MPI_Win_allocate_shared(server ? bytes : 0, sizeof(real_t), MPI_INFO_NULL, shm.node,
                                    &base, &shm.weights),
            "Win_allocate_shared");
  mpi_check(MPI_Win_allocate_shared(server ? 0 : bytes, sizeof(real_t), MPI_INFO_NULL, shm.node,
                                    &base, &shm.grads),
            "Win_allocate_shared");
  mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, shm.weights), "Win_lock_all");
  mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, shm.grads), "Win_lock_all");
  auto query = [](MPI_Win w, int rank) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    mpi_check(MPI_Win_shared_query(w, rank, &size, &disp, &p), "Win_shared_query");
    return static_cast<real_t*>(p);
  };
  open_doorbells(shm, comm);
  for (int k = 0; k < servers; ++k) shm.weight_base.push_back(query(shm.weights, k));
  for (int l = 0; l < learners; ++l) shm.grad_base.push_back(query(shm.grads, servers + l));
  shm.on = true;
}

bool in_place_wanted() { return env_switch("ASGD_IN_PLACE"); }

real_t* weights_in_place(const SharedWindows& shm, const TrainConfig& cfg, index_t n_params) {
  const int servers = cfg.servers;
  if (!shm.on || static_cast<int>(shm.weight_base.size()) != servers || cfg.device != "cpu" ||
      !UpdateRule(cfg).weights_read_in_place(cfg.learners) || !in_place_wanted())
    return nullptr;
  real_t* base = shm.weight_base[0];
  for (int s = 1; s < servers; ++s)
    if (shm.weight_base[static_cast<std::size_t>(s)] != base + shard_of(n_params, s, servers).offset) return nullptr;
  return base;
}

}  // namespace asgd::ps
