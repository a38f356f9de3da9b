// The platform layer: what device this machine has (NVIDIA compute capability,
// AMD gfx arch, or the host), through the vendor runtime a build carries, or a
// simulated one from MLA_PLATFORM, and the backend chosen for it. The device
// vocabulary is core's (mla/queue.hpp); this layer sits above core and below
// the backends.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mla/backend.hpp"
#include "mla/queue.hpp"
#include "mla/selector.hpp"

namespace mla {

// Parses an MLA_PLATFORM value: "nvidia:9.0", "nvidia:10.0", "amd:gfx942",
// "host", or "nvidia" / "amd" alone (capability unknown). Raises
// Error(config) with the accepted forms on anything else.
DeviceCapability parse_platform(std::string_view spec);

// Real GPUs this build can see, through the CUDA runtime in CUDA builds and the
// HIP runtime in HIP builds. No GPU, no driver, or a host-only build gives an
// empty list, never an exception.
std::vector<DeviceCapability> detect_devices();

// The platform selection runs against: MLA_PLATFORM when set, else the first
// detected GPU, else the host.
DeviceCapability current_platform();

// The platform for people: describe(), plus how it was found: ", simulated by
// MLA_PLATFORM=<value>", " (no GPU in this build or on this machine)" on the
// host, or the runtime's device name in quotes.
std::string describe_platform(const DeviceCapability& platform);

// The short way in, for a program that takes the configuration as it comes:
// resolve_config() and configure() it (the process's log level, plugins and
// overrides), then choose_backend(selector, params, current_platform())
// (mla/selector.hpp). Raises what those raise, e.g.
// Error(selection) with every reason when no backend is valid here.
ChosenBackend choose_backend(const BackendParams& params);

}  // namespace mla
