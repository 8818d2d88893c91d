// A/B of the sm90 path's producer for token tiles that reach past M (sm90/x_rows_past_m_skipped.cuh) on the GPU
// machine: one sm90 config (fp16 x int4, group 128) built with KernelTypes' collective (new: x's rows past M left
// unloaded where 64 or more are) and with the collective before it (old: every token tile one full TMA box,
// zero-filled past M), run on the same random data at each M given. Checks the two outputs bit for bit (the rows
// past M never reach the output), then times both in blocks of back-to-back launches (weight copies rotated past
// 256 MB), the order alternating each round, and prints the medians and the median per-round ratio [min..max].
// docs/perf-notes/2026-11-27-sm90-partial-token-tiles.md has what it printed. One config per build, on the device
// machine with nvcc and the nvidia-cutlass wheel installed (about 90 s a build; build several in parallel):
//   nvcc -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr --generate-code=arch=compute_90a,code=[sm_90a] -I cpp \
//        -I $CUTLASS_INCLUDE -DAB_TILE_M=256 -DAB_TILE_N=64 -DAB_CLUSTER_N=1 -DAB_SCHEDULE=kPingpong \
//        -DAB_SCHEDULER=kPersistent -DAB_ZEROS=1 tools/sm90_partial_tile_ab.cu -o /tmp/ab && /tmp/ab 8192x5120:192
// Options from the environment: AB_ROUNDS (default 7).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include "mixgemm/sm90/launch.cuh"
using namespace mixgemm;
using namespace mixgemm::sm90;
using New = KernelTypes<ActType::kFloat16, 4, AB_ZEROS ? QuantMode::kScaleOffset : QuantMode::kScale, AB_TILE_M,
                        AB_TILE_N, 1, AB_CLUSTER_N, Schedule::AB_SCHEDULE, Scheduler::AB_SCHEDULER>;
struct Old : New {
  using CollectiveMainloop = WordAddressedWeightReads<New::StockMainloop>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      New::CollectiveEpilogue, New::Kernel::TileSchedulerTag>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};
constexpr int kGroup = 128;
void check(cudaError_t e, const char* w) { if (e) { fprintf(stderr, "%s: %s\n", w, cudaGetErrorString(e)); exit(1); } }
int main(int argc, char** argv) {
  const int rounds = getenv("AB_ROUNDS") ? atoi(getenv("AB_ROUNDS")) : 7;
  for (int a = 1; a < argc; ++a) {
    int K, N, M;
    if (sscanf(argv[a], "%dx%d:%d", &K, &N, &M) != 3) { fprintf(stderr, "KxN:M\n"); return 2; }
    std::mt19937 rng(K + N + M);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<uint32_t> codes(size_t(K) * N / 8);
    for (auto& w : codes) w = rng();
    std::vector<cutlass::half_t> x(size_t(M) * K), sc(size_t(K / kGroup) * N), of(sc.size());
    for (auto& v : x) v = cutlass::half_t(u(rng));
    for (auto& v : sc) v = cutlass::half_t(0.01f + 0.01f * std::abs(u(rng)));
    for (auto& v : of) v = cutlass::half_t(0.05f * u(rng));
    const size_t wb = codes.size() * 4, copies = std::max<size_t>(1, (size_t(256) << 20) / wb);
    auto up = [](const void* h, size_t bytes, size_t n = 1) { char* d; check(cudaMalloc(&d, bytes * n), "m");
      for (size_t c = 0; c < n; ++c) check(cudaMemcpy(d + c * bytes, h, bytes, cudaMemcpyHostToDevice), "c"); return d; };
    char* w = up(codes.data(), wb, copies);
    void *dx = up(x.data(), x.size() * 2), *ds = up(sc.data(), sc.size() * 2), *dz = up(of.data(), of.size() * 2);
    void *y_new, *y_old;
    check(cudaMalloc(&y_new, size_t(M) * N * 2), "y"); check(cudaMalloc(&y_old, size_t(M) * N * 2), "y");
    cudaMemset(y_new, 0xff, size_t(M) * N * 2); cudaMemset(y_old, 0x7f, size_t(M) * N * 2);
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    Args p; p.A = dx, p.B = w, p.scales = ds, p.offsets = AB_ZEROS ? dz : nullptr, p.D = y_new, p.M = M, p.N = N,
    p.K = K, p.group_size = kGroup, p.device_sm_count = sms;
    Workspace n1 = workspace<New>(p), n2 = workspace<Old>(p);
    p.workspace_bytes = std::max(n1.bytes, n2.bytes); p.lock_count = std::max(n1.locks, n2.locks);
    if (p.workspace_bytes) check(cudaMalloc(&p.workspace, p.workspace_bytes), "ws");
    if (p.lock_count) { check(cudaMalloc(&p.locks, p.lock_count * 4), "l"); cudaMemset(p.locks, 0, p.lock_count * 4); }
    Args q = p; q.D = y_old;
    launch<New>(p, nullptr); launch<Old>(q, nullptr);
    check(cudaDeviceSynchronize(), "first");
    std::vector<uint16_t> hn(size_t(M) * N), ho(hn.size());
    cudaMemcpy(hn.data(), y_new, hn.size() * 2, cudaMemcpyDeviceToHost); cudaMemcpy(ho.data(), y_old, ho.size() * 2, cudaMemcpyDeviceToHost);
    size_t differing = 0, nonfinite = 0;
    for (size_t i = 0; i < hn.size(); ++i) { differing += hn[i] != ho[i]; nonfinite += (hn[i] & 0x7c00) == 0x7c00; }
    const int launches = std::clamp(int(10e-3 / (2.0 * M * N * K / 400e12 + 5e-6)), 10, 200);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    size_t rot = 0;
    auto block = [&](bool is_new) {
      Args b = is_new ? p : q;
      cudaEventRecord(e0);
      for (int i = 0; i < launches; ++i) {
        b.B = w + (rot++ % copies) * wb;
        is_new ? launch<New>(b, nullptr) : launch<Old>(b, nullptr);
      }
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      return 1000.f * ms / launches;
    };
    block(true), block(false);  // warm-up
    std::vector<float> tn, to, r;
    for (int k = 0; k < rounds; ++k) {  // the order alternates each round
      float a1, b1;
      if (k % 2) a1 = block(true), b1 = block(false);
      else b1 = block(false), a1 = block(true);
      tn.push_back(a1), to.push_back(b1), r.push_back(a1 / b1);
    }
    check(cudaDeviceSynchronize(), "timing");
    for (auto* v : {&tn, &to, &r}) std::sort(v->begin(), v->end());
    printf("%dx%d_%s_%s %s %5dx%-5d M=%-4d new %8.2f us  old %8.2f us  new/old %.3f [%.3f..%.3f]  differing %zu  "
           "nonfinite %zu\n", AB_TILE_M, AB_TILE_N, Schedule::AB_SCHEDULE == Schedule::kCooperative ? "coop" : "pingpong",
           Scheduler::AB_SCHEDULER == Scheduler::kStreamK ? "streamk" : "persistent", AB_ZEROS ? "zp" : "sym", K, N, M,
           tn[rounds / 2], to[rounds / 2], r[rounds / 2], r.front(), r.back(), differing, nonfinite);
    fflush(stdout);
    for (void* z : {(void*)w, dx, ds, dz, y_new, y_old, p.workspace, (void*)p.locks}) if (z) cudaFree(z);
  }
  return 0;
}
