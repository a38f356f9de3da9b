// Backend registries and named factories. vLLM keeps its overrides in a module
// dict without locks; here every table sits behind a shared_mutex so plugins,
// configuration and selection may run on several threads at once.
#include "mla/backend/registry.hpp"

#include <array>
#include <atomic>
#include <cctype>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "mla/error.hpp"
#include "registry/registry_generation.hpp"

namespace mla {
namespace {

// Both enums have the same members; one table serves them.
#define MLA_BACKEND_MEMBER(member, entry) {Kind::member, #member},
template <class Kind>
constexpr auto member_table = std::to_array<std::pair<Kind, std::string_view>>({
#include "mla/backend/members.def"
    {Kind::CUSTOM, "CUSTOM"},
});
#undef MLA_BACKEND_MEMBER

std::atomic<std::uint64_t> generation{0};
void bump_generation() { generation.fetch_add(1, std::memory_order_acq_rel); }

std::string capitalised(std::string text) {
  if (!text.empty()) text.front() = static_cast<char>(std::toupper(static_cast<unsigned char>(text.front())));
  return text;
}

void check_entry(const BackendEntry& entry, const std::string& what) {
  if (!entry.factory) raise(ErrorCategory::invalid_argument, what + ": the entry has no factory");
}

}  // namespace

namespace detail {
std::uint64_t registry_generation() { return generation.load(std::memory_order_acquire); }
}  // namespace detail

template <class Kind>
struct BackendRegistry<Kind>::State {
  std::string label;
  std::string register_call;
  DefaultTable defaults;
  mutable std::shared_mutex mutex;
  std::map<Kind, BackendEntry> overrides;
};

template <class Kind>
BackendRegistry<Kind>::BackendRegistry(std::string label, std::string register_call, DefaultTable defaults)
    : state_(new State{std::move(label), std::move(register_call), std::move(defaults), {}, {}}) {}

template <class Kind>
BackendRegistry<Kind>::~BackendRegistry() {
  delete state_;
}

template <class Kind>
BackendEntry BackendRegistry<Kind>::resolve(Kind kind) const {
  {
    std::shared_lock lock(state_->mutex);
    if (auto found = state_->overrides.find(kind); found != state_->overrides.end()) return found->second;
  }
  // The default table is fixed at construction; calling it outside the lock
  // keeps a slow or re-entrant entry function from blocking registrations.
  std::optional<BackendEntry> entry = state_->defaults ? state_->defaults(kind) : std::nullopt;
  if (!entry) {
    raise(ErrorCategory::not_found, capitalised(state_->label) + " " + std::string(name(kind)) +
                                        " must be registered before use. Use " + state_->register_call + "(...)");
  }
  return *std::move(entry);
}

template <class Kind>
void BackendRegistry<Kind>::register_backend(Kind kind, BackendEntry entry, RegisterMode mode) {
  check_entry(entry, "registering " + state_->label + " " + std::string(name(kind)));
  std::unique_lock lock(state_->mutex);
  auto [slot, inserted] = state_->overrides.try_emplace(kind);
  if (!inserted && mode == RegisterMode::add) {
    raise(ErrorCategory::plugin, capitalised(state_->label) + " " + std::string(name(kind)) +
                                     " is already registered; register it with RegisterMode::replace to replace it");
  }
  slot->second = std::move(entry);
  bump_generation();
}

template <class Kind>
bool BackendRegistry<Kind>::is_overridden(Kind kind) const {
  std::shared_lock lock(state_->mutex);
  return state_->overrides.count(kind) != 0;
}

template <class Kind>
void BackendRegistry<Kind>::clear_override(Kind kind) {
  std::unique_lock lock(state_->mutex);
  if (state_->overrides.erase(kind) != 0) bump_generation();
}

template <class Kind>
void BackendRegistry<Kind>::clear_all_overrides() {
  std::unique_lock lock(state_->mutex);
  if (!state_->overrides.empty()) bump_generation();
  state_->overrides.clear();
}

template <class Kind>
Kind BackendRegistry<Kind>::parse(std::string_view text) const {
  for (const auto& [kind, member_name] : member_table<Kind>) {
    if (member_name == text) return kind;
  }
  std::string valid;
  for (const auto& [kind, member_name] : member_table<Kind>) {
    valid += (valid.empty() ? "" : ", ") + std::string(member_name);
  }
  raise(ErrorCategory::not_found,
        "Unknown " + state_->label + ": '" + std::string(text) + "'. Valid options are: " + valid);
}

template <class Kind>
std::string_view BackendRegistry<Kind>::name(Kind kind) {
  for (const auto& [member, member_name] : member_table<Kind>) {
    if (member == kind) return member_name;
  }
  raise(ErrorCategory::internal, "backend kind " + std::to_string(static_cast<int>(kind)) + " has no name");
}

template <class Kind>
std::vector<Kind> BackendRegistry<Kind>::members() {
  std::vector<Kind> kinds;
  for (const auto& [kind, member_name] : member_table<Kind>) kinds.push_back(kind);
  return kinds;
}

template <class Kind>
const std::string& BackendRegistry<Kind>::label() const {
  return state_->label;
}

template class BackendRegistry<MlaPrefillBackendKind>;
template class BackendRegistry<AttentionBackendKind>;

MlaPrefillRegistry& mla_prefill_registry() {
  static MlaPrefillRegistry registry("MLA prefill backend", "register_mla_prefill_backend", builtin_mla_prefill_entry);
  return registry;
}

AttentionRegistry& attention_registry() {
  static AttentionRegistry registry("attention backend", "register_attention_backend", builtin_attention_entry);
  return registry;
}

void register_mla_prefill_backend(MlaPrefillBackendKind kind, BackendEntry entry, RegisterMode mode) {
  mla_prefill_registry().register_backend(kind, std::move(entry), mode);
}

void register_attention_backend(AttentionBackendKind kind, BackendEntry entry, RegisterMode mode) {
  attention_registry().register_backend(kind, std::move(entry), mode);
}

// Named factories. The library's own backend names are answered from the
// built-in table and cannot be redefined, so a YAML override naming REFERENCE
// always means the real REFERENCE.
namespace {

struct NamedFactories {
  std::shared_mutex mutex;
  std::map<std::string, BackendEntry> entries;
};

NamedFactories& named_factories() {
  static NamedFactories factories;
  return factories;
}

std::optional<MlaPrefillBackendKind> builtin_factory_kind(const std::string& name) {
  for (const auto& [kind, member_name] : member_table<MlaPrefillBackendKind>) {
    if (kind != MlaPrefillBackendKind::CUSTOM && member_name == name) return kind;
  }
  return std::nullopt;
}

}  // namespace

void register_named_factory(const std::string& name, BackendEntry entry, RegisterMode mode) {
  if (name.empty()) raise(ErrorCategory::invalid_argument, "a named factory needs a non-empty name");
  if (builtin_factory_kind(name)) {
    raise(ErrorCategory::plugin, "Factory name '" + name + "' is a built-in backend and cannot be redefined");
  }
  check_entry(entry, "registering the factory named '" + name + "'");
  auto& factories = named_factories();
  std::unique_lock lock(factories.mutex);
  auto [slot, inserted] = factories.entries.try_emplace(name);
  if (!inserted && mode == RegisterMode::add) {
    raise(ErrorCategory::plugin,
          "A factory named '" + name + "' is already registered; register it with RegisterMode::replace to replace it");
  }
  slot->second = std::move(entry);
}

std::optional<BackendEntry> find_named_factory(const std::string& name) {
  if (const auto kind = builtin_factory_kind(name)) return builtin_mla_prefill_entry(*kind);
  auto& factories = named_factories();
  std::shared_lock lock(factories.mutex);
  if (auto found = factories.entries.find(name); found != factories.entries.end()) return found->second;
  return std::nullopt;
}

std::vector<std::string> named_factory_names() {
  std::vector<std::string> names;
  for (const auto& [kind, member_name] : member_table<MlaPrefillBackendKind>) {
    if (kind != MlaPrefillBackendKind::CUSTOM) names.emplace_back(member_name);
  }
  auto& factories = named_factories();
  std::shared_lock lock(factories.mutex);
  for (const auto& [name, entry] : factories.entries) names.push_back(name);
  return names;
}

void remove_named_factory(const std::string& name) {
  if (builtin_factory_kind(name)) {
    raise(ErrorCategory::invalid_argument, "Factory name '" + name + "' is a built-in backend and cannot be removed");
  }
  auto& factories = named_factories();
  std::unique_lock lock(factories.mutex);
  factories.entries.erase(name);
}

}  // namespace mla
