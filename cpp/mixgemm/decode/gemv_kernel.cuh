// Decode path (DESIGN.md section 3): a batched GEMV for M <= 16 rows that streams the packed weights at
// full bandwidth, without padding M to a 16-row tensor-core tile. It reads both weight layouts (the sm80
// path's and the sm90 path's, layout/*.cuh), so whichever layout prepack chose for a GPU, decoding
// needs no second copy of the weight.
//
// The swap that makes it work. The sm80 layout stores, per 16(k) x 16(n) block, each lane's B fragment
// of mma.m16n8k16 for W [K, N]. Read as an A fragment of the *transposed* product
//     D^T [N, M] = W^T [N, K] . x^T [K, M]
// the same four converted pairs are exactly what mma.m16n8k16 wants for A = W^T (16 n-rows x 16 k),
// with lane = 4 c + t (PTX ISA, "Matrix fragments for mma.m16n8k16"):
//     A reg 0 = (row c,   k 2t..2t+1)  = converted pair 0 (column n0 = c,     k0, k0 + 1)
//     A reg 1 = (row c+8, k 2t..2t+1)  = converted pair 2 (column n1 = c + 8, k0, k0 + 1)
//     A reg 2 = (row c,   k 2t+8..+9)  = converted pair 1 (column n0,         k0 + 8, k0 + 9)
//     A reg 3 = (row c+8, k 2t+8..+9)  = converted pair 3 (column n1,         k0 + 8, k0 + 9)
// and x^T is the B operand (16 k x 8 m): B reg 0 = x[m = c][k0 + 2t .. +1], B reg 1 = x[c][k0 + 2t + 8 .. +9],
// two 4-byte loads straight from x's rows. (The sm90 layout stores the A fragments of W^T directly.)
// So M rides in the mma's n8 dimension: M <= 8 wastes nothing
// at M = 8 (and at M = 1 the tensor core's spare rows cost nothing: the kernel is bandwidth bound), and
// the weight is converted once per lane, never once per 16-row M tile as in the GEMM. No shared memory
// staging either: each lane's 16 bytes per slab are its fragments already.
//
// Unlike the GEMM paths, the decode path applies scale and offset *after* the mma, in fp32 (compute()):
// the loop is bound by its instruction issue rate, and the codes then need one lop3 per pair.
// On sm_90 it is launched as a programmatic dependent (the prologue of gemv_kernel): its weight stream
// starts in L2 while the previous kernel on the stream finishes.
//
// Work split. Grid x = 64-column strips of N, grid y = K splits (dense grids renumber them split-major: see
// gemv_kernel). A block of kWarps warps covers one strip and its split's run of 64-deep k-batches; warp w takes
// batches w, w + kWarps, ... (or, where a scale row spans two batches, the pairs 2w, 2w + 1, then 2w + 2 kWarps,
// ...), so the block reads contiguous runs of kWarps x 2 KiB (int4) of the strip. Each warp keeps two batches in
// registers (the next one is loaded while the current one is converted and multiplied): with 4 warps and 4 blocks
// per SM that is 16 warps x 2 KiB = 32 KiB in flight per SM, ~4 MiB over 132 SMs, above the ~3 MB that Little's law
// asks of HBM3 (3 TB/s x ~1 us). The H200's 4.8 TB/s asks more, but there the kernel's time mostly follows the SM
// clock, not DRAM, and an L2 prefetch one batch ahead of the register loads made it slower (1.03x-1.19x;
// docs/perf-notes/2026-11-28-h200-decode-read-floor.md): there it lacks issue rate more than loads in flight.
//
// Reduction, deterministic at every level: mma accumulates in fp32 over a warp's batches; the block's
// warps are summed in warp order through shared memory; with split_k > 1 every split writes its fp32
// partial to the workspace and the last split to arrive at the strip's semaphore sums them in split order
// (the sm80 path's serial split-K, gemm_mixed.cuh) and leaves the semaphore at 0 for the next launch.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cutlass/fast_math.h"

#include "mixgemm/common/batched_sum.cuh"
#include "mixgemm/common/dependent_launch.h"
#include "mixgemm/common/load_or_zero.cuh"
#include "mixgemm/common/split_k_arrival.cuh"

#include "mixgemm/common/mma_m16n8k16.cuh"
#include "mixgemm/decode/direct_slots.h"
#include "mixgemm/layout/layouts.cuh"

