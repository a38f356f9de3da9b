// The device surface of cuda_hip/gpu_device.hpp for nvcc.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
