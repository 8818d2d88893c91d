// What launches need to know about the current CUDA device, read once per device (core/device_info.cu):
// the sm90 path sizes its persistent grid by the SM count and runs only on compute capability 9.0; the decode
// path and the sm80 path's small tiles launch as programmatic dependents from 9.0 on, the latter sizing their
// shared memory by the SM's (sm80/launch.cuh).
#pragma once

namespace mixgemm {

struct DeviceInfo {
  int major = 0;  // compute capability
  int minor = 0;
  int sm_count = 0;
  int shared_per_sm = 0;              // bytes of shared memory an SM gives its blocks
  int shared_per_block_optin = 0;     // the most one block may ask for (with the kernel's opt-in)
  int reserved_shared_per_block = 0;  // what the system takes of the SM's shared memory for each block
};

// The facts of the device current on this thread (cudaGetDevice). Queried on a device's first use and
// cached: the launch paths ask on every call. Throws std::runtime_error on a CUDA error.
const DeviceInfo& current_device_info();

}  // namespace mixgemm
