// Host side of the decode path: rule checks, workspace sizing, config -> instantiation dispatch.
#include "mixgemm/gemv/gemv_runner.h"

#include <cstdint>
#include <string>

#include "mixgemm/common/check.h"
#include "mixgemm/gemv/launch_gemv.cuh"

namespace mixgemm::gemv {
namespace {

struct RegistryEntry {
  GemvConfig config;
  gemm::ActType act;
  int bits;
  int fold_k;  // k rows per fold of scale and offset (gemv_kernel.cuh): 128, 64 or 32
  gemm::WeightLayout layout;
  LaunchFn launch;
};

}  // namespace
}  // namespace mixgemm::gemv

// kGemvRegistry: every compiled (config, activation type, bits, fold, layout), written by the generator.
#include "gemv_registry.inc"

namespace mixgemm::gemv {
namespace {

const RegistryEntry* find_entry(const GemvConfig& config, gemm::ActType act, int bits, int fold_k,
                                gemm::WeightLayout layout) {
  for (const RegistryEntry& e : kGemvRegistry)
    if (e.config == config && e.act == act && e.bits == bits && e.fold_k == fold_k && e.layout == layout)
      return &e;
  return nullptr;
}

// The largest fold the group size allows (group sizes are multiples of 32).
int fold_k_for(int group_size) { return group_size % 128 == 0 ? 128 : group_size % 64 == 0 ? 64 : 32; }

}  // namespace

std::vector<GemvConfig> compiled_configs(gemm::ActType act, int bits) {
  std::vector<GemvConfig> configs;
  for (const RegistryEntry& e : kGemvRegistry) {
    bool seen = false;
    for (const GemvConfig& c : configs) seen = seen || c == e.config;
    if (e.act == act && e.bits == bits && !seen) configs.push_back(e.config);
  }
  return configs;
}

gemm::WorkspaceSize workspace_size(int M, int N, int split_k) {
  gemm::WorkspaceSize size;
  if (split_k > 1) {
    size.floats = static_cast<int64_t>(split_k) * M * N;
    size.semaphores = N / kStripN;
  }
  return size;
}

void can_implement(const GemvConfig& config, const gemm::GemmArgs& args) {
  // Messages are built only for a broken rule (lambdas): this runs on every launch.
  const auto fn = [](const std::string& rule) { return "gemm (decode path): " + rule; };
  require(args.bits == 4 || args.bits == 8,
          [&] { return fn("weight bits must be 4 or 8, got " + std::to_string(args.bits)); });
  require(args.M >= 1 && args.M <= config.max_rows(), [&] {
    return fn("M (rows of x) must be in [1, " + std::to_string(config.max_rows()) + "] for " + config.name() +
              ", got " + std::to_string(args.M));
  });
  require(args.N >= kStripN && args.N % kStripN == 0,
          [&] { return fn("N must be a positive multiple of 64 (packed strip width)"); });
  require(args.K >= kBatchK && args.K % kBatchK == 0,
          [&] { return fn("K must be a positive multiple of 64 (the k-batch)"); });
  require(args.group_size >= kHalfK && args.group_size % kHalfK == 0 && args.K % args.group_size == 0,
          [&] { return fn("group_size must be a multiple of 32 that divides K"); });
  require(find_entry(config, args.act, args.bits, fold_k_for(args.group_size), args.layout) != nullptr, [&] {
    return fn("config " + config.name() + " is not compiled into this build for this dtype, weight width and "
              "weight layout");
  });
  const int batches = args.K / kBatchK;
  require(args.split_k >= 1 && args.split_k <= batches && args.split_k <= 65535,
          [&] { return fn("split_k must be in [1, K / 64 = " + std::to_string(batches) + "]"); });
  require(args.mode == (args.split_k == 1 ? gemm::SplitKMode::kNone : gemm::SplitKMode::kSerial), [&] {
    return fn("split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial' (in-kernel reduction)");
  });
  require(args.A && args.B && args.scales && args.offsets && args.D,
          [&] { return fn("x, packed weight, scales, offsets and output pointers must be non-null"); });
  require(aligned(args.A, 4) && aligned(args.B, 16) && aligned(args.scales, 2) && aligned(args.offsets, 2),
          [&] { return fn("x must be 4-byte aligned and the packed weight 16-byte aligned"); });
  require(aligned(args.D, 2) && aligned(args.bias, 2), [&] { return fn("output and bias must be 2-byte aligned"); });
  if (args.split_k > 1)
    require(args.workspace != nullptr && args.semaphores != nullptr,
            [&] { return fn("split_k > 1 needs the fp32 workspace and the semaphore buffer"); });
}

void run_gemv(const GemvConfig& config, const gemm::GemmArgs& args, cudaStream_t stream) {
  can_implement(config, args);
  require_cuda_device();
  find_entry(config, args.act, args.bits, fold_k_for(args.group_size), args.layout)->launch(args, stream);
}

}  // namespace mixgemm::gemv
