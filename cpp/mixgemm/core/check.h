// Error reporting shared by every layer of the C++ core.
//
// Rule of the core (DESIGN.md section 3): a broken rule about shapes or arguments throws
// std::invalid_argument, a failing CUDA call throws std::runtime_error. pybind11 maps them to
// Python's ValueError and RuntimeError, so a caller never sees a crash or a silent wrong result.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace mixgemm {

// Throws std::invalid_argument with `message` unless `condition` holds.
inline void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

// The same with a message built only when the rule is broken: `message` is a function returning it. The
// runners' can_implement runs on every launch, and building each rule's text there (a dozen string
// allocations per call) cost the host more than the launch itself (issue 9).
template <typename MakeMessage, typename = std::enable_if_t<std::is_invocable_r_v<std::string, MakeMessage>>>
inline void require(bool condition, MakeMessage&& message) {
  if (!condition) throw std::invalid_argument(message());
}

// Messages are built with std::string and std::to_string, never iostreams: inside a Python process
// that loaded another C++ runtime first, iostream number formatting was seen to crash (segfault in
// ostream::_M_insert<long> on the H100 machine), while to_string (snprintf) is safe.

// Throws std::runtime_error naming the failed call and CUDA's own description of the error.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("mixgemm: CUDA error in ") + what + ": " + cudaGetErrorName(status) +
                             " (" + cudaGetErrorString(status) + ")");
  }
}

// Throws std::runtime_error when no usable CUDA device is visible, before anything is launched: on a
// machine without a GPU every kernel entry point fails with this message instead of a CUDA crash.
// A success is remembered: devices do not disappear from a running process, and this runs on every launch.
inline void require_cuda_device() {
  static std::atomic<bool> seen{false};
  if (seen.load(std::memory_order_relaxed)) return;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the error so later calls are not poisoned by it
    throw std::runtime_error(std::string("mixgemm: no CUDA GPU is visible (cudaGetDeviceCount: ") +
                             cudaGetErrorString(status) + ", devices: " + std::to_string(count) +
                             "); mixgemm's kernels need an NVIDIA GPU of compute capability >= 8.0");
  }
  seen.store(true, std::memory_order_relaxed);
}

// Whether `pointer` is a multiple of `bytes` (the runners' alignment rules: vector and cp.async/TMA
// accesses of 16 bytes, 4-byte pairs, 2-byte elements).
inline bool aligned(const void* pointer, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// Checks the launch that was just issued (bad configuration, missing kernel image for this GPU).
inline void check_launch(const char* kernel_name) { check_cuda(cudaGetLastError(), kernel_name); }

// ceil(value / divisor) for positive operands: the number of tiles that cover `value`.
constexpr int ceil_div(int value, int divisor) { return (value + divisor - 1) / divisor; }

}  // namespace mixgemm
