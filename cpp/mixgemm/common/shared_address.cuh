// Shared-memory accesses by 32-bit shared-window address, for the sm80 path's main loop.
//
// Why not generic pointers: a generic pointer into shared memory is the CTA's window base plus an offset,
// and on sm_90 the compiler rebuilt that base inside the main loop (`S2R SR_CgaCtaId`, `LEA ... 0x18`,
// a `cvta` per cp.async) instead of keeping it live: about 10 instructions per k-tile, one of them a
// variable-latency S2R. With the window address computed once, every stage address is that register
// plus a per-lane offset (one add per k-tile) plus an immediate.
//
// The loads are `asm volatile`: without it the front end may move them across the __syncthreads() that
// publishes a stage (they have no memory operand it could see). ptxas still schedules them freely.
#pragma once

#include <cstdint>

namespace mixgemm {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// cp.async of 16 bytes, bypassing L1 (.cg). L2::128B asks L2 to fetch the whole 128-byte line: the
// neighbouring chunks are this threadblock's next copies. Every copy reads real data: the loaders point
// copies that fall outside the operand (rows past M, columns past N) at an in-bounds chunk instead of
// zero-filling them, since those values only reach accumulators that no epilogue stores. That keeps the
// main loop free of a predicate and a select per copy (tile_loader.cuh).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ uint4 load_shared_v4(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}

__device__ __forceinline__ uint2 load_shared_v2(uint32_t address) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(address));
  return v;
}

__device__ __forceinline__ uint32_t load_shared_u32(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(address));
  return v;
}

// ldmatrix of kMatrices 8 x 16-byte matrices (8 x 8 16-bit elements): lane 8 m + r gives the address of
// row r of matrix m. Register m of lane 4 g + t receives, from matrix m, elements 2 t and 2 t + 1 of row g;
// with kTrans, elements g of rows 2 t and 2 t + 1.
template <int kMatrices, bool kTrans = false>
__device__ __forceinline__ void ldmatrix(uint32_t (&regs)[kMatrices], uint32_t address) {
  static_assert(kMatrices == 1 || kMatrices == 2 || kMatrices == 4, "ldmatrix reads 1, 2 or 4 matrices");
  if constexpr (kMatrices == 4 && kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
                 : "r"(address));
  } else if constexpr (kMatrices == 4) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
                 : "r"(address));
  } else if constexpr (kMatrices == 2 && kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(regs[0]), "=r"(regs[1])
                 : "r"(address));
  } else if constexpr (kMatrices == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(regs[0]), "=r"(regs[1])
                 : "r"(address));
  } else if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(regs[0]) : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(regs[0]) : "r"(address));
  }
}

}  // namespace mixgemm
