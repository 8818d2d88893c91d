// Host entry point of the dense dequantize of a prepacked weight (packed_dequantize_kernel.cuh), the first
// half of the dequant path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/gemm/gemm_args.h"

namespace mixgemm::dequant {

// Writes W^T [N, K] row-major (the activation type: fp16, or bf16 when `bf16`) from a PackedWeight's
// tensors (device pointers) in `layout`: packed words, scales and folded offsets [K/G, N].
// Rules (std::invalid_argument otherwise): bits 4 or 8; N a positive multiple of 64; K a positive multiple
// of 16; group_size a multiple of 16 dividing K; non-null pointers; packed 16-byte, out 4-byte and scales,
// offsets 2-byte aligned.
void dequantize_packed(gemm::WeightLayout layout, int bits, bool bf16, const int32_t* packed, const void* scales,
                       const void* offsets, void* out, int N, int K, int group_size, cudaStream_t stream);

}  // namespace mixgemm::dequant
