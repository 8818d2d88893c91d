// Kernel level: tile scheduling, the pipelined main loop, split-K and the epilogue.
//
// Grid, for modes none, serial and parallel: x = M tiles (fastest), y = N tiles, z = K splits. Putting M
// fastest makes the threadblocks that run together share one weight strip, so for large M each packed weight
// byte comes from DRAM once and is re-read from L2; for decode (one M tile) the order does not matter.
//
// Split-K (DESIGN.md section 3, gemm/kernel). Split z writes its fp32 accumulators to workspace[z], then
//   serial:   in the same launch, a per-tile semaphore counts the splits that are done; the last one sums
//             the partials in z order (deterministic whichever split is last), adds the bias, writes D
//             and resets the semaphore to 0, so the next launch or CUDA-graph replay starts clean.
//             (An earlier version took turns in z order, CUTLASS-style, accumulating into one fp32 tile;
//             its chain of semaphore hand-offs cost ~1.5 us per split: 29 us against 15 us now at
//             4096 x 4096, M = 1, split 9, on an H100.)
//   parallel: a second kernel (splitk_reduce.cuh) sums the partials in z order.
// Stream-K (mode kStreamK, stream_k_partition.h): a one-dimensional grid of `split_k` blocks shares all the
// k-tiles of all the output tiles equally; partial tiles are summed the serial way, from per-block slots
// (except the tile's first block's own partial, when that block is the last to get there: run_stream_k).
#pragma once

#include <cstdint>

#include "mixgemm/common/split_k_arrival.cuh"
#include "mixgemm/gemm/gemm_args.h"
#include "mixgemm/gemm/kernel/stream_k_partition.h"
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
  StreamKPartition stream_k;  // mode kStreamK only
};

// One threadblock tile: the main loop's problem for it, which (row, column pair) each lane's accumulators
// hold, and the ways they leave the block (to D, to a split's M x N partial, to a stream-K slot).
template <typename Loop>
struct TileOutput {
  using T = typename Loop::Element;
  using Traits = typename Loop::Traits;
  using Acc = float[Loop::kMmaM][Loop::kMmaN][4];

  const KernelParams& params;
  int m0, n0;

  // The main loop's view of the same tile: the operands, the problem's sizes and the tile's corner.
  __device__ typename Loop::Problem problem() const {
    return {static_cast<const T*>(params.A), params.B, static_cast<const T*>(params.scales),
            static_cast<const T*>(params.offsets), params.M, params.N, params.K, params.group_size, m0, n0};
  }

  // Visits every (row, column pair) this lane owns that lies inside D, with its two accumulators.
  // Fragment c{0,1} of n8 tile ni is (row lane/4, columns 2t, 2t+1), c{2,3} is row + 8.
  template <typename Visit>
  __device__ void for_each_fragment(const Acc& acc, Visit&& visit) const {
    const int lane = threadIdx.x % 32;
    const int row_base = m0 + Loop::warp_m0() + lane / 4;
    const int col_base = n0 + Loop::warp_n0() + 2 * (lane % 4);
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
  }

  __device__ void store(int row, int col, float v0, float v1) const {
    if (params.bias != nullptr) {
      const T* bias = static_cast<const T*>(params.bias);
      v0 += static_cast<float>(bias[col]);
      v1 += static_cast<float>(bias[col + 1]);
    }
    *reinterpret_cast<typename Traits::Pair*>(static_cast<T*>(params.D) + static_cast<int64_t>(row) * params.N +
                                              col) = Traits::to_pair(v0, v1);
  }

  __device__ void store_all(const Acc& acc) const {
    for_each_fragment(acc, [&](int row, int col, float v0, float v1) { store(row, col, v0, v1); });
  }

  // A stream-K slot holds one tile's accumulators in the lanes' own order: float4 (mi, ni) of thread t at
  // index (mi * kMmaN + ni) * kThreads + t, so each warp writes and reads 512 contiguous bytes per access.
  // Slots hold whole tiles, unchecked: rows past M and columns past N hold products of the in-bounds data
  // the loader re-read for them (tile_loader.cuh), summed like the rest and dropped by store_all.
  static constexpr int64_t kSlotFloats = int64_t{Loop::kMmaM} * Loop::kMmaN * 4 * Loop::kThreads;
  static_assert(kSlotFloats == int64_t{Loop::kTileM} * Loop::kTileN, "one slot holds one tile");

