// The stream-K partition of the sm80 GEMM's work (SplitKMode::kStreamK), shared by the kernel and the host
// (grid and workspace size).
//
// Why: at M = 16..256 the output tiles are too few for the GPU. 8192 x 28672 at M = 64 has 224 tiles of
// 64 x 128 for 132 SMs: 0.57 waves of 3 blocks per SM, 1.7 warps per scheduler, 0.40 instructions issued per
// scheduler and cycle (ncu, H100). Split-K by a whole factor either leaves a ragged last wave or, split far
// enough, writes every tile's fp32 partial several times. Stream-K gives each of `blocks` resident blocks an
// equal share of all the k-tiles of all the tiles instead, so every SM runs the same amount of work and only
// the tiles a block boundary cuts through have partials.
//
// The work is numbered unit by unit, a unit being one 64-deep k-tile of one output tile: unit u = tile *
// k_tiles + kt, tile = m_tile + tiles_m * n_tile (M fastest, as the data-parallel grid: blocks that run side
// by side read the same weight strip, and the later ones find it in L2). Block b takes units
// [b * units_per_block, (b + 1) * units_per_block): a run of segments, one per tile it touches. A segment that
// covers its tile's whole K writes the output directly; the others are partials.
//
// Partials: each block owns two fp32 slots of one tile (its first segment's and its last's; a block's middle
// segments are whole tiles). Every partial segment stores its accumulators to its slot and arrives at the
// tile's semaphore; the last to arrive sums the tile's segments in block order, which fixes the order of the
// additions whatever the arrival order (deterministic), writes D and resets the semaphore to 0. One
// exception: the tile's first block, whose segment (the tile's first k-tiles) ends its range, first looks at
// the semaphore, and if every other block has arrived it sums their slots onto its own accumulators without
// storing them (gemm_mixed.cuh, run_stream_k). Nobody waits on anybody, so blocks need not be co-resident.
#pragma once

#include <cstdint>

namespace mixgemm::sm80::kernel {

#if defined(__CUDACC__)
#define MIXGEMM_HOST_DEVICE __host__ __device__
#else
#define MIXGEMM_HOST_DEVICE
#endif

struct StreamKPartition {
  int k_tiles;          // units (k-tiles) per output tile
  int units_per_block;  // each block's share; the last block's may be shorter

  // Unit counts are kept below 2^30 (can_implement), so b * units_per_block fits an int for every block.
  static constexpr int64_t kMaxUnits = int64_t{1} << 30;

  // The first and last block whose units fall in `tile`.
  MIXGEMM_HOST_DEVICE int first_block(int tile) const { return tile * k_tiles / units_per_block; }
  MIXGEMM_HOST_DEVICE int last_block(int tile) const { return ((tile + 1) * k_tiles - 1) / units_per_block; }

  // The workspace slot of block `block`'s segment of `tile`: slot 2 b if the segment is the block's first
  // (the block's units start inside the tile), else 2 b + 1 (it is the block's last).
  MIXGEMM_HOST_DEVICE int slot(int block, int tile) const {
    return 2 * block + (block * units_per_block >= tile * k_tiles ? 0 : 1);
  }
};

// The units of an M x N problem in tile_m x tile_n output tiles of k_tiles k-tiles each.
MIXGEMM_HOST_DEVICE inline int64_t stream_k_units(int M, int N, int tile_m, int tile_n, int k_tiles) {
  return static_cast<int64_t>((M + tile_m - 1) / tile_m) * ((N + tile_n - 1) / tile_n) * k_tiles;
}

// The partition of `units` units among at most `blocks` blocks: equal shares, rounded up, and as many blocks
// as those shares need (never an idle block).
inline StreamKPartition stream_k_partition(int64_t units, int k_tiles, int blocks) {
  const int per = static_cast<int>((units + blocks - 1) / blocks);
  return {k_tiles, per};
}
inline int stream_k_blocks(int64_t units, const StreamKPartition& p) {
  return static_cast<int>((units + p.units_per_block - 1) / p.units_per_block);
}

// fp32 slots a stream-K call over at most `blocks` blocks needs: two per block, one tile each.
inline int64_t stream_k_workspace_floats(int blocks, int tile_m, int tile_n) {
  return 2 * static_cast<int64_t>(blocks) * tile_m * tile_n;
}

}  // namespace mixgemm::sm80::kernel
