// The producer side of CUTLASS's register-sourced mixed-input collective, for a token tile that reaches past
// the last row of x: x's k-tiles are loaded without the rows past M.
//
// Why. x is B, (M, K) K-major, and a token tile is one TMA box of kTokens rows x 64 k. Where the tile's rows
// run past M, the TMA unit fills the box's missing rows with zeros, and on the H100 that fill starves the
// math warps: a 256 x 64 ping-pong tile on 8192 x 5120 took 45 us at M = 256 and 59 / 67 / 76 us at M = 192 /
// 160 / 129 (0.5x the rows, 1.7x the time), and ncu at the boost clock put the consumers' extra time on the wait
// for the stage's full barrier (long scoreboard on the phase check) while the same kernel with x's rows 192..255
// zero in memory, at M = 256, ran at 44 us (docs/perf-notes/2026-11-27-sm90-partial-token-tiles.md).
//
// What. A tile with 64 or more of its rows past M loads x in boxes of 64 rows (a second TMA descriptor) and
// skips the boxes wholly past M; their bytes are taken off the stage's transaction count (mbarrier.complete_tx),
// since the pipeline expects a full stage. The box across M still zero-fills, fewer than 64 rows. The rows left
// unloaded hold whatever the stage held before: each feeds only its own token's accumulator column (D^T's column
// j is W^T times x's row j), the columns of tokens past M, which the TMA store clips and a stream-K fixup adds
// and drops alike. Every other tile loads the one full box (kWholeTilesHere says through which loop). Only for
// tiles of 128 and 256 tokens, where x travels by plain TMA (the multicast pair shares each box between two
// CTAs), and in the dense GEMM's collective.
#pragma once

#include <cute/tensor.hpp>

#include "cutlass/detail/collective/mixed_input_utils.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"

namespace mixgemm::sm90 {

template <class Base>
struct XRowsPastMSkipped : Base {
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Base::TileShape;
  using StockParams = typename Base::Params;

  static constexpr int kTokens = decltype(cute::size<1>(TileShape{}))::value;  // CUTLASS's N: rows of x a tile
  static constexpr int kTileK = decltype(cute::size<2>(TileShape{}))::value;
  // The row block: 64 rows, an 8 KB box. Each box costs time of its own, so a tile takes the fewest boxes that
  // zero-fill fewer than 64 rows: the full box where fewer than 64 of its rows are past M, else its blocks up to M
  // (at most 3 of a 256-token tile, 1 of a 128-token one). Against the full box on the H100 (the note's A/B):
  // 32-row blocks took 1.09x-1.56x the time where 3-7 of them replaced one box, 64-row blocks 1.09x-1.19x where
  // they replaced a box missing only 32 rows, and the rule 0.55x-0.98x wherever 64 or more rows were past M. A
  // multiple of the 8-row, 1 KB swizzle atom, so a block's rows land where the full box would put them.
  static constexpr int kRowBlock = 64;
  static constexpr int kRowBlocks = kTokens / kRowBlock;
  static constexpr bool kSkips = !Base::SwapAB && cute::is_same_v<typename Base::GmemTiledCopyB, cute::SM90_TMA_LOAD> &&
                                 kTokens > kRowBlock && kTokens % kRowBlock == 0;

  // A whole tile (inside M, or fewer than a block's rows past it) loads x in one full box. On the ping-pong schedule
  // it does so through load_rows below, whose k-tile loop issues the scale copies sooner than the stock load (the
  // division there); on the cooperative one through the stock load. On the H200 (the A/B tool, against the stock
  // load) load_rows took 0.97x-0.98x the time on 256 x 64 ping-pong whole tiles and 1.02x-1.04x on 128 x 128
  // stream-K ones (docs/perf-notes/2026-11-27-sm90-x-row-block-loop-order.md).
  static constexpr bool kWholeTilesHere =
      cute::is_same_v<typename Base::KernelSchedule, cutlass::gemm::KernelTmaWarpSpecializedPingpong>;

