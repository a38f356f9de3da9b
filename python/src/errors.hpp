// mla::Error as Python exceptions: one class per ErrorCategory, defined by the
// Python package (mlaprefill/_errors.py) and handed to the module at import.
#pragma once

#include <pybind11/pybind11.h>

namespace mla::python {

// Adds _set_error_classes() and the exception translator to `module`.
void bind_errors(pybind11::module_& module);

}  // namespace mla::python
