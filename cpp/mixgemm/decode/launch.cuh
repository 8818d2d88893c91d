// The launcher template behind every generated decode-kernel instantiation (cpp/generator/generate.py).
#pragma once

#include <cuda_runtime.h>

#include "mixgemm/common/dependent_launch.h"
#include "mixgemm/core/check.h"
#include "mixgemm/core/gemm_args.h"
#include "mixgemm/decode/gemv_kernel.cuh"

namespace mixgemm::decode {

using LaunchFn = void (*)(const GemmArgs&, cudaStream_t);

template <typename T, int Bits, int kMTiles, int kWarps, int kFoldK, WeightLayout kLayout>
void launch_gemv(const GemmArgs& args, cudaStream_t stream) {
  const int batches = args.K / kBatchK;
  // A split starts where a scale row does, so that one warp sees both batches of a 128-k fold.
  constexpr int kBatchesPerRow = Gemv<T, Bits, kMTiles, kWarps, kFoldK, kLayout>::kBatchesPerRow;
  const int batches_per_split = ceil_div(ceil_div(batches, args.split_k), kBatchesPerRow) * kBatchesPerRow;
  const GemvParams params{args.A, args.B, args.scales, args.offsets, args.bias, args.D, args.workspace,
                          args.semaphores, args.M, args.N, args.K, args.group_size, args.split_k,
                          batches_per_split, cutlass::FastDivmod(args.group_size / kHalfK)};
  const dim3 grid(args.N / kStripN, args.split_k);
  // Started as a programmatic dependent on compute capability 9.0 on: the kernel prefetches its weights
  // while the previous kernel on the stream ends (the prologue of gemv_kernel.cuh says what waits for what).
  launch_kernel<gemv_kernel<T, Bits, kMTiles, kWarps, kFoldK, kLayout>>(true, grid, dim3(32 * kWarps), 0, stream,
                                                                       "gemv_kernel", params);
}

}  // namespace mixgemm::decode