  using ElementX = typename Base::SwappedElementB;
  using SmemLayoutRows = decltype(cute::tile_to_shape(typename Base::SwappedSmemLayoutAtomB{},
                                                      cute::make_shape(cute::Int<kRowBlock>{}, cute::Int<kTileK>{})));
  using TileShapeRows = cute::Shape<decltype(cute::size<0>(TileShape{})), cute::Int<kRowBlock>, cute::Int<kTileK>>;
  using TmaRows = decltype(cute::make_tma_copy_B_sm90(
      cute::SM90_TMA_LOAD{},
      cute::make_tensor(cutlass::gemm::collective::detail::get_logical_ptr(static_cast<ElementX const*>(nullptr)),
                        typename StockParams::LayoutB{}),
      SmemLayoutRows{}, TileShapeRows{}, cute::Shape<cute::_1, cute::_1, cute::_1>{}));

  struct Params : StockParams {
    TmaRows tma_load_x_rows;
    int tokens = 0;  // M: rows of x
    int depth = 0;   // K
    int batches = 1;  // L
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape,
                                                  typename Base::Arguments const& args, void* workspace) {
    using namespace cute;
    Params params{Base::to_underlying_arguments(problem_shape, args, workspace), TmaRows{}, 0, 0, 1};
    auto [N, M, K, L] = append<4>(problem_shape, 1);  // CUTLASS's (M, N, K, L): weight columns, tokens, K
    params.tokens = M;
    params.depth = K;
    params.batches = L;
    if constexpr (kSkips) {
      Tensor x = make_tensor(cutlass::gemm::collective::detail::get_logical_ptr(
                                 reinterpret_cast<ElementX const*>(args.ptr_B)),
                             cutlass::gemm::collective::detail::get_gmem_layout(make_shape(M, K, L), args.dB));
      params.tma_load_x_rows = make_tma_copy_B_sm90(SM90_TMA_LOAD{}, x, SmemLayoutRows{}, TileShapeRows{},
                                                    Shape<_1, _1, _1>{});
    }
    return params;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& params) {
    Base::prefetch_tma_descriptors(params);
    if constexpr (kSkips) cute::prefetch_tma_descriptor(params.tma_load_x_rows.get_tma_descriptor());
  }

  template <class... Ts, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<Ts...> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    using namespace cute;
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
    const int rows = params.tokens - static_cast<int>(n_coord) * kTokens;  // this tile's rows of x, if < kTokens
    if constexpr (!kSkips) {
      Base::load(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, k_tile_count, thread_idx,
                 block_rank_in_cluster, shared_tensors);
    } else if (!kWholeTilesHere && kTokens - rows < kRowBlock) {  // a whole tile (see kWholeTilesHere)
      Base::load(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, k_tile_count, thread_idx,
                 block_rank_in_cluster, shared_tensors);
    } else {
      load_rows(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, k_tile_count, rows,
                shared_tensors);
    }
  }

