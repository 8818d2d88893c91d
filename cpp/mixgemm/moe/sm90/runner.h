// The sm90 grouped form's host API (CUTLASS 3.x pointer-array mixed-input GEMM over sm90-layout experts, sm_90a
// only): its compiled configs, workspace size and one checked launch. Built only when 90a is among the
// architectures; unavailable.cpp stands in otherwise (no configs; calls throw).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/moe/sm90/grouped_args.h"

namespace mixgemm::moe::sm90 {

// Names of the configs compiled for `key` ("sm90_128x128x64_grouped"; sm90-layout, scale_offset keys only).
std::vector<std::string> compiled_configs(const KernelKey& key);

// The workspace bytes a call of `config_name` over `num_experts` experts needs on a GPU of `sm_count` SMs.
int64_t workspace_bytes(const std::string& config_name, const KernelKey& key, int num_experts, int sm_count);

// Checks the call (compiled config, the sm90 path's shape rule, addresses, workspace), each broken rule named in
// a std::invalid_argument, then launches on `stream`; the current GPU must be compute capability 9.0.
void grouped_gemm(const std::string& config_name, const KernelKey& key, const GroupedArgs& args,
                  cudaStream_t stream);

}  // namespace mixgemm::moe::sm90