namespace mixgemm::decode {

using layout::kIsHalf;
using layout::prefetch_l2;
using layout::RowForm;

constexpr int kBatchK = 64;                       // K rows per batch: 4 slabs of 16
constexpr int kSlabsPerBatch = kBatchK / layout::kSlabK;
constexpr int kHalfK = 32;                        // rows per scale row (the smallest group size)
constexpr int kStripN = layout::kStripN;          // 64 columns per strip (both layouts)
constexpr int kMmaRows = 8;                       // M rows per mma (its n8 dimension)

struct GemvParams {
  const void* A;         // x [M, K]
  const int32_t* B;      // packed weights, in the kernel's WeightLayout
  const void* scales;    // [K/G, N]
  const void* offsets;   // [K/G, N]
  const void* bias;      // [N] or null
  void* D;               // [M, N]
  float* workspace;      // split_k > 1: [split_k, M, N] fp32 partials
  int32_t* semaphores;   // split_k > 1: one counter per strip, 0 on entry and exit
  int M, N, K, group_size;
  int split_k;
  int batches_per_split;  // k-batches (64 rows) per grid-y split
  cutlass::FastDivmod halves_per_group;  // group_size / 32: a multiply and a shift instead of a division
  // Grouped (mixture-of-experts, kMoe != 0): grid z = blocks of kRows sorted positions of one expert (the
  // routing of cpp/mixgemm/moe/routing.h with block_m = kRows). Position p reads x row a_rows[p] (M: x's
  // rows) and writes output row slot_of[p] (padding: >= num_slots) times slot_weights[slot] if given;
  // split-K partials are indexed by position, [split_k, positions, N], semaphores by (block, strip).
  //
  // Direct (direct.topk_ids non-null, decode/direct_slots.h): no routing; block z is slot z, its row 0 (rows
  // 1.. are padding). With fold_top_k every slot block stores its fp32 partial ([split_k, slots, N]) and
  // arrives at the (token, strip) semaphore; the last of the token's top_k x split_k arrivals sums them in
  // slot order. A block whose id is out of range reads no weight but still arrives, so the sum completes.
  struct Grouped {
    const int32_t* a_rows = nullptr;
    const int32_t* slot_of = nullptr;
    const int32_t* block_expert = nullptr;
    const int32_t* num_padded = nullptr;
    const float* slot_weights = nullptr;
    int num_slots = 0;
    int positions = 0;
    int64_t b_expert_stride = 0, quant_expert_stride = 0;
    DirectSlots direct;
  } grouped;
};

// What a decode kernel's epilogue writes: the dense GEMV, or a grouped (mixture-of-experts) one, plain or
// gated (SiLU(gate) * up of the column runs prepack interleaved: in each 16-column block, columns c and c + 8
// are one column's gate and up, python/mixgemm/moe/experts.py).
enum MoeEpilogue : int { kDenseGemv = 0, kGroupedPlain = 1, kGroupedGated = 2 };

// kFoldK: the k rows one fold of scale and offset covers (compute()), the largest of 128, 64 and 32 that
// divides the group size (group sizes are multiples of 32). 32: each 32-row half of a batch has its own
// scale row; 64: one per batch; 128: one per two batches, which the same warp takes in turn and folds
// once (kernel loop). kLayout: where the weight's words are and what they hold (layout/*.cuh).
// (An L2::256B prefetch hint on the weight loads was tried and showed no gain on the H100; see
// docs/perf-notes/2026-11-23-decode-path-first-version.md.)
template <typename T, int Bits, int kMTiles, int kWarps, int kFoldK, WeightLayout kLayout, int kMoe = kDenseGemv>
struct Gemv {
  static constexpr bool kGrouped = kMoe != kDenseGemv;
  static_assert(kFoldK == 32 || kFoldK == 64 || kFoldK == 128, "a fold covers 32, 64 or 128 k rows");
  static constexpr int kHalves = kFoldK == 32 ? 2 : 1;             // scale rows per batch
  static constexpr int kBatchesPerRow = kFoldK == 128 ? 2 : 1;     // batches per scale row
  using Layout = layout::LayoutOf<kLayout, Bits>;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWordsPerSlab = Layout::kWordsPerSlab;      // per lane: 4 (int4) or 8 (int8)
  static constexpr int kSubBlocks = kStripN / 16;                  // 16-column blocks per strip
  // Block t's scales are loaded by the lanes 4 c + t and shared within each group of four (Batch):
  // one block per lane of a group.
  static_assert(kSubBlocks == 4, "the scale shuffle pairs the strip's 16-column blocks with a group's 4 lanes");
  static constexpr int kRows = kMTiles * kMmaRows;                 // largest M this instance takes
  // Shared-memory row of the block reduction: 64 columns + 4 floats of padding, so the lanes of one
  // accumulator store (rows 2t, columns c + const) hit 32 distinct banks: (2t * 68 + c) % 32 = 8t + c.
  static constexpr int kRedStride = kStripN + 4;

