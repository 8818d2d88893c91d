// Both weight layouts' fragment code (LayoutOf<layout, Bits>) and the strip loader they share, for the paths that read
// either.
#pragma once

#include <cstdint>

#include "mixgemm/layout/sm80.cuh"
#include "mixgemm/layout/sm90.cuh"

namespace mixgemm::layout {

// words[s][...] = this lane's words of slab `slab0 + s` of `strip`, for kSlabs slabs, in either layout: from the
// layout's lane_words pointer moved slab0 slabs on (the decode path instead steps that pointer from batch to batch).
template <typename Layout, int kSlabs>
__device__ __forceinline__ void load_strip_slabs(uint32_t (&words)[kSlabs][Layout::kWordsPerSlab], const int32_t* B,
                                                 int N, int K, int strip, int slab0, int lane) {
  const int stride = Layout::slab_words(N, K);
  Layout::load_slabs(words, Layout::lane_words(B, N, K, strip, lane) + static_cast<int64_t>(slab0) * stride, stride);
}

}  // namespace mixgemm::layout
