// The arrival of one split at a split-K semaphore, shared by the kernels whose last split to arrive sums
// the others' partials (the sm80 GEMM's serial mode, gemm_mixed.cuh, and the decode kernel,
// gemv_kernel.cuh).
//
// The protocol: every thread of a block stores its share of the block's fp32 partial to the workspace,
// the block meets at a __syncthreads, and then one thread calls arrive_and_count on the tile's semaphore.
// The block whose call returns split_k - 1 arrived last; it resets the semaphore to 0 and its threads,
// after a second __syncthreads, read every split's partial.
//
// Why one release-acquire atomic is enough (PTX memory model). Its release half publishes the whole
// block's partials, not only the calling thread's: the barrier orders the other threads' stores before
// the atomic, and a release is cumulative over what was ordered before it (CUTLASS's generic barrier
// arrives the same way). Its acquire half makes every earlier split's partials visible to the calling
// thread, and the second barrier passes that on to the threads of the last block.
//
// It replaced a __threadfence() by every thread before the arrival and another after it. Each compiled
// to MEMBAR.SC.GPU, a sequentially consistent fence, where this is one MEMBAR.ALL.GPU before the atomic.
// The decode kernel's split-K tail got 0.4-0.5 us shorter: 4-5% of the small and middle decode shapes
// (4096 x 4096 at M = 1: 6.23 against 6.59 us; docs/perf-notes/2026-11-24-decode-read-floor-arrival-fold.md).
#pragma once

#include <cstdint>

namespace mixgemm {

// Returns the semaphore's count before this arrival.
__device__ __forceinline__ int arrive_and_count(int32_t* semaphore) {
  int before;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;\n" : "=r"(before) : "l"(semaphore) : "memory");
  return before;
}

// The semaphore's count, read with acquire semantics: the partials of the splits it counts are visible
// to the calling thread after it.
__device__ __forceinline__ int load_acquire(const int32_t* semaphore) {
  int count;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(count) : "l"(semaphore) : "memory");
  return count;
}

}  // namespace mixgemm
