// A/B of the sm90 path's consumer loop on the GPU machine: one sm90 config (fp16 x int4, group 128) built with
// our loop (KernelTypes::CollectiveMainloop, word_addressed_weight_reads.cuh) and with the CUTLASS builder's stock
// collective (KernelTypes::StockMainloop), run on the same random data. Checks the two outputs bit for bit, then
// times both in blocks of back-to-back launches (weight copies rotated past 256 MB so every call reads DRAM), the
// order alternating each round, and prints each one's median and the median of the per-round ratios (a round's
// two blocks run back to back, so their ratio cancels slow clock drift; the brackets are the min and max ratio).
// tools/sm90_mainloop_ab.sh builds the configs in parallel and runs them; one config per build:
//   nvcc -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr --generate-code=arch=compute_90a,code=[sm_90a] -I cpp \
//        -I $CUTLASS_INCLUDE -DAB_TILE_M=64 -DAB_TILE_N=128 -DAB_SCHEDULE=kCooperative -DAB_SCHEDULER=kStreamK \
//        -DAB_ZEROS=1 tools/sm90_mainloop_ab.cu -o /tmp/ab && /tmp/ab 4096x4096:128 8192x28672:64
// -DNDEBUG as in the library's build: CUTLASS's asserts are calls, and ptxas serializes the wgmmas across a call.
// -DAB_BASELINE=1 compares against our consumer loop over the stock producer instead (WordAddressedWeightReads of
// the builder's collective): that isolates x_rows_past_m_skipped.cuh, at M that leave 64 or more of a token tile's
// rows past M (docs/perf-notes/2026-11-27-sm90-partial-token-tiles.md) and, on the ping-pong schedule, at any M
// (its whole tiles take the same loop; docs/perf-notes/2026-11-27-sm90-x-row-block-loop-order.md), e.g.
// -DAB_TILE_M=256 -DAB_TILE_N=64
// -DAB_SCHEDULE=kPingpong -DAB_SCHEDULER=kPersistent -DAB_ZEROS=1 -DAB_BASELINE=1 ... && /tmp/ab 8192x5120:192.
// Options from the environment: AB_ROUNDS (default 11).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sm90_ab_cell.cuh"

#ifndef AB_TILE_M
#error "define AB_TILE_M, AB_TILE_N, AB_SCHEDULE, AB_SCHEDULER and AB_ZEROS (see the header)"
#endif
#ifndef AB_BASELINE
#define AB_BASELINE 0
#endif

namespace {
using namespace mixgemm;
using namespace mixgemm::sm90;
using namespace ab_cell;

using Ours = KernelTypes<ActType::kFloat16, 4, AB_ZEROS ? QuantMode::kScaleOffset : QuantMode::kScale, AB_TILE_M,
                         AB_TILE_N, 1, 1, Schedule::AB_SCHEDULE, Scheduler::AB_SCHEDULER>;

// The same config with the builder's collective as the mainloop (every other type is Ours'), or with AB_BASELINE
// our consumer loop over the builder's producer.
struct Stock : Ours {
  using CollectiveMainloop =
      cute::conditional_t<AB_BASELINE != 0, WordAddressedWeightReads<Ours::StockMainloop>, Ours::StockMainloop>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      Ours::CollectiveEpilogue, Ours::Kernel::TileSchedulerTag>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

void run_cell(int K, int N, int M, int rounds) {
  Cell cell(K, N, M);
  Half* y_ours = poisoned_output(M, N, 0xff);
  Half* y_stock = poisoned_output(M, N, 0x7f);
  Args a = cell.args(y_ours, AB_ZEROS);
  cell.give_workspace(a, {workspace<Ours>(a), workspace<Stock>(a)});
  Args b = a;
  b.D = y_stock;

  launch<Ours>(a, nullptr);
  launch<Stock>(b, nullptr);
  check(cudaDeviceSynchronize(), "first launches");
  const size_t different = differing(y_ours, y_stock, M, N);

  auto ours = [](const Args& args) { launch<Ours>(args, nullptr); };
  auto stock = [](const Args& args) { launch<Stock>(args, nullptr); };
  cell.time_block(a, ours);  // warm-up
  cell.time_block(b, stock);
  std::vector<float> t_ours, t_stock, ratio;
  for (int r = 0; r < rounds; ++r) {
    float to, ts;
    if (r % 2) {
      to = cell.time_block(a, ours), ts = cell.time_block(b, stock);
    } else {
      ts = cell.time_block(b, stock), to = cell.time_block(a, ours);
    }
    t_ours.push_back(to), t_stock.push_back(ts), ratio.push_back(to / ts);
  }
  check(cudaDeviceSynchronize(), "timing");
  for (auto* v : {&t_ours, &t_stock, &ratio}) std::sort(v->begin(), v->end());
  const int mid = rounds / 2;
  const char* baseline = AB_BASELINE ? "stock-producer" : "stock";
  printf("%dx%d_%s_%s %s  %5dx%-5d M=%-4d  ours %9.2f us  %s %9.2f us  ours/%s %.3f [%.3f..%.3f]  "
         "differing %zu\n", AB_TILE_M, AB_TILE_N, Schedule::AB_SCHEDULE == Schedule::kCooperative ? "coop" : "pingpong",
         Scheduler::AB_SCHEDULER == Scheduler::kStreamK ? "streamk" : "persistent", AB_ZEROS ? "zp" : "sym", K, N, M,
         t_ours[mid], baseline, t_stock[mid], baseline, ratio[mid], ratio.front(), ratio.back(), different);
  fflush(stdout);
  cudaFree(y_ours);
  cudaFree(y_stock);
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = getenv("AB_ROUNDS") ? atoi(getenv("AB_ROUNDS")) : 11;
  if (argc < 2 || rounds < 1) {
    fprintf(stderr, "usage: %s KxN:M [KxN:M ...]   (AB_ROUNDS >= 1)\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    int K, N, M;
    if (sscanf(argv[i], "%dx%d:%d", &K, &N, &M) != 3 || K % kGroup || N % AB_TILE_N || M < 1) {
      fprintf(stderr, "cell %s: want KxN:M with K a multiple of %d and N of the tile's %d columns\n", argv[i],
              kGroup, AB_TILE_N);
      return 2;
    }
    run_cell(K, N, M, rounds);
  }
  return 0;
}
