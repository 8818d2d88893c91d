// The shape-rule table (generated) and its checks.
#include "mixgemm/core/shape_rules.h"

#include <stdexcept>
#include <iterator>
#include <string>

#include "mixgemm/core/check.h"

namespace mixgemm {
namespace {

// kShapeRules: one row per (path, layout) the path reads; written by cpp/generator/generate.py from
// cpp/generator/shape_rules.py.
#include "shape_rules.inc"

}  // namespace

const ShapeRule* shape_rules_begin() { return std::begin(kShapeRules); }
const ShapeRule* shape_rules_end() { return std::end(kShapeRules); }

const ShapeRule& shape_rule(const std::string& path, WeightLayout layout) {
  for (const ShapeRule& r : kShapeRules)
    if (path == r.path && r.layout == layout) return r;
  throw std::invalid_argument("gemm: the " + path + " path does not read weights in the " + layout_name(layout) +
                              " layout");
}

void require_shape(const char* fn, const ShapeRule& rule, int N, int K, int group_size, int tile_n) {
  const int n_multiple = rule.n_per_tile && tile_n > rule.n_multiple ? tile_n : rule.n_multiple;
  require(N >= n_multiple && N % n_multiple == 0, [&] {
    return std::string(fn) + ": N must be a positive multiple of " + std::to_string(n_multiple) + " (" + rule.n_why +
           "), got " + std::to_string(N);
  });
  require(K >= rule.k_multiple && K % rule.k_multiple == 0, [&] {
    return std::string(fn) + ": K must be a positive multiple of " + std::to_string(rule.k_multiple) + " (" +
           rule.k_why + "), got " + std::to_string(K);
  });
  const bool per_channel = rule.group_may_be_k && group_size == K;
  require(per_channel || (group_size >= rule.group_multiple && group_size % rule.group_multiple == 0 &&
                          K % group_size == 0),
          [&] {
            return std::string(fn) + ": group_size must be a multiple of " + std::to_string(rule.group_multiple) +
                   " that divides K" + (rule.group_may_be_k ? " or K itself" : "") + " (" + rule.group_why +
                   "), got " + std::to_string(group_size);
          });
}

}  // namespace mixgemm
