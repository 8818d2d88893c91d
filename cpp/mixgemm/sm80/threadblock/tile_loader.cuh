// Threadblock level: the layout of one pipeline stage in shared memory, and the cp.async copies that fill
// it with a k-tile.
//
// Per stage, shared memory holds one k-tile (TileK = 64) of
//   A      : TileM x 64 activations, 128 B per row, 16-byte chunks XOR-swizzled by (row % 8) so the eight
//            row addresses of each ldmatrix phase fall in eight different bank groups;
//   B      : TileN x 64 packed weights in the weight layout's order (packed_b_tile.cuh: contiguous runs
//            of global memory, stored back to back; prepack already ordered the codes per lane);
//   scales and offsets for each 32-row half of the k-tile (TileN values each): each half holds its own
//   group's row, so group sizes down to 32 (two groups in one k-tile) and odd multiples of 32 (96: a
//   group boundary inside a k-tile) work; for multiples of 64 both halves hold the same row.
//
// Why a loader object: every address a thread copies from or to is an affine function of the k-tile, so
// the loader computes the k-tile-independent part once per threadblock and each k-tile costs a pointer
// increment per copy. Recomputing the indices per k-tile (divisions, row clamps, 64-bit multiplies,
// loops whose trip count depends on the thread index) was about two thirds of the 128 x 256 kernel's
// instructions (SASS of the main loop: ~900 integer instructions per 128 mma; ncu: 5.8 instructions
// issued per mma, H100, 2026-11-23).
#pragma once

#include <cstdint>

#include "mixgemm/common/shared_address.cuh"
#include "mixgemm/sm80/config.h"
#include "mixgemm/sm80/threadblock/packed_b_tile.cuh"

namespace mixgemm::sm80::threadblock {

constexpr int kQuantK = 32;       // K rows sharing one row of scales/offsets in shared memory: the smallest group
constexpr int kARowChunks = kTileK * 2 / kChunkBytes;  // 16-byte chunks per 64-wide row of A: 8

// Byte offsets inside one stage: [A][B][scales: kQuantRows rows][offsets: kQuantRows rows].
// Both weight layouts take the same bytes per k-tile, TileN x 64 codes.
template <int Bits, int TileM, int TileN>
struct StageLayout {
  static constexpr int kABytes = TileM * kTileK * 2;
  static constexpr int kBBytes = TileN * kTileK * Bits / 8;
  static constexpr int kQuantBytes = TileN * 2;        // one row of scales (or of offsets)
  static constexpr int kQuantRows = kTileK / kQuantK;  // per table: one row per 32-row half of the k-tile
  static constexpr int kQuantOffset = kABytes + kBBytes;
  static constexpr int kStageBytes = kQuantOffset + 2 * kQuantRows * kQuantBytes;
};

// kGatherA: A's rows come through Problem::a_rows (the grouped GEMM). A template flag, not a null test, so the
// dense kernels keep their registers: a run-time pointer kept alive across stream-K's segments made them spill.
template <typename T, int Bits, WeightLayout kWeightLayout, int TileM, int TileN, int Threads, bool kGatherA = false>
class TileLoader {
 public:
  using Layout = StageLayout<Bits, TileM, TileN>;
  using BTile = PackedBTile<kWeightLayout, Bits, TileN, Threads>;
  static_assert(BTile::kBytes == Layout::kBBytes, "the B copies fill the stage's B bytes");

  // A: thread t copies chunk t % 8 of rows t / 8 + j * kARowStep. kARowStep is a multiple of 8, so
  // (row % 8), and with it the swizzle, is the same for all of a thread's rows.
  static constexpr int kARowStep = Threads / kARowChunks;
  static constexpr int kAPerThread = TileM * kARowChunks / Threads;
  static_assert(Threads % 64 == 0, "the loader assumes whole pairs of warps (rows step by a multiple of 8)");
  static_assert(TileM * kARowChunks % Threads == 0, "A chunks must divide evenly among the threads");

  // Scales and offsets: 2 tables x kQuantRows rows x kQuantRowChunks chunks, at most one per thread.
  static constexpr int kQuantRowChunks = Layout::kQuantBytes / kChunkBytes;
  static constexpr int kQuantChunks = 2 * Layout::kQuantRows * kQuantRowChunks;
  static_assert(kQuantChunks <= Threads, "one scale/offset chunk per thread at most");

