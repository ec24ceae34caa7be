// The per-case aggregation, one GPU record at a time: a run hands it the case's batch, `attnprof
// report` hands it the records of a trace as it streams past, so a case's summary never needs
// the case's records in memory. Only timed-iteration records (phase `iteration`) count, but for
// memory records: every one of the case's counts toward what it holds (summary/case_memory.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "summary/case_memory.hpp"
#include "summary/summary.hpp"
#include "trace/model.hpp"

namespace attnprof {

class CaseAccumulator {
 public:
  using Span = std::pair<std::uint64_t, std::uint64_t>;  // first GPU start, last GPU end

  void add(const trace::KernelActivity& kernel);
  void add(const trace::MemcpyActivity& memcpy);
  void add(const trace::MemsetActivity& memset);
  void add(const trace::MemoryActivity& memory);
  // The batch's kernels, memcpys, memsets and memory records.
  void add(const trace::ActivityBatch& batch);

  // The GPU span of every timed iteration that had GPU work, by iteration index.
  const std::map<int, Span>& iteration_spans() const { return spans_; }
  // Each span in microseconds, in iteration order: the timing of traces without CUDA events.
  std::vector<double> span_us() const;

  // The case's summary: counts and bytes per iteration are totals over `measured.iterations`
  // (1 when unknown). Kernels carry their occupancy already (trace/annotate.hpp). Findings and
  // surprises are the caller's.
  CaseSummary summarize(const CaseMeasurements& measured) const;

 private:
  struct KernelTotals {
    KernelSummary first;  // attributes of the first launch of this name
    std::uint64_t launches = 0;
    std::uint64_t ns = 0;
  };
  struct OpTotals {
    std::uint64_t count = 0;
    std::uint64_t bytes = 0;
    std::uint64_t ns = 0;
    std::string launch_api;  // the last one seen, as the batch aggregation always kept
  };

  void extend_span(const trace::SweepTag& tag, std::uint64_t start_ns, std::uint64_t end_ns);
  // A memcpy or memset of a timed iteration: into its op's totals and its kind's.
  template <typename Transfer>
  void add_transfer(const Transfer& t, const std::string& op, std::uint64_t& count, std::uint64_t& bytes,
                    std::vector<std::string>& apis);

  // Durations and bytes are summed as integers, so the result does not depend on the order the
  // records arrive in (a batch's vectors, or a trace's interleaving).
  std::vector<KernelTotals> kernels_;  // in order of first launch
  std::unordered_map<std::string, std::size_t> kernel_index_;
  std::map<std::string, OpTotals> ops_;  // "memcpy DtoD", "memset"
  std::uint64_t kernel_count_ = 0, memcpy_count_ = 0, memset_count_ = 0;
  std::uint64_t memcpy_bytes_ = 0, memset_bytes_ = 0;
  std::uint64_t busy_ns_ = 0;
  // Launch APIs in order of first use, kernels' before memcpys' before memsets'.
  std::vector<std::string> kernel_apis_, memcpy_apis_, memset_apis_;
  std::map<int, Span> spans_;
  MemoryTimeline memory_;
};

}  // namespace attnprof
