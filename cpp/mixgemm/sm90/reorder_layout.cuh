// The sm90 weight layout: where each weight code of W^T (N x K) lives in memory.
//
// Per 16 x 16 (n x k) block (one warp's share of a 64 x 16 register-sourced wgmma A block), the 8 values
// each of the 32 threads holds in its A fragment are stored contiguously (one 32-bit word for int4, two for
// int8), so the collective reads a thread's values with one shared-memory load, in the order the
// collective's interleaved converter expects. It is the layout CUTLASS's compute_memory_reordering_atom
// (tools/util mixed_dtype_utils.hpp) returns for 16-bit activations with one atom and the value shuffles
// below; we write it out (that header drags in curand) and tools/check_sm90_layout.cu compares the two.
//
// Derivation. The 16-bit wgmma A fragment (as mma.m16n8k16's): lane = 4 g + t (g < 8, t < 4) holds
// value v = j + 2 h + 4 q (j, h, q < 2) at row n = g + 8 h, column k = 2 t + j + 8 q. Storing thread-major,
// offset = 8 lane + pos(v) = 32 g + 8 t + pos(v), with the converter's value order:
//   int4, registers hold values [0, 2, 4, 6, 1, 3, 5, 7] (pos(v) = 4 (v % 2) + v / 2 = 4 j + h + 2 q):
//        n = (g, h) strides (32, 1); k = (j, t, q) strides (4, 8, 2)
//   int8, registers hold values [0, 2, 1, 3] twice (pos(v) = 2 j + h + 4 q):
//        n = (g, h) strides (32, 1); k = (j, t, q) strides (2, 8, 4)
// Blocks are then laid out N-block fastest: block (nb, kb) starts at element 256 (nb + (N / 16) kb)
// (cute::tile_to_shape's column-major block order). python/mixgemm/layouts/sm90.py is the PyTorch twin.
// The size-1 modes reproduce CUTLASS's atom type exactly, so the collective sees the same layout type.
#pragma once

#include <cute/tensor.hpp>

namespace mixgemm::sm90 {

template <int bits>
struct ReorderAtom;
template <>
struct ReorderAtom<4> {
  using type = cute::Layout<
      cute::Shape<cute::Shape<cute::Shape<cute::_8, cute::_2>, cute::_1>,
                  cute::Shape<cute::Shape<cute::_2, cute::_4, cute::_2>, cute::_1>>,
      cute::Stride<cute::Stride<cute::Stride<cute::_32, cute::_1>, cute::_0>,
                   cute::Stride<cute::Stride<cute::_4, cute::_8, cute::_2>, cute::_0>>>;
};
template <>
struct ReorderAtom<8> {
  using type = cute::Layout<
      cute::Shape<cute::Shape<cute::Shape<cute::_8, cute::_2>, cute::_1>,
                  cute::Shape<cute::Shape<cute::_2, cute::_4, cute::_2>, cute::_1>>,
      cute::Stride<cute::Stride<cute::Stride<cute::_32, cute::_1>, cute::_0>,
                   cute::Stride<cute::Stride<cute::_2, cute::_8, cute::_4>, cute::_0>>>;
};

template <class Element, int bits>
struct ReorderLayout {
  static_assert(cute::sizeof_bits_v<Element> == 16, "the atom is derived for 16-bit activations");
  using Atom = typename ReorderAtom<bits>::type;

  // The (N, K, 1) layout of a whole weight: the atom repeated over N (fastest) and K.
  static auto of(int N, int K) { return cute::tile_to_shape(Atom{}, cute::make_shape(N, K, 1)); }
};

}  // namespace mixgemm::sm90
