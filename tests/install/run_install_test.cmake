# Driven by tests/install/CMakeLists.txt. Installs the build in BUILD_DIR, or
# with STATIC_FROM set first configures and builds a static libmla from that
# source tree (library and example plugin), then builds and runs a tiny consumer against the
# installed package.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc})\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

if(STATIC_FROM)
  set(BUILD_DIR ${WORK_DIR}/static-build)
  run_step("static configure" ${CMAKE_COMMAND} -S ${STATIC_FROM} -B ${BUILD_DIR} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
    -DMLA_WITH_KOKKOS=${WITH_KOKKOS} -DMLA_BUILD_TESTS=OFF -DMLA_BUILD_TOOLS=OFF -DMLA_BUILD_BENCH=OFF
    -DMLA_WARNINGS_AS_ERRORS=ON)
  run_step("static build" ${CMAKE_COMMAND} --build ${BUILD_DIR})
endif()
run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# The public headers are installed by audience: the engine caller's in mla/
# (at most ten), the backend author's in mla/backend/, the plugin C ABI in
# mla/plugin/. The internal detail/ folders and the element bit helpers are not.
foreach(header mla/mla.hpp mla/platform.hpp mla/queue.hpp mla/backend/checks.hpp mla/backend/registration.hpp
               mla/plugin/abi.h)
  if(NOT EXISTS ${prefix}/include/${header})
    message(FATAL_ERROR "install test: public header ${header} was not installed")
  endif()
endforeach()
file(GLOB engine_headers ${prefix}/include/mla/*.*)
list(LENGTH engine_headers engine_header_count)
if(engine_header_count GREATER 10)
  message(FATAL_ERROR "install test: ${engine_header_count} engine headers in include/mla (at most 10): "
                      "${engine_headers}")
endif()
file(GLOB installed_detail LIST_DIRECTORIES true ${prefix}/include/mla/detail ${prefix}/include/mla/*/detail)
if(installed_detail)
  message(FATAL_ERROR "install test: internal headers were installed: ${installed_detail}")
