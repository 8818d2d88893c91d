// Threadblock level: the multistage cp.async main loop of the mixed-input GEMM.
//
// The stage layout and the copies that fill it are in tile_loader.cuh (B's, per weight layout, in
// packed_b_tile.cuh); this file holds the warps' side: reading a slab's fragments from shared memory,
// converting and scaling B, and the mma.
#pragma once

#include <cstdint>

#include "cutlass/arch/memory_sm80.h"
#include "mixgemm/common/mbarrier.cuh"
#include "mixgemm/common/shared_address.cuh"
#include "mixgemm/sm80/threadblock/tile_loader.cuh"
#include "mixgemm/common/mma_m16n8k16.cuh"
#include "mixgemm/layout/layouts.cuh"

namespace mixgemm::sm80::threadblock {

// kGatherA: A's rows gathered through the problem's a_rows (the grouped schedule, kernel/grouped.cuh).
template <typename T, int Bits, WeightLayout kWeightLayout, int TileM, int TileN, int WarpM, int WarpN, int Stages,
          bool kGatherA = false>
struct Mainloop {
  static_assert(TileM % WarpM == 0 && TileN % WarpN == 0, "warp tiles must divide the threadblock tile");
  static_assert(WarpM % 16 == 0, "WarpM must be a multiple of the mma's 16 rows");
  static_assert(WarpN == 16 || WarpN == 32 || WarpN % 64 == 0, "WarpN: 16, 32 or a multiple of 64");
  static_assert(Stages >= 2 && Stages <= 5, "Stages in 2..5");

  using Element = T;
  static constexpr int kTileM = TileM;
  static constexpr int kTileN = TileN;
  static constexpr int kWarpsM = TileM / WarpM;
  static constexpr int kWarpsN = TileN / WarpN;
  static constexpr int kStages = Stages;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  // Residency target for the register allocator. Decode tiles (16 rows) are bandwidth bound and want
  // many threadblocks in flight: 4 per SM caps them at 65536 / (4 x 128) = 128 registers per thread
  // (uncapped, 16 x 256 took 168 and fit only 3 per SM). 64 x 128 (four warps): 3 per SM, 170 registers,
  // the residency its data-parallel kernel reaches uncapped (151); its stream-K kernel took 175 uncapped,
  // one block per SM fewer, and fits in 168 without spilling. Larger tiles keep the allocator free.
  static constexpr int kMinBlocksPerSM = TileM <= 16 ? 4 : (TileM == 64 && TileN == 128 ? 3 : 1);
  static constexpr int kMmaM = WarpM / 16;        // 16-row A fragments per warp
  using Layout = StageLayout<Bits, TileM, TileN>;
  using Loader = TileLoader<T, Bits, kWeightLayout, TileM, TileN, kThreads, kGatherA>;
  using BTile = typename Loader::BTile;
  using Problem = typename Loader::Problem;
  static constexpr int kWords = WarpN / kBlockN;  // 16 x 16 sub-blocks per lane per k16 slab
  static constexpr int kWordsPerSubBlock = Bits / 4;
  static constexpr int kMmaN = WarpN / 8;         // n8 accumulator tiles per warp
  static constexpr int kStageBytes = Layout::kStageBytes;
  static constexpr int kSharedBytes = Stages * kStageBytes;
  static_assert(kStageBytes % 128 == 0, "stages on 128-byte boundaries (load_slab's swizzle by xor)");
  static constexpr int kSlabsPerQuant = kQuantK / kSlabK;  // slabs sharing one row of scales: 2

  using Traits = mma::ActTraits<T>;
  using Pair = typename Traits::Pair;

  // One k16 slab's operands of this warp, as read from shared memory: A fragments (ldmatrix) and the
  // packed B words, still unconverted.
  struct SlabFragments {
    uint32_t a[kMmaM][4];
    uint32_t words[kWords * kWordsPerSubBlock];
  };

  // Where this warp's tile sits in the threadblock tile.
  __device__ static int warp_m0() { return (threadIdx.x / 32 % kWarpsM) * WarpM; }
  __device__ static int warp_n0() { return (threadIdx.x / 32 / kWarpsM) * WarpN; }

