// The namespace of the code in backends/cuda_hip: one source is compiled once
// as CUDA and once as HIP, and each build's symbols live in mla::cuda or
// mla::hip. Host code that calls into it includes only this header, never a
// vendor runtime header.
#pragma once

// A build may name its own (the GPU emulator's: emulated, tests/support/simt).
#if !defined(MLA_GPU_NAMESPACE)
#if defined(MLA_HIP_COMPILE)
#define MLA_GPU_NAMESPACE hip
#else
#define MLA_GPU_NAMESPACE cuda
#endif
#endif