  // One batch in registers: the packed words, x's B fragments and the scale/offset pairs it needs.
  struct Batch {
    uint32_t words[kSlabsPerBatch][kWordsPerSlab];
    uint32_t x[kSlabsPerBatch][kMTiles][2];
    // Raw 16-bit scale and offset of block t's columns c and c + 8 (lane 4 c + t): the four lanes of a group
    // need the same 16 values, so each loads one block's four and compute() passes them round the group by
    // shuffle. That moves 12 of the loop's 64 global loads per scale row to the shuffle unit, where the load
    // queue was stalling warps (docs/perf-notes/2026-11-28-h200-decode-lane-addresses.md). They are packed
    // and exchanged only in compute(): doing it right after the load would make load() wait for it, and the
    // next batch would no longer be in flight while this one is computed.
    T scale[kHalves][2];
    T offset[kHalves][2];
  };

  // The mma sums of one scale row (compute()), carried from a row's first batch to its second when
  // kBatchesPerRow is 2.
  struct RowSums {
    float raw[kSubBlocks][kMTiles][4];  // D = x . A, per block
    float xsum[kMTiles][4];             // X = sum(x)
  };

  // A lane's loop-invariant addresses, computed once before the main loop, so that a batch's loads need
  // only the batch's offset: recomputed from the batch index for every batch, the address and index arithmetic
  // took 16% of the loop's instructions. With this and the predicated x loads below the loop issues 425 SASS
  // instructions per two batches where it issued 459 (fp16 int4, 128-k fold), and M = 1 took 0.94x-0.99x the
  // time on the H200 (docs/perf-notes/2026-11-28-h200-decode-lane-addresses.md). x and the
  // scales are addressed by 32-bit element offsets from the kernel's base pointers, which leaves registers
  // to the batches: x's rows x K < 2^31 (dense: M <= 16; grouped: the grouped runner's rule), and a scale
  // tensor's K / 32 x N elements fit while the weight's K x N / 2 bytes do (32 GiB).
  struct LaneAddresses {
    const int32_t* words;  // the lane's words of the strip's first slab (Layout::lane_words)
    int slab_words;        // from one slab to the next (Layout::slab_words)
    int x[kMTiles];        // the lane's x row of each m-tile at k = 2 t, in elements from x
    int x_live[kMTiles];   // 0 for rows past M (grouped: padding positions), which load zeros
    int column;            // the lane's column c of block t of the strip, in elements from a scale row's start
  };

  // x_rows (grouped kernels): this lane's x row per m-tile (row c of the tile), -1 for padding; dense
  // kernels read row m where m < M.
  __device__ static LaneAddresses lane_addresses(const GemvParams& p, int strip, int lane,
                                                 const int (&x_rows)[kMTiles]) {
    const int t = lane % 4, c = lane / 4;
    LaneAddresses a;
    a.words = Layout::lane_words(p.B, p.N, p.K, strip, lane);
    a.slab_words = Layout::slab_words(p.N, p.K);
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int m = mt * kMmaRows + c;
      a.x_live[mt] = kGrouped ? x_rows[mt] >= 0 : m < p.M;
      a.x[mt] = (kGrouped ? max(x_rows[mt], 0) : min(m, p.M - 1)) * p.K + 2 * t;
    }
    a.column = strip * kStripN + 16 * t + c;
    return a;
  }

  // Loads batch `batch`, whose weight words start at `w` (the caller steps it from batch to batch).
  __device__ static void load(Batch& b, const LaneAddresses& a, const int32_t* w, int batch, bool with_quant,
                              const GemvParams& p) {
    Layout::load_slabs(b.words, w, a.slab_words);

    // x: small and re-read by every strip's blocks, so it goes through the normal (cached) path. Rows past M
    // feed zeros, so their (unwritten) outputs are zero and the mma needs no masking. (Loading row 0 for them
    // instead, unpredicated, issued 2.6% fewer instructions a launch but took 2% longer at M = 1 on 1024 x 8192
    // on the H200.)
    const T* x = static_cast<const T*>(p.A) + batch * kBatchK;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const T* row = x + a.x[mt];
#pragma unroll
      for (int s = 0; s < kSlabsPerBatch; ++s) {
        b.x[s][mt][0] = load_or_zero(a.x_live[mt], row + 16 * s);
        b.x[s][mt][1] = load_or_zero(a.x_live[mt], row + 16 * s + 8);
      }
    }

