// What an engine caller needs, in one include: tensors, queues, the backend
// interface and the prefill step, the whole MLA step, configuration,
// selection and the platform. It sits with the platform layer, the highest
// layer with public headers. Backend authors add mla/backend/ (checks,
// latents, registry, registration); plugin authors include only
// mla/plugin/abi.h.
#pragma once

#include "mla/attention_mask.hpp"
#include "mla/backend.hpp"
#include "mla/config.hpp"
#include "mla/error.hpp"
#include "mla/mla_step.hpp"
#include "mla/platform.hpp"
#include "mla/queue.hpp"
#include "mla/selector.hpp"
#include "mla/tensor.hpp"
