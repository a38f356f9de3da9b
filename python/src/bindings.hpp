// The parts of the _core module, each in its own file.
#pragma once

#include <pybind11/pybind11.h>

namespace mla::python {

// platform(), backends_report(), Selector, Selection, the registry and plugins.
void bind_selection(pybind11::module_& module);
// Backend (prepare, run_new_tokens, run_context_chunk, merge, run_prefill_step).
void bind_backend(pybind11::module_& module);

}  // namespace mla::python
