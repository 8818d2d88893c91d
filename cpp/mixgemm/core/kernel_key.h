// The kernel key: what a compiled kernel takes besides its tile, carried end to end (the generator's
// registry rows, the runners' lookups, the binding, PackedWeight.key and the tuning cache in Python).
//
// A key names the activation type, the weight width, the weight layout, how the weight's codes become
// values (scale only, or scale and an additive offset that holds the folded zero point) and the activation
// scale operand. Only kNone exists for the last today; it is the place an int8/fp8-activation path's
// per-token scales go, so such a path adds a key value instead of another boolean to every signature.
// Host-only header (no CUDA), shared by every path.
#pragma once

#include <string>

namespace mixgemm {

enum class ActType : int { kFloat16 = 0, kBFloat16 = 1 };

// How the packed weight is laid out (PackedWeight.layout in Python; cpp/mixgemm/layout/ holds each
// layout's code): the sm80 layout (unsigned codes, [N/64, K/16, 32, Bits/4 * 4] words) and the sm90 layout
// (signed codes, [K/16, N/16, 32, Bits/4] words).
enum class WeightLayout : int { kSm80 = 0, kSm90 = 1 };

// How a kernel turns a code q into a weight value.
enum class QuantMode : int {
  kScale = 0,        // W = q * s            (symmetric weights whose codes are stored signed)
  kScaleOffset = 1,  // W = q * s + offset   (zero points, and the sm80 layout's unsigned codes, folded in)
};

// The activation's own scale operand: none for fp16/bf16 activations.
enum class ActScale : int { kNone = 0 };

struct KernelKey {
  ActType act = ActType::kFloat16;
  int weight_bits = 4;  // 4 (int4) or 8 (int8)
  WeightLayout layout = WeightLayout::kSm80;
  QuantMode quant = QuantMode::kScaleOffset;
  ActScale act_scale = ActScale::kNone;

  bool operator==(const KernelKey& o) const {
    return act == o.act && weight_bits == o.weight_bits && layout == o.layout && quant == o.quant &&
           act_scale == o.act_scale;
  }
  // "fp16-int4-sm80-scale_offset": how errors and prepared launches name it (python/mixgemm/kernel_key.py's
  // KernelKey.name spells it the same way).
  std::string name() const {
    return std::string(act == ActType::kBFloat16 ? "bf16" : "fp16") + "-int" + std::to_string(weight_bits) +
           (layout == WeightLayout::kSm90 ? "-sm90" : "-sm80") +
           (quant == QuantMode::kScale ? "-scale" : "-scale_offset");
  }
};

inline const char* layout_name(WeightLayout layout) { return layout == WeightLayout::kSm90 ? "sm90" : "sm80"; }

}  // namespace mixgemm