  __device__ static float4* slot_entry(float* slot, int mi, int ni) {
    return reinterpret_cast<float4*>(slot) + (mi * Loop::kMmaN + ni) * Loop::kThreads + threadIdx.x;
  }

  // L2 stores and loads (.cg): the block that reads a slot may run on another SM.
  __device__ static void store_slot(float* slot, const Acc& acc) {
#pragma unroll
    for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
      for (int ni = 0; ni < Loop::kMmaN; ++ni)
        __stcg(slot_entry(slot, mi, ni), make_float4(acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]));
  }

  // acc += the partials of this tile's blocks `from` .. last, in block order. The block that sums passes
  // either its own partial in `acc` and starts at the block after it, when it is the tile's first block
  // (run_stream_k), or acc = 0 and starts at the first block. Either way the additions run in block order
  // (0 + the first partial is that partial exactly), so the result does not depend on who sums:
  // deterministic. The loop over blocks is the outer one so that each row of kMmaN loads is independent and
  // in flight together; with the blocks innermost (a sum per fragment) each load waited for the previous
  // one's L2 round trip. The empty asm with a memory clobber ends each row: unbounded, the compiler hoisted
  // all kMmaM x kMmaN loads of a slot (128 registers for a 128 x 32 warp, besides its 128 accumulators) and
  // spilled.
  __device__ void add_slots(const StreamKPartition& partition, int tile, int from, Acc& acc) const {
    for (int b = from; b <= partition.last_block(tile); ++b) {
      float* slot = params.workspace + partition.slot(b, tile) * kSlotFloats;
#pragma unroll
      for (int mi = 0; mi < Loop::kMmaM; ++mi) {
#pragma unroll
        for (int ni = 0; ni < Loop::kMmaN; ++ni) {
          const float4 part = __ldcg(slot_entry(slot, mi, ni));
          acc[mi][ni][0] += part.x, acc[mi][ni][1] += part.y, acc[mi][ni][2] += part.z, acc[mi][ni][3] += part.w;
        }
        asm volatile("" ::: "memory");
      }
    }
  }

  __device__ static void zero_accumulators(Acc& acc) {
#pragma unroll
    for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
      for (int ni = 0; ni < Loop::kMmaN; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;
  }
};

// Counts this block's arrival at `semaphore`, whose tile `arrivals` blocks share; true for the last of them,
// which also resets the semaphore to 0 (common/split_k_arrival.cuh has the protocol and why it is enough).
// Every thread must call it, after storing its share of the block's partial.
__device__ __forceinline__ bool arrive_is_last(int32_t* semaphore, int arrivals) {
  __shared__ int is_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    const int arrived = arrive_and_count(semaphore);
    is_last = arrived == arrivals - 1;
    if (is_last) *semaphore = 0;
  }
  __syncthreads();
  return is_last;
}

// True when `others` blocks have already arrived at `semaphore`, i.e. every other block of the tile has stored
// its partial: then none is left to arrive, this block sums the tile without arriving, and it resets the
// semaphore to 0 itself. The acquire load makes their partials visible to thread 0, and the barrier after it
// passes that on to the block's threads (common/split_k_arrival.cuh has the same reasoning for the atomic).
// Every thread must call it.
__device__ __forceinline__ bool others_arrived(int32_t* semaphore, int others) {
  __shared__ int done;
  if (threadIdx.x == 0) {
    done = load_acquire(semaphore) == others;
    if (done) *semaphore = 0;
  }
  __syncthreads();
  return done;
}

