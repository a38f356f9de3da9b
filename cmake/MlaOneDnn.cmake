# Finds oneDNN for the KOKKOS backend's up-projection
# (backends/kokkos/onednn_projection.cpp). Optional: without it KOKKOS
# projects with its own micro-GEMM, and configuration says why.
#
# Sets MLA_ONEDNN_FOUND, and when true the imported target mla_onednn and
# MLA_ONEDNN_INSTALL_LINK (what a static libmla's consumers link).
#
# Debian's dnnl CMake package (libdnnl-dev) calls find_package(OpenCL
# REQUIRED), which fails the whole configuration where OpenCL's development
# files are missing although the CPU engine needs none of them; so the
# header and library are found directly, as for Debian's Kokkos
# (MlaKokkos.cmake).
#
# The projection runs oneDNN on one thread inside each of its own work items
# (the backend's Kokkos threads), and tells oneDNN so through the OpenMP
# runtime's per-thread setting: only a oneDNN built for OpenMP (Debian's) or
# sequential is used, and with an OpenMP runtime that is GCC's libgomp, the
# one such a oneDNN was linked with.
set(MLA_ONEDNN_FOUND FALSE)
find_path(MLA_ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(MLA_ONEDNN_LIBRARY NAMES dnnl)
if(NOT MLA_ONEDNN_INCLUDE_DIR OR NOT MLA_ONEDNN_LIBRARY)
  message(STATUS "KOKKOS projection: own micro-GEMM (oneDNN not found: install libdnnl-dev, ci/setup does)")
  return()
endif()
file(STRINGS "${MLA_ONEDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h" mla_onednn_runtime
     REGEX "^#define DNNL_CPU_RUNTIME ")
if(mla_onednn_runtime MATCHES "DNNL_RUNTIME_OMP")
  find_package(OpenMP COMPONENTS CXX QUIET)
  if(NOT OpenMP_CXX_FOUND)
    message(STATUS "KOKKOS projection: own micro-GEMM (oneDNN ${MLA_ONEDNN_LIBRARY} uses OpenMP, and CMake "
                   "found no OpenMP for this compiler)")
    return()
  endif()
  if(NOT "gomp" IN_LIST OpenMP_CXX_LIB_NAMES)
    message(STATUS "KOKKOS projection: own micro-GEMM (oneDNN ${MLA_ONEDNN_LIBRARY} uses GCC's libgomp, and this "
                   "compiler's OpenMP runtime is '${OpenMP_CXX_LIB_NAMES}')")
    return()
  endif()
  set(mla_onednn_omp ${OpenMP_CXX_LIBRARIES})
elseif(mla_onednn_runtime MATCHES "DNNL_RUNTIME_SEQ")
  set(mla_onednn_omp)
else()
  message(STATUS "KOKKOS projection: own micro-GEMM (oneDNN's CPU runtime is neither OpenMP nor sequential: "
                 "${mla_onednn_runtime}; its threads could not follow the backend's)")
  return()
endif()
add_library(mla_onednn INTERFACE IMPORTED GLOBAL)
target_include_directories(mla_onednn SYSTEM INTERFACE ${MLA_ONEDNN_INCLUDE_DIR})
target_link_libraries(mla_onednn INTERFACE ${MLA_ONEDNN_LIBRARY} ${mla_onednn_omp})
if(mla_onednn_omp)
  target_compile_definitions(mla_onednn INTERFACE MLA_ONEDNN_OPENMP=1)
endif()
set(MLA_ONEDNN_INSTALL_LINK ${MLA_ONEDNN_LIBRARY} ${mla_onednn_omp})
set(MLA_ONEDNN_FOUND TRUE)
message(STATUS "KOKKOS projection: oneDNN (${MLA_ONEDNN_LIBRARY}) for fp32 and bf16, own micro-GEMM otherwise")
