// Second kernel of parallel split-K: D[m, n] = sum over z (in z order) of workspace[z, m, n] + bias[n].
// Memory bound: reads split_k fp32 values and writes one output per element; 4 elements per thread keep
// the fp32 loads 16 bytes wide (N is a multiple of 64, so a row holds whole groups of 4).
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
  float4 sum = __ldcs(reinterpret_cast<const float4*>(workspace + first));
  for (int z = 1; z < split_k; ++z) {
    const float4 part = __ldcs(reinterpret_cast<const float4*>(workspace + z * elements + first));
    sum.x += part.x, sum.y += part.y, sum.z += part.z, sum.w += part.w;
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
