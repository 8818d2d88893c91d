// One launch through a CUTLASS 3.x device adapter (GemmUniversalAdapter) with the core's error rule: initialize
// (converts the arguments, sets the kernel's shared-memory limit, prepares the workspace), run, and a failing
// status at either step thrown as std::runtime_error naming the caller. The sm90 path and the MoE sm90 form
// launch through it.
//
// A programmatic dependent launch lets the grid start while the kernel before it on the stream finishes: the
// kernels of the sm90 target are compiled with CUTLASS_ENABLE_GDC_FOR_SM90 (CMakeLists.txt), so each producer
// warp executes griddepcontrol.wait before its first global load and each consumer lets the next grid launch
// once its last tile's mainloop is done; their consumers touch global memory (split flags, partials, bias, y)
// only after consuming what those producers loaded. Launched without the attribute (the MoE sm90 form), the
// wait is a no-op, and the release only lets a following dependent grid launch early; that grid waits for
// this one all the same.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cutlass/cutlass.h"
#include "mixgemm/core/check.h"

namespace mixgemm {

enum class Launch { kOrdinary, kProgrammaticDependent };

template <class Gemm>
void initialize_and_run(const typename Gemm::Arguments& arguments, void* workspace, cudaStream_t stream,
                        const char* what, Launch launch = Launch::kOrdinary) {
  Gemm gemm;
  cutlass::Status status = gemm.initialize(arguments, workspace, stream);
  if (status != cutlass::Status::kSuccess)
    throw std::runtime_error(std::string(what) + ": kernel initialization failed: " +
                             cutlass::cutlassGetStatusString(status));
  status = gemm.run(stream, /*cuda_adapter=*/nullptr, launch == Launch::kProgrammaticDependent);
  check_launch(what);
  if (status != cutlass::Status::kSuccess)
    throw std::runtime_error(std::string(what) + ": launch failed: " + cutlass::cutlassGetStatusString(status));
}

}  // namespace mixgemm
