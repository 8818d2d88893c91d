// The sm90 (Hopper) form of the grouped GEMM: its config and one call's arguments. Host-only header.
//
// The form is CUTLASS 3.x's pointer-array ("grouped") warp-specialized mixed-input GEMM: one persistent launch
// walks the output tiles of every expert's own problem, each expert a GEMM of its routed rows with its
// sm90-layout weight, computed transposed as the dense sm90 path's (sm90/kernel_types.cuh): D_e^T = W_e^T x_e^T.
// TMA cannot gather rows, so the rows arrive sorted by expert (moe/permute.h gathers them) and leave sorted;
// every expert's rows are one contiguous run starting at expert_start[e] (moe/routing.h, blocks of one row).
// The per-expert pointers, shapes and strides CUTLASS reads live in device memory and are written by a small
// kernel from expert_start on every call, so no host synchronisation ever learns the counts and a CUDA graph
// replays with any routing.
#pragma once

#include <cstdint>
#include <string>

namespace mixgemm::moe::sm90 {

// tile_m tokens (CUTLASS tile N, the wgmma N) x tile_n weight columns (CUTLASS tile M: 128 = 64 rows for each
// of the two consumer warpgroups of the cooperative schedule); k-tiles of 64.
struct Config {
  int tile_m, tile_n;

  bool operator==(const Config& o) const { return tile_m == o.tile_m && tile_n == o.tile_n; }
  // "sm90_128x128x64_grouped": python/mixgemm/moe/heuristic.py tells the forms apart by the prefix.
  std::string name() const {
    return "sm90_" + std::to_string(tile_m) + "x" + std::to_string(tile_n) + "x64_grouped";
  }
};

struct GroupedArgs {
  const void* A = nullptr;              // rows sorted by expert [rows, K], the key's activation type
  const void* B = nullptr;              // [E, ...] sm90-layout weights (signed codes), one expert after another
  const void* scales = nullptr;         // [E, K/G, N]
  const void* offsets = nullptr;        // [E, K/G, N]: W = q * scale + offset
  void* D = nullptr;                    // [rows, N], row p the product of A's row p with its expert's weight
  const int32_t* expert_start = nullptr;  // [E + 1]: expert e's rows are expert_start[e] .. expert_start[e + 1]
  int num_experts = 0, rows = 0, N = 0, K = 0, group_size = 0;
  int64_t b_expert_bytes = 0;           // bytes from one expert's packed weight to the next
  int64_t quant_expert_stride = 0;      // elements from one expert's scales (and offsets) to the next
  void* workspace = nullptr;            // workspace_bytes(): the per-expert arrays and CUTLASS's TMA descriptors
  int64_t workspace_bytes = 0;
  int sm_count = 0;                     // the GPU's SMs: the persistent grid, and one descriptor set per SM
};

}  // namespace mixgemm::moe::sm90
