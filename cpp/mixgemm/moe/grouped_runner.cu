// The grouped GEMM's host side: its registry and the rules a call must meet.
#include "mixgemm/moe/grouped_runner.h"

#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/core/registry.h"
#include "mixgemm/core/shape_rules.h"
#include "mixgemm/decode/config.h"
#include "mixgemm/moe/grouped_gemv_launch.cuh"
#include "mixgemm/moe/grouped_launch.cuh"

namespace mixgemm::moe {
using Entry = RegistryEntry<sm80::TileConfig, Epilogue, GroupedLaunchFn>;

// The decode form's specialization: the scale fold (decode/config.h, fold_k_for) and the epilogue.
struct GemvSpecialization {
  int fold_k;
  Epilogue epilogue;
  bool operator==(const GemvSpecialization& o) const { return fold_k == o.fold_k && epilogue == o.epilogue; }
};
using GemvEntry = RegistryEntry<decode::DecodeConfig, GemvSpecialization, GroupedLaunchFn>;
}  // namespace mixgemm::moe

// kEntries: every compiled (tile config, kernel key, epilogue) with its launcher; kGemvEntries the decode form's
// (GEMV config, key, fold and epilogue). Written by the generator.
#include "moe_decode_registry.inc"
#include "moe_registry.inc"

namespace mixgemm::moe {
namespace {

constexpr Registry<Entry> kRegistry(kEntries);
constexpr Registry<GemvEntry> kGemvRegistry(kGemvEntries);

std::string rule(const std::string& text) { return "moe grouped gemm: " + text; }

void check_args(int tile_n, WeightLayout layout, Epilogue epilogue, const GroupedArgs& a) {
  require_shape("moe grouped gemm", shape_rule("sm80", layout), a.N, a.K, a.group_size);
  require(epilogue == Epilogue::kPlain || a.N % 16 == 0,
          [] { return rule("a gated projection's N (2 x intermediate) must be a multiple of 16"); });
  require(a.a_rows_count >= 1 && a.num_slots >= 1 && a.max_blocks >= 1,
          [] { return rule("x rows, slots and blocks must be >= 1"); });
  // The loader keeps each gathered row's distance from its first row in an int (sm80/threadblock/tile_loader.cuh).
  require(static_cast<int64_t>(a.a_rows_count) * a.K < (int64_t{1} << 31),
          [] { return rule("x's rows x K must be below 2^31 elements"); });
  require(ceil_div(a.N, tile_n) <= 65535, [] { return rule("N / tile_n must be <= 65535 (grid y limit)"); });
  const bool direct = a.direct.topk_ids != nullptr;
  require(a.A && a.B && a.scales && a.offsets && a.D &&
              (direct || (a.a_rows && a.slot_of && a.block_expert && a.num_padded)),
          [] { return rule("x, weights, scales, offsets, output and routing buffers must be non-null"); });
  require(aligned(a.A, 16) && aligned(a.B, 16) && aligned(a.scales, 16) && aligned(a.offsets, 16), [] {
    return rule("x, packed weights, scales and offsets must be 16-byte aligned (cp.async 16-byte copies)");
  });
  require(a.b_expert_stride % 4 == 0 && a.quant_expert_stride % 8 == 0,
          [] { return rule("every expert's weights, scales and offsets must start 16-byte aligned"); });
  require(aligned(a.D, 4), [] { return rule("the output must be 4-byte aligned"); });
  require(a.split_k >= 1 && a.split_k <= a.K / sm80::threadblock::kTileK && a.split_k <= 65535,
          [&] { return rule("split_k must be in [1, K / 64 = " + std::to_string(a.K / 64) + "]"); });
  require(a.split_k == 1 || (a.workspace != nullptr && aligned(a.workspace, 16) && a.semaphores != nullptr), [] {
    return rule("split_k > 1 needs a 16-byte aligned fp32 workspace and zeroed semaphores");
  });
}

}  // namespace

std::vector<std::string> compiled_configs(const KernelKey& key) {
  std::vector<std::string> names;
  for (const auto& c : kGemvRegistry.configs(key)) names.push_back(c.name());
  for (const auto& c : kRegistry.configs(key)) names.push_back(c.name());
  return names;
}

void grouped_gemm(const std::string& config_name, const KernelKey& key, Epilogue epilogue, const GroupedArgs& args,
                  cudaStream_t stream) {
  const auto not_compiled = [&] { return rule("config " + config_name + " is not compiled into this build for " +
                                              key.name()); };
  GroupedLaunchFn launch = nullptr;
  const decode::DirectSlots& ds = args.direct;
  const bool direct = ds.topk_ids != nullptr;
  if (direct) {  // the decode form's direct mode: one block per slot, no routing
    require(ds.top_k >= 1 && args.num_slots % ds.top_k == 0 && args.num_slots <= 65535 && ds.num_experts >= 1,
            [] { return rule("direct mode needs slots = tokens x top_k <= 65535 and the expert count"); });
    require(!ds.fold_top_k || epilogue == Epilogue::kPlain,
            [] { return rule("direct mode folds the top-k sum only into a plain (not gated) projection"); });
    require(!ds.fold_top_k || (args.workspace != nullptr && aligned(args.workspace, 16) && args.semaphores),
            [] { return rule("the top-k fold needs an fp32 workspace and zeroed semaphores"); });
  }
  for (const auto& c : kGemvRegistry.configs(key)) {
    if (c.name() != config_name) continue;
    // The decode form's shape rule is the decode path's; its grid's z is the routing's blocks.
    require_shape("moe grouped gemm (decode form)", shape_rule("decode", key.layout), args.N, args.K,
                  args.group_size);
    require(args.max_blocks <= 65535, [] { return rule("the decode form takes at most 65535 routing blocks"); });
    const GemvEntry* entry = kGemvRegistry.find(c, key, {decode::fold_k_for(args.group_size), epilogue});
    require(entry != nullptr, not_compiled);
    check_args(decode::kStripN, key.layout, epilogue, args);
    launch = entry->launch;
  }
  for (const auto& c : kRegistry.configs(key)) {
    if (c.name() != config_name) continue;
    require(!direct, [] { return rule("direct mode (no routing) is the decode form's only"); });
    const Entry* entry = kRegistry.find(c, key, epilogue);
    require(entry != nullptr, [&] { return rule("config " + config_name + " has no kernel of this epilogue"); });
    check_args(c.tile_n, key.layout, epilogue, args);
    launch = entry->launch;
  }
  require(launch != nullptr, not_compiled);
  require_cuda_device();
  launch(args, stream);
}

}  // namespace mixgemm::moe
