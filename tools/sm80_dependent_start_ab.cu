// A/B of the sm80 path's start as a programmatic dependent (sm80/kernel/dependent_start.cuh): the same kernel,
// launched by the library's launcher (sm80/launch.cuh: a dependent, for the tiles kStartsAsDependent names, with the
// SM's share of shared memory for its grid) and ordinarily (<<<>>>, the tile's own shared memory: griddepcontrol is a
// no-op and nothing overlaps), timed back to back and after an ordinary elementwise kernel that writes x (a model's
// order), on the sm90 weight layout, fp16 x int4, G = 128, with zero points. Two probes after the elementwise kernel
// place the dependent launch's cost there: the ordinary launch with the dependent one's shared memory, and a copy of
// the kernel without the dependent start launched as a dependent. Outputs of the two launches are compared bit for
// bit (docs/perf-notes/2026-11-28-sm80-small-tiles-as-dependents.md has the tables this printed).
//
// Build (nvcc and the nvidia-cutlass wheel's headers; no GPU needed) and run on the device, from the repository root:
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -I cpp -I $CUTLASS_INCLUDE \
//       tools/sm80_dependent_start_ab.cu cpp/mixgemm/core/device_info.cu -o /tmp/sm80_dependent_start_ab
//   /tmp/sm80_dependent_start_ab 8192x8192:16:16:k4s 2048x8192:32:32:sk132 4096x4096:32:32:k4p
// A cell is KxN:M:tile_m:split, split one of none, k<n>s (serial), k<n>p (parallel), sk<n> (stream-K blocks);
// tile_m 16 (16 x 128) or 32 (32 x 128), 4 stages. (The parallel split: the library launches its GEMM and its
// reduction kernel as dependents, the ordinary column both ordinarily.)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ab_device_buffers.cuh"
#include "mixgemm/sm80/launch.cuh"