  // This lane's shared-memory offsets inside a stage, computed once per threadblock: each k-tile adds
  // the stage's address (one add each), and every slab, row block and column block is an immediate.
  struct LaneOffsets {
    uint32_t a;      // A fragment of slab 0, row block 0 (see load_slab for the other slabs)
    uint32_t b;      // this warp's B words of slab 0
    uint32_t quant;  // this lane's ldmatrix row of the warp's scales and offsets, first half (load_quant)
  };

  __device__ static LaneOffsets lane_offsets() {
    const int lane = threadIdx.x % 32;
    // ldmatrix.x4 of a 16 x 16 A block: lanes 0-15 address rows 0-15 at k 0-7 of the slab (chunk 0),
    // lanes 16-31 the same rows at k 8-15 (chunk 1); chunks are swizzled by (row % 8) = lane % 8, since
    // warp_m0 and the row blocks are multiples of 16.
    const int row = warp_m0() + lane % 16;
    LaneOffsets o;
    o.a = row * (kTileK * 2) + ((lane / 16) ^ (lane % 8)) * kChunkBytes;
    o.b = Layout::kABytes + BTile::template lane_offset<kWords>(warp_n0() / kBlockN, lane);
    // Scales by transposing ldmatrix (see load_quant): matrix m = 2 w + table of the warp's block w (scales,
    // then offsets), its rows alternating between the block's columns 0-7 and 8-15.
    const int m = lane / 8, r = lane % 8;
    o.quant = Layout::kQuantOffset + (m % 2) * (Layout::kQuantRows * Layout::kQuantBytes) +
              (warp_n0() + kBlockN * (m / 2) + 8 * (r % 2)) * 2;
    return o;
  }

  // Scales and offsets of one 32-row half of a stage for this lane's two columns per 16-column block (c =
  // lane / 4 and c + 8, see the warp header). `quant_row` = stage + LaneOffsets::quant.
  //
  // One transposing ldmatrix gives a lane both columns' values of two blocks' scales and offsets: each
  // matrix's even rows name the block's columns 0-7, its odd rows columns 8-15 (rows may alias), so
  // elements c of rows 2 t and 2 t + 1 are the pair (column c, column c + 8), one register. The two
  // halves of that pair then enter the scaling fma as its .H0_H0 and .H1_H1 operands. Loading each value
  // with a 16-bit load and broadcasting it took 16 instructions per half for two blocks, against one.
  static constexpr int kQuantMatrices = 2 * kWords;  // a scale and an offset matrix per block
  static constexpr int kQuantLoad = kQuantMatrices < 4 ? kQuantMatrices : 4;
  __device__ static void load_quant(uint32_t quant_row, int half, mma::ColumnQuant<T> (&quant)[kWords]) {
#pragma unroll
    for (int v = 0; v < kQuantMatrices / kQuantLoad; ++v) {
      uint32_t pairs[kQuantLoad];
      ldmatrix<kQuantLoad, true>(pairs, quant_row + (half * TileN + v * (kQuantLoad / 2) * kBlockN) * 2);
#pragma unroll
      for (int i = 0; i < kQuantLoad / 2; ++i) {
        const Pair scale = *reinterpret_cast<const Pair*>(&pairs[2 * i]);
        const Pair offset = *reinterpret_cast<const Pair*>(&pairs[2 * i + 1]);
        mma::ColumnQuant<T>& q = quant[v * (kQuantLoad / 2) + i];
        q.scale[0] = Traits::low(scale), q.scale[1] = Traits::high(scale);
        q.offset[0] = Traits::low(offset), q.offset[1] = Traits::high(offset);
      }
    }
  }

  // Reads slab `slab` of a stage into registers: kMmaM ldmatrix.x4 for A, the widest shared loads the
  // warp tile allows for B. `a_base` = stage + LaneOffsets::a, `b_base` = stage + LaneOffsets::b.
  __device__ static void load_slab(uint32_t a_base, uint32_t b_base, int slab, SlabFragments& f) {
    // Slab s reads chunks 2 s + (lane / 16) instead of lane / 16: the swizzled chunk (2 s + h) ^ r equals
    // (h ^ r) ^ 2 s, i.e. address bits 5-6 flipped by s. The stage (a multiple of 128 bytes, from a
    // 128-byte aligned base) and the row (128 bytes each) leave those bits to the chunk, so the flip is
    // one xor of the whole address.
    const uint32_t a_slab = a_base ^ (slab * 2 * kChunkBytes);
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) ldmatrix<4>(f.a[mi], a_slab + 16 * mi * (kTileK * 2));
    BTile::template read_words<kWords>(b_base, slab, f.words);
  }

