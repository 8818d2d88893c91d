// Host side of the standalone dequantize kernel: rule checks and launch.
#include "mixgemm/dequant/awq_dequantize.h"

#include "mixgemm/core/check.h"
#include "mixgemm/dequant/awq_dequantize_kernel.cuh"

namespace mixgemm::dequant {
namespace {

template <typename T>
void launch(const int32_t* qweight, const void* scales, const int32_t* qzeros, void* out, int K, int N,
            int group_size, cudaStream_t stream) {
  // One warp per (kRowsPerThread-row block, kWordsPerWarpChunk-word chunk of a row).
  const int64_t row_blocks = (K + kRowsPerThread - 1) / kRowsPerThread;
  const int64_t chunks_per_row = (N / 8 + kWordsPerWarpChunk - 1) / kWordsPerWarpChunk;
  const int64_t threads = row_blocks * chunks_per_row * 32;
  const int64_t blocks = (threads + kThreadsPerBlock - 1) / kThreadsPerBlock;
  require(blocks <= 0x7fffffff, "awq_dequantize: K * N is too large for one launch");
  awq_dequantize_kernel<T><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
      qweight, static_cast<const T*>(scales), qzeros, static_cast<T*>(out), K, N, group_size);
  check_launch("awq_dequantize_kernel");
}

}  // namespace

void awq_dequantize(const int32_t* qweight, const void* scales, const int32_t* qzeros, void* out, int K,
                    int N, int group_size, ActType act, cudaStream_t stream) {
  require(K >= 1, "awq_dequantize: K (rows of qweight) must be >= 1");
  require(N >= 8 && N % 8 == 0, "awq_dequantize: N (columns of scales) must be a positive multiple of 8");
  require(group_size >= 1 && K % group_size == 0,
          "awq_dequantize: group_size must be >= 1 and divide K (rows of qweight)");
  require(aligned(qweight, 16) && aligned(scales, 16) && aligned(qzeros, 16) && aligned(out, 16),
          "awq_dequantize: qweight, scales, qzeros and out must be 16-byte aligned");
  require_cuda_device();
  if (act == ActType::kBFloat16) {
    launch<__nv_bfloat16>(qweight, scales, qzeros, out, K, N, group_size, stream);
  } else {
    launch<__half>(qweight, scales, qzeros, out, K, N, group_size, stream);
  }
}

}  // namespace mixgemm::dequant
