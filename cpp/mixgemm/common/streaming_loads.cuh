// Loads of data a kernel reads exactly once (the decode path's packed weights, layout/*.cuh; the
// read_floor peer's buffers): through the read-only path, without allocating in L1, since nothing re-reads
// them there.
#pragma once

#include <cstdint>

namespace mixgemm {

__device__ __forceinline__ uint4 load_streaming_v4(const void* address) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(address));
  return v;
}

__device__ __forceinline__ uint2 load_streaming_v2(const void* address) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(address));
  return v;
}

__device__ __forceinline__ uint32_t load_streaming_v1(const void* address) {
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];\n" : "=r"(v) : "l"(address));
  return v;
}

}  // namespace mixgemm
