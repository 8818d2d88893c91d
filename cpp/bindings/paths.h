// The kernel paths as the binding sees them: each path's compiled configs for a kernel key, by name, and its
// prepare. A path joins the binding with one row of `path_table` below; its config type needs only `name()`
// (Python names its configs the same way, python/mixgemm/paths/).
#pragma once

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "mixgemm/core/kernel_key.h"
#include "mixgemm/core/prepared_launch.h"
#include "mixgemm/core/problem.h"
#include "mixgemm/decode/runner.h"
#include "mixgemm/sm80/runner.h"
#include "mixgemm/sm90/runner.h"

namespace mixgemm::bindings {

// A kernel key crosses as (activation "fp16"/"bf16", weight bits, layout "sm80"/"sm90", quant
// "scale"/"scale_offset", activation scale "none"): python/mixgemm/kernel_key.py, KernelKey.as_tuple.
using KeyTuple = std::tuple<std::string, int, std::string, std::string, std::string>;

inline KernelKey key_of(const KeyTuple& t) {
  const auto& [act, bits, layout, quant, act_scale] = t;
  KernelKey key;
  if (act == "fp16") key.act = ActType::kFloat16;
  else if (act == "bf16") key.act = ActType::kBFloat16;
  else throw std::invalid_argument("kernel key: activation type must be 'fp16' or 'bf16', got '" + act + "'");
  if (bits != 4 && bits != 8) throw std::invalid_argument("kernel key: weight bits must be 4 or 8");
  key.weight_bits = bits;
  if (layout == "sm80") key.layout = WeightLayout::kSm80;
  else if (layout == "sm90") key.layout = WeightLayout::kSm90;
  else throw std::invalid_argument("kernel key: layout must be 'sm80' or 'sm90', got '" + layout + "'");
  if (quant == "scale") key.quant = QuantMode::kScale;
  else if (quant == "scale_offset") key.quant = QuantMode::kScaleOffset;
  else throw std::invalid_argument("kernel key: quant must be 'scale' or 'scale_offset', got '" + quant + "'");
  if (act_scale != "none") throw std::invalid_argument("kernel key: act_scale must be 'none', got '" + act_scale + "'");
  return key;
}

inline SplitKMode split_mode_of(const std::string& mode) {
  if (mode == "none") return SplitKMode::kNone;
  if (mode == "serial") return SplitKMode::kSerial;
  if (mode == "parallel") return SplitKMode::kParallel;
  if (mode == "streamk") return SplitKMode::kStreamK;
  if (mode == "reduce_scatter") return SplitKMode::kReduceScatter;
  throw std::invalid_argument("gemm: split_k_mode must be 'none', 'serial', 'parallel', 'streamk' or "
                              "'reduce_scatter', got '" + mode + "'");
}

struct PathBinding {
  std::function<std::vector<std::string>(const KernelKey&)> compiled;
  std::function<PreparedLaunch(const std::string&, const KernelKey&, const GemmShape&, const Split&)> prepare;
};

// A path's binding from its compiled_configs and prepare: configs cross by name.
template <typename Config>
PathBinding bind_path(const std::string& path, std::vector<Config> (*compiled)(const KernelKey&),
                 PreparedLaunch (*prepare)(const Config&, const KernelKey&, const GemmShape&, const Split&)) {
  return {[compiled](const KernelKey& key) {
            std::vector<std::string> names;
            for (const Config& c : compiled(key)) names.push_back(c.name());
            return names;
          },
          [path, compiled, prepare](const std::string& name, const KernelKey& key, const GemmShape& shape,
                                    const Split& split) {
            for (const Config& c : compiled(key))
              if (c.name() == name) return prepare(c, key, shape, split);
            throw std::invalid_argument("gemm (" + path + " path): config " + name +
                                        " is not compiled into this build for " + key.name());
          }};
}

inline const std::map<std::string, PathBinding>& path_table() {
  static const std::map<std::string, PathBinding> table = {
      {"sm80", bind_path<sm80::TileConfig>("sm80", &sm80::compiled_configs, &sm80::prepare)},
      {"decode", bind_path<decode::DecodeConfig>("decode", &decode::compiled_configs, &decode::prepare)},
      {"sm90", bind_path<sm90::Config>("sm90", &sm90::compiled_configs, &sm90::prepare)},
  };
  return table;
}

inline const PathBinding& path(const std::string& name) {
  const auto& table = path_table();
  const auto it = table.find(name);
  if (it == table.end()) throw std::invalid_argument("unknown kernel path '" + name + "'");
  return it->second;
}

inline std::vector<std::string> path_names() {
  std::vector<std::string> names;
  for (const auto& [name, binding] : path_table()) names.push_back(name);
  return names;
}

}  // namespace mixgemm::bindings
