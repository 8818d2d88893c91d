// Fast int8 -> fp16 / bf16 conversion of four 8-bit values packed in one 32-bit word.
//
// Input: byte i (bits 8i..8i+7) holds a code: unsigned 0..255 (the sm80 layout stores int8 weights biased
// by +128 and folds the zero point into the offsets, so it needs no sign handling), or, for Codes::kSigned
// (the sm90 layout), q - 128 in two's complement, i.e. q ^ 0x80. Output: two packed pairs of the codes'
// values (q, or q - 128 for signed codes), paired as the layout stores them:
//   BytePairs::kAdjacent: pair 0 = (byte 0, byte 1), pair 1 = (byte 2, byte 3). The sm80 layout stores each
//                         word as one mma B-fragment n8 tile, {b0 b1 | b2 b3}, so the pairs are its two
//                         registers.
//   BytePairs::kStrided:  pair 0 = (byte 0, byte 2), pair 1 = (byte 1, byte 3). The sm90 layout stores a
//                         word as the two rows (n, n + 8) of one k-pair interleaved, {row0 k0, row1 k0,
//                         row0 k1, row1 k1}, so each row's k-pair is every other byte.
//
// fp16 (DESIGN.md section 2): `prmt.b32` places each byte under the exponent byte 0x64, giving the half
// 0x64vv = 1024 + v (a mantissa unit of 0x6400 = 2^10 is 1.0 and v < 2^8 fits the 10 mantissa bits);
// one sub.f16x2 of 1024 finishes. Signed codes are first flipped back to q (one xor of 0x80 per byte) and
// the subtraction is 1024 + 128 = 1152 (0x6480), giving q - 128 exactly.
// bf16 has 7 mantissa bits, too few for 0..255 under one exponent, so each byte goes under the fp32
// exponent of 2^23 (0x4B000000: a mantissa unit of 1.0), an fp32 subtraction of 2^23 (2^23 + 128 for
// signed codes) gives the value exactly, and the conversion to bf16 is exact because it has at most 8
// significant bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "mixgemm/convert/int4_to_float.cuh"  // Codes

namespace mixgemm::convert {

struct Pairs2 {
  uint32_t pair[2];
};

enum class BytePairs { kAdjacent, kStrided };

// d = bytes of {b:a} chosen by `selector` (nibble i picks d's byte i; 0-3 = a's bytes, 4-7 = b's).
__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// The bytes (lo, hi) of pair p.
template <BytePairs pairs>
__device__ __forceinline__ constexpr int pair_byte(int p, int which) {
  return pairs == BytePairs::kAdjacent ? 2 * p + which : p + 2 * which;
}

template <Codes codes, BytePairs pairs>
__device__ __forceinline__ Pairs2 int8x4_to_half(uint32_t w) {
  constexpr uint32_t kMagic = 0x64006400;  // half2(1024, 1024); its byte 1 (and 3) is the exponent 0x64
  constexpr uint32_t kBias = codes == Codes::kSigned ? 0x64806480 : kMagic;  // half2(1152) or half2(1024)
  if constexpr (codes == Codes::kSigned) w ^= 0x80808080;
  // Selector nibble i picks d's byte i from {kMagic : w} (w's bytes are 0-3, kMagic's 4-7; kMagic holds
  // 0x64 at its bytes 1 and 3, i.e. 5 and 7): d = [w.b(lo), 0x64, w.b(hi), 0x64], e.g. 0x7150 for bytes
  // (0, 1) and 0x7250 for bytes (0, 2).
  Pairs2 out;
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const uint32_t selector = 0x7050u | (pair_byte<pairs>(p, 1) << 8) | pair_byte<pairs>(p, 0);
    out.pair[p] = byte_perm(w, kMagic, selector);
    asm("sub.f16x2 %0, %0, %1;\n" : "+r"(out.pair[p]) : "r"(kBias));
  }
  return out;
}

template <Codes codes, BytePairs pairs>
__device__ __forceinline__ Pairs2 int8x4_to_bfloat16(uint32_t w) {
  constexpr uint32_t kMagic = 0x4B000000;  // 2^23 as fp32: bytes 0-2 are zero, byte 3 is 0x4B
  constexpr float kBias = codes == Codes::kSigned ? 8388608.0f + 128.0f : 8388608.0f;
  if constexpr (codes == Codes::kSigned) w ^= 0x80808080;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // d = [byte i of w, 0, 0, 0x4B]: selector nibbles (byte 3..0) = 7 (b.b3), 6 (b.b2), 5 (b.b1), i.
    const uint32_t bits = byte_perm(w, kMagic, 0x7650 | static_cast<uint32_t>(i));
    v[i] = __uint_as_float(bits) - kBias;
  }
  Pairs2 out;
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(v[pair_byte<pairs>(p, 0)], v[pair_byte<pairs>(p, 1)]);
    out.pair[p] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  return out;
}

// Dispatch on the activation type: T is __half or __nv_bfloat16.
template <typename T, Codes codes = Codes::kUnsigned, BytePairs pairs = BytePairs::kAdjacent>
__device__ __forceinline__ Pairs2 int8x4_to(uint32_t w) {
  if constexpr (std::is_same_v<T, __half>) {
    return int8x4_to_half<codes, pairs>(w);
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "fp16 or bf16 activations");
    return int8x4_to_bfloat16<codes, pairs>(w);
  }
}

// The sm80 layout's int8 words: unsigned codes, adjacent pairs.
template <typename T>
__device__ __forceinline__ Pairs2 uint8x4_to(uint32_t w) {
  return int8x4_to<T>(w);
}

}  // namespace mixgemm::convert
