// optimize/checkpoint.cc — checkpointed plans for deep graphs.
// Contract: optimize/checkpoint.h.
//
// The cuts' model follows recomputed chains only kEarlyDepth deep, and
// torch's plans all keep every layer's activations, so on a deep stack
// neither reaches a peak much below the runtime-optimized one (a 10^4-node
// residual MLP: 1015.6 of 1016.1 MiB). Chen et al. 2016 reach far lower:
// save a value every few layers where the graph narrows to one value, and
// recompute each segment in the backward just before its gradients need
// it (the extraction keeps the joint order, and the autograd-order
// rewrite pulls each recomputation to its first reader), so only one
// segment's activations are alive at a time.
#include "optimize/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

namespace remat::optimize {

// Separators: recomputable, saveable vars p with storage such that no
// recomputable var before p is read by a var after p (values that cannot
// be recomputed are saved, so they do not chain). Recomputing anything
// after p then never reaches before it.
std::vector<uint32_t> separators(const DecideContext& ctx, const PlanSpace& space) {
  const auto& vars = space.vars();
  const auto& users = space.users();
  std::vector<uint32_t> out;
  uint32_t reach = 0;  // the farthest var read by a recomputable var so far
  for (uint32_t p = 0; p < vars.size(); ++p) {
    const Var& v = vars[p];
    if (reach <= p && v.can_save && v.can_recompute && v.bytes > 0) out.push_back(p);
    if (!v.can_recompute) continue;
    for (uint32_t u : users[p])
      if (ctx.info.required_fw[vars[u].node]) reach = std::max(reach, u);
  }
  return out;
}

// The plan that checkpoints the graph up to separator seps[c - 1]: saves
// every ~sqrt(c)-th separator there (seps[c - 1] always: the boundary)
// and recomputes the rest of that prefix; after it saves what the
// backward reads, as `base` does. The backward runs the suffix first, so
// its saved values are freed before the checkpointed segments run.
std::vector<uint8_t> checkpointed(const DecideContext& ctx, const PlanSpace& space,
                                  const std::vector<uint8_t>& base, const std::vector<uint32_t>& seps, size_t c) {
  std::vector<uint8_t> saved = base;
  const auto& vars = space.vars();
  const auto& deps = space.deps();
  // The prefix: the vars up to the boundary, and the forward-computable
  // vars only the backward needs (a transpose of an activation for a
  // weight's gradient) that read nothing but the prefix.
  std::vector<uint8_t> prefix(vars.size(), 0);
  for (uint32_t k = 0; k < vars.size(); ++k) {
    prefix[k] = k <= seps[c - 1];
    if (!prefix[k] && !deps[k].empty() && !ctx.info.required_fw[vars[k].node])
      prefix[k] = std::all_of(deps[k].begin(), deps[k].end(), [&](uint32_t u) { return prefix[u] != 0; });
    if (prefix[k] && vars[k].can_recompute) saved[k] = 0;
  }
  const size_t stride = std::max<size_t>(1, std::llround(std::sqrt(static_cast<double>(c))));
  for (size_t j = c; j >= 1; j = j > stride ? j - stride : 0) saved[seps[j - 1]] = 1;
  return saved;
}

namespace {

// A prefix length in (0, n) whose plan fits `limit`, with its peak, by a
// golden-section search for the least peak (the peaks are about U-shaped
// in the prefix length: falling as layers are checkpointed, rising again
// as the segments recomputed at once grow), stopping at the first plan
// that fits; at most kCheckpointBuilds builds. nullopt when none fits.
template <class Peak>
std::optional<std::pair<size_t, int64_t>> fitting_prefix(size_t n, int64_t limit, Peak& peak) {
  constexpr double kInvPhi = 0.6180339887498949;
  size_t a = 0, b = n;
  auto inner = [&](bool left) {
    const double span = static_cast<double>(b - a);
    const size_t c = left ? b - static_cast<size_t>(std::llround(kInvPhi * span))
                          : a + static_cast<size_t>(std::llround(kInvPhi * span));
    return std::clamp(c, a + 1, b - 1);
  };
  // A prefix that does not build (a hazard, or invalid) counts as too high.
  auto at = [&](size_t c) { return peak(c).value_or(std::numeric_limits<int64_t>::max()); };
  if (b - a < 3) return std::nullopt;
  size_t c1 = inner(true), c2 = inner(false);
  int64_t p1 = at(c1), p2 = c2 == c1 ? p1 : at(c2);
  for (int build = 2; ; ++build) {
    if (p1 <= limit) return std::make_pair(c1, p1);
    if (p2 <= limit) return std::make_pair(c2, p2);
    if (build >= kCheckpointBuilds || b - a < 4) return std::nullopt;
    if (p1 <= p2) {  // the least peak lies left of c2
      b = c2;
      c2 = c1;
      p2 = p1;
      c1 = inner(true);
      p1 = c1 == c2 ? p2 : at(c1);
    } else {  // right of c1
      a = c1;
      c1 = c2;
      p1 = p2;
      c2 = inner(false);
      p2 = c2 == c1 ? p1 : at(c2);
    }
  }
}

}  // namespace

// When nothing else fits on a large space: the fully checkpointed plan,
// or when it does not fit, a prefix found by fitting_prefix; from the one
// that fits, the shortest checkpointed prefix that fits, found by regula falsi on the
// prefix's length (over most of the range peaks fall about linearly with
// it: each separator checkpointed frees about one layer's saved values;
// near the full end they rise again), at most kCheckpointBuilds more
// builds. Recompute grows with the prefix, so the shortest fitting one is
// the cheapest of the family. Returns whether a checkpointed plan fits.
bool checkpoints(Search& s) {
  const PlanSpace& space = s.space();
  const int64_t limit = s.limit();
  const std::vector<uint32_t> seps = separators(s.ctx(), space);
  if (seps.size() < kMinSeparators) return false;
  const auto& vars = space.vars();
  std::vector<uint8_t> base(vars.size(), 0);
  // What the backward reads, and every value that cannot be recomputed
  // (inputs a recomputation reads; implied_recompute drops the unread).
  for (size_t k = 0; k < vars.size(); ++k)
    base[k] = vars[k].can_save && (vars[k].needed || !vars[k].can_recompute);
  // The simulated peak of a plan; nullopt when invalid or hazardous.
  auto built_peak = [&](const std::vector<uint8_t>& saved) -> std::optional<int64_t> {
    if (!space.implied_recompute(saved)) return std::nullopt;
    const Verdict v = s.evaluate(saved);
    if (v.hazards) return std::nullopt;
    return v.peak;
  };
  // The same for the plan checkpointing c separators (c = 0: base).
  auto peak = [&](size_t c) { return built_peak(c == 0 ? base : checkpointed(s.ctx(), space, base, seps, c)); };
  // The peak of a plan the search may take unbuilt: one the chained model
  // puts over the limit and at or above the smallest peak built so far can
  // neither fit nor name a smaller peak, and its chained peak stands in
  // for its build (while that model has bounded every build).
  auto screened_peak = [&](const std::vector<uint8_t>& saved) -> std::optional<int64_t> {
    if (s.chained_bounds() && s.smallest_peak() >= 0) {
      const std::optional<Assignment> a = space.implied_recompute(saved);
      if (!a) return std::nullopt;
      s.screen_with_chained_model();
      const int64_t chained = space.chained_peak(a->saved);
      if (chained > limit && chained >= s.smallest_peak()) return chained;
    }
    return built_peak(saved);
  };
  auto screened_prefix = [&](size_t c) {
    return screened_peak(c == 0 ? base : checkpointed(s.ctx(), space, base, seps, c));
  };
  const size_t n = seps.size();
  const std::vector<uint8_t> full = checkpointed(s.ctx(), space, base, seps, n);
  const int64_t smallest_before = s.smallest_peak();
  // The fully checkpointed plan: when the chained model (a lower bound)
  // says it may fit, its estimate stands in for it until a build is
  // needed (it equals the simulation where everything is recomputed);
  // else it is built, to name the smallest reachable peak if nothing fits.
  int64_t peak_hi = space.model_is_bound() ? space.chained_peak(full) : limit + 1;
  bool hi_built = false;
  bool hi_on_line = false;  // hi came from a step of the regula falsi
  size_t hi = n;
  if (peak_hi > limit) {
    const std::optional<int64_t> at_hi = screened_peak(full);
    if (!at_hi) return false;
    if (*at_hi > limit) {
      // The full plan is not the family's smallest peak: near it the
      // peaks rise again. A shorter prefix may fit where it does not.
      const std::optional<std::pair<size_t, int64_t>> fit = fitting_prefix(n, limit, screened_prefix);
      if (!fit) return false;
      hi = fit->first;
      peak_hi = fit->second;
    } else {
      peak_hi = *at_hi;
    }
    hi_built = true;
  }
  size_t lo = 0;
  // lo does not fit (c = 0 is about the runtime-optimized plan, which did
  // not: its peak is taken as the smallest built so far, else built).
  int64_t at_lo = smallest_before > limit ? smallest_before : peak(0).value_or(0);
  if (at_lo <= limit) return true;
  // Close enough: within 1/64 of the separators, or a peak within 1/32
  // of the limit (peaks being about linear in c, the prefix, and so the
  // recompute, is then within a few percent of the shortest: each more
  // build costs most of a plain partition on the graphs this runs on).
  // The peak's test holds only for a fitting end this search's own steps
  // set: the golden section's lies near the least peak, where the peaks
  // are flat, not linear, in c (transformer_9963 at 20.149 MiB: c = 157
  // of 665 fits with a peak equal to the limit, c = 117 with 0.2 MiB to
  // spare and 7% less recompute).
  auto close = [&] {
    return hi_built && (hi - lo <= std::max<size_t>(1, n / 64) || (hi_on_line && limit - peak_hi <= limit / 32));
  };
  for (int step = 0; step < kCheckpointBuilds && !close() && hi - lo > 1; ++step) {
    // The c where the line through (lo, at_lo) and (hi, peak_hi) meets
    // the limit, rounded up (toward fitting), strictly inside.
    const double t = static_cast<double>(at_lo - limit) / static_cast<double>(at_lo - peak_hi);
    size_t c = lo + static_cast<size_t>(std::ceil(t * static_cast<double>(hi - lo)));
    // Near the fully checkpointed end the peaks rise again (its segments
    // are longest, and a recomputed segment's activations are what peaks
    // there): transformer_49803's fully checkpointed plan peaks at 95.99
    // MiB, a shorter prefix at 91.23. A line to such an end lands next to
    // it, on the rising side, and the peak's closeness to the limit then
    // says nothing of the prefix's; a step into the bracket's last eighth
    // bisects instead.
    if (hi - lo >= 8 && c > hi - (hi - lo) / 8) c = lo + (hi - lo) / 2;
    c = std::clamp(c, lo + 1, hi - 1);
    const std::optional<int64_t> p = peak(c);
    if (!p) break;
    if (*p <= limit) {
      hi = c;
      peak_hi = *p;
      hi_built = true;
      hi_on_line = true;
    } else {
      lo = c;
      at_lo = *p;
    }
  }
  if (hi_built) return true;
  // Nothing built fits yet: the fully checkpointed plan decides.
  const std::optional<int64_t> at_n = screened_peak(full);
  return at_n && *at_n <= limit;
}

}  // namespace remat::optimize
