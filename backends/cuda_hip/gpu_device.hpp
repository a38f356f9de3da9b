// The device builtins (fp16 conversions, thread indices, qualifiers) for the
// kernels in backends/cuda_hip, which the CUDA build, the HIP build and the
// GPU emulator (tests only) all compile.
#pragma once

#if defined(MLA_SIMT_EMULATION)
#include "simt/cuda_device.hpp"
#elif defined(MLA_HIP_COMPILE)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif
