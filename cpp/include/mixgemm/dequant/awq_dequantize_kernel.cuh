// Standalone dequantize kernel: AWQ int4 weights -> dense fp16/bf16 [K, N].
//
// Memory bound by construction: per 8 output elements it reads one int32 of weights (4 B) and writes
// 16 B, so 2.5 B of traffic per element; scales and zeros are re-read by every row of a group and stay
// in L1/L2. Each thread owns `Words` consecutive int32 of one row (Words = 4: a 16-byte weight load and
// four 16-byte stores), which keeps every global access 16 bytes wide and fully coalesced.
//
// Exactness: q and z convert to exact small integers, q - z is exact, and one multiply by the scale
// rounds once, so the result equals the float64 value (q - z) * s rounded to the output type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "mixgemm/convert/int4_to_float.cuh"

namespace mixgemm::dequant {

// Packed pair type for T: half2 for __half, nv_bfloat162 for __nv_bfloat16.
template <typename T>
struct PairOf;
template <>
struct PairOf<__half> {
  using type = __half2;
};
template <>
struct PairOf<__nv_bfloat16> {
  using type = __nv_bfloat162;
};

// Loads `Words` int32 (Words in {1, 2, 4}) with one vector instruction.
template <int Words>
__device__ __forceinline__ void load_words(const int32_t* src, uint32_t (&dst)[Words]) {
  if constexpr (Words == 4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
    dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
  } else if constexpr (Words == 2) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(src));
    dst[0] = v.x, dst[1] = v.y;
  } else {
    dst[0] = static_cast<uint32_t>(__ldg(src));
  }
}

// qweight [K, N/8], qzeros [K/G, N/8], scales [K/G, N], out [K, N]; T is the output/scale type.
template <typename T, int Words>
__global__ void __launch_bounds__(256)
    awq_dequantize_kernel(const int32_t* __restrict__ qweight, const T* __restrict__ scales,
                          const int32_t* __restrict__ qzeros, T* __restrict__ out, int K, int N,
                          int group_size) {
  using Pair = typename PairOf<T>::type;
  const int words_per_row = N / 8;
  const int threads_per_row = words_per_row / Words;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (thread >= static_cast<int64_t>(K) * threads_per_row) return;
  const int row = static_cast<int>(thread / threads_per_row);
  const int word0 = static_cast<int>(thread % threads_per_row) * Words;
  const int group = row / group_size;

  uint32_t q_words[Words];
  uint32_t z_words[Words];
  load_words<Words>(qweight + static_cast<int64_t>(row) * words_per_row + word0, q_words);
  load_words<Words>(qzeros + static_cast<int64_t>(group) * words_per_row + word0, z_words);

  const T* scale_row = scales + static_cast<int64_t>(group) * N + word0 * 8;
  T* out_row = out + static_cast<int64_t>(row) * N + word0 * 8;
#pragma unroll
  for (int w = 0; w < Words; ++w) {
    // Eight consecutive columns: their scales are one 16-byte load.
    const uint4 scale_bits = __ldg(reinterpret_cast<const uint4*>(scale_row + 8 * w));
    const Pair* scale = reinterpret_cast<const Pair*>(&scale_bits);
    const convert::Pairs4 q = convert::int4x8_to<T>(q_words[w]);
    const convert::Pairs4 z = convert::int4x8_to<T>(z_words[w]);
    uint4 result;
    Pair* value = reinterpret_cast<Pair*>(&result);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const Pair diff = __hsub2(*reinterpret_cast<const Pair*>(&q.pair[p]),
                                *reinterpret_cast<const Pair*>(&z.pair[p]));
      value[p] = __hmul2(diff, scale[p]);
    }
    // Streaming store: the output is written once and not read back by this kernel.
    __stcs(reinterpret_cast<uint4*>(out_row + 8 * w), result);
  }
}

}  // namespace mixgemm::dequant
