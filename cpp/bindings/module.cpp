// pybind11 module `mixgemm._C`: a thin, torch-free layer over the C++ core.
//
// Tensors cross this boundary as raw device addresses (Python's `tensor.data_ptr()`) plus sizes, and the
// stream as its handle (`torch.cuda.current_stream().cuda_stream`). Python (mixgemm/ops.py) validates
// dtypes, shapes, devices and contiguity first; the core re-checks the rules it relies on and throws
// std::invalid_argument / std::runtime_error, which pybind11 turns into ValueError / RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "mixgemm/baseline/awq_gemm.h"
#include "mixgemm/common/check.h"
#include "mixgemm/dequant/awq_dequantize.h"
#include "mixgemm/dequant/packed_dequantize.h"
#include "mixgemm/gemm/device/gemm_runner.h"
#include "mixgemm/gemv/gemv_runner.h"
#include "mixgemm/peers/cutlass2_fp16.h"
#include "mixgemm/peers/read_floor.h"
#include "mixgemm/prepack/prepack.h"
#include "mixgemm/sm90/sm90_runner.h"

namespace py = pybind11;

namespace {

template <typename T>
T* ptr(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

cudaStream_t stream_of(std::uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

// A tile config crosses to Python as the tuple (tile_m, tile_n, tile_k, warp_m, warp_n, warp_k, stages).
using ConfigTuple = std::tuple<int, int, int, int, int, int, int>;

mixgemm::gemm::TileConfig config_of(const ConfigTuple& t) {
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t), std::get<5>(t),
          std::get<6>(t)};
}

// A decode config crosses as (m_tiles, warps).
using GemvTuple = std::tuple<int, int>;

mixgemm::gemv::GemvConfig gemv_config_of(const GemvTuple& t) { return {std::get<0>(t), std::get<1>(t)}; }

mixgemm::gemm::SplitKMode split_k_mode_of(const std::string& mode) {
  if (mode == "none") return mixgemm::gemm::SplitKMode::kNone;
  if (mode == "serial") return mixgemm::gemm::SplitKMode::kSerial;
  if (mode == "parallel") return mixgemm::gemm::SplitKMode::kParallel;
  if (mode == "streamk") return mixgemm::gemm::SplitKMode::kStreamK;
  throw std::invalid_argument("gemm: split_k_mode must be 'none', 'serial', 'parallel' or 'streamk', got '" + mode +
                              "'");
}

mixgemm::gemm::ActType act_of(bool bf16) {
  return bf16 ? mixgemm::gemm::ActType::kBFloat16 : mixgemm::gemm::ActType::kFloat16;
}

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

// An sm90 config crosses to Python as (tile_m, tile_n, tile_k, cluster_m, cluster_n, schedule, scheduler)
// with schedule "coop" / "pingpong" and scheduler "persistent" / "streamk" (tools/generate_kernels.py).
using Sm90ConfigTuple = std::tuple<int, int, int, int, int, std::string, std::string>;

mixgemm::sm90::Config sm90_config_of(const Sm90ConfigTuple& t) {
  namespace s9 = mixgemm::sm90;
  const std::string& schedule = std::get<5>(t);
  const std::string& scheduler = std::get<6>(t);
  if (schedule != "coop" && schedule != "pingpong")
    throw std::invalid_argument("gemm_sm90: schedule must be 'coop' or 'pingpong', got '" + schedule + "'");
  if (scheduler != "persistent" && scheduler != "streamk")
    throw std::invalid_argument("gemm_sm90: scheduler must be 'persistent' or 'streamk', got '" + scheduler + "'");
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t),
          schedule == "coop" ? s9::Schedule::kCooperative : s9::Schedule::kPingpong,
          scheduler == "streamk" ? s9::Scheduler::kStreamK : s9::Scheduler::kPersistent};
}

Sm90ConfigTuple sm90_tuple_of(const mixgemm::sm90::Config& c) {
  namespace s9 = mixgemm::sm90;
  return {c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n,
          c.schedule == s9::Schedule::kCooperative ? "coop" : "pingpong",
          c.scheduler == s9::Scheduler::kStreamK ? "streamk" : "persistent"};
}

