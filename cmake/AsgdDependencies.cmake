# Every dependency comes from the system (Debian packages) or, for Kokkos and
# KokkosKernels, from a user's own install found through Kokkos_ROOT /
# KokkosKernels_ROOT.

find_package(Kokkos REQUIRED)
# Debian's Trilinos build of Kokkos 3.4 exports Kokkos::kokkos with a
# non-existent include folder (/usr/lib/include) and without
# /usr/include/trilinos; keep the folders that exist and add that one. Only
# for Debian's (a Kokkos of its own, e.g. tools/setup.sh --kokkos-openmp's,
# must not see Debian's headers).
if(TARGET Kokkos::kokkos AND Kokkos_DIR MATCHES "^/usr/")
  get_target_property(_asgd_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  if(_asgd_kokkos_inc)
    set(_asgd_keep)
    foreach(_dir IN LISTS _asgd_kokkos_inc)
      if(_dir MATCHES "^\\$<" OR EXISTS "${_dir}")
        list(APPEND _asgd_keep "${_dir}")
      endif()
    endforeach()
    if(EXISTS /usr/include/trilinos/Kokkos_Core.hpp)
      list(APPEND _asgd_keep /usr/include/trilinos)
    endif()
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_asgd_keep}")
  endif()
endif()

find_package(KokkosKernels REQUIRED)
add_library(asgd_kokkoskernels INTERFACE)
if(TARGET Kokkos::kokkoskernels)
  # A standalone KokkosKernels install (a user's OpenMP or CUDA build).
  target_link_libraries(asgd_kokkoskernels INTERFACE Kokkos::kokkoskernels)
else()
  # Debian's Trilinos package: no imported target, variables only.
  target_include_directories(asgd_kokkoskernels SYSTEM INTERFACE ${KokkosKernels_INCLUDE_DIRS})
  target_link_libraries(asgd_kokkoskernels INTERFACE ${KokkosKernels_LIBRARIES})
endif()
target_link_libraries(asgd_kokkoskernels INTERFACE Kokkos::kokkos)

find_package(HDF5 REQUIRED COMPONENTS C)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Boost 1.74 REQUIRED)  # header-only: Boost.Math's distributions
if(ASGD_ENABLE_TESTS)
  find_package(GTest REQUIRED)
endif()
if(ASGD_ENABLE_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
