// The launcher template behind every generated instance of the grouped GEMV, the decode form of the grouped
// GEMM (cpp/generator/generate.py writes moe_decode_w<warps>.cu): the decode path's batched GEMV
// (decode/gemv_kernel.cuh) with one block of 8 sorted positions of one expert per grid z, so few tokens per
// expert read each expert's weights once, at the decode path's bandwidth, without padding to 16-row mma tiles.
#pragma once

#include <cuda_runtime.h>

#include "mixgemm/common/dependent_launch.h"
#include "mixgemm/core/check.h"
#include "mixgemm/decode/gemv_kernel.cuh"
#include "mixgemm/moe/grouped_args.h"

namespace mixgemm::moe {

// The positions of one grouped-GEMV block: the decode kernel's one m-tile of 8 rows.
constexpr int kGemvBlockM = decode::kMmaRows;

template <typename T, int Bits, WeightLayout Layout, int kWarps, int kFoldK, bool Gated>
void launch_grouped_gemv(const GroupedArgs& args, cudaStream_t stream) {
  constexpr int kMoe = Gated ? decode::kGroupedGated : decode::kGroupedPlain;
  using G = decode::Gemv<T, Bits, 1, kWarps, kFoldK, Layout, kMoe>;
  const int batches = args.K / decode::kBatchK;
  const int batches_per_split = ceil_div(ceil_div(batches, args.split_k), G::kBatchesPerRow) * G::kBatchesPerRow;
  decode::GemvParams params{args.A, args.B, args.scales, args.offsets, nullptr, args.D, args.workspace,
                            args.semaphores, args.a_rows_count, args.N, args.K, args.group_size, args.split_k,
                            batches_per_split, cutlass::FastDivmod(args.group_size / decode::kHalfK)};
  params.grouped = {args.a_rows,       args.slot_of,    args.block_expert,
                    args.num_padded,   args.slot_weights, args.num_slots,
                    args.max_blocks * kGemvBlockM, args.b_expert_stride, args.quant_expert_stride,
                    args.direct};
  // Direct: one block per slot, no routing blocks.
  const int blocks = args.direct.topk_ids != nullptr ? args.num_slots : args.max_blocks;
  const dim3 grid(args.N / decode::kStripN, args.split_k, blocks);
  launch_kernel<decode::gemv_kernel<T, Bits, 1, kWarps, kFoldK, Layout, kMoe>>(true, grid, dim3(32 * kWarps), 0,
                                                                              stream, "grouped gemv_kernel", params);
}

}  // namespace mixgemm::moe
