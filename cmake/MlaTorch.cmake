# torch.ops.mlaprefill: operators registered with TORCH_LIBRARY against
# PyTorch's C++ library (libtorch), in a shared library the Python package
# loads with torch.ops.load_library. Built when libtorch is found; its CUDA
# kernels only when libtorch has CUDA (c10_cuda).
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
