// How an sm80 kernel starts: the small-M tiles as programmatic dependents (sm80/launch.cuh launches them so on
// compute capability 9.0 on, the parallel split's reduction kernel after them too), the others ordinarily.
//
// A dependent grid may be placed on the SMs while the kernel before it on the stream still runs (once every block
// of that kernel has executed griddepcontrol.launch_dependents), and must execute griddepcontrol.wait before it
// reads or writes anything that kernel may touch: x, the output, the split-K slots and semaphores. What it can do
// before is ask L2 for the weight, scale and offset lines of its first Stages - 1 k-tiles, the copies its
// pipeline's prologue issues first. A prefetch cannot read stale data (it fills L2, where every SM's stores land),
// so this holds even where the kernel before wrote the weight (a prepack). Back to back, the launch and the first
// DRAM round trip then leave the critical path; after an ordinary kernel (a norm, an activation) the grid starts
// when that kernel ends, and only the dependent launch's own cost remains
// (docs/perf-notes/2026-11-28-sm80-small-tiles-as-dependents.md has both).
// The release comes first, as in the decode kernel (decode/gemv_kernel.cuh). Where the next dependent grid's
// blocks land is the launcher's part: sm80/launch.cuh sizes each block's shared memory so that they can land only
// in the slots ours leave.
#pragma once

#include "mixgemm/common/dependent_launch.h"

namespace mixgemm::sm80::kernel {

// The tiles that start as dependents: those of M <= 32 (16 and 32 rows), whose calls are a few microseconds of
// weight streaming, so that the launch and the pipeline's fill are a large share of them.
template <typename Loop>
inline constexpr bool kStartsAsDependent = Loop::kTileM <= 32;

// Every thread: asks L2 for the first k-tiles a block's main loop copies (of `num_tiles` from `kt_begin` of problem
// `p`), lets the next dependent grid launch, and waits for the kernel before. A no-op for the other tiles.
template <typename Loop>
__device__ __forceinline__ void start_as_dependent(const typename Loop::Problem& p, int kt_begin, int num_tiles) {
  if constexpr (kStartsAsDependent<Loop>) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    typename Loop::Loader prefetcher(p, kt_begin);
#pragma unroll
    for (int s = 0; s < Loop::kStages - 1; ++s)
      if (s < num_tiles) prefetcher.prefetch_next();
#endif
    release_dependents_then_wait();
  }
}

}  // namespace mixgemm::sm80::kernel
