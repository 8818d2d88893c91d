// The geometry of the two weight layouts, host and device: what python/mixgemm/layouts/{sm80,sm90}.py pack
// and every path reads. Both layouts keep, per 16 (k) x 16 (n) block of W, the 8 codes lane 4 c + t needs for
// its mma.m16n8k16 fragments together, in Bits / 4 32-bit words; they differ in where the blocks sit:
//
//   sm80: [N/64, K/16, 32, 4 * Bits/4] words: per 64-column strip and 16-deep slab, a lane's words of the
//         strip's four blocks are adjacent (one 16-byte load), and a strip's slabs follow each other along K.
//   sm90: [K/16, N/16, 32, Bits/4] words: per slab, the blocks of all N follow each other; a block is 128
//         (int4) or 256 (int8) contiguous bytes, the register order of CUTLASS 3.x's wgmma collective.
//
// The fragment code of each layout is in sm80.cuh and sm90.cuh beside this file.
#pragma once

#include "mixgemm/core/kernel_key.h"

namespace mixgemm::layout {

constexpr int kSlabK = 16;   // K rows per slab: one mma k-step (both layouts)
constexpr int kBlockN = 16;  // columns per block: two n8 tiles (both layouts)
constexpr int kLanes = 32;

template <WeightLayout kLayout, int Bits>
struct Geometry;

template <int Bits>
struct Geometry<WeightLayout::kSm80, Bits> {
  static_assert(Bits == 4 || Bits == 8, "int4 or int8 weights");
  static constexpr int kStripN = 64;                           // columns per strip
  static constexpr int kWordsPerBlock = Bits / 4;              // per lane per 16 x 16 block
  static constexpr int kWordsPerLane = (kStripN / kBlockN) * kWordsPerBlock;  // per lane per strip slab
  static constexpr int kSlabBytes = kLanes * kWordsPerLane * 4;  // one strip slab: 512 B (int4), 1 KiB (int8)
};

template <int Bits>
struct Geometry<WeightLayout::kSm90, Bits> {
  static_assert(Bits == 4 || Bits == 8, "int4 or int8 weights");
  static constexpr int kWordsPerBlock = Bits / 4;              // per lane
  static constexpr int kBlockBytes = kLanes * kWordsPerBlock * 4;  // 128 (int4) or 256 (int8)
};

// The sm80 layout's strip width: the decode and dequant paths walk both layouts strip by strip (four
// 16-column blocks of the sm90 layout are a strip's columns too).
constexpr int kStripN = Geometry<WeightLayout::kSm80, 4>::kStripN;

}  // namespace mixgemm::layout
