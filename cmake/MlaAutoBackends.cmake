# MLA_BACKENDS_AUTO=ON (pip's build, pyproject.toml): every backend whose
# toolkit this machine has is built, instead of the options' defaults:
#   KOKKOS        on Kokkos_ROOT when given, else on the OpenMP Kokkos that
#                 ci/setup-kokkos keeps in its cache folder, else on the
#                 system's Kokkos package (Debian's is Serial: one core);
#   CUDA_FLASH,   when an nvcc is found (CMAKE_CUDA_COMPILER, CUDACXX, PATH,
#   HOPPER_FLASH  /usr/local/cuda, or ci/setup-cuda's folder) whose toolkit has
#                 cuBLASLt; MLA_FETCH_CUDA=ON first fetches NVIDIA's compiler
#                 wheels with ci/setup-cuda, for a machine without a toolkit.
#                 HOPPER_FLASH needs nvcc 12.3 or newer.
# A switch given on the command line (-DMLA_WITH_KOKKOS=OFF, or pip's
# -C cmake.define.MLA_WITH_CUDA=OFF) is kept as given. Included before the
# options are declared, so that what it sets becomes their value.
#
# The decisions are plain variables, not cache entries, so that each
# configuration finds again (a toolkit installed since, pip's build folder
# reused); the options below then take them as their values.
# Sets MLA_AUTO_WHY_<NAME> to why a backend was left out or where its
# toolkit came from, for the build summary (MlaBuildSummary.cmake). No path of
# this machine goes into those texts: they end up inside the wheel.
option(MLA_FETCH_CUDA "With MLA_BACKENDS_AUTO: fetch NVIDIA's CUDA compiler wheels (ci/setup-cuda) when no nvcc is found" OFF)

set(mla_ci_dir ${CMAKE_CURRENT_LIST_DIR}/../ci)

# KOKKOS.
# MLA_WITH_KOKKOS=ON given still takes the best Kokkos found (an ON must not
# mean the system's one-core Serial Kokkos when the OpenMP one is there).
if(DEFINED CACHE{MLA_WITH_KOKKOS} AND NOT MLA_WITH_KOKKOS)
  set(MLA_AUTO_WHY_KOKKOS "MLA_WITH_KOKKOS=OFF given")
elseif(DEFINED Kokkos_ROOT OR DEFINED ENV{Kokkos_ROOT})
  set(MLA_WITH_KOKKOS ON)
  set(MLA_AUTO_WHY_KOKKOS "the Kokkos of Kokkos_ROOT")