    // Scales/offsets of this lane's columns c and c + 8 of each 16-column block.
#pragma unroll
    for (int h = 0; h < kHalves && with_quant; ++h) {
      const int group = p.halves_per_group.div(2 * batch + h);  // (batch * 64 + h * 32) / group_size
      const int i = group * p.N + a.column;
      const T* scales = static_cast<const T*>(p.scales) + i;
      const T* offsets = static_cast<const T*>(p.offsets) + i;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        b.scale[h][half] = scales[8 * half];
        b.offset[h][half] = offsets[8 * half];
      }
    }
  }

  // A T's 16 bits, and back to float: a scale and an offset travel packed in one 32-bit shuffle.
  __device__ static uint32_t bits(T v) { return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(&v)); }
  __device__ static float to_float(uint16_t v) {
    if constexpr (kIsHalf<T>) {
      return __half2float(__ushort_as_half(v));
    } else {
      return __bfloat162float(__ushort_as_bfloat16(v));
    }
  }

  // acc[mt][j] += W^T(16 columns of block j) . x^T(rows of tile mt) over the batch's 64 k.
  //
  // Scale and offset come after the mma, once per output and scale row instead of once per weight. Over
  // one scale row, W = s v + o (v the code's value), so x . W = s (x . v) + o X with X = sum(x); the mma
  // runs on biased codes A = magic + factor u (one lop3 or prmt per pair, layout/*.cuh), and
  //     x . W = (s / factor) D + (o - s beta) X,   D = x . A,
  // two fp32 fmas per accumulator and scale row. Per 16 x 16 block and slab this leaves one shift, four
  // lop3 and the mma (fp16 int4), where applying scale and offset to the weights took eight more f16x2
  // instructions: the loop issued about a fifth fewer instructions per weight byte (552 against 697 SASS
  // instructions per two batches, fp16 int4, sm90 layout), and it is issue bound
  // (docs/perf-notes/2026-11-23-decode-scale-after-mma-pdl.md).
  // X comes from the tensor core too: an mma of an all-ones A fragment against x^T gives every row of D^T
  // the sum of x over the slab's 16 k, in the accumulator layout the fold needs.
  // Precision: D carries magic * X (up to 1032 X), which the fold cancels in fp32; the rounding left is
  // about 2^-24 * 1032 = 6e-5 of |s X| per scale row, against the 2^-11 = 4.9e-4 relative resolution of
  // an fp16 result (the GPU tests hold fp16 outputs to 1e-3 of float64 references).
  //
  // Where a scale row spans two batches (kFoldK 128), the row's first batch only adds to D and X in
  // `carried`, and its second folds them and clears them (ends_row): the fold, and the scale and offset
  // loads before it, happen once per 128 k: the loop issues 455 SASS instructions per two batches where
  // the per-batch fold issues 559 (fp16 int4, M <= 8, sm90 layout; 565 before this change), which took
  // 2-6% off every DESIGN shape at M = 1 (8192 x 28672: 45.5 against 47.7 us;
  // docs/perf-notes/2026-11-24-decode-read-floor-arrival-fold.md).
  __device__ static void compute(const Batch& b, bool ends_row, RowSums& carried,
                                 float (&acc)[kMTiles][kSubBlocks][4]) {
    // One row per batch or half-batch: nothing carries, and sums the compiler knows start at zero keep the
    // code of a per-batch fold.
    RowSums local = {};
    RowSums& sums = kBatchesPerRow == 1 ? local : carried;
    constexpr int kSlabsPerRow = kSlabsPerBatch / kHalves;  // slabs under one scale row
    constexpr uint32_t kOnes = kIsHalf<T> ? 0x3C003C00u : 0x3F803F80u;  // (1.0, 1.0) in T
    const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      // xsum[mt][r]: sum of x over this scale row's k for row m = 8 mt + 2 t + (r & 1) (regs 2, 3 repeat 0, 1)
      float (&xsum)[kMTiles][4] = sums.xsum;
#pragma unroll
      for (int s = h * kSlabsPerRow; s < (h + 1) * kSlabsPerRow; ++s)
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) mma::mma_16x8x16<T>(xsum[mt], ones, b.x[s][mt]);
#pragma unroll
      for (int j = 0; j < kSubBlocks; ++j) {
        float (&raw)[kMTiles][4] = sums.raw[j];
#pragma unroll
        for (int s = h * kSlabsPerRow; s < (h + 1) * kSlabsPerRow; ++s) {
          uint32_t a[4];
          Layout::template biased_fragment<T>(&b.words[s][j * Layout::kWordsPerBlock], a);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) mma::mma_16x8x16<T>(raw[mt], a, b.x[s][mt]);
        }
        if (!ends_row) continue;
        uint32_t packed[2];  // this lane's (scale, offset) of block t's columns c, c + 8 (the same for every j)
