// report/timeline_svg.h — the memory timeline as an SVG chart.
//
// Contract: a standalone, deterministic SVG: live bytes (y) at each step
// (x) as a step line (per pixel column, the range of the steps in it, when
// there are more steps than pixels), the peak marked and labelled in the
// margin above the plot, and a dashed line where
// the forward ends when the steps carry phases. Empty steps: a chart that
// says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace remat::report {

struct MemoryStep {
  int64_t bytes = 0;
  std::string label;  // the node at this step ("" when unknown)
  std::string phase;  // "forward", "backward" or ""
};

std::string timeline_svg(const std::vector<MemoryStep>& steps, int64_t peak_bytes);

}  // namespace remat::report
