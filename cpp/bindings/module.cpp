// pybind11 module `mixgemm._C`: a thin, torch-free layer over the C++ core.
//
// Tensors cross this boundary as raw device addresses (Python's `tensor.data_ptr()`) plus sizes, and the
// stream as its handle (`torch.cuda.current_stream().cuda_stream`). Python (mixgemm/ops.py) validates
// dtypes, shapes, devices and contiguity first; the core re-checks the rules it relies on and throws
// std::invalid_argument / std::runtime_error, which pybind11 turns into ValueError / RuntimeError.
//
// Every kernel path is bound the same way (paths.h): its compiled configs by name for a kernel key, and one
// prepare(path, config name, key, shape, split) returning a PreparedLaunch. Bench-only yardsticks live in the
// submodule `_C.peers`, apart from the library's kernels.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/moe.h"
#include "bindings/paths.h"
#include "mixgemm/core/prepared_launch.h"
#include "mixgemm/core/shape_rules.h"
#include "mixgemm/dequant/awq_dequantize.h"
#include "mixgemm/dequant/packed_dequantize.h"
#include "mixgemm/peers/awq_gemm_baseline.h"
#include "mixgemm/peers/cutlass2_fp16.h"
#include "mixgemm/peers/read_floor.h"
#include "mixgemm/prepack/prepack.h"
#include "mixgemm/sm90/runner.h"

namespace py = pybind11;
using mixgemm::address_of;
using mixgemm::bindings::KeyTuple;
using mixgemm::bindings::key_of;

