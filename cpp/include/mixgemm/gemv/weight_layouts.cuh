// The decode path's two weight layouts: where a lane finds its packed words for one 16 (k) x 64 (n) slab
// of a strip, and how those words become the A fragments of D^T = W^T x^T (see gemv_kernel.cuh).
//
// Both layouts keep, per 16 x 16 block of W, the 8 codes lane 4 c + t needs for its mma fragment together
// in one word (int4) or two (int8); they differ in where the blocks sit, in the order of the codes inside
// the word and in the codes' sign:
//
//   sm80 (prepack_ref.py): [N/64, K/16, 32, 4 * Bits / 4] words, unsigned codes. A lane's words for the
//        strip's four 16-column blocks of one slab are adjacent: one 16-byte load (two for int8). Inside a
//        word the codes are the *B* fragments of mma.m16n8k16 for W (n8 tile h = column c + 8 h, register
//        r = k 2t + 8r + {0, 1}): converter pair p = 2 h + r (int4) or word h, pair r (int8).
//   sm90 (sm90_layout.py): [K/16, N/16, 32, Bits / 4] words, signed codes, the register order CUTLASS 3.x's
//        collective converts. A lane's word of one block is 4 bytes (int4) or 8 (int8) inside a warp's
//        contiguous 128 (256) bytes, and the strip's four blocks of a slab are 512 (1024) contiguous bytes.
//        Inside a word the codes are already the A fragment of W^T (register order a0..a3 = (row c, k lo),
//        (row c + 8, k lo), (row c, k hi), (row c + 8, k hi)): converter pair p = 2 r + h for int4 (nibble
//        pairs (p, p + 4)); for int8 word r holds bytes {(c, k0), (c + 8, k0), (c, k1), (c + 8, k1)}, so
//        strided byte pairs give row h.
//
// Per batch (4 slabs x 4 blocks) a lane issues 4 (int4) 16-byte loads on the sm80 layout and 16 4-byte
// loads on the sm90 layout; either way a warp instruction reads whole 128-byte lines and the same 2 KiB
// per warp are in flight.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mixgemm/common/streaming_loads.cuh"
#include "mixgemm/convert/biased_codes.cuh"
#include "mixgemm/convert/int4_to_float.cuh"
#include "mixgemm/convert/int8_to_float.cuh"
#include "mixgemm/gemm/gemm_args.h"
#include "mixgemm/gemm/warp/mma_mixed_input.cuh"

namespace mixgemm::gemv {

// Asks L2 for the 128-byte line holding `address` (no register is written: the decode kernel issues these
// before it may read anything, see gemv_kernel.cuh). A warp's 32 prefetches of one line are one request.
// No eviction hint: with L2::evict_last the prefetched lines outstayed their use and 8192 x 28672 at M = 1
// took 49.1 us against 47.6 (BENCHMARKS.md).
__device__ __forceinline__ void prefetch_l2(const void* address) {
  asm volatile("prefetch.global.L2 [%0];\n" : : "l"(address));
}

// Scale and offset pairs of the two rows of W^T (columns c and c + 8 of W) a lane's fragment covers.
template <typename T>
using RowQuant = gemm::warp::ColumnQuant<T>;

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

// The scaled A fragment of one block from its words (a layout's fragment()): the B fragments the GEMM
// converts (gemm/warp/mma_mixed_input.cuh; n8 tile h = row c + 8 h, registers {k lo, k hi}) in A order.
template <typename T, int Bits, gemm::WeightLayout layout>
__device__ __forceinline__ void scaled_a_fragment(const uint32_t* block_words, const RowQuant<T>& quant,
                                                  uint32_t (&a)[4]) {
  const gemm::warp::BFragPair f = gemm::warp::dequantize_block<T, Bits, layout>(block_words, quant);
  a[0] = f.b[0][0], a[1] = f.b[1][0], a[2] = f.b[0][1], a[3] = f.b[1][1];
}

template <gemm::WeightLayout layout, int Bits>
struct WeightLayoutOf;

// ---------------------------------------------------------------------------------------------------------
template <int Bits>
struct WeightLayoutOf<gemm::WeightLayout::kSm80, Bits> {
  static constexpr int kWordsPerBlock = Bits / 4;      // per lane per 16 x 16 block
  static constexpr int kWordsPerSlab = 4 * kWordsPerBlock;  // the strip's four blocks

