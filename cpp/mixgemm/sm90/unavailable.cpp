// Stands in for the sm90 path when sm_90a is not among the built architectures (CMakeLists.txt picks this
// file or runner.cu): no configs, and every call says how to get the path.
#include <stdexcept>

#include "mixgemm/sm90/runner.h"

namespace mixgemm::sm90 {
namespace {

[[noreturn]] void unavailable() {
  throw std::runtime_error("gemm (sm90 path): this build has no sm90 kernels; rebuild with MIXGEMM_CUDA_ARCHS "
                           "including 90a");
}

}  // namespace

bool available() { return false; }
std::vector<Config> compiled_configs(const KernelKey&) { return {}; }
void can_implement(const Config&, const KernelKey&, const GemmShape&, const Split&) { unavailable(); }
PreparedLaunch prepare(const Config&, const KernelKey&, const GemmShape&, const Split&) { unavailable(); }

}  // namespace mixgemm::sm90
