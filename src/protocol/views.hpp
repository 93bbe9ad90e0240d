#pragma once
// The protocol types' own files run their maths over Kokkos views of the plain
// vectors (protocol::Vec) they are given: a shard's vectors live in the run's
// execution space, a learner's staged copy on the host. Included by the types'
// .cpp files only, so that the part's headers stay free of Kokkos.
#include <Kokkos_Core.hpp>

#include "protocol/protocol.hpp"

namespace asgd::protocol {

using DeviceSpace = Kokkos::DefaultExecutionSpace;
using HostSpace = Kokkos::DefaultHostExecutionSpace;

template <class Space, class T = real_t>
using VecView = Kokkos::View<T*, Kokkos::LayoutRight, typename Space::memory_space, Kokkos::MemoryUnmanaged>;

// v as a view in Space's memory (no copy).
template <class Space = DeviceSpace>
VecView<Space> view(Vec v) {
  return VecView<Space>(v.data, v.size);
}
template <class Space = DeviceSpace>
VecView<Space, const real_t> view(CVec v) {
  return VecView<Space, const real_t>(v.data, v.size);
}

// An elementwise kernel over n entries in Space.
template <class Space = DeviceSpace, class F>
void for_each(const char* label, index_t n, const F& f) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<Space>(0, n), f);
}

}  // namespace asgd::protocol
