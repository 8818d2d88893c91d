// The sm80 path's config: a compiled threadblock/warp tile and pipeline depth, and the schedules a tile is
// compiled with. Host-only header (no device code), shared by the kernels, the generated instances, the runner
// and the binding.
#pragma once

#include <cstdint>
#include <string>

#include "mixgemm/core/gemm_args.h"
#include "mixgemm/core/problem.h"

namespace mixgemm::sm80 {

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

// How the sm80 kernel walks its tiles (a template parameter of the kernel, kernel/gemm_mixed.cuh): the
// registry compiles each tile with both, and the split mode picks one.
enum class Scheduling : int {
  kDataParallel = 0,  // one block per (M tile, N tile, K split): modes kNone, kSerial, kParallel
  kStreamK = 1,       // split_k resident blocks share every tile's k-tiles: mode kStreamK
};

inline Scheduling scheduling_of(SplitKMode mode) {
  return mode == SplitKMode::kStreamK ? Scheduling::kStreamK : Scheduling::kDataParallel;
}

}  // namespace mixgemm::sm80
