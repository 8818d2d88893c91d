// Threadblock level: one k-tile (64 rows of K) x TileN columns of packed weights, per weight layout (gemm_args.h,
// WeightLayout): the cp.async copies from global to shared memory, and the shared-memory reads that give a warp
// its lane's words of one k16 slab.
//
// Both layouts hold the same bytes per k-tile (TileN x 64 codes) and are copied the same way: a k-tile is kRuns
// contiguous runs of kRunChunks 16-byte chunks in global memory, runs `run_step` chunks apart, and shared memory
// holds the runs back to back. What a run is:
//   sm80 layout [N/64, K/16, 32, 4 Bits/4]: one 64-column strip's four slabs (2 KiB for int4); a strip past N
//        re-reads an in-weight strip (see RunCopies). Per slab a lane's words of the strip's four 16 x 16 blocks
//        are 16 adjacent bytes, so a warp reads them with one lds.128 (512 contiguous bytes, conflict-free).
//   sm90 layout [K/16, N/16, 32, Bits/4]: one slab's TileN / 16 blocks (2 KiB at TileN = 256, int4); a block past N
//        re-reads an in-weight block. A lane's word of a block is 4 bytes inside the block's 128 (int4), so four
//        blocks would cost four lds.32; ldmatrix.x4 reads them in one instruction instead. Each of its four
//        8 x 16-byte matrices is one block, and lane 4 g + t receives bytes 4 t.. of row g, i.e. bytes 4 (4 g + t) =
//        its own word: the sm80 layout's one 16-byte load per lane, and each 8-row phase reads 128 contiguous
//        bytes. An int8 block is 256 bytes with 8 per lane (no ldmatrix row holds them at ldmatrix's 4-byte
//        stride), read with one lds.64 per block, also conflict-free.
#pragma once

#include <cstdint>

#include "mixgemm/common/shared_address.cuh"
#include "mixgemm/core/kernel_key.h"
#include "mixgemm/layout/fragments.cuh"
#include "mixgemm/layout/geometry.h"

namespace mixgemm::sm80::threadblock {

constexpr int kChunkBytes = 16;  // one cp.async / ldmatrix row: 8 fp16 or bf16 values
constexpr int kTileK = 64;       // K per main-loop step
using layout::kBlockN;           // columns per 16 x 16 block (both layouts group a lane's codes by block)
using layout::kSlabK;            // K rows per mma / packed slab
constexpr int kSlabs = kTileK / kSlabK;  // slabs per k-tile: 4

// The sm80 layout's geometry per k-tile: a strip's four slabs are one contiguous run in global memory.
template <int Bits>
struct PackedGeometry : layout::Geometry<WeightLayout::kSm80, Bits> {
  using Base = layout::Geometry<WeightLayout::kSm80, Bits>;
  static constexpr int kWordsPerSubBlock = Base::kWordsPerBlock;        // 16 x 16 block: 1 (int4) or 2 (int8)
  static constexpr int kStripTileBytes = kSlabs * Base::kSlabBytes;     // one strip's k-tile
};
constexpr int kPackedStripN = layout::kStripN;  // columns per sm80-layout strip

// The copies of one k-tile, as both layouts make them. Thread t copies chunks t + j Threads (j = 0 ..
// kPerThread - 1) of the tile: run (i / kRunChunks), chunk (i % kRunChunks) of it. The steps from a thread's
// copy 0 to its copy j are constants when the thread count and the run length divide one another. A layout
// sets the thread's first source chunk, the chunks between runs, which copies lie inside the weight and how
// far a k-tile moves the source. A copy past the weight's last column re-reads copy 0's chunk, which the
// layouts keep inside the weight: it only feeds columns the epilogue never stores.
template <int Runs, int RunChunks, int Threads>
class RunCopies {
 public:
  static constexpr int kRuns = Runs;
  static constexpr int kRunChunks = RunChunks;
  static constexpr int kChunks = kRuns * kRunChunks;
  static constexpr int kPerThread = kChunks / Threads;
  static constexpr int kBytes = kChunks * kChunkBytes;
  static_assert(kChunks % Threads == 0, "B chunks must divide evenly among the threads");
  static_assert(kRunChunks % Threads == 0 || Threads % kRunChunks == 0,
                "a thread's runs and in-run chunks must step by constants");
  static_assert(kPerThread <= 32, "a 32-bit mask holds which copies lie inside the weight");

