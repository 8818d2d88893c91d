// The sm90 path's stream-K tile scheduler: CUTLASS's PersistentTileSchedulerSm90StreamK with its split
// flags in a buffer that is zero before every launch and left zero after it, and split-K partials that
// the last split sums in one step.
//
// Why the flags move: CUTLASS keeps one flag per (output tile, consumer warpgroup) behind the fp32
// partials in the workspace and zeroes them before every launch (initialize_workspace: a
// cudaMemsetAsync). On the H100 that memset cost 0.9 us of GPU time plus 1.5-3.8 us of idle gaps around
// it per call (docs/perf-notes/2026-11-24-sm90-stream-k-no-memset.md), as much as a whole split-K GEMM of
// 4096x4096 at M = 128 gains from splitting. The sm80 and decode paths already avoid it: their tile counters live in a per-stream buffer
// (python/mixgemm/ops.py, _semaphore_buffer) zeroed once, and the unit that finishes a tile sets its
// counter back to 0. This scheduler does the same for the CUTLASS kernel:
//   - Arguments and Params carry `locks`, an address in that buffer;
//   - fixup() (below: what it adds, and in which order) reads and writes its flags there, and the unit
//     computing a tile's epilogue resets the tile's flag once every other unit of the tile has arrived;
//   - initialize_workspace() does nothing: partials are written before they are read, and the flags
//     need no clearing.
// Split-K within one wave gets one partial tile per split instead of CUTLASS's one per tile
// (get_workspace_size), so the splits need not take turns, and they can share the reduction and the epilogue by
// subtile (fixup; split_k_owned_subtiles.cuh). The kernel reaches this class through TileSchedulerSelector (end of
// file) for our tag, which names the kernel's TiledMma and EpilogueTile for that sharing.
//
// Limits: CUTLASS's "separate reduction" is not supported, and the pinned CUTLASS compiles it out
// (should_perform_separate_reduction() returns false); the reduction is deterministic whatever
// ReductionMode says. The flag area CUTLASS sizes into the workspace goes unused.
#pragma once

#include <algorithm>

#include "cutlass/barrier.h"
#include "cutlass/block_striped.h"
#include "cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "mixgemm/sm90/split_k_owned_subtiles.cuh"

