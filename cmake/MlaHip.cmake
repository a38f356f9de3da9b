# Enables CMake's HIP language, both with a ROCm install (/opt/rocm, found by
# CMake itself) and with Debian's split packages (hipcc, libamdhip64-dev,
# rocm-device-libs, libamd-comgr-dev, libhsa-runtime-dev), without editing
# system files. What Debian's layout needs and CMake 3.25 does not do:
#
#  - CMake looks for <ROCm root>/lib/cmake/hip-lang/hip-lang-config.cmake, but
#    Debian installs it under lib/<multiarch>/cmake/hip-lang. We make a ROCm
#    root in the build tree (see "ROCm root" below).
#  - hip-lang-config.cmake finds amd_comgr and hsa-runtime64 through
#    find_dependency, also inside CMake's own try_compile projects, so the
#    folder holding their package files goes into CMAKE_PREFIX_PATH and is
#    forwarded to those projects.
#  - clang finds neither the HIP headers nor the device bitcode in /usr by
#    itself: --rocm-path and --hip-device-lib-path tell it.
#
# The HIP compiler: ROCm's amdclang++, else Debian's clang++-19, else the
# clang++-15 that Debian's hipcc drives. clang 19 is preferred because it
# targets gfx942 (MI300) as well as gfx90a and gfx908; clang 15 predates
# gfx942. A newer clang with ROCm 5.2's headers and bitcode needs two things,
# both below: an ISA file for gfx941/gfx942 in the device library folder, and
# code object version 4.
#
# Then it probes which of MLA_HIP_CANDIDATE_ARCHITECTURES the compiler accepts
# (clang 19 knows gfx90a, gfx908 and gfx942 but not gfx950) and builds for
# those, unless CMAKE_HIP_ARCHITECTURES was given. MLA_HIP_ARCHITECTURES holds
# the result for the backend's host-side arch check.

set(MLA_HIP_CANDIDATE_ARCHITECTURES "gfx90a;gfx908;gfx942;gfx950" CACHE STRING
    "gfx targets the HIP build tries when CMAKE_HIP_ARCHITECTURES is not set; those the compiler rejects are dropped")

