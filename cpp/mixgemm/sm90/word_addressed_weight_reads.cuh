// The consumer side of CUTLASS's register-sourced mixed-input collective: the weight's shared-memory reads
// addressed in 32-bit words, and on the 128 x 128 tiles the conversion run two k-blocks ahead, across k-tiles.
//
// The stock collective reads a thread's codes of wgmma k-block k + 2 while k-block k runs, through an int4 (or
// int8) element pointer: each read recomputes the stage's element offset from the stage index and turns it into
// bytes through a sign-extended 64-bit shift pair on the uniform datapath. A 64-deep k-step of the fp16 x int4
// instances (cuobjdump) takes 131-137 instructions with one 64-row wgmma per k-block and 204 with two; those
// address instructions are issue time, which the cells where the sm90 GEMM is issue-bound (little K per SM,
// M = 64..512) pay. Read as 32-bit words, a k-block's codes sit at a compile-time offset from one stage base:
// 110-115 and 180-183 instructions (Machete's 128 x 256 kernel: 116 for one wgmma per k-block). The time:
// 0.96x-0.99x the stock loop's where it is issue-bound, equal where the wgmmas bound it, outputs bitwise equal
// (docs/perf-notes/2026-11-26-sm90-word-addressed-weight-reads.md).
//
// On the cooperative schedule's 128 x 128 tiles, where it measured faster (kTwoAhead below;
// docs/perf-notes/2026-11-27-sm90-conversion-across-k-tiles.md has the A/B), each k-block is converted two
// wgmmas ahead and the reads and conversions run across the k-tile's edge. Elsewhere the loop is the stock
// one's: the conversion one k-block ahead of the wgmma that consumes it, the reads two ahead, and at each
// k-tile's edge a stop to wait for the next stage, read it and convert its first k-block. Either way the
// arithmetic and the wgmma order are the stock loop's (outputs bitwise equal), and every stage but the last goes
// back to the producer here and the last to mma_tail, so the kernel and the producer warps are unchanged. Every
// other member, type and the Params are the base's: the kernel calls mma() on the collective type it is given,
// so this one shadows the base's.
#pragma once

#include <cute/tensor.hpp>

#include "cutlass/gemm/collective/collective_builder.hpp"