namespace mixgemm::sm90 {

// The kernel's scheduler tag for this scheduler (GemmUniversal's fourth template argument): the kernel's TiledMma
// and EpilogueTile, from which fixup knows which epilogue subtile each accumulator belongs to.
template <class TiledMma, class EpilogueTile>
struct SelfResettingStreamKScheduler {};

template <class TileShape, class ClusterShape, class TiledMma, class EpilogueTile>
class SelfResettingStreamK : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape,
                                                                                                     ClusterShape> {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape>;

 protected:
  // The named barriers of the split flags: the two stream-K ids CUTLASS reserves, one a consumer warpgroup (fixup).
  static constexpr uint32_t kFirstBarrier =
      static_cast<uint32_t>(cutlass::arch::ReservedNamedBarriers::StreamkBarrier0);
  using Barriers = cutlass::NamedBarrierManager<cutlass::NumThreadsPerWarpGroup, kFirstBarrier, 2>;

 public:
  using Lock = typename Base::BarrierType;  // int

  // The base's unit of work, plus what the epilogue's store is handed (the kernel calls reduction_subtile_idx()):
  // -1, the whole tile, or a reduce-scatter split's OwnedSubtiles code.
  struct WorkTileInfo : Base::WorkTileInfo {
    int32_t owned_subtiles = -1;
    CUTLASS_HOST_DEVICE int32_t reduction_subtile_idx() const { return owned_subtiles; }
  };

  struct Arguments : Base::Arguments {
    Lock* locks = nullptr;  // lock_count() flags, all zero before the launch; zero again after it
    int last_split_extra_k_tiles = -1;  // split-K within one wave: see split_k_tiles; -1: the rule below
    bool reduce_scatter = false;  // split-K within one wave: the splits share the reduction by subtile (fixup)
  };

  struct Params : Base::Params {
    Lock* locks = nullptr;
    bool partial_per_split = false;  // split-K with every unit in one wave: see fixup
    bool reduce_scatter = false;     // partial_per_split: the splits share the reduction by subtile (fixup)
    uint32_t first_split_k_tiles = 0;  // partial_per_split: k-tiles of each split but the last (split_k_tiles)
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape problem_shape, TileShape tile_shape, ClusterShape cluster_shape,
                                        cutlass::KernelHardwareInfo const& hw_info, Arguments const& args,
                                        void* workspace, const uint32_t epilogue_subtile = 1,
                                        uint32_t ktile_start_alignment_count = 1u) {
    Params params;
    static_cast<typename Base::Params&>(params) =
        Base::to_underlying_arguments(problem_shape, tile_shape, cluster_shape, hw_info, args, workspace,
                                      epilogue_subtile, ktile_start_alignment_count);
    params.locks = args.locks;
    // Decided here, once, for both the workspace size and the kernel.
    const dim3 grid = Base::get_grid_shape(params, problem_shape, tile_shape, cluster_shape, hw_info, args);
    const uint64_t splits = params.divmod_splits_.divisor;
    params.partial_per_split =
        splits > 1 && params.units_per_problem_ * splits <= static_cast<uint64_t>(grid.x) * grid.y * grid.z;
    if (params.partial_per_split) {
      const uint32_t k_tiles = params.divmod_tiles_per_output_tile_.divisor;
      params.reduce_scatter = args.reduce_scatter;
      const int extra = args.last_split_extra_k_tiles >= 0
                            ? args.last_split_extra_k_tiles
                            : last_split_extra_k_tiles(static_cast<uint32_t>(splits), params.reduce_scatter);
      params.first_split_k_tiles = first_split_k_tiles(k_tiles, static_cast<uint32_t>(splits), extra);
    }
    return params;
  }

  // No memset: see the top of the file.
  template <class ProblemShape, class ElementAccumulator>
  static cutlass::Status initialize_workspace(Arguments const&, void*, cudaStream_t, ProblemShape const&,
                                              cutlass::KernelHardwareInfo const&, uint32_t, const uint32_t = 1,
                                              uint32_t = 1, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  // How many flags a launch with these arguments may index: one per consumer warpgroup of every output
  // tile, counted as the scheduler numbers tiles (the tile grid rounded up to whole swizzle groups and
  // clusters). Split-K uses all of them; stream-K only those of its split tiles, but a few KB of int32
  // is cheaper than a second rule for which tiles those are.
  template <class ProblemShape>
  static int64_t lock_count(Arguments const& args, ProblemShape problem_shape, uint32_t mma_warp_groups) {
    const dim3 blocks = Base::get_tiled_cta_shape_mnl(cute::append<4>(problem_shape, 1), TileShape{}, ClusterShape{});
    using TileGridParams = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params;  // the tile order
    const int swizzle = 1 << TileGridParams::get_log_swizzle_size(blocks.x, blocks.y, args.max_swizzle_size);
    const int64_t tiles_m = cutlass::round_up(blocks.x, swizzle * cute::size<0>(ClusterShape{}));
    const int64_t tiles_n = cutlass::round_up(blocks.y, swizzle * cute::size<1>(ClusterShape{}));
    return tiles_m * tiles_n * blocks.z * mma_warp_groups;
  }

  CUTLASS_HOST_DEVICE SelfResettingStreamK() {}
  CUTLASS_DEVICE explicit SelfResettingStreamK(Params const& params)
      : Base(params),
        unit_(first_unit(params)),
        first_split_k_tiles_(params.partial_per_split ? params.first_split_k_tiles : 0),
        reduce_scatter_(params.partial_per_split && params.reduce_scatter) {}

  // Whether the unit runs the epilogue: the base's answer (the unit holding the tile's last k-tiles), and every
  // split of a reduce-scatter, each for the subtiles it owns.
  CUTLASS_HOST_DEVICE static bool compute_epilogue(WorkTileInfo const& work, Params const& params) {
    return Base::compute_epilogue(work, params) || OwnedSubtiles::is_code(work.owned_subtiles);
  }

  // The CTA's first unit: the base's, with split-K's k-tiles laid out by split_k_tiles.
  template <class ClusterShapeT>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShapeT cluster_shape) {
    return split_k_tiles(Base::initial_work_tile_info(cluster_shape));
  }

  // The next unit of this CTA: the base's, with unit_ kept in step (see is_last_tile) and split-K's k-tiles laid
  // out by split_k_tiles. The kernel's pipelined overload only forwards here, as the base's does.
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo work) {
    WorkTileInfo probe = work;  // continue_current_work moves its argument on to the unit's next tile
    if (!Base::continue_current_work(probe)) unit_ += grid_units();
    auto [next, increment] = Base::fetch_next_work(work);
    return cute::make_tuple(split_k_tiles(next), increment);
  }
  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo work, Pipeline&, PipelineState) {
    return fetch_next_work(work);
  }

  // Whether `work` is this CTA's last: the kernel, compiled for dependent launches (cpp/mixgemm/core/
  // cutlass_run.h), lets the next grid launch once a consumer's last unit has left the mainloop. The
  // base's version does not compile in the pinned CUTLASS (a const method binds the member
  // unit_iter_start_ to a non-const reference), and the CTA's unit index it needs is private, so this
  // class follows that index itself, in unit_. A wrong answer would only move the release: the next grid
  // still waits for this one to finish.
  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo work, uint32_t advance_count = 1) const {
    if (Base::continue_current_work(work)) return false;  // the unit goes on into another tile
    uint32_t unit_iter_start = 0;                         // assign_work's output, not needed here
    return !Base::get_current_work_for_linear_idx(unit_iter_start, unit_ + grid_units() * advance_count,
                                                  cute::block_id_in_cluster(), this->scheduler_params)
                .is_valid();
  }

  // Whether a launch with these arguments runs its split-K within one wave (Params::partial_per_split): the only
  // split-K whose splits can share the reduction, so the runner's rule for split_k_mode 'reduce_scatter'.
  template <class ProblemShape>
  static bool splits_in_one_wave(Arguments const& args, ProblemShape problem_shape,
                                 cutlass::KernelHardwareInfo const& hw_info) {
    return to_underlying_arguments(problem_shape, TileShape{}, ClusterShape{}, hw_info, args, nullptr)
        .partial_per_split;
  }

  // Split-K within one wave keeps one fp32 partial tile per split (see fixup); CUTLASS sizes one per tile.
  template <class ProblemShape, class ElementAccumulator>
  static size_t get_workspace_size(Arguments const& args, ProblemShape problem_shape,
                                   cutlass::KernelHardwareInfo const& hw_info, uint32_t mma_warp_groups,
                                   const uint32_t epilogue_subtile = 1, uint32_t num_accumulator_mtxs = 1) {
    const size_t cutlass_bytes = Base::template get_workspace_size<ProblemShape, ElementAccumulator>(
        args, problem_shape, hw_info, mma_warp_groups, epilogue_subtile, num_accumulator_mtxs);
    // The decomposition the kernel will run (the split count may be adjusted, or chosen by the heuristic).
    const Params params = to_underlying_arguments(problem_shape, TileShape{}, ClusterShape{}, hw_info, args, nullptr,
                                                  epilogue_subtile);
    if (!params.partial_per_split) return cutlass_bytes;
    const uint64_t splits = params.divmod_splits_.divisor;
    const uint64_t slot_bytes = sizeof(ElementAccumulator) * kTileElements;
    return std::max<size_t>(cutlass_bytes,
                            cutlass::round_up(params.units_per_problem_ * splits * slot_bytes, size_t{128}));
  }

  // The reduction across the units of work that share one output tile, for one consumer warpgroup's share
  // of it (the kernel calls it after every unit; units covering a whole tile's K return at once). A flag
  // and a partial are per warpgroup (flag index tile * num_barriers + barrier_idx; the warpgroup's
  // fragments after the earlier ones' in each partial tile) because the two consumer warpgroups of a
  // cooperative tile hold different rows and finish independently; each waits on its own named barrier
  // (the two stream-K ids CUTLASS reserves), so only its 128 threads synchronise.
  //
  // Split-K whose units all run at once (tiles x splits <= the persistent grid; the only split-K the
  // dispatcher picks): the splits do not wait for each other. Since they finish together, CUTLASS's chain (each
  // split waits for the previous one, adds into one partial, signals the next) made them take turns: 4096x4096 at
  // M = 128 split 4 took 20.2 us with it, 17.0 without (H100, docs/perf-notes/2026-11-24-sm90-stream-k-no-memset.md).
  // Each split s has its own partial tile (slot s of the tile's splits). Two ways to add them, each in an order fixed
  // for every element (a_s: split s's accumulators):
  //   - reduce-scatter (Params::reduce_scatter): split s stores to its partial the 16-byte pieces of its
  //     accumulators that other splits own (split_k_owned_subtiles.cuh), counts itself on the flag and waits for
  //     all S; then it adds the other splits' pieces of the subtiles it owns in split order (a_s + a_0 + a_1 ...,
  //     skipping a_s), and its epilogue stores those. Each split moves about (S - 1) / S of a tile through its SM,
  //     where the last split's reduction brings S - 1 whole tiles through one. A second count on the same flag (S
  //     more) tells the last split to finish reading that the flag can go back to 0. The config's split_k_mode
  //     'reduce_scatter' asks for it (Arguments::reduce_scatter); where it pays is the heuristic's rule
  //     (python/mixgemm/paths/sm90.py, _reduce_scatter_pays).
  //   - last split: split s < S - 1 stores its whole accumulators and counts itself on the flag; the last split,
  //     which runs the epilogue (and a few k-tiles more than the others: split_k_tiles), waits for S - 1 arrivals,
  //     adds the partials in split order ((a_{S-1} + a_0) + a_1 ...) and resets the flag.
  //
  // Split-K over several waves, and stream-K (units that start or end inside a tile, a varying number
  // per tile): CUTLASS's serial chain, since a tile's units then finish at different times anyway and one
  // partial per tile is a smaller workspace (partials per split took up to 1.15x as long there). The
  // unit holding a tile's first k-tiles stores; each later unit waits until the flag counts the k-tiles
  // before its own, adds into the partial, and adds its k-tile count to the flag; the unit holding the
  // last k-tiles waits the same way, adds the partial into its accumulators and resets the flag.
  //
  // Either way the sum's order is fixed, so every launch gives the same bits; and no unit reads a flag
  // after the last one has waited on it (each waits only on units before it, all arrived by then).
  template <class FrgTensorC>
  CUTLASS_DEVICE static void fixup(Params const& params, WorkTileInfo const& work, FrgTensorC& accumulators,
                                   uint32_t num_barriers, uint32_t barrier_idx) {
    if (!Base::requires_fixup(params, work)) return;
    static_assert(cute::is_same_v<decltype(accumulators.layout()),
                                  decltype(cute::make_layout(cute::shape(accumulators)))>,
                  "fixup reads the accumulators as an array in their logical order");

    using Accumulator = typename FrgTensorC::value_type;
    using Fragment = cutlass::Array<Accumulator, cute::size(FrgTensorC{})>;
    // Threads of a warpgroup interleave their fragments in a partial (float i of thread t at i * 128 + t),
    // so each of the group's loads, stores and adds is coalesced.
    using Striped = cutlass::BlockStripedReduce<Barriers::ThreadCount, Fragment>;

    const uint64_t tile = Base::output_tile_index(params, work);
    const int flag = static_cast<int>(tile * num_barriers + barrier_idx);
    const uint64_t share = static_cast<uint64_t>(cute::size(accumulators)) * barrier_idx * Barriers::ThreadCount;
    auto* workspace = reinterpret_cast<Accumulator*>(params.reduction_workspace_);
    auto partial = [&](uint64_t index) {
      return reinterpret_cast<Fragment*>(workspace + index * kTileElements + share);
    };
    auto& fragment = *reinterpret_cast<Fragment*>(accumulators.data());
    const int thread = static_cast<int>(threadIdx.x % Barriers::ThreadCount);
    const bool last = Base::compute_epilogue(work, params);

    const uint32_t splits = params.divmod_splits_.divisor;
    if (params.partial_per_split) {
      // This unit's split: split s < splits - 1 starts at s * first_split_k_tiles (split_k_tiles).
      const uint32_t split = static_cast<uint32_t>(work.K_idx) / params.first_split_k_tiles;
      const uint64_t first = tile * splits;  // the tile's partials, one a split
      if (params.reduce_scatter) {
        float* partials = workspace + first * kTileElements + share;
        reduce_scatter(params.locks, flag, partials, fragment, thread, barrier_idx, split, splits);
        return;
      }
      if (!last) {
        Striped::store(partial(first + split), fragment, thread);
        Barriers::arrive_inc(barrier_idx, params.locks, thread, flag, 1);  // group barrier, then a release add
      } else {
        Barriers::wait_eq(barrier_idx, params.locks, thread, flag, static_cast<int>(splits - 1));
        for (uint32_t s = 0; s + 1 < splits; ++s) Striped::load_add(fragment, partial(first + s), thread);
        // The thread that saw the flag complete clears it. Plain store: the next reader is a later launch.
        if (thread == 0) params.locks[flag] = 0;
      }
      return;
    }

    if (!last) {
      if (work.K_idx == 0) {
        Striped::store(partial(tile), fragment, thread);
      } else {
        Barriers::wait_eq(barrier_idx, params.locks, thread, flag, work.K_idx);
        Striped::reduce(partial(tile), fragment, thread);
      }
      Barriers::arrive_inc(barrier_idx, params.locks, thread, flag, work.k_tile_count);
    } else {
      Barriers::wait_eq(barrier_idx, params.locks, thread, flag, work.K_idx);
      Striped::load_add(fragment, partial(tile), thread);
      if (thread == 0) params.locks[flag] = 0;
    }
  }

 private:
  // The reduce-scatter of one consumer warpgroup's share of a tile (fixup): split j's partial is `partials` + j
  // partial tiles (the warpgroup's share of each). The warpgroup's accumulators go in 16-byte pieces: piece i of
  // thread t at i x 128 + t, as BlockStripedReduce lays them (coalesced), read and written past L1 (each is read
  // once, on another SM). A piece's four floats are two rows x two columns of one 8-column block of a wgmma
  // accumulator, so one subtile holds all four.
  template <class Fragment>
  CUTLASS_DEVICE static void reduce_scatter(Lock* locks, int flag, float* partials, Fragment& fragment, int thread,
                                            uint32_t barrier_idx, uint32_t split, uint32_t splits) {
    constexpr int kPieces = Fragment::kElements / 4;
    constexpr int kThreads = Barriers::ThreadCount;
    // The tile coordinates of this thread's accumulators, in the kernel's numbering of the math threads.
    const auto coords = TiledMma{}
                            .get_slice(threadIdx.x % cute::size(TiledMma{}))
                            .partition_C(cute::make_identity_tensor(cute::take<0, 2>(TileShape{})));
    auto owner = [&](int piece) {
      const auto coord = coords(4 * piece);
      return OwnedSubtiles::owner(
          OwnedSubtiles::subtile_of<TileShape, EpilogueTile>(cute::get<0>(coord), cute::get<1>(coord)),
          static_cast<int>(splits));
    };
    float* acc = fragment.data();
    float4* out = reinterpret_cast<float4*>(partials + split * kTileElements);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kPieces; ++i)
      if (owner(i) != static_cast<int>(split))
        __stcg(out + i * kThreads + thread, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
    Barriers::arrive_inc(barrier_idx, locks, thread, flag, 1);  // group barrier, then a release add
    Barriers::wait_lt(barrier_idx, locks, thread, flag, static_cast<int>(splits));  // until all splits arrived
    // One other split at a time, all of its pieces this thread owns at once: their loads are in flight together
    // (a piece at a time, each load would wait out L2's latency alone).
    for (uint32_t j = 0; j < splits; ++j) {
      if (j == split) continue;
      const float4* in = reinterpret_cast<const float4*>(partials + j * kTileElements);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kPieces; ++i) {
        if (owner(i) != static_cast<int>(split)) continue;
        const float4 v = __ldcg(in + i * kThreads + thread);
        acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
      }
    }
    // Every thread of the group has passed the wait (its barrier): count the group out once more. The add that
    // brings the flag to 2S is the last of the tile's; nothing reads the flag after it in this launch.
    if (thread == 0 && atomicAdd(locks + flag, 1) == 2 * static_cast<int>(splits) - 1) locks[flag] = 0;
  }

  // Split-K within one wave: how many k-tiles more than each of the others the last split runs. The others store their
  // partial tiles and signal while the last one still runs its k-loop, so part of the stores and of the wait for the
  // slowest split leaves the critical path (with even splits they took 9%-14% of such kernels). The A/B of
  // tools/sm90_split_fixup_ab.cu (H100, 4 against 0 extra k-tiles; docs/perf-notes/
  // 2026-11-27-sm90-split-k-fixup-cost.md): 0.983x-0.989x on 256 x 128 and 128 x 128 tiles split 3 ways (K = 8192),
  // 0.966x / 0.982x on 128 x 128 / 64 x 128 split 2 ways (K = 4096), 1.003x-1.004x on 64 x 128 split 3 ways. More
  // hid no more: 6 and 8 extra k-tiles took 0.997x-1.007x on the splits of 3 of the larger tiles, 12 took 1.06x.
  // Splits of 4 and more: 64 x 128 split 6 took 1.02x-1.07x with 4 (128 x 128 split 6 0.991x-0.998x), so none. The
  // reduce-scatter waits for every split, so there extra k-tiles only come later: 4 took 1.01x-1.09x the time of none.
  static int last_split_extra_k_tiles(uint32_t splits, bool reduce_scatter) {
    return !reduce_scatter && splits <= 3 ? 4 : 0;
  }

  // k-tiles of each split but the last, for `extra` more in the last one (none where the tile's k-tiles leave each
  // split fewer than one).
  static uint32_t first_split_k_tiles(uint32_t k_tiles, uint32_t splits, int extra) {
    const uint32_t spare = static_cast<uint32_t>(extra) < k_tiles ? k_tiles - static_cast<uint32_t>(extra) : 0;
    return spare >= splits ? spare / splits : k_tiles / splits;
  }

  // `work` (as the base assigns it) with split-K's k-tiles laid out as partial_per_split wants them: split s < S - 1
  // runs k-tiles [s a, (s + 1) a) of its tile, the last split the rest, a = first_split_k_tiles_. (CUTLASS gives
  // the first splits one k-tile more than the others instead.) The base's split is read off its K_idx: its splits
  // start at s * base + min(s, big).
  CUTLASS_DEVICE WorkTileInfo split_k_tiles(typename Base::WorkTileInfo base_work) const {
    WorkTileInfo work;
    static_cast<typename Base::WorkTileInfo&>(work) = base_work;
    if (first_split_k_tiles_ == 0 || !work.is_valid()) return work;
    auto const& params = this->scheduler_params;
    const uint32_t splits = params.divmod_splits_.divisor, k_tiles = params.divmod_tiles_per_output_tile_.divisor;
    const uint32_t base = params.divmod_k_tiles_per_sk_unit_.divisor, big = params.big_units_;
    const uint32_t k = static_cast<uint32_t>(work.K_idx);
    const uint32_t split = k < big * (base + 1) ? k / (base + 1) : big + (k - big * (base + 1)) / base;
    const uint32_t a = first_split_k_tiles_;
    work.K_idx = static_cast<int32_t>(split * a);
    work.k_tile_count = split + 1 < splits ? a : k_tiles - split * a;
    work.k_tile_remaining = work.k_tile_count;  // one tile a unit
    if (reduce_scatter_) work.owned_subtiles = OwnedSubtiles::code(static_cast<int>(split), static_cast<int>(splits));
    return work;
  }

  // Floats of one partial tile.
  static constexpr uint64_t kTileElements = cute::size<0>(TileShape{}) * cute::size<1>(TileShape{});

  // A CTA's first unit and the stride between its units, as the base numbers them (its constructor and
  // advance_to_next_work).
  CUTLASS_DEVICE static uint64_t first_unit(Params const& params) {
    return params.raster_order_ == Base::RasterOrder::AlongN
               ? uint64_t(blockIdx.x) + uint64_t(blockIdx.y) * gridDim.x
               : uint64_t(blockIdx.x) * gridDim.y + uint64_t(blockIdx.y);
  }
  CUTLASS_DEVICE static uint64_t grid_units() { return uint64_t(gridDim.x) * gridDim.y * gridDim.z; }

  uint64_t unit_ = 0;  // the linear index of the CTA's current unit
  uint32_t first_split_k_tiles_ = 0;  // Params::first_split_k_tiles where partial_per_split, else 0 (no relayout)
  bool reduce_scatter_ = false;       // Params::reduce_scatter where partial_per_split
};

}  // namespace mixgemm::sm90

namespace cutlass::gemm::kernel::detail {

template <class TiledMma, class EpilogueTile, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<mixgemm::sm90::SelfResettingStreamKScheduler<TiledMma, EpilogueTile>, arch::Sm90,
                             TileShape, ClusterShape, SchedulerPipelineStageCount> {
  using Scheduler = mixgemm::sm90::SelfResettingStreamK<TileShape, ClusterShape, TiledMma, EpilogueTile>;
};

}  // namespace cutlass::gemm::kernel::detail