namespace {

cudaStream_t stream_of(std::uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

// The architectures this build holds machine code for, from CMake (comma-separated, e.g. "80,90").
std::vector<int> compiled_archs() {
  std::vector<int> archs;
  const std::string list = MIXGEMM_CUDA_ARCHS;
  std::size_t start = 0;
  while (start < list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    // Entries may carry a suffix such as "90a" or "80-real": the leading digits are the arch.
    archs.push_back(std::stoi(list.substr(start, end - start)));
    start = end + 1;
  }
  return archs;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls are not poisoned by it
    return 0;
  }
  return count;
}

mixgemm::ActType act_named(const std::string& name) {
  if (name == "fp16") return mixgemm::ActType::kFloat16;
  if (name == "bf16") return mixgemm::ActType::kBFloat16;
  throw std::invalid_argument("activation type must be 'fp16' or 'bf16', got '" + name + "'");
}

py::dict rule_dict(const mixgemm::ShapeRule& r) {
  py::dict d;
  d["path"] = r.path;
  d["layout"] = mixgemm::layout_name(r.layout);
  d["n_multiple"] = r.n_multiple;
  d["n_per_tile"] = r.n_per_tile;
  d["k_multiple"] = r.k_multiple;
  d["group_multiple"] = r.group_multiple;
  d["group_may_be_k"] = r.group_may_be_k;
  d["n_why"] = r.n_why;
  d["k_why"] = r.k_why;
  d["group_why"] = r.group_why;
  return d;
}

void bind_peers(py::module_& m) {
  m.doc() = "bench-only yardsticks the profiler times mixgemm against (mixgemm/bench/peers.py); not library paths";
  m.def(
      "cutlass2_fp16_gemm",
      [](std::uintptr_t a, std::uintptr_t b, std::uintptr_t d, int M, int N, int K, std::uintptr_t stream) {
        mixgemm::peers::cutlass2_fp16_gemm(address_of<const void>(a), address_of<const void>(b), address_of<void>(d),
                                           M, N, K, stream_of(stream));
      },
      py::arg("a"), py::arg("b"), py::arg("d"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("stream"),
      "d[M, N] = a[M, K] @ b[K, N], row-major fp16, fp32 accumulation (CUTLASS 2.x 128x256x64 mma.sync)");
  m.def(
      "read_floor",
      [](const std::vector<std::pair<std::uintptr_t, int64_t>>& buffers, std::uintptr_t folded,
         std::uintptr_t stream) {
        std::vector<mixgemm::peers::ReadBuffer> read;
        for (const auto& [data, bytes] : buffers) read.push_back({address_of<const void>(data), bytes});
        mixgemm::peers::read_floor(read.data(), static_cast<int>(read.size()), address_of<uint32_t>(folded),
                                   stream_of(stream));
      },
      py::arg("buffers"), py::arg("folded"), py::arg("stream"),
      "reads every byte of up to 3 (device pointer, bytes) buffers once, each block writing the xor of its "
      "words to folded[block]: the read_floor peer");
  m.attr("READ_FLOOR_MAX_BLOCKS") = mixgemm::peers::kReadFloorMaxBlocks;
  m.def(
      "awq_gemm_baseline",
      [](std::uintptr_t x, std::uintptr_t qweight, std::uintptr_t scales, std::uintptr_t qzeros,
         std::uintptr_t partials, int M, int N, int K, int group_size, int split_k_iters, std::uintptr_t stream) {
        mixgemm::peers::awq_gemm(address_of<const void>(x), address_of<const int32_t>(qweight),
                                 address_of<const void>(scales), address_of<const int32_t>(qzeros),
                                 address_of<void>(partials), M, N, K, group_size, split_k_iters, stream_of(stream));
      },
      py::arg("x"), py::arg("qweight"), py::arg("scales"), py::arg("qzeros"), py::arg("partials"), py::arg("M"),
      py::arg("N"), py::arg("K"), py::arg("group_size"), py::arg("split_k_iters"), py::arg("stream"),
      "our re-implementation of vLLM's AWQ GEMM (m16nXk32), the in-tree baseline: fp16 partials per split");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "mixgemm C++/CUDA core (raw device pointers; use the mixgemm package API instead)";

  m.def("compiled_archs", &compiled_archs, "CUDA architectures compiled into this build");
  m.def("cuda_device_count", &cuda_device_count, "CUDA devices visible to the CUDA runtime (0 if none)");
  m.def("sm90_available", &mixgemm::sm90::available, "whether this build holds the sm90 path's kernels");

  m.def(
      "shape_rules",
      [] {
        py::list rules;
        for (const auto* r = mixgemm::shape_rules_begin(); r != mixgemm::shape_rules_end(); ++r)
          rules.append(rule_dict(*r));
        return rules;
      },
      "the shape-rule table (cpp/generator/shape_rules.py): one dict per (path, layout) the path reads");

  // --- Kernel paths: compiled configs and prepared launches, one binding for all ---
  py::class_<mixgemm::PreparedLaunch>(m, "PreparedLaunch",
                                      "a plan's launch: its kernel resolved and its shape checked once; call it "
                                      "with (x, packed, scales, offsets, bias, out, workspace, semaphores, stream) "
                                      "addresses")
      .def("__call__",
           [](const mixgemm::PreparedLaunch& launch, std::uintptr_t x, std::uintptr_t packed, std::uintptr_t scales,
              std::uintptr_t offsets, std::uintptr_t bias, std::uintptr_t out, std::uintptr_t workspace,
              std::uintptr_t semaphores, std::uintptr_t stream) {
             launch({x, packed, scales, offsets, bias, out, workspace, semaphores}, stream_of(stream));
           })
      .def_property_readonly("workspace_bytes",
                             [](const mixgemm::PreparedLaunch& l) { return l.scratch().bytes; })
      .def_property_readonly("semaphores", [](const mixgemm::PreparedLaunch& l) { return l.scratch().semaphores; })
      .def("__repr__", [](const mixgemm::PreparedLaunch& l) { return "<PreparedLaunch " + l.description() + ">"; });

  m.def("paths", &mixgemm::bindings::path_names, "the kernel paths this module binds");
  m.def(
      "compiled_configs",
      [](const std::string& path, const KeyTuple& key) { return mixgemm::bindings::path(path).compiled(key_of(key)); },
      py::arg("path"), py::arg("key"),
      "names of the configs of `path` compiled for the kernel key (act, bits, layout, quant, act_scale)");
  m.def(
      "prepare",
      [](const std::string& path, const std::string& config, const KeyTuple& key, int M, int N, int K, int group_size,
         int split_k, const std::string& split_mode) {
        return mixgemm::bindings::path(path).prepare(config, key_of(key), {M, N, K, group_size},
                                                    {split_k, mixgemm::bindings::split_mode_of(split_mode)});
      },
      py::arg("path"), py::arg("config"), py::arg("key"), py::arg("M"), py::arg("N"), py::arg("K"),
      py::arg("group_size"), py::arg("split_k") = 1, py::arg("split_mode") = "none",
      "the prepared launch of config `config` (a name from compiled_configs) of `path` for the kernel key, shape and "
      "split; raises ValueError naming the rule the problem breaks");

  // --- Weight preparation and the standalone dequantize kernels ---
  m.def(
      "dequantize_packed",
      [](const KeyTuple& key, std::uintptr_t packed, std::uintptr_t scales, std::uintptr_t offsets, std::uintptr_t out,
         int N, int K, int group_size, std::uintptr_t stream) {
        mixgemm::dequant::dequantize_packed(key_of(key), address_of<const int32_t>(packed),
                                            address_of<const void>(scales), address_of<const void>(offsets),
                                            address_of<void>(out), N, K, group_size, stream_of(stream));
      },
      py::arg("key"), py::arg("packed"), py::arg("scales"), py::arg("offsets"), py::arg("out"), py::arg("N"),
      py::arg("K"), py::arg("group_size"), py::arg("stream"),
      "W^T [N, K] (row-major, the key's activation type) from a PackedWeight's packed words, scales and offsets");
  m.def(
      "awq_dequantize",
      [](std::uintptr_t qweight, std::uintptr_t scales, std::uintptr_t qzeros, std::uintptr_t out, int K, int N,
         int group_size, const std::string& act, std::uintptr_t stream) {
        mixgemm::dequant::awq_dequantize(address_of<const int32_t>(qweight), address_of<const void>(scales),
                                         address_of<const int32_t>(qzeros), address_of<void>(out), K, N, group_size,
                                         act_named(act), stream_of(stream));
      },
      py::arg("qweight"), py::arg("scales"), py::arg("qzeros"), py::arg("out"), py::arg("K"), py::arg("N"),
      py::arg("group_size"), py::arg("act"), py::arg("stream"));
  m.def(
      "prepack_awq_qweight",
      [](std::uintptr_t awq_qweight, std::uintptr_t packed, int K, int N, std::uintptr_t stream) {
        mixgemm::prepack::awq_to_kernel_layout(address_of<const int32_t>(awq_qweight), address_of<int32_t>(packed), K,
                                               N, stream_of(stream));
      },
      py::arg("awq_qweight"), py::arg("packed"), py::arg("K"), py::arg("N"), py::arg("stream"));
  m.def(
      "fold_awq_zeros",
      [](std::uintptr_t awq_qzeros, std::uintptr_t scales, std::uintptr_t offsets, int groups, int N,
         const std::string& act, std::uintptr_t stream) {
        mixgemm::prepack::fold_awq_zeros(address_of<const int32_t>(awq_qzeros), address_of<const void>(scales),
                                         address_of<void>(offsets), groups, N, act_named(act), stream_of(stream));
      },
      py::arg("awq_qzeros"), py::arg("scales"), py::arg("offsets"), py::arg("groups"), py::arg("N"), py::arg("act"),
      py::arg("stream"));

  py::module_ peers = m.def_submodule("peers");
  bind_peers(peers);
  py::module_ moe = m.def_submodule("moe");
  mixgemm::bindings::bind_moe(moe);
}
