// optimize/torch_plans.cc — torch's own plans inside fast.
// Contract: optimize/torch_plans.h.
#include "optimize/torch_plans.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "memory/peak_budget.h"
#include "remat/error.h"

namespace remat::optimize {

namespace {

// Builds each plan through the search (counted, its peak recorded), and
// corrects `targets` (when given) by each hazard-free one over the limit.
PlanBuilder builder(Search& s, Targets* targets) {
  return [&s, targets](const std::vector<NodeId>& saved, const MinCutResult*) {
    PartitionResult r = s.build_unkeyed(saved);
    if (targets && r.hazards.empty() && r.memory.peak_bytes > s.limit()) {
      Verdict v;
      v.rows = s.space().simulated_rows(r);
      correct(s.space(), s.space().saved_flags(saved), v, s.limit(), *targets);
    }
    return r;
  };
}

// Offers torch's plan `r` (ids of the joint graph) as the search's.
void offer_plan(Search& s, PartitionResult r) {
  std::vector<NodeId> saved;
  for (const auto* list : {&r.saved_values, &r.saved_sym_nodes, &r.saved_opaque_nodes})
    for (NodeId j : *list) saved.push_back(s.space().prepared_of(j));
  std::sort(saved.begin(), saved.end());
  s.offer(std::move(r), std::move(saved));
}

// The chained model's peak of a saved set (prepared ids): the screen.
PeakBound chained_bound(const PlanSpace& space) {
  return [&space](const std::vector<NodeId>& saved) { return space.chained_peak(space.saved_flags(saved)); };
}

}  // namespace

void torch_repair_start(Search& s, Targets* targets, PeakCandidates* candidates) {
  if (!s.chained_bounds() || candidates == nullptr) return;
  s.screen_with_chained_model();
  std::optional<PartitionResult> fit =
      build_repair_start(s.ctx(), s.limit(), builder(s, targets), chained_bound(s.space()), *candidates);
  if (fit) offer_plan(s, std::move(*fit));
}

void torch_plans(Search& s, Targets* targets, bool repairs, PeakCandidates* candidates) {
  PlanSpace& space = s.space();
  const PlanBuilder build = builder(s, targets);
  try {
    // Without repairs (fast's first pass on a large space), candidates the
    // model with whole recomputed chains puts over the limit are set aside
    // unbuilt: on a deep stack every torch plan recomputing a layer's
    // values keeps the chain back to a saved one alive (about 40% of
    // fast's time at the middle of its range on the 10^4-node residual
    // MLP went to building them).
    // With repairs, on spaces past the polish's (where a build that shows
    // the screen's premise false makes fast run the whole search again,
    // fast.h), the same model screens the candidates that could start the
    // repair path and its moves: on resnet_9943 at its smallest peak it
    // equals every repair move's built peak, and a move no lower than the
    // step's best need not be built.
    PeakBound screen;
    if (repairs && s.chained_bounds() && space.vars().size() > static_cast<size_t>(kPolishVars)) {
      s.screen_with_chained_model();
      screen = chained_bound(space);
    }
    if (!repairs) {
      s.screen_with_chained_model();
      const double ceiling = s.best() ? s.best()->result.recompute_runtime : -1;
      screen = [&, ceiling](const std::vector<NodeId>& saved) {
        const std::vector<uint8_t> flags = space.saved_flags(saved);
        if (ceiling >= 0) {
          const std::optional<Assignment> a = space.implied_recompute(flags);
          if (a && a->cost >= ceiling) return std::numeric_limits<int64_t>::max();
        }
        return space.chained_peak(flags);
      };
    }
    offer_plan(s, solve_peak_budget(s.ctx(), s.limit(), build, nullptr, repairs, screen, candidates));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kBudgetUnreachable) throw;
  }
}

}  // namespace remat::optimize
