// The MPI core's doorbells (ps/doorbell.hpp): a ring ends a sleep on the
// bell, and rings that are not for a bell of the registered node change nothing.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "ps/doorbell.hpp"

namespace {

using asgd::ps::bell_value;
using asgd::ps::ring;
using asgd::ps::set_doorbells;
using asgd::ps::sleep_on_bell;
using Clock = std::chrono::steady_clock;

// Two bells, a cache line apart, in memory shared as between processes
// (the futex calls are the process-shared kind).
struct Node {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  std::uint32_t* bell(int r) const { return static_cast<std::uint32_t*>(mem) + 16 * r; }
  Node() { set_doorbells(MPI_COMM_SELF, {bell(0), bell(1)}, 1); }
  ~Node() {
    set_doorbells(MPI_COMM_NULL, {}, 0);
    munmap(mem, 4096);
  }
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(Doorbell, RingEndsASleepLongBeforeItsTimeout) {
  Node node;
  ASSERT_NE(node.mem, MAP_FAILED);
  double slept = -1;
  std::thread sleeper([&] {
    const auto t0 = Clock::now();
    sleep_on_bell(node.bell(0), 0, 60.0);
    slept = seconds_since(t0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ring(0, MPI_COMM_SELF);
  sleeper.join();
  EXPECT_EQ(bell_value(node.bell(0)), 1u);
  EXPECT_EQ(bell_value(node.bell(1)), 0u);
  // woken by the ring, not by the 60 s timeout (the bound is not a speed figure)
  EXPECT_LT(slept, 30.0);
}

TEST(Doorbell, ASleepOnAValueAlreadyPassedReturnsAtOnce) {
  Node node;
  ring(0, MPI_COMM_SELF);
  ring(0, MPI_COMM_SELF);
  EXPECT_EQ(bell_value(node.bell(0)), 2u);
  const auto t0 = Clock::now();
  sleep_on_bell(node.bell(0), 1, 60.0);  // the ring came after `seen` was read
  EXPECT_LT(seconds_since(t0), 30.0);
}

TEST(Doorbell, ASleepWithNoRingEndsAtItsTimeout) {
  Node node;
  sleep_on_bell(node.bell(0), 0, 0.001);
  EXPECT_EQ(bell_value(node.bell(0)), 0u);
}

TEST(Doorbell, RingsNotForABellOfTheNodeChangeNothing) {
  Node node;
  ring(1, MPI_COMM_SELF);    // this rank's own bell
  ring(2, MPI_COMM_SELF);    // no such rank
  ring(-1, MPI_COMM_SELF);
  ring(0, MPI_COMM_WORLD);   // a communicator the bells are not for
  EXPECT_EQ(bell_value(node.bell(0)), 0u);
  EXPECT_EQ(bell_value(node.bell(1)), 0u);
  EXPECT_EQ(asgd::ps::own_bell(), node.bell(1));
  set_doorbells(MPI_COMM_NULL, {}, 0);
  ring(0, MPI_COMM_SELF);    // unregistered
  EXPECT_EQ(bell_value(node.bell(0)), 0u);
  EXPECT_EQ(asgd::ps::own_bell(), nullptr);
}

TEST(Doorbell, TheEnvironmentTurnsThemOff) {
  unsetenv("ASGD_DOORBELL");
  EXPECT_TRUE(asgd::ps::doorbells_wanted());
  setenv("ASGD_DOORBELL", "0", 1);
  EXPECT_FALSE(asgd::ps::doorbells_wanted());
  setenv("ASGD_DOORBELL", "1", 1);
  EXPECT_TRUE(asgd::ps::doorbells_wanted());
  setenv("ASGD_DOORBELL", "no", 1);
  try {
    (void)asgd::ps::doorbells_wanted();
    ADD_FAILURE() << "ASGD_DOORBELL=no was taken";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ASGD_DOORBELL='no': want 1 (on, the default) or 0 (off)"),
              std::string::npos)
        << e.what();
  }
  unsetenv("ASGD_DOORBELL");
}

}  // namespace
