// Type assembly of the sm90 grouped form: the dense sm90 path's operands (sm90/kernel_types.cuh: transposed
// problem, weight as the register-sourced operand A in the reorder layout, x as B, scale-with-zero mode with
// our folded offsets) on CUTLASS's pointer-array schedule, where every stride and the weight's layout become
// per-group arrays (a pointer type in the builder's layout argument says so). The collective carries the scale
// descriptor fix of scale_tensormap_fix.cuh.
#pragma once

#include <cute/tensor.hpp>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "mixgemm/moe/sm90/scale_tensormap_fix.cuh"
#include "mixgemm/sm90/kernel_types.cuh"

namespace mixgemm::moe::sm90 {

template <ActType act, int bits, int TileM, int TileN>
struct GroupedKernelTypes {
  using Element = typename mixgemm::sm90::ElementOf<act>::type;
  using Quant = mixgemm::sm90::QuantOf<bits>;
  using Accumulator = float;

  static constexpr int kTileK = 128 * 8 / cute::sizeof_bits_v<Element>;  // one 128-byte swizzle row of x
  using TileShape = cute::Shape<cute::Int<TileN>, cute::Int<TileM>, cute::Int<kTileK>>;  // CUTLASS (M, N, K)
  // No clusters: the experts' tiles differ in count per launch, and a cluster's CTAs would have to share one
  // expert to share a tile by multicast.
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;

  // (M, N, K) of one expert's problem in CUTLASS's naming: (weight columns, the expert's rows, K).
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;

  using LayoutX = cutlass::layout::ColumnMajor;  // B = x: (rows, K) K-major
  using LayoutD = cutlass::layout::ColumnMajor;  // D^T (N, rows) N-contiguous: D [rows, N] row-major
  static constexpr int kAlignX = 128 / cute::sizeof_bits_v<Element>;
  static constexpr int kAlignD = 128 / cute::sizeof_bits_v<Element>;
  static constexpr int kAlignW = 128 / cute::sizeof_bits_v<Quant>;

  using LayoutWAtom = typename mixgemm::sm90::ReorderLayout<Element, bits>::Atom;
  // One expert's weight: the reorder atom tiled over (N, K) and a static batch of one.
  using LayoutW = decltype(cute::tile_to_shape(LayoutWAtom{}, cute::make_shape(int{}, int{}, cute::_1{})));

  using Fusion = cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, float, void, LayoutD*, kAlignD, Element,
      LayoutD*, kAlignD, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative, Fusion>::CollectiveOp;

  using WeightTuple = cute::tuple<Quant, Element, Element>;  // codes, scale, offset: the scale-with-zero mode
  // The builder's collective, its weight codes read in 32-bit words (mixgemm/sm90/word_addressed_weight_reads.cuh),
  // with the scale descriptor fix.
  using CollectiveMainloop = ScaleTensormapFix<mixgemm::sm90::WordAddressedWeightReads<
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, WeightTuple, LayoutW*, kAlignW, Element, LayoutX*,
          kAlignX, Accumulator, TileShape, ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename CollectiveEpilogue::SharedStorage))>,
          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp>>;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  using StrideX = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
  using StrideScale = typename CollectiveMainloop::NonVoidStrideScale;
};

}  // namespace mixgemm::moe::sm90