  struct Problem {
    const T* A;
    const int32_t* B;
    const T* scales;
    const T* offsets;
    int M, N, K, group_size;
    int m0, n0;  // this threadblock's first output row and column
    // Gathered A (kGatherA, the grouped GEMM of mixture-of-experts): tile row r reads row a_rows[m0 + r] of A,
    // so a block's rows are the tokens routed to its expert wherever they sit in x. Otherwise row m0 + r.
    const int32_t* a_rows = nullptr;
  };

  // Prepares the copies of k-tiles kt_begin, kt_begin + 1, ... (load() takes them in that order).
  __device__ TileLoader(const Problem& p, int kt_begin) : b_(p.B, p.N, p.K, p.n0, kt_begin) {
    const int t = threadIdx.x;

    // A. Rows past M re-read row M - 1 (see cp_async_16): they only reach accumulator rows that no
    // epilogue stores. Each copy's distance from copy 0 is computed here once; it is under TileM x K elements
    // (gathered: under M x K, which the grouped runner keeps below 2^31), so it fits an int.
    const int chunk = t % kARowChunks, row0 = t / kARowChunks;
    auto a_row = [&](int r) {
      if constexpr (kGatherA) return min(p.a_rows[p.m0 + r], p.M - 1);
      else return min(p.m0 + r, p.M - 1);
    };
    const int first_row = a_row(row0);
    a_src_ = p.A + static_cast<int64_t>(first_row) * p.K + kt_begin * kTileK + chunk * 8;
#pragma unroll
    for (int j = 0; j < kAPerThread; ++j) a_offset_[j] = (a_row(row0 + j * kARowStep) - first_row) * p.K;
    a_dst_ = row0 * (kTileK * 2) + ((chunk ^ (row0 % 8)) * kChunkBytes);

    // Scales/offsets: thread t < kQuantChunks copies chunk t % kQuantRowChunks of row t / kQuantRowChunks:
    // table (row / kQuantRows), half (row % kQuantRows). Its group advances as k-tiles go by (see load()).
    // A chunk past N re-reads column 0's.
    if (t < kQuantChunks) {
      const int row = t / kQuantRowChunks, q_chunk = t % kQuantRowChunks;
      const int half = row % Layout::kQuantRows;
      const int n = p.n0 + q_chunk * 8;
      k32_per_group_ = p.group_size / kQuantK;
      const int k32 = kt_begin * (kTileK / kQuantK) + half;  // this half's 32-row index in K
      q_rem_ = k32 % k32_per_group_;
      q_src_ = (row < Layout::kQuantRows ? p.scales : p.offsets) + static_cast<int64_t>(k32 / k32_per_group_) * p.N +
               (n < p.N ? n : 0);
      q_N_ = p.N;
      q_dst_ = Layout::kQuantOffset + row * Layout::kQuantBytes + q_chunk * kChunkBytes;
    }
  }

  // Issues this thread's cp.async copies of the next k-tile into the stage at shared address `stage`, then
  // steps to the k-tile after.
  __device__ void load(uint32_t stage) {
#pragma unroll
    for (int j = 0; j < kAPerThread; ++j)
      cp_async_16(stage + a_dst_ + j * kARowStep * (kTileK * 2), a_src_ + a_offset_[j]);
    b_.load(stage + Layout::kABytes);
    if (threadIdx.x < kQuantChunks) {
      cp_async_16(stage + q_dst_, q_src_);
      step_quant();
    }
    a_src_ += kTileK;
  }

  // As load(), for the weight, scale and offset lines only, asking L2 for them instead of copying them. A is left
  // alone: the kernel before this one may still be writing it (kernel/dependent_start.cuh).
  __device__ void prefetch_next() {
    b_.prefetch_next();
    if (threadIdx.x < kQuantChunks) {
      layout::prefetch_l2(q_src_);
      step_quant();
    }
    a_src_ += kTileK;
  }

 private:
  // The next k-tile's half is 2 rows of 32 further on: at most two group boundaries (group size 32).
  __device__ void step_quant() {
    q_rem_ += kTileK / kQuantK;
#pragma unroll
    for (int step = 0; step < kTileK / kQuantK; ++step) {
      if (q_rem_ >= k32_per_group_) {
        q_rem_ -= k32_per_group_;
        q_src_ += q_N_;
      }
    }
  }

  const T* a_src_;             // copy 0 of the current k-tile
  int a_offset_[kAPerThread];  // elements from copy 0 to copy j
  int a_dst_;
  BTile b_;
  const T* q_src_ = nullptr;
  int q_rem_ = 0, k32_per_group_ = 1, q_N_ = 0, q_dst_ = 0;
};

}  // namespace mixgemm::sm80::threadblock