  // words[s][...] = this lane's words of slab `slab0 + s` of `strip`, for kSlabs slabs.
  template <int kSlabs>
  __device__ static void load(uint32_t (&words)[kSlabs][kWordsPerSlab], const int32_t* B, int N, int K,
                              int strip, int slab0, int lane) {
    const int32_t* w = B + (static_cast<int64_t>(strip) * (K / 16) + slab0) * (32 * kWordsPerSlab) +
                       lane * kWordsPerSlab;
#pragma unroll
    for (int s = 0; s < kSlabs; ++s)
#pragma unroll
      for (int v = 0; v < kWordsPerSlab / 4; ++v) {
        const uint4 x = load_streaming_v4(w + s * 32 * kWordsPerSlab + 4 * v);
        words[s][4 * v] = x.x, words[s][4 * v + 1] = x.y, words[s][4 * v + 2] = x.z, words[s][4 * v + 3] = x.w;
      }
  }

  // L2 prefetch of what load() reads for the same slabs: the warp's addresses of a slab span 512 bytes
  // (1024 for int8), so one prefetch per lane and 16-byte vector covers them.
  template <int kSlabs>
  __device__ static void prefetch(const int32_t* B, int N, int K, int strip, int slab0, int lane) {
    const int32_t* w = B + (static_cast<int64_t>(strip) * (K / 16) + slab0) * (32 * kWordsPerSlab) +
                       lane * kWordsPerSlab;
#pragma unroll
    for (int s = 0; s < kSlabs; ++s)
#pragma unroll
      for (int v = 0; v < kWordsPerSlab / 4; ++v) prefetch_l2(w + s * 32 * kWordsPerSlab + 4 * v);
  }

  template <typename T>
  __device__ static void fragment(const uint32_t* block_words, const RowQuant<T>& quant, uint32_t (&a)[4]) {
    scaled_a_fragment<T, Bits, gemm::WeightLayout::kSm80>(block_words, quant, a);
  }

  // Biased A fragment (unsigned codes). Row c takes n8 tile 0's registers, row c + 8 tile 1's, and int4
  // pairs 0 and 1 both feed row c, so int4 uses the all-low-nibble converter (one factor per row).
  template <typename T>
  __device__ static void biased_fragment(const uint32_t* block_words, uint32_t (&a)[4]) {
    if constexpr (Bits == 4) {
      const convert::Pairs4 q = convert::int4x8_biased_low<T, convert::Codes::kUnsigned>(block_words[0]);
      a[0] = q.pair[0], a[1] = q.pair[2], a[2] = q.pair[1], a[3] = q.pair[3];
    } else {
      convert::Pairs2 q[2];  // word h = n8 tile h = row c + 8 h, pairs {k lo, k hi}
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if constexpr (kIsHalf<T>) {
          q[h] = convert::int8x4_biased_half<convert::Codes::kUnsigned, convert::BytePairs::kAdjacent>(
              block_words[h]);
        } else {
          q[h] = convert::int8x4_to<T>(block_words[h]);
        }
      }
      a[0] = q[0].pair[0], a[1] = q[1].pair[0], a[2] = q[0].pair[1], a[3] = q[1].pair[1];
    }
  }
  // The RowForm of A row `row` (0: c, 1: c + 8) for biased_fragment's registers.
  template <typename T>
  __host__ __device__ static constexpr RowForm biased_row(int /*row*/) {
    if constexpr (Bits == 4) return row_form(convert::low_nibble<T>(), 0.0f);
    return row_form(kIsHalf<T> ? convert::half_byte() : convert::exact(), 0.0f);
  }
};

