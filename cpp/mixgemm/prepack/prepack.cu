// Host launchers of the prepack layer (see mixgemm/prepack/prepack.h for the contract).
#include "mixgemm/prepack/prepack.h"

#include <climits>
#include <cstdint>
#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/prepack/prepack_awq.cuh"

namespace mixgemm::prepack {
namespace {

// Both kernels are pure streaming with no shared memory; 256 threads keeps plenty of warps in flight.
constexpr int kThreads = 256;

// "fn: what (got name=value)" messages without pulling a formatting library into the core.
std::string text(const char* value) { return value; }
std::string text(int64_t value) { return std::to_string(value); }

// "fn: rule (got name=value)". Built with std::to_string rather than iostreams (see core/check.h);
// prepack runs once per weight, so building it eagerly costs nothing that matters.
template <typename Value>
std::string message(const char* fn, const char* rule, const char* name, Value value) {
  return std::string("mixgemm::prepack::") + fn + ": " + rule + " (got " + name + "=" + text(value) + ")";
}

// Blocks needed for one thread per item; grid.x is limited to 2^31 - 1.
unsigned int grid_for(int64_t items, const char* fn) {
  const int64_t blocks = (items + kThreads - 1) / kThreads;
  require(blocks <= INT_MAX, message(fn, "the problem is too large for one launch", "thread blocks", blocks));
  return static_cast<unsigned int>(blocks);
}

bool ranges_overlap(const void* a, const void* b, int64_t bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a);
  const auto pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + static_cast<uintptr_t>(bytes) && pb < pa + static_cast<uintptr_t>(bytes);
}

}  // namespace

void awq_to_kernel_layout(const int32_t* awq_qweight, int32_t* packed, int K, int N, cudaStream_t stream) {
  const char* fn = "awq_to_kernel_layout";
  require(K > 0 && K % kBlockK == 0, message(fn, "K must be a positive multiple of 16", "K", K));
  require(N > 0 && N % kBlockN == 0, message(fn, "N must be a positive multiple of 64", "N", N));
  require(awq_qweight != nullptr, message(fn, "awq_qweight must be a device pointer", "awq_qweight", "nullptr"));
  require(packed != nullptr, message(fn, "packed must be a device pointer", "packed", "nullptr"));

  // Input and output are both K * N / 8 words. Every output word gathers from 4 rows of the input, so
  // the transform cannot run in place.
  const int64_t words = static_cast<int64_t>(K) * N / kAwqPack;
  require(!ranges_overlap(awq_qweight, packed, words * static_cast<int64_t>(sizeof(int32_t))),
          message(fn, "packed must not overlap awq_qweight (the transform is not in place)", "words", words));

  const unsigned int blocks = grid_for(words, fn);
  require_cuda_device();
  awq_to_kernel_layout_kernel<kThreads><<<blocks, kThreads, 0, stream>>>(awq_qweight, packed, K, N);
  check_launch("mixgemm::prepack::awq_to_kernel_layout_kernel");
}

void fold_awq_zeros(const int32_t* awq_qzeros, const void* scales, void* offsets, int groups, int N, ActType act,
                    cudaStream_t stream) {
  const char* fn = "fold_awq_zeros";
  require(groups > 0, message(fn, "groups (= K / group_size) must be positive", "groups", groups));
  require(N > 0 && N % kAwqPack == 0, message(fn, "N must be a positive multiple of 8 (AWQ packing)", "N", N));
  require(awq_qzeros != nullptr, message(fn, "awq_qzeros must be a device pointer", "awq_qzeros", "nullptr"));
  require(scales != nullptr, message(fn, "scales must be a device pointer", "scales", "nullptr"));
  require(offsets != nullptr, message(fn, "offsets must be a device pointer", "offsets", "nullptr"));

  const int64_t items = static_cast<int64_t>(groups) * N;
  const unsigned int blocks = grid_for(items, fn);
  require_cuda_device();
  if (act == ActType::kBFloat16) {
    fold_awq_zeros_kernel<__nv_bfloat16, kThreads><<<blocks, kThreads, 0, stream>>>(
        awq_qzeros, static_cast<const __nv_bfloat16*>(scales), static_cast<__nv_bfloat16*>(offsets), groups, N);
    check_launch("mixgemm::prepack::fold_awq_zeros_kernel<bf16>");
  } else {
    fold_awq_zeros_kernel<__half, kThreads><<<blocks, kThreads, 0, stream>>>(
        awq_qzeros, static_cast<const __half*>(scales), static_cast<__half*>(offsets), groups, N);
    check_launch("mixgemm::prepack::fold_awq_zeros_kernel<fp16>");
  }
}

}  // namespace mixgemm::prepack
