// Routing preparation for the grouped GEMM (mixture-of-experts): the router's top-k choices, sorted by expert
// into the blocks the grouped kernel walks. Host API; the kernel is in routing.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mixgemm::moe {

// The most blocks of `block_m` sorted positions `num_slots` (token, expert) slots over `num_experts` experts
// can need: each expert with slots needs ceil(count / block_m) <= count / block_m + 1 blocks, and at most
// min(num_slots, num_experts) experts have slots. Buffers sized by it fit every routing, so a CUDA graph
// captured once replays with any.
inline int64_t max_blocks(int64_t num_slots, int64_t num_experts, int64_t block_m) {
  return num_slots / block_m + (num_slots < num_experts ? num_slots : num_experts);
}

// The largest expert count the one-block routing kernel takes (its per-expert counters live in shared memory).
constexpr int kMaxExperts = 1024;

// From topk_ids [num_slots] (int32 or int64, slot s = token * top_k + j), fills
//   slot_of      [max_blocks x block_m]: the slots sorted by expert, each expert's run padded with num_slots
//                up to a multiple of block_m;
//   token_of     [max_blocks x block_m]: slot_of / top_k, the row of x each position reads (padding: the
//                token count, which the kernel clamps);
//   block_expert [max_blocks]: the expert of each block in use;
//   num_padded   [1]: the positions in use (a multiple of block_m);
//   position_of  [num_slots] (optional): the sorted position of each slot, -1 for a slot routed nowhere;
//   expert_start [num_experts + 1] (optional): the first position of each expert's run, then the positions
//                in use (with block_m = 1 the runs are unpadded: expert e's slots are start[e] .. start[e + 1]).
// Ids outside [0, num_experts) route nowhere (their slots are left out; Python checks ids when it may sync).
void route(const void* topk_ids, bool ids_int64, int num_slots, int top_k, int num_experts, int block_m,
           int32_t* slot_of, int32_t* token_of, int32_t* block_expert, int32_t* num_padded, int32_t* position_of,
           int32_t* expert_start, cudaStream_t stream);

}  // namespace mixgemm::moe
