// Device side of AWQ -> "mixgemm int4 v1" prepack: layout arithmetic and the two kernels.
//
// The kernel layout (spec and CPU twin: python/mixgemm/layouts/sm80.py):
//   packed: int32 [N/64, K/16, 32, 4]. Word (nb, kb, lane, j) is the B register that `lane` feeds to
//   mma.sync.m16n8k16 for the 16(k) x 16(n) sub-block j of the 16 x 64 block (kb, nb). With
//   t = lane % 4, c = lane / 4:  n0 = 64 nb + 16 j + c,  n1 = n0 + 8,  k0 = 16 kb + 2 t, and the
//   fragment elements are
//     e = [q(k0,n0), q(k0+1,n0), q(k0+8,n0), q(k0+9,n0), q(k0,n1), q(k0+1,n1), q(k0+8,n1), q(k0+9,n1)].
//   Nibble i of the word holds e[REG_ORDER[i]], REG_ORDER = [0,2,4,6,1,3,5,7], so the converter's
//   half2 built from nibbles (p, p+4) is (e[2p], e[2p+1]), the mma fragment registers in order.
//
// The kernels are templates (on block size / element type) so this header can be included by more
// than one translation unit without duplicate symbols.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/layout/geometry.h"

namespace mixgemm::prepack {

// Shape of one sm80-layout strip slab (layout/geometry.h): 16 K rows (one m16n8k16 step) x 64 N columns,
// 32 lanes x 4 words for int4.
using Int4Sm80 = layout::Geometry<WeightLayout::kSm80, 4>;
constexpr int kBlockK = layout::kSlabK;
constexpr int kBlockN = Int4Sm80::kStripN;
constexpr int kLanes = layout::kLanes;
constexpr int kWordsPerLane = Int4Sm80::kWordsPerLane;
constexpr int kWordsPerBlock = kLanes * kWordsPerLane;  // 128 words = 512 bytes
constexpr int kAwqPack = 8;                             // int4 values per AWQ int32

// Both AWQ and our register interleave use the permutation [0,2,4,6,1,3,5,7] ("nibble i holds item
// ORDER[i]"). Its inverse, "item m sits in nibble [0,4,1,5,2,6,3,7][m]", is (m >> 1) | ((m & 1) << 2):
// even items fill nibbles 0..3, odd items nibbles 4..7.
__host__ __device__ constexpr int nibble_of_item(int item) { return (item >> 1) | ((item & 1) << 2); }

// The 4-bit value of AWQ column `column_in_pack` (0..7) of one AWQ word, as 0..15.
__host__ __device__ inline uint32_t awq_value(uint32_t awq_word, int column_in_pack) {
  return (awq_word >> (4 * nibble_of_item(column_in_pack))) & 0xFu;
}

// Places the eight fragment elements e[0..7] (each 0..15) into one register-interleaved word.
__host__ __device__ inline uint32_t interleave_fragment(const uint32_t (&e)[8]) {
  // (No #pragma unroll: this is also host code, where GCC warns about it; a fixed 8-trip loop unrolls anyway.)
  uint32_t word = 0;
  for (int m = 0; m < 8; ++m) word |= e[m] << (4 * nibble_of_item(m));
  return word;
}

// One thread per output word. Consecutive threads write consecutive words, so every warp stores 128
// contiguous bytes. Each thread reads 4 K rows x 2 AWQ words: column c of n0's pack and of n1's pack,
// which are adjacent words (n0 / 8 = 8 nb + 2 j is even, n1 / 8 = n0 / 8 + 1). The 8 lanes sharing a t
// read the same AWQ words for different c, so after the first warp the reads hit L1/L2 and DRAM sees
// each input byte about once. Measured on H100 (K=8192, N=28672): ~157 us, ~1.5 TB/s read+write, about
// half of cudaMemcpy's 2.9 TB/s; with only 4 bytes per thread the limit is load instructions and memory
// requests in flight, not DRAM. That is ~50 ms for the ~35 GB of a 70B model, far below anything that
// matters for a one-time prepack (a 4-words-per-thread variant reached ~1.9 TB/s; not worth the code).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    awq_to_kernel_layout_kernel(const int32_t* __restrict__ awq_qweight, int32_t* __restrict__ packed, int K, int N) {
  static_assert(kThreads <= 256, "the 32-bit block index below needs (2^31 - 1) * kThreads / 128 < 2^32");
  const int64_t word = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t total_words = static_cast<int64_t>(K) * N / kAwqPack;
  if (word >= total_words) return;

