// Host entry point of the read_floor peer: a kernel that does nothing but read device memory, timed by the
// profiler beside the decode path (issue 8). DESIGN.md section 7 puts the decode floor at bytes / 3.0
// TB/s; a launch that reads a few tens of MB never gets there (ramp-up, one memory latency, the launch
// itself), and this kernel measures, in the same run, how close a kernel that only reads the same bytes
// comes. It is a yardstick, not a path of the library.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mixgemm::peers {

// One buffer the kernel streams: `bytes` bytes from device pointer `data`.
struct ReadBuffer {
  const void* data;
  int64_t bytes;
};

// Reads every byte of up to kMaxReadBuffers buffers once (16-byte loads, no L1 allocation), on `stream`.
// On compute capability 9.0 and later it launches as a programmatic dependent, as the decode kernel and the sm80
// path's small tiles do, so all of them overlap the kernel before them on the stream alike.
//
// So that what it reads can be checked, and no load can be compiled away, each block writes the xor of
// the 32-bit words it read to folded[block]: the xor of folded's kReadFloorMaxBlocks entries is the xor of
// every word of every buffer, provided the caller zeroed the entries past the grid once (the grid is 8
// blocks per SM; a block's slot is rewritten on every call).
// Rules (std::invalid_argument, messages "read_floor: ..."): 1..kMaxReadBuffers buffers, each non-null,
// 16-byte aligned and of a positive multiple of 16 bytes; `folded` non-null; a GPU of at most
// kReadFloorMaxBlocks / 8 SMs.
constexpr int kMaxReadBuffers = 3;
constexpr int kReadFloorMaxBlocks = 2048;
void read_floor(const ReadBuffer* buffers, int count, uint32_t* folded, cudaStream_t stream);

}  // namespace mixgemm::peers
