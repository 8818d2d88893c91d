// Dense dequantize of a prepacked weight, either layout: W^T [N, K] row-major (K contiguous), in the
// activation type. It is the first half of the dequant path (ops.py): for large M the weight is expanded
// once per call and one cuBLAS GEMM y = x . W runs on it, which beats the mixed-input kernels where
// cuBLAS's fp16 GEMM outruns them by more than the expansion costs
// (docs/perf-notes/2026-11-23-dequant-path-interleaved-rounds.md).
//
// Work split: one warp per (64-column strip, 16-deep slab), consecutive warps on consecutive slabs of a
// strip, so the eight warps of a block complete 128-byte runs of 64 output rows. A lane loads its words of
// the slab's four 16 x 16 blocks and turns each block into the scaled A fragment of W^T exactly as the
// decode path does (layout/fragments.cuh): register 0 = (row c, k 2t..2t+1), 1 = (row c + 8, same k),
// 2 = (row c, k 2t+8..2t+9), 3 = (row c + 8, k 2t+8..2t+9), with lane = 4 c + t. Each register is stored
// where it belongs: one warp store writes 8 rows x 16 contiguous bytes, and the block's companion store
// (k + 8) writes the other 16 bytes of the same 32-byte sectors, so L2 merges both into whole sectors
// before they reach DRAM.
//
// Memory bound: per element 0.5 B (int4) or 1 B (int8) read and 2 B written; scales and offsets are read
// once per (slab, column) and come from L2 (a group's row is shared by its G / 16 slabs).
//
// Exactness: each value is one fma of the exact code with the scale and the folded offset, rounded once:
// fp16(q * s + o), the value the GEMM kernels multiply.
#pragma once

#include <cstdint>

#include "mixgemm/common/mma_m16n8k16.cuh"
#include "mixgemm/layout/layouts.cuh"

namespace mixgemm::dequant {

constexpr int kPackedDequantThreads = 256;
constexpr int kPackedStripN = layout::kStripN;  // columns per strip (both layouts are walked strip by strip)
constexpr int kPackedSlabK = layout::kSlabK;     // K rows per slab (both layouts)

template <typename T, int Bits, WeightLayout kLayout>
__global__ void __launch_bounds__(kPackedDequantThreads)
    packed_dequantize_kernel(const int32_t* packed, const T* scales, const T* offsets, T* out, int N, int K,
                             int group_size) {
  using Layout = layout::LayoutOf<kLayout, Bits>;
  using Traits = mma::ActTraits<T>;
  const int slabs = K / kPackedSlabK;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kPackedDequantThreads + threadIdx.x) / 32;
  if (warp >= static_cast<int64_t>(N / kPackedStripN) * slabs) return;  // whole warps only: N, K are tiled
  const int strip = static_cast<int>(warp / slabs), slab = static_cast<int>(warp % slabs);
  const int lane = threadIdx.x % 32, t = lane % 4, c = lane / 4;

  uint32_t words[1][Layout::kWordsPerSlab];
  layout::load_strip_slabs<Layout, 1>(words, packed, N, K, strip, slab, lane);

  // group_size % 16 == 0 (host rule): the whole slab shares one scale row.
  const int group = slab * kPackedSlabK / group_size;
  const int64_t quant_row = static_cast<int64_t>(group) * N + strip * kPackedStripN + c;
  const int64_t K64 = K;
  T* row = out + (static_cast<int64_t>(strip) * kPackedStripN + c) * K64 + slab * kPackedSlabK + 2 * t;
#pragma unroll
  for (int j = 0; j < kPackedStripN / 16; ++j) {
    layout::RowQuant<T> quant;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      quant.scale[half] = Traits::broadcast(scales[quant_row + 16 * j + 8 * half]);
      quant.offset[half] = Traits::broadcast(offsets[quant_row + 16 * j + 8 * half]);
    }
    uint32_t a[4];
    Layout::template fragment<T>(&words[0][j * Layout::kWordsPerBlock], quant, a);
    T* block = row + 16 * j * K64;  // rows 16 j + c (registers 0, 2) and 16 j + c + 8 (registers 1, 3)
    *reinterpret_cast<uint32_t*>(block) = a[0];
    *reinterpret_cast<uint32_t*>(block + 8) = a[2];
    *reinterpret_cast<uint32_t*>(block + 8 * K64) = a[1];
    *reinterpret_cast<uint32_t*>(block + 8 * K64 + 8) = a[3];
  }
}

}  // namespace mixgemm::dequant
