// remat/pareto.h — the memory-budget Pareto frontier written out: CSV, JSON
// and an SVG chart (`remat pareto`, the HTML report, remat.torch's
// memory_budget_pareto_*.svg files); built plans (torch's budget plans,
// remat's peak frontier) as a chart, CSV and JSON (`remat pareto --peak`).
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
// (y), as torch's matplotlib figure. Each point is labelled with its ratio
// while there are at most kParetoLabels distinct points and its label
// touches none placed before; otherwise (and beyond that count) the
// point's tooltip carries it instead.
inline constexpr size_t kParetoLabels = 12;
std::string pareto_svg(std::span<const MemoryBudgetPoint> points,
                       std::string_view title =
                           "Pareto Frontier of Memory Budget vs. Recomputation Runtime");

// A standalone SVG scatter of budget plans (budget_plans()): simulated peak
// memory in bytes (x) against estimated recompute runtime (y). The plans
// no other plan beats on both axes are joined as the frontier; each dot's
// tooltip names its plan (label, peak, recompute, saved values); nothing
// else is labelled, so any number of plans stays readable. `chosen` (may
// be null) is drawn as a red ring with a "this plan" label placed inside
// the plot on the side with room.
// `frontier` (peak_frontier(); empty: none, and the chart is the one-series
// chart, byte for byte) is a second series beside torch's: orange squares
// with the same tooltips, its undominated plans joined as a staircase (a
// plan's recompute holds from its peak up to the next one's). The title
// then names both, and the legend both series: "torch's activation-budget
// plans" and `frontier_name` (e.g. "remat exact"; it has room for 25
// characters). The text elements are the same for any number of points in
// either series.
std::string plans_svg(std::span<const BudgetPlanPoint> plans, const BudgetPlanPoint* chosen,
                      std::span<const BudgetPlanPoint> frontier = {},
                      std::string_view frontier_name = "remat");

// One named list of built plans: torch's budget plans ("torch") or remat's
// peak frontier ("remat_fast", "remat_exact").
struct PlanSeries {
  std::string_view name;
  std::span<const BudgetPlanPoint> plans;
};
// "label,series,peak_bytes,recompute_runtime,saved_values,limit_bytes", then
// one row per plan, series after series; a label with a comma, a quote or a
// line break is quoted as RFC 4180 says. limit_bytes is 0 for a plan made
// without a peak limit (torch's).
std::string plans_csv(std::span<const PlanSeries> series);
// {"plans": [{"label": .., "series": .., "peak_bytes": .., "recompute_runtime":
// .., "saved_values": .., "limit_bytes": ..}, ...]}, in the same order.
std::string plans_json(std::span<const PlanSeries> series);

}  // namespace remat
