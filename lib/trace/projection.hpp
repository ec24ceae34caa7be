// Projects host-side annotations onto the GPU streams their work ran on (Kineto's
// gpu_user_annotation): for each tagged host range, the span from the first to the last GPU
// record with a matching tag, per (device, stream).
#pragma once

#include <vector>

#include "trace/model.hpp"

namespace attnprof::trace {

// Does a GPU record tagged `record` fall under a host range tagged `range`? A range phase of
// `none` matches every phase of its case; a range iteration of -1 matches every iteration.
bool tag_covers(const SweepTag& range, const SweepTag& record);

std::vector<Annotation> project_annotations_to_gpu(const ActivityBatch& batch);

}  // namespace attnprof::trace