  // acc += A x dequant(B) for one slab whose B fragments are already converted.
  __device__ static void mma_slab(const uint32_t (&a)[kMmaM][4], const mma::BFragPair (&b)[kWords],
                                  float (&acc)[kMmaM][kMmaN][4]) {
#pragma unroll
    for (int w = 0; w < kWords; ++w)
#pragma unroll
      for (int mi = 0; mi < kMmaM; ++mi) {
        mma::mma_16x8x16<T>(acc[mi][2 * w], a[mi], b[w].b[0]);
        mma::mma_16x8x16<T>(acc[mi][2 * w + 1], a[mi], b[w].b[1]);
      }
  }

  // Reads, converts and multiplies one k-tile of a stage, slab by slab (`read`: this lane's addresses in it).
  __device__ static void compute_tile(const LaneOffsets& read, float (&acc)[kMmaM][kMmaN][4]) {
    mma::ColumnQuant<T> quant[kWords];
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab) {
      // Each 32-row half of a k-tile reads its own scales (for group sizes that are multiples of 64 both
      // halves hold the same row). Skipping the second read when the group size allows it put a branch
      // into the loop, and ptxas then materialized every scale pair's two halves with a PRMT before the
      // branch merge instead of folding them into the scaling fma's .H0_H0 / .H1_H1 operands: 16 PRMTs
      // per k-tile at 64 x 32 warps for the one ldmatrix saved. (Keeping scales in registers across the
      // k-tiles of a group took 1-4% longer: docs/perf-notes/2026-11-24-sm80-mainloop-instructions.md.)
      if (slab % kSlabsPerQuant == 0) load_quant(read.quant, slab / kSlabsPerQuant, quant);
      SlabFragments f;
      load_slab(read.a, read.b, slab, f);
      mma::BFragPair b[kWords];
#pragma unroll
      for (int w = 0; w < kWords; ++w)
        b[w] = layout::LayoutOf<kWeightLayout, Bits>::template b_fragments<T>(&f.words[w * kWordsPerSubBlock],
                                                                             quant[w]);
      mma_slab(f.a, b, acc);
    }
  }

  // How warps hand the stages to each other.
  //  - Stage barriers (8-warp tiles): each stage has a "full" mbarrier, at which every thread's copies
  //    arrive as they land, and an "empty" one, at which every thread arrives once it has read the stage.
  //    A warp waits only for its next k-tile's data, and a thread refilling a stage only for the warps
  //    still reading it. With one __syncthreads() per k-tile instead, the 8-warp 128 x 256 kernel spent
  //    7.4% of its warp time waiting there (ncu, 8192 x 8192 at M = 128); with the barriers (and 4 stages, see
  //    run_with_stage_barriers) it took 8-11% less time at M = 128..256 and 2-8% less at M = 1024..4096
  //    (docs/perf-notes/2026-11-24-sm80-stage-barriers.md).
  //  - One __syncthreads() per k-tile (4-warp tiles): there the barriers' ~20 more instructions per k-tile
  //    cost more than the wait they remove (64 x 128: up to 8% slower; 16 x 256: 4-6% slower).
  static constexpr int kWarps = kWarpsM * kWarpsN;
  static constexpr bool kStageBarriers = kWarps >= 8;

  // The pipeline's state beyond one run(): stream-K runs several tile segments in a row, and with stage
  // barriers a segment's first copies need not wait for every warp to finish the last one. The
  // threadblock's k-tile number `tiles` (over all its runs) goes to stage tiles % Stages, in phase
  // (tiles / Stages) & 1 of that stage's barriers (common/mbarrier.cuh).
  struct Pipeline {
    uint32_t barriers;  // stage barriers: shared address of full[Stages], then empty[Stages]
    int tiles;          // k-tiles of this threadblock issued to the pipeline so far
  };

  // Every thread calls it once, before the first run().
  __device__ static Pipeline start_pipeline() {
    if constexpr (!kStageBarriers) {
      return {0, 0};
    } else {
      __shared__ uint64_t barriers[2 * Stages];
      const Pipeline pipe{shared_address(barriers), 0};
      if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < Stages; ++s) {
          mbarrier_init(pipe.barriers + 8 * s, kThreads);           // full: every thread's copies landed
          mbarrier_init(pipe.barriers + 8 * (Stages + s), kThreads);  // empty: every thread has read it
        }
      }
      __syncthreads();
      return pipe;
    }
  }

  // Every thread calls it after a run() whose stages the next run() may refill.
  __device__ static void end_segment() {
    if constexpr (!kStageBarriers) __syncthreads();  // every warp is done reading the stages
  }

  // The whole main loop of one threadblock over one tile segment: acc += A[m0.., k-tiles kt_begin ..) x
  // dequant(B).
  __device__ static void run(const Problem& p, uint8_t* smem, int kt_begin, int num_tiles,
                             float (&acc)[kMmaM][kMmaN][4], Pipeline& pipe) {
    if constexpr (kStageBarriers) {
      run_with_stage_barriers(p, smem, kt_begin, num_tiles, acc, pipe);
    } else {
      run_with_syncthreads(p, smem, kt_begin, num_tiles, acc);
    }
  }

  // Stages - 1 k-tiles are in flight (cp.async) while one is computed: after the barrier that publishes
  // tile i, tile i + Stages - 1 is issued into the stage tile i - 1 occupied, which every warp has
  // finished reading.
  //
  // Tried and not kept (docs/perf-notes/2026-11-24-sm80-mainloop-instructions.md, issue 10): double-buffering
  // the slab fragments in registers (loading slab s + 1 before the mma of slab s, with the barrier moved before the last slab). With the
  // compiler already interleaving the four unrolled slabs, the extra live registers cost more than the
  // hidden latency gained: 3% slower on the 128 x 256 tiles at M = 4096, 1.5-3% faster on 64 x 128.
  __device__ static void run_with_syncthreads(const Problem& p, uint8_t* smem, int kt_begin, int num_tiles,
                                              float (&acc)[kMmaM][kMmaN][4]) {
    const uint32_t smem_base = shared_address(smem);
    Loader loader(p, kt_begin);
    // Prologue: Stages - 1 tiles in flight. Every thread commits one group per slot, even an empty one,
    // so the wait_group count below always refers to the right tile.
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < num_tiles) loader.load(smem_base + s * kStageBytes);
      cutlass::arch::cp_async_fence();
    }
    // Shared addresses carried from one k-tile to the next: the stage tile i + Stages - 1 goes to (tile
    // i - 1's) and this lane's A, B and scale addresses in tile i's stage. Carried values are what the
    // compiler cannot rebuild: given the window base and the lane offsets as separate values, it
    // recomputed both every k-tile from SR_CgaCtaId and the thread index (~20 instructions, one a
    // variable-latency S2R) to spare the registers. A wrap back to stage 0 is counted, not compared.
    const LaneOffsets lane = lane_offsets();
    LaneOffsets read{smem_base + lane.a, smem_base + lane.b, smem_base + lane.quant};
    uint32_t write_stage = smem_base + (Stages - 1) * kStageBytes;
    int read_index = 0;
    for (int i = 0; i < num_tiles; ++i) {
      cutlass::arch::cp_async_wait<Stages - 2>();
      __syncthreads();  // tile i is visible to all warps, and the stage tile i - 1 used is free to refill
      if (i + Stages - 1 < num_tiles) loader.load(write_stage);
      cutlass::arch::cp_async_fence();
      compute_tile(read, acc);
      write_stage = read.a - lane.a;  // tile i's stage, free once the next barrier has passed
      const bool wrap = ++read_index == Stages;
      const uint32_t step = wrap ? kStageBytes - kSharedBytes : kStageBytes;
      read_index = wrap ? 0 : read_index;
      read.a += step, read.b += step, read.quant += step;
    }
    cutlass::arch::cp_async_wait<0>();
  }

  // Stages - 1 k-tiles are in flight while one is computed. Each warp waits for its k-tile's full barrier,
  // computes it, arrives at the stage's empty barrier, and then issues its share of k-tile i + Stages - 1
  // into the stage k-tile i - 1 used: that waits for the slowest warp to finish k-tile i - 1, while this
  // warp has already finished k-tile i, so warps drift up to a k-tile apart. (Issued after k-tile i rather
  // than before it, the copies run one k-tile behind the __syncthreads() loop's: hence 4 stages for the
  // 128 x 256 tile against its 3 there, cpp/generator/kernel_sets.py.)
  __device__ static void run_with_stage_barriers(const Problem& p, uint8_t* smem, int kt_begin, int num_tiles,
                                                 float (&acc)[kMmaM][kMmaN][4], Pipeline& pipe) {
    const uint32_t smem_base = shared_address(smem);
    const auto full_barrier = [&](int stage) { return pipe.barriers + 8 * stage; };
    constexpr int kEmpty = 8 * Stages;  // a stage's empty barrier, from its full one
    Loader loader(p, kt_begin);
    const int first = pipe.tiles;
    // Prologue: the segment's first Stages - 1 k-tiles, each into its stage once the stage's previous
    // k-tile (this threadblock's earlier segment, if any) has been read by every warp. A stage's first
    // k-tile waits for phase parity 1, "the phase before phase 0", which a fresh barrier counts as done.
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      const int tile = first + s;
      if (s < num_tiles) {
        const int stage = tile % Stages;
        mbarrier_wait(full_barrier(stage) + kEmpty, (tile / Stages + 1) & 1);
        loader.load(smem_base + stage * kStageBytes);
        cp_async_arrive(full_barrier(stage));
      }
    }
    // Carried from k-tile to k-tile, as addresses (given a stage index, ptxas rebuilt every address from
    // SR_CgaCtaId and the thread index each k-tile): the current k-tile's stage, the lane's addresses in
    // it, its full barrier and phase; the same three of the k-tile before, whose stage is refilled next.
    // A wrap back to stage 0 is counted, not compared.
    const LaneOffsets lane = lane_offsets();
    int stage = first % Stages;
    uint32_t phase = (first / Stages) & 1;
    uint32_t stage_base = smem_base + stage * kStageBytes;
    LaneOffsets read{stage_base + lane.a, stage_base + lane.b, stage_base + lane.quant};
    uint32_t full = full_barrier(stage);
    const int before = first + Stages - 1;  // the k-tile before `first`, one lap on: same stage, phase + 1
    uint32_t prev_stage = smem_base + (before % Stages) * kStageBytes;
    uint32_t prev_full = full_barrier(before % Stages);
    uint32_t prev_phase = (before / Stages + 1) & 1;  // = ((first - 1) / Stages) & 1, and 1 for first = 0
    for (int i = 0; i < num_tiles; ++i) {
      mbarrier_wait(full, phase);
      compute_tile(read, acc);
      // This thread has read the stage. (Every thread arrives, not one lane per warp after a __syncwarp():
      // as fast, and compute-sanitizer's racecheck follows the release only from the arriving thread.)
      mbarrier_arrive(full + kEmpty);
      if (i + Stages - 1 < num_tiles) {
        // The previous k-tile's stage, once every warp has read it (before the threadblock's first k-tile:
        // stage Stages - 1, unused, parity 1).
        mbarrier_wait(prev_full + kEmpty, prev_phase);
        loader.load(prev_stage);
        cp_async_arrive(prev_full);
      }
      prev_stage = stage_base, prev_full = full, prev_phase = phase;
      const bool wrap = ++stage == Stages;
      const uint32_t step = wrap ? kStageBytes - kSharedBytes : kStageBytes;
      stage = wrap ? 0 : stage;
      phase ^= wrap ? 1 : 0;
      full = wrap ? full - 8 * (Stages - 1) : full + 8;
      stage_base += step, read.a += step, read.b += step, read.quant += step;
    }
    pipe.tiles = first + num_tiles;
  }
};

}  // namespace mixgemm::sm80::threadblock
