// Kernel level, shared by the sm80 kernel's schedules: one threadblock tile's output (to D, to a split's
// partial, to a stream-K slot) and the semaphore steps by which the blocks sharing a tile hand it over.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mixgemm/common/batched_sum.cuh"
#include "mixgemm/common/split_k_arrival.cuh"
#include "mixgemm/sm80/kernel/kernel_params.h"
#include "mixgemm/sm80/kernel/stream_k_partition.h"

namespace mixgemm::sm80::kernel {

// One threadblock tile: the main loop's problem for it, which (row, column pair) each lane's accumulators
// hold, and the ways they leave the block (to D, to a split's M x N partial, to a stream-K slot).
template <typename Loop>
struct TileOutput {
  using T = typename Loop::Element;
  using Traits = typename Loop::Traits;
  using Acc = float[Loop::kMmaM][Loop::kMmaN][4];

  const GemmProblem& problem;
  int m0, n0;

  // The main loop's view of the same tile: the operands, the problem's sizes and the tile's corner.
  __device__ typename Loop::Problem mainloop_problem() const {
    return {static_cast<const T*>(problem.A), problem.B, static_cast<const T*>(problem.scales),
            static_cast<const T*>(problem.offsets), problem.M, problem.N, problem.K, problem.group_size, m0, n0};
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
          if (row < problem.M && col < problem.N) visit(row, col, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
        }
  }

  __device__ void store(int row, int col, float v0, float v1) const {
    if (problem.bias != nullptr) {
      const T* bias = static_cast<const T*>(problem.bias);
      v0 += static_cast<float>(bias[col]);
      v1 += static_cast<float>(bias[col + 1]);
    }
    *reinterpret_cast<typename Traits::Pair*>(static_cast<T*>(problem.D) + static_cast<int64_t>(row) * problem.N +
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

  // This thread's float4 (mi, ni) of the slot at `slot`; Float is float (stores) or const float (loads).
  template <class Float>
  __device__ static auto* slot_entry(Float* slot, int mi, int ni) {
    using Entry = std::conditional_t<std::is_const_v<Float>, const float4, float4>;
    return reinterpret_cast<Entry*>(slot) + (mi * Loop::kMmaN + ni) * Loop::kThreads + threadIdx.x;
  }

  // L2 stores and loads (.cg): the block that reads a slot may run on another SM.
  __device__ static void store_slot(float* slot, const Acc& acc) {
#pragma unroll
    for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
      for (int ni = 0; ni < Loop::kMmaN; ++ni)
        __stcg(slot_entry(slot, mi, ni), make_float4(acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]));
  }

  // acc += one slot. Callers loop over slots outside, so that each row of kMmaN loads is independent and in
  // flight together; with the slots innermost (a sum per fragment) each load waited for the previous one's L2
  // round trip. The empty asm with a memory clobber ends each row: unbounded, the compiler hoisted all
  // kMmaM x kMmaN loads of a slot (128 registers for a 128 x 32 warp, besides its 128 accumulators) and spilled.
  __device__ static void add_slot(float* slot, Acc& acc) {
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

  // acc = 0 + slot 0 + slot 1 + ... + slot count - 1 (slot z at first + z * stride), in that order: a sum that
  // does not depend on which block makes it (0 + a partial is that partial exactly). The last split of a tile
  // runs it once every split has arrived, so its cost is the kernel's tail: kSumBatch slots are loaded before
  // any is added (common/batched_sum.cuh). One slot is kMmaM x kMmaN float4 a thread; kSumBatch keeps at most 16
  // float4 (64 registers) in flight where a slot is that small, so a 16 x 128 tile (one 16 x 32 warp tile, 4
  // float4) loads 4 splits at a time and sums 8 splits in two round trips, where one slot at a time took eight
  // (and the data-parallel schedule's earlier sum, one fragment's splits at a time, one per fragment). A larger
  // slot (warp tiles of 128 x 32 and 64 x 64: 32 float4) goes one slot at a time; ptxas reports no spill for it
  // (-Xptxas -warn-spills in every build).
  static constexpr int kSumBatch = Loop::kMmaM * Loop::kMmaN >= 16 ? 1 : 16 / (Loop::kMmaM * Loop::kMmaN);

  __device__ static void sum_slots(const float* first, int64_t stride, int count, Acc& acc) {
    struct Slot {
      float4 entry[Loop::kMmaM][Loop::kMmaN];
    };
    zero_accumulators(acc);
    sum_in_batches<kSumBatch, Slot>(
        count,
        [&](int z, Slot& slot) {
#pragma unroll
          for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
            for (int ni = 0; ni < Loop::kMmaN; ++ni)
              slot.entry[mi][ni] = __ldcg(slot_entry(first + z * stride, mi, ni));
        },
        [&](const Slot& slot) {
#pragma unroll
          for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
            for (int ni = 0; ni < Loop::kMmaN; ++ni) {
              const float4 p = slot.entry[mi][ni];
              acc[mi][ni][0] += p.x, acc[mi][ni][1] += p.y, acc[mi][ni][2] += p.z, acc[mi][ni][3] += p.w;
            }
        });
  }

  // acc += the partials of this tile's blocks `from` .. last, in block order. The block that sums passes
  // either its own partial in `acc` and starts at the block after it, when it is the tile's first block
  // (run_stream_k), or acc = 0 and starts at the first block. Either way the additions run in block order
  // (0 + the first partial is that partial exactly), so the result does not depend on who sums:
  // deterministic.
  __device__ static void add_slots(float* workspace, const StreamKPartition& partition, int tile, int from,
                                   Acc& acc) {
    for (int b = from; b <= partition.last_block(tile); ++b)
      add_slot(workspace + partition.slot(b, tile) * kSlotFloats, acc);
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

}  // namespace mixgemm::sm80::kernel
