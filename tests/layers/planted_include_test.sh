#!/usr/bin/env bash
# Shows that ci/check-layers catches what it is for: a copy of core/,
# platform/ and the shipping GPU code passes, then each planted include makes
# it fail and name the file.
# Usage: planted_include_test.sh <check-layers> <source root> <scratch folder>
set -euo pipefail
check=$1 source=$2 scratch=$3

fresh_copy() {
  rm -rf "$scratch"
  mkdir -p "$scratch"
  cp -r "$source/core" "$source/platform" "$scratch/"
  mkdir -p "$scratch/backends"
  cp -r "$source/backends/cuda" "$source/backends/hip" "$source/backends/cuda_hip" "$scratch/backends/"
}

# expect_failure <file> <include line> <text the report must contain>
expect_failure() {
  local file=$1 line=$2 wanted=$3 output
  fresh_copy
  printf '%s\n' "$line" >>"$scratch/$file"
  if output=$("$check" "$scratch" 2>&1); then
    echo "FAIL: check-layers passed with '$line' planted in $file"
    exit 1
  fi
  if [[ $output != *"$file"* || $output != *"$wanted"* ]]; then
    echo "FAIL: the report does not name $file and '$wanted':"
    echo "$output"
    exit 1
  fi
  echo "caught: $output"
}

fresh_copy
"$check" "$scratch" >/dev/null || { echo "FAIL: the unmodified copy does not pass"; exit 1; }

expect_failure core/src/core/queue.cpp '#include <cuda_runtime.h>' "core includes a vendor header"
expect_failure core/include/mla/tensor.hpp '#include <hip/hip_runtime.h>' "core includes a vendor header"
expect_failure core/src/config/config.cpp '#include <Kokkos_Core.hpp>' "core includes a vendor header"
expect_failure core/src/selector/selector.cpp '#include "mla/platform.hpp"' "core includes the platform layer"
expect_failure core/src/registry/registry.cpp '#include "builtin_entries.hpp"' "core includes the backends layer"
expect_failure core/include/mla/backend/latents.hpp '#include "mla/detail/numeric.hpp"' "an installed header includes an internal one"
expect_failure core/include/mla/plugin/abi.h '#include "mla/tensor.hpp"' "the plugin C ABI includes a header of the library"
expect_failure platform/src/platform.cpp '#include "cuda_hip/gpu_runtime.hpp"' "platform includes the backends layer"
expect_failure backends/cuda/sm80_primitives.cuh '#include "simt/sm80.hpp"' "shipping GPU code includes the emulator"
expect_failure backends/cuda_hip/gpu_device.hpp '#if defined(MLA_SIMT_EMULATION)' "shipping GPU code branches on the emulator"
expect_failure backends/cuda_hip/gpu_flash_backend.hpp '  mutable int calls_ = 0;' "a backend keeps per-call state"
expect_failure core/src/plugin/plugin_backend.cpp '  std::optional<Queue> prepared_queue_;' "a backend keeps per-call state"
rm -rf "$scratch"
echo "planted includes: all caught"
