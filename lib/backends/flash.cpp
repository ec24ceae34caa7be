// PLACEHOLDER until the flash backend lands: reports itself unavailable.
#include "backends/factories.hpp"

namespace attnprof {
namespace {
class Placeholder final : public AttentionBackend {
 public:
  Unsupported check_device(const DeviceProperties&) const override { return "not built yet"; }
  Unsupported check_problem(const AttentionProblem&) const override { return "not built yet"; }
  void prepare(const AttentionProblem&, cudaStream_t) override {}
  void run(const AttentionProblem&, const AttentionBuffers&, cudaStream_t) override {}
};
}  // namespace
std::unique_ptr<AttentionBackend> make_flash_backend() { return std::make_unique<Placeholder>(); }
}  // namespace attnprof
