// Launcher template of the sm90 grouped form (the generator instantiates it per tile, activation type and
// weight width): the per-expert arrays, written on the device from the routing's expert_start, then CUTLASS's
// pointer-array kernel over them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/core/cutlass_run.h"
#include "mixgemm/moe/sm90/grouped_args.h"
#include "mixgemm/moe/sm90/kernel_types.cuh"

namespace mixgemm::moe::sm90 {

using LaunchFn = void (*)(const GroupedArgs&, cudaStream_t);
// Workspace bytes of a call over `num_experts` experts on a GPU of `sm_count` SMs.
using WorkspaceFn = int64_t (*)(int num_experts, int sm_count);

constexpr int64_t kArrayAlign = 128;  // each array starts on its own 128-byte line (TMA descriptors need 64)

inline int64_t align_up(int64_t bytes) { return (bytes + kArrayAlign - 1) / kArrayAlign * kArrayAlign; }

// What CUTLASS reads per expert (group): its problem shape, operand pointers, strides and the weight's layout.
// They are carved one after another from the front of the call's workspace.
template <class Types>
struct GroupArrays {
  using Element = typename Types::Element;
  using Quant = typename Types::Quant;
  using Shape = typename Types::ProblemShape::UnderlyingProblemShape;

  Shape* shapes;
  const Quant** w;
  const Element** x;
  const Element** scales;
  const Element** offsets;
  Element** d;
  typename Types::LayoutW* layout_w;
  typename Types::StrideX* stride_x;
  typename Types::StrideScale* stride_s;
  typename Types::StrideD* stride_d;

  // The arrays for E experts laid out from `base` (null: only their size, the second member, is wanted).
  static std::pair<GroupArrays, int64_t> carve(void* base, int E) {
    GroupArrays a{};
    int64_t at = 0;
    auto take = [&](auto*& field) {
      field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(static_cast<char*>(base) + at);
      at += align_up(static_cast<int64_t>(sizeof(*field)) * E);
    };
    take(a.shapes), take(a.w), take(a.x), take(a.scales), take(a.offsets), take(a.d);
    take(a.layout_w), take(a.stride_x), take(a.stride_s), take(a.stride_d);
    return {a, at};
  }
};

// One thread per expert. Expert e's rows are the sorted rows expert_start[e] .. expert_start[e + 1] of A and D;
// an expert with none has a problem of 0 rows, which the grouped tile scheduler skips (no tile, no access).
template <class Types>
__global__ void fill_group_arrays(GroupArrays<Types> arr, GroupedArgs a) {
  using Element = typename Types::Element;
  const int e = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (e >= a.num_experts) return;
  const int first = a.expert_start[e];
  const int rows = a.expert_start[e + 1] - first;
  arr.shapes[e] = cute::make_shape(a.N, rows, a.K);  // CUTLASS's (M, N, K) of the transposed product
  arr.w[e] = reinterpret_cast<const typename Types::Quant*>(static_cast<const char*>(a.B) + e * a.b_expert_bytes);
  arr.x[e] = static_cast<const Element*>(a.A) + static_cast<int64_t>(first) * a.K;
  arr.scales[e] = static_cast<const Element*>(a.scales) + e * a.quant_expert_stride;
  arr.offsets[e] = static_cast<const Element*>(a.offsets) + e * a.quant_expert_stride;
  arr.d[e] = static_cast<Element*>(a.D) + static_cast<int64_t>(first) * a.N;
  arr.layout_w[e] = cute::tile_to_shape(typename Types::LayoutWAtom{}, cute::make_shape(a.N, a.K, cute::_1{}));
  typename Types::StrideX x{};  // (rows, K): K-contiguous rows
  cute::get<0>(x) = a.K;
  arr.stride_x[e] = x;
  typename Types::StrideScale s{};  // (N, K / G): [K/G, N] row-major
  cute::get<1>(s) = a.N;
  arr.stride_s[e] = s;
  typename Types::StrideD d{};  // (N, rows): D [rows, N] row-major
  cute::get<1>(d) = a.N;
  arr.stride_d[e] = d;
}

template <class Types>
typename Types::Gemm::Arguments make_arguments(const GroupedArgs& a, const GroupArrays<Types>& arr) {
  typename Types::CollectiveMainloop::Arguments mainloop{};
  mainloop.ptr_A = arr.w;
  mainloop.dA = arr.layout_w;
  mainloop.ptr_B = arr.x;
  mainloop.dB = arr.stride_x;
  mainloop.ptr_S = arr.scales;
  mainloop.dS = arr.stride_s;
  mainloop.chunk_size = a.group_size;
  mainloop.ptr_Z = arr.offsets;

  typename Types::CollectiveEpilogue::Arguments epilogue{};
  epilogue.thread.alpha = 1.0f;
  epilogue.thread.beta = 0.0f;
  epilogue.ptr_C = nullptr;
  epilogue.dC = arr.stride_d;
  epilogue.ptr_D = arr.d;
  epilogue.dD = arr.stride_d;

  cutlass::KernelHardwareInfo hw_info;
  check_cuda(cudaGetDevice(&hw_info.device_id), "cudaGetDevice");
  hw_info.sm_count = a.sm_count;
  // No host copy of the shapes: the grid is one CTA per SM and the scheduler reads the shapes on the device.
  return typename Types::Gemm::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                         {a.num_experts, arr.shapes, nullptr},
                                         mainloop,
                                         epilogue,
                                         hw_info};
}

