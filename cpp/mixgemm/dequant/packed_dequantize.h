// Host entry point of the dense dequantize of a prepacked weight (packed_dequantize_kernel.cuh), the first
// half of the dequant path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/core/kernel_key.h"

namespace mixgemm::dequant {

// Writes W^T [N, K] row-major (the key's activation type) from a PackedWeight's tensors (device pointers) in the
// key's layout: packed words, scales and folded offsets [K/G, N].
// Rules (std::invalid_argument otherwise): bits 4 or 8; the dequant path's shape rules (core/shape_rules.h);
// non-null pointers; packed 16-byte, out 4-byte and scales, offsets 2-byte aligned.
void dequantize_packed(const KernelKey& key, const int32_t* packed, const void* scales, const void* offsets, void* out,
                       int N, int K, int group_size, cudaStream_t stream);

}  // namespace mixgemm::dequant