 protected:
  __device__ static constexpr int run_delta(int j) {
    return Threads % kRunChunks == 0 ? j * (Threads / kRunChunks) : (j * Threads) / kRunChunks;
  }
  __device__ static constexpr int within_delta(int j) {
    return Threads % kRunChunks == 0 ? 0 : (j * Threads) % kRunChunks;
  }

  // Sets each copy's distance from copy 0, once per threadblock, from `inside` (bit j: copy j lies inside
  // the weight) and run_step_: a k-tile then costs one address computation per copy.
  __device__ void set_offsets(uint32_t inside) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      offset_[j] = (inside >> j) & 1 ? run_delta(j) * run_step_ + within_delta(j) : 0;
  }

  // Issues this thread's copies of the current k-tile into the stage's B bytes at shared address `stage_b`.
  __device__ void copy(uint32_t stage_b) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j)
      cp_async_16(stage_b + (threadIdx.x + j * Threads) * kChunkBytes, src_ + offset_[j]);
  }

  // Asks L2 for the lines of this thread's copies of the current k-tile, copying nothing (the kernel's start as a
  // programmatic dependent, kernel/dependent_start.cuh).
  __device__ void prefetch() const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) layout::prefetch_l2(src_ + offset_[j]);
  }

  // This thread's copy 0 of the current k-tile. When copy 0 lies past the weight's last column, so do all
  // the thread's copies (their runs and chunks only grow with j); the layout then points it at the tile's
  // first column instead, which is inside the weight for every k-tile.
  const uint4* src_;
  int run_step_;            // chunks between runs; offsets within the weight fit: B is < 2^31 chunks (32 GiB)
  int offset_[kPerThread];  // chunks from copy 0 to copy j; 0 (copy 0's chunk) for a copy past the weight
};

// The sm90 layout's geometry: a 16 x 16 block is kBlockChunks cp.async chunks.
template <int Bits>
struct BlockGeometry : layout::Geometry<WeightLayout::kSm90, Bits> {
  using Base = layout::Geometry<WeightLayout::kSm90, Bits>;
  static constexpr int kBlockChunks = Base::kBlockBytes / kChunkBytes;  // 8 (int4) or 16 (int8)
};

template <WeightLayout layout, int Bits, int TileN, int Threads>
class PackedBTile;

// Each layout's copies of a TileN-column k-tile: the sm80 layout's runs are the tile's 64-column strips (a
// strip's k-tile, 128 or 256 chunks), the sm90 layout's its four slab rows (TileN / 16 blocks each).
template <int Bits, int TileN, int Threads>
using Sm80Copies = RunCopies<TileN / kPackedStripN, PackedGeometry<Bits>::kStripTileBytes / kChunkBytes, Threads>;
template <int Bits, int TileN, int Threads>
using Sm90Copies = RunCopies<kSlabs, (TileN / kBlockN) * BlockGeometry<Bits>::kBlockChunks, Threads>;

// ---------------------------------------------------------------------------------------------------------
template <int Bits, int TileN, int Threads>
class PackedBTile<WeightLayout::kSm80, Bits, TileN, Threads> : public Sm80Copies<Bits, TileN, Threads> {
 public:
  static_assert(TileN % kPackedStripN == 0, "sm80 layout: TileN must be a multiple of the 64-column strip");
  using Geometry = PackedGeometry<Bits>;
  using Copies = Sm80Copies<Bits, TileN, Threads>;
  static constexpr int kRunChunks = Copies::kRunChunks;  // 128 (int4) or 256 (int8)

