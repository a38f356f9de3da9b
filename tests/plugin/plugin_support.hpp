// Helpers of the plugin tests: the paths of the test plugins, host tensors
// with random or poisoned contents, a comparison with REFERENCE, a snapshot
// of everything a plugin load may change, and a scoped environment variable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mla/mla.hpp"

namespace mla::plugin_test {

// A host tensor owning its storage. Contiguous unless `strides` are given.
struct HostTensor {
  std::vector<std::byte> storage;
  TensorView view;

  HostTensor() = default;
  HostTensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides = {});
  // Moves keep `view` valid (the vector's buffer moves with it); copies would alias.
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  // Every byte of the storage holds a quiet NaN of the dtype.
  void poison();
  // Values uniform in [lo, hi], rounded to the dtype, never zero.
  void fill_random(std::mt19937_64& rng, float lo, float hi);
  float at(std::int64_t i0, std::int64_t i1, std::int64_t i2 = 0) const;
};

// Relative norm error ||out - ref|| / ||ref|| over [N, H, V] views; NaN or
// inf anywhere in `out` gives +inf.
double relative_error(const TensorView& out, const TensorView& ref);
// Max absolute LSE difference over [H, N] views; a row the reference marks
// -inf must be -inf exactly, else the result is +inf.
double lse_error(const TensorView& lse, const TensorView& ref);

// docs/contract.md §6 tolerances against the fp64 reference.
double out_tolerance(DType dtype);
double lse_tolerance(DType dtype);

// Inputs and metadata of one prefill step on the host.
struct Step {
  PrefillMetadata metadata;
  HostTensor q, k, v;                        // [Nq, H, dqk], [Nk, H, dqk], [Nk, H, V]
  std::vector<HostTensor> chunk_k, chunk_v;  // one per context chunk
};
// Random operands for `metadata` (chunks included). q is strided (row
// padding) so that backends are seen to honour strides.
Step make_step(std::mt19937_64& rng, const BackendParams& params, PrefillMetadata metadata);

// Runs `backend` and REFERENCE over `step` (new tokens with a caller-given
// poisoned out, new tokens with library-allocated outputs, and a whole
// run_prefill_step with the chunks) and checks every result.
void expect_matches_reference(PrefillBackend& backend, const BackendParams& params, float scale, const Step& step);

// What a plugin load may change: every member's override (entry name or
// none), the named factories, the loaded plugins.
struct RegistrySnapshot {
  std::vector<std::string> members;
  std::vector<std::string> factories;
  std::vector<std::string> plugins;
  friend bool operator==(const RegistrySnapshot&, const RegistrySnapshot&) = default;
};
RegistrySnapshot snapshot();
std::ostream& operator<<(std::ostream& os, const RegistrySnapshot& snapshot);

// Sets (or unsets, with nullopt) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // Writes `text` to `name` inside the directory; returns its path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

// The message of the Error(category) `fn` raises; fails the test otherwise.
template <class Fn>
std::string error_of(Fn&& fn, ErrorCategory category) {
  try {
    fn();
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), category) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no mla::Error was raised";
  return {};
}

}  // namespace mla::plugin_test
