// report/pareto.cc — the writers of the memory-budget Pareto frontier and
// of built plans (torch's budget plans, remat's peak frontier).
//
// Contract: remat/pareto.h. Numbers are written with fmt's shortest
// round-trip form, so the text is deterministic and reads back exactly.
#include "remat/pareto.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/json_writer.h"
#include "remat/explain.h"
#include "report/axis.h"
#include "report/escape.h"

namespace remat {
namespace {

using report::Axis;
using report::byte_axis;
using report::count_axis;
using report::round_axis;

// A chart's frame: the plot area inside fixed margins (y grows downwards
// in SVG), the axes mapped onto it.
struct Frame {
  static constexpr double kW = 800, kLeft = 90, kRight = 30, kTop = 50, kBottom = 60;
  double height;
  Axis x, y;

  double pw() const { return kW - kLeft - kRight; }
  double ph() const { return height - kTop - kBottom; }
  double sx(double v) const { return kLeft + (v - x.lo) / (x.hi - x.lo) * pw(); }
  double sy(double v) const { return kTop + ph() - (v - y.lo) / (y.hi - y.lo) * ph(); }

  // The chart up to its data: the svg element (with `cls`, "" for none),
  // the title, the grid with tick labels, the frame and the two axis
  // titles.
  std::string open(std::string_view cls, std::string_view title, std::string_view x_title,
                   std::string_view y_title) const {
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\"{0} width=\"{1}\" height=\"{2}\" "
        "viewBox=\"0 0 {1} {2}\" font-family=\"sans-serif\" font-size=\"12\">\n"
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        "<text x=\"{3}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{4}</text>\n",
        cls.empty() ? std::string() : fmt::format(" class=\"{}\"", cls), kW, height, kW / 2,
        report::xml_escape(title));
    for (int i = 0; i <= x.ticks(); ++i)
      s += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>\n"
          "<text class=\"x-tick\" x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
          sx(x.tick(i)), kTop, kTop + ph(), kTop + ph() + 18, report::xml_escape(x.label(x.tick(i))));
    for (int i = 0; i <= y.ticks(); ++i)
      s += fmt::format(
          "<line x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>\n"
          "<text class=\"y-tick\" x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
          sy(y.tick(i)), kLeft, kLeft + pw(), kLeft - 6, sy(y.tick(i)) + 4,
          report::xml_escape(y.label(y.tick(i))));
    s += fmt::format(
        "<rect class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
        "<text transform=\"translate(20 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        kLeft, kTop, pw(), ph(), kLeft + pw() / 2, height - 15, report::xml_escape(x_title),
        kTop + ph() / 2, report::xml_escape(y_title));
    return s;
  }
};

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
  Frame f{480, Axis{}, Axis{}};
  if (!points.empty()) {
    auto [xmin, xmax] = std::minmax_element(points.begin(), points.end(),
        [](const MemoryBudgetPoint& a, const MemoryBudgetPoint& b) { return a.memory_ratio < b.memory_ratio; });
    auto [ymin, ymax] = std::minmax_element(points.begin(), points.end(),
        [](const MemoryBudgetPoint& a, const MemoryBudgetPoint& b) {
          return a.recompute_runtime < b.recompute_runtime;
        });
    f.x = round_axis(xmin->memory_ratio, xmax->memory_ratio);
    f.y = count_axis(ymin->recompute_runtime, ymax->recompute_runtime);
  }
  auto sx = [&](double x) { return f.sx(x); };
  auto sy = [&](double y) { return f.sy(y); };
  std::string s = f.open(
      "pareto", title,
      "Memory Budget (saved activation memory ratio: 0 = inputs only, 1 = runtime-optimized)",
      "Runtime of Recomputed Components (estimator units)");
  // The curve, its points, and each point's ratio above it.
  if (!points.empty()) {
    s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < points.size(); ++i) {
      s += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", sx(points[i].memory_ratio),
                       sy(points[i].recompute_runtime));
    }
    s += "\"/>\n";
  }
  // Labels only while they cannot pile up: torch's sweep repeats interval
  // ends, so count distinct points; and a label that would touch one
  // already placed is left to the point's tooltip.
  size_t distinct = 0;
  for (size_t i = 0; i < points.size(); ++i)
    distinct += i == 0 || points[i].memory_ratio != points[i - 1].memory_ratio ||
                points[i].recompute_runtime != points[i - 1].recompute_runtime;
  const bool labelled = distinct <= kParetoLabels;
  const double radius = points.size() > 100 ? 2 : 4;
  struct Box {
    double left, right, top, bottom;
  };
  std::vector<Box> placed;
  for (const MemoryBudgetPoint& p : points) {
    const double x = sx(p.memory_ratio), y = sy(p.recompute_runtime);
    s += fmt::format(
        "<circle class=\"point\" cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"{2}\" fill=\"#1f77b4\">"
        "<title>budget {3}: runtime {4}, ratio {5}</title></circle>\n",
        x, y, radius, p.budget, p.recompute_runtime, p.memory_ratio);
    if (!labelled) continue;
    // "0.1234" at font size 10: about 6 px a character, 11 px high, with
    // a pixel of air around. It stays inside the plot, clear of the tick
    // labels around it: above its point, or below one at the plot's top,
    // and shifted in from the plot's sides.
    const double lx = std::clamp(x, Frame::kLeft + 21, Frame::kLeft + f.pw() - 21);
    const double ly = y - 21 < Frame::kTop + 1 ? y + 19 : y - 10;
    const Box b{lx - 20, lx + 20, ly - 11, ly + 2};
    bool clear = true;
    for (const Box& q : placed)
      clear = clear && (b.right < q.left || q.right < b.left || b.bottom < q.top || q.bottom < b.top);
    if (!clear) continue;
    placed.push_back(b);
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\">{:.4f}</text>\n", lx,
        ly, p.memory_ratio);
  }
  s += "</svg>\n";
  return s;
}

