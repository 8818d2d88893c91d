// A prepared launch: what Python's plan holds for one (path, config, kernel key, shape, split). The path's
// prepare() checks every rule that does not depend on the call's addresses, finds the compiled kernel and
// sizes its scratch once; a call then only checks its pointers (null, alignment) and launches the kernel it
// bound. pybind11 converts every argument of every call, so a call taking only addresses is also the
// cheapest to cross the binding (issue 9). Host-only header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/core/problem.h"

namespace mixgemm {

// The device addresses of one call (Python's tensor.data_ptr(), 0 for none).
struct CallAddresses {
  std::uintptr_t x, packed, scales, offsets, bias, out, workspace, semaphores;
};

class PreparedLaunch {
 public:
  using Run = std::function<void(const CallAddresses&, cudaStream_t)>;

  PreparedLaunch(std::string description, WorkspaceSize scratch, Run run)
      : description_(std::move(description)), scratch_(scratch), run_(std::move(run)) {}

  void operator()(const CallAddresses& addresses, cudaStream_t stream) const { run_(addresses, stream); }

  const std::string& description() const { return description_; }
  // What a call must pass as `workspace` (bytes, 16-byte aligned) and `semaphores` (int32 counters, zero).
  const WorkspaceSize& scratch() const { return scratch_; }

 private:
  std::string description_;
  WorkspaceSize scratch_;
  Run run_;
};

// A prepared launch's description (the Python object's repr), the same for every path: "sm80 <config> split_k=2
// fp16-int4-sm80-scale_offset M=16 N=4096 K=4096".
inline std::string describe_launch(const std::string& path, const std::string& config, const KernelKey& key,
                                   const GemmShape& shape, const Split& split) {
  return path + " " + config + " split_k=" + std::to_string(split.split_k) + " " + key.name() +
         " M=" + std::to_string(shape.M) + " N=" + std::to_string(shape.N) + " K=" + std::to_string(shape.K);
}

template <typename T>
T* address_of(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

}  // namespace mixgemm
