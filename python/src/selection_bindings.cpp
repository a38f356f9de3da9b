// Selection from Python: the same calls the mla-prefill command makes, with
// results as plain dicts and lists so that they print and compare easily.
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "backend_object.hpp"
#include "bindings.hpp"
#include "mla/backend/registry.hpp"
#include "mla/mla.hpp"

namespace mla::python {
namespace {

namespace py = pybind11;
using Dims = std::tuple<int, int, int>;

MlaDims dims_of(const Dims& dims) { return {std::get<0>(dims), std::get<1>(dims), std::get<2>(dims)}; }

SelectorConfig request_of(const std::string& dtype, const Dims& dims) { return {parse_dtype(dtype), dims_of(dims)}; }

DeviceCapability platform_of(const std::optional<std::string>& spec) {
  return spec ? parse_platform(*spec) : current_platform();
}

py::dict platform_dict(const DeviceCapability& platform) {
  py::dict d;
  d["vendor"] = std::string(vendor_name(platform.vendor));
  d["arch"] = platform.arch;
  d["capability"] = platform.capability_string();
  d["capability_known"] = platform.capability_known;
  d["name"] = platform.name;
  d["simulated"] = platform.simulated;
  d["description"] = describe_platform(platform);
  return d;
}

py::dict request_dict(const SelectorConfig& request) {
  py::dict d;
  d["dtype"] = std::string(dtype_name(request.dtype));
  d["qk_nope_head_dim"] = request.dims.qk_nope_head_dim;
  d["qk_rope_head_dim"] = request.dims.qk_rope_head_dim;
  d["v_head_dim"] = request.dims.v_head_dim;
  return d;
}

py::dict candidate_dict(const CandidateReport& candidate) {
  py::dict d;
  d["name"] = candidate.name;
  d["available"] = candidate.availability.available;
  d["unavailable_reason"] = candidate.availability.reason;
  d["valid"] = candidate.reasons.empty();
  d["reasons"] = candidate.reasons;
  d["priority"] = candidate.priority < 0 ? py::object(py::none()) : py::object(py::int_(candidate.priority + 1));
  return d;
}

py::list candidates_list(const std::vector<CandidateReport>& candidates) {
  py::list list;
  for (const CandidateReport& candidate : candidates) list.append(candidate_dict(candidate));
  return list;
}

// resolve_config(path) with an API-level backend choice on top, applied to
// the process when `apply` (log level, plugins, overrides), as the command does.
Config config_of(const std::optional<std::string>& path, const std::optional<std::string>& backend, bool apply) {
  Config config = resolve_config(path);
  if (backend) {
    config.backend = *backend;
    config.backend_origin = ConfigOrigin{"API"};
  }
  if (apply) configure(config);
  return config;
}

// What `mla-prefill backends --json` prints, as a dict with the same keys.
py::dict backends_report(const std::optional<std::string>& path, const std::optional<std::string>& backend,
                         const std::string& dtype, const Dims& dims, const std::optional<std::string>& platform_spec) {
  const SelectorConfig request = request_of(dtype, dims);
  const DeviceCapability platform = platform_of(platform_spec);
  Selector selector(config_of(path, backend, true));
  const bool explicit_choice = selector.config().backend != "auto";
  py::dict report;
  report["platform"] = platform_dict(platform);
  report["request"] = request_dict(request);
  report["config_sources"] = selector.config().sources;
  report["backends"] = candidates_list(selector.report(request, platform));
  py::dict selection;
  try {
    const Selection chosen = selector.select(request, platform);
    selection["mode"] = !platform.capability_known ? "default" : explicit_choice ? "explicit" : "auto";
    selection["backend"] = chosen.name;
    selection["why"] = chosen.why;
  } catch (const Error& error) {
    if (error.category() != ErrorCategory::selection) throw;  // a wrong request, not a finding
    selection["mode"] = explicit_choice ? "explicit" : "auto";
    selection["backend"] = py::none();
    selection["error"] = std::string(error.what());
  }
  report["selection"] = selection;
  return report;
}

MlaPrefillBackendKind kind_of(const std::string& name) { return mla_prefill_registry().parse(name); }

RegisterMode mode_of(const std::string& mode) {
  if (mode == "replace") return RegisterMode::replace;
  if (mode == "add") return RegisterMode::add;
  raise(ErrorCategory::invalid_argument, "mode must be 'replace' or 'add', got '" + mode + "'");
}

void bind_registry(py::module_& m) {
  m.def(
      "register_mla_prefill_backend",
      [](const std::string& member, const std::string& factory, const std::string& mode) {
        const std::optional<BackendEntry> entry = find_named_factory(factory);
        if (!entry) {
          std::string known;
          for (const std::string& name : named_factory_names()) known += (known.empty() ? "" : ", ") + name;
          raise(ErrorCategory::not_found, "no backend factory named '" + factory + "'; known: " + known);
        }
        register_mla_prefill_backend(kind_of(member), *entry, mode_of(mode));
      },
      py::arg("member"), py::arg("factory"), py::arg("mode") = "replace");
  m.def("is_overridden",
        [](const std::string& member) { return mla_prefill_registry().is_overridden(kind_of(member)); });
  m.def("clear_override", [](const std::string& member) { mla_prefill_registry().clear_override(kind_of(member)); });
  m.def("named_factories", &named_factory_names);
  m.def("load_plugin", &load_plugin, py::arg("path"));
  m.def("loaded_plugins", &loaded_plugins);
  m.def("plugin_dir", &plugin_dir);
  m.def("expand_plugin_path", &expand_plugin_path, py::arg("path"));
  m.def(
      "configure", [](const std::optional<std::string>& path) { config_of(path, std::nullopt, true); },
      py::arg("config") = py::none());
}

void bind_selector(py::module_& m) {
  py::class_<Selection>(m, "Selection")
      .def_readonly("name", &Selection::name)
      .def_readonly("why", &Selection::why)
      .def_property_readonly("platform", [](const Selection& s) { return platform_dict(s.platform); })
      .def_property_readonly("walk", [](const Selection& s) { return candidates_list(s.walk); })
      .def_property_readonly("queue_kinds",
                             [](const Selection& s) {
                               py::list kinds;
                               for (DeviceBackend kind : s.entry.description.queue_kinds) {
                                 kinds.append(std::string(device_backend_name(kind)));
                               }
                               return kinds;
                             })
      .def_property_readonly("fp8_output", [](const Selection& s) { return s.entry.description.fp8_output; });

  py::class_<Selector>(m, "Selector")
      .def(py::init([](const std::optional<std::string>& path, const std::optional<std::string>& backend, bool apply) {
             return Selector(config_of(path, backend, apply));
           }),
           py::arg("config") = py::none(), py::arg("backend") = py::none(), py::arg("apply") = true)
      .def_property_readonly("config_sources", [](const Selector& s) { return s.config().sources; })
      .def_property_readonly("backend_choice", [](const Selector& s) { return s.config().backend; })
      .def(
          "select",
          [](Selector& s, const std::string& dtype, const Dims& dims, const std::optional<std::string>& platform,
             const std::optional<std::string>& backend) {
            return s.select(request_of(dtype, dims), platform_of(platform), backend);
          },
          py::arg("dtype"), py::arg("dims"), py::arg("platform") = py::none(), py::arg("backend") = py::none())
      .def(
          "report",
          [](const Selector& s, const std::string& dtype, const Dims& dims,
             const std::optional<std::string>& platform) {
            return candidates_list(s.report(request_of(dtype, dims), platform_of(platform)));
          },
          py::arg("dtype"), py::arg("dims"), py::arg("platform") = py::none())
      .def(
          "create",
          [](const Selector& s, const Selection& selection, int num_heads, int kv_lora_rank, const Dims& dims,
             const std::string& dtype, int device, const std::optional<std::string>& out_dtype) {
            BackendParams params;
            params.num_heads = num_heads;
            params.kv_lora_rank = kv_lora_rank;
            params.dims = dims_of(dims);
            params.dtype = parse_dtype(dtype);
            if (out_dtype) params.out_dtype = parse_dtype(*out_dtype);
            Queue queue = make_queue(selection, device);
            return std::make_shared<BackendObject>(s.create(selection, params), std::move(queue));
          },
          py::arg("selection"), py::arg("num_heads"), py::arg("kv_lora_rank"), py::arg("dims"), py::arg("dtype"),
          py::arg("device") = 0, py::arg("out_dtype") = py::none());
}

}  // namespace

void bind_selection(py::module_& m) {
  m.def(
      "platform", [](const std::optional<std::string>& spec) { return platform_dict(platform_of(spec)); },
      py::arg("spec") = py::none());
  m.def("backends_report", &backends_report, py::arg("config"), py::arg("backend"), py::arg("dtype"), py::arg("dims"),
        py::arg("platform") = py::none());
  m.def("parse_dtype", [](const std::string& name) { return std::string(dtype_name(parse_dtype(name))); });
  m.def("build_info", [] {
    py::dict info;
    info["cuda"] = device_backend_built(DeviceBackend::cuda);
    info["hip"] = device_backend_built(DeviceBackend::hip);
    return info;
  });
  bind_registry(m);
  bind_selector(m);
}

}  // namespace mla::python
