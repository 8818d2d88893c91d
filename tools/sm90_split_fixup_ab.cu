// What the sm90 path's split-K reduction costs: one stream-K config (fp16 x int4 with zero points, group 128) split
// K ways, timed with each of its two reductions (the config's split_k_mode 'serial' and 'reduce_scatter'), and with the
// last split's reduction hollowed out, on the same random data. Timing only: the hollow variants compute wrong outputs
// on purpose.
//   last       the last split's reduction: splits 0..s-2 store their fp32 partial tiles, the last split (with 2-3
//              splits, 4 k-tiles longer than the others: split_k_tiles) waits for them on the tile's flag and adds
//              them before its epilogue, one float per instruction (CUTLASS's BlockStripedReduce);
//   scatter    the reduce-scatter: each split adds and stores the epilogue subtiles it owns;
//   scatter-1-store  the reduce-scatter's reduction, but the last split alone stores, the whole tile in one store
//              call (the other splits' subtiles unreduced): scatter against it is what storing a split's subtiles
//              one call each costs;
//   vector     the last split's reduction in 16-byte pieces (float4 i of thread t at i x 128 + t), a quarter of the
//              instructions;
//   store-only as vector, but the last split adds nothing: vector minus store-only is what the loads cost;
//   load-only  as vector, but no partial is stored (the last split loads what an earlier launch left, which the
//              rotated weights may have pushed out of L2);
//   sync-only  the same arrivals and wait, no partial stored or loaded: vector minus sync-only is what moving the
//              partials through L2 costs;
//   none       no arrival, no wait: sync-only minus none is the wait itself (how far the splits finish apart).
// Timed as tools/sm90_mainloop_ab.cu times: blocks of back-to-back launches, weight copies rotated past L2, the
// order rotating each round; prints each variant's median time and the median of its per-round ratio to the first.
// Checks: last and vector must agree bit for bit, the reduce-scatter (another order of the same sums) to fp16
// rounding. One tile per build (docs/perf-notes/2026-11-27-sm90-split-k-fixup-cost.md and
// 2026-11-27-sm90-split-k-reduce-scatter.md have what it printed):
//   nvcc -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr --generate-code=arch=compute_90a,code=[sm_90a] -I cpp \
//        -I $CUTLASS_INCLUDE -DAB_TILE_M=256 -DAB_TILE_N=128 tools/sm90_split_fixup_ab.cu -o /tmp/fixup_ab
//   /tmp/fixup_ab 8192x2560:512:3 8192x5120:256:3      # KxN:M:split
// Options from the environment: AB_ROUNDS (default 11); AB_EXTRAS=0,4,8 times the last split's reduction and the
// reduce-scatter alone, each with the last split running that many k-tiles more than the others
// (Args::last_split_extra_k_tiles, Args::reduce_scatter); AB_BREAK and AB_GRAPH as sm90_ab_cell.cuh says (AB_GRAPH
// needs --default-stream per-thread in the build). -DAB_EPI_TOKENS=16 adds both reductions with epilogue subtiles of that
// many tokens (KernelTypes' EpilogueTokens) to the default variants, checked against the last split's output.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "sm90_ab_cell.cuh"

#ifndef AB_TILE_M
#error "define AB_TILE_M and AB_TILE_N (tokens x weight columns of a cooperative stream-K tile; see the header)"
#endif

namespace ab {

enum Fixup : int { kVector = 1, kStoreOnly = 2, kLoadOnly = 3, kSyncOnly = 4, kNone = 5 };

// A type carried as a value (the variants' lambdas take the kernel to launch as an argument).
template <class T>
struct Tag {
  using type = T;
};

// The shipped scheduler with fixup() replaced; every other member is the shipped one's.
template <class TileShape, class ClusterShape, class TiledMma, class EpilogueTile, int kMode>
class HollowFixup : public mixgemm::sm90::SelfResettingStreamK<TileShape, ClusterShape, TiledMma, EpilogueTile> {
  using Shipped = mixgemm::sm90::SelfResettingStreamK<TileShape, ClusterShape, TiledMma, EpilogueTile>;
  using StreamK = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape>;

 public:
  using Shipped::Shipped;

