// The sm_90 probes under the GPU emulator: every probe reproduces what the
// host computes from the PTX ISA (and, once a GPU wrote it, the golden data of
// ci/gpu-check) in both schedules, and every deliberately broken probe is
// reported as a hazard that names the thread and the address.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "mla/error.hpp"
#include "simt/emulator.hpp"
#include "sm90_probe_cases.hpp"

namespace mla::sm90_probes {

// The kernel's extern __shared__ array: an anchor under the emulator.
alignas(1024) unsigned char probe_shared[simt::shared_anchor_bytes];

namespace {

using cuda_flash::sm90::TensorMap;

std::vector<unsigned char> run_emulated(const ProbeCase& c, std::size_t alignment = 1024) {
  std::vector<std::uint16_t> a = c.a, b = c.b;
  std::vector<unsigned char> out(c.out_bytes, 0xff);
  int counter = 0;
  Params p = c.params;
  p.a_frag = c.a_frag.data();
  p.out = out.data();
  p.counter = &counter;
  TensorMap maps[3] = {};
  for (int i = 0; i < 3; ++i) {
    const MapSpec& m = c.maps[i];
    if (m.buffer == Buffer::none) continue;
    cuda_flash::sm90::TensorMapSpec spec = m.spec;
    const unsigned char* base = m.buffer == Buffer::a   ? reinterpret_cast<const unsigned char*>(a.data())
                                : m.buffer == Buffer::b ? reinterpret_cast<const unsigned char*>(b.data())
                                                        : out.data();
    spec.base = base + m.offset;
    maps[i] = cuda_flash::sm90::make_tensor_map(spec);
  }
  simt::LaunchConfig config;
  config.kernel = "sm90_probe " + c.name;
  config.block.x = c.threads;
  config.dynamic_shared_bytes = shared_bytes;
  config.dynamic_shared_symbol = probe_shared;
  config.dynamic_shared_alignment = alignment;
  simt::launch(config, [&] { sm90_probe(maps[0], maps[1], maps[2], p); });
  return out;
}

const std::string golden_path = std::string(MLA_SOURCE_DIR) + "/tests/hopper/golden/sm90_probes.txt";

// The golden file ci/gpu-check writes on a GPU: name -> line.
std::map<std::string, std::string> golden_data(std::string& note, const std::string& path = golden_path) {
  std::ifstream file(path);
  std::map<std::string, std::string> lines;
  if (!file) {
    note = "no golden data yet: " + path + " is absent (ci/gpu-check build-test writes it on an sm_90 GPU)";
    return lines;
  }
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    lines[line.substr(0, line.find(' '))] = line;
  }
  note = "golden data from " + path + ": " + std::to_string(lines.size()) + " probes";
  return lines;
}

// "" when `line` agrees with the golden data or there is none for its probe.
std::string golden_mismatch(const std::map<std::string, std::string>& golden, const std::string& name,
                            const std::string& line) {
  const auto it = golden.find(name);
  if (it == golden.end() || it->second == line) return "";
  return "the emulator's " + name + " disagrees with the GPU's golden data:\n  emulator: " + line +
         "\n  GPU:      " + it->second;
}

TEST(GoldenData, AnAbsentFileMeansNoGoldenDataYet) {
  std::string note;
  EXPECT_TRUE(golden_data(note, golden_path + ".absent").empty());
  EXPECT_NE(note.find("no golden data yet"), std::string::npos) << note;
}

TEST(GoldenData, ADisagreementWithTheGpuIsReported) {
  const std::string path = std::string(MLA_BINARY_DIR) + "/sm90_probes_golden_test.txt";
  const std::vector<ProbeCase> all = probe_cases();
  const ProbeCase& c = probe_case(all, "stmatrix");
  std::vector<unsigned char> tampered = c.expected;
  tampered[6] ^= 1;
  {
    std::ofstream file(path);
    file << "# written by the test\n" << golden_line(c.name, tampered) << "\n";
  }
  std::string note;
  const std::map<std::string, std::string> golden = golden_data(note, path);
  std::remove(path.c_str());
  ASSERT_EQ(golden.size(), 1u) << note;
  EXPECT_EQ(golden_mismatch(golden, c.name, golden_line(c.name, tampered)), "");
  EXPECT_NE(golden_mismatch(golden, c.name, golden_line(c.name, run_emulated(c))).find("disagrees"), std::string::npos);
  EXPECT_EQ(golden_mismatch(golden, "tma_box_swizzle0", "anything"), "");
}

class Probes : public ::testing::TestWithParam<std::string> {};

TEST_P(Probes, MatchTheIsaAndTheGoldenData) {
  const std::vector<ProbeCase> all = probe_cases();
  const ProbeCase& c = probe_case(all, GetParam());
  std::string note;
  const std::map<std::string, std::string> golden = golden_data(note);
  std::cout << "[ golden   ] " << note << "\n";
  for (const simt::Schedule schedule : {simt::Schedule::forward, simt::Schedule::reverse}) {
    simt::set_schedule(schedule);
    std::vector<unsigned char> out;
    try {
      out = run_emulated(c);
    } catch (const Error& error) {
      simt::set_schedule(simt::Schedule::forward);
      FAIL() << error.what();
    }
    const std::string line = golden_line(c.name, out);
    EXPECT_EQ(line, golden_line(c.name, c.expected)) << "schedule " << static_cast<int>(schedule);
    EXPECT_EQ(golden_mismatch(golden, c.name, line), "");
  }
  simt::set_schedule(simt::Schedule::forward);
}

std::vector<std::string> probe_names() {
  std::vector<std::string> names;
  for (const ProbeCase& c : probe_cases()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Sm90, Probes, ::testing::ValuesIn(probe_names()),
                         [](const ::testing::TestParamInfo<std::string>& param) { return param.param; });

// The emulator's message for a broken probe ("" if it ran clean).
std::string failure_of(const ProbeCase& c, std::size_t alignment = 1024) {
  try {
    run_emulated(c, alignment);
  } catch (const Error& error) {
    EXPECT_EQ(error.category(), ErrorCategory::device) << error.what();
    return error.what();
  }
  return "";
}

struct Broken {
  const char* name;
  const char* probe;
  Defect defect;
  const char* needle;
};

const Broken broken_probes[] = {
    {"wrong_parity", "wgmma_ss_swizzle128_b_k_major", Defect::wrong_parity, "reads a TMA box still in flight"},
    {"expect_tx_one_box_too_many", "wgmma_ss_swizzle64_b_k_major", Defect::expect_tx_extra_box,
     "no TMA copy in flight will bring them"},
    {"expect_tx_one_box_short", "wgmma_ss_swizzle64_b_k_major", Defect::expect_tx_short_box,
     "transaction-count underflow"},
    {"missing_fence_proxy_async", "stmatrix", Defect::missing_proxy_fence, "no fence.proxy.async after it"},
    {"accumulators_read_before_wait", "wgmma_ss_swizzle0_b_mn_major", Defect::accumulators_before_wait,
     "read before the wgmma.wait_group"},
    {"accumulators_written_before_wait", "wgmma_ss_swizzle32_b_k_major", Defect::accumulators_written_in_flight,
     "was written while its wgmma was in flight"},
    {"swizzle_mismatch", "wgmma_ss_swizzle128_b_k_major", Defect::swizzle_mismatch,
     "the tensor map and the descriptor disagree"},
    {"mbarrier_over_arrival", "wgmma_ss_swizzle128_b_mn_major", Defect::over_arrival, "(over-arrival)"},
    {"stale_phase", "wgmma_ss_swizzle32_b_mn_major", Defect::stale_phase, "a stale phase"},
    {"operand_overwritten_in_flight", "wgmma_ss_swizzle128_b_k_major", Defect::overwrite_in_flight_operand,
     "still reads"},
    {"try_wait_spins_forever", "mbarrier_pingpong", Defect::spin_forever, "spins on mbarrier.try_wait"},
    {"mbarrier_used_before_init", "wgmma_ss_swizzle0_b_k_major", Defect::use_before_init, "never initialised"},
    {"e4m3_swizzle_mismatch", "wgmma_ss_e4m3_swizzle128", Defect::swizzle_mismatch,
     "the tensor map and the descriptor disagree"},
    {"e4m3_accumulators_read_before_wait", "wgmma_rs_e4m3_swizzle0", Defect::accumulators_before_wait,
     "read before the wgmma.wait_group"},
};

class BrokenProbes : public ::testing::TestWithParam<Broken> {};

TEST_P(BrokenProbes, AreReportedWithThreadAndAddress) {
  const std::vector<ProbeCase> all = probe_cases();
  ProbeCase c = probe_case(all, GetParam().probe);
  c.params.defect = GetParam().defect;
  const std::string message = failure_of(c);
  std::cout << "[ hazard   ] " << message << "\n";
  EXPECT_NE(message.find(GetParam().needle), std::string::npos) << message;
  EXPECT_NE(message.find("thread "), std::string::npos) << message;
  EXPECT_TRUE(message.find(" 0x") != std::string::npos || message.find("address 0x") != std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Sm90, BrokenProbes, ::testing::ValuesIn(broken_probes),
                         [](const ::testing::TestParamInfo<Broken>& param) { return std::string(param.param.name); });

// The e4m3 probes can tell a wrong 8-bit layout: the same bytes through the
// bf16 instruction, or an A fragment with two bytes of a register swapped
// (the byte permute an fp8 P fragment needs), give other sums.
TEST(Fp8Probes, TellTheBf16InstructionAndAPermutedFragmentApart) {
  const std::vector<ProbeCase> all = probe_cases();
  ProbeCase as_bf16 = probe_case(all, "wgmma_ss_e4m3_swizzle128");
  as_bf16.params.fp8 = 0;
  EXPECT_NE(run_emulated(as_bf16), as_bf16.expected);
  ProbeCase permuted = probe_case(all, "wgmma_rs_e4m3_swizzle128");
  for (std::uint32_t& reg : permuted.a_frag) reg = (reg & 0xffff0000u) | ((reg & 0xffu) << 8) | ((reg >> 8) & 0xffu);
  EXPECT_NE(run_emulated(permuted), permuted.expected);
}

// Shared memory aligned to exactly what the launch declares: a 128-byte
// declaration cannot hold a 128-byte-swizzled tile at offset 0.
TEST(BrokenProbes, SwizzledTileInUnderalignedSharedMemoryIsReported) {
  const std::vector<ProbeCase> all = probe_cases();
  const std::string message = failure_of(probe_case(all, "wgmma_ss_swizzle128_b_k_major"), 128);
  std::cout << "[ hazard   ] " << message << "\n";
  EXPECT_NE(message.find("1024-byte swizzle repeat"), std::string::npos) << message;
  EXPECT_NE(message.find("shared address 0x80"), std::string::npos) << message;
}

}  // namespace
}  // namespace mla::sm90_probes
