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
  set_property(GLOBAL APPEND PROPERTY MLA_BUILD_NOTES
               "torch_ops=not built: the build's interpreter had no torch (pip's build isolation)")
  return()
endif()
# Torch's config finds its libraries with find_library(... PATHS <torch>/lib),
# which searches the system's folders first: with Debian's libtorch-dev
# installed, the operators would link the system's libc10 (torch 1.13) beside
# the environment's libtorch. Each is looked for in the interpreter's torch
# first; what is not there is left to torch's config as before.
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))"
  OUTPUT_VARIABLE mla_torch_lib OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(mla_torch_lib AND EXISTS ${mla_torch_lib})
  foreach(pair c10_LIBRARY:c10 torch_cpu_LIBRARY:torch_cpu torch_cuda_LIBRARY:torch_cuda c10_cuda_LIBRARY:c10_cuda
               C10_CUDA_LIBRARY:c10_cuda CAFFE2_NVRTC_LIBRARY:caffe2_nvrtc TORCH_LIBRARY:torch)
    string(REPLACE ":" ";" pair ${pair})
    list(GET pair 0 variable)
    list(GET pair 1 name)
    find_library(${variable} ${name} PATHS ${mla_torch_lib} NO_DEFAULT_PATH)
  endforeach()
endif()
find_package(Torch CONFIG QUIET)
if(NOT Torch_FOUND)
  message(STATUS "mlaprefill: libtorch not found, torch.ops.mlaprefill is not built")
  set_property(GLOBAL APPEND PROPERTY MLA_BUILD_NOTES "torch_ops=not built: libtorch not found")
  return()
endif()
add_library(mla_torch_ops MODULE src/torch_ops.cpp src/torch_tensors.cpp)
target_link_libraries(mla_torch_ops PRIVATE mla::mla ${TORCH_LIBRARIES})
# PyTorch's headers are not ours to keep warning-free.
target_include_directories(mla_torch_ops SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
if(MLA_WHEEL_RELEASE AND mla_torch_lib)
  # Their checks' messages name the headers by __FILE__: relative to torch in a release wheel.
  get_filename_component(mla_torch_root ${mla_torch_lib} DIRECTORY)
  target_compile_options(mla_torch_ops PRIVATE -ffile-prefix-map=${mla_torch_root}/=torch/)
endif()
if(TARGET c10_cuda)
  target_compile_definitions(mla_torch_ops PRIVATE MLA_TORCH_CUDA=1)
  set(mla_torch_kind "with CUDA")
else()
  set(mla_torch_kind "CPU only")
endif()
set_property(GLOBAL APPEND PROPERTY MLA_BUILD_NOTES "torch_ops=built against torch ${Torch_VERSION} (${mla_torch_kind})")
set_target_properties(mla_torch_ops PROPERTIES
  OUTPUT_NAME _torch_ops PREFIX ""
  LIBRARY_OUTPUT_DIRECTORY ${MLA_PYTHON_PACKAGE_DIR}
  INSTALL_RPATH "${MLA_PYTHON_RPATH};$ORIGIN/../torch/lib")
mla_set_warnings(mla_torch_ops)
install(TARGETS mla_torch_ops LIBRARY DESTINATION ${MLA_PYTHON_INSTALL_DIR}/mlaprefill)
