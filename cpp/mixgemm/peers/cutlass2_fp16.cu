// The cutlass2_fp16 peer: CUTLASS 2.x's GemmUniversal on a dense fp16 copy of the weight (issue 10, item 2).
//
// Why it exists: our sm80 path is an mma.sync kernel, and where compute bounds it (large M) the best it can
// do on any GPU is what a dense fp16 mma.sync GEMM of the same tile family does there: the int4 -> fp16
// conversion only adds work on top of the same tensor-core instructions. (At small M the weight's bytes
// bound both, and ours reads a quarter of them.) This is that GEMM: threadblock 128x256x64, warps 64x64x64,
// mma.sync m16n8k16, 3 cp.async stages, the family of our 128x256 sm80 tile, fp32 accumulation.
// docs/perf-notes/2026-11-23-sm80-tile-loader-warp-tiles.md states our throughput as a percentage of it per
// cell. On H100 (measured) it reaches about 515 TFLOP/s at M = 4096: the mma.sync ceiling there, well below wgmma's, which is what the sm90 path is
// for. It is fp16 only; a bf16 twin would double this file's compile time for a number we do not report.
//
// Compile time: not free. nvcc 13.0 on this file alone (-O3, 2-core machine) took about 22 s for sm_80,
// 20 s for sm_90a and 29 s for both (the default 80;90a build); the in-tree baseline's .cu takes 3.5 s.
// That much CPU time is added to every build; compiled in parallel with the generated kernels, its
// wall-clock share is smaller.
#include "mixgemm/peers/cutlass2_fp16.h"

#include <cstdint>
#include <string>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "mixgemm/core/check.h"

namespace mixgemm::peers {
namespace {

using Half = cutlass::half_t;
using Row = cutlass::layout::RowMajor;
// 8 halves = 16 bytes: one 128-bit access per thread for A, B and D.
constexpr int kAlignment = 8;

using Gemm = cutlass::gemm::device::GemmUniversal<
    Half, Row, Half, Row, Half, Row, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 256, 64>, cutlass::gemm::GemmShape<64, 64, 64>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<Half, kAlignment, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>, /*Stages=*/3, kAlignment, kAlignment>;

// Throws std::runtime_error naming the CUTLASS step that failed and CUTLASS's description of the status.
void check_status(cutlass::Status status, const char* step) {
  if (status != cutlass::Status::kSuccess)
    throw std::runtime_error(std::string("cutlass2_fp16: ") + step + " failed: " + cutlassGetStatusString(status));
}

}  // namespace

void cutlass2_fp16_gemm(const void* A, const void* B, void* D, int M, int N, int K, cudaStream_t stream) {
  const auto fn = [](const std::string& rule) { return "cutlass2_fp16: " + rule; };
  require(M >= 1, [&] { return fn("M (rows of A and D) must be >= 1, got " + std::to_string(M)); });
  require(N >= kAlignment && N % kAlignment == 0, [&] {
    return fn("N must be a positive multiple of 8 (16-byte rows of B and D), got " + std::to_string(N));
  });
  require(K >= kAlignment && K % kAlignment == 0, [&] {
    return fn("K must be a positive multiple of 8 (16-byte rows of A), got " + std::to_string(K));
  });
  require(A && B && D, [&] { return fn("A, B and D must be non-null device pointers"); });
  require(aligned(A, 16) && aligned(B, 16) && aligned(D, 16),
          [&] { return fn("A, B and D must be 16-byte aligned (128-bit accesses)"); });
  require_cuda_device();

  // D = 1 * A @ B + 0 * C. With beta = 0 the epilogue never reads C; D stands in for it.
  const typename Gemm::Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K}, /*batch_count=*/1,
                                      {1.0f, 0.0f}, A, B, D, D, /*batch strides*/ 0, 0, 0, 0,
                                      /*lda=*/K, /*ldb=*/N, /*ldc=*/N, /*ldd=*/N);
  check_status(Gemm::can_implement(args), "can_implement");
  // kGemm with one k-slice needs no semaphores; anything else would be a change of this file's contract.
  require(Gemm::get_workspace_size(args) == 0, [&] { return fn("unexpected workspace need for a kGemm call"); });

  Gemm gemm;
  check_status(gemm.initialize(args, /*workspace=*/nullptr, stream), "initialize");
  // run() reads and clears cudaGetLastError itself, reporting a failed launch as kErrorInternal.
  check_status(gemm.run(stream), "run (kernel launch)");
  check_launch("cutlass2_fp16_gemm");
}

}  // namespace mixgemm::peers
