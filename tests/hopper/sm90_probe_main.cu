// mla-sm90-probes: runs the sm_90 probes (sm90_probes.cuh) on the GPU and
// prints one golden-data line per probe (its name and output words); exits 1
// when a probe's output differs from what the host computes from the PTX ISA,
// 2 when no sm_90 device is present. ci/gpu-check writes the lines to
// tests/hopper/golden/sm90_probes.txt, which the emulator's probe test reads.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>
#include <vector>

#include "mla/error.hpp"
#include "sm90_probe_cases.hpp"

namespace mla::sm90_probes {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    raise(ErrorCategory::device, std::string("mla-sm90-probes: ") + what + ": " + cudaGetErrorString(status));
  }
}

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* device = nullptr;
  const std::size_t bytes = host.size() * sizeof(T);
  check(cudaMalloc(reinterpret_cast<void**>(&device), bytes > 0 ? bytes : 16), "cudaMalloc");
  if (bytes > 0) check(cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  return device;
}

std::vector<unsigned char> run_on_gpu(const ProbeCase& c) {
  std::uint16_t* a = device_copy(c.a);
  std::uint16_t* b = device_copy(c.b);
  std::uint32_t* frag = device_copy(c.a_frag);
  unsigned char* out = device_copy(std::vector<unsigned char>(c.out_bytes, 0xff));
  int* counter = device_copy(std::vector<int>{0});
  Params p = c.params;
  p.a_frag = frag;
  p.out = out;
  p.counter = counter;
  cuda_flash::sm90::TensorMap maps[3] = {};
  for (int i = 0; i < 3; ++i) {
    const MapSpec& m = c.maps[i];
    if (m.buffer == Buffer::none) continue;
    cuda_flash::sm90::TensorMapSpec spec = m.spec;
    const unsigned char* base = m.buffer == Buffer::a   ? reinterpret_cast<const unsigned char*>(a)
                                : m.buffer == Buffer::b ? reinterpret_cast<const unsigned char*>(b)
                                                        : out;
    spec.base = base + m.offset;
    maps[i] = cuda_flash::sm90::make_tensor_map(spec);
  }
  sm90_probe<<<1, c.threads, shared_bytes>>>(maps[0], maps[1], maps[2], p);
  check(cudaGetLastError(), "launching sm90_probe");
  check(cudaDeviceSynchronize(), "running sm90_probe");
  std::vector<unsigned char> result(c.out_bytes);
  check(cudaMemcpy(result.data(), out, c.out_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  for (void* ptr : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(frag), static_cast<void*>(out),
                    static_cast<void*>(counter)}) {
    check(cudaFree(ptr), "cudaFree");
  }
  return result;
}

int run() {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess ||
      prop.major != 9) {
    std::fprintf(stderr, "mla-sm90-probes: no sm_90 GPU (the probes need Hopper)\n");
    return 2;
  }
  std::printf("# sm_90 probe outputs from %s (mla-sm90-probes); read by test_sm90_probes\n", prop.name);
  int failures = 0;
  for (const ProbeCase& c : probe_cases()) {
    const std::vector<unsigned char> out = run_on_gpu(c);
    std::printf("%s\n", golden_line(c.name, out).c_str());
    if (out != c.expected) {
      std::fprintf(stderr, "mla-sm90-probes: %s differs from the ISA's expected result\n", c.name.c_str());
      ++failures;
    }
  }
  std::fprintf(stderr, "mla-sm90-probes: %d of %zu probes match the ISA\n",
               static_cast<int>(probe_cases().size()) - failures, probe_cases().size());
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mla::sm90_probes

int main() {
  try {
    return mla::sm90_probes::run();
  } catch (const mla::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}
