// Type assembly of the sm90 path: CUTLASS 3.x's warp-specialized, TMA-fed, register-sourced (RS) wgmma
// mixed-input collective, plus a TMA epilogue with a per-row bias, for one compile-time configuration.
//
// The problem is computed transposed, D^T[N, M] = W^T[N, K] . x^T[K, M] (CUTLASS's problem shape is
// (N, M, K, 1)): the collective converts the narrow operand in registers and wgmma only sources operand A
// from registers, so the weight must be A.
//   - A = W^T, (N, K) K-major, signed int4 / int8 codes in the reordered layout of reorder_layout.cuh.
//   - B = x, (M, K) K-major: x [M, K] row-major as it comes.
//   - D = y^T, (N, M) with strides (1, N): y [M, N] row-major as the caller wants it.
//   - scales / offsets: ours are [K/G, N] row-major, i.e. (N, K/G) with strides (1, N), which is exactly the
//     collective's "MN-major" scale stride Stride<_1, int64_t, int64_t>.
//   - The collective's scale-with-zero mode computes (q * s + z) in the activation type with z additive
//     (mixed_input_utils.hpp: multiply by the scale, then plus the zero), so z is our folded offset.
#pragma once

#include <cute/tensor.hpp>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "mixgemm/sm90/reorder_layout.cuh"
#include "mixgemm/sm90/self_resetting_stream_k.cuh"
#include "mixgemm/sm90/sm90_args.h"
#include "mixgemm/sm90/split_k_owned_subtiles.cuh"
#include "mixgemm/sm90/word_addressed_weight_reads.cuh"
#include "mixgemm/sm90/x_rows_past_m_skipped.cuh"

namespace mixgemm::sm90 {

template <ActType act>
struct ElementOf;
template <>
struct ElementOf<ActType::kFloat16> {
  using type = cutlass::half_t;
};
template <>
struct ElementOf<ActType::kBFloat16> {
  using type = cutlass::bfloat16_t;
};

// Signed storage: the collective's interleaved ("layout-aware") converters exist for int4b_t and int8_t
// into fp16/bf16 (uint4 too, but not uint8), and a signed code lets symmetric weights run in the cheaper
// scale-only mode with no offset at all.
template <int bits>
using QuantOf = cute::conditional_t<bits == 4, cutlass::int4b_t, cutlass::int8_t>;

template <Schedule s>
struct ScheduleTags;
template <>
struct ScheduleTags<Schedule::kCooperative> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
template <>
struct ScheduleTags<Schedule::kPingpong> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

// Stream-K configs run CUTLASS's stream-K scheduler with its split flags kept in our always-zero
// per-stream buffer (self_resetting_stream_k.cuh), so a launch needs no memset; its split-K shares the reduction
// and the epilogue by the epilogue's subtiles, whose shape and the accumulators' layout the tag carries.
template <Scheduler s, class TiledMma, class EpilogueTile>
using SchedulerTag = cute::conditional_t<s == Scheduler::kStreamK,
                                         SelfResettingStreamKScheduler<TiledMma, EpilogueTile>,
                                         cutlass::gemm::PersistentScheduler>;

// Template arguments use our naming (TileM tokens, TileN weight columns; see sm90_args.h).
// EpilogueTokens: the epilogue subtile's tokens, 128 weight columns each (the cooperative builder's only width); 0 is
// the builder's own choice (32 tokens, fewer where the tile has fewer). Finer subtiles give a split more subtiles to
// share (split_k_owned_subtiles.cuh); tools/sm90_split_fixup_ab.cu times them, the library builds 0.
template <ActType act, int bits, QuantMode mode, int TileM, int TileN, int ClusterM, int ClusterN, Schedule schedule,
          Scheduler scheduler, int EpilogueTokens = 0>
struct KernelTypes {
  using Element = typename ElementOf<act>::type;  // activations, scales, offsets, bias, output
  using Quant = QuantOf<bits>;
  using Accumulator = float;

