// In-tree baseline: a re-implementation of the design of vLLM's AWQ GEMM
// (`gemm_forward_4bit_cuda_m16nXk32`), written from its description so that we benchmark
// against the same algorithm rather than against a different one.
//
// Design, in short (kept deliberately close to the original, including what it does not do:
// no cp.async, no multi-stage pipeline, no swizzle beyond row padding):
//   * 64 threads (2 warps) per block; a block owns a 16 (M) x N_TILE (N) output tile.
//   * K advances 32 per iteration. Each iteration the block stages the 16x32 A tile in shared
//     memory, loads the 32 x N_TILE slice of int4 weights, dequantizes it in registers with the
//     zeros/scales of the group the slice lies in, stores the fp16 result in shared memory, and
//     then both warps run two m16n8k16 tensor-core steps over their half of the N_TILE columns.
//   * Split-K is interleaved: split z handles the 32-wide K steps i with i % split_k_iters == z,
//     and writes its own fp16 partial tile; the caller sums the partials over the split axis.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "mixgemm/convert/int4_to_float.cuh"

namespace mixgemm::peers {

namespace awq_detail {

constexpr int kThreads = 64;  // two warps
constexpr int kTileM = 16;    // one m16 MMA row block
constexpr int kTileK = 32;    // two k16 MMA steps per iteration
// Padding (in halves) appended to every shared-memory row. 8 halves = 16 bytes keeps every row
// 16-byte aligned for ldmatrix and uint4 stores, and makes the row stride an odd multiple of
// 16 bytes modulo 128 bytes, so the 8 row addresses of one ldmatrix phase hit 8 distinct
// 4-bank groups (no bank conflicts).
constexpr int kSmemPad = 8;
constexpr int kAStride = kTileK + kSmemPad;  // halves per A row in shared memory

}  // namespace awq_detail

// One AWQ-packed int32 (8 unsigned 4-bit values) as 8 fp16 values, by the magic-number converter shared
// with our kernels (convert/int4_to_float.cuh: lop3 into 1024.0's mantissa, then sub / fma). Its output
// pairs are nibbles (0,4), (1,5), (2,6), (3,7); AWQ packs logical column [0,2,4,6,1,3,5,7][i] into
// nibble i, which is exactly the inverse of that interleave, so the 8 halves come out in natural column
// order 0..7, ready to be stored contiguously. (This is why AWQ chose that packing order.)
__device__ __forceinline__ uint4 dequant_int4_to_half2x4(uint32_t packed) {
  const convert::Pairs4 q = convert::int4x8_to<__half>(packed);
  return make_uint4(q.pair[0], q.pair[1], q.pair[2], q.pair[3]);
}

// partials[z] (fp16, [M, N]) = x[:, K-steps of split z] * W[K-steps of split z, :], where
// W[k, n] = (q[k, n] - zero[k / G, n]) * scale[k / G, n].
//
// Launch: 1-D grid of split_k_iters * ceil(M / 16) * (N / N_TILE) blocks of 64 threads. The split
// index varies fastest, so the blocks that share an output tile (and its A rows) run side by side,
// as in the original.
//
// Requirements (checked by the host wrapper): N % N_TILE == 0, K % 32 == 0, group_size % 32 == 0
// (so a 32-wide K step never straddles two groups), K % group_size == 0; x and scales 16-byte
// aligned (they are read as uint4), partials 4-byte aligned (written as half2).
template <int N_TILE>
__global__ void __launch_bounds__(awq_detail::kThreads)
    awq_gemm_m16nXk32_kernel(const half* __restrict__ x, const uint32_t* __restrict__ qweight,
                             const half* __restrict__ scales, const uint32_t* __restrict__ qzeros,
                             half* __restrict__ partials, int M, int N, int K, int group_size,
                             int split_k_iters) {
  static_assert(N_TILE == 64 || N_TILE == 128, "N_TILE is 64 or 128");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // m16n8k16 with fp16 inputs needs sm_80; older device code must never be reached.
  __trap();
#else
  using namespace awq_detail;
  constexpr int kBStride = N_TILE + kSmemPad;      // halves per B row in shared memory
  constexpr int kPackedPerRow = N_TILE / 8;        // int32 words per K row of the tile
  constexpr int kBRowStep = kThreads / kPackedPerRow;  // K rows covered per pass of the block
  constexpr int kBRowsPerThread = kTileK / kBRowStep;
  constexpr int kWarpN = N_TILE / 2;               // columns owned by one warp
  constexpr int kNFrags = kWarpN / 8;              // n8 MMA tiles per warp

  __shared__ __align__(16) half a_smem[kTileM * kAStride];
  __shared__ __align__(16) half b_smem[kTileK * kBStride];

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;

  const int n_tiles = N / N_TILE;
  const int split = blockIdx.x % split_k_iters;
  const int tile = blockIdx.x / split_k_iters;
  const int m_base = (tile / n_tiles) * kTileM;
  const int n_base = (tile % n_tiles) * N_TILE;
  const int packed_n = N / 8;  // int32 words per row of qweight / qzeros

  // A staging: 16 rows x 32 halves = 64 uint4, one per thread. Rows past M are zero-filled rather
  // than skipped so the MMA never reads stale data; their results are simply not stored.
  const int a_row = tid / 4;
  const int a_col = (tid % 4) * 8;
  const bool a_valid = m_base + a_row < M;
  // Clamped so that the pointer stays inside x even for the zero-filled rows.
  const half* a_src = x + static_cast<size_t>(a_valid ? m_base + a_row : M - 1) * K + a_col;

  // B staging: each thread owns one packed column (8 logical columns) of the tile and walks K
  // rows with a fixed stride, so it needs that column's zeros and scales only once per step.
  const int b_col = tid % kPackedPerRow;
  const int b_row0 = tid / kPackedPerRow;
  const uint32_t* b_src = qweight + static_cast<size_t>(b_row0) * packed_n + n_base / 8 + b_col;

  float acc[kNFrags][4];
#pragma unroll
  for (int j = 0; j < kNFrags; ++j) {
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
  }

  // ldmatrix row addresses. For A (x4): lanes 0-15 point at rows 0-15 of k-half 0, lanes 16-31 at
  // rows 0-15 of k-half 1, giving registers a0a1 / a2a3 / a4a5 / a6a7 in MMA order. For B (x4.trans
  // over a 16k x 16n block stored k-major): lanes 0-15 point at k rows 0-15 of n columns 0-7,
  // lanes 16-31 at the same rows of columns 8-15; after transposition registers 0,1 are b0b1,b2b3
  // of the first n8 tile and registers 2,3 those of the second.
  const int ld_row = lane % 16;
  const int ld_col = (lane / 16) * 8;
  const uint32_t a_ld_base =
      static_cast<uint32_t>(__cvta_generic_to_shared(a_smem + ld_row * kAStride + ld_col));
  const uint32_t b_ld_base = static_cast<uint32_t>(
      __cvta_generic_to_shared(b_smem + ld_row * kBStride + warp * kWarpN + ld_col));

  const int k_steps = K / kTileK;
  for (int step = split; step < k_steps; step += split_k_iters) {
    const int k0 = step * kTileK;

    // The previous iteration's MMAs must be done reading shared memory before it is overwritten.
    __syncthreads();

    uint4 a_val = make_uint4(0u, 0u, 0u, 0u);
    if (a_valid) a_val = *reinterpret_cast<const uint4*>(a_src + k0);
    *reinterpret_cast<uint4*>(a_smem + a_row * kAStride + a_col) = a_val;

    // group_size % 32 == 0, so all 32 rows of this step share one group.
    const int group = k0 / group_size;
    const uint32_t zero_packed = qzeros[static_cast<size_t>(group) * packed_n + n_base / 8 + b_col];
    const uint4 scale_raw = *reinterpret_cast<const uint4*>(
        scales + static_cast<size_t>(group) * N + n_base + b_col * 8);
    const uint4 zero_h = dequant_int4_to_half2x4(zero_packed);
    const half2* zero2 = reinterpret_cast<const half2*>(&zero_h);
    const half2* scale2 = reinterpret_cast<const half2*>(&scale_raw);

    uint32_t q_packed[kBRowsPerThread];
#pragma unroll
    for (int r = 0; r < kBRowsPerThread; ++r)
      q_packed[r] = b_src[static_cast<size_t>(k0 + r * kBRowStep) * packed_n];

#pragma unroll
    for (int r = 0; r < kBRowsPerThread; ++r) {
      uint4 w = dequant_int4_to_half2x4(q_packed[r]);
      half2* w2 = reinterpret_cast<half2*>(&w);
      // (q - z) is an exact small integer in fp16, so the only rounding is the one multiply.
#pragma unroll
      for (int i = 0; i < 4; ++i) w2[i] = __hmul2(__hsub2(w2[i], zero2[i]), scale2[i]);
      *reinterpret_cast<uint4*>(b_smem + (b_row0 + r * kBRowStep) * kBStride + b_col * 8) = w;
    }

    __syncthreads();

#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      uint32_t a_frag[4];
      asm volatile(
          "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
          : "=r"(a_frag[0]), "=r"(a_frag[1]), "=r"(a_frag[2]), "=r"(a_frag[3])
          : "r"(a_ld_base + kk * static_cast<uint32_t>(sizeof(half))));
#pragma unroll
      for (int j = 0; j < kNFrags; j += 2) {
        uint32_t b_frag[4];
        asm volatile(
            "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
            : "=r"(b_frag[0]), "=r"(b_frag[1]), "=r"(b_frag[2]), "=r"(b_frag[3])
            : "r"(b_ld_base + static_cast<uint32_t>((kk * kBStride + j * 8) * sizeof(half))));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float* c = acc[j + h];
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
              "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(a_frag[0]), "r"(a_frag[1]), "r"(a_frag[2]), "r"(a_frag[3]),
                "r"(b_frag[2 * h]), "r"(b_frag[2 * h + 1]));
        }
      }
    }
  }

  // Epilogue: accumulator pair (c0, c1) is row lane/4, columns 2*(lane%4) + {0, 1}; (c2, c3) is the
  // same 8 rows lower. Splits with no K step still write their (zero) partial, so the caller's sum
  // over the split axis never reads uninitialized memory.
  half* out = partials + static_cast<size_t>(split) * M * N;
  const int row0 = m_base + lane / 4;
  const int col0 = n_base + warp * kWarpN + (lane % 4) * 2;
#pragma unroll
  for (int j = 0; j < kNFrags; ++j) {
    const int col = col0 + j * 8;
    if (row0 < M)
      *reinterpret_cast<half2*>(out + static_cast<size_t>(row0) * N + col) =
          __floats2half2_rn(acc[j][0], acc[j][1]);
    if (row0 + 8 < M)
      *reinterpret_cast<half2*>(out + static_cast<size_t>(row0 + 8) * N + col) =
          __floats2half2_rn(acc[j][2], acc[j][3]);
  }
#endif
}

}  // namespace mixgemm::peers
