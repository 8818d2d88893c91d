// The problem a path computes, as the host describes it: sizes and how K is split. Host-only header.
//
// GemmShape is one dense problem, D[M, N] = A[M, K] . dequant(W[K, N]) with one scale row per group_size
// rows of K. A grouped problem (mixture-of-experts: one such product per expert, each on its own rows of
// A) is a GemmShape per group plus the routing; the sm80 kernel reads its problem only through its
// schedule (its Schedule parameter: sm80/kernel/data_parallel.cuh, stream_k.cuh), which is where a grouped
// schedule plugs in.
#pragma once

#include <cstdint>

namespace mixgemm {

struct GemmShape {
  int M = 0, N = 0, K = 0, group_size = 0;
};

// How K is split across blocks. Which modes a path takes is its own rule (its can_implement).
enum class SplitKMode : int {
  kNone = 0,      // one block per output tile covers all of K
  kSerial = 1,    // every split writes fp32 partials; the tile's last split sums them in split order
  kParallel = 2,  // every split writes fp32 partials; a second kernel sums them (sm80 path)
  kStreamK = 3,   // split_k blocks share all tiles' k-tiles equally (sm80 path, sm80/kernel/stream_k_partition.h)
  kReduceScatter = 4,  // every split of a tile runs at once; each sums and stores the epilogue subtiles it owns
                       // (sm90 path, sm90/self_resetting_stream_k.cuh)
};

struct Split {
  int split_k = 1;  // splits of K; for kStreamK the blocks of the grid
  SplitKMode mode = SplitKMode::kNone;
};

// The scratch a launch needs besides its operands: fp32 workspace bytes and int32 semaphores (zero before the
// first call; every kernel leaves them zero again, so one buffer serves every call on a stream).
struct WorkspaceSize {
  int64_t bytes = 0;
  int64_t semaphores = 0;
};

}  // namespace mixgemm
