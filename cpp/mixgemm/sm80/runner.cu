// The sm80 path's host side: its registry, rules, scratch sizes and prepared launches.
#include "mixgemm/sm80/runner.h"

#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/core/registry.h"
#include "mixgemm/core/shape_rules.h"
#include "mixgemm/sm80/launch.cuh"

namespace mixgemm::sm80 {
using Entry = RegistryEntry<TileConfig, Scheduling, LaunchFn>;
}  // namespace mixgemm::sm80

// kEntries: every compiled (tile config, kernel key, schedule) with its launcher; written by the generator.
#include "sm80_registry.inc"

namespace mixgemm::sm80 {
namespace {

constexpr Registry<Entry> kRegistry(kEntries);

std::string rule(const std::string& text) { return "gemm (sm80 path): " + text; }

void check_split(const TileConfig& config, const GemmShape& shape, const Split& split) {
  const int k_tiles = shape.K / threadblock::kTileK;
  if (split.mode == SplitKMode::kStreamK) {
    // split_k is the grid: blocks sharing the units (k-tiles of output tiles) of kernel/stream_k_partition.h.
    const int64_t units = kernel::stream_k_units(shape.M, shape.N, config.tile_m, config.tile_n, k_tiles);
    require(units < kernel::StreamKPartition::kMaxUnits, [&] {
      return rule("stream-K: M / tile_m x N / tile_n x K / 64 must be below 2^30 (the partition's int range)");
    });
    require(split.split_k >= 1 && split.split_k <= units, [&] {
      return rule("stream-K: split_k (the blocks) must be in [1, the units of work = " + std::to_string(units) + "]");
    });
    return;
  }
  require(split.mode != SplitKMode::kReduceScatter, [] {
    return rule("split_k_mode 'reduce_scatter' is the sm90 path's; this path splits K 'serial' or 'parallel'");
  });
  require(split.split_k >= 1 && split.split_k <= k_tiles,
          [&] { return rule("split_k must be in [1, K / 64 = " + std::to_string(k_tiles) + "]"); });
  require((split.split_k == 1) == (split.mode == SplitKMode::kNone), [&] {
    return rule("split_k > 1 needs split_k_mode 'serial' or 'parallel', and split_k == 1 needs 'none'");
  });
  require(split.split_k <= 65535, [&] { return rule("split_k must be <= 65535 (grid z limit)"); });
}

// What a call's addresses must satisfy: cp.async reads x, the weight, scales and offsets 16 bytes at a time;
// the epilogue writes pairs.
void check_addresses(const GemmArgs& args, const WorkspaceSize& scratch) {
  require(args.A && args.B && args.scales && args.offsets && args.D,
          [] { return rule("x, packed weight, scales, offsets and output pointers must be non-null"); });
  require(aligned(args.A, 16) && aligned(args.B, 16) && aligned(args.scales, 16) && aligned(args.offsets, 16), [] {
    return rule("x, packed weight, scales and offsets must be 16-byte aligned (cp.async 16-byte copies)");
  });
  require(aligned(args.D, 4) && aligned(args.bias, 4), [] { return rule("output and bias must be 4-byte aligned"); });
  require(scratch.bytes == 0 || (args.workspace != nullptr && aligned(args.workspace, 16)),
          [] { return rule("this split-K mode needs a 16-byte aligned fp32 workspace"); });
  require(scratch.semaphores == 0 || args.semaphores != nullptr,
          [] { return rule("serial split-K and stream-K need a semaphore buffer"); });
}

}  // namespace

std::vector<TileConfig> compiled_configs(const KernelKey& key) { return kRegistry.configs(key); }

void can_implement(const TileConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split) {
  require(kRegistry.has(config, key), [&] {
    return rule("config " + config.name() + " is not compiled into this build for " + key.name());
  });
  require(shape.M >= 1, [] { return rule("M (rows of x) must be >= 1"); });
  require_shape("gemm (sm80 path)", shape_rule("sm80", key.layout), shape.N, shape.K, shape.group_size);
  check_split(config, shape, split);
  require(ceil_div(shape.N, config.tile_n) <= 65535, [] { return rule("N / tile_n must be <= 65535 (grid y limit)"); });
}

WorkspaceSize workspace_size(const TileConfig& config, const GemmShape& shape, const Split& split) {
  if (split.mode == SplitKMode::kStreamK) return kernel::StreamK::workspace(shape, split, config.tile_m, config.tile_n);
  return kernel::DataParallel::workspace(shape, split, config.tile_m, config.tile_n);
}

PreparedLaunch prepare(const TileConfig& config, const KernelKey& key, const GemmShape& shape, const Split& split) {
  can_implement(config, key, shape, split);
  const Entry* entry = kRegistry.find(config, key, scheduling_of(split.mode));
  require(entry != nullptr,
          [&] { return rule("config " + config.name() + " has no kernel of this split's schedule"); });
  const LaunchFn launch = entry->launch;
  const WorkspaceSize scratch = workspace_size(config, shape, split);
  const GemmArgs bound = shape_args(shape, split);
  const std::string what = describe_launch("sm80", config.name(), key, shape, split);
  return PreparedLaunch(what, scratch, [launch, bound, scratch](const CallAddresses& a, cudaStream_t stream) {
    const GemmArgs args = with_addresses(bound, a);
    check_addresses(args, scratch);
    require_cuda_device();
    launch(args, stream);
  });
}

}  // namespace mixgemm::sm80