#pragma unroll
        for (int row = 0; row < 2; ++row)
          packed[row] = bits(b.scale[h][row]) | (bits(b.offset[h][row]) << 16);
#pragma unroll
        for (int row = 0; row < 2; ++row) {  // accumulator regs 2 row, 2 row + 1: column 16 j + c + 8 row
          const RowForm form = Layout::template biased_row<T>(row);
          const uint32_t quant = __shfl_sync(0xffffffffu, packed[row], j, 4);  // from lane 4 c + j, block j's
          const float scale = to_float(static_cast<uint16_t>(quant & 0xffffu));
          const float s = scale * form.inv_factor;
          const float o = to_float(static_cast<uint16_t>(quant >> 16)) - scale * form.beta;
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
            for (int r = 2 * row; r < 2 * row + 2; ++r)
              acc[mt][j][r] = fmaf(s, raw[mt][r], fmaf(o, xsum[mt][r & 1], acc[mt][j][r]));
        }
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int r = 0; r < 4; ++r) raw[mt][r] = 0.f;
      }
      if (ends_row) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
          for (int r = 0; r < 4; ++r) xsum[mt][r] = 0.f;
      }
    }
  }
};

// Batches in flight per warp. Measured on the H100 (M = 1..16, the DESIGN shapes): 2 beat 3, whose
// extra 40 registers per thread cost a block per SM (e.g. 8192 x 28672, M = 1: 50.5 us at depth 2).
constexpr int kDepth = 2;

// Blocks per SM the register budget must allow. The int4 kernels of up to 8 rows are built for 16 warps
// per SM (128 registers a thread), the occupancy of every decode measurement in docs/perf-notes/: without
// the bound, ptxas gave the sm_80 build of one instance 150. Their 32-k fold holds two scale rows per
// batch and gets 12 warps: 168 registers, as before the named buffers of the main loop, with 12-32 bytes
// of spills (held to 128 it spilled about 300 bytes, unbounded it took 209). The others hold more per
// batch (int8 words, a second tile of x) and keep what ptxas picks: the 16-row kernel held to 12 warps per
// SM (168 registers) was up to 24% slower on the H200 than at ptxas's 8
// (docs/perf-notes/2026-11-28-h200-decode-lane-addresses.md, section 5).
template <int Bits, int kMTiles, int kFoldK>
constexpr int kGemvWarpsPerSm = Bits == 4 && kMTiles == 1 ? (kFoldK >= 64 ? 16 : 12) : 0;
template <int Bits, int kMTiles, int kWarps, int kFoldK>
constexpr int kGemvMinBlocks = std::max(1, kGemvWarpsPerSm<Bits, kMTiles, kFoldK> / kWarps);

