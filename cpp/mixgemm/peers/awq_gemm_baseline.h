// Host entry point of the in-tree baseline: our re-implementation of the design of vLLM's AWQ
// GEMM (gemm_forward_4bit_cuda_m16nXk32). It exists to be benchmarked against, so it keeps that
// design (and its split-K contract: fp16 partials that the caller sums over the split axis).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mixgemm::peers {

// partials[z, m, n] = sum over the 32-wide K steps i with i % split_k_iters == z of
//                     x[m, k] * (qweight[k, n] - qzeros[k / group_size, n]) * scales[k / group_size, n],
// rounded to fp16 once per split; the result of the GEMM is partials.sum(0).
//
// All pointers are device pointers:
//   x        fp16  [M, K] row-major, 16-byte aligned
//   qweight  int32 [K, N / 8], AWQ packing: nibble i (bits 4i..4i+3) of word c holds column
//            8c + ORDER[i], ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
//   scales   fp16  [K / group_size, N], 16-byte aligned
//   qzeros   int32 [K / group_size, N / 8], same packing as qweight
//   partials fp16  [split_k_iters, M, N], 4-byte aligned; every element is written
// Rules (std::invalid_argument otherwise): M >= 0, N >= 64 and N % 64 == 0, K >= 32 and
// K % 32 == 0, group_size >= 32, group_size % 32 == 0, K % group_size == 0, split_k_iters >= 1,
// the alignments above. M == 0 returns without launching. Uses N_TILE = 128 when N % 128 == 0,
// else 64. Launch failures throw std::runtime_error.
void awq_gemm(const void* x, const int32_t* qweight, const void* scales, const int32_t* qzeros,
              void* partials, int M, int N, int K, int group_size, int split_k_iters,
              cudaStream_t stream);

}  // namespace mixgemm::peers
