// The row moves of permute.h: memory-bound copies, one 16-byte vector (8 elements) per thread and step.
#include "mixgemm/moe/permute.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "mixgemm/core/check.h"

namespace mixgemm::moe {
namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;  // elements per 16-byte vector

std::string rule(const std::string& text) { return "moe row moves: " + text; }

template <typename T>
struct Vec8 {
  T v[kVec];
};

template <typename T>
__device__ float to_float(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else return __bfloat162float(x);
}
template <typename T>
__device__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}

// Flat over the (row, vector) pairs of the rows in use, a grid-stride loop: rows are short (Qwen3-30B-A3B's
// intermediate is 96 vectors), so a block per row would leave most of its threads idle. The grid is sized
// for every row; the rows in use are known only on the device.
__global__ void gather_rows_kernel(const uint4* __restrict__ src, int src_rows, const int32_t* __restrict__ src_row,
                                   const int32_t* __restrict__ rows_in_use, uint4* __restrict__ dst, int vectors) {
  const int64_t in_use = static_cast<int64_t>(*rows_in_use) * vectors;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < in_use;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = v / vectors;
    const int r = src_row[p];
    if (r >= 0 && r < src_rows) dst[v] = src[static_cast<int64_t>(r) * vectors + v - p * vectors];
  }
}

// Vector v of the output (row p, columns 8i .. 8i + 7 of it) is gate run i and up run i of row p: the 16-byte
// vectors 2v and 2v + 1 of h.
template <typename T>
__global__ void silu_mul_runs_kernel(const uint4* __restrict__ h, const int32_t* __restrict__ rows_in_use,
                                     uint4* __restrict__ out, int runs) {
  const int64_t in_use = static_cast<int64_t>(*rows_in_use) * runs;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < in_use;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 g4 = h[2 * v];
    const uint4 u4 = h[2 * v + 1];
    const auto& g = reinterpret_cast<const Vec8<T>&>(g4);
    const auto& u = reinterpret_cast<const Vec8<T>&>(u4);
    Vec8<T> o;
#pragma unroll
    for (int c = 0; c < kVec; ++c) {
      const float gate = to_float(g.v[c]);
      o.v[c] = from_float<T>(gate / (1.f + __expf(-gate)) * to_float(u.v[c]));
    }
    out[v] = reinterpret_cast<const uint4&>(o);
  }
}

template <typename T>
__global__ void combine_rows_kernel(const uint4* __restrict__ src, int src_rows,
                                    const int32_t* __restrict__ position_of, const float* __restrict__ weights,
                                    uint4* __restrict__ y, int top_k, int vectors) {
  const int t = static_cast<int>(blockIdx.x);
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    float acc[kVec] = {};
    for (int j = 0; j < top_k; ++j) {
      const int slot = t * top_k + j;
      const int p = position_of[slot];
      if (p < 0 || p >= src_rows) continue;
      const float w = weights ? weights[slot] : 1.f;
      const uint4 s4 = src[static_cast<int64_t>(p) * vectors + v];
      const auto& s = reinterpret_cast<const Vec8<T>&>(s4);
#pragma unroll
      for (int c = 0; c < kVec; ++c) acc[c] += w * to_float(s.v[c]);
    }
    Vec8<T> o;
#pragma unroll
    for (int c = 0; c < kVec; ++c) o.v[c] = from_float<T>(acc[c]);
    y[static_cast<int64_t>(t) * vectors + v] = reinterpret_cast<const uint4&>(o);
  }
}

void check_row(int elements, const char* what) {
  require(elements >= kVec && elements % kVec == 0,
          [&] { return rule(std::string(what) + " must be a positive multiple of 8 elements (16-byte vectors)"); });
}

// Blocks for a flat pass over `vectors` 16-byte vectors: one vector per thread, at most 65535 blocks (the
// grid-stride loop takes the rest).
unsigned flat_blocks(int64_t vectors) {
  return static_cast<unsigned>(std::min<int64_t>((vectors + kThreads - 1) / kThreads, 65535));
}

void check_aligned(const void* a, const void* b) {
  require(a && b && aligned(a, 16) && aligned(b, 16),
          [] { return rule("source and destination must be non-null and 16-byte aligned"); });
}

}  // namespace

void gather_rows(const void* src, int src_rows, const int32_t* src_row, const int32_t* rows_in_use, void* dst,
                 int max_rows, int K, cudaStream_t stream) {
  check_row(K, "K");
  check_aligned(src, dst);
  require(src_row && rows_in_use && max_rows >= 1, [] { return rule("gather needs its row indices and count"); });
  gather_rows_kernel<<<flat_blocks(static_cast<int64_t>(max_rows) * (K / kVec)), kThreads, 0, stream>>>(
      static_cast<const uint4*>(src), src_rows, src_row, rows_in_use, static_cast<uint4*>(dst), K / kVec);
  check_launch("moe gather_rows_kernel");
}

void silu_mul_runs(ActType act, const void* h, const int32_t* rows_in_use, void* out, int max_rows, int inter,
                   cudaStream_t stream) {
  check_row(inter, "the intermediate size");
  check_aligned(h, out);
  require(rows_in_use && max_rows >= 1, [] { return rule("SiLU-and-multiply needs the rows in use"); });
  const auto* hv = static_cast<const uint4*>(h);
  auto* ov = static_cast<uint4*>(out);
  const unsigned blocks = flat_blocks(static_cast<int64_t>(max_rows) * (inter / kVec));
  if (act == ActType::kFloat16)
    silu_mul_runs_kernel<__half><<<blocks, kThreads, 0, stream>>>(hv, rows_in_use, ov, inter / kVec);
  else
    silu_mul_runs_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(hv, rows_in_use, ov, inter / kVec);
  check_launch("moe silu_mul_runs_kernel");
}

void combine_rows(ActType act, const void* src, int src_rows, const int32_t* position_of, const float* weights,
                  void* y, int tokens, int top_k, int N, cudaStream_t stream) {
  check_row(N, "N");
  check_aligned(src, y);
  require(position_of && tokens >= 1 && top_k >= 1, [] { return rule("combine needs position_of, tokens, top_k"); });
  const auto* sv = static_cast<const uint4*>(src);
  auto* yv = static_cast<uint4*>(y);
  if (act == ActType::kFloat16)
    combine_rows_kernel<__half><<<tokens, kThreads, 0, stream>>>(sv, src_rows, position_of, weights, yv, top_k, N / kVec);
  else
    combine_rows_kernel<__nv_bfloat16><<<tokens, kThreads, 0, stream>>>(sv, src_rows, position_of, weights, yv, top_k,
                                                                       N / kVec);
  check_launch("moe combine_rows_kernel");
}

}  // namespace mixgemm::moe