  // Prepares the copies of k-tiles kt_begin, kt_begin + 1, ... of the columns n0 .. n0 + TileN.
  __device__ PackedBTile(const int32_t* B, int N, int K, int n0, int kt_begin) {
    const int strips = N / kPackedStripN, first_strip = n0 / kPackedStripN;
    this->run_step_ = (K / kSlabK) * (Geometry::kSlabBytes / kChunkBytes);  // chunks between strips
    const int strip = threadIdx.x / kRunChunks, within = threadIdx.x % kRunChunks;
    uint32_t inside = 0;
#pragma unroll
    for (int j = 0; j < Copies::kPerThread; ++j)
      inside |= uint32_t{first_strip + strip + Copies::run_delta(j) < strips} << j;
    this->set_offsets(inside);
    const int source_strip = first_strip + strip < strips ? first_strip + strip : first_strip;
    this->src_ = reinterpret_cast<const uint4*>(B) + static_cast<int64_t>(source_strip) * this->run_step_ +
                 kt_begin * kRunChunks + within;
  }

  // Issues this thread's copies of the next k-tile into `stage_b`, then steps to the k-tile after.
  __device__ void load(uint32_t stage_b) {
    this->copy(stage_b);
    this->src_ += kRunChunks;  // the strip's next four slabs follow its current ones
  }

  // As load(), asking L2 for the lines instead of copying them.
  __device__ void prefetch_next() {
    this->prefetch();
    this->src_ += kRunChunks;
  }

  // A lane's words of blocks first_block .. first_block + kBlocks - 1 (16 columns each) of a slab are read
  // with the widest shared loads the blocks allow (16 bytes per lane for a whole strip). lane_offset() is
  // where they start in slab 0 of a stage's B bytes; read_words() adds the slab and each load's step, both
  // constants: a warp's blocks are either whole strips (WarpN a multiple of 64) or lie inside one strip
  // (WarpN 16 or 32 divides the strip's 64 columns), so load v is kVector v words past the first.
  template <int kBlocks>
  static constexpr int kTotal = kBlocks * Geometry::kWordsPerSubBlock;
  template <int kBlocks>
  static constexpr int kVector = kTotal<kBlocks> < 4 ? kTotal<kBlocks> : 4;

  template <int kBlocks>
  __device__ static uint32_t lane_offset(int first_block, int lane) {
    const int first_word = first_block * Geometry::kWordsPerSubBlock;
    return (first_word / Geometry::kWordsPerLane) * Geometry::kStripTileBytes + lane * Geometry::kWordsPerLane * 4 +
           (first_word % Geometry::kWordsPerLane) * 4;
  }

