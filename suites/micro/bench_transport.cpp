// Push + pull bandwidth of the parameter server's real wire format (header +
// shard payload each way, non-blocking sends and receives completed by the
// polite waits the server and learners use) against a plain MPI ping-pong of
// the same bytes (MPI_Send / MPI_Recv, OSU style), measured in the same run,
// alternating, median of repeats. Run with `mpiexec -n 2 asgd_transport`.
// Rank 0 plays the server, rank 1 the learner; times are the slowest rank's,
// printed by rank 0.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ps/exchange_probe.hpp"
#include "ps/transport.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Seconds per round trip (n floats each way) of a plain ping-pong.
double plain(std::vector<float>& buf, int iters, MPI_Comm comm, int rank) {
  const int n = static_cast<int>(buf.size());
  MPI_Barrier(comm);
  const double t0 = now();
  for (int i = 0; i < iters; ++i) {
    if (rank == 1) {
      MPI_Send(buf.data(), n, MPI_FLOAT, 0, 1, comm);
      MPI_Recv(buf.data(), n, MPI_FLOAT, 0, 2, comm, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf.data(), n, MPI_FLOAT, 1, 1, comm, MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), n, MPI_FLOAT, 1, 2, comm);
    }
  }
  return (now() - t0) / iters;
}

double slowest(double t, MPI_Comm comm) {
  double m = 0;
  MPI_Reduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 0;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "asgd_transport: run with mpiexec -n 2 (got %d ranks)\n", size);
    MPI_Finalize();
    return 2;
  }
  // the training code's own exchange (ps/exchange_probe), over messages
  auto pcomm = std::make_unique<asgd::ps::Comm>(comm);
  const asgd::ps::Comm& pc = *pcomm;
  struct Case {
    const char* name;
    long floats;
    int iters;
  };
  const Case cases[] = {{"cifar10-18pct (0.36 MB)", 89578, 400},
                        {"lenet (13.1 MB)", 3274634, 40},
                        {"64 MB", 16L << 20, 10}};
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  if (rank == 0)
    std::printf("%-26s %14s %14s %8s\n", "message (each way)", "MPI p2p GB/s", "push+pull GB/s",
                "ratio");
  int below = 0;
  for (const auto& c : cases) {
    std::vector<float> a(static_cast<std::size_t>(c.floats), 1.0f);
    plain(a, 2, comm, rank);  // warm up (the exchange warms itself up)
    std::vector<double> tp, to;
    for (int r = 0; r < repeats; ++r) {
      tp.push_back(slowest(plain(a, c.iters, comm, rank), comm));
      to.push_back(asgd::ps::exchange_seconds(pc, c.floats, c.iters, false));  // the slower rank's already
    }
    if (rank == 0) {
      std::sort(tp.begin(), tp.end());
      std::sort(to.begin(), to.end());
      const double bytes = 2.0 * static_cast<double>(c.floats) * sizeof(float);
      const double gp = bytes / tp[tp.size() / 2] / 1e9, go = bytes / to[to.size() / 2] / 1e9;
      std::printf("%-26s %14.2f %14.2f %7.0f%%\n", c.name, gp, go, 100 * go / gp);
      below += go < 0.8 * gp ? 1 : 0;
    }
  }
  if (rank == 0) std::printf("%s\n", below ? "below 80% of plain MPI for some size" : "all sizes at >= 80% of plain MPI");
  pcomm.reset();  // freed before MPI_Finalize
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
