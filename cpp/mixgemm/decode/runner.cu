// The decode path's host side: its registry, rules, scratch sizes and prepared launches.
#include "mixgemm/decode/runner.h"

#include <cstdint>
#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/core/gemm_args.h"
#include "mixgemm/core/registry.h"
#include "mixgemm/core/shape_rules.h"
#include "mixgemm/decode/launch.cuh"

namespace mixgemm::decode {
// The specialization is the fold: the k rows one scale row covers in the kernel (config.h, fold_k_for).
using Entry = RegistryEntry<DecodeConfig, int, LaunchFn>;
}  // namespace mixgemm::decode

// kEntries: every compiled (config, kernel key, fold) with its launcher; written by the generator.
#include "decode_registry.inc"

namespace mixgemm::decode {
namespace {

constexpr Registry<Entry> kRegistry(kEntries);

std::string rule(const std::string& text) { return "gemm (decode path): " + text; }

// x is read as 4-byte pairs, the weight 16 bytes at a time, scales, offsets, output and bias per element.
void check_addresses(const GemmArgs& args, const WorkspaceSize& scratch) {
  require(args.A && args.B && args.scales && args.offsets && args.D,
          [] { return rule("x, packed weight, scales, offsets and output pointers must be non-null"); });
  require(aligned(args.A, 4) && aligned(args.B, 16) && aligned(args.scales, 2) && aligned(args.offsets, 2),
          [] { return rule("x must be 4-byte aligned and the packed weight 16-byte aligned"); });
  require(aligned(args.D, 2) && aligned(args.bias, 2), [] { return rule("output and bias must be 2-byte aligned"); });
  require(scratch.bytes == 0 || (args.workspace != nullptr && args.semaphores != nullptr),
          [] { return rule("split_k > 1 needs the fp32 workspace and the semaphore buffer"); });
}

}  // namespace

std::vector<DecodeConfig> compiled_configs(const KernelKey& key) { return kRegistry.configs(key); }

void can_implement(const DecodeConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split) {
  require(shape.M >= 1 && shape.M <= config.max_rows(), [&] {
    return rule("M (rows of x) must be in [1, " + std::to_string(config.max_rows()) + "] for " + config.name() +
                ", got " + std::to_string(shape.M));
  });
  require_shape("gemm (decode path)", shape_rule("decode", key.layout), shape.N, shape.K, shape.group_size);
  require(kRegistry.find(config, key, fold_k_for(shape.group_size)) != nullptr, [&] {
    return rule("config " + config.name() + " is not compiled into this build for " + key.name());
  });
  const int batches = shape.K / kBatchK;
  require(split.split_k >= 1 && split.split_k <= batches && split.split_k <= 65535,
          [&] { return rule("split_k must be in [1, K / 64 = " + std::to_string(batches) + "]"); });
  require(split.mode == (split.split_k == 1 ? SplitKMode::kNone : SplitKMode::kSerial), [] {
    return rule("split_k == 1 needs split_k_mode 'none' and split_k > 1 needs 'serial' (in-kernel reduction)");
  });
}

WorkspaceSize workspace_size(const GemmShape& shape, const Split& split) {
  WorkspaceSize size;
  if (split.split_k > 1) {
    size.bytes = 4 * static_cast<int64_t>(split.split_k) * shape.M * shape.N;
    size.semaphores = shape.N / kStripN;
  }
  return size;
}

PreparedLaunch prepare(const DecodeConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split) {
  can_implement(config, key, shape, split);
  const LaunchFn launch = kRegistry.find(config, key, fold_k_for(shape.group_size))->launch;
  const WorkspaceSize scratch = workspace_size(shape, split);
  const GemmArgs bound = shape_args(shape, split);
  const std::string what = describe_launch("decode", config.name(), key, shape, split);
  return PreparedLaunch(what, scratch, [launch, bound, scratch](const CallAddresses& a, cudaStream_t stream) {
    const GemmArgs args = with_addresses(bound, a);
    check_addresses(args, scratch);
    require_cuda_device();
    launch(args, stream);
  });
}

}  // namespace mixgemm::decode
