// The shape rules of every kernel path, one table for the whole library: which N, K and group sizes a path's
// kernels take on a weight layout. The table is written by cpp/generator/generate.py from
// cpp/generator/shape_rules.py (beside the kernel lists) into the build's shape_rules.inc; the runners'
// can_implement read it here, and Python reads the same rows through the extension (mixgemm.shape_rules), for
// prepack, the checkpoint loaders and each path's fits check. Host-only header.
#pragma once

#include <string>

#include "mixgemm/core/kernel_key.h"

namespace mixgemm {

struct ShapeRule {
  const char* path;     // "sm80", "decode", "sm90" or "dequant"
  WeightLayout layout;  // the weight layout the path reads with this rule
  int n_multiple;       // N must be a positive multiple of this ...
  bool n_per_tile;      // ... and of the config's tile_n (the sm90 path's kernels tile N whole)
  int k_multiple;       // K must be a positive multiple of this
  int group_multiple;   // group_size must be a multiple of this that divides K ...
  bool group_may_be_k;  // ... or K itself (per-channel), where this is set
  const char* n_why;    // what the multiples are, for error messages
  const char* k_why;
  const char* group_why;
};

// The rule of `path` on `layout`; throws std::invalid_argument when the path does not read the layout.
const ShapeRule& shape_rule(const std::string& path, WeightLayout layout);

// Every rule of the table, in the generator's order (the extension hands them to Python).
const ShapeRule* shape_rules_begin();
const ShapeRule* shape_rules_end();

// Throws std::invalid_argument naming the function, the broken size and the rule, when N, K or group_size
// break `rule` (`tile_n`: the config's, read where rule.n_per_tile).
void require_shape(const char* fn, const ShapeRule& rule, int N, int K, int group_size, int tile_n = 0);

}  // namespace mixgemm