  template <class FrgTensorC>
  CUTLASS_DEVICE static void fixup(typename Shipped::Params const& params, typename Shipped::WorkTileInfo const& work,
                                   FrgTensorC& acc, uint32_t num_barriers, uint32_t barrier_idx) {
    if (kMode == kNone || !StreamK::requires_fixup(params, work)) return;
    using Barriers = typename Shipped::Barriers;
    const int flag = static_cast<int>(StreamK::output_tile_index(params, work) * num_barriers + barrier_idx);
    const int thread = static_cast<int>(threadIdx.x % Barriers::ThreadCount);
    if constexpr (kMode == kVector || kMode == kStoreOnly || kMode == kLoadOnly) {  // split-K in one wave
      constexpr int kPieces = cute::size(FrgTensorC{}) / 4;
      const uint64_t tile = StreamK::output_tile_index(params, work);
      const uint32_t splits = params.divmod_splits_.divisor;
      const uint32_t split = static_cast<uint32_t>(work.K_idx) / params.first_split_k_tiles;
      auto partial = [&](uint64_t index) {
        return reinterpret_cast<float*>(params.reduction_workspace_) +
               index * cute::size<0>(TileShape{}) * cute::size<1>(TileShape{}) +
               cute::size(FrgTensorC{}) * barrier_idx * Barriers::ThreadCount;
      };
      float* frag = reinterpret_cast<float*>(acc.data());
      if (!StreamK::compute_epilogue(work, params)) {
        float* out = partial(tile * splits + split);
        if constexpr (kMode != kLoadOnly) {
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kPieces; ++i)
            __stcg(reinterpret_cast<float4*>(out) + i * Barriers::ThreadCount + thread,
                   make_float4(frag[4 * i], frag[4 * i + 1], frag[4 * i + 2], frag[4 * i + 3]));
        }
        Barriers::arrive_inc(barrier_idx, params.locks, thread, flag, 1);
      } else {
        Barriers::wait_eq(barrier_idx, params.locks, thread, flag, static_cast<int>(splits - 1));
        for (uint32_t s = 0; s + 1 < splits && kMode != kStoreOnly; ++s) {
          const float4* in = reinterpret_cast<const float4*>(partial(tile * splits + s));
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < kPieces; ++i) {
            const float4 v = __ldcg(in + i * Barriers::ThreadCount + thread);
            frag[4 * i] += v.x, frag[4 * i + 1] += v.y, frag[4 * i + 2] += v.z, frag[4 * i + 3] += v.w;
          }
        }
        if (thread == 0) params.locks[flag] = 0;
      }
      return;
    }
    if (!StreamK::compute_epilogue(work, params)) {
      Barriers::arrive_inc(barrier_idx, params.locks, thread, flag, 1);
    } else {
      Barriers::wait_eq(barrier_idx, params.locks, thread, flag, static_cast<int>(params.divmod_splits_.divisor - 1));
      if (thread == 0) params.locks[flag] = 0;
    }
  }
};

template <int kMode, class TiledMma, class EpilogueTile>
struct HollowFixupTag {};

}  // namespace ab

namespace cutlass::gemm::kernel::detail {
template <int kMode, class TiledMma, class EpilogueTile, class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<ab::HollowFixupTag<kMode, TiledMma, EpilogueTile>, arch::Sm90, TileShape, ClusterShape,
                             Stages> {
  using Scheduler = ab::HollowFixup<TileShape, ClusterShape, TiledMma, EpilogueTile, kMode>;
};
}  // namespace cutlass::gemm::kernel::detail

