// sm90 path, device level: rule checks, workspace sizing, config -> instantiation dispatch. Compiled only
// for sm_90a (CMakeLists.txt), together with the generated instances it dispatches to.
#include "mixgemm/sm90/sm90_runner.h"

#include <string>

#include "mixgemm/common/check.h"
#include "mixgemm/common/device_info.h"
#include "mixgemm/sm90/launch.cuh"

namespace mixgemm::sm90 {
namespace {

struct RegistryEntry {
  Config config;
  ActType act;
  int bits;
  Mode mode;
  LaunchFn launch;
  WorkspaceFn workspace;
};

}  // namespace
}  // namespace mixgemm::sm90

// kRegistry: every compiled (config, dtype, bits, mode) with its launcher; written by the generator.
#include "sm90_registry.inc"

namespace mixgemm::sm90 {
namespace {

constexpr int kTileK = 64;  // 128 bytes of 16-bit x per k-tile (kernel_types.cuh)

Mode mode_of(const Args& args) { return args.offsets != nullptr ? Mode::kScaleOffset : Mode::kScale; }

const RegistryEntry* find_entry(const Config& config, ActType act, int bits, Mode mode) {
  for (const RegistryEntry& entry : kRegistry)
    if (entry.config == config && entry.act == act && entry.bits == bits && entry.mode == mode) return &entry;
  return nullptr;
}

}  // namespace

bool available() { return true; }

std::vector<CompiledKernel> compiled(ActType act, int bits) {
  std::vector<CompiledKernel> out;
  for (const RegistryEntry& entry : kRegistry)
    if (entry.act == act && entry.bits == bits) out.push_back({entry.config, entry.mode});
  return out;
}

void can_implement(const Config& config, const Args& args) {
  // Messages are built only for a broken rule (lambdas): this runs on every launch.
  const auto fn = [](const std::string& rule) { return "gemm_sm90: " + rule; };
  require(args.bits == 4 || args.bits == 8,
          [&] { return fn("weight bits must be 4 or 8, got " + std::to_string(args.bits)); });
  require(find_entry(config, args.act, args.bits, mode_of(args)) != nullptr, [&] {
    return fn("config " + config.name() + " is not compiled into this build for this activation dtype, " +
              std::to_string(args.bits) + "-bit weights and " +
              (args.offsets ? "zero-point (offset)" : "scale-only") + " mode");
  });
  require(args.M >= 1, [&] { return fn("M (rows of x) must be >= 1"); });
  require(args.N >= config.tile_n && args.N % config.tile_n == 0, [&] {
    return fn("N must be a positive multiple of the config's tile_n = " + std::to_string(config.tile_n) +
              ", got " + std::to_string(args.N));
  });
  require(args.K >= kTileK && args.K % kTileK == 0,
          [&] { return fn("K must be a positive multiple of 64 (the k-tile), got " + std::to_string(args.K)); });
  require(args.group_size == args.K ||
              (args.group_size >= kTileK && args.group_size % kTileK == 0 && args.K % args.group_size == 0),
          [&] {
            return fn("group_size must be K or a multiple of 64 that divides K (the collective reloads scales per "
                      "whole k-tile), got " + std::to_string(args.group_size));
          });
  require(args.split_k >= 1 && args.split_k <= args.K / kTileK, [&] {
    return fn("split_k must be between 1 and K / 64 (whole k-tiles per split), got " +
              std::to_string(args.split_k));
  });
  require(args.split_k == 1 || config.scheduler == Scheduler::kStreamK, [&] {
    return fn("split_k > 1 needs a stream-K config (its scheduler does the split), got " + config.name());
  });
  require(args.A && args.B && args.scales && args.D,
          [&] { return fn("x, packed weight, scales and output pointers must be non-null"); });
  require(aligned(args.A, 16) && aligned(args.B, 16) && aligned(args.scales, 16) && aligned(args.offsets, 16) &&
              aligned(args.D, 16) && aligned(args.bias, 16),
          [&] {
            return fn("x, packed weight, scales, offsets, output and bias must be 16-byte aligned (TMA and vector "
                      "loads)");
          });
  require(args.workspace_bytes >= 0 && aligned(args.workspace, 16),
          [&] { return fn("workspace must be 16-byte aligned"); });
  require(args.lock_count >= 0 && aligned(args.locks, 4), [&] { return fn("locks must be 4-byte aligned"); });
}

Workspace workspace_size(const Config& config, const Args& args) {
  can_implement(config, args);
  require_cuda_device();
  Args a = args;
  a.device_sm_count = current_device_info().sm_count;  // stream-K sizes its workspace by the grid
  return find_entry(config, args.act, args.bits, mode_of(args))->workspace(a);
}

void run(const Config& config, const Args& args, cudaStream_t stream) {
  can_implement(config, args);
  require_cuda_device();
  const DeviceInfo& info = current_device_info();
  if (info.major != 9 || info.minor != 0)
    throw std::runtime_error("gemm_sm90: the current GPU is not compute capability 9.0; the sm90 path's "
                             "kernels are built for sm_90a (Hopper H100/H200) only");
  Args a = args;
  a.device_sm_count = info.sm_count;
  find_entry(config, args.act, args.bits, mode_of(args))->launch(a, stream);
}

}  // namespace mixgemm::sm90
