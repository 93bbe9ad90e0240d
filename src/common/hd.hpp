#pragma once
// ASGD_HD marks a function both the host compiler and nvcc compile:
// __host__ __device__ under nvcc (kernels.cu, a Kokkos CUDA build), nothing
// otherwise. The one definition; common/hash.hpp and kernels/elementwise.hpp use it.
#if defined(__CUDACC__)
#define ASGD_HD __host__ __device__
#else
#define ASGD_HD
#endif
