// The submodule `_C.moe`: routing preparation and the grouped GEMM of mixture-of-experts (cpp/mixgemm/moe),
// addresses and sizes in, as the rest of the binding (module.cpp). python/mixgemm/moe/ is its one caller.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings/paths.h"
#include "mixgemm/moe/grouped_runner.h"
#include "mixgemm/moe/routing.h"

namespace mixgemm::bindings {

inline void bind_moe(pybind11::module_& m) {
  namespace py = pybind11;
  m.doc() = "mixture-of-experts: routing preparation and the grouped GEMM (use mixgemm.moe)";
  m.attr("MAX_EXPERTS") = moe::kMaxExperts;
  m.def("max_blocks", &moe::max_blocks, py::arg("num_slots"), py::arg("num_experts"), py::arg("block_m"),
        "the most blocks of block_m sorted positions a routing of num_slots slots can need");
  m.def(
      "compiled_configs",
      [](const KeyTuple& key) { return moe::compiled_configs(key_of(key)); }, py::arg("key"),
      "names of the grouped GEMM's configs compiled for the kernel key (decode form, then sm80 tiles)");
  m.def(
      "route",
      [](std::uintptr_t topk_ids, bool ids_int64, int num_slots, int top_k, int num_experts, int block_m,
         std::uintptr_t slot_of, std::uintptr_t token_of, std::uintptr_t block_expert, std::uintptr_t num_padded,
         std::uintptr_t stream) {
        moe::route(address_of<const void>(topk_ids), ids_int64, num_slots, top_k, num_experts, block_m,
                   address_of<int32_t>(slot_of), address_of<int32_t>(token_of), address_of<int32_t>(block_expert),
                   address_of<int32_t>(num_padded), reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("topk_ids"), py::arg("ids_int64"), py::arg("num_slots"), py::arg("top_k"), py::arg("num_experts"),
      py::arg("block_m"), py::arg("slot_of"), py::arg("token_of"), py::arg("block_expert"), py::arg("num_padded"),
      py::arg("stream"), "sorts the (token, expert) slots by expert into blocks of block_m (moe/routing.h)");
  m.def(
      "grouped_gemm",
      [](const std::string& config, const KeyTuple& key, bool gated, std::uintptr_t x, std::uintptr_t packed,
         std::uintptr_t scales, std::uintptr_t offsets, std::uintptr_t out, std::uintptr_t a_rows,
         std::uintptr_t slot_of, std::uintptr_t block_expert, std::uintptr_t num_padded, std::uintptr_t slot_weights,
         int a_rows_count, int N, int K, int group_size, int num_slots, int max_blocks, int64_t b_expert_stride,
         int64_t quant_expert_stride, int split_k, std::uintptr_t workspace, std::uintptr_t semaphores,
         std::uintptr_t stream) {
        moe::GroupedArgs a;
        a.A = address_of<const void>(x);
        a.B = address_of<const int32_t>(packed);
        a.scales = address_of<const void>(scales);
        a.offsets = address_of<const void>(offsets);
        a.D = address_of<void>(out);
        a.a_rows = address_of<const int32_t>(a_rows);
        a.slot_of = address_of<const int32_t>(slot_of);
        a.block_expert = address_of<const int32_t>(block_expert);
        a.num_padded = address_of<const int32_t>(num_padded);
        a.slot_weights = address_of<const float>(slot_weights);
        a.a_rows_count = a_rows_count, a.N = N, a.K = K, a.group_size = group_size;
        a.num_slots = num_slots, a.max_blocks = max_blocks;
        a.b_expert_stride = b_expert_stride, a.quant_expert_stride = quant_expert_stride;
        a.split_k = split_k;
        a.workspace = address_of<float>(workspace);
        a.semaphores = address_of<int32_t>(semaphores);
        moe::grouped_gemm(config, key_of(key), gated ? moe::Epilogue::kGated : moe::Epilogue::kPlain, a,
                          reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("config"), py::arg("key"), py::arg("gated"), py::arg("x"), py::arg("packed"), py::arg("scales"),
      py::arg("offsets"), py::arg("out"), py::arg("a_rows"), py::arg("slot_of"), py::arg("block_expert"),
      py::arg("num_padded"), py::arg("slot_weights"), py::arg("a_rows_count"), py::arg("N"), py::arg("K"),
      py::arg("group_size"), py::arg("num_slots"), py::arg("max_blocks"), py::arg("b_expert_stride"),
      py::arg("quant_expert_stride"), py::arg("split_k"), py::arg("workspace"), py::arg("semaphores"),
      py::arg("stream"),
      "out[slot_of[p]] = x[a_rows[p]] @ dequant(W[expert of p]) (x slot weight; gated: SiLU(gate) * up)");
}

}  // namespace mixgemm::bindings
