# The library's layers. Each is an OBJECT library with its own sources, include
# paths and private definitions; libmla (mla::mla) is their objects together.
#
#   mla_core       vendor-neutral API: errors, tensors, queues, registry,
#                  configuration, selector. No vendor header, no platform call.
#   mla_platform   which device this machine has (vendor runtimes, MLA_PLATFORM).
#                  Uses core; core never uses it.
#   mla_backend_*  the backends, and mla_backends, the table that composes them
#                  and the vendor queues. Use platform and core.
#
# An arrow runs only downwards: a layer's target links the layer below for its
# headers (object libraries pass on usage requirements, not objects), so an
# include of a higher layer's header does not compile, and ci/check-layers
# rejects vendor headers in core by name.

# The build's vendor switches, for the layers and tests that branch on them.
# Never on libmla's interface: no public header reads them.
set(MLA_BUILD_DEFINITIONS
  $<$<BOOL:${MLA_WITH_KOKKOS}>:MLA_WITH_KOKKOS=1>
  $<$<BOOL:${MLA_WITH_CUDA}>:MLA_WITH_CUDA=1>
  $<$<BOOL:${MLA_WITH_HIP}>:MLA_WITH_HIP=1>
  $<$<BOOL:${MLA_WITH_HOPPER_FLASH}>:MLA_WITH_HOPPER_FLASH=1>)

# The vendor half of the GPU kernel headers (gpu_target/: device surface,
# sm_80/sm_90a instructions, tensor map, MFMA products), found through the
# include path, never beside the shared headers: nvcc's or HIP's here; the
# GPU emulator's (tests/support/simt/target) on mla_simt and its tests only.
if(MLA_WITH_CUDA)
  set(MLA_GPU_TARGET_INCLUDE_DIR ${PROJECT_SOURCE_DIR}/backends/cuda/target)
elseif(MLA_WITH_HIP)
  set(MLA_GPU_TARGET_INCLUDE_DIR ${PROJECT_SOURCE_DIR}/backends/hip/target)
else()
  set(MLA_GPU_TARGET_INCLUDE_DIR "")
endif()

# mla_add_layer(<target> [sources...]): an OBJECT library whose objects go into libmla.
function(mla_add_layer target)
  add_library(${target} OBJECT ${ARGN})
  target_compile_features(${target} PUBLIC cxx_std_20)
  mla_set_warnings(${target})
  target_sources(mla PRIVATE $<TARGET_OBJECTS:${target}>)
endfunction()

# mla_add_backend(<target> [sources...]): a backend layer: sees core, platform
# and the backends/ include root ("cuda_hip/...", "host/..."), the vendor's
# gpu_target/ headers, and branches on the build's vendor switches.
function(mla_add_backend target)
  mla_add_layer(${target} ${ARGN})
  target_link_libraries(${target} PUBLIC mla_platform)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/backends ${MLA_GPU_TARGET_INCLUDE_DIR})
  target_compile_definitions(${target} PRIVATE ${MLA_BUILD_DEFINITIONS})
endfunction()
