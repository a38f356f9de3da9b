// The tensor map of cuda/sm90_tensor_map.hpp under the GPU emulator: the
// emulated map the emulated TMA instructions read.
#pragma once

#include "simt/sm90_tensor_map.hpp"
