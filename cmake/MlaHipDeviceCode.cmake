# Device code for gfx targets the HIP compiler rejects, from a newer clang.
#
# The hip preset's HIP compiler is Debian's clang-19, which builds gfx942 into
# the library (cmake/MlaHip.cmake), and then this module adds nothing. With an
# older HIP compiler, such as the clang 15 that Debian's hipcc 5.2 drives
# (-DCMAKE_HIP_COMPILER=clang++-15), gfx942 is dropped from the library, and
# this module still compiles its device code with clang-19 for ci/hip-inspect.
# It links ROCm 5.2's device libraries by hand: clang looks for
# oclc_isa_version_<target>.bc, and 5.2 ships no oclc_isa_version_942.bc. So
# the compile passes -nogpulib and links the device bitcode itself with
# -Xclang -mlink-builtin-bitcode (linked into the module before optimization,
# internalized, only what is used kept):
#
#   hip.bc, ocml.bc, ockl.bc     what the HIP 5.2 headers call (__syncthreads
#                                reaches __atomic_work_item_fence in hip.bc;
#                                math in ocml, work-item queries in ockl)
#   oclc_isa_version_940.bc      gfx940 to gfx942: the file only defines the
#                                ISA-version constant that ockl reads, and
#                                9.4.0 is what gfx94x share
#   oclc_* option files          the choices clang's own device-library
#                                linking makes for HIP at -O3 without
#                                fast-math: no denormal flush, no unsafe or
#                                finite-only math, correctly rounded sqrt,
#                                wave64, code-object ABI 4 (HIP 5.2's)
#
# The result is one code object (an amdgcn ELF, no bundle) per source and
# target, under <build>/hip-device-code, read by ci/hip-inspect. These code
# objects are not linked into the library: its HIP sources are compiled by the
# HIP compiler, whose fat binary holds only the targets it accepts. So the
# entry refuses gfx942 in such a build and says why (backends/hip/entry.cpp).
#
#   MLA_HIP_DEVICE_CLANGXX   clang++ for these targets (found: clang++-19;
#                            OFF: none are built)
# Sets MLA_HIP_DEVICE_CODE_ARCHITECTURES (cache, internal): the targets built
# here. Defines mla_hip_add_device_code(<source>...): their code objects.

include_guard(GLOBAL)

find_program(MLA_HIP_DEVICE_CLANGXX NAMES clang++-19
  DOC "clang++ that compiles device code for the MFMA targets the HIP compiler rejects")

# The targets wanted: MFMA targets (backends/hip/mfma_targets.def) among the
# candidates that the HIP compiler rejected (not those left out by a
# CMAKE_HIP_ARCHITECTURES given by hand).
set(mla_mfma_def ${CMAKE_CURRENT_LIST_DIR}/../backends/hip/mfma_targets.def)
# (backends/hip/CMakeLists.txt makes editing the file re-run the configure step.)
file(STRINGS ${mla_mfma_def} mla_lines REGEX "^MLA_MFMA_TARGET\\(")
set(mla_mfma "")
foreach(line IN LISTS mla_lines)
  string(REGEX REPLACE "^MLA_MFMA_TARGET\\(([a-z0-9]+)\\).*" "\\1" arch "${line}")
  list(APPEND mla_mfma ${arch})
endforeach()
set(mla_wanted "")
foreach(arch IN LISTS MLA_HIP_CANDIDATE_ARCHITECTURES)
  if(arch IN_LIST mla_mfma AND NOT arch IN_LIST MLA_HIP_PROBE_ACCEPTED)
    list(APPEND mla_wanted ${arch})
  endif()
endforeach()

# The bitcode for one target, or empty when this ROCm has no ISA file for it.
function(mla_hip_device_bitcode out arch)
  string(REGEX REPLACE "^gfx" "" isa "${arch}")
  if(isa MATCHES "^94[0-2]$")
    set(isa 940)
  endif()
  set(files "")
  foreach(name hip ocml ockl oclc_isa_version_${isa} oclc_daz_opt_off oclc_unsafe_math_off
               oclc_finite_only_off oclc_correctly_rounded_sqrt_on oclc_wavefrontsize64_on oclc_abi_version_400)
    if(NOT EXISTS ${MLA_HIP_DEVICE_LIB_PATH}/${name}.bc)
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
    list(APPEND files -Xclang -mlink-builtin-bitcode -Xclang ${MLA_HIP_DEVICE_LIB_PATH}/${name}.bc)
  endforeach()
  set(${out} ${files} PARENT_SCOPE)
endfunction()

set(mla_hip_device_common -x hip -std=c++20 -O3 -nogpulib --offload-device-only --no-gpu-bundle-output
    --rocm-path=${mla_rocm_path} -D__HIP_ROCclr__=1
    # As hip-lang's package passes to the HIP compiler: everything inlined into the kernels.
    -mllvm -amdgpu-early-inline-all=true -mllvm -amdgpu-function-calls=false)

