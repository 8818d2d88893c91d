// mma.sync m16n8k16 with fp32 accumulation, and the fragment vocabulary the sm80 path, the decode path and
// the weight layouts share: activation type traits, a lane's scale/offset pairs and its B fragments.
//
// Fragment ownership of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), lane = 4 c + t:
//   A (16x16, row-major): {a0,a1} = row c,   k 2t..2t+1;  {a2,a3} = row c+8, same k;
//                         {a4,a5} = row c,   k 2t+8..+9;  {a6,a7} = row c+8, same k.
//   B (16x8, "col"):      {b0,b1} = k 2t..2t+1, column c;  {b2,b3} = k 2t+8..2t+9, column c.
//   C (16x8):             {c0,c1} = row c, columns 2t..2t+1;  {c2,c3} = row c+8.
// How each weight layout stores a lane's codes of these fragments is in cpp/mixgemm/layout/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cutlass/arch/mma_sm80.h"
#include "cutlass/array.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/numeric_types.h"

namespace mixgemm::mma {

// The CUDA and CUTLASS names of one activation type, and its packed pair.
template <typename T>
struct ActTraits;
template <>
struct ActTraits<__half> {
  using Pair = __half2;
  using Cutlass = cutlass::half_t;
  __device__ static Pair broadcast(__half v) { return __half2half2(v); }
  __device__ static Pair low(Pair v) { return __low2half2(v); }
  __device__ static Pair high(Pair v) { return __high2half2(v); }
  __device__ static __half2 to_pair(float lo, float hi) { return __floats2half2_rn(lo, hi); }
};
template <>
struct ActTraits<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  using Cutlass = cutlass::bfloat16_t;
  __device__ static Pair broadcast(__nv_bfloat16 v) { return __bfloat162bfloat162(v); }
  __device__ static Pair low(Pair v) { return __low2bfloat162(v); }
  __device__ static Pair high(Pair v) { return __high2bfloat162(v); }
  __device__ static __nv_bfloat162 to_pair(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
};

template <typename T>
using MmaOp = cutlass::arch::Mma<cutlass::gemm::GemmShape<16, 8, 16>, 32, typename ActTraits<T>::Cutlass,
                                 cutlass::layout::RowMajor, typename ActTraits<T>::Cutlass,
                                 cutlass::layout::ColumnMajor, float, cutlass::layout::RowMajor,
                                 cutlass::arch::OpMultiplyAdd>;

// Scale and offset of the two columns (c and c+8) a lane owns in one 16-column block, as broadcast pairs.
template <typename T>
struct ColumnQuant {
  typename ActTraits<T>::Pair scale[2];
  typename ActTraits<T>::Pair offset[2];
};

// One lane's B fragments for two n8 tiles: b[tile][reg].
struct BFragPair {
  uint32_t b[2][2];
};

// W = q * scale + offset on unscaled B fragments q[tile][reg] (tile h = column c + 8 h, reg r = k half r):
// one fma per pair, since prepack folded the zero point (and for signed codes the sign bias) into `offset`.
template <typename T>
__device__ __forceinline__ BFragPair scale_fragments(const uint32_t (&q)[2][2], const ColumnQuant<T>& quant) {
  using Pair = typename ActTraits<T>::Pair;
  BFragPair frag;
#pragma unroll
  for (int tile = 0; tile < 2; ++tile)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const Pair w = __hfma2(*reinterpret_cast<const Pair*>(&q[tile][r]), quant.scale[tile], quant.offset[tile]);
      frag.b[tile][r] = *reinterpret_cast<const uint32_t*>(&w);
    }
  return frag;
}

// acc += A_frag (16x16) x B_frag (16x8).
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  using Cut = typename ActTraits<T>::Cutlass;
  cutlass::Array<float, 4>& c = *reinterpret_cast<cutlass::Array<float, 4>*>(acc);
  const cutlass::Array<Cut, 8>& fa = *reinterpret_cast<const cutlass::Array<Cut, 8>*>(a);
  const cutlass::Array<Cut, 4>& fb = *reinterpret_cast<const cutlass::Array<Cut, 4>*>(b);
  MmaOp<T>{}(c, fa, fb, c);
}

}  // namespace mixgemm::mma
