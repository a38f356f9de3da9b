// Backend selection (docs/contract.md §10). Nothing here depends on which backends
// were compiled: a compiled-out backend is a candidate like any other, and its
// description says why it is not available.
#include "mla/selector.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "mla/backend/registration.hpp"
#include "mla/backend/registry.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "registry/registry_generation.hpp"

namespace mla {
namespace {

// Availability as validate() judges it, for reports: the build first, then
// whether the build carries code for this device (asked only of a device the
// backend supports).
Availability availability_of(const BackendDescription& description, const DeviceCapability& platform) {
  Availability availability = description.availability ? description.availability() : Availability{};
  if (availability.available && description.device_availability &&
      (!description.supports_capability || description.supports_capability(platform))) {
    availability = description.device_availability(platform);
  }
  return availability;
}

// "[a, b]"
std::string format_reasons(const std::vector<std::string>& reasons) {
  std::string text = "[";
  for (std::size_t i = 0; i < reasons.size(); ++i) text += (i == 0 ? "" : ", ") + reasons[i];
  return text + "]";
}

// "{A: [...], B: [...]}"
std::string format_walk(const std::vector<CandidateReport>& walk) {
  std::string text = "{";
  for (std::size_t i = 0; i < walk.size(); ++i) {
    text += (i == 0 ? "" : ", ") + walk[i].name + ": " + format_reasons(walk[i].reasons);
  }
  return text + "}";
}

std::string capability_text(int value) { return std::to_string(value / 10) + "." + std::to_string(value % 10); }

// "nvidia 8.0+", "amd 9.0-9.5", "nvidia up to 7.5", "host". Built by appending:
// GCC 12 at -O3 reports a false -Wrestrict on `"literal" + std::string`.
std::string describe_rule(const PriorityRule& rule) {
  std::string text(vendor_name(rule.vendor));
  if (rule.min_capability) text.append(" ").append(capability_text(*rule.min_capability));
  if (rule.min_capability && rule.max_capability) {
    text.append("-").append(capability_text(*rule.max_capability));
  } else if (rule.min_capability) {
    text.append("+");
  } else if (rule.max_capability) {
    text.append(" up to ").append(capability_text(*rule.max_capability));
  }
  if (!rule.origin.file.empty()) text.append(" (").append(rule.origin.describe()).append(")");
  return text;
}

int priority_of(const PriorityRule* rule, std::string_view name) {
  if (rule == nullptr) return -1;
  const auto found = std::find(rule->backends.begin(), rule->backends.end(), name);
  return found == rule->backends.end() ? -1 : static_cast<int>(found - rule->backends.begin());
}

// The effective explicit choice: an API argument beats the configuration
// (which already holds YAML and MLA_PREFILL_BACKEND); "auto" means none.
struct Choice {
  std::optional<std::string> name;
  std::string origin;
};

Choice effective_choice(const Config& config, const std::optional<std::string>& explicit_backend) {
  if (explicit_backend) {
    if (*explicit_backend == "auto") return {};
    return {*explicit_backend, "API"};
  }
  if (config.backend == "auto") return {};
  return {config.backend, config.backend_origin.describe()};
}

std::string cache_key(const SelectorConfig& request, const DeviceCapability& platform, const Choice& choice) {
  std::string key(vendor_name(platform.vendor));
  key.append("|")
      .append(platform.capability_string())
      .append("|")
      .append(platform.capability_known ? platform.arch : "");
  key.append("|").append(dtype_name(request.dtype)).append("|").append(to_string(request.dims));
  if (choice.name) key.append("|").append(choice.origin).append("=").append(*choice.name);
  return key;
}

// (1) Capability unknown: nothing to validate against, so the configured
// default is used as it is.
Selection select_default(const Config& config, const DeviceCapability& platform, const Choice& choice) {
  auto& registry = mla_prefill_registry();
  Selection selection;
  selection.platform = platform;
  selection.kind = registry.parse(config.default_backend);
  selection.name = config.default_backend;
  selection.entry = registry.resolve(selection.kind);
  selection.why =
      "capability of the " + std::string(vendor_name(platform.vendor)) + " device unknown: configured default_backend";
  selection.walk.push_back({selection.name, availability_of(selection.entry.description, platform), {}, -1});
  if (choice.name) {
    log(LogLevel::warn, "Explicit MLA prefill backend " + *choice.name + " (from " + choice.origin +
                            ") is ignored because the device capability is unknown.");
  }
  log(LogLevel::info,
      "Device capability not available, using " + selection.name + " MLA prefill backend (default_backend).");
  return selection;
}

// (2) Explicit choice: validated, never silently replaced by another backend.
Selection select_explicit(const SelectorConfig& request, const DeviceCapability& platform, const Choice& choice,
                          const PriorityRule* rule) {
  auto& registry = mla_prefill_registry();
  Selection selection;
  selection.platform = platform;
  selection.kind = registry.parse(*choice.name);
  selection.name = std::string(MlaPrefillRegistry::name(selection.kind));
  selection.entry = registry.resolve(selection.kind);
  std::vector<std::string> reasons = validate(selection.entry.description, platform, request);
  selection.walk.push_back({selection.name, availability_of(selection.entry.description, platform), reasons,
                            priority_of(rule, selection.name)});
  if (!reasons.empty()) {
    raise(ErrorCategory::selection, "Selected MLA prefill backend " + selection.name +
                                        " is not valid for this configuration. Reason: " + format_reasons(reasons) +
                                        " (chosen by " + choice.origin + ")");
  }
  selection.why = "explicit choice from " + choice.origin;
  log(LogLevel::info, "Using " + selection.name + " MLA prefill backend.");
  return selection;
}

// (3) Auto: the first backend of the platform's list with no reasons;
// (4) none: an error with every candidate's reasons.
Selection select_auto(const SelectorConfig& request, const DeviceCapability& platform, const PriorityRule* rule) {
  auto& registry = mla_prefill_registry();
  Selection selection;
  selection.platform = platform;
  static const std::vector<std::string> no_candidates;
  for (const std::string& name : rule != nullptr ? rule->backends : no_candidates) {
    const MlaPrefillBackendKind kind = registry.parse(name);
    CandidateReport candidate{name, {}, {}, priority_of(rule, name)};
    BackendEntry entry;
    try {
      entry = registry.resolve(kind);
      candidate.availability = availability_of(entry.description, platform);
      candidate.reasons = validate(entry.description, platform, request);
    } catch (const Error& error) {
      // An unregistered CUSTOM in a priority list is a reason to move on, as
      // vLLM treats a backend that fails to import.
      if (error.category() != ErrorCategory::not_found) throw;
      candidate.availability = {false, "not registered"};
      candidate.reasons = {error.what()};
    }
    selection.walk.push_back(candidate);
    if (!candidate.reasons.empty()) continue;

    selection.kind = kind;
    selection.name = name;
    selection.entry = std::move(entry);
    selection.why = "first valid in the priority list for " + describe_rule(*rule);
    if (selection.walk.size() > 1) {
      const std::vector<CandidateReport> refused(selection.walk.begin(), selection.walk.end() - 1);
      log(LogLevel::debug, "Some MLA prefill backends are not valid with " + to_string(request) +
                               ". Reasons: " + format_walk(refused) + ".");
    }
    log(LogLevel::info, "Using " + selection.name + " MLA prefill backend.");
    return selection;
  }
  std::string message = "No valid MLA prefill backend found with " + to_string(request) + " on " + platform.describe() +
                        ". Reasons: " + format_walk(selection.walk) + ".";
  if (rule == nullptr) message += " No priority rule of the configuration matches this platform.";
  raise(ErrorCategory::selection, message);
}

}  // namespace

struct Selector::Cache {
  std::mutex mutex;
  std::uint64_t generation = 0;  // registry generation the entries were chosen under
  std::map<std::string, Selection> entries;
};

void configure(const Config& config) {
  if (config.log_level) set_log_level(*config.log_level);
  // Plugins first: they may define the factories that overrides name.
  for (const std::string& plugin : config.plugins) load_plugin(plugin);
  auto& registry = mla_prefill_registry();
  // Every override is resolved before any is bound, so a bad one binds none.
  std::vector<std::pair<MlaPrefillBackendKind, BackendEntry>> bindings;
  for (const auto& [member, factory] : config.overrides) {
    const MlaPrefillBackendKind kind = registry.parse(member);
    std::optional<BackendEntry> entry = find_named_factory(factory);
    if (!entry) {
      std::string known;
      for (const std::string& name : named_factory_names()) known += (known.empty() ? "" : ", ") + name;
      raise(ErrorCategory::config,
            "Override " + member + ": " + factory +
                " names no registered factory (is its plugin loaded?). Known factories: " + known);
    }
    bindings.emplace_back(kind, *std::move(entry));
  }
  for (auto& [kind, entry] : bindings) registry.register_backend(kind, std::move(entry), RegisterMode::replace);
}

Queue make_queue(const Selection& selection, int device_index) {
  try {
    return make_queue(selection.entry.description, device_index);
  } catch (const Error& error) {
    if (!selection.platform.simulated) throw;
    raise(error.category(), std::string(error.what()) + " (the platform " + selection.platform.describe() +
                                " is only simulated by MLA_PLATFORM)");
  }
}

Selector::Selector(Config config) : config_(std::move(config)), cache_(std::make_shared<Cache>()) {}

Selection Selector::select(const SelectorConfig& request, const DeviceCapability& platform,
                           const std::optional<std::string>& explicit_backend) {
  const Choice choice = effective_choice(config_, explicit_backend);
  const std::string key = cache_key(request, platform, choice);
  const std::uint64_t generation = detail::registry_generation();
  {
    std::lock_guard lock(cache_->mutex);
    // A registration since the entries were cached may have replaced the
    // entry they hold; vLLM's functools.cache would keep serving the old one.
    if (cache_->generation != generation) {
      cache_->entries.clear();
      cache_->generation = generation;
    }
    if (auto found = cache_->entries.find(key); found != cache_->entries.end()) {
      Selection hit = found->second;
      hit.platform = platform;
      return hit;
    }
  }

  const PriorityRule* rule = config_.rule_for(platform);
  Selection selection = !platform.capability_known ? select_default(config_, platform, choice)
                        : choice.name              ? select_explicit(request, platform, choice, rule)
                                                   : select_auto(request, platform, rule);
  selection.request = request;

  std::lock_guard lock(cache_->mutex);
  if (cache_->generation == generation) cache_->entries.emplace(key, selection);
  return selection;
}

std::vector<CandidateReport> Selector::report(const SelectorConfig& request, const DeviceCapability& platform) const {
  auto& registry = mla_prefill_registry();
  const PriorityRule* rule = config_.rule_for(platform);
  std::vector<CandidateReport> reports;
  for (const MlaPrefillBackendKind kind : MlaPrefillRegistry::members()) {
    if (kind == MlaPrefillBackendKind::CUSTOM && !registry.is_overridden(kind)) continue;
    const std::string name(MlaPrefillRegistry::name(kind));
    BackendEntry entry;
    try {
      entry = registry.resolve(kind);
    } catch (const Error& error) {
      // CUSTOM cleared by another thread since is_overridden(): not registered.
      if (error.category() != ErrorCategory::not_found) throw;
      continue;
    }
    reports.push_back({name, availability_of(entry.description, platform),
                       validate(entry.description, platform, request), priority_of(rule, name)});
  }
  return reports;
}

std::unique_ptr<PrefillBackend> Selector::create(const Selection& selection, const BackendParams& params) const {
  if (!selection.entry.factory) {
    raise(ErrorCategory::invalid_argument, "Selection of " + (selection.name.empty() ? "no backend" : selection.name) +
                                               " holds no factory; pass a Selection returned by select()");
  }
  const SelectorConfig asked{params.dtype, params.dims};
  if (asked != selection.request) {
    raise(ErrorCategory::invalid_argument, "Selection of " + selection.name + " was made for " +
                                               to_string(selection.request) + " but the params ask for " +
                                               to_string(asked) + "; select again for them");
  }
  std::unique_ptr<PrefillBackend> backend = selection.entry.factory(params);
  if (!backend) raise(ErrorCategory::internal, "The factory of " + selection.name + " returned no backend");
  return backend;
}

void Selector::clear_cache() {
  std::lock_guard lock(cache_->mutex);
  cache_->entries.clear();
}

ChosenBackend choose_backend(Selector& selector, const BackendParams& params, const DeviceCapability& platform) {
  Selection selection = selector.select(SelectorConfig{params.dtype, params.dims}, platform);
  std::unique_ptr<PrefillBackend> backend = selector.create(selection, params);
  Queue queue = make_queue(selection);
  return {std::move(selection), std::move(backend), std::move(queue)};
}

}  // namespace mla
