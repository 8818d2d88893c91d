// Fast uint8 -> fp16 / bf16 conversion of four 8-bit values packed in one 32-bit word.
//
// Input: byte i (bits 8i..8i+7) holds an unsigned value 0..255 (int8 weights are stored biased by +128,
// and the zero point is folded into the offsets, so no sign handling is needed). Output: two packed
// pairs, pair 0 = (byte 0, byte 1), pair 1 = (byte 2, byte 3) as (low half, high half): our int8 layout
// stores each word as one mma B-fragment n8 tile, {b0 b1 | b2 b3}, so the pairs are its two registers.
//
// fp16 (DESIGN.md section 2): `prmt.b32` places each byte under the exponent byte 0x64, giving the half
// 0x64vv = 1024 + v (a mantissa unit of 0x6400 = 2^10 is 1.0 and v < 2^8 fits the 10 mantissa bits);
// one sub.f16x2 of 1024 finishes.
// bf16 has 7 mantissa bits, too few for 0..255 under one exponent, so each byte goes under the fp32
// exponent of 2^23 (0x4B000000: a mantissa unit of 1.0), an fp32 subtraction of 2^23 gives v exactly,
// and the conversion to bf16 is exact because v has at most 8 significant bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mixgemm::convert {

struct Pairs2 {
  uint32_t pair[2];
};

// d = bytes of {b:a} chosen by `selector` (nibble i picks d's byte i; 0-3 = a's bytes, 4-7 = b's).
__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

__device__ __forceinline__ Pairs2 uint8x4_to_half(uint32_t w) {
  constexpr uint32_t kMagic = 0x64006400;  // half2(1024, 1024); its byte 1 (and 3) is the exponent 0x64
  // Selector nibble i picks d's byte i from {kMagic : w} (w's bytes are 0-3, kMagic's 4-7; kMagic holds
  // 0x64 at its bytes 1 and 3, i.e. 5 and 7). 0x7150: d = [w.b0, 0x64, w.b1, 0x64]; 0x7352 likewise.
  Pairs2 out;
  out.pair[0] = byte_perm(w, kMagic, 0x7150);  // (1024 + byte0, 1024 + byte1)
  out.pair[1] = byte_perm(w, kMagic, 0x7352);  // (1024 + byte2, 1024 + byte3)
  asm("sub.f16x2 %0, %0, %1;\n" : "+r"(out.pair[0]) : "r"(kMagic));
  asm("sub.f16x2 %0, %0, %1;\n" : "+r"(out.pair[1]) : "r"(kMagic));
  return out;
}

__device__ __forceinline__ Pairs2 uint8x4_to_bfloat16(uint32_t w) {
  constexpr uint32_t kMagic = 0x4B000000;  // 2^23 as fp32: bytes 0-2 are zero, byte 3 is 0x4B
  constexpr float kMagicValue = 8388608.0f;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // d = [byte i of w, 0, 0, 0x4B]: selector nibbles (byte 3..0) = 7 (b.b3), 6 (b.b2), 5 (b.b1), i.
    const uint32_t bits = byte_perm(w, kMagic, 0x7650 | static_cast<uint32_t>(i));
    v[i] = __uint_as_float(bits) - kMagicValue;
  }
  Pairs2 out;
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
  out.pair[0] = *reinterpret_cast<const uint32_t*>(&lo);
  out.pair[1] = *reinterpret_cast<const uint32_t*>(&hi);
  return out;
}

template <typename T>
__device__ __forceinline__ Pairs2 uint8x4_to(uint32_t w);
template <>
__device__ __forceinline__ Pairs2 uint8x4_to<__half>(uint32_t w) {
  return uint8x4_to_half(w);
}
template <>
__device__ __forceinline__ Pairs2 uint8x4_to<__nv_bfloat16>(uint32_t w) {
  return uint8x4_to_bfloat16(w);
}

}  // namespace mixgemm::convert
