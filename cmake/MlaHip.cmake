# Enables CMake's HIP language, both with a ROCm install (/opt/rocm, found by
# CMake itself) and with Debian's split packages (hipcc, libamdhip64-dev,
# rocm-device-libs, libamd-comgr-dev, libhsa-runtime-dev), without editing
# system files. What Debian's layout needs and CMake 3.25 does not do:
#
#  - CMake looks for <ROCm root>/lib/cmake/hip-lang/hip-lang-config.cmake, but
#    Debian installs it under lib/<multiarch>/cmake/hip-lang. We make a ROCm
#    root in the build tree whose lib/cmake/hip-lang links to Debian's folder.
#  - hip-lang-config.cmake finds amd_comgr and hsa-runtime64 through
#    find_dependency, also inside CMake's own try_compile projects, so the
#    folder holding their package files goes into CMAKE_PREFIX_PATH and is
#    forwarded to those projects.
#  - clang finds neither the HIP headers nor the device bitcode in /usr by
#    itself: --rocm-path and --hip-device-lib-path tell it.
#
# Then it probes which of MLA_HIP_CANDIDATE_ARCHITECTURES the compiler accepts
# (clang 15 knows gfx90a and gfx908 but not gfx942 or gfx950) and builds for those,
# unless CMAKE_HIP_ARCHITECTURES was given. MLA_HIP_ARCHITECTURES holds the
# result for the backend's host-side arch check.

set(MLA_HIP_CANDIDATE_ARCHITECTURES "gfx90a;gfx908;gfx942;gfx950" CACHE STRING
    "gfx targets the HIP build tries when CMAKE_HIP_ARCHITECTURES is not set; those the compiler rejects are dropped")

# --- the compiler: the clang that hipcc drives --------------------------------
if(NOT CMAKE_HIP_COMPILER AND "$ENV{HIPCXX}" STREQUAL "")
  execute_process(COMMAND hipconfig --hipclangpath
    OUTPUT_VARIABLE mla_hip_clang_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE mla_rc)
  if(NOT mla_rc EQUAL 0)
    set(mla_hip_clang_dir "")
  endif()
  # ROCm ships amdclang++; Debian's hipcc calls clang++-15. A plain clang++
  # comes last because on Debian it may be a different LLVM than the device libs.
  find_program(MLA_HIP_CLANG NAMES amdclang++ clang++-15 clang++
    HINTS ${mla_hip_clang_dir} "$ENV{ROCM_PATH}/llvm/bin" /opt/rocm/llvm/bin
    DOC "clang++ used as the HIP compiler")
  if(NOT MLA_HIP_CLANG)
    message(FATAL_ERROR "MLA_WITH_HIP: no HIP-capable clang++ found; install hipcc (ci/setup does) "
                        "or set CMAKE_HIP_COMPILER")
  endif()
  set(CMAKE_HIP_COMPILER "${MLA_HIP_CLANG}" CACHE FILEPATH "HIP compiler")
endif()
# The compiler the probes below run: CMake's choice, or the one HIPCXX names.
if(CMAKE_HIP_COMPILER)
  set(mla_hip_compiler "${CMAKE_HIP_COMPILER}")
else()
  separate_arguments(mla_hipcxx NATIVE_COMMAND "$ENV{HIPCXX}")
  list(GET mla_hipcxx 0 mla_hip_compiler)
endif()

# --- the HIP runtime's CMake package and the ROCm root CMake expects ----------
set(mla_hip_lang_suffixes lib/cmake/hip-lang)
if(CMAKE_LIBRARY_ARCHITECTURE)
  list(APPEND mla_hip_lang_suffixes lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang)
endif()
find_path(MLA_HIP_LANG_DIR hip-lang-config.cmake
  HINTS "$ENV{ROCM_PATH}" /opt/rocm
  PATH_SUFFIXES ${mla_hip_lang_suffixes}
  DOC "Folder holding hip-lang-config.cmake")
find_path(MLA_HIP_INCLUDE_DIR hip/hip_runtime.h
  HINTS "$ENV{ROCM_PATH}/include" /opt/rocm/include
  DOC "Folder holding hip/hip_runtime.h")
