// CUTLASS 4.2's pointer-array mixed-input collective (sm90_mma_array_tma_gmma_rs_warpspecialized_mixed_input.hpp)
// in its scale-with-zero mode keeps only the zero points' TMA descriptor per group: its init, update and
// fences handle the scale descriptor in the scale-only branch and the zero descriptor in an `else if`, so with
// zeros the scale descriptor stays the placeholder built for a 1 x 1 tensor and every scale past the first
// reads as 0 (TMA fills out-of-bounds boxes with zeros). The dense collective is not affected.
//
// ScaleTensormapFix<Base> is that collective plus the scale descriptor's share of each step, done the way
// CUTLASS does it for the scale-only mode. The kernel calls these members on the collective type it is given,
// so the derived type's shadow the base's; every other member, type and the Params are the base's.
#pragma once

#include <cute/tensor.hpp>

#include "cutlass/gemm/collective/collective_builder.hpp"

namespace mixgemm::moe::sm90 {

template <class Base>
struct ScaleTensormapFix : Base {
  using Params = typename Base::Params;
  using TensorMapStorage = typename Base::TensorMapStorage;
  using ElementScale = typename Base::NonVoidElementScale;
  static constexpr bool kFix = Base::KernelConversionMode == Base::ConversionMode::ConvertAndScaleWithZero;

  // The base brings A, B and zero descriptors into shared memory; the scale one comes along.
  CUTLASS_DEVICE auto tensormaps_init(const Params& params, TensorMapStorage& smem, int32_t sm_count, int32_t sm_idx) {
    auto maps = Base::tensormaps_init(params, smem, sm_count, sm_idx);
    if constexpr (kFix) {
      using namespace cute;
      Tensor from = make_tensor(params.tma_load_scale.get_tma_descriptor(), Int<1>{}, Int<1>{});
      Tensor to = make_tensor(make_smem_ptr(&smem.smem_tensormap_scale), Int<1>{}, Int<1>{});
      if (cute::elect_one_sync()) copy(recast<uint128_t>(from), recast<uint128_t>(to));
      __syncwarp();
    }
    return maps;
  }

  // A new group: the base moves A, B and zeros to it; the scales follow (address, then shape and strides:
  // [N, K / group] of this group, strides from its dS).
  template <class... TMs, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage& smem, const Params& params,
                                                const cute::tuple<TMs...>& maps, ProblemShapeMNKL shape,
                                                int32_t group) {
    Base::tensormaps_perform_update(smem, params, maps, shape, group);
    if constexpr (kFix) {
      using namespace cute;
      if (cute::elect_one_sync()) {
        cute::tma_descriptor_replace_addr_in_shared_mem(smem.smem_tensormap_scale, params.ptr_S[group]);
        const auto rows = static_cast<uint32_t>(get<0>(shape));  // weight columns: CUTLASS's M
        const auto k = static_cast<uint32_t>(get<2>(shape));
        cute::array<uint32_t, 5> dims = {1, 1, 1, 1, 1};
        cute::array<uint64_t, 5> strides = {0, 0, 0, 0, 0};
        const ElementScale* none = nullptr;
        Tensor scale = make_tensor(cutlass::gemm::collective::detail::get_logical_ptr(none),
                                   make_shape(rows, ceil_div(k, params.chunk_size), Int<1>{}), params.dS[group]);
        cute::detail::fill_tma_gmem_shape_stride(params.tma_load_scale, scale, dims, strides);
        for (uint64_t& s : strides) s = s * cute::sizeof_bits_v<ElementScale> / 8;  // bytes
        cute::tma_descriptor_replace_dims_strides_in_shared_mem(smem.smem_tensormap_scale, dims, strides);
      }
      __syncwarp();
    }
  }

  // Publish the updated descriptors to global memory (the base: A, B, zeros; here: scales).
  template <class... TMs>
  CUTLASS_DEVICE void tensormaps_cp_fence_release(TensorMapStorage& smem, const cute::tuple<TMs...>& maps) {
    Base::tensormaps_cp_fence_release(smem, maps);
    if constexpr (kFix) cute::tma_descriptor_cp_fence_release(cute::get<2>(maps), smem.smem_tensormap_scale);
  }

  template <class... TMs>
  CUTLASS_DEVICE void tensormaps_fence_acquire(const cute::tuple<TMs...>& maps) {
    Base::tensormaps_fence_acquire(maps);
    if constexpr (kFix) cute::tma_descriptor_fence_acquire(cute::get<2>(maps));
  }
};

}  // namespace mixgemm::moe::sm90
