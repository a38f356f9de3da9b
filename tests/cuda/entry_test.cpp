// The CUDA_FLASH registry entry as the selector sees it, in every build, and
// the arch coverage rules behind its device availability.
#include <gtest/gtest.h>

#include <algorithm>

#include "arch_coverage.hpp"
#include "builtin_entries.hpp"
#include "mla/error.hpp"

namespace mla {
namespace {

DeviceCapability nvidia(int major, int minor) {
  DeviceCapability device;
  device.vendor = Vendor::nvidia;
  device.major = major;
  device.minor = minor;
  device.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  return device;
}

TEST(CudaFlashEntry, DescribesItself) {
  const BackendEntry entry = detail::cuda_flash_backend_entry();
  const BackendDescription& d = entry.description;
  EXPECT_EQ(d.name, "CUDA_FLASH");
  EXPECT_EQ(d.dtypes, (std::vector<DType>{DType::float16, DType::bfloat16, DType::float8_e4m3}));
  const std::vector<MlaDims> expected_dims = {{128, 64, 128}, {64, 64, 128}, {192, 64, 256}};
  EXPECT_EQ(d.dims, expected_dims);
  EXPECT_TRUE(d.fp8_output);
  ASSERT_TRUE(d.supports_capability);
  EXPECT_TRUE(d.supports_capability(nvidia(8, 0)));
  EXPECT_TRUE(d.supports_capability(nvidia(9, 0)));
  EXPECT_TRUE(d.supports_capability(nvidia(12, 0)));
  EXPECT_FALSE(d.supports_capability(nvidia(7, 5)));
  DeviceCapability amd = nvidia(9, 0);
  amd.vendor = Vendor::amd;
  amd.arch = "gfx90a";
  EXPECT_FALSE(d.supports_capability(amd));
}

TEST(CudaFlashEntry, ValidationReasonsInContractOrder) {
  const BackendDescription d = detail::cuda_flash_backend_entry().description;
  const std::vector<std::string> reasons = validate(d, nvidia(7, 5), {DType::float32, MlaDims{64, 32, 64}});
  ASSERT_GE(reasons.size(), 3u);
  EXPECT_EQ(reasons[0], "compute capability 7.5 not supported");
  EXPECT_EQ(reasons[1], "dtype float32 not supported");
  EXPECT_NE(reasons.back().find("Model does not have supported MLA dimensions"), std::string::npos);
#if defined(MLA_WITH_CUDA)
  EXPECT_TRUE(validate(d, nvidia(9, 0), {DType::bfloat16, deepseek_dims}).empty());
#else
  EXPECT_EQ(reasons[2], "required dependencies not available (built without CUDA)");
  const auto on_hopper = validate(d, nvidia(9, 0), {DType::bfloat16, deepseek_dims});
  ASSERT_EQ(on_hopper.size(), 1u);
  EXPECT_EQ(on_hopper[0], "required dependencies not available (built without CUDA)");
#endif
}

#if !defined(MLA_WITH_CUDA)
TEST(CudaFlashEntry, FactoryRefusesWithoutCuda) {
  const BackendEntry entry = detail::cuda_flash_backend_entry();
  try {
    entry.factory(BackendParams{});
    FAIL() << "expected Error(not_supported)";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::not_supported);
    EXPECT_NE(std::string(error.what()).find("built without CUDA"), std::string::npos);
  }
}
#endif

TEST(HopperFlashEntry, DescribesItselfAndRefusesEveryArchButNinePointZero) {
  const BackendEntry entry = detail::hopper_flash_backend_entry();
  const BackendDescription& d = entry.description;
  EXPECT_EQ(d.name, "HOPPER_FLASH");
  EXPECT_EQ(d.dtypes, (std::vector<DType>{DType::float16, DType::bfloat16, DType::float8_e4m3}));
  EXPECT_EQ(d.dims, detail::cuda_flash_backend_entry().description.dims);
  EXPECT_TRUE(d.fp8_output);
  EXPECT_EQ(d.queue_kinds, std::vector<DeviceBackend>{DeviceBackend::cuda});
  // fp8 inputs: no reason of their own on 9.0 (wgmma takes e4m3), and 8.9 is refused for its capability.
  const std::vector<std::string> fp8_on_hopper = validate(d, nvidia(9, 0), {DType::float8_e4m3, deepseek_dims});
  EXPECT_EQ(fp8_on_hopper, validate(d, nvidia(9, 0), {DType::bfloat16, deepseek_dims}));
  const std::vector<std::string> fp8_on_ada = validate(d, nvidia(8, 9), {DType::float8_e4m3, deepseek_dims});
  ASSERT_FALSE(fp8_on_ada.empty());
  EXPECT_EQ(fp8_on_ada[0], "compute capability 8.9 not supported");
  for (const auto& [major, minor] : std::vector<std::pair<int, int>>{{8, 0}, {8, 9}, {10, 0}, {12, 0}}) {
    const std::vector<std::string> reasons = validate(d, nvidia(major, minor), {DType::bfloat16, deepseek_dims});
    ASSERT_FALSE(reasons.empty()) << major << "." << minor;
    EXPECT_EQ(reasons[0],
              "compute capability " + std::to_string(major) + "." + std::to_string(minor) + " not supported");
  }
  const std::vector<std::string> on_hopper = validate(d, nvidia(9, 0), {DType::bfloat16, deepseek_dims});
#if defined(MLA_WITH_HOPPER_FLASH)
  EXPECT_TRUE(on_hopper.empty());
#elif defined(MLA_WITH_CUDA)
  EXPECT_EQ(on_hopper,
            std::vector<std::string>{
                "required dependencies not available (built without sm_90a code (MLA_WITH_HOPPER_FLASH off))"});
#else
  EXPECT_EQ(on_hopper, std::vector<std::string>{"required dependencies not available (built without CUDA)"});
#endif
}

#if !defined(MLA_WITH_HOPPER_FLASH)
TEST(HopperFlashEntry, FactoryRefusesWithoutTheKernels) {
  try {
    detail::hopper_flash_backend_entry().factory(BackendParams{});
    FAIL() << "expected Error(not_supported)";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::not_supported);
    EXPECT_NE(std::string(error.what()).find("HOPPER_FLASH: built without"), std::string::npos) << error.what();
  }
}
#endif