  template <int kBlocks>
  __device__ static void read_words(uint32_t lane_b, int slab, uint32_t (&words)[kTotal<kBlocks>]) {
    constexpr int kVec = kVector<kBlocks>;
#pragma unroll
    for (int v = 0; v < kTotal<kBlocks> / kVec; ++v) {
      const int step = v * kVec;  // words past the first
      const uint32_t address = lane_b + slab * Geometry::kSlabBytes +
                               (step / Geometry::kWordsPerLane) * Geometry::kStripTileBytes +
                               (step % Geometry::kWordsPerLane) * 4;
      if constexpr (kVec == 4) {
        const uint4 x = load_shared_v4(address);
        words[4 * v] = x.x, words[4 * v + 1] = x.y, words[4 * v + 2] = x.z, words[4 * v + 3] = x.w;
      } else if constexpr (kVec == 2) {
        const uint2 x = load_shared_v2(address);
        words[2 * v] = x.x, words[2 * v + 1] = x.y;
      } else {
        words[v] = load_shared_u32(address);
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------------------
template <int Bits, int TileN, int Threads>
class PackedBTile<WeightLayout::kSm90, Bits, TileN, Threads> : public Sm90Copies<Bits, TileN, Threads> {
 public:
  static_assert(TileN % kBlockN == 0, "sm90 layout: TileN must be a multiple of the 16-column block");
  static constexpr int kWordsPerBlock = BlockGeometry<Bits>::kWordsPerBlock;
  static constexpr int kBlockBytes = BlockGeometry<Bits>::kBlockBytes;
  static constexpr int kBlockChunks = BlockGeometry<Bits>::kBlockChunks;
  static constexpr int kTileBlocks = TileN / kBlockN;
  using Copies = Sm90Copies<Bits, TileN, Threads>;
  static constexpr int kRunChunks = Copies::kRunChunks;  // one slab of the tile's blocks

  __device__ PackedBTile(const int32_t* B, int N, int K, int n0, int kt_begin) {
    const int blocks = N / kBlockN, first_block = n0 / kBlockN;
    this->run_step_ = blocks * kBlockChunks;  // chunks between slabs: N's blocks
    const int slab = threadIdx.x / kRunChunks, within = threadIdx.x % kRunChunks;
    uint32_t inside = 0;
#pragma unroll
    for (int j = 0; j < Copies::kPerThread; ++j) {
      const int block = (within + Copies::within_delta(j)) / kBlockChunks;
      inside |= uint32_t{first_block + block < blocks} << j;
    }
    this->set_offsets(inside);
    const int64_t first_row = static_cast<int64_t>(kt_begin) * kSlabs + slab;  // this thread's slab row
    const int source_chunk = inside & 1 ? first_block * kBlockChunks + within : first_block * kBlockChunks;
    this->src_ = reinterpret_cast<const uint4*>(B) + first_row * this->run_step_ + source_chunk;
  }

  __device__ void load(uint32_t stage_b) {
    this->copy(stage_b);
    this->src_ += kSlabs * this->run_step_;  // the k-tile's four slab rows, then the next k-tile's
  }

  // As load(), asking L2 for the lines instead of copying them.
  __device__ void prefetch_next() {
    this->prefetch();
    this->src_ += kSlabs * this->run_step_;
  }

  template <int kBlocks>
  static constexpr int kMatrices = kBlocks < 4 ? kBlocks : 4;  // int4: blocks per ldmatrix

  // As for the sm80 layout: lane_offset() in slab 0, read_words() adds constants. int4: ldmatrix lane
  // 8 m + r addresses row r (16 bytes) of matrix m = block m of each group of kMatrices blocks.
  template <int kBlocks>
  __device__ static uint32_t lane_offset(int first_block, int lane) {
    if constexpr (Bits == 4) {
      constexpr int kM = kMatrices<kBlocks>;
      static_assert(kBlocks % kM == 0, "warp tiles of 16, 32 or a multiple of 64 columns");
      return (first_block + lane / 8 % kM) * kBlockBytes + (lane % 8) * kChunkBytes;
    } else {
      return first_block * kBlockBytes + lane * 8;
    }
  }

  template <int kBlocks>
  __device__ static void read_words(uint32_t lane_b, int slab, uint32_t (&words)[kBlocks * kWordsPerBlock]) {
    const uint32_t slab_b = lane_b + slab * kTileBlocks * kBlockBytes;
    if constexpr (Bits == 4) {
      constexpr int kM = kMatrices<kBlocks>;
#pragma unroll
      for (int v = 0; v < kBlocks / kM; ++v) {
        uint32_t regs[kM];
        ldmatrix<kM>(regs, slab_b + v * kM * kBlockBytes);
#pragma unroll
        for (int i = 0; i < kM; ++i) words[v * kM + i] = regs[i];
      }
    } else {
#pragma unroll
      for (int b = 0; b < kBlocks; ++b) {
        const uint2 x = load_shared_v2(slab_b + b * kBlockBytes);
        words[2 * b] = x.x, words[2 * b + 1] = x.y;
      }
    }
  }
};

}  // namespace mixgemm::sm80::threadblock
