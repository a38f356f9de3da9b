// The GPU queue's factories: gpu_queue.cu is compiled once per vendor and
// defines the one its build carries (make_cuda_queue in the CUDA build,
// make_hip_queue with MLA_HIP_COMPILE). backends/vendor_queues.cpp calls it.
#pragma once

#include <memory>

#include "mla/detail/queue_impl.hpp"

namespace mla::detail {

std::shared_ptr<QueueImpl> make_cuda_queue(int device_index);
std::shared_ptr<QueueImpl> make_hip_queue(int device_index);
// Queues over the caller's stream, which they never destroy.
std::shared_ptr<QueueImpl> borrow_cuda_queue(int device_index, void* stream);
std::shared_ptr<QueueImpl> borrow_hip_queue(int device_index, void* stream);

}  // namespace mla::detail
