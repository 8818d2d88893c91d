// The sm90 grouped form's host side: its registry and the rules a call must meet. Compiled for sm_90a only,
// with the generated instances it dispatches to.
#include "mixgemm/moe/sm90/runner.h"

#include "mixgemm/core/check.h"
#include "mixgemm/core/device_info.h"
#include "mixgemm/core/registry.h"
#include "mixgemm/core/shape_rules.h"
#include "mixgemm/moe/sm90/launch.cuh"

namespace mixgemm::moe::sm90 {
struct Kernel {
  LaunchFn launch;
  WorkspaceFn workspace;
};
using Entry = RegistryEntry<Config, NoSpecialization, Kernel>;
}  // namespace mixgemm::moe::sm90

// kEntries: every compiled (config, kernel key) with its launcher and workspace sizing; written by the generator.
#include "moe_sm90_registry.inc"

namespace mixgemm::moe::sm90 {
namespace {

constexpr Registry<Entry> kRegistry(kEntries);

std::string rule(const std::string& text) { return "moe grouped gemm (sm90 form): " + text; }

const Entry& find(const std::string& config_name, const KernelKey& key) {
  for (const auto& c : kRegistry.configs(key))
    if (c.name() == config_name) return *kRegistry.find(c, key);
  throw std::invalid_argument(rule("config " + config_name + " is not compiled into this build for " + key.name()));
}

}  // namespace

std::vector<std::string> compiled_configs(const KernelKey& key) {
  std::vector<std::string> names;
  for (const auto& c : kRegistry.configs(key)) names.push_back(c.name());
  return names;
}

int64_t workspace_bytes(const std::string& config_name, const KernelKey& key, int num_experts, int sm_count) {
  require(num_experts >= 1 && sm_count >= 1, [] { return rule("experts and SM count must be >= 1"); });
  return find(config_name, key).launch.workspace(num_experts, sm_count);
}

void grouped_gemm(const std::string& config_name, const KernelKey& key, const GroupedArgs& a, cudaStream_t stream) {
  const Entry& entry = find(config_name, key);
  require_shape("moe grouped gemm (sm90 form)", shape_rule("sm90", WeightLayout::kSm90), a.N, a.K, a.group_size,
                entry.config.tile_n);
  require(a.num_experts >= 1 && a.rows >= 1 && a.sm_count >= 1,
          [] { return rule("experts, rows and the SM count must be >= 1"); });
  require(a.A && a.B && a.scales && a.offsets && a.D && a.expert_start && a.workspace,
          [] { return rule("x, weights, scales, offsets, output, expert_start and workspace must be non-null"); });
  // TMA moves 16-byte aligned boxes from 16-byte aligned bases; every expert's base must be one too.
  require(aligned(a.A, 16) && aligned(a.B, 16) && aligned(a.scales, 16) && aligned(a.offsets, 16) &&
              aligned(a.D, 16) && aligned(a.workspace, 128),
          [] { return rule("x, weights, scales, offsets and output must be 16-byte aligned, the workspace 128"); });
  require(a.b_expert_bytes % 16 == 0 && a.quant_expert_stride % 8 == 0,
          [] { return rule("every expert's weights, scales and offsets must start 16-byte aligned"); });
  require_cuda_device();
  const DeviceInfo& info = current_device_info();
  if (info.major != 9 || info.minor != 0)
    throw std::runtime_error(rule("the current GPU is not compute capability 9.0; the sm90 form is built for "
                                  "sm_90a (Hopper) only"));
  entry.launch.launch(a, stream);
}

}  // namespace mixgemm::moe::sm90