  // 128 bytes of 16-bit x per k-tile: one full 128-byte swizzle row per TMA box row.
  static constexpr int kTileK = 128 * 8 / cute::sizeof_bits_v<Element>;
  using TileShape = cute::Shape<cute::Int<TileN>, cute::Int<TileM>, cute::Int<kTileK>>;  // CUTLASS (M, N, K)
  using ClusterShape = cute::Shape<cute::Int<ClusterN>, cute::Int<ClusterM>, cute::_1>;

  using LayoutX = cutlass::layout::ColumnMajor;  // B = x: (M, K) K-major in CUTLASS's B convention
  using LayoutD = cutlass::layout::ColumnMajor;  // D = y^T: (N, M) N-contiguous, i.e. y row-major
  using StrideX = cutlass::detail::TagToStrideB_t<LayoutX>;
  static constexpr int kAlignX = 128 / cute::sizeof_bits_v<Element>;  // 16-byte TMA granularity
  static constexpr int kAlignD = 128 / cute::sizeof_bits_v<Element>;
  static constexpr int kAlignW = 128 / cute::sizeof_bits_v<Quant>;

  using LayoutWAtom = typename ReorderLayout<Element, bits>::Atom;
  // The weight's full layout type: the reorder atom tiled over a runtime (N, K, 1) shape.
  using LayoutW = decltype(cute::tile_to_shape(
      LayoutWAtom{}, cute::Layout<cute::Shape<int, int, int>, cute::Stride<int64_t, cute::_1, int64_t>>{}));

  using Tags = ScheduleTags<schedule>;
  static constexpr bool kStreamK = scheduler == Scheduler::kStreamK;
  // CUTLASS's ping-pong kernel rejects its own stream-K tag but not ours, and it advances the scheduler
  // through calls our stream-K scheduler does not follow (its is_last_tile would then answer wrongly).
  static_assert(!(kStreamK && schedule == Schedule::kPingpong), "sm90: stream-K runs only the cooperative schedule");

  using EpilogueTileChoice =
      cute::conditional_t<EpilogueTokens == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                          cute::Shape<cute::_128, cute::Int<EpilogueTokens == 0 ? 32 : EpilogueTokens>>>;
  // D = acc + bias[row of D^T] (no C source: ElementC void).
  using Fusion = cutlass::epilogue::fusion::LinCombPerRowBias<Element, float, Element, void, float>;
  using StockEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      EpilogueTileChoice, Accumulator, float, void, LayoutD, kAlignD, Element,
      LayoutD, kAlignD, typename Tags::Epilogue, Fusion>::CollectiveOp;
  // The builder's epilogue, storing only a reduce-scatter split's own subtiles (split_k_owned_subtiles.cuh).
  using CollectiveEpilogue = OwnedSubtilesEpilogue<StockEpilogue>;

  // The narrow operand travels as a tuple with its scale (and zero) types: the builder's mixed-input signal.
  using WeightTuple = cute::conditional_t<mode == QuantMode::kScale, cute::tuple<Quant, Element>,
                                          cute::tuple<Quant, Element, Element>>;
  using StockMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, WeightTuple, LayoutW, kAlignW, Element, LayoutX,
      kAlignX, Accumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Tags::Kernel>::CollectiveOp;
  // The builder's collective with its weight codes read in 32-bit words (word_addressed_weight_reads.cuh) and
  // x's rows past M left unloaded (x_rows_past_m_skipped.cuh).
  using CollectiveMainloop = WordAddressedWeightReads<XRowsPastMSkipped<StockMainloop>>;

  using TiledMma = typename CollectiveMainloop::TiledMma;
  using EpilogueTile = typename StockEpilogue::EpilogueTile;
  // The heuristic's reduce-scatter rule counts a cooperative tile's subtiles as 128 weight columns x 32 tokens (fewer
  // tokens where the tile has fewer): python/mixgemm/paths/sm90.py, epilogue_subtiles.
  static_assert(schedule != Schedule::kCooperative || EpilogueTokens != 0 ||
                    OwnedSubtiles::count<TileShape, EpilogueTile>() == TileN / 128 * ((TileM + 31) / 32),
                "sm90: the epilogue's subtiles are not the ones python/mixgemm/paths/sm90.py counts");
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue,
                                                      SchedulerTag<scheduler, TiledMma, EpilogueTile>>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

}  // namespace mixgemm::sm90
