// The sm80 kernel's stream-K schedule (SplitKMode kStreamK, stream_k_partition.h): a one-dimensional grid of
// `split_k` blocks shares all the k-tiles of all the output tiles equally; partial tiles are summed the serial
// way, from per-block slots (except the tile's first block's own partial, when that block is the last to get
// there: see run). Its loop over segments keeps a few more values live through the main loop, which is why it
// is a kernel of its own rather than a branch of the data-parallel one: 64 x 128 tiles took 174 registers with
// both schedules in one kernel against 152 without.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "mixgemm/core/check.h"
#include "mixgemm/sm80/config.h"
#include "mixgemm/sm80/kernel/dependent_start.cuh"
#include "mixgemm/sm80/kernel/kernel_params.h"
#include "mixgemm/sm80/kernel/stream_k_partition.h"
#include "mixgemm/sm80/kernel/tile_output.cuh"
#include "mixgemm/sm80/threadblock/tile_loader.cuh"

namespace mixgemm::sm80::kernel {

struct StreamK {
  struct Params {
    StreamKPartition partition;
  };

  // Host: the partition of the problem's units among at most split_k blocks, and the grid of its blocks.
  static Params params(const GemmArgs& args, int tile_m, int tile_n) {
    const int k_tiles = args.K / threadblock::kTileK;
    const int64_t units = stream_k_units(args.M, args.N, tile_m, tile_n, k_tiles);
    return {stream_k_partition(units, k_tiles, args.split_k)};
  }
  static dim3 grid(const GemmArgs& args, const Params& p, int tile_m, int tile_n) {
    const int64_t units = stream_k_units(args.M, args.N, tile_m, tile_n, p.partition.k_tiles);
    return dim3(stream_k_blocks(units, p.partition));
  }
  // Two slots per block (stream_k_partition.h) for at most split_k blocks, and one semaphore per tile.
  static WorkspaceSize workspace(const GemmShape& shape, const Split& split, int tile_m, int tile_n) {
    WorkspaceSize size;
    size.bytes = 4 * stream_k_workspace_floats(split.split_k, tile_m, tile_n);
    size.semaphores = static_cast<int64_t>(ceil_div(shape.M, tile_m)) * ceil_div(shape.N, tile_n);
    return size;
  }
  template <typename T>
  static void after_kernel(const GemmArgs&, cudaStream_t, bool /*dependent*/) {}

  // Device: this block's units, segment by segment.
  template <typename Loop>
  __device__ __forceinline__ static void run(const KernelParams<StreamK>& params, uint8_t* smem) {
    using Out = TileOutput<Loop>;
    const StreamKPartition& partition = params.schedule.partition;
    const GemmProblem& problem = params.problem;
    const int tiles_m = (problem.M + Loop::kTileM - 1) / Loop::kTileM;
    const int units =
        static_cast<int>(stream_k_units(problem.M, problem.N, Loop::kTileM, Loop::kTileN, partition.k_tiles));
    const int begin = blockIdx.x * partition.units_per_block;
    const int end = min(begin + partition.units_per_block, units);
    {  // the first segment's k-tiles (a block past the last unit has none)
      const int tile = begin / partition.k_tiles, kt = begin - tile * partition.k_tiles;
      const Out first{problem, (tile % tiles_m) * Loop::kTileM, (tile / tiles_m) * Loop::kTileN};
      start_as_dependent<Loop>(first.mainloop_problem(), kt, min(partition.k_tiles - kt, end - begin));
    }
    typename Loop::Pipeline pipe = Loop::start_pipeline();
    for (int unit = begin; unit < end;) {
      const int tile = unit / partition.k_tiles;
      const int kt = unit - tile * partition.k_tiles;
      const int count = min(partition.k_tiles - kt, end - unit);
      const Out out{problem, (tile % tiles_m) * Loop::kTileM, (tile / tiles_m) * Loop::kTileN};
      typename Out::Acc acc;
      Out::zero_accumulators(acc);
      Loop::run(out.mainloop_problem(), smem, kt, count, acc, pipe);
      if (count == partition.k_tiles) {
        out.store_all(acc);  // the whole of K: no partial
      } else if (kt == 0 &&
                 others_arrived(params.scratch.semaphores + tile, partition.last_block(tile) - blockIdx.x)) {
        // The tile's first block: its segment ends its range, so it usually reaches the tile after the blocks
        // that start in it. When they are all done it sums their slots onto its own partial in registers and
        // never stores that partial (a 128 x 256 tile: 128 KB less to write and to read back).
        Out::add_slots(params.scratch.workspace, partition, tile, blockIdx.x + 1, acc);
        out.store_all(acc);
      } else {
        Out::store_slot(params.scratch.workspace + partition.slot(blockIdx.x, tile) * Out::kSlotFloats, acc);
        const int first = partition.first_block(tile);
        if (arrive_is_last(params.scratch.semaphores + tile, partition.last_block(tile) - first + 1)) {
          // Last to arrive. The tile's first block still holds its partial, the sum's first term, in registers
          // and reads only the others' slots; any other block starts from 0 and reads every slot.
          if (kt != 0) Out::zero_accumulators(acc);
          Out::add_slots(params.scratch.workspace, partition, tile, kt == 0 ? first + 1 : first, acc);
          out.store_all(acc);
        }
      }
      unit += count;
      Loop::end_segment();
    }
  }
};

}  // namespace mixgemm::sm80::kernel