// A call's workspace: the per-expert arrays, then CUTLASS's own (one set of TMA descriptors per SM).
template <class Types>
int64_t total_bytes(int64_t arrays_bytes, const typename Types::Gemm::Arguments& arguments) {
  return arrays_bytes + align_up(static_cast<int64_t>(Types::Gemm::get_workspace_size(arguments)));
}

template <class Types>
int64_t workspace_bytes(int num_experts, int sm_count) {
  GroupedArgs probe;  // the sizing reads only the expert and SM counts; a group size keeps the arguments well-formed
  probe.num_experts = num_experts, probe.sm_count = sm_count, probe.group_size = 64;
  const auto [arrays, arrays_bytes] = GroupArrays<Types>::carve(nullptr, num_experts);
  return total_bytes<Types>(arrays_bytes, make_arguments<Types>(probe, arrays));
}

template <class Types>
void launch(const GroupedArgs& a, cudaStream_t stream) {
  using Gemm = typename Types::Gemm;
  const auto [arrays, arrays_bytes] = GroupArrays<Types>::carve(a.workspace, a.num_experts);
  const auto arguments = make_arguments<Types>(a, arrays);
  const int64_t need = total_bytes<Types>(arrays_bytes, arguments);
  require(need <= a.workspace_bytes, [&] {
    return "moe grouped gemm (sm90 form): this call needs a workspace of " + std::to_string(need) + " bytes, got " +
           std::to_string(a.workspace_bytes);
  });
  require(Gemm::can_implement(arguments) == cutlass::Status::kSuccess,
          [] { return std::string("moe grouped gemm (sm90 form): CUTLASS rejects this problem"); });
  constexpr int kThreads = 128;
  fill_group_arrays<Types><<<ceil_div(a.num_experts, kThreads), kThreads, 0, stream>>>(arrays, a);
  check_launch("moe fill_group_arrays");
  initialize_and_run<Gemm>(arguments, static_cast<char*>(a.workspace) + arrays_bytes, stream,
                           "moe grouped gemm (sm90 form)");
}

// The entry points the generator instantiates.
template <ActType act, int bits, int TileM, int TileN>
void launch_grouped_sm90(const GroupedArgs& a, cudaStream_t stream) {
  launch<GroupedKernelTypes<act, bits, TileM, TileN>>(a, stream);
}

template <ActType act, int bits, int TileM, int TileN>
int64_t workspace_grouped_sm90(int num_experts, int sm_count) {
  return workspace_bytes<GroupedKernelTypes<act, bits, TileM, TileN>>(num_experts, sm_count);
}

}  // namespace mixgemm::moe::sm90