namespace {

using namespace mixgemm;
using ab_device::check;
using ab_device::kGroup;
using ab_device::kRotatedBytes;
using ab_device::upload;
constexpr int kCalls = 64;    // calls per graph, as mixgemm.bench.timing
constexpr int kReplays = 7;   // graph replays per sample: the median is the sample
constexpr int kRounds = 5;    // samples per variant, interleaved

// x = h + r, an ordinary launch: the kernel before a projection in a decoder layer.
__global__ void elementwise(const __half* h, const __half* r, __half* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __hadd(h[i], r[i]);
}

struct Cell {
  int K, N, M, tile_m;
  Split split;
};

bool parse(const char* text, Cell& c) {
  char mode[32] = {0};
  if (sscanf(text, "%dx%d:%d:%d:%31s", &c.K, &c.N, &c.M, &c.tile_m, mode) != 5) return false;
  int n = 0;
  if (!strcmp(mode, "none")) c.split = {1, SplitKMode::kNone};
  else if (sscanf(mode, "sk%d", &n) == 1) c.split = {n, SplitKMode::kStreamK};
  else if (sscanf(mode, "k%ds", &n) == 1 && mode[strlen(mode) - 1] == 's') c.split = {n, SplitKMode::kSerial};
  else if (sscanf(mode, "k%dp", &n) == 1 && mode[strlen(mode) - 1] == 'p') c.split = {n, SplitKMode::kParallel};
  else return false;
  return c.tile_m == 16 || c.tile_m == 32;
}

template <int TileM>
using Loop = sm80::threadblock::Mainloop<__half, 4, WeightLayout::kSm90, TileM, 128, TileM, 32, 4>;

// The same main loop as a distinct type whose kernel has no dependent start (no prefetch, no griddepcontrol): the
// launch's own cost, launched with the attribute after an ordinary kernel (which never releases it early, so nothing
// overlaps; back to back it would race with the GEMM before and is not run).
template <int TileM>
struct PlainLoop : Loop<TileM> {};

}  // namespace
namespace mixgemm::sm80::kernel {
template <>
inline constexpr bool kStartsAsDependent<PlainLoop<16>> = false;
template <>
inline constexpr bool kStartsAsDependent<PlainLoop<32>> = false;
}  // namespace mixgemm::sm80::kernel
namespace {

template <int TileM, typename Schedule>
struct Kernel {
  using Loop = ::Loop<TileM>;
  static WorkspaceSize workspace(const GemmArgs& a) {
    return Schedule::workspace(GemmShape{a.M, a.N, a.K, a.group_size}, Split{a.split_k, a.mode}, TileM, 128);
  }
  static void library(const GemmArgs& a, cudaStream_t s) {
    sm80::launch_gemm<__half, 4, WeightLayout::kSm90, TileM, 128, TileM, 32, 4, Schedule>(a, s);
  }
  static void ordinary(const GemmArgs& a, cudaStream_t s) {
    auto* fn = sm80::kernel::gemm_mixed_kernel<Loop, Schedule>;
    sm80::kernel::KernelParams<Schedule> params{
        {a.A, a.B, a.scales, a.offsets, a.bias, a.D, a.M, a.N, a.K, a.group_size},
        {a.workspace, a.semaphores},
        Schedule::params(a, TileM, 128)};
    fn<<<Schedule::grid(a, params.schedule, TileM, 128), Loop::kThreads, Loop::kSharedBytes, s>>>(params);
    check(cudaGetLastError(), "ordinary launch");
    Schedule::template after_kernel<__half>(a, s, /*dependent=*/false);
  }
  // Probes of the launch's cost after an ordinary kernel: the library's kernel launched ordinarily with the shared
  // memory of its dependent launch; and the kernel without a dependent start launched as a dependent.
  static sm80::kernel::KernelParams<Schedule> params_of(const GemmArgs& a) {
    return {{a.A, a.B, a.scales, a.offsets, a.bias, a.D, a.M, a.N, a.K, a.group_size},
            {a.workspace, a.semaphores},
            Schedule::params(a, TileM, 128)};
  }
  static int capped_shared(const dim3& grid, void* fn) {
    const DeviceInfo& d = current_device_info();
    return sm80::dependent_shared_bytes(int64_t(grid.x) * grid.y * grid.z, Loop::kSharedBytes,
                                        sm80::static_shared_bytes(fn), d);
  }
  static void ordinary_capped(const GemmArgs& a, cudaStream_t s) {
    auto* fn = sm80::kernel::gemm_mixed_kernel<Loop, Schedule>;
    const auto params = params_of(a);
    const dim3 grid = Schedule::grid(a, params.schedule, TileM, 128);
    fn<<<grid, Loop::kThreads, capped_shared(grid, reinterpret_cast<void*>(fn)), s>>>(params);
    check(cudaGetLastError(), "ordinary capped launch");
  }
  static void dependent_plain(const GemmArgs& a, cudaStream_t s) {
    auto* fn = sm80::kernel::gemm_mixed_kernel<PlainLoop<TileM>, Schedule>;
    static bool opted = [&] {
      check(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 current_device_info().shared_per_block_optin - sm80::static_shared_bytes(fn)),
            "opt in");
      return true;
    }();
    (void)opted;
    const auto params = params_of(a);
    const dim3 grid = Schedule::grid(a, params.schedule, TileM, 128);
    launch_dependent<sm80::kernel::gemm_mixed_kernel<PlainLoop<TileM>, Schedule>>(
        grid, dim3(Loop::kThreads), capped_shared(grid, reinterpret_cast<void*>(fn)), s, "dependent plain", params);
  }
};

using Launch = void (*)(const GemmArgs&, cudaStream_t);
struct Launches {
  Launch library, ordinary, ordinary_capped, dependent_plain;
  WorkspaceSize (*workspace)(const GemmArgs&);
};

template <int TileM, typename Schedule>
Launches launches_of() {
  using K = Kernel<TileM, Schedule>;
  return {K::library, K::ordinary, K::ordinary_capped, K::dependent_plain, K::workspace};
}

template <int TileM>
Launches launches_for(SplitKMode mode) {
  return mode == SplitKMode::kStreamK ? launches_of<TileM, sm80::kernel::StreamK>()
                                      : launches_of<TileM, sm80::kernel::DataParallel>();
}

