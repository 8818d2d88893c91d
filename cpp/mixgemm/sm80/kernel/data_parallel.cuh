// The sm80 kernel's data-parallel schedule (SplitKMode kNone, kSerial, kParallel): one block per output tile
// and K split.
//
// Grid: x = M tiles (fastest), y = N tiles, z = K splits. Putting M fastest makes the threadblocks that run
// together share one weight strip, so for large M each packed weight byte comes from DRAM once and is re-read
// from L2; for decode (one M tile) the order does not matter.
//
// Split-K. Split z writes its fp32 accumulators to the workspace, then
//   serial:   to its tile's slot z (the lanes' own order, tile_output.cuh), in the same launch; a per-tile
//             semaphore counts the splits that are done, and the last one sums the slots in z order
//             (deterministic whichever split is last), adds the bias, writes D and resets the semaphore to 0,
//             so the next launch or CUDA-graph replay starts clean. (An earlier version took turns in z
//             order, CUTLASS-style, accumulating into one fp32 tile; its chain of semaphore hand-offs cost
//             ~1.5 us per split: 29 us against 15 us at 4096 x 4096, M = 1, split 9, on an H100.)
//   parallel: to workspace[z] as an M x N matrix; a second kernel (splitk_reduce.cuh) sums them in z order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/core/check.h"
#include "mixgemm/sm80/config.h"
#include "mixgemm/sm80/kernel/dependent_start.cuh"
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
  // Serial: a whole-tile fp32 slot per (split, tile) and one semaphore per tile. Parallel: fp32 partials
  // [split_k, M, N].
  static WorkspaceSize workspace(const GemmShape& shape, const Split& split, int tile_m, int tile_n) {
    WorkspaceSize size;
    const int64_t tiles = static_cast<int64_t>(ceil_div(shape.M, tile_m)) * ceil_div(shape.N, tile_n);
    if (split.mode == SplitKMode::kSerial) {
      size.bytes = 4 * split.split_k * tiles * tile_m * tile_n;
      size.semaphores = tiles;
    }
    if (split.mode == SplitKMode::kParallel) size.bytes = 4 * static_cast<int64_t>(split.split_k) * shape.M * shape.N;
    return size;
  }
  // Host, after the GEMM kernel: the parallel mode's reduction kernel, as a programmatic dependent where the GEMM
  // launched as one (`dependent`: it released its dependents at its start), else ordinarily.
  template <typename T>
  static void after_kernel(const GemmArgs& args, cudaStream_t stream, bool dependent) {
    if (args.mode != SplitKMode::kParallel) return;
    constexpr int kThreads = 256;
    const int64_t threads = static_cast<int64_t>(args.M) * args.N / 4;
    const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads));
    const auto* bias = static_cast<const T*>(args.bias);
    auto* D = static_cast<T*>(args.D);
    launch_kernel<splitk_reduce_kernel<T>>(dependent, grid, dim3(kThreads), 0, stream, "splitk_reduce_kernel",
                                           args.workspace, bias, D, args.M, args.N, args.split_k);
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

    start_as_dependent<Loop>(out.mainloop_problem(), kt_begin, num_tiles);
    typename Out::Acc acc;
    Out::zero_accumulators(acc);
    typename Loop::Pipeline pipe = Loop::start_pipeline();
    Loop::run(out.mainloop_problem(), smem, kt_begin, num_tiles, acc, pipe);

    if (params.schedule.mode == SplitKMode::kNone) {
      out.store_all(acc);
      return;
    }

    if (params.schedule.mode == SplitKMode::kParallel) {
      // workspace[split] as an M x N matrix, L2 stores (splitk_reduce_kernel reads it on other SMs).
      const int64_t N = params.problem.N;
      float* partial = params.scratch.workspace + static_cast<int64_t>(split) * params.problem.M * N;
      out.for_each_fragment(acc, [&](int row, int col, float v0, float v1) {
        __stcg(reinterpret_cast<float2*>(partial + row * N + col), make_float2(v0, v1));
      });
      return;
    }

    // Serial: slot (split, tile); the last split to arrive sums the tile's slots in z order and writes D.
    const int64_t tile = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
    const int64_t split_stride = static_cast<int64_t>(gridDim.y) * gridDim.x * Out::kSlotFloats;
    float* tile_slots = params.scratch.workspace + tile * Out::kSlotFloats;
    Out::store_slot(tile_slots + split * split_stride, acc);
    if (!arrive_is_last(params.scratch.semaphores + tile, params.schedule.split_k)) return;
    Out::sum_slots(tile_slots, split_stride, params.schedule.split_k, acc);
    out.store_all(acc);
  }
};

}  // namespace mixgemm::sm80::kernel
