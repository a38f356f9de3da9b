#include "errors.hpp"

#include <array>
#include <string>

#include "mla/error.hpp"

namespace mla::python {
namespace {

namespace py = pybind11;

// Each category and the key the Python side's table uses for it (the names
// of the enum's members).
struct CategoryKey {
  ErrorCategory category;
  const char* key;
};
constexpr std::array<CategoryKey, 9> categories = {{
    {ErrorCategory::invalid_argument, "invalid_argument"},
    {ErrorCategory::config, "config"},
    {ErrorCategory::not_found, "not_found"},
    {ErrorCategory::not_supported, "not_supported"},
    {ErrorCategory::selection, "selection"},
    {ErrorCategory::device, "device"},
    {ErrorCategory::io, "io"},
    {ErrorCategory::plugin, "plugin"},
    {ErrorCategory::internal, "internal"},
}};

// The Python class of each category, indexed by the enum's value. Owned
// references kept for the life of the process: the translator may run until
// the interpreter shuts down, and classes are never unloaded.
std::array<PyObject*, categories.size()> classes{};

const char* key_of(ErrorCategory category) {
  for (const CategoryKey& entry : categories) {
    if (entry.category == category) return entry.key;
  }
  return "internal";
}

void raise_python(const Error& error) {
  const auto index = static_cast<std::size_t>(error.category());
  PyObject* type = index < classes.size() && classes[index] != nullptr ? classes[index] : PyExc_RuntimeError;
  py::object instance = py::reinterpret_borrow<py::object>(type)(error.what());
  if (type != PyExc_RuntimeError) instance.attr("category") = key_of(error.category());
  PyErr_SetObject(type, instance.ptr());
}

}  // namespace

void bind_errors(py::module_& module) {
  module.def(
      "_set_error_classes",
      [](const py::dict& table) {
        for (const CategoryKey& entry : categories) {
          if (!table.contains(entry.key)) throw py::key_error(std::string("no exception class for ") + entry.key);
          PyObject* type = table[entry.key].ptr();
          Py_INCREF(type);
          PyObject*& slot = classes[static_cast<std::size_t>(entry.category)];
          Py_XDECREF(slot);
          slot = type;
        }
      },
      "Internal: the exception class of each error category, keyed by category name.");
  module.def(
      "_error_categories",
      [] {
        py::list keys;
        for (const CategoryKey& entry : categories) keys.append(entry.key);
        return keys;
      },
      "Internal: the error categories' names.");
  py::register_exception_translator([](std::exception_ptr pending) {
    try {
      if (pending) std::rethrow_exception(pending);
    } catch (const Error& error) {
      raise_python(error);
    }
  });
}

}  // namespace mla::python
