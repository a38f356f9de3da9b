// The device surface of cuda_hip/gpu_device.hpp under the GPU emulator.
#pragma once

#include "simt/cuda_device.hpp"
