// Host API of the prepack layer: AWQ checkpoints -> the "mixgemm int4 v1" kernel layout.
//
// The layout itself is specified (and tested on the CPU) by python/mixgemm/layouts/sm80.py; the
// device-side pieces live in prepack_awq.cuh. Like the rest of the core, these functions never
// allocate: callers pass device pointers, sizes and a stream. Broken shape rules throw
// std::invalid_argument, failed launches std::runtime_error (see core/check.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/core/kernel_key.h"

namespace mixgemm::prepack {

// Rewrites AWQ qweight (int32 [K, N/8], nibble i of a word = column 8c + [0,2,4,6,1,3,5,7][i]) into
// `packed` (int32 [N/64, K/16, 32, 4], i.e. K * N / 8 words). Values are copied unchanged (AWQ stores
// unsigned 0..15 with a separate zero point). Requires K % 16 == 0, N % 64 == 0, both > 0, and the
// two buffers must not overlap. Asynchronous on `stream`.
void awq_to_kernel_layout(const int32_t* awq_qweight, int32_t* packed, int K, int N, cudaStream_t stream);

// offsets[g, n] = -(z[g, n] * scales[g, n]), formed in float and rounded once to the activation dtype,
// with z unpacked from AWQ qzeros (int32 [groups, N/8]). scales and offsets are [groups, N] of type `act`.
// Requires groups > 0, N > 0, N % 8 == 0.
// Asynchronous on `stream`.
void fold_awq_zeros(const int32_t* awq_qzeros, const void* scales, void* offsets, int groups, int N, ActType act,
                    cudaStream_t stream);

}  // namespace mixgemm::prepack
