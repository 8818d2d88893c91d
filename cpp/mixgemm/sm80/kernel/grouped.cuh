// The sm80 kernel's grouped schedule (mixture-of-experts): one launch computes every expert's product with
// the tokens routed to it. The routing kernel (moe/routing.cu) has sorted the (token, expert) slots by expert
// and padded each expert's run to a multiple of tile_m, so a block's tile_m sorted positions belong to one
// expert (block_expert[blockIdx.x]); the main loop is the dense one, its B, scales and offsets moved to that
// expert and its A rows gathered through a_rows (threadblock/tile_loader.cuh).
//
// Grid: x = blocks of sorted positions (the most the routing can produce; those past num_padded exit at once,
// so the grid does not depend on the routing and a CUDA graph replays with any), y = N tiles, z = K splits.
//
// Split-K (decode: a token hits few experts, so without it a launch has fewer blocks than SMs): split z stores
// its fp32 tile in slot (z, tile) of the workspace, and the last split to arrive at the tile's semaphore sums
// the slots in z order (deterministic whichever is last), writes the epilogue and resets the semaphore to 0.
//
// Epilogue: sorted position p writes output row slot_of[p] (a slot t * top_k + j; padding positions hold a
// slot >= num_slots and write nothing), optionally times slot_weights[slot]. Gated (the gate/up projection):
// prepack interleaved the weight's columns in runs of 8, gate then up (python/mixgemm/moe/experts.py), so a
// lane's n8 tiles 2i and 2i + 1 hold the gate and up values of the same 2 columns, and SiLU(gate) * up is
// written straight from the fp32 accumulators: no [slots, 2 x inter] intermediate and no second kernel.
//
// Every output row is one row of mma products over K in the same order wherever the routing put it in a tile,
// so the result does not depend on the routing kernel's (atomic) order inside an expert: deterministic.
#pragma once

#include <cstdint>

#include "mixgemm/sm80/kernel/kernel_params.h"
#include "mixgemm/sm80/kernel/tile_output.cuh"
#include "mixgemm/sm80/threadblock/tile_loader.cuh"

namespace mixgemm::sm80::kernel {

template <bool Gated>
struct Grouped {
  struct Params {
    const int32_t* a_rows;        // [max_blocks x tile_m] row of A per sorted position
    const int32_t* slot_of;       // [max_blocks x tile_m] output row per sorted position; >= num_slots: padding
    const int32_t* block_expert;  // [max_blocks] the expert of each block of tile_m positions
    const int32_t* num_padded;    // [1] sorted positions in use, a multiple of tile_m
    const float* slot_weights;    // [num_slots] multiplies output row `slot`, or null
    int num_slots;
    int k_tiles_per_split;        // split-K: k-tiles of each split (gridDim.z splits; 1 split: all of K)
    int64_t b_expert_stride;      // int32 words from one expert's packed weight to the next
    int64_t quant_expert_stride;  // elements from one expert's scales (and offsets) to the next
  };

  __device__ static float silu(float x) { return x / (1.f + __expf(-x)); }

  template <typename Loop>
  __device__ __forceinline__ static void run(const KernelParams<Grouped>& params, uint8_t* smem) {
    using T = typename Loop::Element;
    using Traits = typename Loop::Traits;
    const Params& s = params.schedule;
    const GemmProblem& g = params.problem;
    const int m0 = static_cast<int>(blockIdx.x) * Loop::kTileM;
    if (m0 >= *s.num_padded) return;  // the whole block leaves before its first barrier
    const int expert = s.block_expert[blockIdx.x];
    const int n0 = static_cast<int>(blockIdx.y) * Loop::kTileN;
    const int64_t quant = expert * s.quant_expert_stride;
    const typename Loop::Problem p{static_cast<const T*>(g.A), g.B + expert * s.b_expert_stride,
                                   static_cast<const T*>(g.scales) + quant, static_cast<const T*>(g.offsets) + quant,
                                   g.M, g.N, g.K, g.group_size, m0, n0, s.a_rows};

    using Out = TileOutput<Loop>;
    typename Out::Acc acc;
    Out::zero_accumulators(acc);
    const int k_tiles = g.K / threadblock::kTileK;
    const int kt_begin = min(static_cast<int>(blockIdx.z) * s.k_tiles_per_split, k_tiles);
    const int kt_end = min(kt_begin + s.k_tiles_per_split, k_tiles);
    typename Loop::Pipeline pipe = Loop::start_pipeline();
    Loop::run(p, smem, kt_begin, kt_end - kt_begin, acc, pipe);  // a trailing split may have no k-tiles

    if (gridDim.z > 1) {
      // The tile's slot of split z; slots of one split are consecutive per (N tile, block).
      const int64_t tile = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
      const int64_t tiles = static_cast<int64_t>(gridDim.y) * gridDim.x;
      float* workspace = params.scratch.workspace;
      Out::store_slot(workspace + (blockIdx.z * tiles + tile) * Out::kSlotFloats, acc);
      if (!arrive_is_last(params.scratch.semaphores + tile, gridDim.z)) return;
      // In z order: deterministic whichever split is last.
      Out::sum_slots(workspace + tile * Out::kSlotFloats, tiles * Out::kSlotFloats, gridDim.z, acc);
    }

    // Fragment c{0,1} of n8 tile ni is (row lane / 4, columns 2t, 2t + 1), c{2,3} is row + 8.
    const int lane = threadIdx.x % 32;
    const int row_base = m0 + Loop::warp_m0() + lane / 4;
    const int col_base = n0 + Loop::warp_n0() + 2 * (lane % 4);
    const int out_cols = Gated ? g.N / 2 : g.N;
    T* D = static_cast<T*>(g.D);
#pragma unroll
    for (int mi = 0; mi < Loop::kMmaM; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int slot = s.slot_of[row_base + 16 * mi + 8 * h];
        if (slot >= s.num_slots) continue;
        const float w = s.slot_weights != nullptr ? s.slot_weights[slot] : 1.f;
        T* out_row = D + static_cast<int64_t>(slot) * out_cols;
        if constexpr (Gated) {
          static_assert(Loop::kMmaN % 2 == 0, "gated tiles pair n8 tiles (gate, up)");
#pragma unroll
          for (int ni = 0; ni < Loop::kMmaN; ni += 2) {
            const int col = col_base + 8 * ni;  // a gate column of the interleaved order; col + 8 is its up
            if (col >= g.N) continue;
            const int out_col = (col - 2 * (lane % 4)) / 2 + 2 * (lane % 4);
            const float v0 = silu(acc[mi][ni][2 * h]) * acc[mi][ni + 1][2 * h] * w;
            const float v1 = silu(acc[mi][ni][2 * h + 1]) * acc[mi][ni + 1][2 * h + 1] * w;
            *reinterpret_cast<typename Traits::Pair*>(out_row + out_col) = Traits::to_pair(v0, v1);
          }
        } else {
#pragma unroll
          for (int ni = 0; ni < Loop::kMmaN; ++ni) {
            const int col = col_base + 8 * ni;
            if (col >= g.N) continue;
            *reinterpret_cast<typename Traits::Pair*>(out_row + col) =
                Traits::to_pair(acc[mi][ni][2 * h] * w, acc[mi][ni][2 * h + 1] * w);
          }
        }
      }
  }
};

}  // namespace mixgemm::sm80::kernel
