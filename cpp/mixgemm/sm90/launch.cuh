// Launcher template of the sm90 path: one call's CUTLASS arguments, workspace size and launch for one
// compiled configuration. The generator explicitly instantiates these per (config, dtype, bits, mode);
// runner.cu checks our rules first (can_implement there), so CUTLASS's own check is a backstop.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/core/cutlass_run.h"
#include "mixgemm/sm90/kernel_types.cuh"

namespace mixgemm::sm90 {

// The function types the registry stores.
using LaunchFn = void (*)(const Args&, cudaStream_t);
using WorkspaceFn = Workspace (*)(const Args&);

template <class Types>
typename Types::Gemm::Arguments make_arguments(const Args& a) {
  using namespace cute;
  using Element = typename Types::Element;
  using Quant = typename Types::Quant;
  using Kernel = typename Types::Kernel;
  const int groups = a.K / a.group_size;

  typename Types::StrideX stride_x{int64_t(a.K), _1{}, int64_t(a.M) * a.K};         // x [M, K] row-major
  typename Kernel::StrideD stride_d{_1{}, int64_t(a.N), int64_t(a.M) * a.N};        // y^T (N, M) = y [M, N]
  typename Types::CollectiveMainloop::NonVoidStrideScale stride_s{_1{}, int64_t(a.N),
                                                                  int64_t(groups) * a.N};  // [K/G, N]

  typename Types::CollectiveMainloop::Arguments mainloop{};
  mainloop.ptr_A = static_cast<const Quant*>(a.B);
  mainloop.dA = ReorderLayout<Element, cute::sizeof_bits_v<Quant>>::of(a.N, a.K);
  mainloop.ptr_B = static_cast<const Element*>(a.A);
  mainloop.dB = stride_x;
  mainloop.ptr_S = static_cast<const Element*>(a.scales);
  mainloop.dS = stride_s;
  mainloop.group_size = a.group_size;
  if constexpr (!cute::is_void_v<typename Types::CollectiveMainloop::ElementZero>)
    mainloop.ptr_Z = static_cast<const Element*>(a.offsets);

  typename Types::CollectiveEpilogue::Arguments epilogue{};
  epilogue.thread.alpha = 1.0f;
  epilogue.thread.beta = 0.0f;
  epilogue.thread.bias_ptr = static_cast<const Element*>(a.bias);  // null: the broadcast reads 0
  epilogue.ptr_C = nullptr;
  epilogue.dC = stride_d;
  epilogue.ptr_D = static_cast<Element*>(a.D);
  epilogue.dD = stride_d;

  cutlass::KernelHardwareInfo hw_info;
  check_cuda(cudaGetDevice(&hw_info.device_id), "cudaGetDevice");
  hw_info.sm_count = a.device_sm_count > 0
                         ? a.device_sm_count
                         : cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);

  typename Kernel::TileSchedulerArguments scheduler{};
  if constexpr (Types::kStreamK) {
    scheduler.locks = a.locks;
    scheduler.last_split_extra_k_tiles = a.last_split_extra_k_tiles;
    scheduler.reduce_scatter = a.reduce_scatter;
    if (a.split_k > 1) {
      using StreamK = typename Kernel::TileScheduler;
      scheduler.splits = a.split_k;
      scheduler.decomposition_mode = StreamK::DecompositionMode::SplitK;
      // Deterministic (the default, kept explicit): split s waits for splits 0..s-1 to have added theirs,
      // so the sum's order, and every bit of y, is the same on every launch.
      scheduler.reduction_mode = StreamK::ReductionMode::Deterministic;
    }
  }

  return typename Types::Gemm::Arguments{
      cutlass::gemm::GemmUniversalMode::kGemm, {a.N, a.M, a.K, 1}, mainloop, epilogue, hw_info, scheduler};
}

template <class Types>
Workspace workspace_of(const typename Types::Gemm::Arguments& arguments) {
  using Kernel = typename Types::Kernel;
  Workspace w;
  w.bytes = static_cast<int64_t>(Types::Gemm::get_workspace_size(arguments));
  // No partials, no split tile (a data-parallel decomposition): no flag is touched either.
  if constexpr (Types::kStreamK) {
    if (w.bytes > 0)
      w.locks = Kernel::TileScheduler::lock_count(arguments.scheduler, arguments.problem_shape,
                                                  Kernel::NumMmaWarpGroups);
    w.splits_in_one_wave = Kernel::TileScheduler::splits_in_one_wave(arguments.scheduler, arguments.problem_shape,
                                                                     arguments.hw_info);
  }
  return w;
}

template <class Types>
Workspace workspace(const Args& a) {
  return workspace_of<Types>(make_arguments<Types>(a));
}

template <class Types>
void launch(const Args& a, cudaStream_t stream) {
  using Gemm = typename Types::Gemm;
  const auto arguments = make_arguments<Types>(a);
  require(Gemm::can_implement(arguments) == cutlass::Status::kSuccess, [] {
    return std::string("gemm_sm90: CUTLASS rejects this problem for the chosen config (alignment, group size or "
                       "tile rules)");
  });
  const Workspace need = workspace_of<Types>(arguments);
  require(need.bytes <= a.workspace_bytes && (need.bytes == 0 || a.workspace != nullptr), [&] {
    return "gemm_sm90: this config needs a workspace of " + std::to_string(need.bytes) + " bytes, got " +
           std::to_string(a.workspace_bytes);
  });
  require(need.locks <= a.lock_count && (need.locks == 0 || a.locks != nullptr), [&] {
    return "gemm_sm90: this config needs " + std::to_string(need.locks) + " zeroed split flags, got " +
           std::to_string(a.lock_count);
  });
  // initialize() only converts the arguments and sets the kernel's shared-memory limit: the stream-K
  // scheduler's workspace needs no clearing (self_resetting_stream_k.cuh). A dependent launch (cutlass_run.h):
  // the grid's launch and prologue overlap the tail of the kernel before it, as the decode path's do.
  initialize_and_run<Gemm>(arguments, a.workspace, stream, "gemm_sm90", Launch::kProgrammaticDependent);
}

// The entry points the generator instantiates, in our template vocabulary.
template <ActType act, int bits, QuantMode mode, int TileM, int TileN, int ClusterM, int ClusterN, Schedule schedule,
          Scheduler scheduler>
void launch_sm90(const Args& a, cudaStream_t stream) {
  launch<KernelTypes<act, bits, mode, TileM, TileN, ClusterM, ClusterN, schedule, scheduler>>(a, stream);
}

template <ActType act, int bits, QuantMode mode, int TileM, int TileN, int ClusterM, int ClusterN, Schedule schedule,
          Scheduler scheduler>
Workspace workspace_sm90(const Args& a) {
  return workspace<KernelTypes<act, bits, mode, TileM, TileN, ClusterM, ClusterN, schedule, scheduler>>(a);
}

}  // namespace mixgemm::sm90
