// Host side of the standalone dequantize kernel: rule checks, vector width choice, launch.
#include "mixgemm/dequant/awq_dequantize.h"

#include "mixgemm/common/check.h"
#include "mixgemm/dequant/awq_dequantize_kernel.cuh"

namespace mixgemm::dequant {
namespace {

constexpr int kThreadsPerBlock = 256;

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, int Words>
void launch(const int32_t* qweight, const void* scales, const int32_t* qzeros, void* out, int K, int N,
            int group_size, cudaStream_t stream) {
  const int64_t threads = static_cast<int64_t>(K) * (N / 8 / Words);
  const int64_t blocks = (threads + kThreadsPerBlock - 1) / kThreadsPerBlock;
  require(blocks <= 0x7fffffff, "awq_dequantize: K * N is too large for one launch");
  awq_dequantize_kernel<T, Words><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
      qweight, static_cast<const T*>(scales), qzeros, static_cast<T*>(out), K, N, group_size);
  check_launch("awq_dequantize_kernel");
}

template <typename T>
void dispatch_width(const int32_t* qweight, const void* scales, const int32_t* qzeros, void* out, int K,
                    int N, int group_size, cudaStream_t stream) {
  // The widest vector that divides a row of packed words keeps every access 16 bytes where possible.
  const int words_per_row = N / 8;
  if (words_per_row % 4 == 0) {
    launch<T, 4>(qweight, scales, qzeros, out, K, N, group_size, stream);
  } else if (words_per_row % 2 == 0) {
    launch<T, 2>(qweight, scales, qzeros, out, K, N, group_size, stream);
  } else {
    launch<T, 1>(qweight, scales, qzeros, out, K, N, group_size, stream);
  }
}

}  // namespace

void awq_dequantize(const int32_t* qweight, const void* scales, const int32_t* qzeros, void* out, int K,
                    int N, int group_size, bool bf16, cudaStream_t stream) {
  require(K >= 1, "awq_dequantize: K (rows of qweight) must be >= 1");
  require(N >= 8 && N % 8 == 0, "awq_dequantize: N (columns of scales) must be a positive multiple of 8");
  require(group_size >= 1 && K % group_size == 0,
          "awq_dequantize: group_size must be >= 1 and divide K (rows of qweight)");
  require(aligned16(qweight) && aligned16(scales) && aligned16(qzeros) && aligned16(out),
          "awq_dequantize: qweight, scales, qzeros and out must be 16-byte aligned");
  require_cuda_device();
  if (bf16) {
    dispatch_width<__nv_bfloat16>(qweight, scales, qzeros, out, K, N, group_size, stream);
  } else {
    dispatch_width<__half>(qweight, scales, qzeros, out, K, N, group_size, stream);
  }
}

}  // namespace mixgemm::dequant
