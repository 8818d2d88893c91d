// The sm80 path's host API (CUTLASS 2.x-style mma.sync GEMM, any M, either weight layout): its compiled
// configs, its rules and its prepared launch. cpp/bindings/module.cpp binds it beside the other paths'.
#pragma once

#include <vector>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/core/prepared_launch.h"
#include "mixgemm/core/problem.h"
#include "mixgemm/sm80/config.h"

namespace mixgemm::sm80 {

// Every tile config compiled for `key` (the build's kernel set: the sm90 layout's is the tiles of small M).
std::vector<TileConfig> compiled_configs(const KernelKey& key);

// Throws std::invalid_argument naming the first rule broken: the shape rules of the sm80 path on the key's
// layout (core/shape_rules.h), the split's, and whether the config is compiled for the key.
void can_implement(const TileConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split);

// The scratch a call needs: split-K's fp32 partials [split_k, M, N] (serial, parallel) or stream-K's slots,
// and the per-tile semaphores (serial, stream-K).
WorkspaceSize workspace_size(const TileConfig& config, const GemmShape& shape, const Split& split);

// can_implement, then the launch of the kernel compiled for (config, key, the split's schedule), bound with
// the shape and split. A call checks its pointers and launches D = A @ dequant(B) (+ bias) on its stream (and,
// for parallel split-K, the reduction kernel).
PreparedLaunch prepare(const TileConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split);

}  // namespace mixgemm::sm80
