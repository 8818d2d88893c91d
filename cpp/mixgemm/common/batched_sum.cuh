// The sum of split-K partials held in L2 (the sm80 path's serial split, sm80/kernel/tile_output.cuh, and its parallel
// split's reduction kernel, sm80/kernel/splitk_reduce.cuh; the decode kernel's last split, decode/gemv_kernel.cuh).
// Each sits on the critical path, and each is latency bound: each thread's loads are all it has to do, and an add that
// waits for a load stops it issuing the next. So kBatch partials are loaded before any of them is added, and their L2
// round trips overlap: count partials take ceil(count / kBatch) round trips, where a loop of one load and one add a
// partial waits a round trip for each (for each 4 at best, where the compiler unrolls it by 4). The adds keep the
// partials' order, so the sum does not depend on kBatch.
#pragma once

namespace mixgemm {

// For z = 0 .. count - 1 in order: load(z, part), then add(part). Every load of a batch is issued before the batch's
// first add. `Part` is what one partial is to one thread (a float, a float4, or an array of float4 in a struct); a
// batch keeps kBatch of them in registers.
template <int kBatch, typename Part, typename Load, typename Add>
__device__ __forceinline__ void sum_in_batches(int count, Load&& load, Add&& add) {
  static_assert(kBatch >= 1, "a batch holds at least one partial");
  for (int z0 = 0; z0 < count; z0 += kBatch) {
    Part part[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (z0 + b < count) load(z0 + b, part[b]);
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (z0 + b < count) add(part[b]);
  }
}

}  // namespace mixgemm
