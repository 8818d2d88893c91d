// Second kernel of parallel split-K: D[m, n] = sum over z (in z order) of workspace[z, m, n] + bias[n].
// Memory bound: reads split_k fp32 values and writes one output per element; 4 elements per thread keep
// the fp32 loads 16 bytes wide (N is a multiple of 64, so a row holds whole groups of 4).
// Latency bound where it sits on the critical path: behind the small tiles the grid is M x N / 1024 blocks (32 at
// M = 16 on N = 2048), each thread's loads are all it does, and an add that waits for a load stops the thread
// issuing the next. So the partials are loaded in batches before any of them is added, and their L2 round trips
// overlap, as the serial split's in-kernel sum does (tile_output.cuh, sum_slots): one round trip for up to 8 splits,
// three for 16 (1 + 7, 7, then 1), where a loop of one load and one add a split (unrolled by 4 in its PTX, the
// remainder one at a time) took four for 8 splits and six for 16.
// Behind the small tiles' GEMM (kernel/dependent_start.cuh) it is launched as a programmatic dependent: its blocks
// land in the slots the GEMM leaves while the GEMM streams, so its launch leaves the critical path. It releases the
// next dependent grid (the next call's GEMM, which prefetches its first k-tiles and then waits for this kernel) before
// it waits for the GEMM's partials; in an ordinary launch both instructions are no-ops.
#pragma once

#include <cstdint>

#include "mixgemm/common/dependent_launch.h"
#include "mixgemm/common/mma_m16n8k16.cuh"

namespace mixgemm::sm80::kernel {

template <typename T>
__global__ void __launch_bounds__(256)
    splitk_reduce_kernel(const float* __restrict__ workspace, const T* __restrict__ bias, T* __restrict__ D,
                         int M, int N, int split_k) {
  using Traits = mma::ActTraits<T>;
  using Pair = typename Traits::Pair;
  const int64_t elements = static_cast<int64_t>(M) * N;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  release_dependents_then_wait();  // before anything reads the partials or writes D (above)
  if (first >= elements) return;
  // The first partial and a batch of 7 cover 8 splits in one round trip: 64 registers a thread (38 with one load a
  // split). A batch of 15 (one round trip for 16 splits, 80 registers) took 8192x2560 at M = 32 (32 x 128 tiles, 16
  // splits) from 10.4 to 11.3 us on the H200, where 7 took it to 10.3, and gained at most 4% over 7 elsewhere
  // (docs/perf-notes/2026-11-28-split-k-reduction-batched-loads.md).
  constexpr int kBatch = 7;
  float4 sum = __ldcs(reinterpret_cast<const float4*>(workspace + first));
  for (int z0 = 1; z0 < split_k; z0 += kBatch) {
    float4 part[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (z0 + b < split_k) part[b] = __ldcs(reinterpret_cast<const float4*>(workspace + (z0 + b) * elements + first));
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (z0 + b < split_k) sum.x += part[b].x, sum.y += part[b].y, sum.z += part[b].z, sum.w += part[b].w;
  }
  if (bias != nullptr) {
    const int col = static_cast<int>(first % N);
    sum.x += static_cast<float>(bias[col]), sum.y += static_cast<float>(bias[col + 1]);
    sum.z += static_cast<float>(bias[col + 2]), sum.w += static_cast<float>(bias[col + 3]);
  }
  Pair* out = reinterpret_cast<Pair*>(D + first);
  out[0] = Traits::to_pair(sum.x, sum.y);
  out[1] = Traits::to_pair(sum.z, sum.w);
}

}  // namespace mixgemm::sm80::kernel