endif()
file(GLOB_RECURSE installed_headers ${prefix}/include/mla/*)
foreach(header ${installed_headers})
  file(STRINGS ${header} bit_helpers REGEX "float_to_half|half_to_float|float_to_bf16|bf16_to_float|fp8_e4m3_to_float")
  if(bit_helpers)
    message(FATAL_ERROR "install test: ${header} shows the element bit helpers: ${bit_helpers}")
  endif()
endforeach()
message(STATUS "install test: ${engine_header_count} engine headers in include/mla")
# libmla does not export its build's vendor switches; the consumer is told
# which backends to expect.
run_step("consumer configure" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix} -DEXPECT_KOKKOS=${WITH_KOKKOS})
run_step("consumer build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("consumer run" ${WORK_DIR}/build/consumer)
set(expected "consumer: REFERENCE ok")
if(WITH_KOKKOS)
  string(APPEND expected ".*consumer: KOKKOS ok")
endif()
if(NOT step_output MATCHES "${expected}")
  message(FATAL_ERROR "install test: unexpected consumer output (wanted ${expected}):\n${step_output}")
endif()
message(STATUS "${step_output}")

# The examples of README.md and docs/ (examples/): the C++ ones built against
# the installed package, the command-line ones with the installed command first
# on PATH, the Python ones with the installed package on PYTHONPATH. Each must
# exit as its page says and print what it computed.
function(run_example what expected_rc expected_output)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${EXAMPLES_SOURCE}/.. RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL expected_rc OR NOT "${out}${err}" MATCHES "${expected_output}")
    message(FATAL_ERROR "install test: example ${what} exited ${rc} (wanted ${expected_rc} and output matching "
                        "'${expected_output}'):\n${out}\n${err}")
  endif()
  message(STATUS "example ${what}: ok")
endfunction()
if(EXAMPLES_SOURCE)
  run_step("examples configure" ${CMAKE_COMMAND} -S ${EXAMPLES_SOURCE}/cpp -B ${WORK_DIR}/examples -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror")
  run_step("examples build" ${CMAKE_COMMAND} --build ${WORK_DIR}/examples)
  # The README's first example against the installed headers alone: no include
  # path but the prefix's and the example's own folder (random_tensor.hpp).
  run_step("first example against the installed headers" ${CXX_COMPILER} -std=c++20 -fsyntax-only -Wall -Wextra
    -Werror -I${prefix}/include -I${EXAMPLES_SOURCE}/cpp ${EXAMPLES_SOURCE}/cpp/quick_start.cpp)
  # The environment of a user who followed the README: the installed command first on PATH,
  # nothing of the test's own selection settings.
  set(user_env ${CMAKE_COMMAND} -E env --unset=MLA_CONFIG --unset=MLA_PREFILL_BACKEND --unset=MLA_PLATFORM
    --unset=MLA_PLUGINS --unset=MLA_PLUGIN_DIR "PATH=${prefix}/bin:$ENV{PATH}")
  run_example(quick_start 0 "quick start: [A-Z_]+ computed out bfloat16\\[610, 16, 128\\]" ${user_env}
    ${WORK_DIR}/examples/quick_start)
  run_example(engine_step 0 "engine step: [A-Z_]+ wrote out bfloat16\\[12, 16, 128\\]" ${user_env}
    ${WORK_DIR}/examples/engine_step)
  run_example(fp8_inputs 0 "fp8 inputs: (KOKKOS|REFERENCE) computed out bfloat16\\[128, 16, 128\\]" ${user_env}
    ${WORK_DIR}/examples/fp8_inputs)
  run_example(in_process_backend 0 "in-process backend: CUSTOM \\(MY_BACKEND\\)" ${user_env}
    ${WORK_DIR}/examples/in_process_backend)
  run_example(simulated_platforms 2 "amd.*explicit choice|CUDA_FLASH is not valid" ${user_env}
    bash ${EXAMPLES_SOURCE}/shell/simulated_platforms.sh)
  run_example(plugin_backends 0 "CUSTOM +yes +yes" ${user_env} bash ${EXAMPLES_SOURCE}/shell/plugin_backends.sh)
  # The conformance kit, as a backend's author outside this tree runs it: the
  # installed runner on the installed example plugin, from a folder of its own.
  if(EXISTS ${prefix}/bin/mla-prefill-conformance)
    run_example(conformance 0 "PASSED" ${user_env} ${CMAKE_COMMAND} -E chdir ${WORK_DIR}
      bash ${EXAMPLES_SOURCE}/shell/conformance.sh)
  endif()
  run_example(selection.yaml 0 "selected: +(KOKKOS|REFERENCE)" ${user_env} mla-prefill backends --config
    ${EXAMPLES_SOURCE}/config/selection.yaml)
endif()

# The Python package, when the build has it: it imports from the prefix (its
# module finds the installed libmla) and computes with NumPy arrays.
if(PYTHON AND PYTHON_DIR)
  set(python_root ${PYTHON_DIR})
  if(NOT IS_ABSOLUTE ${python_root})
    set(python_root ${prefix}/${python_root})
  endif()
  # A file, not -c: the semicolons of one line of Python would split a CMake argument list.
  file(WRITE ${WORK_DIR}/use_package.py [=[
import os, sys
import numpy as np
import mlaprefill
assert os.path.realpath(mlaprefill.__file__).startswith(os.path.realpath(sys.argv[1])), mlaprefill.__file__
selector = mlaprefill.Selector(backend="REFERENCE", apply=False)
backend = selector.create(selector.select("float32"), num_heads=1, scale=1.0)
backend.prepare([0, 2])
q = np.ones((2, 1, 192), np.float32)
v = np.arange(256, dtype=np.float32).reshape(2, 1, 128)
out, lse = backend.run_new_tokens(q, q, v)
print("python:", backend.name, float(out[0, 0, 5]), "ok")
]=])
  run_step("python import" ${CMAKE_COMMAND} -E env PYTHONPATH=${python_root} PYTHONDONTWRITEBYTECODE=1
    ${PYTHON} ${WORK_DIR}/use_package.py ${python_root})
  if(NOT step_output MATCHES "python: REFERENCE 5.0 ok")
    message(FATAL_ERROR "install test: unexpected output of the installed Python package:\n${step_output}")
  endif()
  message(STATUS "${step_output}")
  if(EXAMPLES_SOURCE)
    set(python_env ${user_env} PYTHONPATH=${python_root} PYTHONDONTWRITEBYTECODE=1)
    if(PYTHON STREQUAL "/usr/bin/python3")  # the interpreter the README's command names
      run_example(python_report 0 "'platform'" ${python_env} bash ${EXAMPLES_SOURCE}/shell/python_report.sh)
    endif()
    # The Python examples use PyTorch tensors; PyTorch is optional for the package.
    execute_process(COMMAND ${PYTHON} -c "import torch" RESULT_VARIABLE no_torch OUTPUT_QUIET ERROR_QUIET)
    if(no_torch)
      message(STATUS "example prefill.py: skipped, ${PYTHON} cannot import torch")
    else()
      run_example(prefill.py 0 "\\(12, 16, 128\\) \\(16, 12\\)" ${python_env} ${PYTHON}
        ${EXAMPLES_SOURCE}/python/prefill.py)
    endif()
    if(TORCH_OPS)
      run_example(torch_ops.py 0 "\\(12, 16, 128\\) \\(16, 12\\)" ${python_env} ${PYTHON}
        ${EXAMPLES_SOURCE}/python/torch_ops.py)
    endif()
  endif()
endif()
