// The launcher template behind every generated instantiation of the sm80 path (cpp/generator/generate.py
// writes one .cu per tile shape that explicitly instantiates it for each stage count, activation type, weight
// width and schedule).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "mixgemm/core/check.h"
#include "mixgemm/sm80/config.h"
#include "mixgemm/sm80/kernel/gemm_mixed.cuh"

namespace mixgemm::sm80 {

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

// One tile config of one key, walked by `Schedule` (kernel::DataParallel or kernel::StreamK).
template <typename T, int Bits, WeightLayout kWeightLayout, int TileM, int TileN, int WarpM, int WarpN, int Stages,
          typename Schedule>
void launch_gemm(const GemmArgs& args, cudaStream_t stream) {
  using Loop = threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>;
  auto* kernel_fn = kernel::gemm_mixed_kernel<Loop, Schedule>;
  static std::atomic<uint64_t> opted_in{};
  opt_in_shared_memory(kernel_fn, Loop::kSharedBytes, opted_in);

  kernel::KernelParams<Schedule> params{
      {args.A, args.B, args.scales, args.offsets, args.bias, args.D, args.M, args.N, args.K, args.group_size},
      {args.workspace, args.semaphores},
      Schedule::params(args, TileM, TileN)};
  const dim3 grid = Schedule::grid(args, params.schedule, TileM, TileN);
  kernel_fn<<<grid, Loop::kThreads, Loop::kSharedBytes, stream>>>(params);
  check_launch("gemm_mixed_kernel");
  Schedule::template after_kernel<T>(args, stream);
}

}  // namespace mixgemm::sm80
