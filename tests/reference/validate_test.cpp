// validate() and to_string(SelectorConfig): docs/contract.md §8 order and wording,
// and the REFERENCE entry's description.
#include "mla/platform.hpp"
#include "reference/reference_helpers.hpp"

namespace mla::testing {
namespace {

BackendDescription picky_description() {
  BackendDescription d;
  d.name = "PICKY";
  d.dims = {{128, 64, 128}, {192, 64, 256}};
  d.supports_capability = [](const DeviceCapability& c) { return c.vendor == Vendor::nvidia && c.major == 8; };
  d.availability = [] { return Availability{false, "built without CUDA"}; };
  return d;
}

DeviceCapability sm90() { return parse_platform("nvidia:9.0"); }

TEST(Validate, ReasonsComeInContractOrder) {
  const SelectorConfig config{DType::float32, {64, 64, 128}};
  const std::vector<std::string> reasons = validate(picky_description(), sm90(), config);
  const std::vector<std::string> expected{
      "compute capability 9.0 not supported", "dtype float32 not supported",
      "required dependencies not available (built without CUDA)",
      "Model does not have supported MLA dimensions (got (qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=128); "
      "supported: (qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128), "
      "(qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256))"};
  EXPECT_EQ(reasons, expected);
}

TEST(Validate, EachReasonAlone) {
  BackendDescription d = picky_description();
  d.availability = {};
  const DeviceCapability sm80 = parse_platform("nvidia:8.0");
  EXPECT_TRUE(validate(d, sm80, {DType::bfloat16, deepseek_dims}).empty());
  EXPECT_EQ(validate(d, sm90(), {DType::bfloat16, deepseek_dims}),
            std::vector<std::string>{"compute capability 9.0 not supported"});
  EXPECT_EQ(validate(d, sm80, {DType::float32, deepseek_dims}),
            std::vector<std::string>{"dtype float32 not supported"});
  d.availability = [] { return Availability{false, ""}; };
  EXPECT_EQ(validate(d, sm80, {DType::float16, {192, 64, 256}}),
            std::vector<std::string>{"required dependencies not available"});
}

// Device code (e.g. a HIP build without the device's gfx target) is asked
// about only on a supported device of a build that has the backend at all.
TEST(Validate, DeviceCodeIsAskedOnlyWhenEverythingElseServes) {
  int asked = 0;
  BackendDescription d = picky_description();
  d.device_availability = [&asked](const DeviceCapability& c) {
    ++asked;
    return Availability{false, "no device code for " + c.arch};
  };
  const DeviceCapability sm80 = parse_platform("nvidia:8.0");
  EXPECT_EQ(validate(d, sm80, {DType::bfloat16, deepseek_dims}),
            std::vector<std::string>{"required dependencies not available (built without CUDA)"});
  d.availability = {};
  EXPECT_EQ(validate(d, sm90(), {DType::bfloat16, deepseek_dims}),
            std::vector<std::string>{"compute capability 9.0 not supported"});
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(validate(d, sm80, {DType::bfloat16, deepseek_dims}),
            std::vector<std::string>{"required dependencies not available (no device code for sm_80)"});
  EXPECT_EQ(asked, 1);
}

TEST(Validate, EmptyListsMeanAnything) {
  BackendDescription d;
  d.name = "ANY";
  d.dtypes = {DType::float32};
  EXPECT_TRUE(validate(d, sm90(), {DType::float32, {7, 3, 5}}).empty());
}

TEST(Validate, EqualQkAndVRequiredByAttentionEntries) {
  BackendDescription d;
  d.requires_equal_qk_v = true;
  EXPECT_TRUE(validate(d, sm90(), {DType::float16, {64, 64, 128}}).empty());
  const auto reasons = validate(d, sm90(), {DType::float16, deepseek_dims});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0],
            "Model does not have equal query/key and value head dims (got (qk_nope_head_dim=128, qk_rope_head_dim=64, "
            "v_head_dim=128); qk_nope_head_dim + qk_rope_head_dim must equal v_head_dim)");
}

TEST(Validate, SelectorConfigPrintsDtypeAndDims) {
  EXPECT_EQ(to_string(SelectorConfig{DType::bfloat16, deepseek_dims}),
            "dtype=bfloat16, dims=(qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)");
}

TEST(ReferenceEntry, ServesEveryDtypeDimsAndDevice) {
  const BackendEntry entry = detail::reference_backend_entry();
  EXPECT_EQ(entry.description.name, "REFERENCE");
  EXPECT_TRUE(entry.description.fp8_output);
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float8_e4m3})
    for (const DeviceCapability& cap : {host_capability(), sm90(), parse_platform("amd:gfx942")})
      EXPECT_TRUE(validate(entry.description, cap, {dtype, {64, 64, 128}}).empty());
  const auto backend = entry.factory(tiny_params(deepseek_dims, 16));
  EXPECT_EQ(backend->name(), "REFERENCE");
  EXPECT_TRUE(backend->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor));
}

}  // namespace
}  // namespace mla::testing
