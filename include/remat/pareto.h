// remat/pareto.h — the memory-budget Pareto frontier written out: CSV, JSON
// and an SVG chart (`remat pareto`, the HTML report, remat.torch's
// memory_budget_pareto_*.svg files).
//
// Contract: deterministic writers (same points, same bytes), numbers in
// fmt's shortest round-trip form so the text reads back exactly. The points
// are written in the order given; the sweep (budget/pareto.h) gives them
// sorted, duplicates kept.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "remat/partition.h"

namespace remat {

// "budget,recompute_runtime,memory_ratio" then one row per point.
std::string pareto_csv(std::span<const MemoryBudgetPoint> points);
// {"points": [{"budget": .., "recompute_runtime": .., "memory_ratio": ..}, ...]}
std::string pareto_json(std::span<const MemoryBudgetPoint> points);
// A standalone SVG line chart: memory ratio (x) against recompute runtime
// (y), each point labelled with its ratio, as torch's matplotlib figure.
std::string pareto_svg(std::span<const MemoryBudgetPoint> points,
                       std::string_view title =
                           "Pareto Frontier of Memory Budget vs. Recomputation Runtime");

}  // namespace remat
