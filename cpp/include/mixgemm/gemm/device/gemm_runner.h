// Device level: the host API of the mixed-input GEMM. Checks the rules (can_implement), sizes the
// workspace, and dispatches a TileConfig to its compiled instantiation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "mixgemm/gemm/gemm_args.h"

namespace mixgemm::gemm {

// Every compiled tile config for activation type `act`, `bits`-bit weights and weights in `layout` (the
// kernel set chosen at build time: the sm90 layout's is a subset, the tiles of small M).
std::vector<TileConfig> compiled_configs(ActType act, int bits, WeightLayout layout = WeightLayout::kSm80);

// Workspace a call needs: fp32 elements and int32 semaphores (serial split-K; they must be zero when
// first used, and every call leaves them zero).
struct WorkspaceSize {
  int64_t floats = 0;
  int64_t semaphores = 0;
};
WorkspaceSize workspace_size(const TileConfig& config, int M, int N, int split_k, SplitKMode mode);

// Throws std::invalid_argument naming the first rule `args` breaks for `config`.
void can_implement(const TileConfig& config, const GemmArgs& args);

// can_implement, then launches D = A @ dequant(B) (+ bias) on `stream` (plus the reduction kernel in
// parallel split-K mode). Throws std::runtime_error on CUDA errors.
void run_gemm(const TileConfig& config, const GemmArgs& args, cudaStream_t stream);

}  // namespace mixgemm::gemm
