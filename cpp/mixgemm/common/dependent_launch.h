// The launch, and the kernel-side wait, of the kernels that start as programmatic dependents (the decode
// kernel, decode/launch.cuh; the sm80 path's 16- and 32-row tiles, sm80/launch.cuh; and the read_floor peer, which is
// timed beside them and must start the same way).
//
// From compute capability 9.0 on, such a launch lets the grid start while the kernel before it on the
// stream still runs; the kernel itself must execute griddepcontrol.wait before it touches anything that
// kernel writes (and griddepcontrol.launch_dependents to let the next one start early). Before 9.0, and for code
// compiled for an older architecture, the launch is an ordinary one.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "mixgemm/core/check.h"

namespace mixgemm {

// The kernel side, where a grid so launched may start touching what the kernel before it writes: lets the
// next dependent grid on the stream launch, then waits until the previous kernel has finished and its
// writes are visible. Compiled out before sm_90; in a grid launched without the attribute both
// instructions are no-ops.
__device__ __forceinline__ void release_dependents_then_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Whether kKernel's code for the current device carries the wait above, so that it may be launched as a dependent:
// it was compiled from PTX for compute capability 9.0 or later. A build for an older architecture runs on a newer
// GPU through its PTX, in which release_dependents_then_wait() is empty; launched as a dependent, such a grid could
// read what the kernel before it still writes. Cached per device, one bit each (cudaFuncGetAttributes costs host
// time on every call; beyond 64 devices it is asked every time).
template <auto kKernel>
bool carries_dependent_wait() {
  static std::atomic<uint64_t> checked{}, waits{};
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (checked.load(std::memory_order_acquire) & bit) return waits.load(std::memory_order_relaxed) & bit;
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, kKernel), "cudaFuncGetAttributes");
  const bool wait = attributes.ptxVersion >= 90;
  if (wait) waits.fetch_or(bit, std::memory_order_relaxed);
  checked.fetch_or(bit, std::memory_order_release);
  return wait;
}

// Launches kKernel<<<grid, block, shared_bytes, stream>>>(args...): as a programmatic dependent where the caller
// asks for one (`as_dependent`) and its code carries the wait (carries_dependent_wait), else ordinarily. Throws
// std::runtime_error naming `name` on a failed launch.
template <auto kKernel, typename... Args>
void launch_kernel(bool as_dependent, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   const char* name, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute dependent;
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  if (as_dependent && carries_dependent_wait<kKernel>()) {
    config.attrs = &dependent;
    config.numAttrs = 1;
  }
  check_cuda(cudaLaunchKernelEx(&config, kKernel, std::forward<Args>(args)...), name);
  check_launch(name);
}

}  // namespace mixgemm