template <typename T, int Bits, int kMTiles, int kWarps, int kFoldK, WeightLayout kLayout, int kMoe = kDenseGemv>
__global__ void __launch_bounds__(32 * kWarps, (kGemvMinBlocks<Bits, kMTiles, kWarps, kFoldK>))
    gemv_kernel(const GemvParams params) {
  using G = Gemv<T, Bits, kMTiles, kWarps, kFoldK, kLayout, kMoe>;
  constexpr bool kGrouped = G::kGrouped;
  constexpr int kHalves = G::kHalves, kBatchesPerRow = G::kBatchesPerRow;
  __shared__ float reduction[kWarps][G::kRows][G::kRedStride];
  __shared__ int is_last;

  const GemvParams& p = params;
  // Dense grids read their (strip, split) off the linear block index with the splits of a strip consecutive.
  // x is shared in L1 only between blocks at the same k on one SM. If blocks start in index order, the blocks an
  // SM holds at once are about an SM count apart (the hardware does not promise it): split-major, they tend to be
  // at one split's K range; strip-major, at different ones (at M = 8 split-major took 0.90x-0.98x the time on 6
  // of 7 grids of 2-4 splits, level on the 7th: docs/perf-notes/2026-11-28-h200-decode-lane-addresses.md,
  // section 9). The grouped grid keeps its own z order.
  const int linear_block = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
  const int strip = kGrouped ? static_cast<int>(blockIdx.x) : linear_block / static_cast<int>(gridDim.y);
  const int split = kGrouped ? static_cast<int>(blockIdx.y) : linear_block % static_cast<int>(gridDim.y);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int batches = p.K / kBatchK;
  const int first = split * p.batches_per_split;
  const int last = min(first + p.batches_per_split, batches);
  // The warp's batches come in rounds of two, one round every kDepth * kWarps batches: from `start`,
  // kStride apart. One scale row per batch: w, w + kWarps, ... after `first`; a row over two batches: the
  // pairs (2 w, 2 w + 1), (2 w + 2 kWarps, + 1), ..., so that one warp folds each row once. Either way
  // the block's warps read contiguous runs of batches.
  const int start = first + kBatchesPerRow * warp;
  constexpr int kStride = kBatchesPerRow == 1 ? kWarps : 1;
  constexpr int kRound = kDepth * kWarps;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Programmatic dependent launch (decode/launch.cuh launches with it on sm_90+): this grid may start while
  // the kernel before it on the stream still runs, so nothing it reads or writes may be touched before
  // griddepcontrol.wait, which returns once that kernel has finished and its writes are visible. What can
  // go first is asking L2 for the weight lines of the warp's first batches, and their scale rows: the
  // weights are where the bytes are, and a prefetch cannot read stale data, because L2 is where every
  // SM's stores land (a line fetched before the previous kernel's store to it is updated by that store).
  // On a GPU busy with the previous kernel's tail, the weight stream starts that much earlier; after the
  // wait, load() finds the lines in L2. launch_dependents lets the next kernel on the stream do the same
  // with our tail (it still waits for our writes before reading them). Without the launch attribute both
  // instructions are no-ops and the prefetches a head start of a few cycles.
#pragma unroll
  for (int d = 0; d < kDepth && !kGrouped; ++d) {  // grouped: the expert is known only after the wait
    const int b = start + d * kStride;
    if (b >= last) break;
    G::Layout::template prefetch<kSlabsPerBatch>(p.B, p.N, p.K, strip, b * kSlabsPerBatch, lane);
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int64_t row = static_cast<int64_t>(p.halves_per_group.div(2 * b + h)) * p.N + strip * kStripN;
      prefetch_l2(static_cast<const T*>(p.scales) + row);
      prefetch_l2(static_cast<const T*>(p.offsets) + row);
    }
  }
