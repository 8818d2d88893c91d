// Host API of the sm90 path (wgmma + TMA warp-specialized mixed-input GEMM on CUTLASS 3.x): the rules a
// call must meet, workspace sizing, and config -> compiled kernel dispatch. Built only when sm_90a is in
// the architecture list (sm90_unavailable.cpp stands in otherwise: no configs, and run() throws).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "mixgemm/sm90/sm90_args.h"

namespace mixgemm::sm90 {

struct CompiledKernel {
  Config config;
  Mode mode;
};

// Whether this build holds the sm90 path at all.
bool available();

// Every compiled (config, mode) for activation type `act` and `bits`-bit weights.
std::vector<CompiledKernel> compiled(ActType act, int bits);

// Throws std::invalid_argument naming the first rule `args` breaks for `config` (the mode is
// Mode::kScaleOffset when args.offsets is set, Mode::kScale otherwise). Rules: bits 4 or 8; M >= 1;
// N a positive multiple of config.tile_n; K a positive multiple of 64; group_size == K or a multiple of
// 64 dividing K; x, weight, scales, offsets, output and bias 16-byte aligned (TMA).
void can_implement(const Config& config, const Args& args);

// What a call needs besides its operands: stream-K's partials (bytes) and zeroed split flags (count);
// both 0 for the persistent scheduler.
Workspace workspace_size(const Config& config, const Args& args);

// can_implement, then launches D = A @ dequant(B) (+ bias) on `stream`. Throws std::runtime_error on
// CUDA errors, and when the current GPU is not compute capability 9.0 (sm_90a code runs nowhere else).
void run(const Config& config, const Args& args, cudaStream_t stream);

}  // namespace mixgemm::sm90
