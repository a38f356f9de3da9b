// mlaprefill._core: the library's C++ API for the Python package. The package
// (mlaprefill/__init__.py) gives it Python names and defaults, allocates
// outputs with the inputs' library, and turns torch dtypes into names.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "errors.hpp"

PYBIND11_MODULE(_core, module) {
  module.doc() = "MLA prefill attention (C++ core of the mlaprefill package)";
  mla::python::bind_errors(module);
  mla::python::bind_selection(module);
  mla::python::bind_backend(module);
}
