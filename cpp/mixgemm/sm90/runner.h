// The sm90 path's host API (CUTLASS 3.x warp-specialized wgmma + TMA mixed-input GEMM, sm90-layout weights,
// sm_90a only): its compiled configs, rules and prepared launch. Built only when 90a is in the architecture
// list; unavailable.cpp stands in otherwise (no configs, prepare throws).
#pragma once

#include <vector>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/core/prepared_launch.h"
#include "mixgemm/core/problem.h"
#include "mixgemm/sm90/sm90_args.h"

namespace mixgemm::sm90 {

// Whether this build holds the sm90 path at all.
bool available();

// Every config compiled for `key` (a kScale key lists the scale-only kernels, a kScaleOffset key the ones
// with folded zero points).
std::vector<Config> compiled_configs(const KernelKey& key);

// Throws std::invalid_argument naming the first rule broken: the sm90 path's shape rules (N in the config's
// weight tiles, K in 64-deep k-tiles, group_size K or a multiple of 64 dividing K), the split (stream-K
// configs only, serial, whole k-tiles per split) and whether the config is compiled for the key.
void can_implement(const Config& config, const KernelKey& key, const GemmShape& shape, const Split& split);

// can_implement; then, on the current GPU (compute capability 9.0, else std::runtime_error), the stream-K
// scratch sized for its SM count and the launch of the kernel compiled for (config, key).
PreparedLaunch prepare(const Config& config, const KernelKey& key, const GemmShape& shape, const Split& split);

}  // namespace mixgemm::sm90
