// The device surface of cuda_hip/gpu_device.hpp for a HIP compile.
#pragma once

#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
