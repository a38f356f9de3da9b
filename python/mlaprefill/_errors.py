"""The library's errors as Python exceptions.

Every failure of the C++ library arrives as one of these, with the library's
message unchanged and its category in ``.category``. Each class also derives
from the built-in exception a Python caller would expect, so ``except
ValueError`` catches every bad input.
"""


class Error(Exception):
    """Base class of every mlaprefill error."""

    category = "internal"


class InvalidArgument(Error, ValueError):
    """Shapes, dtypes, strides, devices or values passed in are wrong."""

    category = "invalid_argument"


class ConfigError(InvalidArgument):
    """The YAML or environment configuration is wrong."""

    category = "config"


class NotFound(Error, LookupError):
    """A name (backend, factory, file, symbol) does not exist."""

    category = "not_found"


class NotSupported(Error, RuntimeError):
    """A valid request this build or device cannot serve."""

    category = "not_supported"


class SelectionError(InvalidArgument):
    """The selector refused the chosen backend or found none valid."""

    category = "selection"


class DeviceError(Error, RuntimeError):
    """A GPU runtime call failed."""

    category = "device"


class IoError(Error, OSError):
    """Reading or writing a file failed."""

    category = "io"


class PluginError(Error, ImportError):
    """Loading or registering a plugin failed."""

    category = "plugin"


class InternalError(Error, RuntimeError):
    """A bug in the library."""


CLASSES = {
    "invalid_argument": InvalidArgument,
    "config": ConfigError,
    "not_found": NotFound,
    "not_supported": NotSupported,
    "selection": SelectionError,
    "device": DeviceError,
    "io": IoError,
    "plugin": PluginError,
    "internal": InternalError,
}
