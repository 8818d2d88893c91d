// Kernel level of the sm80 path: the mixed-input GEMM kernel, a main loop (threadblock/mainloop.cuh) walked
// by a schedule. The schedule is a template parameter: DataParallel (data_parallel.cuh: one block per tile
// and K split) and StreamK (stream_k.cuh: resident blocks sharing every tile's k-tiles) are compiled for every
// tile, and the host picks one by the split mode (device/launch.cuh). A schedule owns the mapping from a
// block to its tiles and K ranges and the hand-over of partial tiles; the tile's output code
// (tile_output.cuh) and the main loop read only the problem, so the grouped schedule of mixture-of-experts
// (grouped.cuh, launched by cpp/mixgemm/moe/) plugs in here too.
#pragma once

#include <cstdint>

#include "mixgemm/sm80/kernel/data_parallel.cuh"
#include "mixgemm/sm80/kernel/grouped.cuh"
#include "mixgemm/sm80/kernel/kernel_params.h"
#include "mixgemm/sm80/kernel/stream_k.cuh"
#include "mixgemm/sm80/threadblock/mainloop.cuh"

namespace mixgemm::sm80::kernel {

template <typename Loop, typename Schedule>
__global__ void __launch_bounds__(Loop::kThreads, Loop::kMinBlocksPerSM)
    gemm_mixed_kernel(const KernelParams<Schedule> params) {
  extern __shared__ __align__(128) uint8_t smem[];
  Schedule::template run<Loop>(params, smem);
}

}  // namespace mixgemm::sm80::kernel
