// Everything a user of the library needs, in one include. It sits with the
// platform layer, the highest layer with public headers, because it takes in
// both core's headers and mla/platform.hpp.
#pragma once

#include "mla/backend.hpp"
#include "mla/config.hpp"
#include "mla/context_plan.hpp"
#include "mla/dims.hpp"
#include "mla/dtype.hpp"
#include "mla/error.hpp"
#include "mla/log.hpp"
#include "mla/mla_step.hpp"
#include "mla/platform.hpp"
#include "mla/problem.hpp"
#include "mla/queue.hpp"
#include "mla/registration.hpp"
#include "mla/registry.hpp"
#include "mla/selector.hpp"
#include "mla/tensor.hpp"