namespace mixgemm::sm90 {

template <class Base>
struct WordAddressedWeightReads : Base {
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Base::Params;

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx, TensorStorage& shared_tensors, const Params&) {
    using namespace cute;
    // The collective's own conversion and scale-copy helpers (a friend of the base, whose alias is private).
    using Utils = cutlass::gemm::collective::detail::MixedInputUtils<Base>;
    using TiledMma = typename Base::TiledMma;
    // The grouped (pointer-array) collective holds a pointer to each group's stride.
    static_assert(is_layout<cute::remove_pointer_t<typename Base::SwappedStrideA>>::value,
                  "written for the reordered (layout-typed) weight, whose load fragment mirrors shared memory");
    constexpr int kThreadsPerWarpGroup = cutlass::NumThreadsPerWarpGroup;

    Tensor sA = as_position_independent_swizzle_tensor(
        make_tensor(make_smem_ptr(shared_tensors.smem_A.begin()), typename Base::SmemLayoutA{}));  // (N, K, PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.begin()), typename Base::SmemLayoutB{});

    const int warp_group = __shfl_sync(0xffffffff, thread_idx / kThreadsPerWarpGroup, 0);
    const int warp_group_thread = thread_idx % kThreadsPerWarpGroup;
    constexpr int kMmaWarpGroups = size(TiledMma{}) / kThreadsPerWarpGroup;
    const auto warp_groups = make_layout(Int<kMmaWarpGroups>{}, Int<kThreadsPerWarpGroup>{});

    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_thread_slice(thread_idx);
    auto warp_group_mma = tiled_mma.get_slice(warp_groups(warp_group));
    Tensor tCsA = thread_mma.partition_A(sA);                                   // (MMA, MMA_N, MMA_K, PIPE)
    Tensor tCrA_mma = thread_mma.partition_fragment_A(sA(_, _, Int<0>{}));      // converted, wgmma's operand
    Tensor tCrA_load = make_tensor_like<typename Base::RealSwappedElementA>(tCsA(_, _, _, Int<0>{}));  // codes
    Tensor tCsB = warp_group_mma.partition_B(sB);
    Tensor tCrB = warp_group_mma.make_fragment_B(tCsB);                          // descriptors

    auto extra = Utils::partition_extra_mma_info(thread_mma, shared_tensors);  // scales (and zeros)
    auto extra_copy = Utils::retile_extra_mma_info(tiled_mma, extra, warp_group_thread);

    constexpr int kBlocks = size<2>(tCrA_load);  // wgmma k-blocks per k-tile
    // Converting a k-block two wgmmas ahead of the wgmma that reads it (instead of one) writes that wgmma's
    // operand a whole k-block earlier, so it issues without waiting on the conversion's last result; but a
    // converted slot is then rewritten one wgmma sooner, so one wgmma fewer may stay in flight, and the next
    // stage must be waited on before the tile's last wgmmas issue. Against the stock-shaped loop that trade
    // measured 0.96x-0.99x the time where each of the cooperative schedule's two warpgroups issues one 64 x 128
    // wgmma a k-block (the 128 x 128 tiles, M = 128..256). It lost with 64 tokens (1.03x-1.04x; likely the shorter
    // wgmmas want the deeper queue) and with two wgmmas a k-block (the 256-column tiles, 1.04x-1.15x: two
    // fragments held converted ahead); it was mixed with 16 and 32 tokens (0.96x-1.03x) and in the ping-pong
    // schedule (0.98x-1.00x), and level with 256 tokens. So only the 128 x 128 tiles take it (the GEMM's and the
    // MoE form's).
    static constexpr bool kPingpong =
        cute::is_same_v<typename Base::KernelSchedule, cutlass::gemm::KernelTmaWarpSpecializedPingpong> ||
        cute::is_same_v<typename Base::KernelSchedule, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong>;
    constexpr int kTokens = decltype(cute::size<1>(typename Base::TileShape{}))::value;  // CUTLASS's N
    constexpr int kWgmmasPerBlock = decltype(size<1>(tCrA_mma))::value;  // 64-row wgmmas a k-block, a warpgroup
    constexpr bool kTwoAhead = !kPingpong && kWgmmasPerBlock == 1 && kTokens == 128;
    constexpr int kConvertAhead = kTwoAhead ? 2 : 1;
    // The codes are read from shared memory one k-block before their conversion, which hides the load behind a
    // wgmma.
    constexpr int kReadAhead = kConvertAhead + 1;
    static_assert(kBlocks >= kReadAhead, "a k-tile holds every k-block converted or read ahead within it");
    // A converted slot is rewritten kConvertAhead k-blocks after the wgmma that read it issued: at most
    // kBlocks - kConvertAhead wgmmas (commit groups) may be in flight then, which is the wait below.
    constexpr int kInFlight = cute::min(kBlocks - kConvertAhead, 7);

    // A thread's codes of one k-block (8 int4 or int8 values, contiguous in the reordered layout) as 32-bit words.
    // The scales (and zeros) of a stage, one row per k-tile (the group is a multiple of 64), come as the
    // stock loop's Utils::copy_tensors_MK copies them at k-block 0, from the same partitions.
    Tensor tCsA_words = recast<uint32_t>(tCsA);        // (word, MMA_N, MMA_K, PIPE)
    Tensor tCrA_words = recast<uint32_t>(tCrA_load);   // (word, MMA_N, MMA_K)
    static_assert(Base::ModeHasScales, "our weights always carry scales");
    constexpr bool kZeros = Base::KernelConversionMode == Base::ConversionMode::ConvertAndScaleWithZero;
    static_assert(tuple_size<decltype(extra)>::value == (kZeros ? 4 : 2) &&
                      tuple_size<decltype(extra_copy)>::value == (kZeros ? 3 : 2),
                  "MixedInputUtils' partitions: (sS, rS[, sZ, rZ]) and (copy, rS view[, rZ view])");
    auto read_block = [&](int k, int stage) { copy(tCsA_words(_, _, k, stage), tCrA_words(_, _, k)); };
    // A stage's scales (and zeros), into the given registers.
    auto read_scales = [&](int stage, auto& scales, auto& zeros) {
      copy(get<0>(extra_copy), get<0>(extra)(_, _, 0, stage), scales);
      if constexpr (kZeros) copy(get<0>(extra_copy), get<2>(extra)(_, _, 0, stage), zeros);
    };
    auto scales = get<1>(extra_copy)(_, _, 0);              // the registers the conversion reads
    auto zeros = get<kZeros ? 2 : 1>(extra_copy)(_, _, 0);  // (unused without zeros)
    auto convert = [&](int k) { Utils::dequantize_A_kblock(tCrA_load, tCrA_mma, extra, k); };
    auto wgmma = [&](int k, int stage) {
      warpgroup_arrive();
      cute::gemm(tiled_mma, tCrA_mma(_, _, k), tCrB(_, _, k, stage), accum);
      tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      warpgroup_commit_batch();
    };

    PipelineState smem_pipe_release = smem_pipe_read;
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(accum);
    cutlass::ConsumerToken token = pipeline.consumer_try_wait(smem_pipe_read);

    if constexpr (kTwoAhead) {
      // The next tile's scales (and zeros) arrive in registers of their own while this tile's last k-block
      // still converts with the current ones. Read over the current ones after that conversion, a single set
      // made the compiler split the conversion's half2 math into halves and repack them (136 instructions a
      // k-step against 115).
      auto next_scales = make_tensor_like(scales);
      auto next_zeros = make_tensor_like(zeros);
      auto take_scales = [&]() {
        copy(next_scales, scales);
        if constexpr (kZeros) copy(next_zeros, zeros);
      };
      // The first tile's stage: its scales, the codes read ahead and the k-blocks converted ahead.
      pipeline.consumer_wait(smem_pipe_read, token);
      int next_stage = smem_pipe_read.index();  // the stage of the tile that runs next
      ++smem_pipe_read;                         // from here on, the tile after that one
      read_scales(next_stage, next_scales, next_zeros);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kReadAhead; ++k) read_block(k, next_stage);
      take_scales();
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kConvertAhead; ++k) convert(k);