#endif
  release_dependents_then_wait();

  // Grouped: this block's expert moves the weight pointers, and each lane's x rows come through the routing
  // (direct: block z is slot z, its row 0).
  const auto& gp = p.grouped;
  const DirectSlots& ds = gp.direct;
  const bool direct = kGrouped && ds.topk_ids != nullptr;
  const int z = static_cast<int>(blockIdx.z);
  const int position0 = kGrouped ? z * G::kRows : 0;
  // The output slot of the block's row m: the routing's, or (direct) z for row 0 and padding for the rest.
  auto slot_at = [&](int m) { return direct ? (m == 0 ? z : gp.num_slots) : gp.slot_of[position0 + m]; };
  GemvParams moved = p;
  int x_rows[kMTiles];  // grouped: each lane's x row, -1 for padding
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) x_rows[mt] = -1;
  bool has_expert = true;  // direct: false for an id out of range (the block then adds nothing)
  if constexpr (kGrouped) {
    if (!direct && position0 >= *gp.num_padded) return;  // past the positions in use: the whole block leaves
    int64_t expert;
    if (direct) {
      expert = ds.ids_int64 ? static_cast<const int64_t*>(ds.topk_ids)[z] : static_cast<const int32_t*>(ds.topk_ids)[z];
      has_expert = expert >= 0 && expert < ds.num_experts;
      if (!has_expert) expert = 0;
    } else {
      expert = gp.block_expert[z];
    }
    moved.B += expert * gp.b_expert_stride;
    moved.scales = static_cast<const T*>(p.scales) + expert * gp.quant_expert_stride;
    moved.offsets = static_cast<const T*>(p.offsets) + expert * gp.quant_expert_stride;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int m = mt * kMmaRows + lane / 4;
      if (slot_at(m) >= gp.num_slots) continue;
      const int a_row = direct ? (ds.rows_by_token ? z / ds.top_k : z) : gp.a_rows[position0 + m];
      x_rows[mt] = min(a_row, p.M - 1);
    }
  }
  float acc[kMTiles][G::kSubBlocks][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int j = 0; j < G::kSubBlocks; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mt][j][r] = 0.f;
  // The main loop over the weights of `q` (grouped: the block's expert's).
  auto main_loop = [&](const GemvParams& q) {
    // Register pipeline, two batches deep (kDepth): the warp's next batch is loaded while its current one
    // is computed. The two buffers are named, not an indexed array: indexed, the buffers went to local
    // memory in some instances (the sm80 layout's at a 128-k fold). `even` holds the warp's steps 0, 2, 4,
    // ... and `odd` steps 1, 3, ...; with a scale row over two batches, even holds a row's first batch and
    // odd its second, so only odd loads the row's scales and offsets and folds the row's sums into acc.
    static_assert(kDepth == 2, "the loop below is written for two buffers");
    constexpr bool kEvenEndsRow = kBatchesPerRow == 1;
    typename G::Batch even, odd;
    typename G::RowSums sums = {};
    const typename G::LaneAddresses addresses = G::lane_addresses(q, strip, lane, x_rows);
    // The words of batch i start at addresses.words + i * batch_words: `w` follows the even steps, and an
    // odd step's batch lies kStride batches after it.
    const int64_t batch_words = static_cast<int64_t>(kSlabsPerBatch) * addresses.slab_words;
    const int32_t* w = addresses.words + start * batch_words;
    if (start < last) G::load(even, addresses, w, start, kEvenEndsRow, q);
    for (int i = start; i < last; i += kRound) {
      const int second = i + kStride;
      if (second < last) G::load(odd, addresses, w + kStride * batch_words, second, true, q);
      G::compute(even, kEvenEndsRow, sums, acc);
      if (second >= last) break;
      const int next = i + kRound;
      w += kRound * batch_words;
      if (next < last) G::load(even, addresses, w, next, kEvenEndsRow, q);
      G::compute(odd, true, sums, acc);
    }
  };
  if constexpr (kGrouped) {
    if (has_expert) main_loop(moved);  // else the block adds zeros
  } else {
    main_loop(p);
  }

  // Block reduction. Accumulator (mt, j): {r0, r1} = column 16 j + c, rows m = 8 mt + 2t, 2t + 1;
  // {r2, r3} = column 16 j + c + 8, same rows (the C fragment of mma.m16n8k16 with W^T's rows as columns).
  {
    const int t = lane % 4, c = lane / 4;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int j = 0; j < G::kSubBlocks; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int m = mt * kMmaRows + 2 * t + (r & 1);
          const int col = 16 * j + c + 8 * (r >> 1);
          reduction[warp][m][col] = acc[mt][j][r];
        }
  }
  __syncthreads();

  const int n0 = strip * kStripN;
  const int64_t N = p.N;
  const int rows = direct ? 1 : kGrouped ? G::kRows : p.M;  // this block's rows (grouped: its positions)
  const int outputs = rows * kStripN;  // this block's (row, column) outputs, rows <= kRows
  const T* bias = static_cast<const T*>(p.bias);
  T* D = static_cast<T*>(p.D);
  auto block_sum = [&](int m, int col) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += reduction[w][m][col];  // warp order: deterministic
    return sum;
  };
  // Row m's sums of the strip's columns in `sum_of(m, col)`: dense, D[m] (+ bias); grouped, output row
  // slot_of[position] (x its top-k weight), gated: SiLU(gate) * up into N / 2 columns.
  auto store_all = [&](auto&& sum_of) {
    if constexpr (kMoe == kGroupedGated) {
      for (int o = threadIdx.x; o < rows * kStripN / 2; o += G::kThreads) {
        const int m = o / (kStripN / 2), q = o % (kStripN / 2);
        const int slot = slot_at(m);
        if (slot >= p.grouped.num_slots) continue;
        const int gate = 16 * (q / 8) + q % 8;  // column gate + 8 holds the same column's up
        const float g = sum_of(m, gate), u = sum_of(m, gate + 8);
        float v = g / (1.f + __expf(-g)) * u;
        if (p.grouped.slot_weights != nullptr) v *= p.grouped.slot_weights[slot];
        D[static_cast<int64_t>(slot) * (N / 2) + n0 / 2 + q] = static_cast<T>(v);
      }
    } else {
      for (int o = threadIdx.x; o < outputs; o += G::kThreads) {
        const int m = o / kStripN, col = o % kStripN;
        float value = sum_of(m, col);
        if constexpr (kGrouped) {
          const int slot = slot_at(m);
          if (slot >= p.grouped.num_slots) continue;
          if (p.grouped.slot_weights != nullptr) value *= p.grouped.slot_weights[slot];
          D[static_cast<int64_t>(slot) * N + n0 + col] = static_cast<T>(value);
        } else {
          if (bias != nullptr) value += static_cast<float>(bias[n0 + col]);
          D[m * N + n0 + col] = static_cast<T>(value);
        }
      }
    }
  };

  const bool fold = direct && ds.fold_top_k;
  if (p.split_k == 1 && !fold) {
    store_all(block_sum);
    return;
  }

  // Split-K (and the direct top-k fold): partial to the workspace (L2 stores: the summing block may run on
  // another SM), then count arrivals on the semaphore (common/split_k_arrival.cuh says why no fence is
  // needed): the strip's, the (block, strip)'s, or (fold) the (token, strip)'s.
  const int64_t split_rows = direct ? gp.num_slots : kGrouped ? gp.positions : p.M;  // rows of one split's partial
  const int64_t row0 = direct ? z : position0;  // the block's first partial row
  float* partial = p.workspace + static_cast<int64_t>(split) * split_rows * N + row0 * N;
  for (int o = threadIdx.x; o < outputs; o += G::kThreads) {
    const int m = o / kStripN, col = o % kStripN;
    __stcg(partial + m * N + n0 + col, block_sum(m, col));
  }
  __syncthreads();
  const int token = fold ? z / ds.top_k : 0;
  const int64_t semaphore_row = fold ? token : kGrouped ? z : 0;
  int32_t* semaphore = p.semaphores + semaphore_row * gridDim.x + strip;
  const int arrivals = fold ? p.split_k * ds.top_k : p.split_k;
  if (threadIdx.x == 0) {
    const int arrived = arrive_and_count(semaphore);
    is_last = arrived == arrivals - 1;
    if (is_last) *semaphore = 0;  // every split has arrived: reset for the next launch / replay
  }
  __syncthreads();
  if (!is_last) return;
  if (fold) {
    // The token's sum: slot by slot in order, each slot's splits in order, times the slot's weight.
    for (int col = threadIdx.x; col < kStripN; col += G::kThreads) {
      float total = 0.f;
      for (int j = 0; j < ds.top_k; ++j) {
        const int slot = token * ds.top_k + j;
        float sum = 0.f;
        for (int sk = 0; sk < p.split_k; ++sk)
          sum += __ldcg(p.workspace + (static_cast<int64_t>(sk) * split_rows + slot) * N + n0 + col);
        total += (gp.slot_weights != nullptr ? gp.slot_weights[slot] : 1.f) * sum;
      }
      D[token * N + n0 + col] = static_cast<T>(total);
    }
    return;
  }
  // The last split sums every split's partial, in split order whichever split arrived last
  // (deterministic). These loads are the tail's last trip to L2: a thread issues the loads of up to
  // kSplitsPerTrip splits before its first add (common/batched_sum.cuh), one L2 latency per output instead of one
  // per split. (Unrolled over a thread's outputs too, the tail grew by about 800 instructions, fetched cold by the
  // one block per strip that runs it, and M = 1 took 1 us longer;
  // docs/perf-notes/2026-11-24-decode-8-warp-blocks.md.)
  constexpr int kSplitsPerTrip = 8;
  store_all([&](int m, int col) {
    const float* column = p.workspace + (row0 + m) * N + n0 + col;
    float sum = 0.f;
    sum_in_batches<kSplitsPerTrip, float>(
        p.split_k, [&](int z, float& part) { part = __ldcg(column + static_cast<int64_t>(z) * split_rows * N); },
        [&](float part) { sum += part; });
    return sum;
  });
}

}  // namespace mixgemm::decode
