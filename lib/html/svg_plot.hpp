// The few plotting pieces the report's charts share: scales (linear, or by decades), tick
// values and their labels, pixel coordinates, and a width estimate for text, since no layout
// engine runs here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attnprof::html {

// Data [lo, hi] onto pixels [from, to]; by decades (log10) when `log`, where lo must be > 0.
struct Scale {
  double lo = 0, hi = 1;
  double from = 0, to = 1;
  bool log = false;
  double operator()(double value) const;
};

// 0 and round steps (1, 2 or 5 x 10^k) covering [0, max] in about `count` steps; the last
// tick is >= max. {0, 1} for max <= 0.
std::vector<double> linear_ticks(double max, int count);

// The power of ten at or below, and at or above, a positive value.
double decade_floor(double value);
double decade_ceil(double value);
// Powers of ten from lo to hi inclusive (both powers of ten).
std::vector<double> decade_ticks(double lo, double hi);

// A tick's label: "0", "0.25", "10", "1000", "1e+05".
std::string tick_text(double value);
// A pixel coordinate, at most one decimal: "12", "12.5".
std::string px(double value);
// Estimated width in pixels of text in the report's sans-serif face (errs wide).
double text_width(std::string_view text, double font_px = 12);

// Categorical colours (Tableau 10): readable on white, distinct for most colour vision.
const std::vector<std::string>& palette();

}  // namespace attnprof::html
