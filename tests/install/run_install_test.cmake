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
# The public headers are installed, the internal detail/ folders are not.
foreach(header mla/mla.hpp mla/device.hpp mla/platform.hpp mla/queue.hpp)
  if(NOT EXISTS ${prefix}/include/${header})
    message(FATAL_ERROR "install test: public header ${header} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE installed_detail LIST_DIRECTORIES true ${prefix}/include/mla/detail*)
if(installed_detail)
  message(FATAL_ERROR "install test: internal headers were installed: ${installed_detail}")
endif()
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
endif()