  // Decode (nb, kb, lane, j) from the row-major index into [N/64, K/16, 32, 4].
  // The block index fits in 32 bits (at most 2^31 - 1 thread blocks of <= 256 threads, so word / 128 <
  // 2^32), and a 32-bit division by K/16 is far cheaper than a 64-bit one.
  const int j = static_cast<int>(word % kWordsPerLane);
  const int lane = static_cast<int>((word / kWordsPerLane) % kLanes);
  const uint32_t block = static_cast<uint32_t>(word / kWordsPerBlock);
  const uint32_t k_blocks = static_cast<uint32_t>(K / kBlockK);
  const int kb = static_cast<int>(block % k_blocks);
  const int nb = static_cast<int>(block / k_blocks);
  const int t = lane % 4;
  const int c = lane / 4;

  const int k0 = kBlockK * kb + 2 * t;
  const int64_t packs_per_row = N / kAwqPack;
  const int64_t pack0 = (static_cast<int64_t>(kBlockN) * nb + 16 * j) / kAwqPack;  // AWQ word of n0 (and n1 next)
  // The B fragment's rows: b0, b1 = k0, k0 + 1 and b2, b3 = k0 + 8, k0 + 9.
  const int row_offset[4] = {0, 1, 8, 9};

  uint32_t e[8];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int32_t* row = awq_qweight + static_cast<int64_t>(k0 + row_offset[r]) * packs_per_row + pack0;
    e[r] = awq_value(static_cast<uint32_t>(__ldg(row)), c);          // first n8 tile: column n0
    e[4 + r] = awq_value(static_cast<uint32_t>(__ldg(row + 1)), c);  // second n8 tile: column n1 = n0 + 8
  }
  packed[word] = static_cast<int32_t>(interleave_fragment(e));
}

// Activation dtype <-> float through the explicit intrinsics, so the code also builds where
// __CUDA_NO_HALF_CONVERSIONS__ / __CUDA_NO_BFLOAT16_CONVERSIONS__ are defined (PyTorch extensions do).
// float -> activation dtype is one round-to-nearest-even, the rounding torch's .to() uses.
__device__ inline float to_float(__half value) { return __half2float(value); }
__device__ inline float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
__device__ inline __half round_to(float value, __half*) { return __float2half_rn(value); }
__device__ inline __nv_bfloat16 round_to(float value, __nv_bfloat16*) { return __float2bfloat16_rn(value); }

// One thread per (group, column): offsets = -(z * s). z * s is exact in float (a 4-bit integer times an
// 11- or 8-bit significand), so the single rounding happens when storing, as in the reference's
// (-(z * s)).to(act_dtype). The expression is written as -(z * s) there and here so that even the sign
// of a zero offset matches.
template <typename Scalar, int kThreads>
__global__ void __launch_bounds__(kThreads)
    fold_awq_zeros_kernel(const int32_t* __restrict__ awq_qzeros, const Scalar* __restrict__ scales,
                          Scalar* __restrict__ offsets, int groups, int N) {
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= static_cast<int64_t>(groups) * N) return;
  const int64_t g = index / N;
  const int n = static_cast<int>(index % N);

  const uint32_t zeros_word = static_cast<uint32_t>(__ldg(awq_qzeros + g * (N / kAwqPack) + n / kAwqPack));
  const float z = static_cast<float>(awq_value(zeros_word, n % kAwqPack));
  const float s = to_float(scales[index]);
  offsets[index] = round_to(-(z * s), static_cast<Scalar*>(nullptr));
}

}  // namespace mixgemm::prepack
