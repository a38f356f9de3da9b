// Function qualifiers for code that is compiled by nvcc, by hipcc and by the
// plain host compiler: the numeric rules (numeric.hpp) and the GPU kernels'
// headers, which the host unit tests and the GPU emulator include as well.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MLA_HOST_DEVICE __host__ __device__
#define MLA_DEVICE __device__
#else
#define MLA_HOST_DEVICE
#define MLA_DEVICE
#endif

// True in the device pass of either GPU compiler. Reads the vendors' own
// macros; nothing here defines or fakes them.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define MLA_GPU_DEVICE_PASS 1
#else
#define MLA_GPU_DEVICE_PASS 0
#endif
