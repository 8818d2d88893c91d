// The sm90 path's host-side vocabulary: a compiled config, the conversion mode, and one call's arguments.
// Host-only header (no CUTLASS, no device code), shared by the runner, the generated instances and bindings.
//
// Naming: we keep the library's M/N/K (x is [M, K], W is [K, N], y is [M, N]). The kernel itself computes
// the transposed problem y^T[N, M] = W^T[N, K] . x^T[K, M] (the narrow weight must be CUTLASS's
// register-sourced operand A), so our tile_n is CUTLASS's tile M (the wgmma M, 64 per consumer warpgroup)
// and our tile_m is CUTLASS's tile N (the wgmma N: tokens per tile).
#pragma once

#include <cstdint>
#include <string>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/core/problem.h"

namespace mixgemm::sm90 {

// CUTLASS 3.x kernel schedules of the warp-specialized sm90 GEMM.
enum class Schedule : int {
  kCooperative = 0,  // two consumer warpgroups share one tile (tile_n = 128: 64 weight rows each)
  kPingpong = 1,     // two consumer warpgroups alternate tiles (tile_n = 64); the epilogue overlaps the mainloop
};

// Tile schedulers: which CTA computes which output tile(s).
enum class Scheduler : int {
  kPersistent = 0,  // data-parallel persistent CTAs, one whole-K tile at a time
  kStreamK = 1,     // stream-K: work split along K to balance the last wave (needs a workspace)
};

struct Config {
  int tile_m;     // tokens per tile (CUTLASS tile N)
  int tile_n;     // weight columns per tile (CUTLASS tile M)
  int tile_k;     // 64 for 16-bit activations: one 128-byte swizzle row of x
  int cluster_m;  // CTAs of a cluster along M (CUTLASS cluster N: they share the weight tile by multicast)
  int cluster_n;  // CTAs of a cluster along N (CUTLASS cluster M: they share the x tile by multicast)
  Schedule schedule;
  Scheduler scheduler;

  bool operator==(const Config& o) const {
    return tile_m == o.tile_m && tile_n == o.tile_n && tile_k == o.tile_k && cluster_m == o.cluster_m &&
           cluster_n == o.cluster_n && schedule == o.schedule && scheduler == o.scheduler;
  }
  // "sm90_128x128x64_c1x1_coop_streamk": python/mixgemm/paths/sm90.py names its configs the same way.
  std::string name() const {
    return "sm90_" + std::to_string(tile_m) + "x" + std::to_string(tile_n) + "x" + std::to_string(tile_k) + "_c" +
           std::to_string(cluster_m) + "x" + std::to_string(cluster_n) +
           (schedule == Schedule::kCooperative ? "_coop" : "_pingpong") +
           (scheduler == Scheduler::kStreamK ? "_streamk" : "_persistent");
  }
};

// What one call needs besides its operands: the stream-K partials' bytes and split flags (both 0 for the
// persistent scheduler).
struct Workspace {
  int64_t bytes = 0;
  int64_t locks = 0;
  // What the sizing found about the decomposition: split-K with every split of every tile resident at once, the
  // condition of split_k_mode 'reduce_scatter' (runner.cu checks it).
  bool splits_in_one_wave = false;
};

// Device pointers and sizes of one call: D[M, N] = A[M, K] @ W + bias, W = q * scales (+ offsets).
struct Args {
  const void* A = nullptr;        // activations x [M, K], row-major, ActType
  const void* B = nullptr;        // weights in the sm90 layout (prepack_sm90): signed int4 / int8 codes of W^T
  const void* scales = nullptr;   // [K/G, N], ActType
  const void* offsets = nullptr;  // [K/G, N], ActType; null for QuantMode::kScale kernels
  const void* bias = nullptr;     // [N], ActType, or null
  void* D = nullptr;              // y [M, N], row-major, ActType
  void* workspace = nullptr;      // workspace_size().bytes (stream-K), 16-byte aligned, or null when it is 0
  int64_t workspace_bytes = 0;
  // Stream-K configs: workspace_size().locks int32 split flags, all zero before the launch; the kernel
  // leaves them zero again (self_resetting_stream_k.cuh), so one buffer serves every call on a stream.
  int32_t* locks = nullptr;
  int64_t lock_count = 0;
  int M = 0, N = 0, K = 0, group_size = 0;
  int device_sm_count = 0;        // the GPU's SM count (persistent grid size); <= 0: queried
  // Stream-K configs only: > 1 replaces the stream-K decomposition by split-K, every output tile's K cut
  // into split_k runs of whole k-tiles on split_k CTAs; the splits add their fp32 partials in the
  // workspace in split order (CUTLASS's deterministic reduction mode), the last one runs the epilogue.
  int split_k = 1;
  // Split-K within one wave: how many more k-tiles the last split runs than each of the others; -1: the scheduler's
  // rule (self_resetting_stream_k.cuh). A tuning knob for tools/sm90_split_fixup_ab.cu; the library leaves it at -1.
  int last_split_extra_k_tiles = -1;
  // Split-K within one wave (split_k_mode 'reduce_scatter'): the splits share the reduction and the epilogue by
  // subtile; else the last split adds the others' partial tiles and stores the tile (self_resetting_stream_k.cuh).
  bool reduce_scatter = false;
};

}  // namespace mixgemm::sm90
