#include "html/svg_plot.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace attnprof::html {

double Scale::operator()(double value) const {
  double t = 0;
  if (log) {
    const double l0 = std::log10(lo), l1 = std::log10(hi);
    t = l1 > l0 ? (std::log10(std::max(value, lo * 1e-6)) - l0) / (l1 - l0) : 0;
  } else {
    t = hi > lo ? (value - lo) / (hi - lo) : 0;
  }
  return from + t * (to - from);
}

std::vector<double> linear_ticks(double max, int count) {
  if (!(max > 0) || !std::isfinite(max)) return {0, 1};
  const double raw = max / std::max(count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    const double t = i * step;
    ticks.push_back(t);
    if (t >= max * (1 - 1e-12)) break;
  }
  return ticks;
}

double decade_floor(double value) { return std::pow(10.0, std::floor(std::log10(value) + 1e-9)); }
double decade_ceil(double value) { return std::pow(10.0, std::ceil(std::log10(value) - 1e-9)); }

std::vector<double> decade_ticks(double lo, double hi) {
  std::vector<double> ticks;
  const int first = static_cast<int>(std::lround(std::log10(lo)));
  const int last = static_cast<int>(std::lround(std::log10(hi)));
  for (int e = first; e <= last; ++e) ticks.push_back(std::pow(10.0, e));
  return ticks;
}

std::string tick_text(double value) {
  if (value == 0) return "0";
  if (std::abs(value) >= 1e5 || std::abs(value) < 1e-3) return fmt::format("{:.0e}", value);
  return fmt::format("{:.6g}", value);
}

std::string px(double value) {
  const double rounded = std::round(value * 10) / 10;
  if (rounded == std::round(rounded)) return fmt::format("{:.0f}", rounded);
  return fmt::format("{:.1f}", rounded);
}

double text_width(std::string_view text, double font_px) {
  // Average advance of a proportional sans-serif face at 12 px is about 6.2 px; wide letters
  // and digits pull it up, so 0.58 em per character keeps labels clear of what follows them.
  return static_cast<double>(text.size()) * font_px * 0.58;
}

const std::vector<std::string>& palette() {
  static const std::vector<std::string> colors = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
                                                  "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"};
  return colors;
}

}  // namespace attnprof::html
