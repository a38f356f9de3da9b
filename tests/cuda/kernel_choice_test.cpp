// The GPU backends' kernel choosers (CUDA_FLASH's and HIP_FLASH's), the one
// answer each entry's validate(), constructor and launches share, in every
// build: the tile and shared memory of each shape, the refusals in order,
// and validate's reason 6.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "builtin_entries.hpp"
#include "cuda/flash_config.hpp"
#include "cuda/kernel_choice.hpp"
#include "cuda_hip/flash_dims.hpp"
#include "hip/flash_config.hpp"
#include "hip/kernel_choice.hpp"

namespace mla {
namespace {

DeviceCapability nvidia(int major, std::uint64_t shared_memory_per_block) {
  DeviceCapability device;
  device.vendor = Vendor::nvidia;
  device.major = major;
  device.arch = "sm_" + std::to_string(major) + "0";
  device.shared_memory_per_block = shared_memory_per_block;
  return device;
}

DeviceCapability amd(const char* arch, int warp_size, std::uint64_t lds_per_block) {
  DeviceCapability device;
  device.vendor = Vendor::amd;
  device.major = 9;
  device.arch = arch;
  device.warp_size = warp_size;
  device.shared_memory_per_block = lds_per_block;
  return device;
}

// Every shape and dtype the entries advertise gets its table row from
// `choose`; `expected` gives the row's (block rows, block cols, shared bytes).
template <class Expected>
void expect_every_shape_chosen(gpu::KernelChooser choose, Expected expected) {
  for (const MlaDims& dims : gpu::flash_dims) {
    for (DType dtype : gpu::flash_dtypes) {
      const gpu::KernelChoice choice = choose({dtype, dims, nullptr});
      ASSERT_TRUE(choice.supported()) << choice.refusal;
      EXPECT_EQ(choice.tile.head_dim_qk, dims.qk_head_dim());
      EXPECT_EQ(choice.tile.head_dim_v, dims.v_head_dim);
      const auto [rows, cols, shared] = expected(dims.qk_head_dim(), dims.v_head_dim);
      EXPECT_EQ(choice.tile.block_rows, rows);
      EXPECT_EQ(choice.tile.block_cols, cols);
      EXPECT_EQ(choice.shared_bytes, shared);
    }
  }
}

TEST(KernelChoice, EveryShapeAndDtypeHasItsTile) {
  expect_every_shape_chosen(cuda_flash::choose_kernel, [](int qk, int v) {
    const cuda_flash::FlashTileConfig& tile = *cuda_flash::find_flash_tile_config(qk, v);
    return std::tuple{tile.block_rows, tile.block_cols, tile.shared_bytes()};
  });
  expect_every_shape_chosen(hip_flash::choose_kernel, [](int qk, int v) {
    const hip_flash::FlashTileConfig& tile = *hip_flash::find_flash_tile_config(qk, v);
    return std::tuple{tile.block_rows(), tile.block_cols, tile.lds_bytes()};
  });
}

TEST(KernelChoice, CudaRefusesDtypeThenDimsThenDevice) {
  const MlaDims odd{96, 32, 100};
  // The dtype is asked first, so float32 with odd dims names the dtype.
  EXPECT_EQ(cuda_flash::choose_kernel({DType::float32, odd, nullptr}).refusal,
            "supports float16, bfloat16 and float8_e4m3 inputs; got float32");
  EXPECT_EQ(cuda_flash::choose_kernel({DType::bfloat16, odd, nullptr}).refusal,
            "has no kernel for " + to_string(odd) + " (qk head dim 128, v head dim 100)");
  const DeviceCapability turing = nvidia(7, 64 * 1024);
  const std::string refusal = cuda_flash::choose_kernel({DType::bfloat16, deepseek_dims, &turing}).refusal;
  EXPECT_EQ(refusal, cuda_flash::device_gap(turing));
  EXPECT_NE(refusal.find("compute capability 8.0 or newer"), std::string::npos) << refusal;
}

// fp8 inputs: the kernel exists for every shape; 8.9 and 12.0+ run it, a
// device below 8.9 or of 9.x-11.x (no native mma.sync on e4m3) is refused
// with its own reason.
TEST(KernelChoice, CudaTakesFp8InputsFromComputeCapability89) {
  ASSERT_TRUE(cuda_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, nullptr}).supported());
  const DeviceCapability ampere = nvidia(8, 0);  // no shared memory reported: not refused for it
  const std::string refusal = cuda_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, &ampere}).refusal;
  EXPECT_EQ(refusal.rfind("fp8 inputs need compute capability 8.9, or 12.0 and newer", 0), 0U) << refusal;
  EXPECT_TRUE(cuda_flash::choose_kernel({DType::bfloat16, deepseek_dims, &ampere}).supported());
  DeviceCapability ada = nvidia(8, 0);
  ada.minor = 9;
  EXPECT_TRUE(cuda_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, &ada}).supported());
  EXPECT_TRUE(cuda_flash::choose_kernel({DType::float8_e4m3, {192, 64, 256}, &ada}).supported());
  for (int major : {9, 10, 11}) {
    const DeviceCapability data_center = nvidia(major, 0);
    EXPECT_FALSE(cuda_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, &data_center}).supported()) << major;
    EXPECT_TRUE(cuda_flash::choose_kernel({DType::bfloat16, deepseek_dims, &data_center}).supported()) << major;
  }
  const DeviceCapability consumer_blackwell = nvidia(12, 0);
  EXPECT_TRUE(cuda_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, &consumer_blackwell}).supported());
}

