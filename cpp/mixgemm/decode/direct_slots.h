// The direct mode of the decode GEMV's grouped form (decode/gemv_kernel.cuh, GemvParams::Grouped): a
// mixture-of-experts layer's one-token decode without a routing pass (python/mixgemm/moe/direct.py). Grid z
// = slots, block z is slot z alone: expert topk_ids[z], x row z / top_k (rows_by_token) or z. fold_top_k
// (plain epilogue): each token's top_k slot rows are summed, times their slot weights, into its output row.
// Host-only header, shared with the MoE runner's arguments (moe/grouped_args.h).
#pragma once

namespace mixgemm::decode {

struct DirectSlots {
  const void* topk_ids = nullptr;  // [slots], int32 or (ids_int64) int64; null: the routed mode
  bool ids_int64 = false;
  bool rows_by_token = false;
  bool fold_top_k = false;
  int top_k = 1;
  int num_experts = 0;  // an id outside [0, num_experts) adds nothing
};

}  // namespace mixgemm::decode
