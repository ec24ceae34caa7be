// `attnprof diff`: what changed between two runs, each change stated with its noise. Cases are
// paired by problem (diff/case_matching.hpp); per pair, the median time's ratio B/A with a
// bootstrap interval from each side's timed iterations (diff/bootstrap.hpp) and a verdict, the
// kernels added, removed and changed (by normalised name, diff/kernel_names.hpp), memcpy and
// memset changes, the dominant kernels' resources, per-iteration counts, and findings that
// appear or disappear. The report holds copies of what it shows: it outlives the summaries.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diff/bootstrap.hpp"
#include "diff/case_matching.hpp"
#include "diff/diff_input.hpp"
#include "summary/summary.hpp"

namespace attnprof {

inline constexpr double kDefaultNoisePercent = 10.0;

// The drift floor from --noise: "10" or "10%", a percent from 0 to 1000. Throws UsageError.
double parse_noise_percent(std::string_view text);

struct DiffOptions {
  CaseMatching matching;
  // A change is faster or slower only when its interval excludes 1 AND the median time moved by
  // more than this: the same machine drifts 10-30% between runs, whatever one run's spread says.
  double noise_percent = kDefaultNoisePercent;
  BootstrapOptions bootstrap;
};

enum class Verdict { faster, slower, within_noise, unknown };
enum class ChangeKind { added, removed, changed };

// Each word once: the renderers, the JSON and the help text read these.
struct VerdictName {
  Verdict verdict;
  std::string_view name;
};
inline constexpr std::array<VerdictName, 4> kVerdictNames = {{
    {Verdict::faster, "faster"},
    {Verdict::slower, "slower"},
    {Verdict::within_noise, "within noise"},
    {Verdict::unknown, "unknown"},
}};
std::string_view to_string(Verdict verdict);
std::string_view to_string(ChangeKind kind);  // "added", "removed", "changed"

struct TimeChange {
  int iterations_a = 0;  // timed iterations with a time
  int iterations_b = 0;
  double median_a_us = 0;
  double median_b_us = 0;
  std::optional<double> ratio;                        // B/A median time
  std::optional<RatioInterval> interval;              // of `ratio`
  std::optional<double> throughput_ratio;             // B/A TFLOP/s (exact FLOPs over the median)
  std::optional<RatioInterval> throughput_interval;
  Verdict verdict = Verdict::unknown;
  std::string reason;  // why the verdict is what it is: "interval [0.97, 1.08] includes 1", ...
};

// A kernel (by normalised name: its instances summed) or a memcpy direction / memset.
struct ActivityChange {
  std::string name;        // normalised kernel name, or "memcpy DtoD", "memset"
  ChangeKind kind = ChangeKind::changed;
  double per_iter_a = 0;   // launches per timed iteration
  double per_iter_b = 0;
  double us_a = 0;         // GPU time per timed iteration
  double us_b = 0;
  double bytes_a = 0;      // per iteration (memory operations)
  double bytes_b = 0;
  bool instances_differ = false;  // a kernel whose full names differ (template arguments, say)
  std::vector<std::string> full_names_a;  // a kernel's demangled names on each side
  std::vector<std::string> full_names_b;
};

// A field of the dominant kernels, or a per-iteration count, that differs.
struct FieldChange {
  std::string field;  // "registers per thread", "kernels/it", ...
  std::string a;
  std::string b;
};

struct FindingChange {
  std::string kind;     // Finding::kind
  ChangeKind change = ChangeKind::added;  // added: appears in B; removed: gone from B
  std::string message;  // the side's message that has it
};

struct CaseDiff {
  std::string label_a;
  std::string label_b;
  std::string key;       // what paired them
  std::string status_a;  // "ok", "failed", "WRONG", ...
  std::string status_b;
  TimeChange time;
  std::vector<ActivityChange> kernels;
  std::vector<ActivityChange> memory_ops;
  std::vector<FieldChange> dominant_kernel;
  std::vector<FieldChange> counts;
  std::vector<FindingChange> findings;

  bool has_changes() const;
};

struct UnmatchedCase {
  std::string label;
  std::string key;
  std::string status;
};

// One side, as the header of every format shows it.
struct RunHeader {
  std::string path;
  std::string source;
  std::string origin;
  std::string device;  // "NVIDIA H200 (sm_90, 132 SMs)"
  std::string tool_version;
  std::string driver_version;
  std::string cuda_runtime_version;
  std::string cudnn_version;
  std::string config;
  std::string created_at;
  std::size_t cases = 0;
  bool capture_complete = true;
};

struct DiffReport {
  RunHeader a;
  RunHeader b;
  DiffOptions options;
  std::vector<CaseDiff> cases;
  std::vector<UnmatchedCase> only_a;
  std::vector<UnmatchedCase> only_b;
  std::vector<std::string> notes;  // what the reader should weigh: another GPU, a lossy capture, shared keys

  int count(Verdict verdict) const;
};

DiffReport diff_runs(const DiffInput& a, const DiffInput& b, const DiffOptions& options = {});

// A pair's name: the label when both sides agree, else what differs before the words they share,
// "flash:fa2 -> flash:hopper bf16 causal 2x16x1024x1024x128".
std::string pair_label(const CaseDiff& c, std::string_view arrow = "->");

// "1.234x"; "[0.950, 1.040]": how every format writes a ratio and its interval.
std::string ratio_text(double ratio);
std::string interval_text(const RatioInterval& interval);

// One pair's comparison, as diff_runs makes it (the key is left empty).
CaseDiff diff_cases(const CaseSummary& a, const CaseSummary& b, const DiffOptions& options = {});

// The time comparison alone: the ratio, its interval, the verdict.
TimeChange compare_times(const CaseSummary& a, const CaseSummary& b, const DiffOptions& options = {});

}  // namespace attnprof
