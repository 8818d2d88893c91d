// Host entry point of the standalone AWQ dequantize kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/core/kernel_key.h"

namespace mixgemm::dequant {

// Writes out[K, N] = (q - z) * s from AWQ tensors (device pointers): qweight int32 [K, N/8],
// scales [K/G, N] (of type `act`), qzeros int32 [K/G, N/8]. `out` has the scales' type.
// Rules (std::invalid_argument otherwise): K >= 1, N >= 8 and N % 8 == 0, group_size >= 1 and
// K % group_size == 0, every pointer 16-byte aligned.
void awq_dequantize(const int32_t* qweight, const void* scales, const int32_t* qzeros, void* out, int K,
                    int N, int group_size, ActType act, cudaStream_t stream);

}  // namespace mixgemm::dequant