# --- the compiler: the clang that hipcc drives --------------------------------
if(NOT CMAKE_HIP_COMPILER AND "$ENV{HIPCXX}" STREQUAL "")
  execute_process(COMMAND hipconfig --hipclangpath
    OUTPUT_VARIABLE mla_hip_clang_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE mla_rc)
  if(NOT mla_rc EQUAL 0)
    set(mla_hip_clang_dir "")
  endif()
  # ROCm ships amdclang++; Debian has clang++-19 (gfx942) and the clang++-15
  # its hipcc calls. A plain clang++ comes last because on Debian it may be an
  # LLVM that cannot read the device libs.
  find_program(MLA_HIP_CLANG NAMES amdclang++ clang++-19 clang++-15 clang++
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

# A symbolic link `link` to `target`, unless `target` is missing or `link`
# exists already (a second configure keeps what the first made).
function(mla_hip_link target link)
  if(EXISTS "${target}" AND NOT EXISTS "${link}")
    file(CREATE_LINK "${target}" "${link}" SYMBOLIC)
  endif()
endfunction()

# ROCm root: with ROCm's layout, the prefix of lib/cmake/hip-lang. With the
# multiarch layout, a prefix in the build tree holding copies of the hip-lang
# package files (unchanged) and links to the headers and the runtime library.
# Copies, not a link to the folder: the package names <its prefix>/include as
# the HIP include folder, which would be /usr/include, and CMake passes it as
# -isystem until the compiler's implicit folders are known. clang 19's HIP
# wrapper includes <cmath>, whose #include_next <math.h> then finds nothing
# after /usr/include, and even that detection fails. In the build tree's
# prefix the include folder holds only hip/ and hsa/. (The package computes
# its prefix four levels above its own real path: <prefix>/cmake-root/lib/cmake/hip-lang.)
if(NOT CMAKE_HIP_COMPILER_ROCM_ROOT)
  if(MLA_HIP_LANG_DIR MATCHES "^(.*)/lib/cmake/hip-lang$")
    set(CMAKE_HIP_COMPILER_ROCM_ROOT "${CMAKE_MATCH_1}")
  else()
    set(mla_prefix "${CMAKE_BINARY_DIR}/hip-rocm")
    set(mla_lang "${mla_prefix}/cmake-root/lib/cmake/hip-lang")
    file(GLOB mla_lang_files "${MLA_HIP_LANG_DIR}/*.cmake")
    file(COPY ${mla_lang_files} DESTINATION "${mla_lang}")
    file(MAKE_DIRECTORY "${mla_prefix}/include")
    foreach(dir hip hsa)
      mla_hip_link("${MLA_HIP_INCLUDE_DIR}/${dir}" "${mla_prefix}/include/${dir}")
    endforeach()
    # The runtime library, where the package's targets file expects it.
    get_filename_component(mla_lib_dir "${MLA_HIP_LANG_DIR}/../.." ABSOLUTE)
    get_filename_component(mla_system_prefix "${mla_lib_dir}/../.." ABSOLUTE)
    file(RELATIVE_PATH mla_lib_rel "${mla_system_prefix}" "${mla_lib_dir}")
    file(MAKE_DIRECTORY "${mla_prefix}/${mla_lib_rel}")
    file(GLOB mla_runtime_libs "${mla_lib_dir}/libamdhip64.so*")
    foreach(lib IN LISTS mla_runtime_libs)
      get_filename_component(name "${lib}" NAME)
      mla_hip_link("${lib}" "${mla_prefix}/${mla_lib_rel}/${name}")
    endforeach()
    set(CMAKE_HIP_COMPILER_ROCM_ROOT "${mla_prefix}/cmake-root")
    # The package also finds hsa/hsa.h, system folders first: found here instead.
    set(HSA_HEADER "${mla_prefix}/include" CACHE PATH "Folder holding hsa/hsa.h for the hip-lang package")
    list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES HSA_HEADER)
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
# ROCm 5.2's bitcode has oclc_isa_version_940.bc but none for gfx941 or
# gfx942, and clang 19 insists on the file named after the target. The file
# only defines the ISA version constant that ockl reads, and gfx940 to gfx942
# share ISA 9.4 (what ROCm 5.2 offers for them), so a folder in the build tree
# links every bitcode file and names the 9.4 one for the missing targets.
# MLA_HIP_DEVICE_LIBS is the folder the HIP compiler is given.
set(MLA_HIP_DEVICE_LIBS "${MLA_HIP_DEVICE_LIB_PATH}")
set(mla_isa_aliases "")
foreach(arch IN LISTS MLA_HIP_CANDIDATE_ARCHITECTURES)
  if(arch MATCHES "^gfx94[12]$" AND NOT EXISTS "${MLA_HIP_DEVICE_LIB_PATH}/oclc_isa_version_${arch}.bc"
     AND EXISTS "${MLA_HIP_DEVICE_LIB_PATH}/oclc_isa_version_940.bc")
    string(REGEX REPLACE "^gfx" "" isa "${arch}")
    list(APPEND mla_isa_aliases ${isa})
  endif()
endforeach()
if(mla_isa_aliases)
  set(MLA_HIP_DEVICE_LIBS "${CMAKE_BINARY_DIR}/hip-device-libs")
  file(MAKE_DIRECTORY "${MLA_HIP_DEVICE_LIBS}")
  file(GLOB mla_bitcode_files "${MLA_HIP_DEVICE_LIB_PATH}/*.bc")
  foreach(file IN LISTS mla_bitcode_files)
    get_filename_component(name "${file}" NAME)
    mla_hip_link("${file}" "${MLA_HIP_DEVICE_LIBS}/${name}")
  endforeach()
  foreach(isa IN LISTS mla_isa_aliases)
    mla_hip_link("${MLA_HIP_DEVICE_LIB_PATH}/oclc_isa_version_940.bc"
                 "${MLA_HIP_DEVICE_LIBS}/oclc_isa_version_${isa}.bc")
  endforeach()
