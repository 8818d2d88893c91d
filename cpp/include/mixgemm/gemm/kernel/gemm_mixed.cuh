// Kernel level: tile scheduling, the pipelined main loop, split-K and the epilogue.
//
// Grid: x = M tiles (fastest), y = N tiles, z = K splits. Putting M fastest makes the threadblocks that
// run together share one weight strip, so for large M each packed weight byte comes from DRAM once and
// is re-read from L2; for decode (one M tile) the order does not matter.
//
// Split-K (DESIGN.md section 3, gemm/kernel). Split z writes its fp32 accumulators to workspace[z], then
//   serial:   in the same launch, a per-tile semaphore counts the splits that are done; the last one sums
//             the partials in z order (deterministic whichever split is last), adds the bias, writes D
//             and resets the semaphore to 0, so the next launch or CUDA-graph replay starts clean.
//             (An earlier version took turns in z order, CUTLASS-style, accumulating into one fp32 tile;
//             its chain of semaphore hand-offs cost ~1.5 us per split: 29 us against 15 us now at
//             4096 x 4096, M = 1, split 9, on an H100.)
//   parallel: a second kernel (splitk_reduce.cuh) sums the partials in z order.
#pragma once

#include <cstdint>

#include "mixgemm/common/split_k_arrival.cuh"
#include "mixgemm/gemm/gemm_args.h"
#include "mixgemm/gemm/threadblock/mainloop.cuh"

namespace mixgemm::gemm::kernel {

struct KernelParams {
  const void* A;
  const int32_t* B;
  const void* scales;
  const void* offsets;
  const void* bias;
  void* D;
  float* workspace;
  int32_t* semaphores;
  int M, N, K, group_size;
  int split_k;
  int k_tiles_per_split;
  SplitKMode mode;
};

__device__ __forceinline__ int load_acquire(const int32_t* address) {
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(address) : "memory");
  return value;
}

__device__ __forceinline__ void store_release(int32_t* address, int value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" : : "l"(address), "r"(value) : "memory");
}

template <typename T, int Bits, WeightLayout kWeightLayout, int TileM, int TileN, int WarpM, int WarpN,
          int Stages>
__global__ void __launch_bounds__(
    threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>::kThreads,
    threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>::kMinBlocksPerSM)
    gemm_mixed_kernel(const KernelParams params) {
  using Loop = threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>;
  using Traits = typename Loop::Traits;
  using Pair = typename Loop::Pair;
  extern __shared__ __align__(128) uint8_t smem[];

  const int m0 = blockIdx.x * TileM;
  const int n0 = blockIdx.y * TileN;
  const int split = blockIdx.z;
  const int k_tiles = params.K / threadblock::kTileK;
  const int kt_begin = min(split * params.k_tiles_per_split, k_tiles);
  const int kt_end = min(kt_begin + params.k_tiles_per_split, k_tiles);
  const int num_tiles = kt_end - kt_begin;  // may be 0 for a trailing split; it still takes part below

  const typename Loop::Problem problem{static_cast<const T*>(params.A), params.B,
                                       static_cast<const T*>(params.scales),
                                       static_cast<const T*>(params.offsets),
                                       params.M, params.N, params.K, params.group_size, m0, n0};

  float acc[Loop::kMmaM][Loop::kMmaN][4];
#pragma unroll
  for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
    for (int ni = 0; ni < Loop::kMmaN; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;

  Loop::run(problem, smem, kt_begin, num_tiles, acc);

  // Epilogue. Fragment c{0,1} of n8 tile ni is (row lane/4, columns 2t, 2t+1), c{2,3} is row + 8.
  const int lane = threadIdx.x % 32;
  const int warp_id = threadIdx.x / 32;
  const int row_base = m0 + (warp_id % Loop::kWarpsM) * WarpM + lane / 4;
  const int col_base = n0 + (warp_id / Loop::kWarpsM) * WarpN + 2 * (lane % 4);
  const int64_t N = params.N;

  // Visits every (row, column pair) this lane owns that lies inside D, with its two accumulators.
  auto for_each_fragment = [&](auto&& visit) {
#pragma unroll
    for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
      for (int ni = 0; ni < Loop::kMmaN; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + 16 * mi + 8 * h;
          const int col = col_base + 8 * ni;
          if (row < params.M && col < params.N) visit(row, col, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
        }
  };

  auto store_output = [&](int row, int col, float v0, float v1) {
    if (params.bias != nullptr) {
      const T* bias = static_cast<const T*>(params.bias);
      v0 += static_cast<float>(bias[col]);
      v1 += static_cast<float>(bias[col + 1]);
    }
    *reinterpret_cast<Pair*>(static_cast<T*>(params.D) + row * N + col) = Traits::to_pair(v0, v1);
  };

  if (params.mode == SplitKMode::kNone) {
    for_each_fragment(store_output);
    return;
  }

  // Split-K: every split writes its fp32 accumulators to workspace[split] (L2 stores: the reader may run
  // on another SM).
  float* partial = params.workspace + static_cast<int64_t>(split) * params.M * N;
  for_each_fragment([&](int row, int col, float v0, float v1) {
    __stcg(reinterpret_cast<float2*>(partial + row * N + col), make_float2(v0, v1));
  });
  if (params.mode == SplitKMode::kParallel) return;  // splitk_reduce_kernel sums them

  // Serial: the last split to finish this tile sums the partials, in z order, and writes D. Arrivals
  // are counted on the tile's semaphore (common/split_k_arrival.cuh), and the counter returns to 0 so
  // the next launch or graph replay starts clean.
  __shared__ int is_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t* semaphore = params.semaphores + blockIdx.y * gridDim.x + blockIdx.x;
    const int arrived = arrive_and_count(semaphore);
    is_last = arrived == params.split_k - 1;
    if (is_last) *semaphore = 0;
  }
  __syncthreads();
  if (!is_last) return;
  for_each_fragment([&](int row, int col, float v0, float v1) {
    float2 sum = make_float2(0.f, 0.f);
    for (int z = 0; z < params.split_k; ++z) {
      // The fixed z order makes the result independent of which split arrived last: deterministic.
      const float2 part = z == split ? make_float2(v0, v1)
                                     : __ldcg(reinterpret_cast<const float2*>(
                                           params.workspace + static_cast<int64_t>(z) * params.M * N + row * N + col));
      sum.x += part.x;
      sum.y += part.y;
    }
    store_output(row, col, sum.x, sum.y);
  });
}

}  // namespace mixgemm::gemm::kernel
