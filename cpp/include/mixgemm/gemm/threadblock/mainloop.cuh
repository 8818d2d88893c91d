// Threadblock level: the multistage cp.async main loop of the mixed-input GEMM.
//
// Per stage, shared memory holds one k-tile (TileK = 64) of
//   A      : TileM x 64 activations, 128 B per row, 16-byte chunks XOR-swizzled by (row % 8) so the eight
//            row addresses of each ldmatrix phase fall in eight different bank groups;
//   B      : TileN / 64 strips of the packed weights, 4 k16 slabs x 32 lanes x 16 B (int4) or 32 B (int8),
//            stored exactly as in global memory (prepack already ordered them per lane);
//   scales and offsets for each 32-row half of the k-tile (TileN values each): group sizes down to 32
//   put two groups in one k-tile; for larger groups both halves hold the same group's values.
// Stages - 1 tiles are in flight while one is computed (cp.async.wait_group(Stages - 2)).
#pragma once

#include <cstdint>

#include "cutlass/arch/memory_sm80.h"
#include "mixgemm/gemm/warp/mma_mixed_input.cuh"

namespace mixgemm::gemm::threadblock {

constexpr int kChunkBytes = 16;  // one cp.async / ldmatrix row: 8 fp16 or bf16 values
constexpr int kTileK = 64;       // K per main-loop step; the packed layout assumes it
constexpr int kQuantK = 32;      // K rows sharing one row of scales/offsets in shared memory: the smallest group
constexpr int kPackedStripN = 64;                  // columns per packed strip (prepack layout)
constexpr int kSlabK = 16;                         // K rows per mma / packed slab

// Packed weight geometry for `Bits`-bit weights (prepack layout): per 16(k) x 64(n) block, each of 32
// lanes holds 4 sub-blocks x Bits / 4 words.
template <int Bits>
struct PackedGeometry {
  static_assert(Bits == 4 || Bits == 8, "int4 or int8 weights");
  static constexpr int kWordsPerSubBlock = Bits / 4;                // 16 x 16 block: 1 (int4) or 2 (int8)
  static constexpr int kWordsPerLane = 4 * kWordsPerSubBlock;       // 64 columns per strip = 4 sub-blocks
  static constexpr int kSlabBytes = 32 * kWordsPerLane * 4;         // 512 B (int4) or 1 KiB (int8)
  static constexpr int kStripTileBytes = (kTileK / kSlabK) * kSlabBytes;  // one strip's k-tile
};

template <typename T, int Bits, int TileM, int TileN, int WarpM, int WarpN, int Stages>
struct Mainloop {
  static_assert(TileM % WarpM == 0 && TileN % WarpN == 0, "warp tiles must divide the threadblock tile");
  static_assert(WarpM % 16 == 0, "WarpM must be a multiple of the mma's 16 rows");
  static_assert(WarpN == 16 || WarpN == 32 || WarpN % 64 == 0, "WarpN: 16, 32 or a multiple of 64");
  static_assert(TileN % kPackedStripN == 0, "TileN must be a multiple of the 64-column packed strip");
  static_assert(Stages >= 2 && Stages <= 5, "Stages in 2..5");

  static constexpr int kWarpsM = TileM / WarpM;
  static constexpr int kWarpsN = TileN / WarpN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  // Residency target for the register allocator. Decode tiles (16 rows) are bandwidth bound and want
  // many threadblocks in flight: 4 per SM caps them at 65536 / (4 x 128) = 128 registers per thread
  // (uncapped, 16 x 256 took 168 and fit only 3 per SM). Larger tiles keep the allocator free.
  static constexpr int kMinBlocksPerSM = TileM <= 16 ? 4 : 1;
  static constexpr int kMmaM = WarpM / 16;        // 16-row A fragments per warp
  using Geometry = PackedGeometry<Bits>;
  static constexpr int kSlabBytes = Geometry::kSlabBytes;
  static constexpr int kStripTileBytes = Geometry::kStripTileBytes;
  static constexpr int kWords = WarpN / 16;       // 16 x 16 sub-blocks per lane per k16 slab
  static constexpr int kWordsPerSubBlock = Geometry::kWordsPerSubBlock;
  static constexpr int kMmaN = WarpN / 8;         // n8 accumulator tiles per warp

