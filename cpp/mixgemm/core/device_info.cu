// The per-device cache behind core/device_info.h.
#include "mixgemm/core/device_info.h"

#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "mixgemm/core/check.h"

namespace mixgemm {

const DeviceInfo& current_device_info() {
  constexpr int kMaxDevices = 64;
  static std::array<DeviceInfo, kMaxDevices> cache{};
  static std::array<std::once_flag, kMaxDevices> filled;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  require(device >= 0 && device < kMaxDevices, "mixgemm: CUDA device index out of range (at most 64 devices)");
  DeviceInfo& info = cache[device];
  std::call_once(filled[device], [&] {
    check_cuda(cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device),
               "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&info.shared_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device),
               "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&info.shared_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
               "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&info.reserved_shared_per_block, cudaDevAttrReservedSharedMemoryPerBlock, device),
               "cudaDeviceGetAttribute");
  });
  return info;
}

}  // namespace mixgemm
