// The sm90 path's host side: its registry, rules and prepared launches. Compiled only for sm_90a
// (CMakeLists.txt), together with the generated instances it dispatches to.
#include "mixgemm/sm90/runner.h"

#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/core/device_info.h"
#include "mixgemm/core/registry.h"
#include "mixgemm/core/shape_rules.h"
#include "mixgemm/sm90/launch.cuh"

namespace mixgemm::sm90 {
// A compiled kernel is a launcher and the workspace sizing of the same CUTLASS arguments.
struct Kernel {
  LaunchFn launch;
  WorkspaceFn workspace;
};
using Entry = RegistryEntry<Config, NoSpecialization, Kernel>;
}  // namespace mixgemm::sm90

// kEntries: every compiled (config, kernel key) with its launcher; written by the generator.
#include "sm90_registry.inc"

namespace mixgemm::sm90 {
namespace {

constexpr Registry<Entry> kRegistry(kEntries);
constexpr int kTileK = 64;  // 128 bytes of 16-bit x per k-tile (kernel_types.cuh)

std::string rule(const std::string& text) { return "gemm (sm90 path): " + text; }

// TMA and the epilogue's vector stores need 16-byte aligned operands.
void check_addresses(const Args& args) {
  require(args.A && args.B && args.scales && args.D,
          [] { return rule("x, packed weight, scales and output pointers must be non-null"); });
  require(aligned(args.A, 16) && aligned(args.B, 16) && aligned(args.scales, 16) && aligned(args.offsets, 16) &&
              aligned(args.D, 16) && aligned(args.bias, 16),
          [] {
            return rule("x, packed weight, scales, offsets, output and bias must be 16-byte aligned (TMA and vector "
                        "loads)");
          });
  require(args.workspace_bytes == 0 || (args.workspace != nullptr && aligned(args.workspace, 16)),
          [] { return rule("this config needs a 16-byte aligned workspace"); });
  require(args.lock_count == 0 || (args.locks != nullptr && aligned(args.locks, 4)),
          [] { return rule("this config needs its zeroed split flags"); });
}

Args shape_args(const GemmShape& shape, const Split& split, const WorkspaceSize& scratch, int sm_count) {
  Args args;
  args.M = shape.M, args.N = shape.N, args.K = shape.K, args.group_size = shape.group_size;
  args.split_k = split.split_k;
  args.reduce_scatter = split.mode == SplitKMode::kReduceScatter;
  args.workspace_bytes = scratch.bytes;
  args.lock_count = scratch.semaphores;
  args.device_sm_count = sm_count;
  return args;
}

Args with_addresses(Args args, const CallAddresses& a, QuantMode quant) {
  args.A = address_of<const void>(a.x);
  args.B = address_of<const void>(a.packed);
  args.scales = address_of<const void>(a.scales);
  args.offsets = quant == QuantMode::kScale ? nullptr : address_of<const void>(a.offsets);
  args.bias = address_of<const void>(a.bias);
  args.D = address_of<void>(a.out);
  args.workspace = address_of<void>(a.workspace);
  args.locks = address_of<int32_t>(a.semaphores);
  return args;
}

}  // namespace

bool available() { return true; }

std::vector<Config> compiled_configs(const KernelKey& key) { return kRegistry.configs(key); }

void can_implement(const Config& config, const KernelKey& key, const GemmShape& shape, const Split& split) {
  require(kRegistry.has(config, key), [&] {
    return rule("config " + config.name() + " is not compiled into this build for " + key.name());
  });
  require(shape.M >= 1, [] { return rule("M (rows of x) must be >= 1"); });
  require_shape("gemm (sm90 path)", shape_rule("sm90", key.layout), shape.N, shape.K, shape.group_size, config.tile_n);
  require(split.split_k >= 1 && split.split_k <= shape.K / kTileK, [&] {
    return rule("split_k must be between 1 and K / 64 (whole k-tiles per split), got " + std::to_string(split.split_k));
  });
  require(split.split_k == 1 ? split.mode == SplitKMode::kNone
                             : split.mode == SplitKMode::kSerial || split.mode == SplitKMode::kReduceScatter,
          [] { return rule("split_k == 1 needs split_k_mode 'none' and split_k > 1 'serial' or 'reduce_scatter'"); });
  require(split.split_k == 1 || config.scheduler == Scheduler::kStreamK, [&] {
    return rule("split_k > 1 needs a stream-K config (its scheduler does the split), got " + config.name());
  });
}

PreparedLaunch prepare(const Config& config, const KernelKey& key, const GemmShape& shape, const Split& split) {
  can_implement(config, key, shape, split);
  require_cuda_device();
  const DeviceInfo& info = current_device_info();
  if (info.major != 9 || info.minor != 0)
    throw std::runtime_error("gemm (sm90 path): the current GPU is not compute capability 9.0; the sm90 path's "
                             "kernels are built for sm_90a (Hopper H100/H200) only");
  const Kernel kernel = kRegistry.find(config, key)->launch;
  // Stream-K sizes its partials by the grid, hence by the SM count of the GPU the plan runs on: placeholder
  // 16-byte aligned addresses stand in for the operands, which the sizing never reads.
  const std::uintptr_t p = 256;
  const Args probe = with_addresses(shape_args(shape, split, {}, info.sm_count), {p, p, p, p, 0, p, 0, 0}, key.quant);
  const Workspace need = kernel.workspace(probe);
  // The splits share the reduction only where all of them run at once: elsewhere the kernel would quietly add
  // them the serial way, and the config's name would not say what ran.
  require(split.mode != SplitKMode::kReduceScatter || need.splits_in_one_wave, [&] {
    return rule("split_k_mode 'reduce_scatter' needs every split of every tile resident at once: " +
                std::to_string(split.split_k) + " splits of the output tiles of " + config.name() +
                " exceed one wave of this GPU's " + std::to_string(info.sm_count) + " SMs");
  });
  const WorkspaceSize scratch{need.bytes, need.locks};
  const Args bound = shape_args(shape, split, scratch, info.sm_count);
  const QuantMode quant = key.quant;
  const std::string what = describe_launch("sm90", config.name(), key, shape, split);
  return PreparedLaunch(what, scratch, [kernel, bound, quant](const CallAddresses& a, cudaStream_t stream) {
    const Args args = with_addresses(bound, a, quant);
    check_addresses(args);
    kernel.launch(args, stream);
  });
}

}  // namespace mixgemm::sm90
