// Host side of the vLLM-design AWQ baseline: argument rules, tile choice, launch.
#include "mixgemm/peers/awq_gemm_baseline.h"

#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

#include "mixgemm/peers/awq_gemm_baseline_kernel.cuh"
#include "mixgemm/core/check.h"

namespace mixgemm::peers {

template __global__ void awq_gemm_m16nXk32_kernel<64>(const half*, const uint32_t*, const half*,
                                                      const uint32_t*, half*, int, int, int, int,
                                                      int);
template __global__ void awq_gemm_m16nXk32_kernel<128>(const half*, const uint32_t*, const half*,
                                                       const uint32_t*, half*, int, int, int, int,
                                                       int);

namespace {

template <int N_TILE>
void launch(const void* x, const int32_t* qweight, const void* scales, const int32_t* qzeros,
            void* partials, int M, int N, int K, int group_size, int split_k_iters,
            cudaStream_t stream) {
  // Split index fastest, then N tile, then M tile (see the kernel). A 1-D grid avoids the 65535
  // limit of gridDim.y / gridDim.z for large M or many splits.
  const long long blocks = static_cast<long long>(split_k_iters) *
                           ceil_div(M, awq_detail::kTileM) * (N / N_TILE);
  require(blocks <= INT_MAX,
          "awq_gemm: split_k_iters * ceil(M / 16) * (N / N_TILE) must fit a 1-D grid "
          "(at most 2^31 - 1 blocks)");
  awq_gemm_m16nXk32_kernel<N_TILE><<<static_cast<unsigned>(blocks), awq_detail::kThreads, 0,
                                     stream>>>(
      static_cast<const half*>(x), reinterpret_cast<const uint32_t*>(qweight),
      static_cast<const half*>(scales), reinterpret_cast<const uint32_t*>(qzeros),
      static_cast<half*>(partials), M, N, K, group_size, split_k_iters);
  check_launch("awq_gemm_m16nXk32");
}

}  // namespace

void awq_gemm(const void* x, const int32_t* qweight, const void* scales, const int32_t* qzeros,
              void* partials, int M, int N, int K, int group_size, int split_k_iters,
              cudaStream_t stream) {
  require(M >= 0, "awq_gemm: M (rows of x) must be >= 0");
  require(N >= 64 && N % 64 == 0, "awq_gemm: N (output columns) must be a positive multiple of 64");
  require(K >= 32 && K % 32 == 0, "awq_gemm: K (reduction size) must be a positive multiple of 32");
  require(group_size >= 32 && group_size % 32 == 0,
          "awq_gemm: group_size must be a positive multiple of 32");
  require(K % group_size == 0, "awq_gemm: K must be a multiple of group_size");
  require(split_k_iters >= 1, "awq_gemm: split_k_iters must be >= 1");
  if (M == 0) return;
  // x and scales are read 16 bytes at a time, partials written 4 bytes at a time; a misaligned
  // access would be a sticky CUDA error, so reject it here instead.
  require(aligned(x, 16), "awq_gemm: x must be 16-byte aligned");
  require(aligned(scales, 16), "awq_gemm: scales must be 16-byte aligned");
  require(aligned(qweight, 4) && aligned(qzeros, 4),
          "awq_gemm: qweight and qzeros must be 4-byte aligned");
  require(aligned(partials, 4), "awq_gemm: partials must be 4-byte aligned");
  require_cuda_device();

  if (N % 128 == 0)
    launch<128>(x, qweight, scales, qzeros, partials, M, N, K, group_size, split_k_iters, stream);
  else
    launch<64>(x, qweight, scales, qzeros, partials, M, N, K, group_size, split_k_iters, stream);
}

}  // namespace mixgemm::peers
