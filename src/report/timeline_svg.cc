// report/timeline_svg.cc — see timeline_svg.h. Same plot frame and round
// ticks (axis.h) as the Pareto chart (pareto.cc) so the two read alike in
// the report.
#include "report/timeline_svg.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/axis.h"
#include "report/escape.h"
#include "remat/explain.h"

namespace remat::report {

std::string timeline_svg(const std::vector<MemoryStep>& steps, int64_t peak_bytes) {
  constexpr double kW = 800, kH = 376, kLeft = 90, kRight = 30, kTop = 56, kBottom = 50;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  int64_t top = std::max<int64_t>(peak_bytes, 1);
  for (const MemoryStep& s : steps) top = std::max(top, s.bytes);
  // Bytes from 0 up to a round tick at or above the highest step.
  const Axis axis = byte_axis(0, static_cast<double>(top));
  const size_t n = std::max<size_t>(steps.size(), 2);
  auto sx = [&](double i) { return kLeft + i / static_cast<double>(n - 1) * pw; };
  auto sy = [&](double b) { return kTop + ph - b / axis.hi * ph; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Live memory at each "
      "step</text>\n",
      kW, kH, kW / 2);
  for (int i = 0; i <= axis.ticks(); ++i) {
    const double b = axis.tick(i);
    s += fmt::format(
        "<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>\n"
        "<text class=\"y-tick\" x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        sy(b), kLeft, kLeft + pw, kLeft - 6, sy(b) + 4, xml_escape(axis.label(b)));
  }
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step (node in execution order)</text>\n",
      kLeft, kTop, pw, ph, kLeft + pw / 2, kH - 12);
  if (steps.empty()) {
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no steps</text>\n</svg>\n",
                     kLeft + pw / 2, kTop + ph / 2);
    return s;
  }
  // Where the backward starts, when phases say so.
  for (size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].phase == "backward" && steps[i - 1].phase != "backward") {
      s += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#888\" "
          "stroke-dasharray=\"4 3\"/>\n<text x=\"{3:.1f}\" y=\"{4}\" font-size=\"10\">backward"
          "</text>\n",
          sx(static_cast<double>(i)), kTop, kTop + ph, sx(static_cast<double>(i)) + 3, kTop + 12);
      break;
    }
  }
  s += "<polyline fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"2\" points=\"";
  if (steps.size() <= 2 * static_cast<size_t>(pw)) {
    // A step line: each step's level runs until the next step.
    for (size_t i = 0; i < steps.size(); ++i) {
      const double y = sy(static_cast<double>(steps[i].bytes));
      if (i) s += fmt::format(" {:.1f},{:.1f}", sx(static_cast<double>(i)), sy(static_cast<double>(steps[i - 1].bytes)));
      s += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", sx(static_cast<double>(i)), y);
    }
  } else {
    // More steps than pixels: per pixel column, the range the steps in it
    // span (high then low, alternately, so the line stays connected). The
    // picture is the same; the file stays small on big graphs.
    const size_t columns = static_cast<size_t>(pw);
    size_t i = 0;
    for (size_t c = 0; c < columns && i < steps.size(); ++c) {
      const size_t end = std::max(i + 1, (c + 1) * steps.size() / columns);
      int64_t lo = steps[i].bytes, hi_b = steps[i].bytes;
      for (size_t k = i; k < end && k < steps.size(); ++k) {
        lo = std::min(lo, steps[k].bytes);
        hi_b = std::max(hi_b, steps[k].bytes);
      }
      const double x = sx(static_cast<double>(i));
      const bool down = c % 2 == 0;
      s += fmt::format("{}{:.1f},{:.1f} {:.1f},{:.1f}", c ? " " : "", x,
                       sy(static_cast<double>(down ? hi_b : lo)), x, sy(static_cast<double>(down ? lo : hi_b)));
      i = end;
    }
  }
  s += "\"/>\n";
  const auto peak = std::max_element(steps.begin(), steps.end(),
                                     [](const MemoryStep& a, const MemoryStep& b) { return a.bytes < b.bytes; });
  const size_t at = static_cast<size_t>(peak - steps.begin());
  // The label sits in the top margin, above the frame, where the line never
  // goes, anchored toward the middle so it is never cut off; a dotted leader
  // joins it to the peak.
  const double px = sx(static_cast<double>(at)), py = sy(static_cast<double>(peak->bytes));
  const char* anchor = px < kLeft + pw / 3 ? "start" : px > kLeft + 2 * pw / 3 ? "end" : "middle";
  s += fmt::format(
      "<line class=\"peak-leader\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
      "stroke=\"#d62728\" stroke-dasharray=\"2 2\"/>\n"
      "<circle class=\"peak\" cx=\"{0:.1f}\" cy=\"{2:.1f}\" r=\"5\" fill=\"#d62728\"><title>peak {3} "
      "at step {4}{5}</title></circle>\n"
      "<text class=\"peak-label\" x=\"{0:.1f}\" y=\"{6:.1f}\" text-anchor=\"{7}\" font-size=\"11\" "
      "fill=\"#d62728\">peak {3}{8}</text>\n",
      px, kTop - 4, py, xml_escape(human_bytes(peak->bytes)), at,
      peak->label.empty() ? "" : " (" + xml_escape(peak->label) + ")", kTop - 8, anchor,
      peak->label.empty() ? "" : " at " + xml_escape(peak->label));
  s += "</svg>\n";
  return s;
}

}  // namespace remat::report
