// Fast int4 -> fp16 / bf16 conversion of eight 4-bit values packed in one 32-bit word.
//
// Input: a word whose nibble i (bits 4i..4i+3) holds a code: unsigned 0..15 (the sm80 layout, AWQ), or
// signed -8..7 in two's complement (the sm90 layout). Output: four packed pairs, pair p = (nibble p,
// nibble p + 4) as (low half, high half), each the code's value (q, or q - 8 for a signed code). Both the
// AWQ packing (nibble i holds column [0,2,4,6,1,3,5,7][i]) and our kernel layouts store values in exactly
// that interleaved order, so pair p comes out as logical elements (2p, 2p+1) without any shuffling.
//
// The trick (DESIGN.md section 2): a float whose exponent makes one mantissa unit worth 1.0 turns an
// integer OR-ed into its low mantissa bits into `magic + value`, which one subtraction finishes.
//   fp16: 1 sign, 5 exponent, 10 mantissa bits. 0x6400 = 2^(25-15) = 1024.0, so a mantissa unit is 1.0:
//         0x6400 | v == 1024 + v for v < 1024.
//   bf16: 1 sign, 8 exponent, 7 mantissa bits. 0x4300 = 2^(134-127) = 128.0, so a mantissa unit is 1.0:
//         0x4300 | v == 128 + v for v < 128.
// `lop3.b32` computes (w & mask) | magic for both 16-bit halves in one instruction.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace mixgemm::convert {

// Eight converted values as four packed 16-bit pairs (half2 or nv_bfloat162 bit patterns).
struct Pairs4 {
  uint32_t pair[4];
};

// What the codes of a packed word mean.
//   kUnsigned: q in 0..15 (0..255 for int8), the sm80 layout's storage.
//   kSigned:   q - 8 (q - 128) in two's complement, the sm90 layout's storage (the CUTLASS 3.x collective
//              converts signed codes). Since (q - 8) & 15 == q ^ 8, flipping the top bit of each code
//              gives back q, and the converters fold that flip into their first instruction.
enum class Codes { kUnsigned, kSigned };

// d = (a & b) | c, or (a & b) ^ c for kXor. The lop3 immediate is the truth table of the expression over
// the operand selectors a = 0xF0, b = 0xCC, c = 0xAA: (0xF0 & 0xCC) | 0xAA = 0xEA, (0xF0 & 0xCC) ^ 0xAA = 0x6A.
// With a magic constant c whose bits under the mask b are zero, OR and XOR agree; XOR additionally flips
// the bits of c that lie under the mask, which is how a signed code's top bit is flipped for free.
template <bool kXor = false>
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  if constexpr (kXor) {
    asm("lop3.b32 %0, %1, %2, %3, 0x6A;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  } else {
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  }
  return d;
}

// fp16: nibbles 0/4 and 2/6 sit in the low mantissa bits (after a shift of 8 for 2/6), giving 1024 + v;
// nibbles 1/5 and 3/7 sit in mantissa bits 4..7, giving 1024 + 16 v. Shifting the word right by 4 would
// save the fma but costs an extra shift per word; the fma form is the cheaper one.
// Signed codes: the lop3 also flips bit 3 of each code (the 0x0008 / 0x0080 in the XOR constant), giving
// 1024 + q as before, and the final subtraction removes 8 more: 1024 + 8 = 1032 (0x6408) from the low
// nibbles, and (1024 + 16 q) / 16 - 72 = q - 8 for the high ones (0xD480 = -(2^6 + 2^3) = -72). Both
// results are small integers, exact in fp16.
template <Codes codes>
__device__ __forceinline__ Pairs4 int4x8_to_half(uint32_t w) {
  constexpr bool kSigned = codes == Codes::kSigned;
  constexpr uint32_t kLowMask = 0x000F000F;   // nibble 0 of each 16-bit half
  constexpr uint32_t kHighMask = 0x00F000F0;  // nibble 1 of each 16-bit half
  constexpr uint32_t kMagic = 0x64006400;     // half2(1024, 1024)
  constexpr uint32_t kLowMagic = kSigned ? 0x64086408 : kMagic;   // | (^ for signed) the code's top bit
  constexpr uint32_t kHighMagic = kSigned ? 0x64806480 : kMagic;
  constexpr uint32_t kLowBias = kSigned ? 0x64086408 : kMagic;    // half2(1032) or half2(1024)
  // (1024 + 16 q) * (1/16) - 64 = q. 0x2C00 = 2^(11-15) = 1/16 and 0xD400 = -(2^(21-15)) = -64.
  constexpr uint32_t kOneSixteenth = 0x2C002C00;
  constexpr uint32_t kHighBias = kSigned ? 0xD480D480 : 0xD400D400;  // -72 or -64

  const uint32_t w_shifted = w >> 8;
  Pairs4 out;
  out.pair[0] = and_or<kSigned>(w, kLowMask, kLowMagic);
  out.pair[1] = and_or<kSigned>(w, kHighMask, kHighMagic);
  out.pair[2] = and_or<kSigned>(w_shifted, kLowMask, kLowMagic);
  out.pair[3] = and_or<kSigned>(w_shifted, kHighMask, kHighMagic);
  asm("sub.f16x2 %0, %0, %1;\n" : "+r"(out.pair[0]) : "r"(kLowBias));
  asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(out.pair[1]) : "r"(kOneSixteenth), "r"(kHighBias));
  asm("sub.f16x2 %0, %0, %1;\n" : "+r"(out.pair[2]) : "r"(kLowBias));
  asm("fma.rn.f16x2 %0, %0, %1, %2;\n" : "+r"(out.pair[3]) : "r"(kOneSixteenth), "r"(kHighBias));
  return out;
}

// bf16 has only 7 mantissa bits: 128 + 16 v (v up to 15) would overflow into the exponent, so every
// nibble pair is moved to the low bits by a shift and finished by one subtraction of 128. Signed codes:
// the lop3 flips bit 3 (0x0008) and the subtraction is 128 + 8 = 136 (0x4308), giving q - 8 exactly.
template <Codes codes>
__device__ __forceinline__ Pairs4 int4x8_to_bfloat16(uint32_t w) {
  constexpr bool kSigned = codes == Codes::kSigned;
  constexpr uint32_t kLowMask = 0x000F000F;
  constexpr uint32_t kMagic = kSigned ? 0x43084308 : 0x43004300;  // bfloat162(128) with the flip bit
  constexpr uint32_t kBias = kSigned ? 0x43084308 : 0x43004300;   // bfloat162(136) or bfloat162(128)
  Pairs4 out;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t biased = and_or<kSigned>(w >> (4 * p), kLowMask, kMagic);
    const __nv_bfloat162 value = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased),
                                         *reinterpret_cast<const __nv_bfloat162*>(&kBias));
    out.pair[p] = *reinterpret_cast<const uint32_t*>(&value);
  }
  return out;
}

// Dispatch on the activation type: T is __half or __nv_bfloat16.
template <typename T, Codes codes = Codes::kUnsigned>
__device__ __forceinline__ Pairs4 int4x8_to(uint32_t w) {
  if constexpr (std::is_same_v<T, __half>) {
    return int4x8_to_half<codes>(w);
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "fp16 or bf16 activations");
    return int4x8_to_bfloat16<codes>(w);
  }
}

}  // namespace mixgemm::convert
