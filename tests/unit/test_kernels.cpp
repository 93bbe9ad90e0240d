// Kernel tests (being written): window geometry.
#include <gtest/gtest.h>

#include "kernels/kernels.hpp"

TEST(Window, PoolCeilMode) {
  EXPECT_EQ(asgd::kernels::pool_window(1, 32, 32, 3, 3, 2).oh, 16);
  EXPECT_EQ(asgd::kernels::pool_window(1, 28, 28, 3, 2, 2).oh, 14);
}
