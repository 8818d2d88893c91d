// Host side of the dense dequantize of a prepacked weight: rule checks and the (layout, width, type) dispatch.
#include "mixgemm/dequant/packed_dequantize.h"

#include <string>

#include "mixgemm/core/check.h"
#include "mixgemm/core/shape_rules.h"
#include "mixgemm/dequant/packed_dequantize_kernel.cuh"

namespace mixgemm::dequant {
namespace {

template <typename T, int Bits, WeightLayout kLayout>
void launch(const int32_t* packed, const void* scales, const void* offsets, void* out, int N, int K,
            int group_size, cudaStream_t stream) {
  const int64_t warps = static_cast<int64_t>(N / kPackedStripN) * (K / kPackedSlabK);
  const int64_t blocks = (warps * 32 + kPackedDequantThreads - 1) / kPackedDequantThreads;
  require(blocks <= 0x7fffffff, "dequantize_packed: N * K is too large for one launch");
  packed_dequantize_kernel<T, Bits, kLayout><<<static_cast<unsigned>(blocks), kPackedDequantThreads, 0, stream>>>(
      packed, static_cast<const T*>(scales), static_cast<const T*>(offsets), static_cast<T*>(out), N, K,
      group_size);
  check_launch("packed_dequantize_kernel");
}

template <typename T, int Bits>
void launch_layout(WeightLayout layout, const int32_t* packed, const void* scales, const void* offsets,
                   void* out, int N, int K, int group_size, cudaStream_t stream) {
  if (layout == WeightLayout::kSm90)
    launch<T, Bits, WeightLayout::kSm90>(packed, scales, offsets, out, N, K, group_size, stream);
  else
    launch<T, Bits, WeightLayout::kSm80>(packed, scales, offsets, out, N, K, group_size, stream);
}

template <typename T>
void launch_bits(WeightLayout layout, int bits, const int32_t* packed, const void* scales,
                 const void* offsets, void* out, int N, int K, int group_size, cudaStream_t stream) {
  if (bits == 4)
    launch_layout<T, 4>(layout, packed, scales, offsets, out, N, K, group_size, stream);
  else
    launch_layout<T, 8>(layout, packed, scales, offsets, out, N, K, group_size, stream);
}

}  // namespace

void dequantize_packed(const KernelKey& key, const int32_t* packed, const void* scales, const void* offsets, void* out,
                       int N, int K, int group_size, cudaStream_t stream) {
  const auto fn = [](const std::string& rule) { return "dequantize_packed: " + rule; };
  require(key.weight_bits == 4 || key.weight_bits == 8,
          [&] { return fn("bits must be 4 or 8, got " + std::to_string(key.weight_bits)); });
  require_shape("dequantize_packed", shape_rule("dequant", key.layout), N, K, group_size);
  require(packed && scales && offsets && out, [&] { return fn("every pointer must be non-null"); });
  require(aligned(packed, 16) && aligned(out, 4) && aligned(scales, 2) && aligned(offsets, 2),
          [&] { return fn("packed must be 16-byte, out 4-byte and scales, offsets 2-byte aligned"); });
  require_cuda_device();
  if (key.act == ActType::kBFloat16)
    launch_bits<__nv_bfloat16>(key.layout, key.weight_bits, packed, scales, offsets, out, N, K, group_size, stream);
  else
    launch_bits<__half>(key.layout, key.weight_bits, packed, scales, offsets, out, N, K, group_size, stream);
}

}  // namespace mixgemm::dequant