  static constexpr int kABytes = TileM * kTileK * 2;
  static constexpr int kBBytes = (TileN / kPackedStripN) * kStripTileBytes;
  static constexpr int kQuantBytes = TileN * 2;  // one row of scales (or of offsets)
  static constexpr int kQuantRows = kTileK / kQuantK;  // per stage: scales for each 32-row half, then offsets
  static constexpr int kStageBytes = kABytes + kBBytes + 2 * kQuantRows * kQuantBytes;
  static constexpr int kSharedBytes = Stages * kStageBytes;

  using Traits = warp::ActTraits<T>;
  using Pair = typename Traits::Pair;

  struct Problem {
    const T* A;
    const int32_t* B;
    const T* scales;
    const T* offsets;
    int M, N, K, group_size;
    int m0, n0;  // this threadblock's first output row and column
  };

  // Issues the cp.async copies of k-tile `kt` into stage `stage`.
  __device__ static void load_tile(const Problem& p, uint8_t* smem, int stage, int kt) {
    uint8_t* stage_base = smem + stage * kStageBytes;
    const int tid = threadIdx.x;

    // A: TileM rows x 8 chunks. Rows past M are zero-filled (their source is clamped to a valid row).
    constexpr int kAChunks = TileM * (kTileK * 2 / kChunkBytes);
#pragma unroll
    for (int i = tid; i < kAChunks; i += kThreads) {
      const int row = i / 8, chunk = i % 8;
      const int m = p.m0 + row;
      const bool valid = m < p.M;
      const T* src = p.A + static_cast<int64_t>(valid ? m : 0) * p.K + kt * kTileK + chunk * 8;
      uint8_t* dst = stage_base + row * 128 + ((chunk ^ (row % 8)) * kChunkBytes);
      cutlass::arch::cp_async_zfill<kChunkBytes, cutlass::arch::CacheOperation::Global>(dst, src, valid);
    }

    // B: each strip's k-tile is 2 KiB contiguous in global memory ([N/64][K/16][32][4] words).
    uint8_t* b_base = stage_base + kABytes;
    constexpr int kBChunks = kBBytes / kChunkBytes;
    const int slabs_per_strip = p.K / kSlabK;
#pragma unroll
    for (int i = tid; i < kBChunks; i += kThreads) {
      const int strip = i / (kStripTileBytes / kChunkBytes);
      const int within = i % (kStripTileBytes / kChunkBytes);
      const int global_strip = p.n0 / kPackedStripN + strip;
      const bool valid = global_strip < p.N / kPackedStripN;
      const int32_t* src = p.B +
                           (static_cast<int64_t>(valid ? global_strip : 0) * slabs_per_strip +
                            kt * (kTileK / kSlabK)) * (kSlabBytes / 4) +
                           within * (kChunkBytes / 4);
      cutlass::arch::cp_async_zfill<kChunkBytes, cutlass::arch::CacheOperation::Global>(
          b_base + i * kChunkBytes, src, valid);
    }

    // Scales and offsets of the groups holding the k-tile's two 32-row halves (group_size is a multiple
    // of 32). Layout: [scales half 0][scales half 1][offsets half 0][offsets half 1], TileN values each.
    uint8_t* q_base = b_base + kBBytes;
    constexpr int kQuantChunks = kQuantBytes / kChunkBytes;
#pragma unroll
    for (int i = tid; i < 2 * kQuantRows * kQuantChunks; i += kThreads) {
      const int row = i / kQuantChunks, chunk = i % kQuantChunks;
      const int which = row / kQuantRows, half = row % kQuantRows;
      const int group = (kt * kTileK + half * kQuantK) / p.group_size;
      const int n = p.n0 + chunk * 8;
      const bool valid = n < p.N;
      const T* table = which == 0 ? p.scales : p.offsets;
      const T* src = table + static_cast<int64_t>(group) * p.N + (valid ? n : 0);
      cutlass::arch::cp_async_zfill<kChunkBytes, cutlass::arch::CacheOperation::Global>(
          q_base + row * kQuantBytes + chunk * kChunkBytes, src, valid);
    }
  }