// ---------------------------------------------------------------------------------------------------------
template <int Bits>
struct WeightLayoutOf<gemm::WeightLayout::kSm90, Bits> {
  static constexpr int kWordsPerBlock = Bits / 4;
  static constexpr int kWordsPerSlab = 4 * kWordsPerBlock;
  static constexpr int kBlockWords = 32 * kWordsPerBlock;  // one 16 x 16 block, all lanes

  template <int kSlabs>
  __device__ static void load(uint32_t (&words)[kSlabs][kWordsPerSlab], const int32_t* B, int N, int K,
                              int strip, int slab0, int lane) {
    const int64_t row_words = static_cast<int64_t>(N / 16) * kBlockWords;  // one slab of all N blocks
    const int32_t* w = B + slab0 * row_words + (4 * strip) * kBlockWords + lane * kWordsPerBlock;
#pragma unroll
    for (int s = 0; s < kSlabs; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int32_t* src = w + s * row_words + j * kBlockWords;
        if constexpr (Bits == 4) {
          words[s][j] = load_streaming_v1(src);
        } else {
          const uint2 x = load_streaming_v2(src);
          words[s][2 * j] = x.x, words[s][2 * j + 1] = x.y;
        }
      }
  }

  // L2 prefetch of what load() reads for the same slabs: a slab's four blocks are one contiguous run of
  // 512 bytes (1024 for int8), one line per lane group of 8 (16).
  template <int kSlabs>
  __device__ static void prefetch(const int32_t* B, int N, int K, int strip, int slab0, int lane) {
    const int64_t row_words = static_cast<int64_t>(N / 16) * kBlockWords;
    const int32_t* w = B + slab0 * row_words + (4 * strip) * kBlockWords + lane * (4 * kBlockWords / 32);
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) prefetch_l2(w + s * row_words);
  }

  template <typename T>
  __device__ static void fragment(const uint32_t* block_words, const RowQuant<T>& quant, uint32_t (&a)[4]) {
    scaled_a_fragment<T, Bits, gemm::WeightLayout::kSm90>(block_words, quant, a);
  }

  // Biased A fragment (signed codes). Register p feeds row p % 2, so fp16 int4 keeps the one-shift
  // converter: row c gets the low nibbles (factor 1), row c + 8 the high ones (factor 16).
  template <typename T>
  __device__ static void biased_fragment(const uint32_t* block_words, uint32_t (&a)[4]) {
    if constexpr (Bits == 4) {
      convert::Pairs4 q;
      if constexpr (kIsHalf<T>) {
        q = convert::int4x8_biased_half<convert::Codes::kSigned>(block_words[0]);
      } else {
        q = convert::int4x8_biased_low<T, convert::Codes::kSigned>(block_words[0]);
      }
#pragma unroll
      for (int p = 0; p < 4; ++p) a[p] = q.pair[p];
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        convert::Pairs2 q;
        if constexpr (kIsHalf<T>) {
          q = convert::int8x4_biased_half<convert::Codes::kSigned, convert::BytePairs::kStrided>(block_words[r]);
        } else {
          q = convert::int8x4_to<T, convert::Codes::kSigned, convert::BytePairs::kStrided>(block_words[r]);
        }
        a[2 * r] = q.pair[0], a[2 * r + 1] = q.pair[1];
      }
    }
  }
  // The RowForm of A row `row` (0: c, 1: c + 8) for biased_fragment's registers.
  template <typename T>
  __host__ __device__ static constexpr RowForm biased_row(int row) {
    if constexpr (Bits == 4) {
      if constexpr (kIsHalf<T>) {
        return row_form(row == 0 ? convert::half_low_nibble() : convert::half_high_nibble(), 8.0f);
      }
      return row_form(convert::low_nibble<T>(), 8.0f);
    }
    // int8: fp16 registers hold 1024 + u with u = v + 128; bf16 ones hold v exactly (no shift).
    return kIsHalf<T> ? row_form(convert::half_byte(), 128.0f) : row_form(convert::exact(), 0.0f);
  }
};

}  // namespace mixgemm::gemv
