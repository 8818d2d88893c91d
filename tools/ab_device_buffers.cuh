// What every A/B tool needs on the device side (tools/sm90_ab_cell.cuh for the sm90 ones,
// tools/sm80_dependent_start_ab.cu): a CUDA error ends the run with its message, the bench protocol's group size and
// rotation past L2, and host vectors uploaded in as many copies as the rotation takes.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ab_device {

constexpr int kGroup = 128;
constexpr size_t kRotatedBytes = size_t(256) << 20;  // weight copies past the 50 MB L2, as the bench protocol

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

// `host` in `copies` back-to-back copies in one allocation.
template <class T>
T* upload(const std::vector<T>& host, size_t copies = 1) {
  T* dev;
  check(cudaMalloc(&dev, host.size() * sizeof(T) * copies), "cudaMalloc");
  for (size_t c = 0; c < copies; ++c)
    check(cudaMemcpy(dev + c * host.size(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copy");
  return dev;
}

}  // namespace ab_device
