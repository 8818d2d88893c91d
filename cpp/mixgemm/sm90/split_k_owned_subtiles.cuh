// Split-K's reduce-scatter: the splits of one output tile share its reduction and its epilogue by epilogue subtile.
//
// The epilogue stores a tile in subtiles of EpilogueTile (CUTLASS's EpilogueTileAuto: 128 x 32 for the cooperative
// schedule), numbered as its store loop numbers them, epi_n x (subtiles along M) + epi_m. With the reduce-scatter
// (self_resetting_stream_k.cuh, fixup) split s owns the subtiles s, s + S, s + 2S, ... of its tile (S splits): it
// adds the other splits' partials to its accumulators for those subtiles only, then stores only those. Every split
// thus moves about (S - 1) / S of a tile through L2 instead of the last split bringing in S - 1 whole partial tiles,
// and the epilogue's work is spread over the splits. Where the subtiles are fewer than the splits, the last splits
// own none: they store their partials and leave the epilogue to the others.
//
// The kernel hands the scheduler's WorkTileInfo::reduction_subtile_idx() to the epilogue's store: -1 for the whole
// tile (CUTLASS's only use in this kernel, since its separate reduction is compiled out), and for a reduce-scatter
// split the code of OwnedSubtiles::code() below, which OwnedSubtilesEpilogue turns back into its subtiles.
#pragma once

#include <cute/tensor.hpp>

#include "cutlass/cutlass.h"

namespace mixgemm::sm90 {

// Which split owns a subtile, and the code of "the subtiles split s of S owns" in one int below -1.
struct OwnedSubtiles {
  static constexpr int kMaxSplits = 1 << 12;  // far above any split within one wave of one GPU's SMs

  CUTLASS_HOST_DEVICE static int owner(int subtile, int splits) { return subtile % splits; }

  CUTLASS_HOST_DEVICE static int code(int split, int splits) { return -2 - (split * kMaxSplits + splits); }
  CUTLASS_HOST_DEVICE static bool is_code(int subtile_idx) { return subtile_idx <= -2; }
  CUTLASS_HOST_DEVICE static int split_of(int code) { return (-2 - code) / kMaxSplits; }
  CUTLASS_HOST_DEVICE static int splits_of(int code) { return (-2 - code) % kMaxSplits; }

  // How many subtiles a tile has.
  template <class TileShape, class EpilogueTile>
  CUTLASS_HOST_DEVICE static constexpr int count() {
    return cute::size(cute::shape_div(cute::take<0, 2>(TileShape{}), cute::shape(EpilogueTile{})));
  }

  // The subtile holding the tile's element (m, n) (CUTLASS's M x N: weight column x token), numbered as the
  // epilogue's store loop numbers its subtiles.
  template <class TileShape, class EpilogueTile>
  CUTLASS_HOST_DEVICE static int subtile_of(int m, int n) {
    constexpr int kEpiM = cute::size<0>(EpilogueTile{}), kEpiN = cute::size<1>(EpilogueTile{});
    constexpr int kSubtilesM = cute::size<0>(TileShape{}) / kEpiM;
    return (n / kEpiN) * kSubtilesM + m / kEpiM;
  }
};

// CUTLASS's sm90 TMA epilogue, storing only a split's own subtiles when its store is handed an owned_subtiles code:
// one store call a subtile (the collective stores a single subtile where subtile_idx is not -1), in the order of
// the store loop. Any other subtile_idx goes to the collective unchanged. A split that owns none stores nothing;
// the kernel's store_tail then has no store to wait for.
template <class Epilogue>
struct OwnedSubtilesEpilogue : Epilogue {
  using Epilogue::Epilogue;
  // A producer-loaded source would need its loads split the same way (the load warp's own loop over subtiles).
  static_assert(cute::is_void_v<typename Epilogue::ElementC>,
                "OwnedSubtilesEpilogue: the epilogue must not read a C source");

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(typename Epilogue::LoadPipeline load_pipeline,
                            typename Epilogue::LoadPipelineState load_state,
                            typename Epilogue::StorePipeline store_pipeline,
                            typename Epilogue::StorePipelineState store_state, ProblemShapeMNKL problem_shape_mnkl,
                            TileShapeMNK tile_shape_mnk, TileCoordMNKL tile_coord_mnkl,
                            cute::Tensor<AccEngine, AccLayout> accumulators, TiledMma tiled_mma, int thread_idx,
                            typename Epilogue::TensorStorage& shared_tensors, int subtile_idx = -1) {
    if (!OwnedSubtiles::is_code(subtile_idx))
      return Epilogue::store(load_pipeline, load_state, store_pipeline, store_state, problem_shape_mnkl,
                             tile_shape_mnk, tile_coord_mnkl, accumulators, tiled_mma, thread_idx, shared_tensors,
                             subtile_idx);
    constexpr int kSubtiles = OwnedSubtiles::count<TileShapeMNK, typename Epilogue::EpilogueTile>();
    const int splits = OwnedSubtiles::splits_of(subtile_idx);
    // One copy of the collective's (unrolled) store, called once a subtile.
#pragma unroll 1
    for (int subtile = OwnedSubtiles::split_of(subtile_idx); subtile < kSubtiles; subtile += splits) {
      auto [load_next, store_next] =
          Epilogue::store(load_pipeline, load_state, store_pipeline, store_state, problem_shape_mnkl, tile_shape_mnk,
                          tile_coord_mnkl, accumulators, tiled_mma, thread_idx, shared_tensors, subtile);
      load_state = load_next;
      store_state = store_next;
    }
    return cute::make_tuple(load_state, store_state);
  }
};

}  // namespace mixgemm::sm90
