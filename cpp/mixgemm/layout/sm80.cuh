// The sm80 weight layout's fragment code (fragments.cuh lists what a layout provides; geometry.h its shape).
//
// [N/64, K/16, 32, 4 * Bits/4] words, unsigned codes (python/mixgemm/layouts/sm80.py specifies every bit).
// Per strip slab a lane's words of the strip's four 16 x 16 blocks are adjacent: one 16-byte load (two for
// int8). Inside a word the codes are the *B* fragments of mma.m16n8k16 for W (n8 tile h = column c + 8 h,
// register r = k 2t + 8r + {0, 1}): converter pair p = 2 h + r (int4) or word h, pair r (int8).
#pragma once

#include <cstdint>

#include "mixgemm/common/streaming_loads.cuh"
#include "mixgemm/convert/biased_codes.cuh"
#include "mixgemm/convert/int4_to_float.cuh"
#include "mixgemm/convert/int8_to_float.cuh"
#include "mixgemm/layout/fragments.cuh"

namespace mixgemm::layout {

template <int Bits>
struct LayoutOf<WeightLayout::kSm80, Bits> {
  using Shape = Geometry<WeightLayout::kSm80, Bits>;
  static constexpr int kWordsPerBlock = Shape::kWordsPerBlock;  // per lane per 16 x 16 block
  static constexpr int kWordsPerSlab = Shape::kWordsPerLane;    // the strip's four blocks

  // The two n8 tiles' scaled B fragments of one block: the words hold the lane's B fragments in register
  // order, codes unsigned. int4: one word, nibbles interleaved so that the converter's pair p is fragment
  // register p (pairs 0, 1 -> n8 tile 0 {b0b1, b2b3}; pairs 2, 3 -> n8 tile 1); int8: two words, word h =
  // n8 tile h with bytes {b0 b1 b2 b3}, the converter's pairs {b0b1, b2b3}.
  template <typename T>
  __device__ static mma::BFragPair b_fragments(const uint32_t* words, const mma::ColumnQuant<T>& quant) {
    uint32_t q[2][2];  // unscaled: q[tile][reg], tile h = column c + 8 h, reg r = k half r
    if constexpr (Bits == 4) {
      const convert::Pairs4 pairs = convert::int4x8_to<T>(words[0]);
#pragma unroll
      for (int p = 0; p < 4; ++p) q[p / 2][p % 2] = pairs.pair[p];
    } else {
#pragma unroll
      for (int tile = 0; tile < 2; ++tile) {
        const convert::Pairs2 pairs = convert::uint8x4_to<T>(words[tile]);
        q[tile][0] = pairs.pair[0];
        q[tile][1] = pairs.pair[1];
      }
    }
    return mma::scale_fragments<T>(q, quant);
  }

  // Where a lane's words of a strip are: slab `slab` of `strip` starts at lane_words(...) + slab *
  // slab_words(...) (the decode path steps that pointer batch by batch instead of recomputing it).
  // Per strip the slabs follow each other along K: the slab stride is a constant.
  __device__ static const int32_t* lane_words(const int32_t* B, int N, int K, int strip, int lane) {
    return B + static_cast<int64_t>(strip) * (K / kSlabK) * (32 * kWordsPerSlab) + lane * kWordsPerSlab;
  }
  __device__ static constexpr int slab_words(int N, int K) { return 32 * kWordsPerSlab; }

  // words[s][...] = this lane's words of the kSlabs slabs from `w` (a lane_words pointer moved to the first).
  template <int kSlabs>
  __device__ static void load_slabs(uint32_t (&words)[kSlabs][kWordsPerSlab], const int32_t* w, int slab_words) {
#pragma unroll
    for (int s = 0; s < kSlabs; ++s)
#pragma unroll
      for (int v = 0; v < kWordsPerSlab / 4; ++v) {
        const uint4 x = load_streaming_v4(w + s * slab_words + 4 * v);
        words[s][4 * v] = x.x, words[s][4 * v + 1] = x.y, words[s][4 * v + 2] = x.z, words[s][4 * v + 3] = x.w;
      }
  }

  // L2 prefetch of what load_strip_slabs() (layouts.cuh) reads for the same slabs: the warp's addresses of a
  // slab span 512 bytes (1024 for int8), so one prefetch per lane and 16-byte vector covers them.
  template <int kSlabs>
  __device__ static void prefetch(const int32_t* B, int N, int K, int strip, int slab0, int lane) {
    const int32_t* w = lane_words(B, N, K, strip, lane) + static_cast<int64_t>(slab0) * slab_words(N, K);
#pragma unroll
    for (int s = 0; s < kSlabs; ++s)
#pragma unroll
      for (int v = 0; v < kWordsPerSlab / 4; ++v) prefetch_l2(w + s * slab_words(N, K) + 4 * v);
  }

  template <typename T>
  __device__ static void fragment(const uint32_t* block_words, const RowQuant<T>& quant, uint32_t (&a)[4]) {
    scaled_a_fragment<T, Bits, WeightLayout::kSm80>(block_words, quant, a);
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

}  // namespace mixgemm::layout
