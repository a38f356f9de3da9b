// Fuzzes a YAML configuration through the path a user's file takes:
// resolve_config(file), then the plugin path expansion of every `plugins:`
// entry. Only mla::Error may come out; any other exception, a crash, a leak
// or undefined behaviour is a finding. Plugins are never loaded: that would
// dlopen whatever file the fuzzer names.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "mla/backend/registration.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/selector.hpp"

namespace {

std::string config_path;

void remove_config_file() { std::remove(config_path.c_str()); }

// One file per process, rewritten for every input: the real reader opens a
// path, and relative plugin paths resolve against its folder.
void set_up_once() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/mla-fuzz-config-XXXXXX.yaml";
  const int fd = ::mkstemps(pattern.data(), 5);
  if (fd < 0) {
    std::perror("mkstemps");
    std::abort();
  }
  ::close(fd);
  config_path = pattern;
  std::atexit(remove_config_file);

  // Fixed environment, so every input meets the same layers: ${MLA_PLUGIN_DIR}
  // expands, $MLA_PLUGINS adds entries after the file's, and no other
  // configuration or backend choice comes from outside.
  ::setenv("MLA_PLUGIN_DIR", "/nonexistent/mla-fuzz/plugins", 1);
  ::setenv("MLA_PLUGINS", "env_a.so::${MLA_PLUGIN_DIR}/env_b.so:${HOME}/env_c.so", 1);
  ::unsetenv("MLA_CONFIG");
  ::unsetenv("MLA_PREFILL_BACKEND");
}

// Overwritten in place and cut to size: ext4 flushes a file to disk when it is
// closed after a truncation to zero (O_TRUNC), which made every input wait
// for the disk (400 inputs a second instead of thousands).
void write_config_file(const std::uint8_t* data, std::size_t size) {
  const int fd = ::open(config_path.c_str(), O_WRONLY);
  bool ok = fd >= 0;
  for (std::size_t done = 0; ok && done < size;) {
    const ssize_t written = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    ok = written > 0;
    if (ok) done += static_cast<std::size_t>(written);
  }
  ok = ok && ::ftruncate(fd, static_cast<off_t>(size)) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    std::perror(config_path.c_str());
    std::abort();  // the harness, not the library, failed
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool ready = (set_up_once(), true);
  (void)ready;
  write_config_file(data, size);
  mla::Config config;
  try {
    config = mla::resolve_config(config_path);
  } catch (const mla::Error&) {
    return 0;
  }
  // Each entry on its own: one bad ${...} must not hide the others.
  for (const std::string& plugin : config.plugins) {
    try {
      (void)mla::expand_plugin_path(plugin);
    } catch (const mla::Error&) {
    }
  }
  // The selector's lookups on what was read; pure, nothing is loaded.
  for (const auto& [vendor, major] :
       {std::pair{mla::Vendor::host, 0}, {mla::Vendor::nvidia, 9}, {mla::Vendor::amd, 9}}) {
    mla::DeviceCapability platform;
    platform.vendor = vendor;
    platform.major = major;
    (void)config.rule_for(platform);
  }
  return 0;
}
