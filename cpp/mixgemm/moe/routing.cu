// The routing kernel: one block sorts every (token, expert) slot by expert (a counting sort in shared memory).
// One block is enough: even 16384 tokens x top-8 are 131072 slots, 128 per thread, a few microseconds beside
// the grouped GEMMs they feed; and one block needs no grid-wide synchronisation, so it is one launch.
#include "mixgemm/moe/routing.h"

#include <stdexcept>
#include <string>

#include "mixgemm/core/check.h"

namespace mixgemm::moe {
namespace {

constexpr int kThreads = 1024;

template <typename Id>
__global__ void __launch_bounds__(kThreads)
    route_kernel(const Id* __restrict__ topk_ids, int num_slots, int top_k, int num_experts, int block_m,
                 int max_positions, int32_t* __restrict__ slot_of, int32_t* __restrict__ token_of,
                 int32_t* __restrict__ block_expert, int32_t* __restrict__ num_padded,
                 int32_t* __restrict__ position_of, int32_t* __restrict__ expert_start) {
  __shared__ int count[kMaxExperts];
  __shared__ int start[kMaxExperts + 1];  // padded start of each expert's run; start[E] = positions in use
  __shared__ int warp_total[kThreads / 32];
  const int t = threadIdx.x;
  for (int e = t; e < num_experts; e += kThreads) count[e] = 0;
  for (int p = t; p < max_positions; p += kThreads) slot_of[p] = num_slots;  // padding until placed
  __syncthreads();
  for (int s = t; s < num_slots; s += kThreads) {
    const int64_t e = static_cast<int64_t>(topk_ids[s]);
    if (e >= 0 && e < num_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();

  // Exclusive scan of the padded counts: each thread owns kMaxExperts / kThreads = 1 expert; a warp scan by
  // shuffles, then the warps' totals scanned by warp 0.
  const int e = t;
  const int padded = e < num_experts ? (count[e] + block_m - 1) / block_m * block_m : 0;
  int inclusive = padded;
  const int lane = t % 32, warp = t / 32;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += v;
  }
  if (lane == 31) warp_total[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int w = warp_total[lane];
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += v;
    }
    warp_total[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int before = (warp > 0 ? warp_total[warp - 1] : 0) + inclusive - padded;
  if (e < num_experts) {
    start[e] = before;
    count[e] = 0;  // reused as the placement cursor
  }
  if (e == num_experts - 1) start[num_experts] = before + padded;
  __syncthreads();
  if (expert_start != nullptr && e < num_experts) expert_start[e] = start[e];
  if (expert_start != nullptr && t == 0) expert_start[num_experts] = start[num_experts];

  // Place each slot at its expert's start + cursor. The order inside an expert is the atomics' (see
  // sm80/kernel/grouped.cuh for why the results do not depend on it).
  for (int s = t; s < num_slots; s += kThreads) {
    const int64_t ex = static_cast<int64_t>(topk_ids[s]);
    const bool routed = ex >= 0 && ex < num_experts;
    const int p = routed ? start[ex] + atomicAdd(&count[ex], 1) : -1;
    if (routed) slot_of[p] = s;
    if (position_of != nullptr) position_of[s] = p;
  }
  // Each block's expert: the last expert whose run starts at or before it (binary search over start).
  const int used = start[num_experts];
  for (int b = t; b < used / block_m; b += kThreads) {
    int lo = 0, hi = num_experts - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (start[mid] <= b * block_m) lo = mid;
      else hi = mid - 1;
    }
    block_expert[b] = lo;
  }
  if (t == 0) *num_padded = used;
  __syncthreads();  // slot_of is complete (a block's global writes are visible to it after the barrier)
  for (int p = t; p < used; p += kThreads) token_of[p] = slot_of[p] / top_k;
}

}  // namespace

void route(const void* topk_ids, bool ids_int64, int num_slots, int top_k, int num_experts, int block_m,
           int32_t* slot_of, int32_t* token_of, int32_t* block_expert, int32_t* num_padded, int32_t* position_of,
           int32_t* expert_start, cudaStream_t stream) {
  const auto rule = [](const std::string& text) { return "moe routing: " + text; };
  require(num_slots >= 1 && top_k >= 1 && num_slots % top_k == 0,
          [&] { return rule("topk_ids must hold tokens x top_k >= 1 slots"); });
  require(num_experts >= 1 && num_experts <= kMaxExperts,
          [&] { return rule("num_experts must be in [1, " + std::to_string(kMaxExperts) + "]"); });
  require(block_m >= 1, [&] { return rule("block_m must be >= 1"); });
  require(topk_ids && slot_of && token_of && block_expert && num_padded,
          [&] { return rule("every buffer must be non-null"); });
  const int64_t positions = max_blocks(num_slots, num_experts, block_m) * block_m;
  require(positions < (int64_t{1} << 31), [&] { return rule("the sorted positions must fit an int32"); });
  if (ids_int64) {
    route_kernel<int64_t><<<1, kThreads, 0, stream>>>(static_cast<const int64_t*>(topk_ids), num_slots, top_k,
                                                      num_experts, block_m, static_cast<int>(positions), slot_of,
                                                      token_of, block_expert, num_padded, position_of,
                                                      expert_start);
  } else {
    route_kernel<int32_t><<<1, kThreads, 0, stream>>>(static_cast<const int32_t*>(topk_ids), num_slots, top_k,
                                                      num_experts, block_m, static_cast<int>(positions), slot_of,
                                                      token_of, block_expert, num_padded, position_of,
                                                      expert_start);
  }
  check_launch("moe route_kernel");
}

}  // namespace mixgemm::moe
