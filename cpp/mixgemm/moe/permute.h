// Row moves around the sm90 grouped form (moe/sm90/): its kernel reads x's rows sorted by expert and writes its
// products in that order (TMA moves whole boxes of consecutive rows: it cannot gather nor scatter), so the
// rows are gathered before, the gated projection's SiLU(gate) * up is taken between the two GEMMs, and the rows
// are summed back per token after. 16-bit activations (fp16 or bf16); every row a multiple of 8 elements, moved
// 16 bytes at a time. Host API; the kernels are in permute.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/core/kernel_key.h"

namespace mixgemm::moe {

// dst[p] = src[src_row[p]] for p < *rows_in_use (a device count: the routing's num_padded); dst [max_rows, K].
void gather_rows(const void* src, int src_rows, const int32_t* src_row, const int32_t* rows_in_use, void* dst,
                 int max_rows, int K, cudaStream_t stream);

// out[p, j] = SiLU(h[p, gate of j]) * h[p, up of j] for p < *rows_in_use, j < inter: h [max_rows, 2 x inter] in
// the gated interleave of python/mixgemm/moe/experts.py (runs of 8 columns, gate run i then up run i), out
// [max_rows, inter]; SiLU and the product in fp32.
void silu_mul_runs(ActType act, const void* h, const int32_t* rows_in_use, void* out, int max_rows, int inter,
                   cudaStream_t stream);

// y[t] = sum over j < top_k, in j order, of weight[t * top_k + j] * src[position_of[t * top_k + j]], in fp32
// (weights null: 1), for t < tokens; a slot at position -1 (routed nowhere) adds nothing. y [tokens, N].
// With top_k = 1 it scatters sorted rows back to slot order.
void combine_rows(ActType act, const void* src, int src_rows, const int32_t* position_of, const float* weights,
                  void* y, int tokens, int top_k, int N, cudaStream_t stream);

}  // namespace mixgemm::moe
