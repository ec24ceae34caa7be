#include "summary/analysis.hpp"

#include "summary/findings.hpp"
#include "summary/roofline.hpp"
#include "summary/surprises.hpp"
#include "trace/annotate.hpp"
#include "trace/projection.hpp"

namespace attnprof {

void prepare_batch(trace::ActivityBatch& batch, const std::vector<DeviceProperties>& devices) {
  trace::annotate_occupancy(batch, devices);
  std::vector<trace::Annotation> on_gpu = trace::project_annotations_to_gpu(batch);
  batch.annotations.insert(batch.annotations.end(), on_gpu.begin(), on_gpu.end());
}

void prepare_kernel(trace::KernelActivity& kernel, const DeviceProperties& device) {
  trace::annotate_occupancy(kernel, device);
}

void analyze_case(CaseSummary& c, const std::vector<Expectation>* expectations) {
  add_findings(c);
  if (expectations != nullptr) add_surprises(c, *expectations);
}

void analyze_run(RunSummary& summary) {
  place_on_roofline(summary);
  add_run_findings(summary);
}

}  // namespace attnprof