# Probed once per (compiler, wanted targets), like MlaHip.cmake's probe.
set(mla_key "${MLA_HIP_DEVICE_CLANGXX}|${mla_wanted}|${MLA_HIP_DEVICE_LIB_PATH}")
if(NOT MLA_HIP_DEVICE_CODE_KEY STREQUAL mla_key)
  set(mla_built "")
  if(MLA_HIP_DEVICE_CLANGXX AND mla_wanted)
    set(mla_probe "${CMAKE_BINARY_DIR}/CMakeFiles/mla_hip_device_probe.hip")
    file(WRITE "${mla_probe}"
      "#include <hip/hip_runtime.h>\n__global__ void mla_probe(float* x) { __syncthreads(); x[threadIdx.x] = 1.0f; }\n")
    foreach(arch IN LISTS mla_wanted)
      mla_hip_device_bitcode(mla_bitcode ${arch})
      if(NOT mla_bitcode)
        message(STATUS "HIP device code: ${arch} left out: ${MLA_HIP_DEVICE_LIB_PATH} has no device bitcode for it")
        continue()
      endif()
      execute_process(
        COMMAND ${MLA_HIP_DEVICE_CLANGXX} ${mla_hip_device_common} --offload-arch=${arch} ${mla_bitcode}
                -c ${mla_probe} -o ${mla_probe}.${arch}.co
        RESULT_VARIABLE mla_rc OUTPUT_QUIET ERROR_VARIABLE mla_error)
      if(mla_rc EQUAL 0)
        list(APPEND mla_built ${arch})
      else()
        string(REGEX REPLACE "\n.*" "" mla_error "${mla_error}")
        message(STATUS "HIP device code: ${MLA_HIP_DEVICE_CLANGXX} cannot build ${arch}: ${mla_error}")
      endif()
    endforeach()
  endif()
  set(MLA_HIP_DEVICE_CODE_KEY "${mla_key}" CACHE INTERNAL "")
  set(MLA_HIP_DEVICE_CODE_ARCHITECTURES "${mla_built}" CACHE INTERNAL
      "gfx targets whose device code the build compiles with MLA_HIP_DEVICE_CLANGXX, for inspection only")
endif()
if(MLA_HIP_DEVICE_CODE_ARCHITECTURES)
  message(STATUS "HIP device code for inspection (${MLA_HIP_DEVICE_CLANGXX}): ${MLA_HIP_DEVICE_CODE_ARCHITECTURES}")
endif()

# mla_hip_add_device_code(<source>...): for every target of
# MLA_HIP_DEVICE_CODE_ARCHITECTURES, <build>/hip-device-code/<name>.<arch>.co
# from each source, with the include directories and definitions of
# mla_backend_hip, as part of the default build (target mla_hip_device_code).
function(mla_hip_add_device_code)
  if(NOT MLA_HIP_DEVICE_CODE_ARCHITECTURES)
    return()
  endif()
  set(flags ${mla_hip_device_common} -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion)
  if(MLA_WARNINGS_AS_ERRORS)
    list(APPEND flags -Werror)
  endif()
  set(includes "$<TARGET_PROPERTY:mla_backend_hip,INCLUDE_DIRECTORIES>")
  set(definitions "$<TARGET_PROPERTY:mla_backend_hip,COMPILE_DEFINITIONS>")
  set(dir ${CMAKE_BINARY_DIR}/hip-device-code)
  file(MAKE_DIRECTORY ${dir})
  set(outputs "")
  foreach(source IN LISTS ARGN)
    get_filename_component(name ${source} NAME_WE)
    foreach(arch IN LISTS MLA_HIP_DEVICE_CODE_ARCHITECTURES)
      mla_hip_device_bitcode(bitcode ${arch})
      set(object ${dir}/${name}.${arch}.co)
      add_custom_command(
        OUTPUT ${object}
        COMMAND ${MLA_HIP_DEVICE_CLANGXX} ${flags} --offload-arch=${arch} ${bitcode}
                "$<$<BOOL:${definitions}>:-D$<JOIN:${definitions},;-D>>"
                "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
                -MD -MF ${object}.d -c ${source} -o ${object}
        DEPENDS ${source}
        DEPFILE ${object}.d
        COMMENT "Building ${arch} device code of ${name} with ${MLA_HIP_DEVICE_CLANGXX}"
        COMMAND_EXPAND_LISTS
        VERBATIM)
      list(APPEND outputs ${object})
    endforeach()
  endforeach()
  add_custom_target(mla_hip_device_code ALL DEPENDS ${outputs})
endfunction()
