// Placeholder bodies of the sm_90 emulation API (simt/hopper.hpp): each
// refuses with a clear message until its emulation lands.
#include <string>

#include "mla/error.hpp"
#include "simt/hopper.hpp"

namespace mla::simt {
namespace {

[[noreturn]] void not_emulated(const char* what, const Site& site) {
  raise(ErrorCategory::not_supported, std::string("GPU emulator: ") + what + " at " + site.file + ":" +
                                          std::to_string(site.line) + " is not emulated yet");
}

}  // namespace

std::uint32_t shared_address_of(const void*, Site site) { not_emulated("shared_address_of", site); }
void mbarrier_init(std::uint32_t, unsigned, Site site) { not_emulated("mbarrier_init", site); }
void fence_barrier_init(Site site) { not_emulated("fence_barrier_init", site); }
void mbarrier_arrive(std::uint32_t, unsigned, Site site) { not_emulated("mbarrier_arrive", site); }
void mbarrier_expect_tx(std::uint32_t, unsigned, Site site) { not_emulated("mbarrier_expect_tx", site); }
bool mbarrier_try_wait_parity(std::uint32_t, unsigned, Site site) { not_emulated("mbarrier_try_wait_parity", site); }
void mbarrier_wait_parity(std::uint32_t, unsigned, Site site) { not_emulated("mbarrier_wait_parity", site); }
void prefetch_tensor_map(const cuda_flash::sm90::TensorMap&, Site site) { not_emulated("prefetch_tensor_map", site); }
void tma_load(std::uint32_t, const cuda_flash::sm90::TensorMap&, std::uint32_t, const int*, int, Site site) {
  not_emulated("tma_load", site);
}
void tma_store(const cuda_flash::sm90::TensorMap&, std::uint32_t, const int*, int, Site site) {
  not_emulated("tma_store", site);
}
void tma_store_commit(Site site) { not_emulated("tma_store_commit", site); }
void tma_store_wait(int, Site site) { not_emulated("tma_store_wait", site); }
void fence_proxy_async(Site site) { not_emulated("fence_proxy_async", site); }
void wgmma_fence(Site site) { not_emulated("wgmma_fence", site); }
void wgmma_commit(Site site) { not_emulated("wgmma_commit", site); }
void wgmma_wait(int, Site site) { not_emulated("wgmma_wait", site); }
void wgmma(Element, int, bool, float*, const std::uint32_t*, std::uint64_t, std::uint64_t, int, Site site) {
  not_emulated("wgmma", site);
}
void named_barrier(unsigned, unsigned, bool, Site site) { not_emulated("named_barrier", site); }
bool elect_one(Site site) { not_emulated("elect_one", site); }
void setmaxnreg(bool, int, Site site) { not_emulated("setmaxnreg", site); }
void stmatrix(bool, std::uint32_t, const std::uint32_t (&)[4], Site site) { not_emulated("stmatrix", site); }
int atomic_add(int*, int, Site site) { not_emulated("atomic_add", site); }

}  // namespace mla::simt
