// The sm_90a instructions of cuda/sm90_primitives.cuh under the GPU emulator.
#pragma once

#include "simt/sm90.hpp"
