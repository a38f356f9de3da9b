// Compiles every primitive of sm90_primitives.cuh for sm_90a (CMake's
// CUDA_ARCHITECTURES 90a, i.e. -gencode=arch=compute_90a,code=sm_90a), and
// sm80_primitives.cuh's e4m3 mma.sync, which exists from sm_89 on, so the
// inline PTX is assembled in every CUDA build, before any kernel uses it. Not
// linked into the library.
#include "cuda/sm80_primitives.cuh"
#include "cuda/sm90_primitives.cuh"

namespace mla::cuda_flash::sm90 {
namespace {

template <class T, int N>
__device__ void every_wgmma_form(std::uint64_t a, std::uint64_t b, const std::uint32_t (&a_regs)[4], float* out) {
  float d[N / 2] = {};
  wgmma_fence();
  wgmma_ss<T, N, false>(d, a, b, 0);
  wgmma_ss<T, N, true>(d, a, b, 1);
  wgmma_rs<T, N, false>(d, a_regs, b, 1);
  wgmma_rs<T, N, true>(d, a_regs, b, 1);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  wgmma_fence_operand(d);
  for (int i = 0; i < N / 2; ++i) out[i] += d[i];
}

template <class T>
__device__ void every_width(std::uint64_t a, std::uint64_t b, const std::uint32_t (&a_regs)[4], float* out) {
  every_wgmma_form<T, 64>(a, b, a_regs, out);
  every_wgmma_form<T, 96>(a, b, a_regs, out);
  every_wgmma_form<T, 128>(a, b, a_regs, out);
  every_wgmma_form<T, 192>(a, b, a_regs, out);
  every_wgmma_form<T, 256>(a, b, a_regs, out);
}

// e4m3: K-major operands only, k32.
template <int N>
__device__ void every_fp8_form(std::uint64_t a, std::uint64_t b, const std::uint32_t (&a_regs)[4], float* out) {
  float d[N / 2] = {};
  wgmma_fence();
  wgmma_ss<__nv_fp8_e4m3, N, false>(d, a, b, 0);
  wgmma_rs<__nv_fp8_e4m3, N, false>(d, a_regs, b, 1);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  wgmma_fence_operand(d);
  for (int i = 0; i < N / 2; ++i) out[i] += d[i];
}

__device__ void every_fp8_width(std::uint64_t a, std::uint64_t b, const std::uint32_t (&a_regs)[4], float* out) {
  every_fp8_form<64>(a, b, a_regs, out);
  every_fp8_form<96>(a, b, a_regs, out);
  every_fp8_form<128>(a, b, a_regs, out);
  every_fp8_form<192>(a, b, a_regs, out);
  every_fp8_form<256>(a, b, a_regs, out);
}

}  // namespace

__global__ void __launch_bounds__(384, 1)
    sm90_every_primitive(const __grid_constant__ TensorMap map, float* out, int* counter) {
  extern __shared__ __align__(1024) unsigned char smem[];
  auto* bar = reinterpret_cast<std::uint64_t*>(smem + 16384);
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    setmaxnreg_decrease<40>();
    if (elect_one_sync() && threadIdx.x == 0) {
      prefetch_tensor_map(&map);
      mbarrier_arrive_expect_tx(bar, 8192);
      tma_load_2d(smem, &map, bar, 0, 0);
      mbarrier_expect_tx(bar, 0);
      tma_load_3d(smem + 4096, &map, bar, 0, 0, 0);
    }
  } else {
    setmaxnreg_increase<232>();
    mbarrier_wait_parity(bar, 0);
    if (mbarrier_try_wait_parity(bar, 1)) out[0] = 1;
    mbarrier_arrive(bar);
    const std::uint64_t a = make_smem_descriptor(smem, Swizzle::bytes128, 16, 1024);
    const std::uint64_t b = make_smem_descriptor(smem + 8192, Swizzle::bytes64, 16, 512);
    const std::uint32_t a_regs[4] = {threadIdx.x, 2, 3, 4};
    every_width<__nv_bfloat16>(a, b, a_regs, out);
    every_width<__half>(a, b, a_regs, out);
    every_fp8_width(a, b, a_regs, out);
    stmatrix_x4(shared_address(smem), a_regs);
    stmatrix_x4_trans(shared_address(smem + 512), a_regs);
    fence_proxy_async_shared();
    named_barrier_sync(1, 256);
    named_barrier_arrive(2, 256);
    if (threadIdx.x == 128) {
      tma_store_2d(&map, smem, 0, 0);
      tma_store_3d(&map, smem, 0, 0, 0);
      tma_store_commit_group();
      tma_store_wait<0>();
      atomic_add_global(counter, 1);
    }
  }
}

}  // namespace mla::cuda_flash::sm90

namespace mla::cuda_flash::sm80 {

__global__ void sm89_fp8_mma(const std::uint32_t* in, float* out) {
  const std::uint32_t a[4] = {in[0], in[1], in[2], in[3]};
  float d[4] = {out[0], out[1], out[2], out[3]};
  mma_16832_e4m3(d, a, in[4], in[5]);
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = d[i];
}

}  // namespace mla::cuda_flash::sm80
