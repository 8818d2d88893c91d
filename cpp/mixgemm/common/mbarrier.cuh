// Shared-memory mbarriers (PTX ISA, "mbarrier"), for the sm80 path's pipeline: a 64-bit object in shared
// memory that completes a phase once a set number of arrivals have been counted, then starts the next.
// Waiters name the phase by its parity, so a barrier serves one k-tile per phase, alternating.
//
// The sm80 main loop of 8-warp tiles uses two per stage (threadblock/mainloop.cuh): "full", which every
// thread's cp.async copies of the stage arrive at as they land, and "empty", which every thread arrives at
// once it has read the stage. A warp then waits only for the data it is about to read, and a thread
// refilling a stage only for the warps that still read it, instead of the whole threadblock meeting at a
// __syncthreads() every k-tile.
#pragma once

#include <cstdint>

namespace mixgemm {

__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// One arrival of the calling thread (release: its earlier shared-memory reads and writes are ordered before
// the phase completes).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}

// One arrival of the calling thread, made by the hardware once all of the thread's earlier cp.async copies
// have landed. .noinc: the arrival is one of the count given to mbarrier_init, not an extra one.
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase of parity `parity` has completed (acquire: what the arrivals released is visible).
// try_wait (sm_90) suspends the thread for a while in hardware before it returns false; test_wait (sm_80)
// returns at once, so the loop spins.
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#else
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n mbarrier.test_wait.parity.shared.b64 done, [%0], %1;\n"
      " @!done bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace mixgemm
