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
#include "mixgemm/moe/permute.h"
#include "mixgemm/moe/routing.h"
#include "mixgemm/moe/sm90/runner.h"

namespace mixgemm::bindings {

// The fields every grouped GEMM call fills alike (the experts, x, the output and the K split); the routed and
// the direct modes add their routing.
inline moe::GroupedArgs grouped_operands(std::uintptr_t x, std::uintptr_t packed, std::uintptr_t scales,
                                         std::uintptr_t offsets, std::uintptr_t out, std::uintptr_t slot_weights,
                                         int x_rows, int N, int K, int group_size, int num_slots,
                                         int64_t b_expert_stride, int64_t quant_expert_stride, int split_k,
                                         std::uintptr_t workspace, std::uintptr_t semaphores) {
  moe::GroupedArgs a;
  a.A = address_of<const void>(x);
  a.B = address_of<const int32_t>(packed);
  a.scales = address_of<const void>(scales);
  a.offsets = address_of<const void>(offsets);
  a.D = address_of<void>(out);
  a.slot_weights = address_of<const float>(slot_weights);
  a.a_rows_count = x_rows, a.N = N, a.K = K, a.group_size = group_size, a.num_slots = num_slots;
  a.b_expert_stride = b_expert_stride, a.quant_expert_stride = quant_expert_stride;
  a.split_k = split_k;
  a.workspace = address_of<float>(workspace);
  a.semaphores = address_of<int32_t>(semaphores);
  return a;
}

inline void run_grouped(const std::string& config, const KeyTuple& key, bool gated, const moe::GroupedArgs& a,
                        std::uintptr_t stream) {
  moe::grouped_gemm(config, key_of(key), gated ? moe::Epilogue::kGated : moe::Epilogue::kPlain, a,
                    reinterpret_cast<cudaStream_t>(stream));
}

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
         std::uintptr_t position_of, std::uintptr_t expert_start, std::uintptr_t stream) {
        moe::route(address_of<const void>(topk_ids), ids_int64, num_slots, top_k, num_experts, block_m,
                   address_of<int32_t>(slot_of), address_of<int32_t>(token_of), address_of<int32_t>(block_expert),
                   address_of<int32_t>(num_padded), address_of<int32_t>(position_of),
                   address_of<int32_t>(expert_start), reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("topk_ids"), py::arg("ids_int64"), py::arg("num_slots"), py::arg("top_k"), py::arg("num_experts"),
      py::arg("block_m"), py::arg("slot_of"), py::arg("token_of"), py::arg("block_expert"), py::arg("num_padded"),
      py::arg("position_of"), py::arg("expert_start"), py::arg("stream"),
      "sorts the (token, expert) slots by expert into blocks of block_m (moe/routing.h)");
  m.def(
      "grouped_gemv_direct",
      [](const std::string& config, const KeyTuple& key, bool gated, bool fold_top_k, std::uintptr_t x,
         std::uintptr_t packed, std::uintptr_t scales, std::uintptr_t offsets, std::uintptr_t out,
         std::uintptr_t topk_ids, bool ids_int64, int top_k, int num_experts, bool rows_by_token,
         std::uintptr_t slot_weights, int x_rows, int N, int K, int group_size, int num_slots, int64_t b_expert_stride,
         int64_t quant_expert_stride, int split_k, std::uintptr_t workspace, std::uintptr_t semaphores,
         std::uintptr_t stream) {
        moe::GroupedArgs a = grouped_operands(x, packed, scales, offsets, out, slot_weights, x_rows, N, K, group_size,
                                              num_slots, b_expert_stride, quant_expert_stride, split_k, workspace,
                                              semaphores);
        a.max_blocks = num_slots;
        a.direct = {address_of<const void>(topk_ids), ids_int64, rows_by_token, fold_top_k, top_k, num_experts};
        run_grouped(config, key, gated, a, stream);
      },
      py::arg("config"), py::arg("key"), py::arg("gated"), py::arg("fold_top_k"), py::arg("x"), py::arg("packed"),
      py::arg("scales"), py::arg("offsets"), py::arg("out"), py::arg("topk_ids"), py::arg("ids_int64"),
      py::arg("top_k"), py::arg("num_experts"), py::arg("rows_by_token"), py::arg("slot_weights"),
      py::arg("x_rows"), py::arg("N"), py::arg("K"), py::arg("group_size"), py::arg("num_slots"),
      py::arg("b_expert_stride"), py::arg("quant_expert_stride"), py::arg("split_k"), py::arg("workspace"),
      py::arg("semaphores"), py::arg("stream"),
      "the decode form without routing: one block per slot of topk_ids (moe/grouped_args.h, direct mode)");
  m.def(
      "gather_rows",
      [](std::uintptr_t src, int src_rows, std::uintptr_t src_row, std::uintptr_t rows_in_use, std::uintptr_t dst,
         int max_rows, int K, std::uintptr_t stream) {
        moe::gather_rows(address_of<const void>(src), src_rows, address_of<const int32_t>(src_row),
                         address_of<const int32_t>(rows_in_use), address_of<void>(dst), max_rows, K,
                         reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("src"), py::arg("src_rows"), py::arg("src_row"), py::arg("rows_in_use"), py::arg("dst"),
      py::arg("max_rows"), py::arg("K"), py::arg("stream"), "dst[p] = src[src_row[p]] for p < *rows_in_use");
  m.def(
      "silu_mul_runs",
      [](const KeyTuple& key, std::uintptr_t h, std::uintptr_t rows_in_use, std::uintptr_t out, int max_rows, int inter,
         std::uintptr_t stream) {
        moe::silu_mul_runs(key_of(key).act, address_of<const void>(h), address_of<const int32_t>(rows_in_use),
                           address_of<void>(out), max_rows, inter, reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("key"), py::arg("h"), py::arg("rows_in_use"), py::arg("out"), py::arg("max_rows"), py::arg("inter"),
      py::arg("stream"), "SiLU(gate) * up of gated-interleaved rows (moe/permute.h)");
  m.def(
      "combine_rows",
      [](const KeyTuple& key, std::uintptr_t src, int src_rows, std::uintptr_t position_of, std::uintptr_t weights,
         std::uintptr_t y, int tokens, int top_k, int N, std::uintptr_t stream) {
        moe::combine_rows(key_of(key).act, address_of<const void>(src), src_rows,
                          address_of<const int32_t>(position_of), address_of<const float>(weights),
                          address_of<void>(y), tokens, top_k, N, reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("key"), py::arg("src"), py::arg("src_rows"), py::arg("position_of"), py::arg("weights"), py::arg("y"),
      py::arg("tokens"), py::arg("top_k"), py::arg("N"), py::arg("stream"),
      "y[t] = sum_j weights[t, j] * src[position_of[t, j]] (moe/permute.h)");
  m.def(
      "sm90_compiled_configs", [](const KeyTuple& key) { return moe::sm90::compiled_configs(key_of(key)); },
      py::arg("key"), "names of the sm90 grouped form's configs compiled for the key (none without sm_90a)");
  m.def(
      "sm90_workspace_bytes",
      [](const std::string& config, const KeyTuple& key, int num_experts, int sm_count) {
        return moe::sm90::workspace_bytes(config, key_of(key), num_experts, sm_count);
      },
      py::arg("config"), py::arg("key"), py::arg("num_experts"), py::arg("sm_count"),
      "workspace bytes of an sm90 grouped call (per-expert arrays and TMA descriptors)");
  m.def(
      "sm90_grouped_gemm",
      [](const std::string& config, const KeyTuple& key, std::uintptr_t x, std::uintptr_t packed,
         std::uintptr_t scales, std::uintptr_t offsets, std::uintptr_t out, std::uintptr_t expert_start,
         int num_experts, int rows, int N, int K, int group_size, int64_t b_expert_bytes, int64_t quant_expert_stride,
         std::uintptr_t workspace, int64_t workspace_bytes, int sm_count, std::uintptr_t stream) {
        moe::sm90::GroupedArgs a;
        a.A = address_of<const void>(x);
        a.B = address_of<const void>(packed);
        a.scales = address_of<const void>(scales);
        a.offsets = address_of<const void>(offsets);
        a.D = address_of<void>(out);
        a.expert_start = address_of<const int32_t>(expert_start);
        a.num_experts = num_experts, a.rows = rows, a.N = N, a.K = K, a.group_size = group_size;
        a.b_expert_bytes = b_expert_bytes, a.quant_expert_stride = quant_expert_stride;
        a.workspace = address_of<void>(workspace);
        a.workspace_bytes = workspace_bytes;
        a.sm_count = sm_count;
        moe::sm90::grouped_gemm(config, key_of(key), a, reinterpret_cast<cudaStream_t>(stream));
      },
      py::arg("config"), py::arg("key"), py::arg("x"), py::arg("packed"), py::arg("scales"), py::arg("offsets"),
      py::arg("out"), py::arg("expert_start"), py::arg("num_experts"), py::arg("rows"), py::arg("N"), py::arg("K"),
      py::arg("group_size"), py::arg("b_expert_bytes"), py::arg("quant_expert_stride"), py::arg("workspace"),
      py::arg("workspace_bytes"), py::arg("sm_count"), py::arg("stream"),
      "out rows sorted by expert = x rows sorted by expert @ dequant(W[expert]) (moe/sm90/grouped_args.h)");
  m.def(
      "grouped_gemm",
      [](const std::string& config, const KeyTuple& key, bool gated, std::uintptr_t x, std::uintptr_t packed,
         std::uintptr_t scales, std::uintptr_t offsets, std::uintptr_t out, std::uintptr_t a_rows,
         std::uintptr_t slot_of, std::uintptr_t block_expert, std::uintptr_t num_padded, std::uintptr_t slot_weights,
         int a_rows_count, int N, int K, int group_size, int num_slots, int max_blocks, int64_t b_expert_stride,
         int64_t quant_expert_stride, int split_k, std::uintptr_t workspace, std::uintptr_t semaphores,
         std::uintptr_t stream) {
        moe::GroupedArgs a = grouped_operands(x, packed, scales, offsets, out, slot_weights, a_rows_count, N, K,
                                              group_size, num_slots, b_expert_stride, quant_expert_stride, split_k,
                                              workspace, semaphores);
        a.a_rows = address_of<const int32_t>(a_rows);
        a.slot_of = address_of<const int32_t>(slot_of);
        a.block_expert = address_of<const int32_t>(block_expert);
        a.num_padded = address_of<const int32_t>(num_padded);
        a.max_blocks = max_blocks;
        run_grouped(config, key, gated, a, stream);
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
