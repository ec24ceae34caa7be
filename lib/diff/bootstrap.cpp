#include "diff/bootstrap.hpp"

#include "core/counter_random.hpp"
#include "summary/summary.hpp"

namespace attnprof {
namespace {

// Draw `counter` of a stream: SplitMix64, the same mixer the inputs are drawn with.
std::uint64_t draw(std::uint64_t seed, std::uint64_t counter) {
  return counter_random::mix64(seed + counter_random::kGolden * (counter + 1));
}

// An index below n from the draw's high 32 bits (multiply-shift: no modulo bias worth the name).
std::size_t index_below(std::uint64_t random, std::size_t n) {
  return static_cast<std::size_t>(((random >> 32) * static_cast<std::uint64_t>(n)) >> 32);
}

class Resampler {
 public:
  explicit Resampler(std::uint64_t seed) : seed_(seed) {}

  double resampled_median(const std::vector<double>& sample) {
    scratch_.resize(sample.size());
    for (double& value : scratch_) value = sample[index_below(draw(seed_, counter_++), sample.size())];
    return median(scratch_);
  }

 private:
  std::uint64_t seed_;
  std::uint64_t counter_ = 0;
  std::vector<double> scratch_;
};

}  // namespace

std::optional<RatioInterval> bootstrap_median_ratio(const std::vector<double>& a, const std::vector<double>& b,
                                                    const BootstrapOptions& options) {
  if (a.size() < 2 || b.size() < 2 || options.resamples < 1) return std::nullopt;
  Resampler resampler(options.seed);
  std::vector<double> ratios;
  ratios.reserve(static_cast<std::size_t>(options.resamples));
  for (int i = 0; i < options.resamples; ++i) {
    const double median_a = resampler.resampled_median(a);
    const double median_b = resampler.resampled_median(b);
    if (!(median_a > 0)) return std::nullopt;
    ratios.push_back(median_b / median_a);
  }
  const double tail = 100.0 * (1.0 - options.confidence) / 2.0;
  return RatioInterval{percentile(ratios, tail), percentile(ratios, 100.0 - tail)};
}

}  // namespace attnprof