if(NOT MLA_HIP_LANG_DIR OR NOT MLA_HIP_INCLUDE_DIR)
  message(FATAL_ERROR "MLA_WITH_HIP: the HIP runtime's development files were not found "
                      "(hip-lang-config.cmake: ${MLA_HIP_LANG_DIR}, hip/hip_runtime.h: ${MLA_HIP_INCLUDE_DIR}); "
                      "install libamdhip64-dev (ci/setup does) or ROCm")
endif()
get_filename_component(mla_rocm_path "${MLA_HIP_INCLUDE_DIR}" DIRECTORY)

if(NOT CMAKE_HIP_COMPILER_ROCM_ROOT)
  if(MLA_HIP_LANG_DIR MATCHES "^(.*)/lib/cmake/hip-lang$")
    set(CMAKE_HIP_COMPILER_ROCM_ROOT "${CMAKE_MATCH_1}")
  else()
    # Multiarch layout: a ROCm root of links. hip-lang-config.cmake resolves its
    # own real path, so it still sees the system prefix through the link.
    set(mla_rocm_shim "${CMAKE_BINARY_DIR}/hip-rocm-root")
    file(MAKE_DIRECTORY "${mla_rocm_shim}/lib/cmake")
    if(NOT EXISTS "${mla_rocm_shim}/lib/cmake/hip-lang/hip-lang-config.cmake")
      file(CREATE_LINK "${MLA_HIP_LANG_DIR}" "${mla_rocm_shim}/lib/cmake/hip-lang" SYMBOLIC)
    endif()
    set(CMAKE_HIP_COMPILER_ROCM_ROOT "${mla_rocm_shim}")
  endif()
endif()

