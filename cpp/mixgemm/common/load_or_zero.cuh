// A 4-byte read-only load that only the lanes with `live` != 0 issue; the others get zero.
//
// Written as `live ? __ldg(p) : 0`, the compiler may branch around a run of such loads (it did for the
// decode kernel's second batch of x: 14 instructions of BSSY, BRA and BSYNC a loop iteration, divergent
// whenever some lanes of a warp hold rows past M). Here the predicate is an operand of the load itself: one
// instruction, no branch, and a dead lane neither issues the load nor waits for it.
#pragma once

#include <cstdint>

namespace mixgemm {

__device__ __forceinline__ uint32_t load_or_zero(int live, const void* address) {
  uint32_t v;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %2, 0;\n"
      "  mov.b32 %0, 0;\n"
      "  @p ld.global.nc.b32 %0, [%1];\n"
      "}\n"
      : "=r"(v)
      : "l"(address), "r"(live));
  return v;
}

}  // namespace mixgemm
