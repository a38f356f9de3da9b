// The sm_90a instructions a Hopper kernel is built from, as inline PTX:
// mbarrier with transaction counts, the tensor memory accelerator
// (cp.async.bulk.tensor), fence.proxy.async, wgmma.mma_async m64nNk16 with fp32
// accumulators (A from shared memory or registers), named barriers, elect.sync,
// setmaxnreg, stmatrix, a 16-byte shared load and a global atomic. wgmma and setmaxnreg need the
// sm_90a target (-gencode=arch=compute_90a,code=sm_90a); a plain sm_90 pass
// rejects them. The instructions come from gpu_target/sm90.cuh, which each
// build's include path supplies: target/ here for nvcc, tests/support/simt/target
// for the GPU emulator (tests only).
//
// Signatures as agreed for the Hopper kernel; additions only. Beyond the first
// list: wgmma_fence_operand (keeps the compiler from moving accumulator reads
// or writes across an asynchronous wgmma) and swizzle_bytes / Swizzle in
// sm90_tensor_map.hpp, shared with the host.
#pragma once

#include "cuda/sm90_tensor_map.hpp"

#include "gpu_target/sm90.cuh"
