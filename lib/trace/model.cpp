#include "trace/model.hpp"

#include <iterator>

namespace attnprof::trace {

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::none: return "none";
    case Phase::plan: return "plan";
    case Phase::verify: return "verify";
    case Phase::warmup: return "warmup";
    case Phase::iteration: return "iter";
    case Phase::metrics: return "metrics";
  }
  return "none";
}

std::optional<Phase> parse_phase(const std::string& text) {
  for (Phase p : {Phase::none, Phase::plan, Phase::verify, Phase::warmup, Phase::iteration, Phase::metrics})
    if (text == to_string(p)) return p;
  return std::nullopt;
}

const char* to_string(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::HtoD: return "HtoD";
    case MemcpyKind::DtoH: return "DtoH";
    case MemcpyKind::HtoA: return "HtoA";
    case MemcpyKind::AtoH: return "AtoH";
    case MemcpyKind::AtoA: return "AtoA";
    case MemcpyKind::AtoD: return "AtoD";
    case MemcpyKind::DtoA: return "DtoA";
    case MemcpyKind::DtoD: return "DtoD";
    case MemcpyKind::HtoH: return "HtoH";
    case MemcpyKind::PtoP: return "PtoP";
    case MemcpyKind::unknown: break;
  }
  return "unknown";
}

MemcpyKind parse_memcpy_kind(const std::string& text) {
  for (int k = 0; k <= static_cast<int>(MemcpyKind::PtoP); ++k) {
    const auto kind = static_cast<MemcpyKind>(k);
    if (text == to_string(kind)) return kind;
  }
  return MemcpyKind::unknown;
}

const char* to_string(MemoryOperation operation) {
  return operation == MemoryOperation::allocation ? "allocation" : "release";
}

std::optional<MemoryOperation> parse_memory_operation(const std::string& text) {
  for (MemoryOperation op : {MemoryOperation::allocation, MemoryOperation::release})
    if (text == to_string(op)) return op;
  return std::nullopt;
}

std::uint64_t start_of(const Activity& activity) {
  return std::visit([](const auto& a) { return a.start_ns; }, activity);
}

CaptureHealth& CaptureHealth::operator+=(const CaptureHealth& other) {
  records += other.records;
  dropped_records += other.dropped_records;
  buffers_declined += other.buffers_declined;
  invalid_timestamps += other.invalid_timestamps;
  return *this;
}

bool ActivityBatch::empty() const { return size() == 0; }

std::size_t ActivityBatch::size() const {
  return kernels.size() + memcpys.size() + memsets.size() + api_calls.size() + annotations.size() +
         overheads.size() + memory.size();
}

namespace {
template <typename T>
void move_append(std::vector<T>& into, std::vector<T>& from) {
  into.insert(into.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  from.clear();
}
}  // namespace

void ActivityBatch::append(ActivityBatch&& other) {
  move_append(kernels, other.kernels);
  move_append(memcpys, other.memcpys);
  move_append(memsets, other.memsets);
  move_append(api_calls, other.api_calls);
  move_append(annotations, other.annotations);
  move_append(overheads, other.overheads);
  move_append(memory, other.memory);
}

}  // namespace attnprof::trace
