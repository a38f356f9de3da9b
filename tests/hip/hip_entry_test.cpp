// HIP_FLASH's description as the selector sees it, in every build: which
// devices, dtypes and dims it accepts, and the double gating of a HIP build
// (an MFMA gfx arch, hip/mfma_targets.def, and a code object for it).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "hip/capability.hpp"
#include "mla/backend/registry.hpp"
#include "mla/mla.hpp"

namespace mla {
namespace {

BackendDescription hip_flash() {
  const std::optional<BackendEntry> entry = builtin_mla_prefill_entry(MlaPrefillBackendKind::HIP_FLASH);
  EXPECT_TRUE(entry.has_value());
  return entry ? entry->description : BackendDescription{};
}

std::vector<std::string> reasons_on(const std::string& platform, SelectorConfig config = {}) {
  return validate(hip_flash(), parse_platform(platform), config);
}

TEST(HipFlashEntry, DescribesItself) {
  const BackendDescription description = hip_flash();
  EXPECT_EQ(description.name, "HIP_FLASH");
  EXPECT_EQ(description.dtypes, (std::vector<DType>{DType::float16, DType::bfloat16, DType::float8_e4m3}));
  EXPECT_EQ(description.dims,
            (std::vector<MlaDims>{MlaDims{128, 64, 128}, MlaDims{64, 64, 128}, MlaDims{192, 64, 256}}));
  EXPECT_TRUE(description.fp8_output);
}

TEST(HipFlashEntry, RefusesDevicesThatAreNotCdna) {
  for (const char* platform : {"nvidia:9.0", "nvidia:8.0", "amd:gfx1100", "amd:gfx1200", "amd:gfx803", "host"}) {
    const std::vector<std::string> reasons = reasons_on(platform);
    ASSERT_FALSE(reasons.empty()) << platform;
    EXPECT_EQ(reasons.front().rfind("compute capability ", 0), 0u) << platform << ": " << reasons.front();
  }
}

TEST(HipFlashEntry, GcnChipsOfCapabilityNineWithoutMfmaAreRefused) {
  // gfx906 (MI50) and gfx900 read 9.0 like gfx90a but have no MFMA: refused by
  // the capability check itself, in every build.
  for (const char* platform : {"amd:gfx906", "amd:gfx900", "amd:gfx90c"}) {
    const std::vector<std::string> reasons = reasons_on(platform);
    ASSERT_FALSE(reasons.empty()) << platform;
    EXPECT_EQ(reasons.front(), "compute capability 9.0 not supported") << platform;
  }
}

// The MFMA targets are one list (hip/mfma_targets.def). The device pass of
// the HIP compile's gpu_target/mfma.hpp cannot read it (the preprocessor does
// not iterate), so its MLA_AMD_MFMA_AVAILABLE condition is compared with it here.
TEST(HipFlashEntry, MfmaMacroNamesExactlyTheListedTargets) {
  std::ifstream file(std::string(MLA_SOURCE_DIR) + "/backends/hip/target/gpu_target/mfma.hpp");
  ASSERT_TRUE(file) << "backends/hip/target/gpu_target/mfma.hpp";
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::size_t end = text.find("#define MLA_AMD_MFMA_AVAILABLE 1");
  ASSERT_NE(end, std::string::npos);
  const std::size_t begin = text.rfind("#if ", end);
  ASSERT_NE(begin, std::string::npos);
  const std::string condition = text.substr(begin, end - begin);
  std::vector<std::string> in_macro;
  for (std::size_t at = condition.find("__gfx"); at != std::string::npos; at = condition.find("__gfx", at + 1)) {
    const std::size_t close = condition.find("__", at + 2);
    in_macro.push_back(condition.substr(at + 2, close - at - 2));
  }
  std::vector<std::string> listed(std::begin(hip_flash::mfma_targets), std::end(hip_flash::mfma_targets));
  std::sort(in_macro.begin(), in_macro.end());
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(in_macro, listed) << condition;
  for (const std::string& arch : listed) {
    EXPECT_TRUE(hip_flash::supports_device(parse_platform("amd:" + arch + ":xnack-"))) << arch;
  }
}

// The code-object check on simulated builds, in every preset: a HIP compiler
// that rejects gfx942 (hipcc 5.2's clang 15; gfx942 compiled by clang-19
// beside the library, for inspection) and one that builds gfx942 into it
// (the hip preset's clang-19, or a ROCm's).
constexpr hip_flash::BuildTargets debian_build{"gfx90a,gfx908", "gfx942", "gfx90a,gfx908,gfx942,gfx950"};
constexpr hip_flash::BuildTargets rocm_build{"gfx90a,gfx908,gfx942", "", "gfx90a,gfx908,gfx942,gfx950"};

TEST(HipFlashEntry, CodeObjectGapOnSimulatedBuilds) {
  EXPECT_EQ(hip_flash::code_object_gap("gfx942", rocm_build), "");
  EXPECT_EQ(hip_flash::code_object_gap("gfx90a", debian_build), "");
  EXPECT_EQ(hip_flash::code_object_gap("gfx942", debian_build),
            "no HIP code object for gfx942; this build targets gfx90a, gfx908 (gfx942 device code was compiled by a "
            "newer clang for inspection only; the HIP compiler rejects gfx942: configure with a ROCm whose HIP "
            "compiler accepts it)");
  for (const hip_flash::BuildTargets& build : {debian_build, rocm_build}) {
    EXPECT_NE(hip_flash::code_object_gap("gfx950", build)
                  .find("no HIP code object for gfx950; this build targets gfx90a, gfx908"),
              std::string::npos);
    EXPECT_NE(hip_flash::code_object_gap("gfx950", build)
                  .find("(no compiler of this build accepts gfx950: configure with a ROCm whose HIP compiler does)"),
              std::string::npos);
  }
  // A prefix of a listed target is not that target.
  EXPECT_NE(hip_flash::code_object_gap("gfx94", rocm_build), "");
  EXPECT_NE(hip_flash::code_object_gap("gfx941", rocm_build).find("(not among MLA_HIP_CANDIDATE_ARCHITECTURES)"),
            std::string::npos);
  EXPECT_EQ(
      hip_flash::code_object_gap("gfx90a", {"", "", ""}),
      "no HIP code object for gfx90a; this build targets no gfx arch (not among MLA_HIP_CANDIDATE_ARCHITECTURES)");
  // A target the compiler accepts but the build leaves out says why.
  const hip_flash::BuildTargets clang19_build{"gfx90a,gfx942", "", "gfx90a,gfx908,gfx942,gfx950", "gfx908",
                                              "left out: the compiler's reason"};
  EXPECT_EQ(
      hip_flash::code_object_gap("gfx908", clang19_build),
      "no HIP code object for gfx908; this build targets gfx90a, gfx942 (gfx908 left out: the compiler's reason)");
  EXPECT_EQ(hip_flash::code_object_gap("gfx942", clang19_build), "");
}

// What the selector picks with the default priority lists when HIP_FLASH's
// code-object check is that of `build` (the real entry otherwise).
Selection select_in(const hip_flash::BuildTargets& build, const std::string& platform) {
  BackendEntry entry = *builtin_mla_prefill_entry(MlaPrefillBackendKind::HIP_FLASH);
  entry.description.availability = [] { return Availability{}; };
  entry.description.device_availability = [build](const DeviceCapability& device) {
    const std::string gap = hip_flash::code_object_gap(device.arch, build);
    return gap.empty() ? Availability{} : Availability{false, gap};
  };
  MlaPrefillRegistry& registry = mla_prefill_registry();
  registry.register_backend(MlaPrefillBackendKind::HIP_FLASH, entry, RegisterMode::replace);
  Selection selection;
  try {
    selection = Selector(Config::builtin_defaults()).select({DType::bfloat16, deepseek_dims}, parse_platform(platform));
  } catch (...) {
    registry.clear_override(MlaPrefillBackendKind::HIP_FLASH);
    throw;
  }
  registry.clear_override(MlaPrefillBackendKind::HIP_FLASH);
  return selection;
}

TEST(HipFlashEntry, Gfx942PicksHipFlashOnlyInABuildWithItsCode) {
  EXPECT_EQ(select_in(rocm_build, "amd:gfx942").name, "HIP_FLASH");
  const Selection debian = select_in(debian_build, "amd:gfx942");
  EXPECT_NE(debian.name, "HIP_FLASH");
  ASSERT_FALSE(debian.walk.empty());
  EXPECT_EQ(debian.walk.front().name, "HIP_FLASH");
  EXPECT_NE(debian.walk.front().availability.reason.find("for inspection only"), std::string::npos)
      << debian.walk.front().availability.reason;
  for (const hip_flash::BuildTargets& build : {debian_build, rocm_build}) {
    const Selection cdna4 = select_in(build, "amd:gfx950:xnack-");
    EXPECT_NE(cdna4.name, "HIP_FLASH");
    ASSERT_FALSE(cdna4.walk.empty());
    EXPECT_NE(cdna4.walk.front().availability.reason.find("no compiler of this build accepts gfx950"),
              std::string::npos)
        << cdna4.walk.front().availability.reason;
  }
}

TEST(HipFlashEntry, RefusesFloat32AndOtherDims) {
  SelectorConfig config;
  config.dtype = DType::float32;
  config.dims = MlaDims{128, 64, 64};
  const std::vector<std::string> reasons = validate(hip_flash(), parse_platform("amd:gfx90a"), config);
  ASSERT_GE(reasons.size(), 2u);
  bool saw_dtype = false;
  bool saw_dims = false;
  for (const std::string& reason : reasons) {
    saw_dtype = saw_dtype || reason == "dtype float32 not supported";
    saw_dims = saw_dims || reason.rfind("Model does not have supported MLA dimensions", 0) == 0;
  }
  EXPECT_TRUE(saw_dtype);
  EXPECT_TRUE(saw_dims);
}

#if MLA_WITH_HIP

// The gfx targets CMake compiled, as the backend's host predicate sees them.
std::vector<std::string> compiled_targets() {
  std::vector<std::string> archs;
  std::string list = MLA_TEST_HIP_ARCHS;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = list.find(',', start);
    const std::string arch = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!arch.empty()) archs.push_back(arch);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return archs;
}

TEST(HipFlashEntry, ValidOnEveryCompiledTarget) {
  const std::vector<std::string> archs = compiled_targets();
  ASSERT_FALSE(archs.empty()) << "a HIP build compiles at least one gfx target";
  for (const std::string& arch : archs) {
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      SelectorConfig config;
      config.dtype = dtype;
      EXPECT_TRUE(reasons_on("amd:" + arch, config).empty()) << arch;
    }
  }
}

