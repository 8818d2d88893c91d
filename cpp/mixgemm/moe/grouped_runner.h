// The grouped GEMM's host API (mixture-of-experts on the sm80 kernel's grouped schedule and the decode GEMV's
// grouped form, over weights of either layout; the sm90 form is moe/sm90/): its compiled
// configs and one checked launch. cpp/bindings/module.cpp binds it as _C.moe.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/moe/grouped_args.h"
#include "mixgemm/sm80/config.h"

namespace mixgemm::moe {

// What the epilogue writes (a registry specialization: every tile is compiled with both).
enum class Epilogue : int {
  kPlain = 0,  // the products (x slot weight)
  kGated = 1,  // SiLU(gate) * up of column pairs interleaved by prepack: N / 2 columns
};

// The names of every config compiled for `key` (either layout, scale_offset keys): the decode form's GEMV configs
// ("decode_m8_w4": blocks of 8 positions) and the sm80 tiles ("16x128x64_w16x32x64_s4": blocks of tile_m).
std::vector<std::string> compiled_configs(const KernelKey& key);

// Checks the call against the grouped GEMM's rules (the sm80 or decode path's shape rule, the epilogue's, the
// addresses'), each broken one named in a std::invalid_argument, then launches the config named on `stream`.
void grouped_gemm(const std::string& config_name, const KernelKey& key, Epilogue epilogue, const GroupedArgs& args,
                  cudaStream_t stream);

}  // namespace mixgemm::moe
