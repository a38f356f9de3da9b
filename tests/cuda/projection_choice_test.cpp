// Which GEMM runs CUDA_FLASH's and HOPPER_FLASH's up-projection
// (cuda/projection_choice.hpp), in every build: float32 on the SIMT kernel,
// bf16 and fp16 on cuBLASLt when kv_b_proj has the compute dtype and the
// layouts fit, the own tensor-core kernel otherwise or when
// MLA_CUDA_PROJECTION=own, and a refusal when =cublaslt cannot be honoured.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "builtin_entries.hpp"
#include "config/scoped_env.hpp"
#include "cuda/projection_choice.hpp"
#include "mla/error.hpp"

namespace mla::cuda_flash {
namespace {

constexpr std::int64_t T = 37, L = 512, H = 16, P = 128, R = 64, V = 128;

// The step's workspace layout: k [T, H, P+R], v [T, H, V], kv_b_proj [H*(P+V), L].
struct Call {
  TensorView latents = TensorView::contiguous(nullptr, DType::float32, {T, L}, MemoryKind::device);
  TensorView w, k, v;
  explicit Call(DType dtype, DType weight)
      : w(TensorView::contiguous(nullptr, weight, {H * (P + V), L}, MemoryKind::device)),
        k(TensorView::contiguous(nullptr, dtype, {T, H, P + R}, MemoryKind::device)),
        v(TensorView::contiguous(nullptr, dtype, {T, H, V}, MemoryKind::device)) {}
  ProjectionChoice choose(ProjectionOverride how = ProjectionOverride::automatic) const {
    return choose_projection(latents, w, k, v, how);
  }
};

TEST(ProjectionChoice, TheOverrideIsUnsetOwnOrCublasltAndNothingElse) {
  EXPECT_EQ(parse_projection_override(nullptr), ProjectionOverride::automatic);
  EXPECT_EQ(parse_projection_override(""), ProjectionOverride::automatic);
  EXPECT_EQ(parse_projection_override("own"), ProjectionOverride::own);
  EXPECT_EQ(parse_projection_override("cublaslt"), ProjectionOverride::cublaslt);
  for (const char* bad : {"cuBLASLt", "cublas", "mma", " own"}) {
    try {
      parse_projection_override(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
      EXPECT_NE(std::string(error.what()).find(std::string("MLA_CUDA_PROJECTION=") + bad), std::string::npos)
          << error.what();
    }
  }
}

TEST(ProjectionChoice, HalfPrecisionWithWeightsOfTheComputeDtypeGoesToCublaslt) {
  for (DType dtype : {DType::bfloat16, DType::float16}) {
    const Call call(dtype, dtype);
    for (ProjectionOverride how : {ProjectionOverride::automatic, ProjectionOverride::cublaslt}) {
      const ProjectionChoice choice = call.choose(how);
      EXPECT_EQ(choice.path, ProjectionPath::cublaslt) << dtype_name(dtype);
      EXPECT_TRUE(choice.reason.empty()) << choice.reason;
      EXPECT_FALSE(choice.refused);
    }
    const ProjectionChoice own = call.choose(ProjectionOverride::own);
    EXPECT_EQ(own.path, ProjectionPath::tensor_cores);
    EXPECT_EQ(own.reason, "MLA_CUDA_PROJECTION=own");
  }
}

TEST(ProjectionChoice, Float32StaysOnTheSimtKernelWhateverTheOverride) {
  const Call call(DType::float32, DType::float32);
  for (ProjectionOverride how :
       {ProjectionOverride::automatic, ProjectionOverride::own, ProjectionOverride::cublaslt}) {
    const ProjectionChoice choice = call.choose(how);
    EXPECT_EQ(choice.path, ProjectionPath::simt);
    EXPECT_FALSE(choice.refused);
  }
}

TEST(ProjectionChoice, WeightsOfAnotherDtypeGoToTheOwnKernelOrAreRefusedWhenCublasltIsForced) {
  for (DType weight : {DType::float32, DType::float16, DType::float8_e4m3}) {
    const Call call(DType::bfloat16, weight);
    const ProjectionChoice choice = call.choose();
    EXPECT_EQ(choice.path, ProjectionPath::tensor_cores) << dtype_name(weight);
    EXPECT_EQ(choice.reason, "kv_b_proj is " + std::string(dtype_name(weight)) + ", not the compute dtype bfloat16");
    EXPECT_FALSE(choice.refused);
    const ProjectionChoice forced = call.choose(ProjectionOverride::cublaslt);
    EXPECT_TRUE(forced.refused);
    EXPECT_EQ(forced.reason, choice.reason);
    EXPECT_EQ(call.choose(ProjectionOverride::own).path, ProjectionPath::tensor_cores);
  }
}

TEST(ProjectionChoice, StridedViewsCublasltCanNameStayOnIt) {
  Call call(DType::bfloat16, DType::bfloat16);
  // v as the tail of a fused [T, H, P+V] buffer, k with a padded token
  // stride, kv_b_proj with padded rows, latents transposed (the conversion
  // reads any strides).
  call.v.stride = {H * (P + V), P + V, 1, 0};
  call.k.stride[0] = H * (P + R) + 8;
  call.w.stride[0] = L + 64;
  call.latents.stride = {1, T, 0, 0};
  EXPECT_EQ(call.choose().path, ProjectionPath::cublaslt) << call.choose().reason;
}

TEST(ProjectionChoice, LayoutsCublasltCannotNameGoToTheOwnKernel) {
  const auto expect_own = [](const Call& call, const std::string& culprit) {
    const ProjectionChoice choice = call.choose();
    EXPECT_EQ(choice.path, ProjectionPath::tensor_cores);
    EXPECT_EQ(choice.reason.rfind(culprit, 0), 0u) << choice.reason;
    EXPECT_TRUE(call.choose(ProjectionOverride::cublaslt).refused);
  };
  Call transposed(DType::bfloat16, DType::bfloat16);
  transposed.w.stride = {1, H * (P + V), 0, 0};
  expect_own(transposed, "kv_b_proj is not row-major");
  Call overlapping_rows(DType::bfloat16, DType::bfloat16);
  overlapping_rows.w.stride[0] = L - 1;
  expect_own(overlapping_rows, "kv_b_proj is not row-major");
  Call strided_k(DType::bfloat16, DType::bfloat16);
  strided_k.k.stride = {2 * H * (P + R), 2 * (P + R), 2, 0};
  expect_own(strided_k, "k is not contiguous");
  Call narrow_v(DType::float16, DType::float16);
  narrow_v.v.stride[0] = V - 1;  // token rows overlap
  expect_own(narrow_v, "v is not contiguous");
}

#if defined(MLA_WITH_CUDA)
// The backend reads the override once, as it is made: no device needed.
TEST(ProjectionChoice, CudaFlashRefusesABadOverrideWhenMade) {
  BackendParams params;
  params.num_heads = 16;
  params.dims = deepseek_dims;
  params.dtype = DType::bfloat16;
  for (const char* good : {"own", "cublaslt", ""}) {
    const test::ScopedEnv env("MLA_CUDA_PROJECTION", std::string(good));
    EXPECT_NO_THROW(detail::cuda_flash_backend_entry().factory(params)) << good;
  }
  const test::ScopedEnv env("MLA_CUDA_PROJECTION", std::string("fast"));
  try {
    detail::cuda_flash_backend_entry().factory(params);
    ADD_FAILURE() << "MLA_CUDA_PROJECTION=fast accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("MLA_CUDA_PROJECTION=fast"), std::string::npos) << error.what();
  }
}
#endif

}  // namespace
}  // namespace mla::cuda_flash