      // One k-block of the tile in `stage`: its wgmma, then the k-block kConvertAhead later converted and the
      // one kReadAhead later read, in this tile or in the next (`next_tile`: one follows). The next tile's stage
      // is polled after this tile's first wgmma and waited on when its first codes are due. The previous tile's
      // stage (`prev_tile`: one came before) goes back to the producer at the first wait that shows its last
      // wgmma complete, before the next stage is waited on, so two stages in the pipeline suffice.
      auto k_block_step = [&](int k, int stage, bool prev_tile, bool next_tile) {
        wgmma(k, stage);
        warpgroup_wait<kInFlight>();
        // The wait leaves at most the kInFlight latest wgmmas in flight: from k = kInFlight - 1 on, all this tile's.
        if (prev_tile && k == kInFlight - 1) {
          pipeline.consumer_release(smem_pipe_release);
          ++smem_pipe_release;
        }
        if (next_tile && k == 0) token = pipeline.consumer_try_wait(smem_pipe_read);
        if (k + kConvertAhead < kBlocks) {
          convert(k + kConvertAhead);
        } else if (next_tile) {
          if (k + kConvertAhead == kBlocks) take_scales();
          convert(k + kConvertAhead - kBlocks);
        }
        if (k + kReadAhead < kBlocks) {
          read_block(k + kReadAhead, stage);
        } else if (next_tile) {
          if (k + kReadAhead == kBlocks) {  // after this tile's last conversion has taken its scales
            pipeline.consumer_wait(smem_pipe_read, token);
            next_stage = smem_pipe_read.index();
            ++smem_pipe_read;
            read_scales(next_stage, next_scales, next_zeros);
          }
          read_block(k + kReadAhead - kBlocks, next_stage);
        }
      };
      auto tile = [&](bool prev_tile, bool next_tile) {
        const int stage = next_stage;
        warpgroup_fence_operand(accum);
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kBlocks; ++k) k_block_step(k, stage, prev_tile, next_tile);
        warpgroup_fence_operand(accum);
      };

      // Every tile's stage but the last goes back to the producer here; the last one's is left to mma_tail.
      if (k_tile_count == 1) {
        tile(false, false);
        return;
      }
      tile(false, true);
      CUTLASS_PRAGMA_NO_UNROLL
      for (; k_tile_count > 2; --k_tile_count) tile(true, true);
      tile(true, false);
    } else {
      // A new stage: its scales and the codes of its first kReadAhead k-blocks.
      auto read_stage = [&](int stage) {
        read_scales(stage, scales, zeros);
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kReadAhead; ++k) read_block(k, stage);
      };
      // A tile's stage goes back to the producer one tile later, once all its wgmmas have completed; the last
      // tile's is left to mma_tail. First k-tile:
      pipeline.consumer_wait(smem_pipe_read, token);
      int stage = smem_pipe_read.index();
      ++smem_pipe_read;
      token = pipeline.consumer_try_wait(smem_pipe_read);
      read_stage(stage);
      convert(0);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kBlocks; ++k) {
        wgmma(k, stage);
        if (k + kReadAhead < kBlocks) read_block(k + kReadAhead, stage);
        if (k + 1 < kBlocks) convert(k + 1);
      }
      if (--k_tile_count == 0) {
        warpgroup_fence_operand(accum);
        return;
      }
      // The next tile's codes overwrite load registers already converted; its block 0 overwrites converted
      // registers only once the first wgmma that read them has completed.
      pipeline.consumer_wait(smem_pipe_read, token);
      read_stage(smem_pipe_read.index());
      warpgroup_wait<kInFlight>();
      convert(0);

      // One k-block of a tile after the first: its wgmma; then the next k-block's codes and conversion, or,
      // after the last k-block, the previous tile's stage back to the producer (all its wgmmas have completed at
      // this wait). `next_tile`: a later tile follows, whose stage is polled after the first k-block.
      auto k_block_step = [&](int k, int stage, bool next_tile) {
        wgmma(k, stage);
        warpgroup_wait<kInFlight>();
        if (next_tile && k == 0) token = pipeline.consumer_try_wait(smem_pipe_read);
        if (k + 1 < kBlocks) {
          if (k + kReadAhead < kBlocks) read_block(k + kReadAhead, stage);
          convert(k + 1);
        } else {
          pipeline.consumer_release(smem_pipe_release);
          ++smem_pipe_release;
        }
      };

      warpgroup_fence_operand(accum);
      CUTLASS_PRAGMA_NO_UNROLL
      for (; k_tile_count > 1; --k_tile_count) {
        stage = smem_pipe_read.index();
        ++smem_pipe_read;
        warpgroup_fence_operand(accum);
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kBlocks; ++k) k_block_step(k, stage, true);
        // The next tile's stage: its scales and first codes, and its block 0 converted.
        pipeline.consumer_wait(smem_pipe_read, token);
        read_stage(smem_pipe_read.index());
        convert(0);
        warpgroup_fence_operand(accum);
      }

      // Last k-tile: no next stage to read.
      stage = smem_pipe_read.index();
      warpgroup_fence_operand(accum);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kBlocks; ++k) k_block_step(k, stage, false);
      warpgroup_fence_operand(accum);
    }
  }
};

}  // namespace mixgemm::sm90
