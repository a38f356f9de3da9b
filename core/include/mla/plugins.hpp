// Old name of mla/registration.hpp (loading plugins and registering backends
// from C++), kept so that code written against 0.1 still builds. It will be
// removed in the next release: include mla/registration.hpp.
#pragma once

#include "mla/registration.hpp"