// HIP_FLASH takes fp8 inputs on CDNA3 (gfx940-942) alone.
TEST(KernelChoice, HipTakesFp8InputsOnGfx94xOnly) {
  ASSERT_TRUE(hip_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, nullptr}).supported());
  const DeviceCapability gfx942 = amd("gfx942", 64, 64 * 1024);
  EXPECT_TRUE(hip_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, &gfx942}).supported());
  for (const char* arch : {"gfx90a", "gfx908", "gfx950"}) {
    const DeviceCapability device = amd(arch, 64, 64 * 1024);
    const std::string refusal = hip_flash::choose_kernel({DType::float8_e4m3, deepseek_dims, &device}).refusal;
    EXPECT_EQ(refusal.rfind("fp8 inputs need CDNA3's fp8 MFMA (gfx940, gfx941, gfx942)", 0), 0U) << refusal;
    EXPECT_TRUE(hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, &device}).supported()) << arch;
  }
}

TEST(KernelChoice, CudaRefusesADeviceWithTooLittleSharedMemory) {
  const gpu::KernelChoice alone = cuda_flash::choose_kernel({DType::float16, deepseek_dims, nullptr});
  ASSERT_TRUE(alone.supported());
  const DeviceCapability enough = nvidia(8, alone.shared_bytes);
  EXPECT_TRUE(cuda_flash::choose_kernel({DType::float16, deepseek_dims, &enough}).supported());
  const DeviceCapability small = nvidia(8, alone.shared_bytes - 1);
  const std::string refusal = cuda_flash::choose_kernel({DType::float16, deepseek_dims, &small}).refusal;
  EXPECT_NE(refusal.find("needs " + std::to_string(alone.shared_bytes) + " bytes of shared memory per block"),
            std::string::npos)
      << refusal;
  EXPECT_NE(refusal.find("allows " + std::to_string(alone.shared_bytes - 1)), std::string::npos) << refusal;
  // A device that reports no shared memory, or a simulated platform (whose
  // figure is a default, not the part's limit), is not refused for it.
  const DeviceCapability unreported = nvidia(9, 0);
  EXPECT_TRUE(cuda_flash::choose_kernel({DType::float16, deepseek_dims, &unreported}).supported());
  DeviceCapability simulated = nvidia(9, 48 * 1024);
  simulated.simulated = true;
  EXPECT_TRUE(cuda_flash::choose_kernel({DType::float16, deepseek_dims, &simulated}).supported());
}