namespace {

// The plans no other plan of `plans` beats on both axes, by increasing
// peak: sorted by peak (ties: less recompute first), a plan is on it when
// it recomputes strictly less than every plan before it.
std::vector<const BudgetPlanPoint*> undominated(std::span<const BudgetPlanPoint> plans) {
  std::vector<const BudgetPlanPoint*> by_peak;
  for (const BudgetPlanPoint& p : plans) by_peak.push_back(&p);
  std::sort(by_peak.begin(), by_peak.end(), [](const BudgetPlanPoint* a, const BudgetPlanPoint* b) {
    return a->peak_bytes != b->peak_bytes ? a->peak_bytes < b->peak_bytes
                                          : a->recompute_runtime < b->recompute_runtime;
  });
  std::vector<const BudgetPlanPoint*> front;
  for (const BudgetPlanPoint* p : by_peak)
    if (front.empty() || p->recompute_runtime < front.back()->recompute_runtime) front.push_back(p);
  return front;
}

// A plan's tooltip: its label, peak, recompute and saved count.
std::string plan_title(const BudgetPlanPoint& p) {
  return fmt::format("{}: peak {} ({} B), recompute {:.6g}, {} saved", report::xml_escape(p.label),
                     report::xml_escape(report::human_bytes(p.peak_bytes)), p.peak_bytes,
                     p.recompute_runtime, p.saved_values);
}

}  // namespace

