// report/axis.h — round-number chart axes, shared by the report's charts
// (the Pareto and plans charts of pareto.cc, the memory timeline).
//
// Contract: an Axis covers the data's range snapped outward to round ticks
// (1, 2 or 5 times a power of ten, in the axis's unit), so labels read 0.3,
// 0.4 or 100 KiB, 120 KiB, or 200M, and the data fills the plot. Pure
// functions of their arguments: the same data, the same ticks.
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace remat::report {

// An axis: the range drawn, [lo, hi], ticked at lo, lo + step, ..., hi, all
// round numbers (1, 2 or 5 times a power of ten, in `unit`s: bytes are
// ticked in KiB, MiB, ... by the size of the range), so the labels read
// 0.3, 0.4, 0.5 or 100 KiB, 120 KiB and the data fills the frame (the range
// is the data's, snapped outward to the next ticks).
struct Axis {
  double lo = 0, hi = 1, step = 0.2;
  double unit = 1;
  std::string_view unit_name;  // "" for plain numbers

  int ticks() const { return static_cast<int>(std::lround((hi - lo) / step)); }
  double tick(int i) const { return lo + step * i; }

  // A tick's label: as many decimals as the step needs, thousands
  // separated, with the unit.
  std::string label(double v) const {
    const double in_units = v / unit, step_units = step / unit;
    const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step_units) - 1e-9)));
    std::string text;
    if (decimals == 0 && std::abs(in_units) < 1e15) {
      const long long n = std::llround(in_units);
      const std::string digits = std::to_string(n < 0 ? -n : n);
      if (n < 0) text += '-';
      for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) text += ',';
        text += digits[i];
      }
    } else {
      text = fmt::format("{:.{}f}", in_units, decimals);
    }
    if (unit_name.empty() || std::abs(in_units) < step_units * 1e-9) return text;  // 0 needs no unit
    // A count's suffix (k-less: M, G, T) sits on the number; a byte unit apart.
    return unit_name.size() == 1 ? text + std::string(unit_name) : text + " " + std::string(unit_name);
  }
};

// The round step cutting `span` into about `target` intervals.
inline double round_step(double span, int target) {
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * magnitude;
}

// The axis over data [lo, hi] in `unit`s: a flat range gets room around
// it, then both ends go out to the next round tick.
inline Axis round_axis(double lo, double hi, double unit = 1, std::string_view unit_name = {}) {
  lo /= unit;
  hi /= unit;
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double step = round_step(hi - lo, 5);
  Axis a;
  a.lo = std::floor(lo / step + 1e-9) * step * unit;
  a.hi = std::ceil(hi / step - 1e-9) * step * unit;
  a.step = step * unit;
  a.unit = unit;
  a.unit_name = unit_name;
  return a;
}

// A count's axis (recompute runtimes in estimator units): in millions,
// billions, ... once its end reaches a million, so a label stays short
// ("200M", not "200,000,000") beside the axis title.
inline Axis count_axis(double lo, double hi) {
  static constexpr std::pair<double, std::string_view> kScales[] = {
      {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}};
  const double top = std::max(std::abs(lo), std::abs(hi));
  for (const auto& [scale, name] : kScales)
    if (top >= scale) return round_axis(lo, hi, scale, name);
  return round_axis(lo, hi);
}

// A byte axis: ticked in the binary unit of its top end.
inline Axis byte_axis(double lo, double hi) {
  static constexpr std::string_view kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double unit = 1;
  size_t u = 0;
  while (u + 1 < std::size(kUnits) && hi >= unit * 1024) {
    unit *= 1024;
    ++u;
  }
  return round_axis(lo, hi, unit, kUnits[u]);
}

}  // namespace remat::report