TEST(KernelChoice, CudaValidateReportsTheChoosersRefusalLast) {
  BackendDescription description = detail::cuda_flash_backend_entry().description;
  ASSERT_TRUE(description.kernel_refusal);
  // As a CUDA build whose code covers the device describes it, in every build.
  description.availability = [] { return Availability{}; };
  description.device_availability = nullptr;
  const DeviceCapability small = nvidia(8, 1024);
  const std::vector<std::string> reasons = validate(description, small, SelectorConfig{DType::bfloat16, deepseek_dims});
  ASSERT_FALSE(reasons.empty());
  EXPECT_EQ(reasons.back().rfind("CUDA_FLASH needs ", 0), 0U) << reasons.back();
  EXPECT_NE(reasons.back().find("allows 1024"), std::string::npos) << reasons.back();
  // An earlier reason (the dtype) keeps the chooser out of the list.
  const std::vector<std::string> dtype_reasons =
      validate(description, small, SelectorConfig{DType::float32, deepseek_dims});
  for (const std::string& reason : dtype_reasons) EXPECT_EQ(reason.find("CUDA_FLASH needs"), std::string::npos);
}

TEST(KernelChoice, HipRefusesInOrder) {
  EXPECT_EQ(hip_flash::choose_kernel({DType::float32, deepseek_dims, nullptr}).refusal,
            "supports float16, bfloat16 and float8_e4m3 inputs; got float32");
  EXPECT_EQ(hip_flash::choose_kernel({DType::float16, MlaDims{8, 8, 8}, nullptr}).refusal.rfind("has no kernel for", 0),
            0U);
  const DeviceCapability gfx906 = amd("gfx906", 64, 64 * 1024);  // gfx9 without MFMA
  EXPECT_EQ(hip_flash::choose_kernel({DType::float16, deepseek_dims, &gfx906}).refusal, hip_flash::device_gap(gfx906));
  const DeviceCapability gfx90a = amd("gfx90a", 64, 64 * 1024);
  EXPECT_TRUE(hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, &gfx90a}).supported());
  const DeviceCapability wave32 = amd("gfx90a", 32, 64 * 1024);
  EXPECT_EQ(
      hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, &wave32}).refusal.rfind("needs a wave64 device", 0),
      0U);
  const gpu::KernelChoice alone = hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, nullptr});
  const DeviceCapability small = amd("gfx90a", 64, alone.shared_bytes - 1);
  const std::string refusal = hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, &small}).refusal;
  EXPECT_NE(refusal.find("bytes of LDS per block"), std::string::npos) << refusal;
}

// On a device, the row of its generation: gfx942 takes CDNA3's (DeepSeek's
// 192/128 in 32-key tiles, for two workgroups per CU), gfx90a CDNA1/2's; both
// plan the same query rows per block.
TEST(KernelChoice, HipTakesTheRowOfTheDeviceGeneration) {
  const DeviceCapability gfx90a = amd("gfx90a", 64, 64 * 1024);
  const DeviceCapability gfx942 = amd("gfx942", 64, 64 * 1024);
  for (const MlaDims& dims : gpu::flash_dims) {
    const gpu::KernelChoice cdna12 = hip_flash::choose_kernel({DType::bfloat16, dims, &gfx90a});
    const gpu::KernelChoice cdna3 = hip_flash::choose_kernel({DType::bfloat16, dims, &gfx942});
    ASSERT_TRUE(cdna12.supported()) << cdna12.refusal;
    ASSERT_TRUE(cdna3.supported()) << cdna3.refusal;
    const hip_flash::FlashTileConfig& row =
        *hip_flash::find_flash_tile_config(dims.qk_head_dim(), dims.v_head_dim, hip_flash::TileFamily::cdna3);
    EXPECT_EQ(cdna3.tile.block_cols, row.block_cols);
    EXPECT_EQ(cdna3.shared_bytes, row.lds_bytes());
    EXPECT_EQ(cdna3.tile.block_rows, cdna12.tile.block_rows);
  }
  const gpu::KernelChoice deepseek = hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, &gfx942});
  EXPECT_EQ(deepseek.tile.block_cols, 32);
  EXPECT_EQ(hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, &gfx90a}).tile.block_cols, 64);
  // Without a device, CDNA1/2's row.
  EXPECT_EQ(hip_flash::choose_kernel({DType::bfloat16, deepseek_dims, nullptr}).tile.block_cols, 64);
}

}  // namespace
}  // namespace mla
