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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "mixgemm/sm90/launch.cuh"

#ifndef AB_TILE_M
#error "define AB_TILE_M, AB_TILE_N, AB_SCHEDULE, AB_SCHEDULER and AB_ZEROS (see the header)"
#endif
#ifndef AB_BASELINE
#define AB_BASELINE 0
#endif

namespace {
using namespace mixgemm;
using namespace mixgemm::sm90;

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

constexpr int kGroup = 128;
constexpr size_t kRotatedBytes = size_t(256) << 20;  // weight copies past the 50 MB L2, as the bench protocol

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

template <class T>
T* upload(const std::vector<T>& host, size_t copies = 1) {
  T* dev;
  check(cudaMalloc(&dev, host.size() * sizeof(T) * copies), "cudaMalloc");
  for (size_t c = 0; c < copies; ++c)
    check(cudaMemcpy(dev + c * host.size(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copy");
  return dev;
}

void run_cell(int K, int N, int M, int rounds) {
  std::mt19937 rng(K * 31 + N * 7 + M);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<uint32_t> codes(size_t(K) * N / 8);  // 8 int4 codes per word, any layout: the data is random
  for (auto& w : codes) w = rng();
  std::vector<cutlass::half_t> x(size_t(M) * K), scales(size_t(K / kGroup) * N), offsets(scales.size());
  for (auto& v : x) v = cutlass::half_t(uniform(rng));
  for (auto& v : scales) v = cutlass::half_t(0.01f + 0.01f * std::abs(uniform(rng)));
  for (auto& v : offsets) v = cutlass::half_t(0.05f * uniform(rng));
  const size_t weight_bytes = codes.size() * 4;
  const size_t copies = std::max<size_t>(1, kRotatedBytes / weight_bytes);
  uint32_t* w = upload(codes, copies);
  cutlass::half_t *dx = upload(x), *ds = upload(scales), *dz = upload(offsets);
  cutlass::half_t *y_ours, *y_stock;
  check(cudaMalloc(&y_ours, size_t(M) * N * 2), "cudaMalloc");
  check(cudaMalloc(&y_stock, size_t(M) * N * 2), "cudaMalloc");
  check(cudaMemset(y_ours, 0xff, size_t(M) * N * 2), "poison");  // NaN pattern: a tile left unwritten shows
  check(cudaMemset(y_stock, 0x7f, size_t(M) * N * 2), "poison");

  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  Args a;
  a.A = dx, a.B = w, a.scales = ds, a.offsets = AB_ZEROS ? dz : nullptr, a.D = y_ours;
  a.M = M, a.N = N, a.K = K, a.group_size = kGroup, a.device_sm_count = sms;
  const Workspace need_ours = workspace<Ours>(a), need_stock = workspace<Stock>(a);
  a.workspace_bytes = std::max(need_ours.bytes, need_stock.bytes);
  a.lock_count = std::max(need_ours.locks, need_stock.locks);
  if (a.workspace_bytes) check(cudaMalloc(&a.workspace, a.workspace_bytes), "workspace");
  if (a.lock_count) {
    check(cudaMalloc(&a.locks, a.lock_count * 4), "locks");
    check(cudaMemset(a.locks, 0, a.lock_count * 4), "locks");  // self-resetting after every launch
  }
  Args b = a;
  b.D = y_stock;

  launch<Ours>(a, nullptr);
  launch<Stock>(b, nullptr);
  check(cudaDeviceSynchronize(), "first launches");
  std::vector<uint16_t> h_ours(size_t(M) * N), h_stock(h_ours.size());
  check(cudaMemcpy(h_ours.data(), y_ours, h_ours.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  check(cudaMemcpy(h_stock.data(), y_stock, h_stock.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  size_t differing = 0;
  for (size_t i = 0; i < h_ours.size(); ++i) differing += h_ours[i] != h_stock[i];

  // About 10 ms of work per block, at least 10 launches.
  const double flops = 2.0 * M * N * K;
  const int launches = std::clamp(int(10e-3 / (flops / 400e12 + 5e-6)), 10, 200);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto time_block = [&](auto launch_one, Args args) {
    cudaEventRecord(start);
    for (int i = 0; i < launches; ++i) {
      args.B = reinterpret_cast<const char*>(w) + (i % copies) * weight_bytes;
      launch_one(args);
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return 1000.f * ms / launches;
  };
  auto ours = [](const Args& args) { launch<Ours>(args, nullptr); };
  auto stock = [](const Args& args) { launch<Stock>(args, nullptr); };
  time_block(ours, a);  // warm-up
  time_block(stock, b);
  std::vector<float> t_ours, t_stock, ratio;
  for (int r = 0; r < rounds; ++r) {
    float to, ts;
    if (r % 2) {
      to = time_block(ours, a), ts = time_block(stock, b);
    } else {
      ts = time_block(stock, b), to = time_block(ours, a);
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
         t_ours[mid], baseline, t_stock[mid], baseline, ratio[mid], ratio.front(), ratio.back(), differing);
  fflush(stdout);
  for (void* p : {(void*)w, (void*)dx, (void*)ds, (void*)dz, (void*)y_ours, (void*)y_stock, a.workspace,
                  (void*)a.locks})
    if (p) cudaFree(p);
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
