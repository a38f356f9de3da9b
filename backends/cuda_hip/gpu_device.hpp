// The device builtins (fp16 conversions, thread indices, qualifiers) for the
// kernels in backends/cuda_hip, which the CUDA build, the HIP build and the
// GPU emulator (tests only) all compile: each build's include path supplies
// gpu_target/device.hpp (backends/cuda/target, backends/hip/target,
// tests/support/simt/target).
#pragma once

#include "gpu_target/device.hpp"