// The pointers and sizes of one sm90 call; offsets == 0 selects the scale-only mode.
mixgemm::sm90::Args sm90_args_of(std::uintptr_t x, std::uintptr_t packed, std::uintptr_t scales,
                                 std::uintptr_t offsets, std::uintptr_t bias, std::uintptr_t out,
                                 std::uintptr_t workspace, int64_t workspace_bytes, std::uintptr_t locks,
                                 int64_t lock_count, int M, int N, int K, int group_size, bool bf16, int bits,
                                 int split_k) {
  mixgemm::sm90::Args args;
  args.A = ptr<const void>(x);
  args.B = ptr<const void>(packed);
  args.scales = ptr<const void>(scales);
  args.offsets = ptr<const void>(offsets);
  args.bias = ptr<const void>(bias);
  args.D = ptr<void>(out);
  args.workspace = ptr<void>(workspace);
  args.workspace_bytes = workspace_bytes;
  args.locks = ptr<int32_t>(locks);
  args.lock_count = lock_count;
  args.M = M, args.N = N, args.K = K, args.group_size = group_size;
  args.act = act_of(bf16);
  args.bits = bits;
  args.split_k = split_k;
  return args;
}

// One plan's launch (python/mixgemm/ops.py, _Plan), bound once: the path, config and sizes of a call shape
// live here, so an eager call hands over only its addresses and stream. pybind11 converts every argument of
// every call, and the raw entry points' 16-18 arguments (config tuples, mode strings) cost the host more
// than the launch itself (issue 9). `run` goes through the same runner (and its rule checks) as they do.
struct PreparedLaunch {
  // The addresses of one call. `extra` is the split semaphores' address: the sm80 and decode paths' tile
  // counters, the sm90 path's stream-K flags (all zero between calls).
  struct Addresses {
    std::uintptr_t x, packed, scales, offsets, bias, out, workspace, extra;
  };
  std::string description;
  std::function<void(const Addresses&, cudaStream_t)> run;
};

mixgemm::gemm::WeightLayout layout_of(bool sm90_layout) {
  return sm90_layout ? mixgemm::gemm::WeightLayout::kSm90 : mixgemm::gemm::WeightLayout::kSm80;
}

// The sizes every call of a shape shares, in the sm80 and decode paths' GemmArgs.
mixgemm::gemm::GemmArgs shape_args(int M, int N, int K, int group_size, int split_k, mixgemm::gemm::SplitKMode mode,
                                   bool bf16, int bits, mixgemm::gemm::WeightLayout layout) {
  mixgemm::gemm::GemmArgs args;
  args.M = M, args.N = N, args.K = K, args.group_size = group_size;
  args.split_k = split_k;
  args.mode = mode;
  args.act = act_of(bf16);
  args.bits = bits;
  args.layout = layout;
  return args;
}

// The decode path's shape: it reduces split-K in-kernel (serial mode) and reads either weight layout.
mixgemm::gemm::GemmArgs decode_shape_args(int M, int N, int K, int group_size, int split_k, bool bf16, int bits,
                                          bool sm90_layout) {
  namespace g = mixgemm::gemm;
  return shape_args(M, N, K, group_size, split_k, split_k > 1 ? g::SplitKMode::kSerial : g::SplitKMode::kNone, bf16,
                    bits, layout_of(sm90_layout));
}

