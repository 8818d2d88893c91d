// The decode path's host API (a batched GEMV for M <= 16 on tensor cores, gemv_kernel.cuh, reading either
// weight layout): its compiled configs, rules and prepared launch. cpp/bindings/module.cpp binds it beside the
// other paths'.
#pragma once

#include <vector>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/core/prepared_launch.h"
#include "mixgemm/core/problem.h"
#include "mixgemm/decode/config.h"

namespace mixgemm::decode {

std::vector<DecodeConfig> compiled_configs(const KernelKey& key);

// Throws std::invalid_argument naming the first rule broken: M within the config's rows, the decode path's
// shape rules on the key's layout, the split (in-kernel serial reduction only), and whether the config is
// compiled for the key and the group size's fold.
void can_implement(const DecodeConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split);

// split_k > 1: fp32 partials [split_k, M, N] and one semaphore per 64-column strip.
WorkspaceSize workspace_size(const GemmShape& shape, const Split& split);

PreparedLaunch prepare(const DecodeConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split);

}  // namespace mixgemm::decode