std::string plans_svg(std::span<const BudgetPlanPoint> plans, const BudgetPlanPoint* chosen,
                      std::span<const BudgetPlanPoint> frontier, std::string_view frontier_name) {
  std::vector<BudgetPlanPoint> all(plans.begin(), plans.end());
  all.insert(all.end(), frontier.begin(), frontier.end());
  if (chosen) all.push_back(*chosen);
  Frame f{440, byte_axis(0, 1), Axis{}};
  if (!all.empty()) {
    double x_lo = static_cast<double>(all[0].peak_bytes), x_hi = x_lo;
    double y_lo = all[0].recompute_runtime, y_hi = y_lo;
    for (const BudgetPlanPoint& p : all) {
      x_lo = std::min(x_lo, static_cast<double>(p.peak_bytes));
      x_hi = std::max(x_hi, static_cast<double>(p.peak_bytes));
      y_lo = std::min(y_lo, p.recompute_runtime);
      y_hi = std::max(y_hi, p.recompute_runtime);
    }
    // Room around the extreme points, so no marker sits on the frame.
    const double dx = x_hi > x_lo ? (x_hi - x_lo) * 0.06 : std::max(1.0, x_lo * 0.05);
    const double dy = y_hi > y_lo ? (y_hi - y_lo) * 0.08 : std::max(1.0, std::abs(y_lo) * 0.1);
    f.x = byte_axis(std::max(0.0, x_lo - dx), x_hi + dx);
    f.y = count_axis(y_lo >= 0 ? std::max(0.0, y_lo - dy) : y_lo - dy, y_hi + dy);
  }
  const double pw = f.pw(), ph = f.ph(), kLeft = Frame::kLeft, kTop = Frame::kTop;
  auto sx = [&](double x) { return f.sx(x); };
  auto sy = [&](double y) { return f.sy(y); };
  const bool two = !frontier.empty();
  std::string s = f.open(
      "plans",
      two ? "Peak memory against recompute: torch's budget plans and remat's frontier"
          : "Peak memory against recompute: torch's budget plans",
      "simulated peak memory of the step (bytes)", "estimated recompute runtime (estimator units)");
  // torch's frontier: its undominated plans joined by straight lines.
  const std::vector<const BudgetPlanPoint*> front = undominated(plans);
  if (front.size() > 1) {
    s += "<polyline class=\"frontier\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" "
         "points=\"";
    for (size_t i = 0; i < front.size(); ++i)
      s += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", sx(static_cast<double>(front[i]->peak_bytes)),
                       sy(front[i]->recompute_runtime));
    s += "\"/>\n";
  }
  // remat's frontier as a staircase: a plan's recompute is what any peak
  // from its own up to the next undominated plan's costs, so the line runs
  // flat to that peak, then drops.
  const std::vector<const BudgetPlanPoint*> stairs = undominated(frontier);
  if (stairs.size() > 1) {
    s += "<polyline class=\"remat-frontier\" fill=\"none\" stroke=\"#ff7f0e\" stroke-width=\"1.5\" "
         "points=\"";
    for (size_t i = 0; i < stairs.size(); ++i) {
      const double x = sx(static_cast<double>(stairs[i]->peak_bytes));
      if (i) s += fmt::format(" {:.1f},{:.1f}", x, sy(stairs[i - 1]->recompute_runtime));
      s += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", x, sy(stairs[i]->recompute_runtime));
    }
    s += "\"/>\n";
  }
  const double radius = plans.size() > 100 ? 2.5 : 4;
  for (const BudgetPlanPoint& p : plans)
    s += fmt::format(
        "<circle class=\"plan\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"#1f77b4\">"
        "<title>{}</title></circle>\n",
        sx(static_cast<double>(p.peak_bytes)), sy(p.recompute_runtime), radius, plan_title(p));
  // Squares, so the two series differ in shape as well as in colour.
  const double half = frontier.size() > 100 ? 2.5 : 3.5;
  for (const BudgetPlanPoint& p : frontier)
    s += fmt::format(
        "<rect class=\"remat-plan\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" "
        "fill=\"#ff7f0e\"><title>{}</title></rect>\n",
        sx(static_cast<double>(p.peak_bytes)) - half, sy(p.recompute_runtime) - half, 2 * half,
        2 * half, plan_title(p));
  if (chosen) {
    const double x = sx(static_cast<double>(chosen->peak_bytes)), y = sy(chosen->recompute_runtime);
    // The label goes toward the plot's middle, so it never leaves the frame.
    const bool right = x < kLeft + pw / 2;
    const bool below = y < kTop + ph / 2;
    s += fmt::format(
        "<circle class=\"chosen\" cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"8\" fill=\"none\" "
        "stroke=\"#d62728\" stroke-width=\"2.5\"><title>this plan ({2}): peak {3}, recompute "
        "{4:.6g}</title></circle>\n"
        "<text class=\"chosen-label\" x=\"{5:.1f}\" y=\"{6:.1f}\" text-anchor=\"{7}\" fill=\"#d62728\">"
        "this plan ({3})</text>\n",
        x, y, report::xml_escape(chosen->label), report::xml_escape(report::human_bytes(chosen->peak_bytes)),
        chosen->recompute_runtime, right ? x + 12 : x - 12, below ? y + 20 : y - 12,
        right ? "start" : "end");
  }
  // The legend, in the margin above the plot's right end (below the
  // title's line): one entry, or one per series side by side.
  if (!two) {
    s += fmt::format(
        "<g class=\"legend\" font-size=\"11\"><circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"4\" "
        "fill=\"#1f77b4\"/><text x=\"{2:.1f}\" y=\"{3:.1f}\">a torch budget plan (hover for "
        "which)</text></g>\n",
        kLeft + pw - 230, kTop - 12, kLeft + pw - 222, kTop - 8);
  } else {
    // "torch's activation-budget plans" is about 190 px at 11 px; the
    // series name gets the last 150 px (25 characters).
    s += fmt::format(
        "<g class=\"legend\" font-size=\"11\"><circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"4\" "
        "fill=\"#1f77b4\"/><text x=\"{2:.1f}\" y=\"{3:.1f}\">torch's activation-budget plans</text>"
        "<rect x=\"{4:.1f}\" y=\"{5:.1f}\" width=\"7\" height=\"7\" fill=\"#ff7f0e\"/>"
        "<text x=\"{6:.1f}\" y=\"{3:.1f}\">{7}</text></g>\n",
        kLeft + pw - 380, kTop - 12, kLeft + pw - 372, kTop - 8, kLeft + pw - 153.5, kTop - 15.5,
        kLeft + pw - 142, report::xml_escape(frontier_name));
  }
  s += "</svg>\n";
  return s;
}

