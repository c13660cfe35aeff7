// report/pareto.cc — the writers of the memory-budget Pareto frontier.
//
// Contract: remat/pareto.h. Numbers are written with fmt's shortest
// round-trip form, so the text is deterministic and reads back exactly.
#include "remat/pareto.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "report/escape.h"

namespace remat {
namespace {

// An axis range that is never empty, so a flat curve still draws.
std::pair<double, double> padded_range(double lo, double hi) {
  if (hi > lo) return {lo, hi};
  const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
  return {lo - pad, hi + pad};
}

}  // namespace

std::string pareto_csv(std::span<const MemoryBudgetPoint> points) {
  std::string out = "budget,recompute_runtime,memory_ratio\n";
  for (const MemoryBudgetPoint& p : points) {
    out += fmt::format("{},{},{}\n", p.budget, p.recompute_runtime, p.memory_ratio);
  }
  return out;
}

std::string pareto_json(std::span<const MemoryBudgetPoint> points) {
  std::string out = "{\"points\": [";
  for (size_t i = 0; i < points.size(); ++i) {
    const MemoryBudgetPoint& p = points[i];
    out += fmt::format("{}\n  {{\"budget\": {}, \"recompute_runtime\": {}, \"memory_ratio\": {}}}",
                       i ? "," : "", p.budget, p.recompute_runtime, p.memory_ratio);
  }
  out += points.empty() ? "]}\n" : "\n]}\n";
  return out;
}

std::string pareto_svg(std::span<const MemoryBudgetPoint> points, std::string_view title) {
  // Plot area inside fixed margins; y grows downwards in SVG.
  constexpr double kW = 800, kH = 480, kLeft = 90, kRight = 30, kTop = 50, kBottom = 60;
  constexpr int kTicks = 5;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  if (!points.empty()) {
    auto [xmin, xmax] = std::minmax_element(points.begin(), points.end(),
        [](const MemoryBudgetPoint& a, const MemoryBudgetPoint& b) { return a.memory_ratio < b.memory_ratio; });
    auto [ymin, ymax] = std::minmax_element(points.begin(), points.end(),
        [](const MemoryBudgetPoint& a, const MemoryBudgetPoint& b) {
          return a.recompute_runtime < b.recompute_runtime;
        });
    std::tie(x_lo, x_hi) = padded_range(xmin->memory_ratio, xmax->memory_ratio);
    std::tie(y_lo, y_hi) = padded_range(ymin->recompute_runtime, ymax->recompute_runtime);
  }
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto sx = [&](double x) { return kLeft + (x - x_lo) / (x_hi - x_lo) * pw; };
  auto sy = [&](double y) { return kTop + ph - (y - y_lo) / (y_hi - y_lo) * ph; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{}</text>\n",
      kW, kH, kW, kH, kW / 2, report::xml_escape(title));
  // Grid, ticks and tick labels.
  for (int i = 0; i <= kTicks; ++i) {
    const double fx = x_lo + (x_hi - x_lo) * i / kTicks, fy = y_lo + (y_hi - y_lo) * i / kTicks;
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:.3g}</text>\n",
        sx(fx), kTop, kTop + ph, kTop + ph + 18, fx);
    s += fmt::format(
        "<line x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.4g}</text>\n",
        sy(fy), kLeft, kLeft + pw, kLeft - 6, sy(fy) + 4, fy);
  }
  // Axes and their labels.
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">Memory Budget (saved activation memory "
      "ratio)</text>\n"
      "<text transform=\"translate(20 {}) rotate(-90)\" text-anchor=\"middle\">Runtime of "
      "Recomputed Components</text>\n",
      kLeft, kTop, pw, ph, kLeft + pw / 2, kH - 15, kTop + ph / 2);
  // The curve, its points, and each point's ratio above it.
  if (!points.empty()) {
    s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < points.size(); ++i) {
      s += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", sx(points[i].memory_ratio),
                       sy(points[i].recompute_runtime));
    }
    s += "\"/>\n";
  }
  for (const MemoryBudgetPoint& p : points) {
    const double x = sx(p.memory_ratio), y = sy(p.recompute_runtime);
    s += fmt::format(
        "<circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"4\" fill=\"#1f77b4\">"
        "<title>budget {2}: runtime {3}, ratio {4}</title></circle>\n"
        "<text x=\"{0:.1f}\" y=\"{5:.1f}\" text-anchor=\"middle\" font-size=\"10\">{4:.4f}</text>\n",
        x, y, p.budget, p.recompute_runtime, p.memory_ratio, y - 10);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace remat
