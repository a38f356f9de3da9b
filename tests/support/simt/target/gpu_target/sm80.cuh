// The sm_80 instructions of cuda/sm80_primitives.cuh under the GPU emulator.
#pragma once

#include "simt/sm80.hpp"
