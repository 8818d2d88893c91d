// Standalone dequantize kernel: AWQ int4 weights -> dense fp16/bf16 [K, N].
//
// Memory bound by construction: per 8 output elements it reads one int32 of weights (4 B) and writes
// 16 B, so 2.5 B of traffic per element; scales and zeros are read once per group per thread and stay
// in L1/L2. Each thread converts 4 packed words (32 columns) of 8 rows; the constants below say how the
// words are dealt to lanes so that every warp access is contiguous.
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

// Rows each thread dequantizes for its columns. Scales and zeros are loaded once per group and reused
// for these rows: with one row per thread, the 64 B of scales per 64 B of output were re-read from L2
// by every row (measured: 57% of copy bandwidth on 8192 x 28672). Eight rows also put eight
// independent weight loads in flight per word.
constexpr int kRowsPerThread = 8;
// Packed words (8 columns each) per thread and row.
constexpr int kWordsPerThread = 4;
// Columns are dealt to lanes word by word: word w of lane l is word 32 w + l of the warp's chunk. Each
// store instruction of a warp then writes 32 x 16 B = 512 contiguous bytes and each weight load reads
// 128 contiguous bytes. Giving a lane 4 adjacent words instead (one 16-byte load) made every store
// instruction touch 32 half-sectors spread over 2 KiB (measured: 60% of copy bandwidth).
constexpr int kWordsPerWarpChunk = 32 * kWordsPerThread;
constexpr int kThreadsPerBlock = 256;

// qweight [K, N/8], qzeros [K/G, N/8], scales [K/G, N], out [K, N]; T is the output/scale type.
// One warp per (8-row block, 128-word chunk of a row).
template <typename T>
__global__ void __launch_bounds__(kThreadsPerBlock)
    awq_dequantize_kernel(const int32_t* __restrict__ qweight, const T* __restrict__ scales,
                          const int32_t* __restrict__ qzeros, T* __restrict__ out, int K, int N,
                          int group_size) {
  using Pair = typename PairOf<T>::type;
  const int words_per_row = N / 8;
  const int chunks_per_row = (words_per_row + kWordsPerWarpChunk - 1) / kWordsPerWarpChunk;
  const int row_blocks = (K + kRowsPerThread - 1) / kRowsPerThread;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(row_blocks) * chunks_per_row) return;
  const int first_row = static_cast<int>(warp / chunks_per_row) * kRowsPerThread;
  const int lane_word = static_cast<int>(warp % chunks_per_row) * kWordsPerWarpChunk + lane;
  const int rows = min(kRowsPerThread, K - first_row);

  bool valid[kWordsPerThread];  // the last chunk of a row may be partial
#pragma unroll
  for (int w = 0; w < kWordsPerThread; ++w) valid[w] = lane_word + 32 * w < words_per_row;

  // All weight loads first, so they are in flight together (streaming: read once).
  uint32_t q_words[kRowsPerThread][kWordsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
    for (int w = 0; w < kWordsPerThread; ++w)
      if (r < rows && valid[w])
        q_words[r][w] = static_cast<uint32_t>(
            __ldcs(qweight + static_cast<int64_t>(first_row + r) * words_per_row + lane_word + 32 * w));

  int group = -1;
  Pair zero[kWordsPerThread][4];
  Pair scale[kWordsPerThread][4];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    if (r >= rows) break;
    const int row = first_row + r;
    if (row / group_size != group) {  // once per thread unless a group boundary falls inside its rows
      group = row / group_size;
#pragma unroll
      for (int w = 0; w < kWordsPerThread; ++w) {
        if (!valid[w]) continue;
        const int64_t word = static_cast<int64_t>(group) * words_per_row + lane_word + 32 * w;
        const convert::Pairs4 z = convert::int4x8_to<T>(static_cast<uint32_t>(__ldg(qzeros + word)));
        // The word's eight columns: their scales are one 16-byte load.
        const uint4 scale_bits = __ldg(reinterpret_cast<const uint4*>(scales + 8 * word));
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          scale[w][p] = reinterpret_cast<const Pair*>(&scale_bits)[p];
          zero[w][p] = *reinterpret_cast<const Pair*>(&z.pair[p]);
        }
      }
    }
    T* out_row = out + static_cast<int64_t>(row) * N;
#pragma unroll
    for (int w = 0; w < kWordsPerThread; ++w) {
      if (!valid[w]) continue;
      const convert::Pairs4 q = convert::int4x8_to<T>(q_words[r][w]);
      uint4 result;
      Pair* value = reinterpret_cast<Pair*>(&result);
#pragma unroll
      for (int p = 0; p < 4; ++p)
        value[p] = __hmul2(__hsub2(*reinterpret_cast<const Pair*>(&q.pair[p]), zero[w][p]), scale[w][p]);
      // Streaming store: the output is written once and not read back by this kernel.
      __stcs(reinterpret_cast<uint4*>(out_row + 8 * (lane_word + 32 * w)), result);
    }
  }
}

}  // namespace mixgemm::dequant
