// memory/peak_budget.h — stage 3 (decide) under a peak memory limit: the
// plan with the least estimated recompute runtime whose simulated peak fits.
//
// Contract (PartitionOptions::peak_memory_budget):
//  * Candidates, in an order fixed before the limit is read: BudgetPlanList
//    (decide.h) for activation budgets 1, the two aggressive tiers, the
//    knapsack at kPeakSearchBudgets and 0, which is torch's own order of
//    increasing estimated recompute runtime; a plan whose simulation shows a
//    mutation hazard is followed by its repair (the backward nodes reading
//    the mutated input banned from recomputation, so their results are
//    saved instead), repeated while hazards remain (at most 3 times).
//  * Each candidate is built (`build`: extraction and rewrites as the
//    pipeline does them, then memory/plan.h) and simulated, in order; the
//    answer is the first hazard-free candidate whose peak fits: the least
//    estimated recompute runtime that fits. A candidate is not built when a
//    lower bound of its peak (the forward's inputs plus the storages its
//    saved values allocate, all alive when the forward returns) exceeds the
//    limit, since it cannot fit.
//  * When none fits: a repair path, also fixed before the limit is read,
//    starts from the hazard-free candidate with the smallest peak; each step
//    tries the largest storages alive at the peak (up to kRepairMoves of
//    them): a saved forward value is recomputed instead, a value the
//    backward recomputes is saved instead; the step keeps the hazard-free
//    result with the smallest peak, and the path ends when a step gains
//    nothing or after kRepairSteps steps. The answer is the first state of
//    the path that fits.
//    With `repairs` false (the fast search's first pass on large graphs,
//    optimize/fast.h), a limit no candidate meets is unreachable at once: the
//    candidates set aside are not built and no repair path runs. A
//    `bound` given (the optimizer's tighter lower bound of a saved set's
//    peak, optimize/space.h chained_peak) sets aside the candidates it puts
//    over the limit too; with `repairs`, the candidates set aside are
//    taken least bound first, each built to start the path only when the
//    bound puts it below the smallest peak built so far (or at it, and
//    earlier in the list: ties start where the list order would), and a
//    repair move only when the bound puts it below the
//    step's best so far (or the current state's peak): while the bound
//    holds, the path is the same, for fewer builds (the optimizer checks
//    that it held, optimize/search.h chained_bounds).
//  * `candidates`, when given, holds the list (PeakCandidates): each is cut
//    once however many searches on one context read it (fast runs up to
//    three, optimize/torch_plans.h). The same candidates, in the same order.
//    A candidate an earlier search on it built hazard-free over the same
//    limit is not built again (PeakCandidates below): it cannot fit, and
//    the record's least-peak result stands in as a start of the path.
//  * Otherwise BudgetUnreachableError (kBudgetUnreachable) naming the limit
//    and the smallest peak any hazard-free candidate or path state reached
//    (its smallest_peak; no proven_bound).
// Because the answer is the first fitting plan in one fixed order, a
// smaller limit never gives a plan with a higher peak (monotone). Cost: one
// cut and one build per candidate reached; a limit the runtime-optimized
// plan meets costs about one plain partition.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "decide/decide.h"
#include "remat/partition.h"

namespace remat {

inline constexpr double kPeakSearchBudgets[] = {0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125};
inline constexpr int kRepairMoves = 3;
inline constexpr int kRepairSteps = 6;

// Builds the partition for a saved set (ids of ctx.graph) chosen by `cut`
// (null when no cut chose it) and measures it (memory/plan.h).
using PlanBuilder =
    std::function<PartitionResult(const std::vector<NodeId>& saved, const MinCutResult* cut)>;

struct PeakSearchStats {
  int candidates = 0;    // plans built and simulated, repairs included
  int moves_set_aside = 0;  // repair moves the bound put no lower than needed, not built
  std::string chosen;    // the label of the plan returned
};

// A lower bound of the simulated peak of the plan saving `saved` (ids of
// ctx.graph).
using PeakBound = std::function<int64_t(const std::vector<NodeId>& saved)>;

// The search's candidates (BudgetPlanList over kPeakSearchBudgets), cut as
// first asked for and kept: a 10^4-node graph's list costs about one plain
// partition, which a second search on the same context need not pay again.
// at(i) is the i-th candidate, nullptr past the last; its address stays
// valid while the PeakCandidates lives.
//
// It also keeps what the searches under one limit learned of the
// candidates they built that were hazard-free and did not fit (their
// peaks, and the result of the one with the smallest peak, the earliest
// on ties): a later search under that limit takes them instead of building
// them again (fast's pass with repairs follows its first pass, which built
// the same candidates: at moe_9923's tightest limit in docs/scale.md one
// build of about 7 ms). A search under another limit starts the record
// afresh.
class PeakCandidates {
 public:
  explicit PeakCandidates(const DecideContext& ctx);
  ~PeakCandidates();
  const BudgetPlan* at(size_t i);

  // Candidate i was built under `limit`: hazard-free, its peak over it.
  void record_miss(int64_t limit, size_t i, const PartitionResult& result);
  // The peak recorded for candidate i under `limit`; -1 when none is.
  int64_t missed_peak(int64_t limit, size_t i) const;
  // The result of the recorded candidate i (under `limit`) when it is the
  // one kept, null otherwise: the record's smallest peak.
  const PartitionResult* kept_miss(int64_t limit, size_t i) const;

 private:
  BudgetPlanList list_;
  std::deque<BudgetPlan> kept_;
  bool listed_ = false;  // list_ has given its last
  int64_t miss_limit_ = -1;                   // the limit the record is for
  std::vector<int64_t> miss_peaks_;           // per candidate index; -1: none
  size_t smallest_miss_ = 0;                  // the index of the kept result
  std::optional<PartitionResult> smallest_miss_result_;
};

PartitionResult solve_peak_budget(const DecideContext& ctx, int64_t limit, const PlanBuilder& build,
                                  PeakSearchStats* stats = nullptr, bool repairs = true,
                                  const PeakBound& bound = nullptr, PeakCandidates* candidates = nullptr);

// What solve_peak_budget with repairs builds before its repair path, and
// no more: the candidates that may fit (the first that fits is returned),
// then, when none does, those set aside, least bound first, each only while
// it could start the path (nullopt). Through `candidates`' record, so that
// a later solve_peak_budget under `limit` on it builds none of them again.
// fast builds this start before its checkpointed plans where torch's first
// pass built nothing (optimize/fast.h): the smallest peak it names lets the
// checkpointed search set aside the plans the chained model puts above it.
std::optional<PartitionResult> build_repair_start(const DecideContext& ctx, int64_t limit, const PlanBuilder& build,
                                                  const PeakBound& bound, PeakCandidates& candidates);

// The search as the pipeline's plan step runs it (PartitionPlan under
// peak_memory_budget): `build` receives each candidate's saved values split
// by kind (split_saved_values) and its cut's story by joint id (cut_story;
// empty ban reasons when no cut chose it), and builds it exactly as a plain plan is
// built. The answer is the chosen candidate's result and its saved values
// both as ids of ctx.graph (`chosen`) and as joint ids (`saved_joint`:
// saved values, then sym nodes, then opaque values).
struct PeakBudgetPlan {
  PartitionResult result;
  std::vector<NodeId> chosen;
  std::vector<NodeId> saved_joint;
};
using SavedSetsBuilder = std::function<PartitionResult(
    SavedSets saved, const CutStory& story)>;
PeakBudgetPlan plan_peak_budget(const DecideContext& ctx, int64_t limit, size_t joint_size,
                                const SavedSetsBuilder& build);

}  // namespace remat
