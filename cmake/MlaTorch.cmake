# torch.ops.mlaprefill: operators registered with TORCH_LIBRARY against
# PyTorch's C++ library (libtorch), in a shared library the Python package
# loads with torch.ops.load_library. Built when libtorch is found; its CUDA
# kernels only when libtorch has CUDA (c10_cuda).
# The operators must be built against the torch the package will load: the
# interpreter's own when it has one (a virtual environment's, not the system's).
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE mla_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE mla_torch_status ERROR_QUIET)
if(mla_torch_status EQUAL 0)
  list(PREPEND CMAKE_PREFIX_PATH ${mla_torch_prefix})
elseif(SKBUILD)
  # pip's isolated build has no torch; a system libtorch found instead would
  # not match the torch of the environment the wheel is installed into.
  message(STATUS "mlaprefill: the interpreter has no torch, torch.ops.mlaprefill is not built "
                 "(pip install --no-build-isolation . builds it against the environment's torch)")
  return()
endif()
find_package(Torch CONFIG QUIET)
if(NOT Torch_FOUND)
  message(STATUS "mlaprefill: libtorch not found, torch.ops.mlaprefill is not built")
  return()
endif()
add_library(mla_torch_ops MODULE src/torch_ops.cpp src/torch_tensors.cpp)
target_link_libraries(mla_torch_ops PRIVATE mla::mla ${TORCH_LIBRARIES})
# PyTorch's headers are not ours to keep warning-free.
target_include_directories(mla_torch_ops SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
if(TARGET c10_cuda)
  target_compile_definitions(mla_torch_ops PRIVATE MLA_TORCH_CUDA=1)
endif()
set_target_properties(mla_torch_ops PROPERTIES
  OUTPUT_NAME _torch_ops PREFIX ""
  LIBRARY_OUTPUT_DIRECTORY ${MLA_PYTHON_PACKAGE_DIR}
  INSTALL_RPATH "${MLA_PYTHON_RPATH}")
mla_set_warnings(mla_torch_ops)
install(TARGETS mla_torch_ops LIBRARY DESTINATION ${MLA_PYTHON_INSTALL_DIR}/mlaprefill)
