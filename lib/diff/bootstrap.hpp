// How sure a change in median time is: a percentile bootstrap of the ratio of two medians. Each
// resample draws every side's timed iterations again with replacement and takes the ratio of
// their medians; the interval is the middle `confidence` of those ratios. Seeded and counter-based,
// so the same two samples give the same interval on every machine and every run of `diff`.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace attnprof {

struct BootstrapOptions {
  int resamples = 2000;
  double confidence = 0.95;
  std::uint64_t seed = 0x61747470726f66ull;  // "attprof"
};

// A ratio's interval, low <= high.
struct RatioInterval {
  double low = 0;
  double high = 0;
  bool excludes(double value) const { return value < low || value > high; }
};

// The interval of median(b) / median(a). nullopt when a side has fewer than two samples (one
// iteration says nothing about its spread) or a resampled median of `a` is not positive.
std::optional<RatioInterval> bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b,
                                                    const BootstrapOptions& options = {});

}  // namespace attnprof
