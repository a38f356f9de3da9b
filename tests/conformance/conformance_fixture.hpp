// The fixture of the conformance suite. It builds the backend under test
// (MLA_CONFORMANCE_BACKEND, through the process registry) on its queue and the
// REFERENCE backend on the host queue for the same parameters; a test makes
// inputs on the host, runs both, copies the result back and compares. When
// the backend under test is REFERENCE itself, the tests also hold REFERENCE
// to an implementation written apart from it (oracle.hpp).
//
// GPU backends run on a GPU queue; without a device or without that vendor in
// the build their tests are skipped with the reason, unless MLA_REQUIRE_GPU=1
// turns the skip into a failure. A dtype or dims the backend does not list is
// skipped with validate()'s reasons.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "conformance/oracle.hpp"
#include "conformance/test_tensors.hpp"

namespace mla::testing {

struct ConformanceShape {
  DType dtype = DType::bfloat16;  // q, k and v
  MlaDims dims = deepseek_dims;
  int heads = 1;
  std::optional<DType> out_dtype = std::nullopt;  // BackendParams::out_dtype (float8_e4m3 inputs)
};

// gtest prints parameters with it: "bfloat16 (qk_nope_head_dim=128, ...) heads=4",
// "float8_e4m3 out bfloat16 (...) heads=4".
void PrintTo(const ConformanceShape& shape, std::ostream* os);
// "bfloat16_128x64x128_h4", "float8_e4m3_to_bfloat16_128x64x128_h4", for test names.
std::string shape_name(const ::testing::TestParamInfo<ConformanceShape>& info);

// Keys (or values) of one sequence per part, part after part, then the
// next sequence, into [sum, H, dim]: the operand of a single causal pass
// that must equal a chunked step whose parts are the chunks and then the
// new tokens (bottom-right alignment puts the context in view).
// `full_lens` receives each sequence's total.
HostTensor concat_context(DType dtype, const std::vector<const HostTensor*>& parts,
                          const std::vector<std::vector<int>>& part_lens, std::vector<int>& full_lens);

// q, k, v on the host and their copies on the queue under test.
struct Operands {
  HostTensor q, k, v;  // [Nq, H, dqk], [Nk, H, dqk], [Nk, H, V]
  DeviceTensor dq, dk, dv;
};

// Split-KV off (MLA_KV_SPLITS=1) for the life of the object. On a GPU the
// flash backends' split count follows the launch's size and the device, so
// comparisons of bits across batches or metadata forms hold only without it
// (docs/contract.md §6); elsewhere it changes nothing.
class NoKvSplits {
 public:
  NoKvSplits() { ::setenv("MLA_KV_SPLITS", "1", 1); }
  ~NoKvSplits() { ::unsetenv("MLA_KV_SPLITS"); }
  NoKvSplits(const NoKvSplits&) = delete;
  NoKvSplits& operator=(const NoKvSplits&) = delete;
};

class Conformance : public ::testing::TestWithParam<ConformanceShape> {
 protected:
  void SetUp() override;
  // Emulated GPU backends (MLA_CONFORMANCE_EMULATED): prints the test's
  // launches and hazard checks (a hazard itself fails the test as it happens).
  void TearDown() override;

  int heads() const { return GetParam().heads; }
  int qk_dim() const { return GetParam().dims.qk_head_dim(); }
  int v_dim() const { return GetParam().dims.v_head_dim; }
  DType dtype() const { return GetParam().dtype; }
  // The bounds of §6 for the shape: float8_e4m3 inputs are held to their
  // output dtype's on REFERENCE and KOKKOS (their products exact or in fp32),
  // and the GPU kernels, which round P to e4m3 for the P V product, to
  // fp8_p_relative for out.
  Tolerance tolerance() const {
    Tolerance bound = tolerance_for(params_.output_dtype());
    if (params_.dtype == DType::float8_e4m3 && gpu_kernel_under_test()) bound.out_relative = fp8_p_relative;
    return bound;
  }
  // CUDA_FLASH, HIP_FLASH or HOPPER_FLASH, on a GPU or emulated: kernels that
  // read descale tensors on the device, where no value can be checked.
  bool gpu_kernel_under_test() const { return description_.name.find("_FLASH") != std::string::npos; }

  // Random data in [lo, hi] in the shape's dtype; strides empty = contiguous.
  HostTensor random_tensor(std::vector<std::int64_t> shape, float lo, float hi, std::vector<std::int64_t> strides = {},
                           std::int64_t offset = 0);
  // Random q [nq, H, dqk], k [nk, H, dqk] in [-2, 2] and v [nk, H, V] in [-1, 1].
  // `strided` lays q out with a padded head stride and v as the tail of a
  // fused [nk, H, P + V] buffer, as vLLM's kv_b_proj split leaves it.
  Operands random_operands(std::int64_t nq, std::int64_t nk, bool strided = false);

  // True in the suite whose backend under test is REFERENCE itself: comparing
  // it with REFERENCE proves nothing there, so the tests also hold
  // REFERENCE's results to the oracle (oracle.hpp).
  bool reference_under_test() const { return description_.name == "REFERENCE"; }

  // With REFERENCE under test: REFERENCE's attention result `ref` for these
  // host inputs against oracle_attention; success without work otherwise.
  ::testing::AssertionResult reference_attention_exact(const AttentionResult& ref, const HostTensor& q,
                                                       const HostTensor& k, const HostTensor& v,
                                                       const std::vector<int>& q_lens, const std::vector<int>& k_lens,
                                                       bool causal, std::optional<float> out_scale = std::nullopt);

  // Copies a result of the backend under test to the host.
  HostTensor fetch(const TensorView& view) { return download(queue_, view); }
  // Fetches out (and lse when present) and compares them with the reference.
  ::testing::AssertionResult matches(const AttentionResult& result, const AttentionResult& reference,
                                     const Tolerance& tolerance);
  ::testing::AssertionResult matches(const AttentionResult& result, const AttentionResult& reference) {
    return matches(result, reference, tolerance());
  }

  // A chunked step's random operands (new tokens `q_lens`, context chunks
  // `chunk_lens`) on the queue under test, and on the host the single
  // causal pass they must equal: each sequence's chunks' keys (values), then
  // its new ones (concat_context), `full_lens` of them.
  struct ChunkedOperands {
    PrefillMetadata meta;
    std::vector<Operands> chunks;
    Operands ops;
    std::vector<TensorView> chunk_k, chunk_v;
    HostTensor full_k, full_v;
    std::vector<int> full_lens;
  };
  ChunkedOperands chunked_operands(const std::vector<int>& q_lens, const std::vector<std::vector<int>>& chunk_lens);

  // run_prefill_step over new tokens `q_lens` and context chunks `chunk_lens`
  // on the backend under test, against one causal REFERENCE pass over
  // context + new tokens (bottom-right aligned).
  ::testing::AssertionResult chunked_prefill_matches(const std::vector<int>& q_lens,
                                                     const std::vector<std::vector<int>>& chunk_lens);

  BackendParams params_;
  float scale_ = 1.0f;  // the softmax scale of every call, dqk^-0.5
  BackendDescription description_;
  Queue queue_ = Queue::host();  // the backend under test runs here
  Queue host_ = Queue::host();   // the reference runs here
  std::unique_ptr<PrefillBackend> backend_;
  std::unique_ptr<PrefillBackend> reference_;
  std::mt19937_64 rng_;
};

}  // namespace mla::testing
