// Stands in for the sm90 path when sm_90a is not among the built architectures (CMakeLists.txt picks
// this file or sm90_runner.cu): no configs, and every call says how to get the path.
#include <stdexcept>

#include "mixgemm/sm90/sm90_runner.h"

namespace mixgemm::sm90 {
namespace {

[[noreturn]] void unavailable() {
  throw std::runtime_error("gemm_sm90: this build has no sm90 kernels; rebuild with MIXGEMM_CUDA_ARCHS including "
                           "90a (the default is 80;90a)");
}

}  // namespace

bool available() { return false; }
std::vector<CompiledKernel> compiled(ActType, int) { return {}; }
void can_implement(const Config&, const Args&) { unavailable(); }
Workspace workspace_size(const Config&, const Args&) { unavailable(); }
void run(const Config&, const Args&, cudaStream_t) { unavailable(); }

}  // namespace mixgemm::sm90
