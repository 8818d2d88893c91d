// Stands in for the sm90 grouped form when sm_90a is not among the built architectures (CMakeLists.txt picks
// this file or runner.cu): no configs, and a call says how to get the form.
#include <stdexcept>

#include "mixgemm/moe/sm90/runner.h"

namespace mixgemm::moe::sm90 {
namespace {

[[noreturn]] void unavailable() {
  throw std::runtime_error("moe grouped gemm (sm90 form): this build has no sm90 kernels; rebuild with "
                           "MIXGEMM_CUDA_ARCHS including 90a");
}

}  // namespace

std::vector<std::string> compiled_configs(const KernelKey&) { return {}; }
int64_t workspace_bytes(const std::string&, const KernelKey&, int, int) { unavailable(); }
void grouped_gemm(const std::string&, const KernelKey&, const GroupedArgs&, cudaStream_t) { unavailable(); }

}  // namespace mixgemm::moe::sm90
