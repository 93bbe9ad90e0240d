#pragma once
// Fatal signals end the process at once, with one line on stderr.
//
// A SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT (a stack overflow included:
// the handler runs on an alternate stack) prints
//   asgd: fatal: signal SIGSEGV (invalid memory access) [rank 3]; exit 139
// with write(2) alone, then _exit(128 + signal): no destructor, no MPI call
// (MPI_Abort is not async-signal-safe and can block on a broken process).
// Under mpiexec a rank that exits non-zero before MPI_Finalize makes the
// launcher end every other rank of the job, so the whole job ends within
// seconds rather than at --stall-timeout or the Slurm time limit.
//
// The alternate stack is the main thread's (sigaltstack is per thread): a
// fault in another thread (a Kokkos or OpenMP worker) prints the same line
// from that thread's own stack, which serves unless that stack overflowed.
//
// MPI libraries install handlers of their own (UCX's prints "Caught signal
// 11" and may then wait for a debugger or hang). UCX installs them when its
// library is loaded, before main(), and MPI_Init may again:
// install_fatal_handlers() is called first thing in main() and again right
// after MPI_Init. prepare_mpi_error_handling() sets UCX_HANDLE_ERRORS=none
// and an empty UCX_ERROR_SIGNALS (unless the user set them) for the
// processes this one starts (`sweep run`'s and calibrate's mpiexec), which
// then never install UCX's handlers; sweep submit's scripts export the same.
#include <string>

namespace asgd {

void install_fatal_handlers();
void prepare_mpi_error_handling();

// Fault injection for the tests: ASGD_INJECT_SIGNAL="SIGNAL:POINT", SIGNAL
// one of SEGV, BUS, FPE, ILL, ABRT (raised) or STACK (a real stack overflow
// by recursion); POINT one of main (before any subcommand's work), train
// (before a run trains, every rank), learner (the first MPI learner, after
// its first step), server (the first server shard, after its first update).
// check_signal_injection() throws asgd::Error on a malformed value;
// inject_signal(point) plants the fault when point is the one named.
void check_signal_injection();
void inject_signal(const char* point);

}  // namespace asgd