 private:
  // The stock load's k-tile loop (no cluster: kSkips), with x in row blocks up to M, or in its full box where the
  // tile is whole.
  template <class... Ts, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load_rows(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                                cute::tuple<Ts...> const& load_inputs, BlockCoord const& blk_coord,
                                KTileIterator k_tile_iter, int k_tile_count, int rows, TensorStorage& shared_tensors) {
    using namespace cute;
    using Utils = cutlass::gemm::collective::detail::MixedInputUtils<Base>;
    using X = Underscore;
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;

    Tensor sA = as_position_independent_swizzle_tensor(
        make_tensor(make_smem_ptr(shared_tensors.smem_A.begin()), typename Base::SmemLayoutA{}));  // (BLK_M,BLK_K,PIPE)
    Tensor sB = as_position_independent_swizzle_tensor(
        make_tensor(make_smem_ptr(shared_tensors.smem_B.begin()), typename Base::SmemLayoutB{}));  // (BLK_N,BLK_K,PIPE)
    Tensor gA = get<0>(load_inputs)(_, _, m_coord, _, l_coord);                                     // (BLK_M,BLK_K,k)
    auto tma_a = params.tma_load_a.get_slice(0);
    Tensor tAgA = tma_a.partition_S(gA);
    Tensor tAsA = tma_a.partition_D(sA);

    Tensor mX = params.tma_load_x_rows.get_tma_tensor(shape(cutlass::gemm::collective::detail::get_gmem_layout(
        make_shape(params.tokens, params.depth, params.batches), params.dB)));
    // (kRowBlock, BLK_K, row block, k) in x and (kRowBlock, BLK_K, row block, PIPE) in shared memory, partitioned
    // once here: the loop below only indexes them.
    Tensor gX = local_tile(mX, TileShapeRows{}, make_coord(_, _, _), Step<X, _1, _1>{})(_, _, _, _, l_coord);
    Tensor sX = local_tile(sB, make_shape(Int<kRowBlock>{}, Int<kTileK>{}), make_coord(_, _0{}));
    static_assert(rank(decltype(sX){}) == 4 && decltype(size<2>(sX))::value == kRowBlocks, "row blocks of a stage");
    auto tma_x = params.tma_load_x_rows.get_slice(0);
    Tensor tXgX = tma_x.partition_S(gX);  // (TMA, TMA_N, TMA_K, row block, k)
    Tensor tXsX = tma_x.partition_D(sX);  // (TMA, TMA_N, TMA_K, row block, PIPE)
    const int first_block = static_cast<int>(n_coord) * kRowBlocks;
    const bool whole = kTokens - rows < kRowBlock;
    // Row blocks holding a row of x (the last may cross M); a whole tile's full box counts as all of them.
    const int blocks = whole ? kRowBlocks : (rows + kRowBlock - 1) / kRowBlock;
    const uint32_t skipped_bytes = (kRowBlocks - blocks) * (kRowBlock * kTileK * cute::sizeof_bits_v<ElementX> / 8);
    auto tma_box = params.tma_load_b.get_slice(0);
    Tensor tBgB = tma_box.partition_S(get<1>(load_inputs)(_, _, n_coord, _, l_coord));  // (TMA,TMA_N,TMA_K,k)
    Tensor tBsB = tma_box.partition_D(sB);                                                // (TMA,TMA_N,TMA_K,PIPE)

    auto extra = Utils::partition_extra_tma_inputs(params, load_inputs, shared_tensors, make_uint2(0, 0), m_coord,
                                                   l_coord);

    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      // The scales' row (one per group of k-tiles) is found before the wait for a free stage. Written after the
      // wait, as the stock load's source has it, this loop's division by the runtime reload factor (I2F, MUFU.RCP,
      // IMAD.HI) sat between the x copies and the scale copies and delayed each stage's last copy (ptxas moved the
      // stock loop's beside the wait); moved here, a partial tile took 0.88x-0.98x the time (the note named above).
      const int scale_k = *k_tile_iter / params.reload_factor;
      pipeline.producer_acquire(smem_pipe_write);
      auto* tma_barrier = pipeline.producer_get_barrier(smem_pipe_write);
      const int stage = smem_pipe_write.index();
      if (cute::elect_one_sync()) {
        copy(params.tma_load_a.with(*tma_barrier, 0), tAgA(_, _, _, *k_tile_iter), tAsA(_, _, _, stage));
        if (whole) {
          copy(params.tma_load_b.with(*tma_barrier, 0), tBgB(_, _, _, *k_tile_iter), tBsB(_, _, _, stage));
        } else {
          CUTLASS_PRAGMA_UNROLL
          for (int b = 0; b < kRowBlocks; ++b) {
            if (b < blocks) {
              copy(params.tma_load_x_rows.with(*tma_barrier, 0), tXgX(_, _, _, first_block + b, *k_tile_iter),
                   tXsX(_, _, _, b, stage));
            }
          }
        }
        // The skipped blocks' bytes will never arrive: count them off, so the stage completes on the rest.
        if (skipped_bytes != 0) {
          asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;\n" ::"r"(
                           cute::cast_smem_ptr_to_uint(tma_barrier)),
                       "r"(skipped_bytes)
                       : "memory");
        }
      }
      // Scales (and zeros), as the stock load issues them.
      if (cute::elect_one_sync()) {
        copy(params.tma_load_scale.with(*tma_barrier, 0), get<0>(extra)(_, _, _, scale_k), get<1>(extra)(_, _, _, stage));
      }
      if constexpr (Base::KernelConversionMode == Base::ConversionMode::ConvertAndScaleWithZero) {
        if (cute::elect_one_sync()) {
          copy(params.tma_load_zero.with(*tma_barrier, 0), get<2>(extra)(_, _, _, scale_k),
               get<3>(extra)(_, _, _, stage));
        }
      }
      ++k_tile_iter;
      ++smem_pipe_write;
    }
  }
};

}  // namespace mixgemm::sm90
