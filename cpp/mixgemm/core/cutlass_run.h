// One launch through a CUTLASS 3.x device adapter (GemmUniversalAdapter) with the core's error rule: initialize
// (converts the arguments, sets the kernel's shared-memory limit, prepares the workspace), run, and a failing
// status at either step thrown as std::runtime_error naming the caller. The sm90 path and the MoE sm90 form
// launch through it.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cutlass/cutlass.h"
#include "mixgemm/core/check.h"

namespace mixgemm {

template <class Gemm>
void initialize_and_run(const typename Gemm::Arguments& arguments, void* workspace, cudaStream_t stream,
                        const char* what) {
  Gemm gemm;
  cutlass::Status status = gemm.initialize(arguments, workspace, stream);
  if (status != cutlass::Status::kSuccess)
    throw std::runtime_error(std::string(what) + ": kernel initialization failed: " +
                             cutlass::cutlassGetStatusString(status));
  status = gemm.run(stream);
  check_launch(what);
  if (status != cutlass::Status::kSuccess)
    throw std::runtime_error(std::string(what) + ": launch failed: " + cutlass::cutlassGetStatusString(status));
}

}  // namespace mixgemm