else()
  set(mla_kokkos_cached "")
  if(EXISTS ${mla_ci_dir}/setup-kokkos)
    execute_process(COMMAND bash ${mla_ci_dir}/setup-kokkos --dir openmp
      OUTPUT_VARIABLE mla_kokkos_cached OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  find_path(MLA_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp PATH_SUFFIXES trilinos kokkos)
  if(mla_kokkos_cached AND EXISTS ${mla_kokkos_cached}/lib/cmake/Kokkos/KokkosConfig.cmake)
    set(Kokkos_ROOT ${mla_kokkos_cached})
    set(MLA_WITH_KOKKOS ON)
    set(MLA_AUTO_WHY_KOKKOS "the OpenMP Kokkos ci/setup-kokkos built")
    message(STATUS "mlaprefill: KOKKOS on the OpenMP Kokkos of ci/setup-kokkos (${mla_kokkos_cached})")
  elseif(MLA_KOKKOS_INCLUDE_DIR)
    set(MLA_WITH_KOKKOS ON)
    set(MLA_AUTO_WHY_KOKKOS "the system's Kokkos package (ci/setup-kokkos's OpenMP Kokkos was not found)")
    message(STATUS "mlaprefill: KOKKOS on the system's Kokkos (${MLA_KOKKOS_INCLUDE_DIR}); "
                   "ci/setup-kokkos builds one with OpenMP, which this build would take instead")
  elseif(NOT DEFINED CACHE{MLA_WITH_KOKKOS})
    set(MLA_WITH_KOKKOS OFF)
    set(MLA_AUTO_WHY_KOKKOS "no Kokkos found (ci/setup-kokkos builds one; or set Kokkos_ROOT)")
  endif()
endif()

# CUDA_FLASH and HOPPER_FLASH.
if(DEFINED CACHE{MLA_WITH_CUDA})
  if(NOT MLA_WITH_CUDA)
    set(MLA_AUTO_WHY_CUDA "MLA_WITH_CUDA=OFF given")
  endif()
else()
  set(mla_nvcc "")
  if(CMAKE_CUDA_COMPILER)
    set(mla_nvcc ${CMAKE_CUDA_COMPILER})
  elseif(DEFINED ENV{CUDACXX})
    set(mla_nvcc $ENV{CUDACXX})
  else()
    set(mla_setup_cuda_dir "")
    if(EXISTS ${mla_ci_dir}/setup-cuda)
      execute_process(COMMAND bash ${mla_ci_dir}/setup-cuda --dir
        OUTPUT_VARIABLE mla_setup_cuda_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    endif()
    find_program(MLA_NVCC nvcc PATHS /usr/local/cuda/bin ${mla_setup_cuda_dir}/bin NO_CACHE)
    if(NOT MLA_NVCC AND MLA_FETCH_CUDA AND mla_setup_cuda_dir)
      message(STATUS "mlaprefill: no nvcc found and MLA_FETCH_CUDA=ON: fetching NVIDIA's CUDA compiler wheels "
                     "(ci/setup-cuda, into ${mla_setup_cuda_dir})")
      execute_process(COMMAND bash ${mla_ci_dir}/setup-cuda COMMAND_ERROR_IS_FATAL ANY)
      find_program(MLA_NVCC nvcc PATHS ${mla_setup_cuda_dir}/bin NO_DEFAULT_PATH NO_CACHE)
    endif()
    if(MLA_NVCC)
      set(mla_nvcc ${MLA_NVCC})
    endif()
  endif()
  # Why this nvcc cannot build the CUDA backends; empty when it can.
  set(mla_cuda_why "")
  if(NOT mla_nvcc)
    set(mla_cuda_why "nvcc not found (install a CUDA toolkit, or pass MLA_FETCH_CUDA=ON to fetch NVIDIA's)")
  else()
    execute_process(COMMAND ${mla_nvcc} --version OUTPUT_VARIABLE mla_nvcc_version_text RESULT_VARIABLE mla_nvcc_status)
    string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" mla_nvcc_release "${mla_nvcc_version_text}")
    set(mla_nvcc_version ${CMAKE_MATCH_1})
    get_filename_component(mla_toolkit ${mla_nvcc} DIRECTORY)
    get_filename_component(mla_toolkit ${mla_toolkit} DIRECTORY)
    file(GLOB mla_cublaslt ${mla_toolkit}/lib64/libcublasLt.so ${mla_toolkit}/lib/libcublasLt.so
         ${mla_toolkit}/targets/*/lib/libcublasLt.so)
    if(NOT mla_nvcc_status EQUAL 0 OR NOT mla_nvcc_version)
      set(mla_cuda_why "${mla_nvcc} does not run or report its release")
    elseif(mla_nvcc_version VERSION_LESS 12.0)
      set(mla_cuda_why "nvcc ${mla_nvcc_version} is older than 12.0, the oldest these kernels build with")
    elseif(NOT mla_cublaslt)
      set(mla_cuda_why "the CUDA toolkit of nvcc ${mla_nvcc_version} has no cuBLASLt, which the MLA step links")
    endif()
  endif()
  if(mla_cuda_why)
    set(MLA_WITH_CUDA OFF)
    set(MLA_AUTO_WHY_CUDA "${mla_cuda_why}")
  else()
    set(CMAKE_CUDA_COMPILER ${mla_nvcc} CACHE FILEPATH "The CUDA compiler")
    set(MLA_WITH_CUDA ON)
    message(STATUS "mlaprefill: CUDA_FLASH with ${mla_nvcc} (${mla_nvcc_version})")
    if(NOT DEFINED CACHE{MLA_WITH_HOPPER_FLASH})
      if(mla_nvcc_version VERSION_LESS 12.3)
        set(MLA_AUTO_WHY_HOPPER "nvcc ${mla_nvcc_version} is older than 12.3, which its sm_90a kernels need")
      else()
        set(MLA_WITH_HOPPER_FLASH ON)
      endif()
    endif()
  endif()
endif()
