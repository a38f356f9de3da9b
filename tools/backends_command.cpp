// mla-prefill backends: the platform, every backend with its availability and
// the selector's reasons, and what selection picks for the request.
//
// The command reports; it fails only when the request itself is wrong: bad
// flags or configuration, an unknown backend name, or an explicit choice
// (--backend, MLA_PREFILL_BACKEND, YAML) that cannot run here. When auto
// selection finds no valid backend, that finding is printed as the result and
// the exit status is 0.
#include <fmt/format.h>

#include <iostream>

#include "command.hpp"
#include "json_writer.hpp"
#include "mla/platform.hpp"

namespace mla::tools {
namespace {

struct BackendsOptions {
  SelectionOptions selection;
  std::string dtype = "bf16";
  std::optional<std::string> dims;
  bool json = false;
};

// What the command found out; printed as text or JSON.
struct BackendsReport {
  DeviceCapability platform;
  SelectorConfig request;
  std::vector<std::string> config_sources;
  std::vector<CandidateReport> candidates;
  bool explicit_choice = false;  // named by --backend, MLA_PREFILL_BACKEND or YAML
  std::optional<Selection> selection;
  std::string selection_error;  // when selection failed
};

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : std::string(separator)) + item;
  return text;
}

std::string priority_text(int priority) { return priority < 0 ? "-" : std::to_string(priority + 1); }

// How the backend was chosen: "explicit", "auto", or "default" when an unknown
// capability made the selector take default_backend without validation.
std::string_view selection_mode(const BackendsReport& report) {
  if (!report.selection) return report.explicit_choice ? "explicit" : "auto";
  if (!report.platform.capability_known) return "default";
  return report.explicit_choice ? "explicit" : "auto";
}

void print_text(const BackendsReport& report) {
  std::cout << fmt::format("platform:  {}\n", describe_platform(report.platform));
  std::cout << fmt::format("request:   {}\n", to_string(report.request));
  std::cout << fmt::format("config:    {}\n\n", join(report.config_sources, " < "));

  std::size_t name_width = 7;
  for (const auto& candidate : report.candidates) name_width = std::max(name_width, candidate.name.size());
  const auto row = [&](std::string_view name, std::string_view available, std::string_view valid,
                       std::string_view priority, std::string_view reasons) {
    std::cout << fmt::format("{:<{}}  {:<9}  {:<10}  {:<8}  {}\n", name, name_width, available, valid, priority,
                             reasons);
  };
  row("backend", "available", "valid here", "priority", "reasons");
  for (const auto& candidate : report.candidates) {
    row(candidate.name, candidate.availability.available ? "yes" : "no", candidate.reasons.empty() ? "yes" : "no",
        priority_text(candidate.priority), candidate.reasons.empty() ? "-" : join(candidate.reasons, "; "));
  }

  const std::string_view mode = selection_mode(report);
  if (report.selection) {
    std::cout << fmt::format("\nselected:  {} ({}: {})\n", report.selection->name, mode, report.selection->why);
  } else {
    std::cout << fmt::format("\nselected:  none ({}): {}\n", mode, report.selection_error);
  }
}

void print_json(const BackendsReport& report) {
  JsonWriter json(std::cout);
  const DeviceCapability& platform = report.platform;
  json.begin_object();
  json.key("platform").begin_object();
  json.key("vendor").value(vendor_name(platform.vendor));
  json.key("arch").value(platform.arch);
  json.key("capability").value(platform.capability_string());
  json.key("capability_known").value(platform.capability_known);
  json.key("name").value(platform.name);
  json.key("simulated").value(platform.simulated);
  json.key("description").value(describe_platform(platform));
  json.end_object();

  json.key("request").begin_object();
  json.key("dtype").value(dtype_name(report.request.dtype));
  json.key("qk_nope_head_dim").value(report.request.dims.qk_nope_head_dim);
  json.key("qk_rope_head_dim").value(report.request.dims.qk_rope_head_dim);
  json.key("v_head_dim").value(report.request.dims.v_head_dim);
  json.end_object();

  json.key("config_sources").begin_array();
  for (const std::string& source : report.config_sources) json.value(source);
  json.end_array();

  json.key("backends").begin_array();
  for (const auto& candidate : report.candidates) {
    json.begin_object();
    json.key("name").value(candidate.name);
    json.key("available").value(candidate.availability.available);
    json.key("unavailable_reason").value(candidate.availability.reason);
    json.key("valid").value(candidate.reasons.empty());
    json.key("reasons").begin_array();
    for (const std::string& reason : candidate.reasons) json.value(reason);
    json.end_array();
    json.key("priority");
    candidate.priority < 0 ? json.null() : json.value(candidate.priority + 1);
    json.end_object();
  }
  json.end_array();

  json.key("selection").begin_object();
  json.key("mode").value(selection_mode(report));
  if (report.selection) {
    json.key("backend").value(report.selection->name);
    json.key("why").value(report.selection->why);
  } else {
    json.key("backend").null();
    json.key("error").value(report.selection_error);
  }
  json.end_object();
  json.end_object();
}

int run_backends(const BackendsOptions& options) {
  BackendsReport report;
  report.request.dtype = parse_input_dtype(options.dtype, "--dtype", /*allow_fp8=*/true);
  if (options.dims) report.request.dims = parse_dims(*options.dims, "--dims");
  report.platform = current_platform();
  Selector selector = options.selection.make_selector();
  report.config_sources = selector.config().sources;
  report.candidates = selector.report(report.request, report.platform);
  report.explicit_choice = is_explicit_choice(selector);
  try {
    report.selection = selector.select(report.request, report.platform);
  } catch (const Error& error) {
    // Other categories (an unknown backend name, ...) are input errors for main().
    if (error.category() != ErrorCategory::selection) throw;
    report.selection_error = error.what();
  }

  options.json ? print_json(report) : print_text(report);
  std::cout.flush();
  if (!report.selection && report.explicit_choice) {
    // The table shows every backend; the error says why the chosen one cannot run.
    raise(ErrorCategory::selection, report.selection_error);
  }
  return exit_success;
}

}  // namespace

Command add_backends_command(CLI::App& parent) {
  auto options = std::make_shared<BackendsOptions>();
  CLI::App* app = parent.add_subcommand(
      "backends", "Show the platform, every backend with the selector's reasons, and the selected backend");
  options->selection.add_to(*app);
  app->add_option("--dtype", options->dtype, "element type of q, k, v: bf16, fp16, fp32 or fp8")->capture_default_str();
  add_optional(*app, "--dims", options->dims, "MLA dims P,R,V (default 128,64,128, DeepSeek-V3)");
  app->add_flag("--json", options->json, "print JSON instead of a table");
  return {app, [options] { return run_backends(*options); }};
}

}  // namespace mla::tools
