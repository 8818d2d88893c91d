// Second kernel of parallel split-K: D[m, n] = sum over z (in z order) of workspace[z, m, n] + bias[n].
// Memory bound: reads split_k fp32 values and writes one output per element; 4 elements per thread keep
// the fp32 loads 16 bytes wide (N is a multiple of 64, so a row holds whole groups of 4).
// Latency bound where it sits on the critical path: behind the small tiles the grid is M x N / 1024 blocks (32 at
// M = 16 on N = 2048), and each thread's loads are all it does. So the partials are loaded in batches before any of
// them is added (common/batched_sum.cuh), as the serial split's in-kernel sum does (tile_output.cuh, sum_slots).
// Behind the small tiles' GEMM (kernel/dependent_start.cuh) it is launched as a programmatic dependent: its blocks
// land in the slots the GEMM leaves while the GEMM streams, so its launch leaves the critical path. It releases the
// next dependent grid (the next call's GEMM, which prefetches its first k-tiles and then waits for this kernel) before
// it waits for the GEMM's partials; in an ordinary launch both instructions are no-ops.
#pragma once

#include <cstdint>

#include "mixgemm/common/batched_sum.cuh"
#include "mixgemm/common/dependent_launch.h"
#include "mixgemm/common/mma_m16n8k16.cuh"

namespace mixgemm::sm80::kernel {

// kBatch: the partials a thread loads before it adds, one round trip for up to 8 splits and two for 16, where a
// loop of one load and one add a split (after the first partial, unrolled by 4 in its PTX and the remainder one at a
// time) took four for 8 splits and six for 16. 58 registers a thread (ptxas, sm_90a). On the H200 a batch sized to
// the split count (2, 4: 32, 36 registers) took the pairs of 2 and 4 splits to 1.044x-1.046x / 1.015x-1.023x the time
// of the batch before this one (the first partial, then 7; docs/perf-notes/2026-11-28-split-k-reduction-batch-of-8.md),
// and 16 partials at a time (80 registers) took 8192x2560 at M = 32 (16 splits) from 10.4 to 11.3 us
// (docs/perf-notes/2026-11-28-split-k-reduction-batched-loads.md).
template <typename T>
__global__ void __launch_bounds__(256)
    splitk_reduce_kernel(const float* __restrict__ workspace, const T* __restrict__ bias, T* __restrict__ D,
                         int M, int N, int split_k) {
  constexpr int kBatch = 8;
  using Traits = mma::ActTraits<T>;
  using Pair = typename Traits::Pair;
  const int64_t elements = static_cast<int64_t>(M) * N;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  release_dependents_then_wait();  // before anything reads the partials or writes D (above)
  if (first >= elements) return;
  // From 0, as the serial split's sum (tile_output.cuh): the two modes add the same partials in the same order.
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
  sum_in_batches<kBatch, float4>(
      split_k,
      [&](int z, float4& part) { part = __ldcs(reinterpret_cast<const float4*>(workspace + z * elements + first)); },
      [&](const float4& part) { sum.x += part.x, sum.y += part.y, sum.z += part.z, sum.w += part.w; });
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
