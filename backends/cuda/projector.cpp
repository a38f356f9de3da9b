// CUDA_FLASH's and HOPPER_FLASH's projector: asks choose_projection per call
// and runs cuBLASLt or the own kernels.
#include <cstdlib>
#include <optional>
#include <string>

#include "cublaslt_projection.hpp"
#include "mla/config.hpp"
#include "projection.hpp"
#include "projection_choice.hpp"

namespace mla::cuda_flash {
namespace {

class CudaProjector final : public gpu::LatentProjector {
 public:
  explicit CudaProjector(ProjectionOverride how) : how_(how) {}

  void project(Queue& queue, const TensorView& latents, const TensorView& kv_b_proj, const TensorView& k,
               const TensorView& v) override {
    const ProjectionChoice choice = choose_projection(latents, kv_b_proj, k, v, how_);
    if (choice.refused) {
      raise(ErrorCategory::not_supported, std::string("project_latents: ") + projection_env +
                                              "=cublaslt, but cuBLASLt cannot serve this call: " + choice.reason);
    }
    if (choice.path != logged_) {
      logged_ = choice.path;
      log(LogLevel::debug, "CUDA up-projection: " + std::string(projection_path_name(choice.path)) +
                               (choice.reason.empty() ? std::string() : " (" + choice.reason + ")"));
    }
    if (choice.path != ProjectionPath::cublaslt) return project_latents(queue, latents, kv_b_proj, k, v);
    try {
      cublaslt_.project(queue, latents, kv_b_proj, k, v);
    } catch (const Error& error) {
      // No algorithm for this shape (refused before anything is enqueued):
      // unless cuBLASLt was insisted on, the own kernel serves it.
      if (error.category() != ErrorCategory::not_supported || how_ == ProjectionOverride::cublaslt) throw;
      if (logged_ != ProjectionPath::tensor_cores) {
        logged_ = ProjectionPath::tensor_cores;
        log(LogLevel::warn, "CUDA up-projection: own tensor-core kernel, " + std::string(error.what()));
      }
      project_latents(queue, latents, kv_b_proj, k, v);
    }
  }

 private:
  ProjectionOverride how_;
  CublasLtProjection cublaslt_;
  std::optional<ProjectionPath> logged_;  // the path last logged: one line per change
};

}  // namespace

std::unique_ptr<gpu::LatentProjector> make_projector() {
  return std::make_unique<CudaProjector>(parse_projection_override(std::getenv(projection_env)));
}

}  // namespace mla::cuda_flash
