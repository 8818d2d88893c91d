// One call's device pointers, sizes and split, as the sm80 and decode paths' launchers take them (the sm90 path
// has CUTLASS's own arguments, sm90/sm90_args.h). The kernel key (kernel_key.h) is not here: it chose the
// instantiation. Host-only header.
#pragma once

#include <cstdint>

#include "mixgemm/core/prepared_launch.h"
#include "mixgemm/core/problem.h"

namespace mixgemm {

// Device pointers and sizes of one call: D[M, N] = A[M, K] @ W + bias, W = q * scales + offsets.
struct GemmArgs {
  const void* A = nullptr;         // activations [M, K], row-major, the key's activation type
  const int32_t* B = nullptr;      // packed weights in the key's layout
  const void* scales = nullptr;    // [K/G, N]
  const void* offsets = nullptr;   // [K/G, N], the folded zero points (-zero * scale)
  const void* bias = nullptr;      // [N], or null
  void* D = nullptr;               // output [M, N]
  float* workspace = nullptr;      // split-K / stream-K fp32 workspace
  int32_t* semaphores = nullptr;   // serial split-K, stream-K: one counter per output tile, zero on entry and exit
  int M = 0, N = 0, K = 0, group_size = 0;
  int split_k = 1;                 // splits of K; for kStreamK the blocks of the grid
  SplitKMode mode = SplitKMode::kNone;
};

// The args of `shape` and `split`, pointers unset: what a prepared launch binds.
inline GemmArgs shape_args(const GemmShape& shape, const Split& split) {
  GemmArgs args;
  args.M = shape.M, args.N = shape.N, args.K = shape.K, args.group_size = shape.group_size;
  args.split_k = split.split_k;
  args.mode = split.mode;
  return args;
}

// `args` with one call's addresses.
inline GemmArgs with_addresses(GemmArgs args, const CallAddresses& a) {
  args.A = address_of<const void>(a.x);
  args.B = address_of<const int32_t>(a.packed);
  args.scales = address_of<const void>(a.scales);
  args.offsets = address_of<const void>(a.offsets);
  args.bias = address_of<const void>(a.bias);
  args.D = address_of<void>(a.out);
  args.workspace = address_of<float>(a.workspace);
  args.semaphores = address_of<int32_t>(a.semaphores);
  return args;
}

}  // namespace mixgemm
