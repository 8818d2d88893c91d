// What the sm90 A/B tools share (tools/sm90_mainloop_ab.cu, tools/sm90_split_fixup_ab.cu): one cell's random
// operands (fp16 x int4, group 128), its call arguments and workspace, outputs poisoned before the first launch and
// compared bit for bit after it, and the timing of a block of back-to-back launches.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <vector>

#include "ab_device_buffers.cuh"
#include "mixgemm/sm90/launch.cuh"

namespace ab_cell {

// A kernel that does nothing: launched without a dependent-launch attribute, the next call starts after it ends.
__global__ void no_overlap() {}

using mixgemm::sm90::Args;
using mixgemm::sm90::Workspace;
using Half = cutlass::half_t;

using ab_device::check;
using ab_device::kGroup;
using ab_device::kRotatedBytes;
using ab_device::upload;

// A y [M, N] filled with `byte` (0xff and 0x7f are NaN patterns: a tile a kernel leaves unwritten shows).
inline Half* poisoned_output(int M, int N, int byte) {
  Half* y;
  check(cudaMalloc(&y, size_t(M) * N * sizeof(Half)), "cudaMalloc");
  check(cudaMemset(y, byte, size_t(M) * N * sizeof(Half)), "poison");
  return y;
}

// How many of two outputs' M x N values differ in any bit.
inline size_t differing(const Half* y, const Half* z, int M, int N) {
  std::vector<uint16_t> hy(size_t(M) * N), hz(hy.size());
  check(cudaMemcpy(hy.data(), y, hy.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  check(cudaMemcpy(hz.data(), z, hz.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  size_t count = 0;
  for (size_t i = 0; i < hy.size(); ++i) count += hy[i] != hz[i];
  return count;
}

// The largest difference between two outputs' M x N values, over the largest magnitude of the first: for two sums
// of the same partials in different orders, a few fp16 ulps.
inline float largest_difference(const Half* y, const Half* z, int M, int N) {
  std::vector<cutlass::half_t> hy(size_t(M) * N), hz(hy.size());
  check(cudaMemcpy(hy.data(), y, hy.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  check(cudaMemcpy(hz.data(), z, hz.size() * 2, cudaMemcpyDeviceToHost), "copy back");
  float diff = 0, largest = 0;
  for (size_t i = 0; i < hy.size(); ++i) {
    diff = std::max(diff, std::fabs(float(hy[i]) - float(hz[i])));
    largest = std::max(largest, std::fabs(float(hy[i])));
  }
  return largest > 0 ? diff / largest : diff;
}

// One K x N x M cell on the device: random int4 codes in enough copies to rotate the weight past L2 (any layout: the
// data is random), x, scales and offsets; a call's arguments and workspace; and blocks of about 10 ms of back-to-back
// launches, at least 10, to time.
class Cell {
 public:
  Cell(int K, int N, int M) : K_(K), N_(N), M_(M) {
    std::mt19937 rng(K * 31 + N * 7 + M);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    std::vector<uint32_t> codes(size_t(K) * N / 8);  // 8 int4 codes per word
    for (auto& w : codes) w = rng();
    std::vector<Half> x(size_t(M) * K), scales(size_t(K / kGroup) * N), offsets(scales.size());
    for (auto& v : x) v = Half(uniform(rng));
    for (auto& v : scales) v = Half(0.01f + 0.01f * std::abs(uniform(rng)));
    for (auto& v : offsets) v = Half(0.05f * uniform(rng));
    weight_bytes_ = codes.size() * 4;
    copies_ = std::max<size_t>(1, kRotatedBytes / weight_bytes_);
    w_ = upload(codes, copies_);
    x_ = upload(x), scales_ = upload(scales), offsets_ = upload(offsets);
    launches_ = std::clamp(int(10e-3 / (2.0 * M * N * K / 400e12 + 5e-6)), 10, 200);
    check(cudaEventCreate(&start_), "event");
    check(cudaEventCreate(&stop_), "event");
  }
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;
  ~Cell() {
    for (void* p : {static_cast<void*>(w_), static_cast<void*>(x_), static_cast<void*>(scales_),
                    static_cast<void*>(offsets_), workspace_, static_cast<void*>(locks_)})
      if (p) cudaFree(p);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  // The arguments of a call writing y (offsets only with `zeros`), without a workspace yet.
  Args args(Half* y, bool zeros, int split_k = 1) const {
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
    Args a;
    a.A = x_, a.B = w_, a.scales = scales_, a.offsets = zeros ? offsets_ : nullptr, a.D = y;
    a.M = M_, a.N = N_, a.K = K_, a.group_size = kGroup, a.device_sm_count = sms, a.split_k = split_k;
    return a;
  }

  // `a` with the cell's workspace and split flags, allocated once for the largest of `needs` (the flags zeroed: every
  // kernel leaves them zero again).
  void give_workspace(Args& a, std::initializer_list<Workspace> needs) {
    if (workspace_ == nullptr && locks_ == nullptr) {
      for (const Workspace& need : needs)
        workspace_bytes_ = std::max(workspace_bytes_, need.bytes), lock_count_ = std::max(lock_count_, need.locks);
      if (workspace_bytes_) check(cudaMalloc(&workspace_, workspace_bytes_), "workspace");
      if (lock_count_) {
        check(cudaMalloc(&locks_, lock_count_ * 4), "locks");
        check(cudaMemset(locks_, 0, lock_count_ * 4), "locks");
      }
    }
    a.workspace = workspace_, a.workspace_bytes = workspace_bytes_, a.locks = locks_, a.lock_count = lock_count_;
  }

  // Microseconds per call over one block of launches of `launch_one(args)`, each on the next weight copy.
  template <class Launch>
  float time_block(Args args, Launch launch_one) {
    // AB_BREAK=1: an empty kernel after each call, so no call's launch and prologue overlap the one before (the
    // library's dependent launch lets them start on the SMs its CTAs leave): the time of calls between other kernels.
    // AB_GRAPH=1: the block's calls captured in one CUDA graph and timed as one graph launch, as the benchmark
    // harness times (python/mixgemm/bench/timing.py). Needs a build with --default-stream per-thread: the calls go to
    // stream 0, which that makes the capturable per-thread stream.
    static const bool kBreak = getenv("AB_BREAK") && atoi(getenv("AB_BREAK")) != 0;
    static const bool kGraph = getenv("AB_GRAPH") && atoi(getenv("AB_GRAPH")) != 0;
    auto calls = [&] {
      for (int i = 0; i < launches_; ++i) {
        args.B = reinterpret_cast<const char*>(w_) + (i % copies_) * weight_bytes_;
        launch_one(args);
        if (kBreak) no_overlap<<<1, 32>>>();
      }
    };
    cudaGraphExec_t graph_exec = nullptr;
    if (kGraph) {
      cudaGraph_t graph;
      check(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal), "capture");
      calls();
      check(cudaStreamEndCapture(cudaStreamPerThread, &graph), "capture (AB_GRAPH needs --default-stream per-thread)");
      check(cudaGraphInstantiate(&graph_exec, graph, 0), "graph");
      check(cudaGraphDestroy(graph), "graph");
      check(cudaGraphLaunch(graph_exec, cudaStreamPerThread), "graph warm-up");
    }
    check(cudaEventRecord(start_), "event");
    if (kGraph)
      check(cudaGraphLaunch(graph_exec, cudaStreamPerThread), "graph");
    else
      calls();
    check(cudaEventRecord(stop_), "event");
    if (graph_exec) check(cudaGraphExecDestroy(graph_exec), "graph");
    check(cudaEventSynchronize(stop_), "event");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "event");
    return 1000.f * ms / launches_;
  }

 private:
  int K_, N_, M_;
  uint32_t* w_ = nullptr;
  size_t weight_bytes_ = 0, copies_ = 1;
  Half *x_ = nullptr, *scales_ = nullptr, *offsets_ = nullptr;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  int32_t* locks_ = nullptr;
  int64_t lock_count_ = 0;
  int launches_ = 10;
  cudaEvent_t start_, stop_;
};

}  // namespace ab_cell
