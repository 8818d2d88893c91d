// What launches need to know about the current CUDA device, read once per device (core/device_info.cu):
// the sm90 path sizes its persistent grid by the SM count and runs only on compute capability 9.0, and
// the decode path launches as a programmatic dependent from 9.0 on.
#pragma once

namespace mixgemm {

struct DeviceInfo {
  int major = 0;  // compute capability
  int minor = 0;
  int sm_count = 0;
};

// The facts of the device current on this thread (cudaGetDevice). Queried on a device's first use and
// cached: the launch paths ask on every call. Throws std::runtime_error on a CUDA error.
const DeviceInfo& current_device_info();

}  // namespace mixgemm