// Stream-K: this block's units, segment by segment (stream_k_partition.h).
template <typename Loop>
__device__ __forceinline__ void run_stream_k(const KernelParams& params, uint8_t* smem) {
  using Out = TileOutput<Loop>;
  const StreamKPartition& partition = params.stream_k;
  const int tiles_m = (params.M + Loop::kTileM - 1) / Loop::kTileM;
  const int units = static_cast<int>(stream_k_units(params.M, params.N, Loop::kTileM, Loop::kTileN, partition.k_tiles));
  const int begin = blockIdx.x * partition.units_per_block;
  const int end = min(begin + partition.units_per_block, units);
  typename Loop::Pipeline pipe = Loop::start_pipeline();
  for (int unit = begin; unit < end;) {
    const int tile = unit / partition.k_tiles;
    const int kt = unit - tile * partition.k_tiles;
    const int count = min(partition.k_tiles - kt, end - unit);
    const Out out{params, (tile % tiles_m) * Loop::kTileM, (tile / tiles_m) * Loop::kTileN};
    typename Out::Acc acc;
    Out::zero_accumulators(acc);
    Loop::run(out.problem(), smem, kt, count, acc, pipe);
    if (count == partition.k_tiles) {
      out.store_all(acc);  // the whole of K: no partial
    } else if (kt == 0 && others_arrived(params.semaphores + tile, partition.last_block(tile) - blockIdx.x)) {
      // The tile's first block: its segment ends its range, so it usually reaches the tile after the blocks
      // that start in it. When they are all done it sums their slots onto its own partial in registers and
      // never stores that partial (a 128 x 256 tile: 128 KB less to write and to read back).
      out.add_slots(partition, tile, blockIdx.x + 1, acc);
      out.store_all(acc);
    } else {
      Out::store_slot(params.workspace + partition.slot(blockIdx.x, tile) * Out::kSlotFloats, acc);
      const int first = partition.first_block(tile);
      if (arrive_is_last(params.semaphores + tile, partition.last_block(tile) - first + 1)) {
        // Last to arrive. The tile's first block still holds its partial, the sum's first term, in registers
        // and reads only the others' slots; any other block starts from 0 and reads every slot.
        if (kt != 0) Out::zero_accumulators(acc);
        out.add_slots(partition, tile, kt == 0 ? first + 1 : first, acc);
        out.store_all(acc);
      }
    }
    unit += count;
    Loop::end_segment();
  }
}

// kStreamK: the stream-K schedule (a kernel of its own: its loop over segments keeps a few more values live
// through the main loop, and the data-parallel and split kernels keep their register count: 64 x 128 tiles
// took 174 registers with both schedules in one kernel against 152 without).
template <typename T, int Bits, WeightLayout kWeightLayout, int TileM, int TileN, int WarpM, int WarpN,
          int Stages, bool kStreamK>
__global__ void __launch_bounds__(
    threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>::kThreads,
    threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>::kMinBlocksPerSM)
    gemm_mixed_kernel(const KernelParams params) {
  using Loop = threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>;
  using Out = TileOutput<Loop>;
  extern __shared__ __align__(128) uint8_t smem[];

  if constexpr (kStreamK) {
    run_stream_k<Loop>(params, smem);
    return;
  }

  const Out out{params, static_cast<int>(blockIdx.x) * TileM, static_cast<int>(blockIdx.y) * TileN};
  const int split = blockIdx.z;
  const int k_tiles = params.K / threadblock::kTileK;
  const int kt_begin = min(split * params.k_tiles_per_split, k_tiles);
  const int kt_end = min(kt_begin + params.k_tiles_per_split, k_tiles);
  const int num_tiles = kt_end - kt_begin;  // may be 0 for a trailing split; it still takes part below

  typename Out::Acc acc;
  Out::zero_accumulators(acc);
  typename Loop::Pipeline pipe = Loop::start_pipeline();
  Loop::run(out.problem(), smem, kt_begin, num_tiles, acc, pipe);

  if (params.mode == SplitKMode::kNone) {
    out.store_all(acc);
    return;
  }

  // Split-K: every split writes its fp32 accumulators to workspace[split] (L2 stores: the reader may run
  // on another SM).
  const int64_t N = params.N;
  float* partial = params.workspace + static_cast<int64_t>(split) * params.M * N;
  out.for_each_fragment(acc, [&](int row, int col, float v0, float v1) {
    __stcg(reinterpret_cast<float2*>(partial + row * N + col), make_float2(v0, v1));
  });
  if (params.mode == SplitKMode::kParallel) return;  // splitk_reduce_kernel sums them

  // Serial: the last split to finish this tile sums the partials, in z order, and writes D.
  if (!arrive_is_last(params.semaphores + blockIdx.y * gridDim.x + blockIdx.x, params.split_k)) return;
  out.for_each_fragment(acc, [&](int row, int col, float v0, float v1) {
    float2 sum = make_float2(0.f, 0.f);
    for (int z = 0; z < params.split_k; ++z) {
      // The fixed z order makes the result independent of which split arrived last: deterministic.
      const float2 part = z == split ? make_float2(v0, v1)
                                     : __ldcg(reinterpret_cast<const float2*>(
                                           params.workspace + static_cast<int64_t>(z) * params.M * N + row * N + col));
      sum.x += part.x;
      sum.y += part.y;
    }
    out.store(row, col, sum.x, sum.y);
  });
}

}  // namespace mixgemm::gemm::kernel