// `shape` with one call's addresses filled in.
mixgemm::gemm::GemmArgs with_addresses(mixgemm::gemm::GemmArgs args, const PreparedLaunch::Addresses& a) {
  args.A = ptr<const void>(a.x);
  args.B = ptr<const int32_t>(a.packed);
  args.scales = ptr<const void>(a.scales);
  args.offsets = ptr<const void>(a.offsets);
  args.bias = ptr<const void>(a.bias);
  args.D = ptr<void>(a.out);
  args.workspace = ptr<float>(a.workspace);
  args.semaphores = ptr<int32_t>(a.extra);
  return args;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the error so later calls are not poisoned by it
    return 0;
  }
  return count;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "mixgemm C++/CUDA core (raw device pointers; use the mixgemm package API instead)";

  m.def("compiled_archs", &compiled_archs, "CUDA architectures compiled into this build");
  m.def("cuda_device_count", &cuda_device_count, "CUDA devices visible to the CUDA runtime (0 if none)");

  m.def(
      "awq_dequantize",
      [](std::uintptr_t qweight, std::uintptr_t scales, std::uintptr_t qzeros, std::uintptr_t out, int K,
         int N, int group_size, bool bf16, std::uintptr_t stream) {
        mixgemm::dequant::awq_dequantize(ptr<const int32_t>(qweight), ptr<const void>(scales),
                                         ptr<const int32_t>(qzeros), ptr<void>(out), K, N, group_size, bf16,
                                         stream_of(stream));
      },
      py::arg("qweight"), py::arg("scales"), py::arg("qzeros"), py::arg("out"), py::arg("K"), py::arg("N"),
      py::arg("group_size"), py::arg("bf16"), py::arg("stream"));

  m.def(
      "dequantize_packed",
      [](std::uintptr_t packed, std::uintptr_t scales, std::uintptr_t offsets, std::uintptr_t out, int N, int K,
         int group_size, int bits, bool bf16, bool sm90_layout, std::uintptr_t stream) {
        mixgemm::dequant::dequantize_packed(layout_of(sm90_layout), bits,
                                            bf16, ptr<const int32_t>(packed), ptr<const void>(scales),
                                            ptr<const void>(offsets), ptr<void>(out), N, K, group_size,
                                            stream_of(stream));
      },
      py::arg("packed"), py::arg("scales"), py::arg("offsets"), py::arg("out"), py::arg("N"), py::arg("K"),
      py::arg("group_size"), py::arg("bits"), py::arg("bf16"), py::arg("sm90_layout"), py::arg("stream"),
      "W^T [N, K] (row-major, the activation type) from a PackedWeight's packed words, scales and offsets");

  m.def(
      "baseline_awq_gemm",
      [](std::uintptr_t x, std::uintptr_t qweight, std::uintptr_t scales, std::uintptr_t qzeros,
         std::uintptr_t partials, int M, int N, int K, int group_size, int split_k_iters,
         std::uintptr_t stream) {
        mixgemm::baseline::awq_gemm(ptr<const void>(x), ptr<const int32_t>(qweight), ptr<const void>(scales),
                                    ptr<const int32_t>(qzeros), ptr<void>(partials), M, N, K, group_size,
                                    split_k_iters, stream_of(stream));
      },
      py::arg("x"), py::arg("qweight"), py::arg("scales"), py::arg("qzeros"), py::arg("partials"), py::arg("M"),
      py::arg("N"), py::arg("K"), py::arg("group_size"), py::arg("split_k_iters"), py::arg("stream"));

  m.def(
      "prepack_awq_qweight",
      [](std::uintptr_t awq_qweight, std::uintptr_t packed, int K, int N, std::uintptr_t stream) {
        mixgemm::prepack::awq_to_kernel_layout(ptr<const int32_t>(awq_qweight), ptr<int32_t>(packed), K, N,
                                               stream_of(stream));
      },
      py::arg("awq_qweight"), py::arg("packed"), py::arg("K"), py::arg("N"), py::arg("stream"));

  m.def(
      "fold_awq_zeros",
      [](std::uintptr_t awq_qzeros, std::uintptr_t scales, std::uintptr_t offsets, int groups, int N, bool bf16,
         std::uintptr_t stream) {
        mixgemm::prepack::fold_awq_zeros(ptr<const int32_t>(awq_qzeros), ptr<const void>(scales),
                                         ptr<void>(offsets), groups, N, bf16, stream_of(stream));
      },
      py::arg("awq_qzeros"), py::arg("scales"), py::arg("offsets"), py::arg("groups"), py::arg("N"),
      py::arg("bf16"), py::arg("stream"));

  m.def(
      "gemm_configs",
      [](bool bf16, int bits, bool sm90_layout) {
        std::vector<ConfigTuple> out;
        for (const auto& c : mixgemm::gemm::compiled_configs(act_of(bf16), bits, layout_of(sm90_layout)))
          out.emplace_back(c.tile_m, c.tile_n, c.tile_k, c.warp_m, c.warp_n, c.warp_k, c.stages);
        return out;
      },
      py::arg("bf16"), py::arg("bits") = 4, py::arg("sm90_layout") = false,
      "compiled tile configs of the sm80 path as (tile_m, tile_n, tile_k, warp_m, warp_n, warp_k, stages), for "
      "weights in the sm80 layout or, with sm90_layout, the sm90 one");

  m.def(
      "gemm_workspace_size",
      [](const ConfigTuple& config, int M, int N, int split_k, const std::string& mode) {
        const auto size = mixgemm::gemm::workspace_size(config_of(config), M, N, split_k, split_k_mode_of(mode));
        return std::make_pair(size.floats, size.semaphores);
      },
      py::arg("config"), py::arg("M"), py::arg("N"), py::arg("split_k"), py::arg("mode"),
      "(fp32 workspace elements, int32 semaphores) one call needs");

  m.def(
      "gemm",
      [](const ConfigTuple& config, std::uintptr_t x, std::uintptr_t packed, std::uintptr_t scales,
         std::uintptr_t offsets, std::uintptr_t bias, std::uintptr_t out, std::uintptr_t workspace,
         std::uintptr_t semaphores, int M, int N, int K, int group_size, int split_k, const std::string& mode,
         bool bf16, std::uintptr_t stream, int bits, bool sm90_layout) {
        const auto args = with_addresses(
            shape_args(M, N, K, group_size, split_k, split_k_mode_of(mode), bf16, bits, layout_of(sm90_layout)),
            {x, packed, scales, offsets, bias, out, workspace, semaphores});
        mixgemm::gemm::run_gemm(config_of(config), args, stream_of(stream));
      },
      py::arg("config"), py::arg("x"), py::arg("packed"), py::arg("scales"), py::arg("offsets"), py::arg("bias"),
      py::arg("out"), py::arg("workspace"), py::arg("semaphores"), py::arg("M"), py::arg("N"), py::arg("K"),
      py::arg("group_size"), py::arg("split_k"), py::arg("split_k_mode"), py::arg("bf16"), py::arg("stream"),
      py::arg("bits") = 4, py::arg("sm90_layout") = false);
  m.def(
      "gemv_configs",
      [](bool bf16, int bits) {
        std::vector<GemvTuple> out;
        for (const auto& c : mixgemm::gemv::compiled_configs(act_of(bf16), bits)) out.emplace_back(c.m_tiles, c.warps);
        return out;
      },
      py::arg("bf16"), py::arg("bits") = 4, "compiled decode (GEMV) configs as (m_tiles, warps)");

  m.def(
      "gemv_workspace_size",
      [](int M, int N, int split_k) {
        const auto size = mixgemm::gemv::workspace_size(M, N, split_k);
        return std::make_pair(size.floats, size.semaphores);
      },
      py::arg("M"), py::arg("N"), py::arg("split_k"), "(fp32 workspace elements, int32 semaphores) one call needs");

  m.def(
      "gemv",
      [](const GemvTuple& config, std::uintptr_t x, std::uintptr_t packed, std::uintptr_t scales,
         std::uintptr_t offsets, std::uintptr_t bias, std::uintptr_t out, std::uintptr_t workspace,
         std::uintptr_t semaphores, int M, int N, int K, int group_size, int split_k, bool bf16,
         std::uintptr_t stream, int bits, bool sm90_layout) {
        const auto args = with_addresses(decode_shape_args(M, N, K, group_size, split_k, bf16, bits, sm90_layout),
                                         {x, packed, scales, offsets, bias, out, workspace, semaphores});
        mixgemm::gemv::run_gemv(gemv_config_of(config), args, stream_of(stream));
      },
      py::arg("config"), py::arg("x"), py::arg("packed"), py::arg("scales"), py::arg("offsets"), py::arg("bias"),
      py::arg("out"), py::arg("workspace"), py::arg("semaphores"), py::arg("M"), py::arg("N"), py::arg("K"),
      py::arg("group_size"), py::arg("split_k"), py::arg("bf16"), py::arg("stream"), py::arg("bits") = 4,
      py::arg("sm90_layout") = false,
      "the decode path: out[M, N] = x @ dequant(W) (+ bias) for M <= 8 * m_tiles, on a weight in the sm80 "
      "layout (prepack) or, with sm90_layout, the sm90 one");

  // --- Prepared launches (issue 9): one per plan, called with the addresses of each call ---
  py::class_<PreparedLaunch>(m, "PreparedLaunch",
                             "a call shape's launch with its config and sizes bound; call it with (x, packed, "
                             "scales, offsets, bias, out, workspace, semaphores, stream) addresses")
      .def("__call__",
           [](const PreparedLaunch& launch, std::uintptr_t x, std::uintptr_t packed, std::uintptr_t scales,
              std::uintptr_t offsets, std::uintptr_t bias, std::uintptr_t out, std::uintptr_t workspace,
              std::uintptr_t extra, std::uintptr_t stream) {
             launch.run({x, packed, scales, offsets, bias, out, workspace, extra}, stream_of(stream));
           })
      .def("__repr__", [](const PreparedLaunch& launch) { return "<PreparedLaunch " + launch.description + ">"; });

  m.def(
      "prepare_gemm",
      [](const ConfigTuple& config, int M, int N, int K, int group_size, int split_k, const std::string& mode,
         bool bf16, int bits, bool sm90_layout) {
        const auto tile = config_of(config);
        const auto shape = shape_args(M, N, K, group_size, split_k, split_k_mode_of(mode), bf16, bits,
                                      layout_of(sm90_layout));
        return PreparedLaunch{"sm80 " + tile.name() + (sm90_layout ? " sm90-layout" : "") + " M=" + std::to_string(M),
                              [tile, shape](const PreparedLaunch::Addresses& a, cudaStream_t stream) {
                                mixgemm::gemm::run_gemm(tile, with_addresses(shape, a), stream);
                              }};
      },
      py::arg("config"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("group_size"), py::arg("split_k"),
      py::arg("split_k_mode"), py::arg("bf16"), py::arg("bits") = 4, py::arg("sm90_layout") = false,
      "gemm's launch for one call shape");

  m.def(
      "prepare_gemv",
      [](const GemvTuple& config, int M, int N, int K, int group_size, int split_k, bool bf16, int bits,
         bool sm90_layout) {
        const auto decode = gemv_config_of(config);
        const auto shape = decode_shape_args(M, N, K, group_size, split_k, bf16, bits, sm90_layout);
        return PreparedLaunch{"decode " + decode.name() + " M=" + std::to_string(M),
                              [decode, shape](const PreparedLaunch::Addresses& a, cudaStream_t stream) {
                                mixgemm::gemv::run_gemv(decode, with_addresses(shape, a), stream);
                              }};
      },
      py::arg("config"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("group_size"), py::arg("split_k"),
      py::arg("bf16"), py::arg("bits") = 4, py::arg("sm90_layout") = false, "gemv's launch for one call shape");

  m.def(
      "prepare_gemm_sm90",
      [](const Sm90ConfigTuple& config, int M, int N, int K, int group_size, bool bf16, int bits, int split_k,
         int64_t workspace_bytes, int64_t semaphore_count) {
        const auto sm90 = sm90_config_of(config);
        return PreparedLaunch{
            "sm90 " + sm90.name() + " split_k=" + std::to_string(split_k) + " M=" + std::to_string(M),
            [=](const PreparedLaunch::Addresses& a, cudaStream_t stream) {
              mixgemm::sm90::run(sm90,
                                 sm90_args_of(a.x, a.packed, a.scales, a.offsets, a.bias, a.out, a.workspace,
                                              workspace_bytes, a.extra, semaphore_count, M, N, K, group_size, bf16,
                                              bits, split_k),
                                 stream);
            }};
      },
      py::arg("config"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("group_size"), py::arg("bf16"),
      py::arg("bits"), py::arg("split_k"), py::arg("workspace_bytes"), py::arg("semaphore_count"),
      "gemm_sm90's launch for one call shape, with the workspace bytes and semaphore count that "
      "gemm_sm90_workspace_size gave for it");

  // --- Peers: kernels the profiler times ours against (mixgemm/bench/peers.py), not library paths ---
  m.def(
      "cutlass2_fp16_gemm",
      [](std::uintptr_t a, std::uintptr_t b, std::uintptr_t d, int M, int N, int K, std::uintptr_t stream) {
        mixgemm::peers::cutlass2_fp16_gemm(ptr<const void>(a), ptr<const void>(b), ptr<void>(d), M, N, K,
                                           stream_of(stream));
      },
      py::arg("a"), py::arg("b"), py::arg("d"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("stream"),
      "d[M, N] = a[M, K] @ b[K, N], row-major fp16, fp32 accumulation (CUTLASS 2.x 128x256x64 mma.sync)");

  m.def(
      "read_floor",
      [](const std::vector<std::pair<std::uintptr_t, int64_t>>& buffers, std::uintptr_t folded,
         std::uintptr_t stream) {
        std::vector<mixgemm::peers::ReadBuffer> read;
        for (const auto& [data, bytes] : buffers) read.push_back({ptr<const void>(data), bytes});
        mixgemm::peers::read_floor(read.data(), static_cast<int>(read.size()), ptr<uint32_t>(folded),
                                   stream_of(stream));
      },
      py::arg("buffers"), py::arg("folded"), py::arg("stream"),
      "reads every byte of up to 3 (device pointer, bytes) buffers once, each block writing the xor of its "
      "words to folded[block]: the read_floor peer");
  m.attr("READ_FLOOR_MAX_BLOCKS") = mixgemm::peers::kReadFloorMaxBlocks;

  // --- sm90 path (wgmma + TMA, CUTLASS 3.x; sm_90a builds only) ---
  m.def("sm90_available", &mixgemm::sm90::available, "whether this build holds the sm90 path's kernels");

  m.def(
      "gemm_sm90_configs",
      [](bool bf16, int bits) {
        std::vector<std::pair<Sm90ConfigTuple, std::string>> out;
        for (const auto& k : mixgemm::sm90::compiled(act_of(bf16), bits))
          out.emplace_back(sm90_tuple_of(k.config), k.mode == mixgemm::sm90::Mode::kScale ? "scale" : "offset");
        return out;
      },
      py::arg("bf16"), py::arg("bits") = 4,
      "compiled sm90 kernels as ((tile_m, tile_n, tile_k, cluster_m, cluster_n, schedule, scheduler), mode) "
      "with mode 'scale' (scale-only) or 'offset' (folded zero points); empty without sm_90a");

  m.def(
      "gemm_sm90_workspace_size",
      [](const Sm90ConfigTuple& config, int M, int N, int K, int group_size, bool bf16, int bits,
         bool zero_points, int split_k) {
        // Placeholder addresses (16-byte aligned, never dereferenced) so the rule checks see a real call.
        const std::uintptr_t p = 256;
        const auto need = mixgemm::sm90::workspace_size(
            sm90_config_of(config),
            sm90_args_of(p, p, p, zero_points ? p : 0, 0, p, 0, 0, 0, 0, M, N, K, group_size, bf16, bits, split_k));
        return std::make_pair(need.bytes, need.locks);
      },
      py::arg("config"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("group_size"), py::arg("bf16"),
      py::arg("bits"), py::arg("zero_points"), py::arg("split_k") = 1,
      "(workspace bytes, int32 semaphores) one sm90 call needs: stream-K's fp32 partials and split flags, the "
      "flags zero before the call (it leaves them zero); (0, 0) for persistent configs");

  m.def(
      "gemm_sm90",
      [](const Sm90ConfigTuple& config, std::uintptr_t x, std::uintptr_t packed, std::uintptr_t scales,
         std::uintptr_t offsets, std::uintptr_t bias, std::uintptr_t out, std::uintptr_t workspace,
         int64_t workspace_bytes, std::uintptr_t semaphores, int64_t semaphore_count, int M, int N, int K,
         int group_size, bool bf16, int bits, std::uintptr_t stream, int split_k) {
        mixgemm::sm90::run(sm90_config_of(config),
                           sm90_args_of(x, packed, scales, offsets, bias, out, workspace, workspace_bytes, semaphores,
                                        semaphore_count, M, N, K, group_size, bf16, bits, split_k),
                           stream_of(stream));
      },
      py::arg("config"), py::arg("x"), py::arg("packed"), py::arg("scales"), py::arg("offsets"), py::arg("bias"),
      py::arg("out"), py::arg("workspace"), py::arg("workspace_bytes"), py::arg("semaphores"),
      py::arg("semaphore_count"), py::arg("M"), py::arg("N"), py::arg("K"),
      py::arg("group_size"), py::arg("bf16"), py::arg("bits"), py::arg("stream"), py::arg("split_k") = 1,
      "y = x @ W (+ bias) on the sm90 path; packed must be in the sm90 layout (prepack_sm90); offsets = 0 "
      "selects the scale-only kernel; split_k > 1 (stream-K configs) splits K in split_k runs; workspace and "
      "semaphores as gemm_sm90_workspace_size gives them (the semaphores zeroed; the call leaves them zero)");
}
