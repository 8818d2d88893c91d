// The read_floor peer (issue 8): how long a kernel that only reads a decode problem's bytes takes, in the
// profiler's own run, beside the decode kernel that must read them and do its work too.
//
// Design, from an ignored probe on the H100 (docs/perf-notes/2026-11-24-decode-read-floor-arrival-fold.md): a
// grid-stride stream of 16-byte loads, 4 in flight per thread, 8 blocks of 256 threads per SM (128 KiB in
// flight per SM). Of the 54 grid x block x depth x launch-mode variants the probe timed, this one was the
// fastest on the three smallest DESIGN shapes; the two largest preferred 2 blocks of 1024 threads.
#include "mixgemm/peers/read_floor.h"

#include <cstdint>
#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/common/dependent_launch.h"
#include "mixgemm/core/device_info.h"
#include "mixgemm/common/streaming_loads.cuh"

namespace mixgemm::peers {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;
constexpr int kLoadsInFlight = 4;  // 16-byte loads per thread per step

struct Buffers {
  const uint4* data[kMaxReadBuffers];
  int64_t vectors[kMaxReadBuffers];  // 16-byte vectors per buffer (0: unused)
};

__global__ void __launch_bounds__(kThreads) read_floor_kernel(const Buffers buffers, uint32_t* folded) {
  // Launched as a programmatic dependent (as the decode kernel is): the grid starts while the previous
  // kernel drains, and waits for it before reading.
  release_dependents_then_wait();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  uint32_t word = 0;  // xor of every 32-bit word this thread reads
#pragma unroll
  for (int b = 0; b < kMaxReadBuffers; ++b) {
    const uint4* data = buffers.data[b];
    const int64_t n = buffers.vectors[b];
    int64_t i = first;
    for (; i + (kLoadsInFlight - 1) * stride < n; i += kLoadsInFlight * stride) {
      uint4 v[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) v[u] = load_streaming_v4(data + i + u * stride);
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) word ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride) {
      const uint4 v = load_streaming_v4(data + i);
      word ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  // The block's xor: a few shuffles and one store per block, next to the 64 KiB or more each block reads.
  __shared__ uint32_t warp_xor[kThreads / 32];
#pragma unroll
  for (int lanes = 16; lanes >= 1; lanes /= 2) word ^= __shfl_xor_sync(0xFFFFFFFFu, word, lanes);
  if (threadIdx.x % 32 == 0) warp_xor[threadIdx.x / 32] = word;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t block = 0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) block ^= warp_xor[w];
    folded[blockIdx.x] = block;
  }
}

}  // namespace

void read_floor(const ReadBuffer* buffers, int count, uint32_t* folded, cudaStream_t stream) {
  require(count >= 1 && count <= kMaxReadBuffers, [&] {
    return "read_floor: 1 to " + std::to_string(kMaxReadBuffers) + " buffers, got " + std::to_string(count);
  });
  Buffers args{};
  for (int b = 0; b < count; ++b) {
    const ReadBuffer& buffer = buffers[b];
    require(buffer.data != nullptr && aligned(buffer.data, 16) && buffer.bytes > 0 && buffer.bytes % 16 == 0, [&] {
      return "read_floor: buffer " + std::to_string(b) + " must be non-null, 16-byte aligned and a positive "
             "multiple of 16 bytes, got " + std::to_string(buffer.bytes) + " bytes";
    });
    args.data[b] = static_cast<const uint4*>(buffer.data);
    args.vectors[b] = buffer.bytes / 16;
  }
  require(folded != nullptr, "read_floor: folded (the blocks' xor, kReadFloorMaxBlocks words) must be non-null");
  require_cuda_device();
  const DeviceInfo& device = current_device_info();
  const int blocks = kBlocksPerSm * device.sm_count;
  require(blocks <= kReadFloorMaxBlocks, [&] {
    return "read_floor: " + std::to_string(device.sm_count) + " SMs need " + std::to_string(blocks) +
           " blocks, more than the " + std::to_string(kReadFloorMaxBlocks) + " entries of folded";
  });
  launch_kernel<read_floor_kernel>(true, dim3(blocks), dim3(kThreads), 0, stream, "read_floor_kernel", args, folded);
}

}  // namespace mixgemm::peers
