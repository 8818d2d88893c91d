// The sm80 kernel's data-parallel schedule (SplitKMode kNone, kSerial, kParallel): one block per output tile
// and K split.
//
// Grid: x = M tiles (fastest), y = N tiles, z = K splits. Putting M fastest makes the threadblocks that run
// together share one weight strip, so for large M each packed weight byte comes from DRAM once and is re-read
// from L2; for decode (one M tile) the order does not matter.
//
// Split-K. Split z writes its fp32 accumulators to workspace[z], then
//   serial:   in the same launch, a per-tile semaphore counts the splits that are done; the last one sums
//             the partials in z order (deterministic whichever split is last), adds the bias, writes D
//             and resets the semaphore to 0, so the next launch or CUDA-graph replay starts clean.
//             (An earlier version took turns in z order, CUTLASS-style, accumulating into one fp32 tile;
//             its chain of semaphore hand-offs cost ~1.5 us per split: 29 us against 15 us now at
//             4096 x 4096, M = 1, split 9, on an H100.)
//   parallel: a second kernel (splitk_reduce.cuh) sums the partials in z order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/core/check.h"
#include "mixgemm/sm80/config.h"
#include "mixgemm/sm80/kernel/kernel_params.h"
#include "mixgemm/sm80/kernel/splitk_reduce.cuh"
#include "mixgemm/sm80/kernel/tile_output.cuh"
#include "mixgemm/sm80/threadblock/tile_loader.cuh"

namespace mixgemm::sm80::kernel {

struct DataParallel {
  struct Params {
    int split_k;
    int k_tiles_per_split;
    SplitKMode mode;
  };

  // Host: the schedule's parameters and grid for `args` on tile_m x tile_n tiles.
  static Params params(const GemmArgs& args, int /*tile_m*/, int /*tile_n*/) {
    const int k_tiles = args.K / threadblock::kTileK;
    return {args.split_k, ceil_div(k_tiles, args.split_k), args.mode};
  }
  static dim3 grid(const GemmArgs& args, const Params&, int tile_m, int tile_n) {
    return dim3(ceil_div(args.M, tile_m), ceil_div(args.N, tile_n), args.split_k);
  }
  // fp32 partials [split_k, M, N] for the split modes, and one semaphore per tile for the serial one.
  static WorkspaceSize workspace(const GemmShape& shape, const Split& split, int tile_m, int tile_n) {
    WorkspaceSize size;
    if (split.mode != SplitKMode::kNone) size.bytes = 4 * static_cast<int64_t>(split.split_k) * shape.M * shape.N;
    if (split.mode == SplitKMode::kSerial)
      size.semaphores = static_cast<int64_t>(ceil_div(shape.M, tile_m)) * ceil_div(shape.N, tile_n);
    return size;
  }
  // Host, after the GEMM kernel: the parallel mode's reduction kernel.
  template <typename T>
  static void after_kernel(const GemmArgs& args, cudaStream_t stream) {
    if (args.mode != SplitKMode::kParallel) return;
    constexpr int kThreads = 256;
    const int64_t threads = static_cast<int64_t>(args.M) * args.N / 4;
    splitk_reduce_kernel<T><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        args.workspace, static_cast<const T*>(args.bias), static_cast<T*>(args.D), args.M, args.N, args.split_k);
    check_launch("splitk_reduce_kernel");
  }

  // Device: this block's tile and split.
  template <typename Loop>
  __device__ __forceinline__ static void run(const KernelParams<DataParallel>& params, uint8_t* smem) {
    using Out = TileOutput<Loop>;
    const Out out{params.problem, static_cast<int>(blockIdx.x) * Loop::kTileM,
                  static_cast<int>(blockIdx.y) * Loop::kTileN};
    const int split = blockIdx.z;
    const int k_tiles = params.problem.K / threadblock::kTileK;
    const int kt_begin = min(split * params.schedule.k_tiles_per_split, k_tiles);
    const int kt_end = min(kt_begin + params.schedule.k_tiles_per_split, k_tiles);
    const int num_tiles = kt_end - kt_begin;  // may be 0 for a trailing split; it still takes part below

    typename Out::Acc acc;
    Out::zero_accumulators(acc);
    typename Loop::Pipeline pipe = Loop::start_pipeline();
    Loop::run(out.mainloop_problem(), smem, kt_begin, num_tiles, acc, pipe);

    if (params.schedule.mode == SplitKMode::kNone) {
      out.store_all(acc);
      return;
    }

    // Split-K: every split writes its fp32 accumulators to workspace[split] (L2 stores: the reader may run
    // on another SM).
    const int64_t N = params.problem.N;
    float* partial = params.scratch.workspace + static_cast<int64_t>(split) * params.problem.M * N;
    out.for_each_fragment(acc, [&](int row, int col, float v0, float v1) {
      __stcg(reinterpret_cast<float2*>(partial + row * N + col), make_float2(v0, v1));
    });
    if (params.schedule.mode == SplitKMode::kParallel) return;  // splitk_reduce_kernel sums them

    // Serial: the last split to finish this tile sums the partials, in z order, and writes D.
    if (!arrive_is_last(params.scratch.semaphores + blockIdx.y * gridDim.x + blockIdx.x, params.schedule.split_k))
      return;
    out.for_each_fragment(acc, [&](int row, int col, float v0, float v1) {
      float2 sum = make_float2(0.f, 0.f);
      for (int z = 0; z < params.schedule.split_k; ++z) {
        // The fixed z order makes the result independent of which split arrived last: deterministic.
        const float* partial_z = params.scratch.workspace + static_cast<int64_t>(z) * params.problem.M * N;
        const float2 part = z == split ? make_float2(v0, v1)
                                       : __ldcg(reinterpret_cast<const float2*>(partial_z + row * N + col));
        sum.x += part.x;
        sum.y += part.y;
      }
      out.store(row, col, sum.x, sum.y);
    });
  }
};

}  // namespace mixgemm::sm80::kernel
