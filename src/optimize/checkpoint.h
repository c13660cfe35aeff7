// optimize/checkpoint.h — checkpointed plans (Chen et al. 2016), fast's
// search on deep graphs when none of torch's plans fits (optimize/fast.h).
//
// Contract:
//  * separators(ctx, space): the vars where every recomputation chain
//    passes, in graph order: recomputable, saveable vars p with bytes such
//    that no recomputable var before p is read by a forward-required var
//    after it. Recomputing anything after p never reaches before it.
//  * checkpointed(ctx, space, base, seps, c), 1 <= c <= seps.size(): the plan
//    checkpointing the prefix up to seps[c - 1] (with the forward-computable
//    vars only the backward needs that read nothing but the prefix): saves
//    every ~sqrt(c)-th separator counting down from seps[c - 1] (always
//    saved, the boundary), recomputes the rest of the prefix, and saves as
//    `base` does after it.
//  * checkpoints(s), for spaces with at least kMinSeparators separators, base
//    saving what the backward reads and what cannot be recomputed: the fully
//    checkpointed plan (c = all) is built first unless the chained model
//    (space.h chained_peak, a lower bound, exact where everything is
//    recomputed) says it may fit. It is not always the family's smallest
//    peak: near c = all the peaks rise again (its segments are the longest;
//    on transformer_9963 a shorter prefix built 19.6 MiB where it builds
//    25.6). When it does not fit, a golden-section search over c for the
//    least peak (at most kCheckpointBuilds builds) stops at the first
//    prefix that fits; none: false. Then the shortest
//    prefix that fits (the family's least recompute) is searched by regula
//    falsi on c, at most kCheckpointBuilds more builds, stopping when within
//    1/64 of the separators or, once one of its steps fitted, within 1/32 of
//    the limit (not from the golden section's prefix: it lies near the
//    least peak, where the peaks are flat in c); a step into the
//    last eighth of the bracket bisects instead (a line drawn to a rising
//    end lands next to it). The fully checkpointed plan is built last when
//    none of them fits. Every plan built goes through Search::evaluate (so
//    a fitting one becomes best()); returns whether a checkpointed plan
//    fits.
//  * The fully checkpointed plan and the golden section's prefixes are not
//    built when the chained model puts them over the limit and at or above
//    the smallest peak built so far (while Search::chained_bounds() holds,
//    marking the search screened): they can neither fit nor name a smaller
//    peak, and their chained peaks stand in for their builds. The golden
//    section may then take another path than builds would; at the 60
//    limits of docs/scale.md every plan and every smallest peak stayed the
//    same (moe_9923's tightest limit 23 -> 18 builds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "optimize/search.h"

namespace remat::optimize {

// The fewest separators worth checkpointing, and the builds of the search
// for the shortest fitting prefix.
inline constexpr size_t kMinSeparators = 4;
inline constexpr int kCheckpointBuilds = 4;

std::vector<uint32_t> separators(const DecideContext& ctx, const PlanSpace& space);
std::vector<uint8_t> checkpointed(const DecideContext& ctx, const PlanSpace& space, const std::vector<uint8_t>& base,
                                  const std::vector<uint32_t>& seps, size_t c);
bool checkpoints(Search& s);

}  // namespace remat::optimize
