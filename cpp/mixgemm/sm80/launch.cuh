// The launcher template behind every generated instantiation of the sm80 path (cpp/generator/generate.py
// writes one .cu per tile shape that explicitly instantiates it for each stage count, activation type, weight
// width and schedule).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "mixgemm/common/dependent_launch.h"
#include "mixgemm/core/check.h"
#include "mixgemm/core/device_info.h"
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

// The shared memory a block of a dependent grid of `blocks` asks for: at least its own `bytes`, and enough that an
// SM admits no more of its blocks than the grid spreads over each, ceil(blocks / SMs).
//
// Why: a dependent grid's blocks are placed when the kernel before it releases them, into whatever slots are free
// at that moment, not spread SM by SM as an ordinary launch onto an idle GPU places them. With slots to spare (a
// 16-row tile admits 4 blocks per SM by its registers; a grid of 128 blocks needs one) they can crowd onto some SMs
// and leave others idle, which is how we read the back-to-back chains that lost most where the grid used fewest of
// the slots (docs/perf-notes/2026-11-28-sm80-small-tiles-as-dependents.md). Admitting only the grid's share, the
// next grid's blocks can land only in the slots ours leave, one for one on the same SMs. (Launched ordinarily onto
// an idle GPU, such a grid spreads the same way: the share changes nothing there.)
// `static_bytes`: the kernel's own __shared__ variables, which count against both bounds.
constexpr int dependent_shared_bytes(int64_t blocks, int bytes, int static_bytes, const DeviceInfo& device) {
  const int64_t per_sm = std::max<int64_t>(1, (blocks + device.sm_count - 1) / device.sm_count);
  const int64_t share = device.shared_per_sm / per_sm - device.reserved_shared_per_block - static_bytes;
  return static_cast<int>(
      std::min<int64_t>(std::max<int64_t>(bytes, share), device.shared_per_block_optin - static_bytes));
}

// On an H100 (132 SMs; 228 KiB of shared memory an SM, 1 KiB of it reserved per block, 227 KiB at most a block) a
// 16 x 128 tile at 4 stages (28 KiB, and 128 bytes of __shared__): an SM admits exactly ceil(blocks / 132) of its
// blocks, and the tile keeps its own 28 KiB where the grid needs more blocks an SM than its registers allow (4).
namespace dependent_shared_bytes_check {
constexpr DeviceInfo kH100{9, 0, 132, 233472, 232448, 1024};
constexpr int kTile = 28672, kStatic = 128;
constexpr int admitted(int bytes) { return kH100.shared_per_sm / (bytes + kStatic + kH100.reserved_shared_per_block); }
static_assert(admitted(dependent_shared_bytes(132, kTile, kStatic, kH100)) == 1);
static_assert(admitted(dependent_shared_bytes(256, kTile, kStatic, kH100)) == 2);
static_assert(admitted(dependent_shared_bytes(344, kTile, kStatic, kH100)) == 3);
static_assert(admitted(dependent_shared_bytes(528, kTile, kStatic, kH100)) == 4);
static_assert(dependent_shared_bytes(2000, kTile, kStatic, kH100) == kTile);
}  // namespace dependent_shared_bytes_check

// A kernel's static shared memory (its __shared__ variables), read once.
template <typename Kernel>
int static_shared_bytes(Kernel* kernel_fn) {
  cudaFuncAttributes attributes{};
  check_cuda(cudaFuncGetAttributes(&attributes, kernel_fn), "cudaFuncGetAttributes");
  return static_cast<int>(attributes.sharedSizeBytes);
}

// One tile config of one key, walked by `Schedule` (kernel::DataParallel or kernel::StreamK).
template <typename T, int Bits, WeightLayout kWeightLayout, int TileM, int TileN, int WarpM, int WarpN, int Stages,
          typename Schedule>
void launch_gemm(const GemmArgs& args, cudaStream_t stream) {
  using Loop = threadblock::Mainloop<T, Bits, kWeightLayout, TileM, TileN, WarpM, WarpN, Stages>;
  constexpr auto kernel_fn = kernel::gemm_mixed_kernel<Loop, Schedule>;
  constexpr bool kDependent = kernel::kStartsAsDependent<Loop>;  // kernel/dependent_start.cuh
  // The parallel split's reduction kernel follows as a dependent too (kernel/splitk_reduce.cuh), and releases the
  // next call's GEMM at its start.
  const bool dependent = kDependent && carries_dependent_wait<kernel_fn>();
  const DeviceInfo& device = current_device_info();
  static const int static_bytes = kDependent ? static_shared_bytes(kernel_fn) : 0;
  static std::atomic<uint64_t> opted_in{};
  opt_in_shared_memory(kernel_fn, kDependent ? device.shared_per_block_optin - static_bytes : Loop::kSharedBytes,
                       opted_in);

  kernel::KernelParams<Schedule> params{
      {args.A, args.B, args.scales, args.offsets, args.bias, args.D, args.M, args.N, args.K, args.group_size},
      {args.workspace, args.semaphores},
      Schedule::params(args, TileM, TileN)};
  const dim3 grid = Schedule::grid(args, params.schedule, TileM, TileN);
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  const int shared_bytes =
      dependent ? dependent_shared_bytes(blocks, Loop::kSharedBytes, static_bytes, device) : Loop::kSharedBytes;
  launch_kernel<kernel_fn>(dependent, grid, dim3(Loop::kThreads), shared_bytes, stream, "gemm_mixed_kernel", params);
  Schedule::template after_kernel<T>(args, stream, dependent);
}

}  // namespace mixgemm::sm80