// This build's own entry and the default priority lists: every compiled
// target selects HIP_FLASH (gfx942 among them in the hip preset, where
// ci/hip-inspect requires it in the library).
TEST(HipFlashEntry, EveryCompiledTargetSelectsHipFlash) {
  for (const std::string& arch : compiled_targets()) {
    const Selection selection =
        Selector(Config::builtin_defaults()).select({DType::bfloat16, deepseek_dims}, parse_platform("amd:" + arch));
    EXPECT_EQ(selection.name, "HIP_FLASH") << arch;
  }
}

TEST(HipFlashEntry, CdnaTargetWithoutCodeObjectIsRefusedWithReason) {
  const std::vector<std::string> archs = compiled_targets();
  // gfx950 (9.5) and gfx942 (9.4) are CDNA; whichever was not compiled must be refused.
  for (const char* arch : {"gfx942", "gfx950", "gfx90a", "gfx908"}) {
    if (std::find(archs.begin(), archs.end(), arch) != archs.end()) continue;
    const std::vector<std::string> reasons = reasons_on(std::string("amd:") + arch);
    ASSERT_EQ(reasons.size(), 1u) << arch;
    EXPECT_NE(reasons[0].find("required dependencies not available (no HIP code object for " + std::string(arch)),
              std::string::npos)
        << reasons[0];
    EXPECT_NE(reasons[0].find("this build targets " + archs.front()), std::string::npos) << reasons[0];
  }
}

