// One registry shape for every path: the generator writes a table of entries (config, kernel key,
// specialization, launcher) per path, and the path's runner looks its kernels up here. A specialization is
// what a path compiles several of for one config and key and picks by the problem: the sm80 path's schedule
// (data-parallel or stream-K), the decode path's scale fold; paths without one use NoSpecialization.
#pragma once

#include <cstddef>
#include <vector>

#include "mixgemm/core/kernel_key.h"

namespace mixgemm {

struct NoSpecialization {
  bool operator==(const NoSpecialization&) const { return true; }
};

template <typename ConfigT, typename SpecializationT, typename LaunchT>
struct RegistryEntry {
  using Config = ConfigT;
  using Specialization = SpecializationT;
  ConfigT config;
  KernelKey key;
  SpecializationT specialization;
  LaunchT launch;
};

template <typename Entry>
class Registry {
 public:
  using Config = typename Entry::Config;
  using Specialization = typename Entry::Specialization;

  template <std::size_t N>
  constexpr explicit Registry(const Entry (&entries)[N]) : begin_(entries), end_(entries + N) {}

  // The entry compiled for (config, key, specialization), or null.
  const Entry* find(const Config& config, const KernelKey& key, const Specialization& specialization = {}) const {
    for (const Entry* e = begin_; e != end_; ++e)
      if (e->config == config && e->key == key && e->specialization == specialization) return e;
    return nullptr;
  }

  // Whether (config, key) is compiled with any specialization.
  bool has(const Config& config, const KernelKey& key) const {
    for (const Entry* e = begin_; e != end_; ++e)
      if (e->config == config && e->key == key) return true;
    return false;
  }

  // Every config compiled for `key`, once each, in table order.
  std::vector<Config> configs(const KernelKey& key) const {
    std::vector<Config> out;
    for (const Entry* e = begin_; e != end_; ++e) {
      if (!(e->key == key)) continue;
      bool seen = false;
      for (const Config& c : out) seen = seen || c == e->config;
      if (!seen) out.push_back(e->config);
    }
    return out;
  }

 private:
  const Entry* begin_;
  const Entry* end_;
};

}  // namespace mixgemm
