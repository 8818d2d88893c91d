// The sm90 weight layout's fragment code (fragments.cuh lists what a layout provides; geometry.h its shape).
//
// [K/16, N/16, 32, Bits/4] words, signed codes, the register order CUTLASS 3.x's collective converts
// (python/mixgemm/layouts/sm90.py). A lane's word of one block is 4 bytes (int4) or 8 (int8) inside a warp's
// contiguous 128 (256) bytes, and a strip's four blocks of a slab are 512 (1024) contiguous bytes. Inside a
// word the codes are already the A fragment of W^T (register order a0..a3 = (row c, k lo), (row c + 8, k lo),
// (row c, k hi), (row c + 8, k hi)): converter pair p = 2 r + h for int4 (nibble pairs (p, p + 4)); for int8
// word r holds bytes {(c, k0), (c + 8, k0), (c, k1), (c + 8, k1)}, so strided byte pairs give row h.
//
// Per 64-deep batch (4 slabs x 4 blocks) a lane of the decode path issues 16 4-byte loads here against 4
// 16-byte loads on the sm80 layout; either way a warp instruction reads whole 128-byte lines and the same
// 2 KiB per warp are in flight.
#pragma once

#include <cstdint>

#include "mixgemm/common/streaming_loads.cuh"
#include "mixgemm/convert/biased_codes.cuh"
#include "mixgemm/convert/int4_to_float.cuh"
#include "mixgemm/convert/int8_to_float.cuh"
#include "mixgemm/layout/fragments.cuh"

namespace mixgemm::layout {

template <int Bits>
struct LayoutOf<WeightLayout::kSm90, Bits> {
  using Shape = Geometry<WeightLayout::kSm90, Bits>;
  static constexpr int kWordsPerBlock = Shape::kWordsPerBlock;
  static constexpr int kWordsPerSlab = (kStripN / kBlockN) * kWordsPerBlock;  // a strip's four blocks
  static constexpr int kBlockWords = kLanes * kWordsPerBlock;  // one 16 x 16 block, all lanes

  // The two n8 tiles' scaled B fragments of one block: the words hold the lane's A fragment of W^T (row h
  // of W^T = column c + 8 h of W, k half r), codes signed, so B register r of n8 tile h is A register
  // p = 2 r + h. int4: one word, converter pair p = A register p; int8: two words, word r = k half r, whose
  // strided byte pairs are rows h = 0, 1.
  template <typename T>
  __device__ static mma::BFragPair b_fragments(const uint32_t* words, const mma::ColumnQuant<T>& quant) {
    uint32_t q[2][2];  // unscaled: q[tile][reg], tile h = column c + 8 h, reg r = k half r
    if constexpr (Bits == 4) {
      const convert::Pairs4 pairs = convert::int4x8_to<T, convert::Codes::kSigned>(words[0]);
#pragma unroll
      for (int p = 0; p < 4; ++p) q[p % 2][p / 2] = pairs.pair[p];
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const convert::Pairs2 pairs =
            convert::int8x4_to<T, convert::Codes::kSigned, convert::BytePairs::kStrided>(words[r]);
        q[0][r] = pairs.pair[0];
        q[1][r] = pairs.pair[1];
      }
    }
    return mma::scale_fragments<T>(q, quant);
  }

  // Where a lane's words of a strip are: slab `slab` of `strip` starts at lane_words(...) + slab *
  // slab_words(...) (the decode path steps that pointer batch by batch instead of recomputing it). A slab
  // holds the blocks of all N columns, so its stride is a runtime value.
  __device__ static const int32_t* lane_words(const int32_t* B, int N, int K, int strip, int lane) {
    return B + (4 * strip) * kBlockWords + lane * kWordsPerBlock;
  }
  __device__ static int slab_words(int N, int K) { return (N / kBlockN) * kBlockWords; }

  // words[s][...] = this lane's words of the kSlabs slabs from `w` (a lane_words pointer moved to the first):
  // block j of a slab lies kBlockWords after block j - 1.
  template <int kSlabs>
  __device__ static void load_slabs(uint32_t (&words)[kSlabs][kWordsPerSlab], const int32_t* w, int slab_words) {
#pragma unroll
    for (int s = 0; s < kSlabs; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int32_t* src = w + s * slab_words + j * kBlockWords;
        if constexpr (Bits == 4) {
          words[s][j] = load_streaming_v1(src);
        } else {
          const uint2 x = load_streaming_v2(src);
          words[s][2 * j] = x.x, words[s][2 * j + 1] = x.y;
        }
      }
  }

  // L2 prefetch of what load_strip_slabs() (layouts.cuh) reads for the same slabs: a slab's four blocks are one
  // contiguous run of 512 bytes (1024 for int8), one line per lane group of 8 (16).
  template <int kSlabs>
  __device__ static void prefetch(const int32_t* B, int N, int K, int strip, int slab0, int lane) {
    const int64_t row_words = slab_words(N, K);
    const int32_t* w = B + slab0 * row_words + (4 * strip) * kBlockWords + lane * (4 * kBlockWords / 32);
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) prefetch_l2(w + s * row_words);
  }

  template <typename T>
  __device__ static void fragment(const uint32_t* block_words, const RowQuant<T>& quant, uint32_t (&a)[4]) {
    scaled_a_fragment<T, Bits, WeightLayout::kSm90>(block_words, quant, a);
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

}  // namespace mixgemm::layout
