// The launch, and the kernel-side wait, of the kernels that start as programmatic dependents (the decode
// kernel, decode/launch.cuh; the sm80 path's 16- and 32-row tiles, sm80/launch.cuh; and the read_floor peer, which is
// timed beside them and must start the same way).
//
// From compute capability 9.0 on, such a launch lets the grid start while the kernel before it on the
// stream still runs; the kernel itself must execute griddepcontrol.wait before it touches anything that
// kernel writes (and griddepcontrol.launch_dependents to let the next one start early). Before 9.0 the
// attribute does not exist and the launch is an ordinary one.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "mixgemm/core/check.h"
#include "mixgemm/core/device_info.h"

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

// Launches kernel<<<grid, block, shared_bytes, stream>>>(args...), as a programmatic dependent where the
// current device allows it. Throws std::runtime_error naming `name` on a failed launch.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                      const char* name, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute dependent;
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  if (current_device_info().major >= 9) {
    config.attrs = &dependent;
    config.numAttrs = 1;
  }
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name);
  check_launch(name);
}

}  // namespace mixgemm
