// What the sm80 kernel receives: the problem, the split-K scratch and its schedule's own parameters.
// Host and device header (no device code).
#pragma once

#include <cstdint>

namespace mixgemm::sm80::kernel {

// The problem a launch computes, as the kernel reads it: D[M, N] = A[M, K] . (q * scales + offsets) (+ bias).
// The tile code (tile_output.cuh, the main loop) reads only this, so a grouped (mixture-of-experts) schedule
// that holds one per group and picks it per block reuses everything below the schedule.
struct GemmProblem {
  const void* A;
  const int32_t* B;
  const void* scales;
  const void* offsets;
  const void* bias;
  void* D;
  int M, N, K, group_size;
};

// Split-K and stream-K scratch: fp32 partials and one semaphore per output tile (zero on entry and exit).
struct Scratch {
  float* workspace;
  int32_t* semaphores;
};

template <typename Schedule>
struct KernelParams {
  GemmProblem problem;
  Scratch scratch;
  typename Schedule::Params schedule;
};

}  // namespace mixgemm::sm80::kernel
