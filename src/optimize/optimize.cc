// optimize/optimize.cc — minimize_recompute: which search runs when.
// Contract: optimize/optimize.h.
//
// One Search (optimize/search.h) owns what every search shares: the
// builds, the best verified plan, the smallest simulated peak, hazards,
// the model check and when the searches stop. The searches (fast.h,
// torch_plans.h, checkpoint.h, exact.h) run against it, in the order below.
#include "optimize/optimize.h"

#include <algorithm>
#include <optional>

#include "optimize/exact.h"
#include "optimize/fast.h"
#include "optimize/search.h"

namespace remat::optimize {
namespace {

bool small_space(const PlanSpace& space) { return space.vars().size() <= static_cast<size_t>(kPolishVars); }

Outcome run_fast(Search& s) {
  fast(s);
  // Small spaces: when nothing fits yet, exact's smallest-peak search
  // until a plan fits; then a short polish by exact's MILP from the
  // plan. Both are bounded by rounds and solver nodes, not seconds, so
  // the answer does not depend on the machine's speed (the caller's time
  // safety net, when set, still applies), and neither runs when its first
  // program is larger than kPolishSize, where a node costs milliseconds
  // (the polish of a plan in hand stops at any such program).
  // fast's own searches, aimed far below what any plan
  // reaches, price saving so high that their plans overshoot (on
  // mlp_gelu_d6 the smallest peak they built was 1003.3 KiB, the
  // MILP's 908.0 KiB); the smallest-peak search's bound is the proof
  // of the unreachable error when nothing fits.
  int64_t bound = 0;
  Proof proof;
  if (small_space(s.space())) {
    if (!s.best()) {
      s.allow_rounds(kPolishRounds, kPolishNodes, kPolishSize);
      bound = smallest_peak_bound(s, /*until_fits=*/true, kStallRounds);
    }
    // Past kPolishSize the smallest-peak search's first program stops it
    // (its later rounds find the smallest peak an unreachable error
    // names: optimize.h kPolishSize); exact's rounds stop at any program
    // past it, whether or not a plan is in hand (their nodes cost
    // seconds a round there).
    // A proven bound above the limit is the answer: no plan fits.
    if (!s.best() && bound > s.limit()) s.unreachable(bound);
    s.allow_rounds(kPolishRounds, kPolishNodes, kPolishSize, Search::SizeCap::kEveryRound);
    proof = exact(s, kPolishStallRounds);
    // fast's own node caps end its polish: not a cut short (the caller's
    // time safety net, when it stopped the polish, still says so).
    if (s.stopped() == "nodes") s.forget_stop();
  }
  if (!s.best()) s.unreachable(std::max(bound, s.fast_peak_bound()));
  return s.finish("fast", proof);
}

Outcome run_exact(Search& s) {
  fast(s);  // an incumbent, and a first cut of hazards
  // Without one, the plans of least peak first, until one fits: the MILP
  // of least recompute can spend the whole time cutting off plans the
  // model lets through (gru_unrolled at 4992 bytes did, and was then
  // reported unreachable with the least peak it had built, 5056, though
  // this search reaches 4992 in a fraction of a second). Its bound is the
  // proof of the unreachable error when nothing fits.
  std::optional<int64_t> peak_bound;
  if (!s.best()) peak_bound = smallest_peak_bound(s, /*until_fits=*/true);
  if (!s.best() && peak_bound && *peak_bound > s.limit()) s.unreachable(*peak_bound);  // as run_fast
  const Proof proof = exact(s);
  if (!s.best()) s.unreachable(peak_bound ? *peak_bound : smallest_peak_bound(s));
  return s.finish("exact", proof);
}

}  // namespace

Outcome minimize_recompute(const DecideContext& ctx, PlanSpace& space, int64_t limit,
                           PartitionOptions::PeakSearch mode, const Effort& effort, const Builder& build) {
  Search s(ctx, space, limit, effort, build);
  return mode == PartitionOptions::PeakSearch::kFast ? run_fast(s) : run_exact(s);
}

}  // namespace remat::optimize
