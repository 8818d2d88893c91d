// The launcher template behind every generated instantiation (tools/generate_kernels.py writes one .cu
// per tile shape that explicitly instantiates it for each stage count and activation type).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "mixgemm/common/check.h"
#include "mixgemm/gemm/gemm_args.h"
#include "mixgemm/gemm/kernel/gemm_mixed.cuh"
#include "mixgemm/gemm/kernel/splitk_reduce.cuh"

namespace mixgemm::gemm {

using LaunchFn = void (*)(const GemmArgs&, cudaStream_t);

// Above 48 KiB a kernel must opt in to its dynamic shared memory, once per kernel and device: a bit per
// device remembers it, since the driver call on every launch cost host time (issue 9).
template <typename Kernel>
void opt_in_shared_memory(Kernel* kernel_fn, int bytes, std::atomic<uint64_t>& opted_in) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;  // beyond 64 devices: every launch opts in
  if (!(opted_in.load(std::memory_order_relaxed) & bit)) {
    check_cuda(cudaFuncSetAttribute(kernel_fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
               "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
}

template <typename T, int Bits, WeightLayout kWeightLayout, int TileM, int TileN, int WarpM, int WarpN,
          int Stages>
void launch_gemm(const GemmArgs& args, cudaStream_t stream) {
  using Loop = threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>;
  const bool stream_k = args.mode == SplitKMode::kStreamK;
  auto* kernel_fn = stream_k
                        ? kernel::gemm_mixed_kernel<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages, true>
                        : kernel::gemm_mixed_kernel<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages, false>;
  static std::atomic<uint64_t> opted_in[2]{};
  opt_in_shared_memory(kernel_fn, Loop::kSharedBytes, opted_in[stream_k]);

  const int k_tiles = args.K / threadblock::kTileK;
  kernel::KernelParams params{args.A, args.B, args.scales, args.offsets, args.bias, args.D, args.workspace,
                              args.semaphores, args.M, args.N, args.K, args.group_size, args.split_k,
                              ceil_div(k_tiles, args.split_k), args.mode, {}};
  dim3 grid(ceil_div(args.M, TileM), ceil_div(args.N, TileN), args.split_k);
  if (stream_k) {
    const int64_t units = kernel::stream_k_units(args.M, args.N, TileM, TileN, k_tiles);
    params.stream_k = kernel::stream_k_partition(units, k_tiles, args.split_k);
    grid = dim3(kernel::stream_k_blocks(units, params.stream_k));
  }
  kernel_fn<<<grid, Loop::kThreads, Loop::kSharedBytes, stream>>>(params);
  check_launch("gemm_mixed_kernel");

  if (args.mode == SplitKMode::kParallel) {
    constexpr int kThreads = 256;
    const int64_t threads = static_cast<int64_t>(args.M) * args.N / 4;
    kernel::splitk_reduce_kernel<T><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0,
                                      stream>>>(args.workspace, static_cast<const T*>(args.bias),
                                                static_cast<T*>(args.D), args.M, args.N, args.split_k);
    check_launch("splitk_reduce_kernel");
  }
}

}  // namespace mixgemm::gemm
