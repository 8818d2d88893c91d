// What a weight layout provides to the paths that read it (LayoutOf<layout, Bits>, specialized in sm80.cuh
// and sm90.cuh), and the vocabulary those share:
//   - b_fragments<T>(words, quant): one 16 x 16 block's words -> the two n8 tiles' scaled B fragments of
//     mma.m16n8k16 for W (the sm80 path's main loop);
//   - fragment<T>(words, quant): the same values as the scaled A fragment of W^T (the decode path, which
//     computes D^T = W^T x^T, and the dequant path's expansion);
//   - biased_fragment<T>(words) and biased_row<T>(row): unscaled A fragments whose scale and offset the
//     decode path applies after the mma (RowForm below);
//   - lane_words() / slab_words() / load_slabs<kSlabs>() / prefetch<kSlabs>(): where a lane finds its words of a
//     64-column strip's slabs in global memory (the decode and dequant paths, the latter through
//     load_strip_slabs in layouts.cuh; the sm80 main loop copies whole k-tiles instead,
//     sm80/threadblock/packed_b_tile.cuh).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "mixgemm/common/mma_m16n8k16.cuh"
#include "mixgemm/convert/biased_codes.cuh"
#include "mixgemm/core/kernel_key.h"
#include "mixgemm/layout/geometry.h"

namespace mixgemm::layout {

template <WeightLayout kLayout, int Bits>
struct LayoutOf;

// Asks L2 for the 128-byte line holding `address` (no register is written: the decode kernel issues these
// before it may read anything, see gemv_kernel.cuh). A warp's 32 prefetches of one line are one request.
// No eviction hint: with L2::evict_last the prefetched lines outstayed their use and 8192 x 28672 at M = 1
// took 49.1 us against 47.6 (docs/perf-notes/, decode studies).
__device__ __forceinline__ void prefetch_l2(const void* address) {
  asm volatile("prefetch.global.L2 [%0];\n" : : "l"(address));
}

// Scale and offset pairs of the two rows of W^T (columns c and c + 8 of W) a lane's fragment covers.
template <typename T>
using RowQuant = mma::ColumnQuant<T>;

// Biased fragments (convert/biased_codes.cuh): A registers holding magic + factor * u instead of the code
// value v (v = u for unsigned codes, u - shift for signed ones: shift 8 for int4, 128 for int8). Over one
// scale row, with D = x . A (the mma on biased codes) and X = sum(x):
//     x . v = (D - magic X) / factor - shift X,  so  x . (s v + o) = (s / factor) D + (o - s beta) X
// with beta = magic / factor + shift. RowForm holds (1 / factor, beta) for one A row (c or c + 8): a
// layout must give both of a row's registers the same form.
struct RowForm {
  float inv_factor;
  float beta;
};
__host__ __device__ constexpr RowForm row_form(convert::BiasedForm form, float shift) {
  return RowForm{1.0f / form.factor, form.magic / form.factor + shift};
}

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, __half>;

// The scaled A fragment of one block from its words: the B fragments (n8 tile h = row c + 8 h, registers
// {k lo, k hi}) in A order.
template <typename T, int Bits, WeightLayout kLayout>
__device__ __forceinline__ void scaled_a_fragment(const uint32_t* block_words, const RowQuant<T>& quant,
                                                  uint32_t (&a)[4]) {
  const mma::BFragPair f = LayoutOf<kLayout, Bits>::template b_fragments<T>(block_words, quant);
  a[0] = f.b[0][0], a[1] = f.b[1][0], a[2] = f.b[0][1], a[3] = f.b[1][1];
}

}  // namespace mixgemm::layout