// Microseconds per call of one graph of kCalls calls (each on the next weight copy, `before` ahead of each when
// given), median of kReplays replays.
float time_graph(cudaStream_t s, const std::function<void(int)>& call) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < kCalls; ++i) call(i);
  check(cudaStreamEndCapture(s, &graph), "capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  check(cudaGraphLaunch(exec, s), "warm-up");
  std::vector<float> us;
  for (int r = 0; r < kReplays; ++r) {
    check(cudaEventRecord(start, s), "event");
    check(cudaGraphLaunch(exec, s), "replay");
    check(cudaEventRecord(stop, s), "event");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    us.push_back(1000.f * ms / kCalls);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(us.begin(), us.begin() + kReplays / 2, us.end());
  return us[kReplays / 2];
}

float median(std::vector<float> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

void run_cell(const Cell& c) {
  std::mt19937 rng(c.K * 31 + c.N * 7 + c.M);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<uint32_t> codes(size_t(c.K) * c.N / 8);  // random codes: any layout's bytes
  for (auto& w : codes) w = rng();
  std::vector<__half> x(size_t(c.M) * c.K), scales(size_t(c.K / kGroup) * c.N), offsets(scales.size());
  for (auto& v : x) v = __float2half(uniform(rng));
  for (auto& v : scales) v = __float2half(0.01f + 0.01f * std::abs(uniform(rng)));
  for (auto& v : offsets) v = __float2half(0.05f * uniform(rng));
  const size_t weight_bytes = codes.size() * 4;
  const size_t copies = std::max<size_t>(2, kRotatedBytes / weight_bytes);
  uint32_t* w = upload(codes, copies);
  __half *h = upload(x), *r = upload(x), *xs = upload(x), *sc = upload(scales), *off = upload(offsets);
  __half *y_lib, *y_ord;
  check(cudaMalloc(&y_lib, size_t(c.M) * c.N * 2), "y");
  check(cudaMalloc(&y_ord, size_t(c.M) * c.N * 2), "y");

  GemmArgs a;
  a.A = xs, a.B = reinterpret_cast<const int32_t*>(w), a.scales = sc, a.offsets = off, a.D = y_lib;
  a.M = c.M, a.N = c.N, a.K = c.K, a.group_size = kGroup, a.split_k = c.split.split_k, a.mode = c.split.mode;
  const Launches L = c.tile_m == 16 ? launches_for<16>(c.split.mode) : launches_for<32>(c.split.mode);
  const WorkspaceSize need = L.workspace(a);
  float* workspace = nullptr;
  int32_t* semaphores = nullptr;
  if (need.bytes) check(cudaMalloc(&workspace, need.bytes), "workspace");
  if (need.semaphores) {
    check(cudaMalloc(&semaphores, need.semaphores * 4), "semaphores");
    check(cudaMemset(semaphores, 0, need.semaphores * 4), "semaphores");
  }
  a.workspace = workspace, a.semaphores = semaphores;

  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  const int n = c.M * c.K;
  auto gemm = [&](Launch launch, __half* y, int i) {
    GemmArgs call = a;
    call.B = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(w) + (i % copies) * weight_bytes);
    call.D = y;
    launch(call, s);
  };
  auto before = [&] { elementwise<<<(n + 255) / 256, 256, 0, s>>>(h, r, xs, n); };

  // Bit-equality: each launch after a poisoned output, on copy 1.
  check(cudaMemset(y_lib, 0xff, size_t(c.M) * c.N * 2), "poison");
  check(cudaMemset(y_ord, 0x7f, size_t(c.M) * c.N * 2), "poison");
  gemm(L.library, y_lib, 1);
  gemm(L.ordinary, y_ord, 1);
  check(cudaStreamSynchronize(s), "sync");
  std::vector<uint16_t> a_out(size_t(c.M) * c.N), b_out(a_out.size());
  check(cudaMemcpy(a_out.data(), y_lib, a_out.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  check(cudaMemcpy(b_out.data(), y_ord, b_out.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  size_t differ = 0;
  for (size_t i = 0; i < a_out.size(); ++i) differ += a_out[i] != b_out[i];

  // Rounds: the timings in an order rotated each round (the two probes after the elementwise kernel only; the
  // parallel split's probes would leave out its reduction, and are not run).
  const bool probes = c.split.mode != SplitKMode::kParallel;
  constexpr int kTimings = 7;
  std::vector<float> t[kTimings];
  for (int round = 0; round < kRounds; ++round) {
    for (int k = 0; k < kTimings; ++k) {
      const int v = (k + round) % kTimings;
      if (v == 0) t[0].push_back(time_graph(s, [&](int i) { gemm(L.library, y_lib, i); }));
      if (v == 1) t[1].push_back(time_graph(s, [&](int i) { gemm(L.ordinary, y_ord, i); }));
      if (v == 2) t[2].push_back(time_graph(s, [&](int i) { before(); gemm(L.library, y_lib, i); }));
      if (v == 3) t[3].push_back(time_graph(s, [&](int i) { before(); gemm(L.ordinary, y_ord, i); }));
      if (v == 4) t[4].push_back(time_graph(s, [&](int) { before(); }));
      if (v == 5 && probes) t[5].push_back(time_graph(s, [&](int i) { before(); gemm(L.ordinary_capped, y_ord, i); }));
      if (v == 6 && probes) t[6].push_back(time_graph(s, [&](int i) { before(); gemm(L.dependent_plain, y_ord, i); }));
    }
  }
  const float lib = median(t[0]), ord = median(t[1]), elem = median(t[4]);
  const float lib_after = median(t[2]) - elem, ord_after = median(t[3]) - elem;
  const float capped_after = probes ? median(t[5]) - elem : 0, plain_after = probes ? median(t[6]) - elem : 0;
  const char* mode = c.split.mode == SplitKMode::kStreamK ? "sk"
                     : c.split.mode == SplitKMode::kSerial ? "s"
                     : c.split.mode == SplitKMode::kParallel ? "p" : "";
  printf("%5dx%-5d M=%-3d %dx128 %s%-3d | back to back: dependent %7.2f ordinary %7.2f ratio %.3f | after elementwise: "
         "dependent %7.2f ordinary %7.2f ratio %.3f | probes after: ordinary capped %7.2f, dependent without "
         "prologue %7.2f | outputs differ in %zu\n",
         c.K, c.N, c.M, c.tile_m, mode, c.split.split_k, lib, ord, lib / ord, lib_after, ord_after,
         lib_after / ord_after, capped_after, plain_after, differ);
  fflush(stdout);
  cudaStreamDestroy(s);
  for (void* p : {static_cast<void*>(w), static_cast<void*>(h), static_cast<void*>(r), static_cast<void*>(xs),
                  static_cast<void*>(sc), static_cast<void*>(off), static_cast<void*>(y_lib),
                  static_cast<void*>(y_ord), static_cast<void*>(workspace), static_cast<void*>(semaphores)})
    if (p) cudaFree(p);
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "device");
  printf("%s, %d SMs; %d calls a graph, median of %d replays, median of %d interleaved rounds\n", prop.name,
         prop.multiProcessorCount, kCalls, kReplays, kRounds);
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, sm80::kernel::gemm_mixed_kernel<Loop<16>, sm80::kernel::DataParallel>),
        "attributes");
  printf("16 x 128 kernel: PTX %d, binary %d; launched as a dependent: %s\n", attributes.ptxVersion,
         attributes.binaryVersion,
         carries_dependent_wait<sm80::kernel::gemm_mixed_kernel<Loop<16>, sm80::kernel::DataParallel>>() ? "yes" : "no");
  for (int i = 1; i < argc; ++i) {
    Cell c;
    if (!parse(argv[i], c)) {
      fprintf(stderr, "bad cell %s (KxN:M:tile_m:split)\n", argv[i]);
      return 1;
    }
    run_cell(c);
  }
  return 0;
}