namespace {
using namespace mixgemm;
using namespace mixgemm::sm90;
using namespace ab_cell;

using Shipped = KernelTypes<ActType::kFloat16, 4, QuantMode::kScaleOffset, AB_TILE_M, AB_TILE_N, 1, 1,
                            Schedule::kCooperative, Scheduler::kStreamK>;
#ifdef AB_EPI_TOKENS
// The same kernel with epilogue subtiles of AB_EPI_TOKENS tokens (KernelTypes' EpilogueTokens): more subtiles to share.
using Fine = KernelTypes<ActType::kFloat16, 4, QuantMode::kScaleOffset, AB_TILE_M, AB_TILE_N, 1, 1,
                         Schedule::kCooperative, Scheduler::kStreamK, AB_EPI_TOKENS>;
#endif

template <int kMode>
struct Hollow : Shipped {
  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, Shipped::CollectiveMainloop, Shipped::CollectiveEpilogue,
      ab::HollowFixupTag<kMode, Shipped::TiledMma, Shipped::EpilogueTile>>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// Timing only: the reduce-scatter's fixup, but the last split alone stores, the whole tile in one store call (its
// other splits' subtiles unreduced): against scatter, what storing a split's subtiles one call each costs.
template <class Epilogue>
struct LastSplitStoresAll : Epilogue {
  using Epilogue::Epilogue;
  template <class Problem, class TileShape, class TileCoord, class AccEngine, class AccLayout, class TiledMma>
  CUTLASS_DEVICE auto store(typename Epilogue::LoadPipeline load_pipeline, typename Epilogue::LoadPipelineState load,
                            typename Epilogue::StorePipeline store_pipeline,
                            typename Epilogue::StorePipelineState store, Problem problem, TileShape tile_shape,
                            TileCoord coord, cute::Tensor<AccEngine, AccLayout> acc, TiledMma mma, int thread,
                            typename Epilogue::TensorStorage& smem, int code = -1) {
    if (OwnedSubtiles::is_code(code) && OwnedSubtiles::split_of(code) + 1 < OwnedSubtiles::splits_of(code))
      return cute::make_tuple(load, store);
    return Epilogue::store(load_pipeline, load, store_pipeline, store, problem, tile_shape, coord, acc, mma, thread,
                           smem, -1);
  }
};

struct OneStore : Shipped {
  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, Shipped::CollectiveMainloop, LastSplitStoresAll<Shipped::StockEpilogue>,
      SelfResettingStreamKScheduler<Shipped::TiledMma, Shipped::EpilogueTile>>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

void run_cell(int K, int N, int M, int split, int rounds, const std::vector<int>& extras) {
  Cell cell(K, N, M);
  Half* y = poisoned_output(M, N, 0xff);
  Half* y_vector = poisoned_output(M, N, 0x7f);
  Half* y_scatter = poisoned_output(M, N, 0x3f);
  Args a = cell.args(y, true, split);
  cell.give_workspace(a, {workspace<Shipped>(a)});  // the hollow variants need no more: same decomposition

  // All three over the same k-tiles (the uneven layout, 4 extra k-tiles in the last split). The last split's reduction
  // and the vector variant add the same partials in the same order: their outputs must agree bit for bit. The
  // reduce-scatter adds them in another order (its owner's partial first): it must agree to fp16 rounding.
  Args last = a, vector = a, scatter = a;
  last.last_split_extra_k_tiles = vector.last_split_extra_k_tiles = scatter.last_split_extra_k_tiles = 4;
  last.reduce_scatter = vector.reduce_scatter = false, scatter.reduce_scatter = true;
  vector.D = y_vector, scatter.D = y_scatter;
  launch<Shipped>(last, nullptr);
  launch<Hollow<ab::kVector>>(vector, nullptr);
  launch<Shipped>(scatter, nullptr);
  check(cudaDeviceSynchronize(), "first launches");
  const size_t different = differing(y, y_vector, M, N);
  const float scatter_difference = largest_difference(y, y_scatter, M, N);
#ifdef AB_EPI_TOKENS
  // The finer subtiles' reduce-scatter: another owner for some pieces, the same sums to fp16 rounding.
  launch<Fine>(scatter, nullptr);
  check(cudaDeviceSynchronize(), "fine launch");
  const float fine_difference = largest_difference(y, y_scatter, M, N);
#else
  const float fine_difference = 0;
#endif

  auto time_block = [&](auto launch_one) { return cell.time_block(a, launch_one); };
  // The variants in print order, the first the ratios' denominator: with AB_EXTRAS (a comma list of k-tiles), the
  // last split's reduction and the reduce-scatter, with the last split running that many k-tiles more than the others
  // (Args::last_split_extra_k_tiles, Args::reduce_scatter); else the two reductions with the scheduler's extra-k-tile
  // rule, and the last split's reduction hollowed.
  struct Variant {
    std::string name;
    std::function<float()> time;
  };
  std::vector<Variant> variants;
  // Kernel `Types` with one reduction (the reduce-scatter or the last split's), the last split running `extra`
  // k-tiles more than the others (Args::last_split_extra_k_tiles; -1: the scheduler's rule).
  auto reduction = [&](auto types, bool scatter, int extra) {
    return [&, scatter, extra] {
      return time_block([scatter, extra](Args args) {
        args.last_split_extra_k_tiles = extra;
        args.reduce_scatter = scatter;
        launch<typename decltype(types)::type>(args, nullptr);
      });
    };
  };
  for (int extra : extras)
    for (bool scatter : {false, true})
      variants.push_back({(scatter ? "scatter+" : "last+") + std::to_string(extra),
                          reduction(ab::Tag<Shipped>{}, scatter, extra)});
  // The hollow variants hollow the last split's reduction (their fixup replaces the scheduler's).
  auto hollow = [&](auto kind) {
    return [&, kind] {
      return time_block([](Args args) {
        args.reduce_scatter = false;
        launch<Hollow<decltype(kind)::value>>(args, nullptr);
      });
    };
  };
  if (extras.empty()) {
    for (bool scatter : {false, true})
      variants.push_back({scatter ? "scatter" : "last", reduction(ab::Tag<Shipped>{}, scatter, -1)});
#ifdef AB_EPI_TOKENS
    for (bool scatter : {false, true})
      variants.push_back({std::string(scatter ? "scatter" : "last") + "-e" + std::to_string(AB_EPI_TOKENS),
                          reduction(ab::Tag<Fine>{}, scatter, -1)});
#endif
    variants.push_back({"scatter-1-store", [&] {
                          return time_block([](Args args) {
                            args.reduce_scatter = true;
                            launch<OneStore>(args, nullptr);
                          });
                        }});
    variants.push_back({"vector", hollow(cute::Int<ab::kVector>{})});
    variants.push_back({"store-only", hollow(cute::Int<ab::kStoreOnly>{})});
    variants.push_back({"load-only", hollow(cute::Int<ab::kLoadOnly>{})});
    variants.push_back({"sync-only", hollow(cute::Int<ab::kSyncOnly>{})});
    variants.push_back({"none", hollow(cute::Int<ab::kNone>{})});
  }
  const int n = static_cast<int>(variants.size());
  for (auto& v : variants) v.time();  // warm-up
  std::vector<std::vector<float>> t(n), ratio(n);
  for (int r = 0; r < rounds; ++r) {
    std::vector<float> us(n);
    for (int j = 0; j < n; ++j) {  // the order rotates with the round
      const int v = (j + r) % n;
      us[v] = variants[v].time();
    }
    for (int v = 0; v < n; ++v) t[v].push_back(us[v]), ratio[v].push_back(us[v] / us[0]);
  }
  check(cudaDeviceSynchronize(), "timing");
  for (auto& v : t) std::sort(v.begin(), v.end());
  for (auto& v : ratio) std::sort(v.begin(), v.end());
  const int mid = rounds / 2;
  printf("%dx%d_coop_streamk zp %5dx%-5d M=%-4d split %d", AB_TILE_M, AB_TILE_N, K, N, M, split);
  for (int v = 0; v < n; ++v) {
    printf("  %s %.2f us", variants[v].name.c_str(), t[v][mid]);
    if (v) printf(" (%.3f [%.3f..%.3f])", ratio[v][mid], ratio[v].front(), ratio[v].back());
  }
  printf("  last vs vector: %zu outputs differ; last vs scatter: %.1e, vs fine scatter %.1e of the largest |y|\n",
         different, scatter_difference, fine_difference);
  fflush(stdout);
  cudaFree(y);
  cudaFree(y_vector);
  cudaFree(y_scatter);
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = getenv("AB_ROUNDS") ? atoi(getenv("AB_ROUNDS")) : 11;
  std::vector<int> extras;
  if (const char* list = getenv("AB_EXTRAS"))
    for (const char* p = list; *p; p += *p == ',')
      extras.push_back(static_cast<int>(strtol(p, const_cast<char**>(&p), 10)));
  if (argc < 2 || rounds < 1) {
    fprintf(stderr, "usage: %s KxN:M:split [KxN:M:split ...]   (AB_ROUNDS >= 1)\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    int K, N, M, split;
    if (sscanf(argv[i], "%dx%d:%d:%d", &K, &N, &M, &split) != 4 || K % kGroup || N % AB_TILE_N || M < 1 ||
        split < 2) {
      fprintf(stderr, "cell %s: want KxN:M:split with K a multiple of %d, N of the tile's %d columns, split >= 2\n",
              argv[i], kGroup, AB_TILE_N);
      return 2;
    }
    run_cell(K, N, M, split, rounds, extras);
  }
  return 0;
}
