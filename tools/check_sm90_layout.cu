// Checks on the GPU machine (full CUDA toolkit: CUTLASS's mixed_dtype_utils.hpp needs curand) that our
// written-out sm90 weight layout (cpp/mixgemm/sm90/reorder_layout.cuh) is exactly the layout
// CUTLASS's compute_memory_reordering_atom returns, for fp16/bf16 x int4/int8, element by element and over
// a tiled (N, K). Build and run (host code only; no GPU needed):
//   nvcc -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -I cpp -I $CUTLASS/include \
//        -I $CUTLASS/tools/util/include tools/check_sm90_layout.cu -o /tmp/check_sm90_layout && /tmp/check_sm90_layout
#include <cstdint>
#include <cstdio>

// CUTLASS 4.2.0's mixed_dtype_utils.hpp names cutlass::int8_t / uint8_t, which no CUTLASS header declares
// (seen on the H100 machine with CUDA 13.0): give them the standard types.
namespace cutlass {
using ::int8_t;
using ::uint8_t;
}  // namespace cutlass

#include "cutlass/util/mixed_dtype_utils.hpp"
#include "mixgemm/sm90/reorder_layout.cuh"

template <class Element, int bits, class Shuffle>
int check(const char* name) {
  using namespace cute;
  auto theirs = cutlass::compute_memory_reordering_atom<Element, Layout<Shape<_1, _1>>, Shuffle>();
  using Ours = mixgemm::sm90::ReorderLayout<Element, bits>;
  int bad = 0;
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 16; ++k) bad += theirs(m, k) != typename Ours::Atom{}(m, k);
  const int N = 256, K = 128;
  auto full_theirs = tile_to_shape(theirs, make_shape(N, K, 1));
  auto full_ours = Ours::of(N, K);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) bad += full_theirs(n, k, 0) != full_ours(n, k, 0);
  std::printf("%s: %s\n", name, bad ? "MISMATCH" : "ok");
  return bad != 0;
}

int main() {
  using namespace cute;
  using Int4Shuffle = Layout<Shape<_2, _4>, Stride<_4, _1>>;
  using Int8Shuffle = Layout<Shape<_2, _2>, Stride<_2, _1>>;
  int failures = check<cutlass::half_t, 4, Int4Shuffle>("fp16 int4") + check<cutlass::bfloat16_t, 4, Int4Shuffle>("bf16 int4") +
                 check<cutlass::half_t, 8, Int8Shuffle>("fp16 int8") + check<cutlass::bfloat16_t, 8, Int8Shuffle>("bf16 int8");
  return failures;
}
