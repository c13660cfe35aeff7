// report/timeline_svg.cc — see timeline_svg.h. Same plot frame as the Pareto
// chart (budget/pareto.cc) so the two read alike in the report.
#include "report/timeline_svg.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/escape.h"
#include "remat/explain.h"

namespace remat::report {

std::string timeline_svg(const std::vector<MemoryStep>& steps, int64_t peak_bytes) {
  constexpr double kW = 800, kH = 360, kLeft = 90, kRight = 30, kTop = 40, kBottom = 50;
  constexpr int kTicks = 4;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  int64_t hi = std::max<int64_t>(peak_bytes, 1);
  for (const MemoryStep& s : steps) hi = std::max(hi, s.bytes);
  const size_t n = std::max<size_t>(steps.size(), 2);
  auto sx = [&](double i) { return kLeft + i / static_cast<double>(n - 1) * pw; };
  auto sy = [&](double b) { return kTop + ph - b / static_cast<double>(hi) * ph; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Live memory at each "
      "step</text>\n",
      kW, kH, kW / 2);
  for (int i = 0; i <= kTicks; ++i) {
    const double b = static_cast<double>(hi) * i / kTicks;
    s += fmt::format(
        "<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        sy(b), kLeft, kLeft + pw, kLeft - 6, sy(b) + 4,
        xml_escape(human_bytes(static_cast<int64_t>(b))));
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
  for (size_t i = 0; i < steps.size(); ++i) {
    const double y = sy(static_cast<double>(steps[i].bytes));
    if (i) s += fmt::format(" {:.1f},{:.1f}", sx(static_cast<double>(i)), sy(static_cast<double>(steps[i - 1].bytes)));
    s += fmt::format("{}{:.1f},{:.1f}", i ? " " : "", sx(static_cast<double>(i)), y);
  }
  s += "\"/>\n";
  const auto peak = std::max_element(steps.begin(), steps.end(),
                                     [](const MemoryStep& a, const MemoryStep& b) { return a.bytes < b.bytes; });
  const size_t at = static_cast<size_t>(peak - steps.begin());
  s += fmt::format(
      "<circle class=\"peak\" cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"5\" fill=\"#d62728\"><title>peak {2} "
      "at step {3}{4}</title></circle>\n"
      "<text x=\"{0:.1f}\" y=\"{5:.1f}\" text-anchor=\"middle\" font-size=\"11\" fill=\"#d62728\">"
      "peak {2}</text>\n",
      sx(static_cast<double>(at)), sy(static_cast<double>(peak->bytes)),
      xml_escape(human_bytes(peak->bytes)), at,
      peak->label.empty() ? "" : " (" + xml_escape(peak->label) + ")",
      std::max(kTop + 12, sy(static_cast<double>(peak->bytes)) - 9));
  s += "</svg>\n";
  return s;
}

}  // namespace remat::report
