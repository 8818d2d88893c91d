// The decode path's config: a compiled batched-GEMV kernel for up to 8 * m_tiles rows of x, with `warps`
// warps per block over one 64-column strip. Host-only header.
#pragma once

#include <string>

namespace mixgemm::decode {

struct DecodeConfig {
  int m_tiles;
  int warps;
  bool operator==(const DecodeConfig& o) const { return m_tiles == o.m_tiles && warps == o.warps; }
  int max_rows() const { return 8 * m_tiles; }
  std::string name() const { return "decode_m" + std::to_string(max_rows()) + "_w" + std::to_string(warps); }
};

// The k rows one fold of scale and offset covers (gemv_kernel.cuh): each config is compiled for all three, and
// a problem runs the largest that divides its group size (group sizes are multiples of 32).
inline int fold_k_for(int group_size) { return group_size % 128 == 0 ? 128 : group_size % 64 == 0 ? 64 : 32; }

}  // namespace mixgemm::decode
