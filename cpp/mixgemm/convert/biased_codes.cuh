// Codes converted to T *without* the final subtraction: each value is `magic + factor * code`, exact, and
// the caller removes the magic after the mma, in fp32, once per output instead of once per weight.
//
// Why: the converters of int4_to_float.cuh / int8_to_float.cuh end every pair with one sub.f16x2 (or
// fma.f16x2) that turns `magic + code` into `code`. In the decode kernel the mma runs on the codes and the
// scale is applied afterwards (x . W = s (x . q) + o sum(x) over one scale row), so the magic's share of the
// mma result, magic * sum(x), can go with the offset term: the pair subtraction is dropped and the weight's
// conversion is one lop3 (or prmt) per pair.
//
// `code` below is the unsigned code u: q for Codes::kUnsigned, and for Codes::kSigned the stored value
// v = q - 8 (q - 128 for int8) flipped back to u = v ^ 8 = v + 8 (v ^ 0x80 = v + 128), which is what the
// xor-form lop3 produces. Callers that want the signed value subtract 8 (128) more, which again goes with
// the offset term.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "mixgemm/convert/int4_to_float.cuh"  // Codes, Pairs4, and_or
#include "mixgemm/convert/int8_to_float.cuh"  // BytePairs, Pairs2, byte_perm

namespace mixgemm::convert {

// The magic number of each activation type: a float whose mantissa unit is 1.0 (int4_to_float.cuh).
template <typename T>
struct Magic;
template <>
struct Magic<__half> {
  static constexpr uint32_t kPair = 0x64006400;  // half2(1024, 1024)
  static constexpr float kValue = 1024.0f;
};
template <>
struct Magic<__nv_bfloat16> {
  static constexpr uint32_t kPair = 0x43004300;  // bfloat162(128, 128)
  static constexpr float kValue = 128.0f;
};

// How a pair's values relate to the codes: value = magic + factor * code.
struct BiasedForm {
  float magic;
  float factor;
};

// int4, pairs (nibble p, nibble p + 4) as in int4x8_to, for fp16 with one shift per word: pairs 0 and 2
// (nibbles 0/4 and 2/6, low in their byte) are 1024 + u, pairs 1 and 3 (nibbles 1/5 and 3/7, in mantissa
// bits 4..7) are 1024 + 16 u. Used where each output row takes pairs of one kind only (the sm90 layout:
// pair p feeds row p % 2), so the row's factor is known.
template <Codes codes>
__device__ __forceinline__ Pairs4 int4x8_biased_half(uint32_t w) {
  constexpr bool kSigned = codes == Codes::kSigned;
  constexpr uint32_t kLowMagic = kSigned ? 0x64086408 : 0x64006400;   // xor flips bit 3 of a signed code
  constexpr uint32_t kHighMagic = kSigned ? 0x64806480 : 0x64006400;  // ... or bit 7 of the high nibble
  const uint32_t w_shifted = w >> 8;
  Pairs4 out;
  out.pair[0] = and_or<kSigned>(w, 0x000F000F, kLowMagic);
  out.pair[1] = and_or<kSigned>(w, 0x00F000F0, kHighMagic);
  out.pair[2] = and_or<kSigned>(w_shifted, 0x000F000F, kLowMagic);
  out.pair[3] = and_or<kSigned>(w_shifted, 0x00F000F0, kHighMagic);
  return out;
}
// (Forms are constexpr functions, not constants: a namespace-scope constant is a host object, and a device
// function that binds a reference to it reads nothing valid.)
__host__ __device__ constexpr BiasedForm half_low_nibble() { return {1024.0f, 1.0f}; }
__host__ __device__ constexpr BiasedForm half_high_nibble() { return {1024.0f, 16.0f}; }

// int4, the same pairs, every nibble shifted down to the low bits first (three shifts per word): all four
// pairs are magic + u. bf16 needs this (its 7 mantissa bits cannot hold 16 u), and so does an fp16 layout
// whose output rows mix pairs 0 and 1 (the sm80 layout).
template <typename T, Codes codes>
__device__ __forceinline__ Pairs4 int4x8_biased_low(uint32_t w) {
  constexpr bool kSigned = codes == Codes::kSigned;
  constexpr uint32_t kMagic = Magic<T>::kPair | (kSigned ? 0x00080008u : 0u);
  Pairs4 out;
#pragma unroll
  for (int p = 0; p < 4; ++p) out.pair[p] = and_or<kSigned>(w >> (4 * p), 0x000F000F, kMagic);
  return out;
}
template <typename T>
__host__ __device__ constexpr BiasedForm low_nibble() { return {Magic<T>::kValue, 1.0f}; }

// int8 for fp16: each byte under the exponent byte 0x64 (int8_to_float.cuh) is 1024 + u.
template <Codes codes, BytePairs pairs>
__device__ __forceinline__ Pairs2 int8x4_biased_half(uint32_t w) {
  if constexpr (codes == Codes::kSigned) w ^= 0x80808080;
  Pairs2 out;
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const uint32_t selector = 0x7050u | (pair_byte<pairs>(p, 1) << 8) | pair_byte<pairs>(p, 0);
    out.pair[p] = byte_perm(w, 0x64006400, selector);
  }
  return out;
}
__host__ __device__ constexpr BiasedForm half_byte() { return {1024.0f, 1.0f}; }
// The exact converters of int8_to_float.cuh (bf16 int8, whose 7 mantissa bits cannot hold 0..255 under one
// exponent): the registers hold the code values themselves, magic 0 and factor 1.
__host__ __device__ constexpr BiasedForm exact() { return {0.0f, 1.0f}; }

}  // namespace mixgemm::convert
