// The launcher template behind every generated instance of the grouped GEMM (cpp/generator/generate.py writes
// moe_<tile>.cu, instantiating it per stage count, activation type, weight width, weight layout and gated/plain
// epilogue).
// The kernel is the sm80 path's, walked by its grouped schedule (sm80/kernel/grouped.cuh).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "mixgemm/core/check.h"
#include "mixgemm/moe/grouped_args.h"
#include "mixgemm/sm80/launch.cuh"

namespace mixgemm::moe {

using GroupedLaunchFn = void (*)(const GroupedArgs&, cudaStream_t);

template <typename T, int Bits, WeightLayout Layout, int TileM, int TileN, int WarpM, int WarpN, int Stages, bool Gated>
void launch_grouped(const GroupedArgs& args, cudaStream_t stream) {
  using Loop = sm80::threadblock::Mainloop<T, Bits, Layout, TileM, TileN, WarpM, WarpN, Stages, true>;
  using Schedule = sm80::kernel::Grouped<Gated>;
  auto* kernel_fn = sm80::kernel::gemm_mixed_kernel<Loop, Schedule>;
  static std::atomic<uint64_t> opted_in{};
  sm80::opt_in_shared_memory(kernel_fn, Loop::kSharedBytes, opted_in);

  const sm80::kernel::KernelParams<Schedule> params{
      {args.A, args.B, args.scales, args.offsets, nullptr, args.D, args.a_rows_count, args.N, args.K,
       args.group_size},
      {args.workspace, args.semaphores},
      {args.a_rows, args.slot_of, args.block_expert, args.num_padded, args.slot_weights, args.num_slots,
       ceil_div(args.K / sm80::threadblock::kTileK, args.split_k), args.b_expert_stride, args.quant_expert_stride}};
  const dim3 grid(static_cast<unsigned>(args.max_blocks), static_cast<unsigned>(ceil_div(args.N, TileN)),
                  static_cast<unsigned>(args.split_k));
  kernel_fn<<<grid, Loop::kThreads, Loop::kSharedBytes, stream>>>(params);
  check_launch("grouped gemm_mixed_kernel");
}

}  // namespace mixgemm::moe
