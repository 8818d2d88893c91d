// Host API of the decode path (batched GEMV for M <= 16, gemv_kernel.cuh): compiled configs, workspace,
// rule checks and dispatch. Arguments travel in the sm80 path's GemmArgs: the decode path reads the packed
// weights, scales and offsets of either layout (GemmArgs::layout), so one prepacked weight serves it and
// the GEMM path of its layout.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "mixgemm/gemm/device/gemm_runner.h"
#include "mixgemm/gemm/gemm_args.h"

namespace mixgemm::gemv {

// A compiled decode kernel: up to 8 * m_tiles rows of x, `warps` warps per block over one 64-column strip.
struct GemvConfig {
  int m_tiles;
  int warps;
  bool operator==(const GemvConfig& o) const { return m_tiles == o.m_tiles && warps == o.warps; }
  int max_rows() const { return 8 * m_tiles; }
  std::string name() const { return "gemv_m" + std::to_string(max_rows()) + "_w" + std::to_string(warps); }
};

std::vector<GemvConfig> compiled_configs(gemm::ActType act, int bits);

// split_k > 1: fp32 partials [split_k, M, N] and one semaphore per 64-column strip (zero on first use;
// every call leaves them zero).
gemm::WorkspaceSize workspace_size(int M, int N, int split_k);

// Throws std::invalid_argument naming the first rule `args` breaks. split_k > 1 takes mode kSerial (the
// last split reduces in-kernel); the decode path has no parallel mode.
void can_implement(const GemvConfig& config, const gemm::GemmArgs& args);

void run_gemv(const GemvConfig& config, const gemm::GemmArgs& args, cudaStream_t stream);

}  // namespace mixgemm::gemv
