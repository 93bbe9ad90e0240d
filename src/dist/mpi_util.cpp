#include "dist/mpi_util.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT
#endif
#include <cstdlib>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace asgd::dist {

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kSpinEvent = std::chrono::microseconds(50);
constexpr auto kSpinTransfer = std::chrono::microseconds(20000);
constexpr auto kMaxPause = std::chrono::microseconds(500);

// Calls done() until it returns true: first spinning, then sleeping 1, 2, 4,
// ... up to kMaxPause microseconds between calls.
template <class Done>
void backoff(Done&& done, Wait kind = Wait::event) {
  const auto t0 = Clock::now();
  const auto spin = kind == Wait::transfer ? kSpinTransfer : kSpinEvent;
  while (Clock::now() - t0 < spin)
    if (done()) return;
  auto pause = std::chrono::microseconds(1);
  while (!done()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxPause);
  }
}
}  // namespace

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(fmt::format("MPI {} failed: {}", what, std::string(msg, static_cast<std::size_t>(len))));
}

Comm::Comm(MPI_Comm parent) {
  mpi_check(MPI_Comm_dup(parent, &comm_), "Comm_dup");
  mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
  mpi_check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
  mpi_check(MPI_Comm_size(comm_, &size_), "Comm_size");
}

Comm::~Comm() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MPI_Status polite_wait(MPI_Request& req, Wait kind) {
  MPI_Status st{};
  backoff(
      [&] {
        int flag = 0;
        mpi_check(MPI_Test(&req, &flag, &st), "Test");
        return flag != 0;
      },
      kind);
  return st;
}

void polite_wait_all(int n, MPI_Request* reqs, Wait kind) {
  backoff(
      [&] {
        int flag = 0;
        mpi_check(MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE), "Testall");
        return flag != 0;
      },
      kind);
}

MPI_Status polite_probe(int source, int tag, MPI_Comm comm) {
  MPI_Status st{};
  backoff([&] {
    int flag = 0;
    mpi_check(MPI_Iprobe(source, tag, comm, &flag, &st), "Iprobe");
    return flag != 0;
  });
  return st;
}

bool mpi_cuda_aware() {
  if (const char* env = std::getenv("ASGD_CUDA_AWARE"); env && std::string(env) == "0") return false;
#if defined(MPIX_GPU_SUPPORT_CUDA)
  int yes = 0;
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS && yes != 0;
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

}  // namespace asgd::dist