  // acc[mi][ni] += A(stage) x dequant(B(stage)) for this warp's WarpM x WarpN tile.
  __device__ static void compute_tile(const uint8_t* smem, int stage, float (&acc)[kMmaM][kMmaN][4]) {
    const uint8_t* stage_base = smem + stage * kStageBytes;
    const uint8_t* b_base = stage_base + kABytes;
    const T* quant_rows = reinterpret_cast<const T*>(b_base + kBBytes);
    const int lane = threadIdx.x % 32;
    const int warp_id = threadIdx.x / 32;
    const int warp_m0 = (warp_id % kWarpsM) * WarpM;
    const int warp_n0 = (warp_id / kWarpsM) * WarpN;

    warp::ColumnQuant<T> quant[kWords];
#pragma unroll
    for (int slab = 0; slab < kTileK / kSlabK; ++slab) {
      if (slab % (kQuantK / kSlabK) == 0) {
        // A new 32-row half: its scales/offsets for this lane's two columns per 16-column block
        // (c = lane / 4 and c + 8, see the warp header).
        const T* scale_row = quant_rows + (slab * kSlabK / kQuantK) * TileN;
        const T* offset_row = scale_row + kQuantRows * TileN;
#pragma unroll
        for (int w = 0; w < kWords; ++w) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int col = warp_n0 + 16 * w + 8 * half + lane / 4;
            quant[w].scale[half] = Traits::broadcast(scale_row[col]);
            quant[w].offset[half] = Traits::broadcast(offset_row[col]);
          }
        }
      }
      uint32_t a[kMmaM][4];
#pragma unroll
      for (int mi = 0; mi < kMmaM; ++mi) {
        // ldmatrix.x4: lanes 0-15 address rows 0-15 at k 0-7 of the slab, lanes 16-31 the same rows at k 8-15.
        const int row = warp_m0 + 16 * mi + lane % 16;
        const int chunk = 2 * slab + lane / 16;
        warp::load_a_fragment(a[mi], stage_base + row * 128 + ((chunk ^ (row % 8)) * kChunkBytes));
      }

      uint32_t words[kWords * kWordsPerSubBlock];
      load_b_words(b_base, slab, warp_n0, lane, words);
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        const warp::BFragPair frag = warp::dequantize_block<T, Bits>(&words[w * kWordsPerSubBlock], quant[w]);
#pragma unroll
        for (int mi = 0; mi < kMmaM; ++mi) {
          warp::mma_16x8x16<T>(acc[mi][2 * w], a[mi], frag.b[0]);
          warp::mma_16x8x16<T>(acc[mi][2 * w + 1], a[mi], frag.b[1]);
        }
      }
    }
  }

  // This lane's packed words of the warp's columns for one k16 slab, with the widest shared loads the
  // warp tile allows (16 B per lane per instruction when it spans whole 64-column strips: 512 contiguous
  // bytes per warp, conflict-free).
  __device__ static void load_b_words(const uint8_t* b_base, int slab, int warp_n0, int lane,
                                      uint32_t (&words)[kWords * kWordsPerSubBlock]) {
    constexpr int kTotal = kWords * kWordsPerSubBlock;
    constexpr int kVector = kTotal < 4 ? kTotal : 4;
    const int first_word = (warp_n0 / 16) * kWordsPerSubBlock;  // word index of the warp's first column
#pragma unroll
    for (int v = 0; v < kTotal / kVector; ++v) {
      const int word = first_word + v * kVector;
      const int strip = word / Geometry::kWordsPerLane, in_strip = word % Geometry::kWordsPerLane;
      const uint8_t* src = b_base + strip * kStripTileBytes + slab * kSlabBytes +
                           lane * Geometry::kWordsPerLane * 4 + in_strip * 4;
      if constexpr (kVector == 4) {
        const uint4 x = *reinterpret_cast<const uint4*>(src);
        words[4 * v] = x.x, words[4 * v + 1] = x.y, words[4 * v + 2] = x.z, words[4 * v + 3] = x.w;
      } else if constexpr (kVector == 2) {
        const uint2 x = *reinterpret_cast<const uint2*>(src);
        words[2 * v] = x.x, words[2 * v + 1] = x.y;
      } else {
        words[v] = *reinterpret_cast<const uint32_t*>(src);
      }
    }
  }
};

}  // namespace mixgemm::gemm::threadblock
