// What the host passes to a mixed-input GEMM: problem, pointers, split-K mode, and the tile config.
// Host-only header (no device code), shared by the device layer, the generated instances and bindings.
#pragma once

#include <cstdint>
#include <string>

namespace mixgemm::gemm {

// How the K dimension is split across threadblocks (grid z).
enum class SplitKMode : int {
  kNone = 0,      // one threadblock per output tile covers all of K
  kSerial = 1,    // every split writes fp32 partials; the tile's last split (semaphore) sums them, in order
  kParallel = 2,  // every split writes fp32 partials; a second kernel sums them
  kStreamK = 3,   // split_k blocks share all tiles' k-tiles equally (kernel/stream_k_partition.h); the cut
                  // tiles' partials are summed in block order by the last block to finish each
};

enum class ActType : int { kFloat16 = 0, kBFloat16 = 1 };

// How the packed weight is laid out (PackedWeight.layout in Python): the sm80 layout (prepack, unsigned
// codes, [N/64, K/16, 32, 4 * bits / 4]) or the sm90 layout (sm90_layout.py, signed codes,
// [K/16, N/16, 32, bits / 4]). The sm80 path reads the first, the sm90 path the second, the decode path
// both.
enum class WeightLayout : int { kSm80 = 0, kSm90 = 1 };

// A compiled threadblock/warp tile with its pipeline depth. Split-K is chosen at run time.
struct TileConfig {
  int tile_m, tile_n, tile_k;
  int warp_m, warp_n, warp_k;
  int stages;

  bool operator==(const TileConfig& o) const {
    return tile_m == o.tile_m && tile_n == o.tile_n && tile_k == o.tile_k && warp_m == o.warp_m &&
           warp_n == o.warp_n && warp_k == o.warp_k && stages == o.stages;
  }
  std::string name() const {
    return std::to_string(tile_m) + "x" + std::to_string(tile_n) + "x" + std::to_string(tile_k) + "_w" +
           std::to_string(warp_m) + "x" + std::to_string(warp_n) + "x" + std::to_string(warp_k) + "_s" +
           std::to_string(stages);
  }
};

// Device pointers and sizes of one call: D[M, N] = A[M, K] @ W + bias, W = q * scales + offsets.
struct GemmArgs {
  const void* A = nullptr;         // activations [M, K], row-major, ActType
  const int32_t* B = nullptr;      // packed weights in `layout` (the sm80 path: [N/64, K/16, 32, 4 * bits / 4])
  const void* scales = nullptr;    // [K/G, N], ActType
  const void* offsets = nullptr;   // [K/G, N], ActType, = -zero * scale
  const void* bias = nullptr;      // [N], ActType, or null
  void* D = nullptr;               // output [M, N], ActType
  float* workspace = nullptr;      // split-K / stream-K fp32 workspace (gemm_runner.h, workspace_size)
  int32_t* semaphores = nullptr;   // serial split-K, stream-K: one counter per output tile, zero on entry and exit
  int M = 0, N = 0, K = 0, group_size = 0;
  int split_k = 1;                 // splits of K; for kStreamK the blocks of the grid
  SplitKMode mode = SplitKMode::kNone;
  ActType act = ActType::kFloat16;
  int bits = 4;                    // weight width: 4 (int4) or 8 (int8, stored biased to 0..255)
  WeightLayout layout = WeightLayout::kSm80;
};

}  // namespace mixgemm::gemm