std::string plans_csv(std::span<const PlanSeries> series) {
  // RFC 4180: a field with a separator, a quote or a line break is quoted,
  // its quotes doubled.
  auto field = [](std::string_view text) {
    if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
    std::string out = "\"";
    for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  std::string out = "label,series,peak_bytes,recompute_runtime,saved_values,limit_bytes\n";
  for (const PlanSeries& list : series)
    for (const BudgetPlanPoint& p : list.plans)
      out += fmt::format("{},{},{},{},{},{}\n", field(p.label), field(list.name), p.peak_bytes,
                         p.recompute_runtime, p.saved_values, p.limit_bytes);
  return out;
}

std::string plans_json(std::span<const PlanSeries> series) {
  std::string out = "{\"plans\": [";
  bool first = true;
  io::JsonWriter strings(out);  // only its string escaping, RFC 8259
  for (const PlanSeries& list : series) {
    for (const BudgetPlanPoint& p : list.plans) {
      out += first ? "\n  {\"label\": " : ",\n  {\"label\": ";
      first = false;
      strings.append_string(p.label);
      out += ", \"series\": ";
      strings.append_string(list.name);
      out += fmt::format(
          ", \"peak_bytes\": {}, \"recompute_runtime\": {}, \"saved_values\": {}, "
          "\"limit_bytes\": {}}}",
          p.peak_bytes, p.recompute_runtime, p.saved_values, p.limit_bytes);
    }
  }
  out += first ? "]}\n" : "\n]}\n";
  return out;
}

}  // namespace remat
