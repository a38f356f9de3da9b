# The emulated HIP_FLASH kernels (included by tests/support/simt/CMakeLists.txt).
# The kernel source uses clang's ext_vector_type and _Float16, so a clang 15
# or newer compiles hip_flash_emulated.cpp (with MLA_SIMT_EMULATION) into an
# object of mla_simt, whatever compiler builds the rest of the project; the
# kernel's gpu_target/ headers come from target/, as for mla_simt.
# Without one, hip_flash_unavailable.cpp says so at run time
# (hip_flash_emulated_built() is false, launches raise not_supported).
#   MLA_SIMT_CLANGXX   the clang++ to use (found: clang++-19 ... -15, clang++;
#                      OFF: build without the emulated HIP kernels)
# With a clang it also defines mla_simt_compile_hip_flash(<object> [INCLUDE_BEFORE
# <dir>...]) for targets that need their own copy of the object, e.g. against
# a deliberately broken copy of backends/hip (ci/emulator-defects).

set(mla_simt_dir ${CMAKE_CURRENT_LIST_DIR} CACHE INTERNAL "")

# find_program validator: a clang whose version is 15 or newer.
function(mla_simt_clang_is_usable result candidate)
  execute_process(COMMAND "${candidate}" --version OUTPUT_VARIABLE banner ERROR_QUIET RESULT_VARIABLE status)
  if(NOT status EQUAL 0 OR NOT banner MATCHES "clang version ([0-9]+(\\.[0-9]+)*)")
    set(${result} FALSE PARENT_SCOPE)
  elseif(CMAKE_MATCH_1 VERSION_LESS 15)
    set(${result} FALSE PARENT_SCOPE)
  endif()
endfunction()

find_program(MLA_SIMT_CLANGXX
  NAMES clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++
  VALIDATOR mla_simt_clang_is_usable
  DOC "clang++ (15 or newer) that compiles the emulated HIP_FLASH kernels")

if(NOT MLA_SIMT_CLANGXX)
  message(STATUS "GPU emulator: no clang++ 15 or newer; the emulated HIP_FLASH kernels are not built")
  target_sources(mla_simt PRIVATE ${mla_simt_dir}/hip_flash_unavailable.cpp)
  return()
endif()
message(STATUS "GPU emulator: emulated HIP_FLASH kernels compiled by ${MLA_SIMT_CLANGXX}")

# Compiles hip_flash_emulated.cpp into <object> (an absolute path) by a custom
# command of the calling directory; add <object> to a target of that
# directory. INCLUDE_BEFORE directories are searched before the rest, so that
# <dir>/hip/flash_kernel.hpp replaces the kernel. Header dependencies come from
# the compiler's depfile.
function(mla_simt_compile_hip_flash object)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "INCLUDE_BEFORE")
  set(source ${mla_simt_dir}/hip_flash_emulated.cpp)
  # The project's warnings (cmake/MlaWarnings.cmake) plus -Wno-unknown-pragmas
  # (`#pragma unroll`) and -Wno-psabi: the kernel passes 64-byte accumulator
  # vectors by value between inline functions of this one translation unit,
  # so their host ABI is irrelevant.
  set(flags -std=c++20 -O2 -fPIC
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wno-unknown-pragmas -Wno-psabi)
  if(MLA_WARNINGS_AS_ERRORS)
    list(APPEND flags -Werror)
  endif()
  set(before "")
  foreach(dir IN LISTS arg_INCLUDE_BEFORE)
    list(APPEND before -I${dir})
  endforeach()
  # What mla_simt's consumers get, as g++ builds the rest of the emulator:
  # its definitions (MLA_SIMT_EMULATION, MLA_GPU_NAMESPACE=emulated) and
  # include path (backends/ for "hip/...", "cuda_hip/...", tests/support for
  # "simt/...", target/ for gpu_target/), then mla's, read transitively from
  # the targets; empty entries (an INSTALL_INTERFACE path) filtered out.
  set(includes "$<FILTER:$<TARGET_PROPERTY:mla_simt,INTERFACE_INCLUDE_DIRECTORIES>,INCLUDE,.>")
  set(definitions "$<FILTER:$<TARGET_PROPERTY:mla_simt,INTERFACE_COMPILE_DEFINITIONS>,INCLUDE,.>")
  add_custom_command(
    OUTPUT ${object}
    COMMAND ${MLA_SIMT_CLANGXX} ${flags} $<$<CONFIG:Debug,RelWithDebInfo>:-g>
            "$<$<BOOL:${definitions}>:-D$<JOIN:${definitions},;-D>>"
            ${before}
            "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
            -MD -MF ${object}.d -c ${source} -o ${object}
    DEPENDS ${source}
    DEPFILE ${object}.d
    COMMENT "Building the emulated HIP_FLASH kernels with ${MLA_SIMT_CLANGXX}"
    COMMAND_EXPAND_LISTS
    VERBATIM)
  set_source_files_properties(${object} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
endfunction()

mla_simt_compile_hip_flash(${CMAKE_CURRENT_BINARY_DIR}/hip_flash_emulated.o)
target_sources(mla_simt PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/hip_flash_emulated.o)