TEST(CudaArchCoverage, RealAndVirtualEntries) {
  using cuda_flash::architectures_cover;
  EXPECT_TRUE(architectures_cover("80,90", nvidia(8, 0)));
  EXPECT_TRUE(architectures_cover("80,90", nvidia(8, 6)));   // sm_80 SASS runs on 8.x
  EXPECT_TRUE(architectures_cover("80;90", nvidia(10, 0)));  // PTX of compute_90 is JIT-compiled
  EXPECT_FALSE(architectures_cover("80,90", nvidia(7, 5)));
  EXPECT_FALSE(architectures_cover("80-real,90-real", nvidia(10, 0)));
  EXPECT_TRUE(architectures_cover("80-real,90-real", nvidia(8, 9)));
  EXPECT_FALSE(architectures_cover("86-real", nvidia(8, 0)));
  EXPECT_TRUE(architectures_cover("80-virtual", nvidia(12, 0)));
  EXPECT_TRUE(architectures_cover("90a-real", nvidia(9, 0)));
  EXPECT_FALSE(architectures_cover("90a", nvidia(10, 0)));  // arch-specific code fits one arch only
  EXPECT_TRUE(architectures_cover("all", nvidia(8, 0)));
  EXPECT_FALSE(architectures_cover("garbage,,", nvidia(8, 0)));
  DeviceCapability amd = nvidia(9, 0);
  amd.vendor = Vendor::amd;
  EXPECT_FALSE(architectures_cover("80,90", amd));
  EXPECT_EQ(cuda_flash::architectures_gap("80,90", nvidia(7, 5)),
            "no code in this build for sm_75 (CUDA architectures 80,90)");
}

// The fp8-input kernels run from sm_89 and sm_120+ code only.
TEST(CudaArchCoverage, E4m3NeedsLoadedCodeOfSm89OrNewer) {
  using cuda_flash::architectures_run_e4m3;
  EXPECT_FALSE(architectures_run_e4m3("80,90", nvidia(8, 9)));  // sm_80 SASS is loaded on 8.9
  EXPECT_TRUE(architectures_run_e4m3("80,89,90", nvidia(8, 9)));
  EXPECT_TRUE(architectures_run_e4m3("80-virtual,89-virtual", nvidia(8, 9)));  // compute_89 PTX
  EXPECT_FALSE(architectures_run_e4m3("80-real,90-real", nvidia(8, 9)));
  EXPECT_FALSE(architectures_run_e4m3("80,90", nvidia(12, 0)));  // compute_90 PTX, JIT-compiled: the stub
  EXPECT_TRUE(architectures_run_e4m3("80,90,120", nvidia(12, 0)));
  EXPECT_TRUE(architectures_run_e4m3("120-virtual", nvidia(12, 1)));
  EXPECT_TRUE(architectures_run_e4m3("native", nvidia(8, 9)));
  EXPECT_EQ(cuda_flash::e4m3_code_gap("80,90", nvidia(8, 9)),
            "fp8 inputs on sm_89 need code for sm_89 in this build (CUDA architectures 80,90; add 89)");
  EXPECT_EQ(cuda_flash::e4m3_code_gap("80,90", nvidia(12, 0)),
            "fp8 inputs on sm_120 need code for sm_120 or newer in this build (CUDA architectures 80,90; add 120)");
  EXPECT_EQ(cuda_flash::e4m3_code_gap("80,89,90", nvidia(8, 9)), "");
}

}  // namespace
}  // namespace mla
