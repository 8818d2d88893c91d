// Device level of the mixed-input GEMM: rule checks, workspace sizing, config -> instantiation dispatch.
#include "mixgemm/gemm/device/gemm_runner.h"

#include <string>

#include "mixgemm/common/check.h"
#include "mixgemm/gemm/device/launch.cuh"

namespace mixgemm::gemm {
namespace {

struct RegistryEntry {
  TileConfig config;
  ActType act;
  int bits;  // weight width: 4 or 8
  WeightLayout layout;
  LaunchFn launch;
};

}  // namespace
}  // namespace mixgemm::gemm

// kRegistry: every compiled (config, activation type, weight width, weight layout) with its launcher;
// written by the generator.
#include "gemm_registry.inc"

namespace mixgemm::gemm {
namespace {

const RegistryEntry* find_entry(const TileConfig& config, ActType act, int bits, WeightLayout layout) {
  for (const RegistryEntry& entry : kRegistry)
    if (entry.config == config && entry.act == act && entry.bits == bits && entry.layout == layout) return &entry;
  return nullptr;
}

const char* layout_name(WeightLayout layout) { return layout == WeightLayout::kSm90 ? "sm90" : "sm80"; }

}  // namespace

std::vector<TileConfig> compiled_configs(ActType act, int bits, WeightLayout layout) {
  std::vector<TileConfig> configs;
  for (const RegistryEntry& entry : kRegistry)
    if (entry.act == act && entry.bits == bits && entry.layout == layout) configs.push_back(entry.config);
  return configs;
}

WorkspaceSize workspace_size(const TileConfig& config, int M, int N, int split_k, SplitKMode mode) {
  WorkspaceSize size;
  const int64_t tiles = static_cast<int64_t>(ceil_div(M, config.tile_m)) * ceil_div(N, config.tile_n);
  if (mode == SplitKMode::kStreamK) {
    // Two slots per block (kernel/stream_k_partition.h), for at most split_k blocks.
    size.floats = kernel::stream_k_workspace_floats(split_k, config.tile_m, config.tile_n);
    size.semaphores = tiles;
    return size;
  }
  if (mode != SplitKMode::kNone) size.floats = static_cast<int64_t>(split_k) * M * N;
  if (mode == SplitKMode::kSerial) size.semaphores = tiles;
  return size;
}

void can_implement(const TileConfig& config, const GemmArgs& args) {
  // Messages are built only for a broken rule (lambdas): this runs on every launch.
  const auto fn = [](const std::string& rule) { return "gemm: " + rule; };
  require(args.bits == 4 || args.bits == 8,
          [&] { return fn("weight bits must be 4 or 8, got " + std::to_string(args.bits)); });
  require(args.layout == WeightLayout::kSm80 || args.layout == WeightLayout::kSm90,
          [&] { return fn("unknown weight layout " + std::to_string(static_cast<int>(args.layout))); });
  require(find_entry(config, args.act, args.bits, args.layout) != nullptr, [&] {
    return fn("config " + config.name() + " is not compiled into this build for this activation dtype, weight "
              "width and " + layout_name(args.layout) + " weight layout");
  });
  require(args.M >= 1, [&] { return fn("M (rows of x) must be >= 1"); });
  // The smallest unit of N each layout zero-fills past the edge (threadblock/packed_b_tile.cuh).
  const int n_unit = args.layout == WeightLayout::kSm80 ? threadblock::kPackedStripN : threadblock::kBlockN;
  require(args.N >= n_unit && args.N % n_unit == 0, [&] {
    return fn("N must be a positive multiple of " + std::to_string(n_unit) + " (the " + layout_name(args.layout) +
              " layout's " + (n_unit == threadblock::kBlockN ? "block" : "strip") + " width)");
  });
  require(args.K >= threadblock::kTileK && args.K % threadblock::kTileK == 0,
          [&] { return fn("K must be a positive multiple of 64 (the main loop's k-tile)"); });
  require(args.group_size >= threadblock::kQuantK && args.group_size % threadblock::kQuantK == 0 &&
              args.K % args.group_size == 0,
          [&] { return fn("group_size must be a multiple of 32 that divides K"); });
  const int k_tiles = args.K / threadblock::kTileK;
  if (args.mode == SplitKMode::kStreamK) {
    // split_k is the grid: blocks sharing the units (k-tiles of output tiles) of kernel/stream_k_partition.h.
    const int64_t units = kernel::stream_k_units(args.M, args.N, config.tile_m, config.tile_n, k_tiles);
    require(units < kernel::StreamKPartition::kMaxUnits, [&] {
      return fn("stream-K: M / tile_m x N / tile_n x K / 64 must be below 2^30 (the partition's int range)");
    });
    require(args.split_k >= 1 && args.split_k <= units, [&] {
      return fn("stream-K: split_k (the blocks) must be in [1, the units of work = " + std::to_string(units) + "]");
    });
  } else {
    require(args.split_k >= 1 && args.split_k <= k_tiles,
            [&] { return fn("split_k must be in [1, K / 64 = " + std::to_string(k_tiles) + "]"); });
    require((args.split_k == 1) == (args.mode == SplitKMode::kNone), [&] {
      return fn("split_k > 1 needs split_k_mode 'serial' or 'parallel', and split_k == 1 needs 'none'");
    });
    require(args.split_k <= 65535, [&] { return fn("split_k must be <= 65535 (grid z limit)"); });
  }
  require(ceil_div(args.N, config.tile_n) <= 65535, [&] { return fn("N / tile_n must be <= 65535 (grid y limit)"); });
  require(args.A && args.B && args.scales && args.offsets && args.D,
          [&] { return fn("x, packed weight, scales, offsets and output pointers must be non-null"); });
  require(aligned(args.A, 16) && aligned(args.B, 16) && aligned(args.scales, 16) && aligned(args.offsets, 16),
          [&] { return fn("x, packed weight, scales and offsets must be 16-byte aligned (cp.async 16-byte copies)"); });
  require(aligned(args.D, 4) && aligned(args.bias, 4), [&] { return fn("output and bias must be 4-byte aligned"); });
  const WorkspaceSize need = workspace_size(config, args.M, args.N, args.split_k, args.mode);
  require(need.floats == 0 || (args.workspace != nullptr && aligned(args.workspace, 16)),
          [&] { return fn("this split-K mode needs a 16-byte aligned fp32 workspace"); });
  require(need.semaphores == 0 || args.semaphores != nullptr,
          [&] { return fn("serial split-K and stream-K need a semaphore buffer"); });
}

void run_gemm(const TileConfig& config, const GemmArgs& args, cudaStream_t stream) {
  can_implement(config, args);
  require_cuda_device();
  find_entry(config, args.act, args.bits, args.layout)->launch(args, stream);
}

}  // namespace mixgemm::gemm