# amd_comgr, hsa-runtime64 and AMDDeviceLibs package files live next to hip-lang.
get_filename_component(mla_hip_cmake_dir "${MLA_HIP_LANG_DIR}" DIRECTORY)
list(APPEND CMAKE_PREFIX_PATH "${mla_hip_cmake_dir}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CMAKE_PREFIX_PATH)

# --- where clang finds the HIP headers and the device bitcode -----------------
set(mla_bitcode_suffixes amdgcn/bitcode lib/amdgcn/bitcode)
if(CMAKE_LIBRARY_ARCHITECTURE)
  list(APPEND mla_bitcode_suffixes lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode)
endif()
find_path(MLA_HIP_DEVICE_LIB_PATH ocml.bc
  HINTS "${mla_rocm_path}" "$ENV{ROCM_PATH}" /opt/rocm
  PATH_SUFFIXES ${mla_bitcode_suffixes}
  DOC "Folder of the ROCm device libraries (ocml.bc, ockl.bc, ...)")
if(NOT MLA_HIP_DEVICE_LIB_PATH)
  message(FATAL_ERROR "MLA_WITH_HIP: the ROCm device libraries (ocml.bc) were not found; "
                      "install rocm-device-libs (ci/setup does) or ROCm")
endif()
set(mla_hip_toolchain_flags "--rocm-path=${mla_rocm_path}" "--hip-device-lib-path=${MLA_HIP_DEVICE_LIB_PATH}")
# A normal variable in front of the cached flags: these say where the toolchain
# is, they are not tuning a user should have to repeat in CMAKE_HIP_FLAGS.
list(JOIN mla_hip_toolchain_flags " " mla_joined)
set(CMAKE_HIP_FLAGS "${mla_joined} ${CMAKE_HIP_FLAGS}")

# hip-lang-config.cmake globs clang runtime folders of every installed LLVM and
# may take another version's builtins; ask the compiler for its own.
if(NOT CLANGRT_BUILTINS)
  execute_process(COMMAND "${mla_hip_compiler}" --rtlib=compiler-rt -print-libgcc-file-name
    OUTPUT_VARIABLE mla_builtins OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE mla_rc)
  if(mla_rc EQUAL 0 AND EXISTS "${mla_builtins}")
    set(CLANGRT_BUILTINS "${mla_builtins}" CACHE FILEPATH "compiler-rt builtins of the HIP compiler")
  endif()
endif()

# --- which gfx targets the compiler accepts -----------------------------------
# Probed once per (compiler, candidate list); the answer is cached so that a
# re-configure neither repeats the compiles nor mistakes it for a user's choice.
set(mla_probe_key "${mla_hip_compiler}|${MLA_HIP_CANDIDATE_ARCHITECTURES}")
if(NOT MLA_HIP_PROBE_KEY STREQUAL mla_probe_key)
  set(mla_probe_source "${CMAKE_BINARY_DIR}/CMakeFiles/mla_hip_arch_probe.hip")
  file(WRITE "${mla_probe_source}"
    "#include <hip/hip_runtime.h>\n__global__ void mla_probe(float* x) { x[threadIdx.x] = 1.0f; }\n")
  set(mla_accepted "")
  set(mla_rejected "")
  foreach(arch IN LISTS MLA_HIP_CANDIDATE_ARCHITECTURES)
    execute_process(
      COMMAND "${mla_hip_compiler}" -x hip ${mla_hip_toolchain_flags} --offload-arch=${arch}
              --offload-device-only -c "${mla_probe_source}" -o "${mla_probe_source}.${arch}.o"
      RESULT_VARIABLE mla_rc OUTPUT_QUIET ERROR_VARIABLE mla_error)
    if(mla_rc EQUAL 0)
      list(APPEND mla_accepted ${arch})
    else()
      # First line of clang's complaint, without the boilerplate around it.
      string(REGEX REPLACE "\n.*" "" mla_error "${mla_error}")
      string(REGEX REPLACE "^[^:]*: error: " "" mla_error "${mla_error}")
      string(REGEX REPLACE ";.*" "" mla_error "${mla_error}")
      list(APPEND mla_rejected "${arch} (${mla_error})")
    endif()
  endforeach()
  set(MLA_HIP_PROBE_KEY "${mla_probe_key}" CACHE INTERNAL "")
  set(MLA_HIP_PROBE_ACCEPTED "${mla_accepted}" CACHE INTERNAL "")
  set(MLA_HIP_PROBE_REJECTED "${mla_rejected}" CACHE INTERNAL "")
endif()
list(JOIN MLA_HIP_PROBE_REJECTED "; " mla_rejected_text)
if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
  if(NOT MLA_HIP_PROBE_ACCEPTED)
    message(FATAL_ERROR "MLA_WITH_HIP: ${mla_hip_compiler} accepts none of ${MLA_HIP_CANDIDATE_ARCHITECTURES}: "
                        "${mla_rejected_text}")
  endif()
  set(CMAKE_HIP_ARCHITECTURES "${MLA_HIP_PROBE_ACCEPTED}" CACHE STRING "gfx targets of the HIP build")
endif()
message(STATUS "HIP targets accepted by ${mla_hip_compiler}: ${MLA_HIP_PROBE_ACCEPTED}")
if(MLA_HIP_PROBE_REJECTED)
  message(STATUS "HIP targets rejected by the compiler: ${mla_rejected_text}")
endif()
message(STATUS "HIP targets built (CMAKE_HIP_ARCHITECTURES): ${CMAKE_HIP_ARCHITECTURES}")

enable_language(HIP)
set(CMAKE_HIP_STANDARD 20)
set(CMAKE_HIP_STANDARD_REQUIRED ON)
set(CMAKE_HIP_EXTENSIONS OFF)

# Strip feature suffixes (gfx90a:xnack+ -> gfx90a): the backend compares bare names.
set(MLA_HIP_ARCHITECTURES "")
foreach(arch IN LISTS CMAKE_HIP_ARCHITECTURES)
  string(REGEX REPLACE ":.*" "" arch "${arch}")
  list(APPEND MLA_HIP_ARCHITECTURES ${arch})
endforeach()
list(REMOVE_DUPLICATES MLA_HIP_ARCHITECTURES)

# MFMA targets the HIP compiler rejected, compiled by a newer clang for inspection.
include(MlaHipDeviceCode)
