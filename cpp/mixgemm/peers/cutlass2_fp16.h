// Host entry point of the cutlass2_fp16 peer: a CUTLASS 2.x dense fp16 GEMM that the profiler times next
// to ours (issue 10). It is a yardstick, not a path of the library: nothing in mixgemm dispatches to it.
// Host-only on purpose (no CUTLASS include), so the bindings compile without CUTLASS's headers.
#pragma once

#include <cuda_runtime.h>

namespace mixgemm::peers {

// D[M, N] = A[M, K] @ B[K, N], fp16 operands and output, fp32 accumulation, on `stream`.
//
// All pointers are device pointers to dense row-major fp16 matrices (B is the weight as torch's
// `x @ w` holds it, [K, N]), each 16-byte aligned: the kernel reads and writes 8 halves per access.
// Rules (std::invalid_argument, messages "cutlass2_fp16: ..."): M >= 1; N >= 8 and K >= 8, both
// multiples of 8; non-null, 16-byte aligned pointers. A CUTLASS status other than success (a problem the
// kernel rejects, a GPU without the shared memory its 3-stage 128x256x64 tile needs, a failed launch)
// throws std::runtime_error naming the step and CUTLASS's description.
void cutlass2_fp16_gemm(const void* A, const void* B, void* D, int M, int N, int K, cudaStream_t stream);

}  // namespace mixgemm::peers