endif()
set(MLA_HIP_DEVICE_LIBS "${MLA_HIP_DEVICE_LIBS}" CACHE INTERNAL "Device bitcode folder the HIP compiler is given")
set(mla_hip_toolchain_flags "--rocm-path=${mla_rocm_path}" "--hip-device-lib-path=${MLA_HIP_DEVICE_LIBS}")
# HIP 5's own compilers emit code object version 4, which every HIP 5 runtime
# loads; clang 19 defaults to version 5. Pinned so that a newer clang's code
# objects load on the runtime the headers came with.
file(STRINGS "${MLA_HIP_INCLUDE_DIR}/hip/hip_version.h" mla_hip_major REGEX "#define HIP_VERSION_MAJOR ")
string(REGEX REPLACE ".*HIP_VERSION_MAJOR +([0-9]+).*" "\\1" mla_hip_major "${mla_hip_major}")
if(mla_hip_major MATCHES "^[0-9]+$" AND mla_hip_major LESS 6)
  list(APPEND mla_hip_toolchain_flags -mcode-object-version=4)
endif()
set(MLA_HIP_TOOLCHAIN_FLAGS "${mla_hip_toolchain_flags}" CACHE INTERNAL "Where the HIP toolchain is (for ci/hip-inspect)")
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

# Targets the compiler accepts but is not given unless CMAKE_HIP_ARCHITECTURES
# names them: Debian's clang 19 spends over ten minutes in its register
# allocator on gfx908's 256/256 attention kernel (clang 15 takes 2 s), so a
# clang 19 or newer from outside ROCm leaves gfx908 (MI100) out. The entry
# refuses gfx908 with MLA_HIP_DROPPED_REASON; ci/hip-inspect still compiles
# its device code with clang-15 where installed.
set(MLA_HIP_DROPPED_ARCHITECTURES "")
set(MLA_HIP_DROPPED_REASON "")
if("gfx908" IN_LIST MLA_HIP_PROBE_ACCEPTED)
  execute_process(COMMAND "${mla_hip_compiler}" -dumpversion OUTPUT_VARIABLE mla_version
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(REGEX MATCH "^[0-9]+" mla_major "${mla_version}")
  get_filename_component(mla_name "${mla_hip_compiler}" NAME)
  if(mla_major GREATER_EQUAL 19 AND NOT mla_name MATCHES "amdclang")
    set(MLA_HIP_DROPPED_ARCHITECTURES gfx908)
    # A C string literal in the entry's definitions: no semicolons or quotes.
    set(MLA_HIP_DROPPED_REASON "left out: clang ${mla_major} does not finish compiling its 256/256 kernel, \
configure with -DCMAKE_HIP_COMPILER=clang++-15 (the clang of hipcc 5.2) to build it")
  endif()
endif()
if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
  set(mla_built "${MLA_HIP_PROBE_ACCEPTED}")
  if(MLA_HIP_DROPPED_ARCHITECTURES)
    list(REMOVE_ITEM mla_built ${MLA_HIP_DROPPED_ARCHITECTURES})
  endif()
  if(NOT mla_built)
    message(FATAL_ERROR "MLA_WITH_HIP: ${mla_hip_compiler} accepts none of ${MLA_HIP_CANDIDATE_ARCHITECTURES}: "
                        "${mla_rejected_text}")
  endif()
  set(CMAKE_HIP_ARCHITECTURES "${mla_built}" CACHE STRING "gfx targets of the HIP build")
endif()
# Only what the build does not target counts as left out (given by hand, it is built).
foreach(arch IN LISTS CMAKE_HIP_ARCHITECTURES)
  string(REGEX REPLACE ":.*" "" arch "${arch}")
  list(REMOVE_ITEM MLA_HIP_DROPPED_ARCHITECTURES ${arch})
endforeach()
set(MLA_HIP_DROPPED_ARCHITECTURES "${MLA_HIP_DROPPED_ARCHITECTURES}" CACHE INTERNAL
    "gfx targets the compiler accepts but the build leaves out")
set(MLA_HIP_DROPPED_REASON "${MLA_HIP_DROPPED_REASON}" CACHE INTERNAL "Why MLA_HIP_DROPPED_ARCHITECTURES are left out")
message(STATUS "HIP targets accepted by ${mla_hip_compiler}: ${MLA_HIP_PROBE_ACCEPTED}")
if(MLA_HIP_PROBE_REJECTED)
  message(STATUS "HIP targets rejected by the compiler: ${mla_rejected_text}")
endif()
if(MLA_HIP_DROPPED_ARCHITECTURES)
  message(STATUS "HIP targets ${MLA_HIP_DROPPED_ARCHITECTURES} ${MLA_HIP_DROPPED_REASON}")
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
