// One grouped GEMM call (mixture-of-experts) as the launchers take it: for every sorted position p in use,
// D[slot_of[p]] = A[a_rows[p]] @ dequant(B[block_expert[p / tile_m]]) (x slot_weights[slot]), or, gated,
// SiLU(gate) * up of it. Host-only header.
#pragma once

#include <cstdint>

#include "mixgemm/decode/direct_slots.h"

namespace mixgemm::moe {

struct GroupedArgs {
  const void* A = nullptr;             // activations [a_rows_count, K], the key's activation type
  const int32_t* B = nullptr;          // packed weights [E, ...] in the key's layout, one expert after another
  const void* scales = nullptr;        // [E, K/G, N]
  const void* offsets = nullptr;       // [E, K/G, N]
  void* D = nullptr;                   // output [num_slots, N] (gated: [num_slots, N / 2])
  const int32_t* a_rows = nullptr;     // routing (moe/routing.h): token_of for x, slot_of for per-slot inputs
  const int32_t* slot_of = nullptr;
  const int32_t* block_expert = nullptr;
  const int32_t* num_padded = nullptr;
  const float* slot_weights = nullptr;  // [num_slots] or null
  int a_rows_count = 0, N = 0, K = 0, group_size = 0;
  int num_slots = 0, max_blocks = 0;
  int split_k = 1;                      // K splits (serial: the last split of a tile sums them in order)
  float* workspace = nullptr;           // split_k > 1: fp32 [split_k, max_blocks x N tiles, tile_m x tile_n]
  int32_t* semaphores = nullptr;        // split_k > 1: one per (block, N tile), zero on entry and exit
  int64_t b_expert_stride = 0, quant_expert_stride = 0;
  // The decode form's direct mode (decode/direct_slots.h): no routing buffers, one block per slot of
  // direct.topk_ids; with fold_top_k, D is [num_slots / top_k, N]. Default: the routed modes.
  decode::DirectSlots direct;
};

}  // namespace mixgemm::moe
