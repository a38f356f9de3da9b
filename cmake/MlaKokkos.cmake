# Finds Kokkos. A Kokkos built by the user (find_package(Kokkos) giving
# Kokkos::kokkos) is used as it is. Debian's libtrilinos-kokkos-dev ships a
# TriBITS package whose include directory resolves to <prefix>/lib/include,
# which does not exist; for that case we build our own imported target from the
# real header and library locations instead of editing system files.
#
# MLA_KOKKOS_HOST_PARALLEL=ON (the cpu-openmp preset) requires a Kokkos with a
# host-parallel execution space (OpenMP or Threads; ci/setup-kokkos builds
# one, found through Kokkos_ROOT) and fails the configuration otherwise, so a
# build meant to test it never falls back to Debian's Serial-only Kokkos.
option(MLA_KOKKOS_HOST_PARALLEL "Require a Kokkos with the OpenMP or Threads execution space" OFF)
find_package(Kokkos CONFIG QUIET)
if(TARGET Kokkos::kokkos)
  # Debian's package defines Kokkos::kokkos too, with that broken include
  # directory: use the target only when its include directories exist.
  get_target_property(mla_kokkos_dirs Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(mla_kokkos_usable TRUE)
  foreach(dir IN LISTS mla_kokkos_dirs)
    if(NOT dir MATCHES "^\\$<" AND NOT EXISTS "${dir}")
      set(mla_kokkos_usable FALSE)
    endif()
  endforeach()
  if(mla_kokkos_usable)
    set(MLA_KOKKOS_TARGET Kokkos::kokkos)
    # What a static libmla's consumers link: the package, found again by
    # mlaprefillConfig.cmake.
    set(MLA_KOKKOS_INSTALL_LINK Kokkos::kokkos)
    set(MLA_KOKKOS_FROM_PACKAGE TRUE)
    message(STATUS "Kokkos: using Kokkos::kokkos ${Kokkos_VERSION} (${Kokkos_DIR}; devices ${Kokkos_DEVICES})")
    if(MLA_KOKKOS_HOST_PARALLEL AND NOT "OPENMP" IN_LIST Kokkos_DEVICES AND NOT "PTHREAD" IN_LIST Kokkos_DEVICES
       AND NOT "THREADS" IN_LIST Kokkos_DEVICES)
      message(FATAL_ERROR "MLA_KOKKOS_HOST_PARALLEL=ON but the Kokkos in ${Kokkos_DIR} has only ${Kokkos_DEVICES}: "
                          "run ci/setup-kokkos and pass -DKokkos_ROOT=$(ci/setup-kokkos --dir)")
    endif()
    return()
  endif()
endif()

if(MLA_KOKKOS_HOST_PARALLEL)
  message(FATAL_ERROR "MLA_KOKKOS_HOST_PARALLEL=ON but no usable Kokkos package was found (Debian's is Serial only): "
                      "run ci/setup-kokkos and pass -DKokkos_ROOT=$(ci/setup-kokkos --dir)")
endif()
find_path(MLA_KOKKOS_INCLUDE_DIR Kokkos_Core.hpp PATH_SUFFIXES trilinos kokkos)
find_library(MLA_KOKKOS_CORE_LIBRARY NAMES kokkoscore trilinos_kokkoscore)
if(NOT MLA_KOKKOS_INCLUDE_DIR OR NOT MLA_KOKKOS_CORE_LIBRARY)
  message(FATAL_ERROR "Kokkos not found: install libtrilinos-kokkos-dev (ci/setup does) "
                      "or configure with -DMLA_WITH_KOKKOS=OFF")
endif()
add_library(mla_kokkos INTERFACE IMPORTED GLOBAL)
target_include_directories(mla_kokkos SYSTEM INTERFACE ${MLA_KOKKOS_INCLUDE_DIR})
target_link_libraries(mla_kokkos INTERFACE ${MLA_KOKKOS_CORE_LIBRARY} ${CMAKE_DL_LIBS})
set(MLA_KOKKOS_TARGET mla_kokkos)
# mla_kokkos is local to this build; a static libmla's consumers link the
# library file itself.
set(MLA_KOKKOS_INSTALL_LINK ${MLA_KOKKOS_CORE_LIBRARY} ${CMAKE_DL_LIBS})
set(MLA_KOKKOS_FROM_PACKAGE FALSE)
message(STATUS "Kokkos: headers ${MLA_KOKKOS_INCLUDE_DIR}, library ${MLA_KOKKOS_CORE_LIBRARY}")
