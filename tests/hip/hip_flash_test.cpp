// HIP_FLASH's own checks, before any kernel runs: what it refuses to build,
// which queues it accepts, and the operand layouts its kernels need. The
// numbers themselves are the conformance suite's job (conformance_hip_flash).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "mla/backend/registry.hpp"
#include "mla/mla.hpp"

namespace mla {
namespace {

bool gpu_required() {
  const char* value = std::getenv("MLA_REQUIRE_GPU");
  return value != nullptr && std::string(value) == "1";
}

BackendParams deepseek_params(DType dtype = DType::bfloat16) {
  BackendParams params;
  params.num_heads = 2;
  params.dims = deepseek_dims;
  params.dtype = dtype;
  return params;
}

std::unique_ptr<PrefillBackend> make(const BackendParams& params) {
  return mla_prefill_registry().resolve(MlaPrefillBackendKind::HIP_FLASH).factory(params);
}

// Runs `body` and returns the Error it raised; fails the test when nothing was raised.
template <class Body>
Error raised_by(Body body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected an mla::Error";
  return Error(ErrorCategory::internal, "nothing raised");
}

TEST(HipFlashBackend, RefusesDtypesAndDimsWithoutKernel) {
  const Error fp32 = raised_by([] { (void)make(deepseek_params(DType::float32)); });
  EXPECT_EQ(fp32.category(), ErrorCategory::not_supported);
  EXPECT_NE(std::string(fp32.what()).find("float32"), std::string::npos) << fp32.what();

  BackendParams odd = deepseek_params();
  odd.dims = MlaDims{128, 64, 64};
  const Error dims = raised_by([&] { (void)make(odd); });
  EXPECT_EQ(dims.category(), ErrorCategory::not_supported);
  EXPECT_NE(std::string(dims.what()).find("v head dim 64"), std::string::npos) << dims.what();
}

TEST(HipFlashBackend, EveryListedDimsBuilds) {
  const BackendDescription description = mla_prefill_registry().resolve(MlaPrefillBackendKind::HIP_FLASH).description;
  for (const MlaDims& dims : description.dims) {
    for (DType dtype : description.dtypes) {
      BackendParams params = deepseek_params(dtype);
      params.dims = dims;
      if (dtype == DType::float8_e4m3) params.out_dtype = DType::bfloat16;  // fp8 inputs name their output
      std::unique_ptr<PrefillBackend> backend;
      EXPECT_NO_THROW(backend = make(params)) << to_string(dims);
      if (backend) {
        EXPECT_EQ(backend->name(), "HIP_FLASH");
        EXPECT_TRUE(backend->supports_quant_output(QuantKey::fp8_e4m3_static_per_tensor));
      }
    }
  }
}

TEST(HipFlashBackend, RefusesTheHostQueue) {
  std::unique_ptr<PrefillBackend> backend = make(deepseek_params());
  Queue host = Queue::host();
  const Error error = raised_by([&] { backend->prepare(host, PrefillMetadata::from_lengths({3}, {3})); });
  EXPECT_EQ(error.category(), ErrorCategory::not_supported);
  EXPECT_NE(std::string(error.what()).find("HIP_FLASH prepare needs a hip queue; got a host queue"), std::string::npos)
      << error.what();
}

TEST(HipFlashBackend, RefusesOperandsItCannotLoad) {
  if (detect_devices().empty()) {
    if (gpu_required()) FAIL() << "no AMD GPU detected (MLA_REQUIRE_GPU=1)";
    GTEST_SKIP() << "no AMD GPU detected";
  }
  Queue queue(DeviceBackend::hip, 0);
  const BackendParams params = deepseek_params();
  std::unique_ptr<PrefillBackend> backend = make(params);
  backend->prepare(queue, PrefillMetadata::from_lengths({5}, {5}));
  const int h = params.num_heads, dqk = params.dims.qk_head_dim(), dv = params.dims.v_head_dim;
  OwnedTensor q = OwnedTensor::device(queue, params.dtype, {5, h, dqk});
  OwnedTensor k = OwnedTensor::device(queue, params.dtype, {5, h, dqk});
  OwnedTensor v = OwnedTensor::device(queue, params.dtype, {5, h, dv});

  TensorView strided_dim = q.view;  // every other element of a wider buffer: not contiguous
  strided_dim.stride = {2 * h * dqk, 2 * dqk, 2, 0};
  strided_dim.shape = {2, h, dqk, 0};
  UsmBuffer wide = UsmBuffer::device(queue, static_cast<std::size_t>(5 * 2 * h * dqk) * dtype_size(params.dtype));
  strided_dim.data = wide.get();
  strided_dim.shape[0] = 5;
  const Error not_contiguous =
      raised_by([&] { (void)backend->run_new_tokens(queue, strided_dim, k.view, v.view, 0.0721687836f, true); });
  EXPECT_EQ(not_contiguous.category(), ErrorCategory::invalid_argument);
  EXPECT_NE(std::string(not_contiguous.what()).find("contiguous in its last dim"), std::string::npos)
      << not_contiguous.what();

  TensorView shifted = q.view;  // starts 2 bytes into its buffer
  UsmBuffer spare = UsmBuffer::device(queue, static_cast<std::size_t>(5 * h * dqk + 8) * dtype_size(params.dtype));
  shifted.data = static_cast<std::uint16_t*>(spare.get()) + 1;
  const Error misaligned =
      raised_by([&] { (void)backend->run_new_tokens(queue, shifted, k.view, v.view, 0.0721687836f, true); });
  EXPECT_EQ(misaligned.category(), ErrorCategory::invalid_argument);
  EXPECT_NE(std::string(misaligned.what()).find("16-byte aligned"), std::string::npos) << misaligned.what();
}

}  // namespace
}  // namespace mla