// This build's own entry: a target compiled only for inspection, left out,
// or built by no compiler at all, is refused with that reason.
TEST(HipFlashEntry, InspectedOrUnbuiltTargetsSayWhy) {
  const std::vector<std::string> compiled = compiled_targets();
  for (const std::string& arch : hip_flash::split_arch_list(MLA_TEST_HIP_DROPPED_ARCHS)) {
    const std::vector<std::string> reasons = reasons_on("amd:" + arch);
    ASSERT_EQ(reasons.size(), 1u) << arch;
    EXPECT_NE(reasons[0].find(arch + " left out: "), std::string::npos) << reasons[0];
  }
  for (const char* arch : {"gfx942", "gfx950"}) {
    if (std::find(compiled.begin(), compiled.end(), arch) != compiled.end()) continue;
    const std::vector<std::string> reasons = reasons_on(std::string("amd:") + arch);
    ASSERT_EQ(reasons.size(), 1u) << arch;
    const std::vector<std::string> inspected = hip_flash::split_arch_list(MLA_TEST_HIP_INSPECTED_ARCHS);
    const bool only_inspected = std::find(inspected.begin(), inspected.end(), arch) != inspected.end();
    EXPECT_NE(reasons[0].find(only_inspected ? "for inspection only" : "no compiler of this build accepts"),
              std::string::npos)
        << reasons[0];
  }
}

#else

TEST(HipFlashEntry, UnavailableWithoutHip) {
  const std::vector<std::string> reasons = reasons_on("amd:gfx90a");
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0], "required dependencies not available (built without HIP)");
  const std::optional<BackendEntry> entry = builtin_mla_prefill_entry(MlaPrefillBackendKind::HIP_FLASH);
  ASSERT_TRUE(entry.has_value());
  try {
    (void)entry->factory(BackendParams{});
    FAIL() << "constructing HIP_FLASH without HIP must fail";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::not_supported);
    EXPECT_NE(std::string(error.what()).find("without HIP"), std::string::npos) << error.what();
  }
}

#endif

}  // namespace
}  // namespace mla
