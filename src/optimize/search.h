// optimize/search.h — what every peak-memory search shares (optimize.h):
// the builds, what each told, the best plan, and when the searches stop.
//
// Contract:
//  * Plans are saved sets over a PlanSpace (optimize/space.h), as flags per
//    var. evaluate(asked) builds the plan saving what `asked` implies
//    (space.h implied_recompute: only what something reads is saved) with
//    the Builder (prepared ids, graph order), exactly as the pipeline builds
//    any decision and measures it (memory/plan.h). Each saved set is built
//    once; asking again returns its first Verdict.
//  * A build with a mutation hazard forbids saving the hazardous values from
//    then on (space.h forbid_save; in every plan they would be saved the same
//    way, so the hazard is the value's, not the plan's), and hazardous()
//    lists them for a search that restores the space. A hazardous build
//    neither fits nor counts toward the smallest peak.
//  * best() is the plan recomputing least (measured recompute_runtime)
//    among the builds that simulated within the limit with no hazard and the
//    plans offered (offer: torch's own plans, which fit by construction);
//    ties keep the earlier. Only best() is ever returned.
//  * smallest_peak() is the smallest simulated peak of the hazard-free
//    builds (evaluate's and build_unkeyed's), -1 before any.
//  * model_bounds() stays true while every evaluated plan's simulated peak is
//    at least its model peak (space.h model_peak): exact's proofs and every
//    lower bound rest on it. After screen_with_chained_model() (torch's plans
//    screened by space.h chained_peak), chained_bounds() stays true while
//    every plan built since simulated at least its chained peak.
//  * chained_gap(): the most any hazard-free build (evaluate's and
//    build_unkeyed's) peaked above its chained peak, -1 before any; 0 says
//    the chained model has equalled every build's peak so far.
//  * over_by_chained_model(asked): while chained_bounds() holds, whether the
//    chained model puts the plan `asked` implies (as evaluate builds it)
//    over the limit, so that it cannot fit and need not be built; it marks
//    the search screened, so later builds check that premise. Builds
//    nothing, counts nothing.
//  * Stopping, read here only: solver rounds, solver nodes and the time
//    safety net. solve() runs one solver round when allow_rounds' caps (of
//    rounds, none until called, and of nodes, Effort::nodes until then; 0:
//    the first solve sizes it, auto_node_budget of its program) and the
//    safety net (Effort::seconds from the start of the search; 0: none)
//    allow it. The round's node limit is what is left of the cap (each
//    round counts at least one node, so the nodes bound the rounds too),
//    its time limit what is left of the net. allow_rounds may also refuse
//    every round when the first one's program is larger than a size (rows
//    plus columns), or any round whose program is: what one node costs
//    grows with it, and lazy rows grow a program from round to round
//    (fast's polish, optimize.h kPolishSize). When the nodes, that size
//    or the net stop the rounds short of a proof, stopped() names which
//    ("nodes" for the first two, "time"); forget_stop() clears it.
//    elapsed() goes into the summary.
//  * REMAT_MILP_DUMP_DIR set (benchmarks only): solve() writes each program
//    to DIR/<n>.mps (Milp::write_mps; n counts the process's solves) before
//    solving it. Read at each solve.
//  * fast_peak_bound(): a proven lower bound of any valid plan's peak, every
//    row with only what every plan holds there (0 when the model is not a
//    bound).
//  * unreachable(bound) throws BudgetUnreachableError naming the limit, the
//    smallest simulated peak (or that no hazard-free plan was found) and the
//    bound when it proves something; finish() returns best() with its
//    peak_search summary (plans built, cuts counted by count_cut, solver
//    rounds, the Proof).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optimize/milp.h"
#include "optimize/optimize.h"
#include "optimize/space.h"

namespace remat::optimize {

// A saved set's flags as a map key: std::map over vector<uint8_t> trips a
// GCC 12 false -Wstringop-overread in its memcmp.
std::string flags_key(const std::vector<uint8_t>& flags);

// What a built plan told us.
struct Verdict {
  bool fits = false;
  bool hazards = false;
  int64_t peak = 0;
  // The vars whose storages are alive at the peak, largest first, and
  // whether each was allocated by the backward (a recomputation).
  std::vector<std::pair<uint32_t, bool>> at_peak;
  // Per model row: the simulated live bytes at that instant (0 where the
  // built graphs have no such node).
  std::vector<int64_t> rows;
  double recompute = 0;  // the build's measured recompute_runtime
  // The chained model's peak of the plan built (space.h chained_peak):
  // what fast's settle reads the build's peak against.
  int64_t chained = 0;
};

// What a search proved of the recompute (exact): a lower bound (-1: none)
// and whether the plan found is optimal.
struct Proof {
  double bound = -1;
  bool optimal = false;
};

// Effort::nodes 0: the node budget for a program of `rows` rows and
// `columns` columns (size = rows + columns): kAutoNodeWork / size, or
// kAutoNodeWorkCubed / size^3 when that is less, clamped to
// [kAutoNodesMin, kAutoNodesMax]. A node's LP grows faster than the
// program: on a 2.7k-node transformer stack's program (7k rows, 2.8k
// columns) a node cost about 0.1 s of CPU, on a 10^4-node one's (25k rows,
// 10.5k columns) about 6 s, on the corpus's (a few hundred) about a
// millisecond (those figures with every memory row; exact's lazy memory
// rows, exact.h, size the budget by the smaller first program, 29k at 10^4
// nodes, whose nodes cost about 1 s). The cubed term gives the large
// programs a few nodes (6 at 29k), so that exact ends there within seconds
// with a gap.
inline constexpr int64_t kAutoNodeWork = 2'000'000;
inline constexpr double kAutoNodeWorkCubed = 2.2e14;
inline constexpr int64_t kAutoNodesMin = 1;
inline constexpr int64_t kAutoNodesMax = 20000;
int64_t auto_node_budget(int rows, int columns);

class Search {
 public:
  // `ctx` is the context `space` was made from.
  Search(const DecideContext& ctx, PlanSpace& space, int64_t limit, const Effort& effort, const Builder& build);

  const DecideContext& ctx() const { return ctx_; }
  PlanSpace& space() const { return space_; }
  int64_t limit() const { return limit_; }

  // --- building ---
  Verdict evaluate(const std::vector<uint8_t>& asked);
  // One priced min-cut solved (fast's), for the summary's `cuts`.
  void count_cut() { ++cuts_; }
  // A build outside evaluate's record (torch's own plans, which
  // memory/peak_budget.h builds from node lists): counted, checked against
  // the screen, its peak recorded when it has no hazard.
  PartitionResult build_unkeyed(const std::vector<NodeId>& saved);
  // Makes (result, saved) best() when none is or it recomputes less.
  void offer(PartitionResult result, std::vector<NodeId> saved);

  // --- what the builds told ---
  const std::optional<Outcome>& best() const { return best_; }
  // best() recomputes nothing: no plan can replace it (offer() wants less),
  // so a search that only looks for cheaper plans may stop.
  bool best_is_free() const { return best_ && best_->result.recompute_runtime <= 0; }
  int64_t smallest_peak() const { return smallest_peak_; }
  const std::vector<uint32_t>& hazardous() const { return hazardous_; }
  bool model_bounds() const { return model_bounds_; }
  void screen_with_chained_model() { screened_ = true; }
  bool over_by_chained_model(const std::vector<uint8_t>& asked);
  bool chained_bounds() const { return chained_bounds_; }
  // The most a hazard-free build's simulated peak exceeded its chained
  // peak (space.h chained_peak); -1 before any build.
  int64_t chained_gap() const { return chained_gap_; }
  int64_t fast_peak_bound() const;

  // --- stopping ---
  double elapsed() const;
  // Which rounds allow_rounds' size caps.
  enum class SizeCap { kFirstRound, kEveryRound };
  // At most `more` solver rounds and `nodes` solver nodes from now on;
  // with `size` >= 0, none at all when the first round's program has more
  // rows plus columns than that, and with kEveryRound no later round
  // either whose program has (the rounds stop there).
  void allow_rounds(int more, int64_t nodes, int64_t size = -1, SizeCap which = SizeCap::kFirstRound) {
    max_rounds_ = rounds_ + more;
    node_cap_ = nodes_used_ + nodes;
    size_cap_ = size;
    size_cap_every_round_ = which == SizeCap::kEveryRound;
  }
  // One solver round of `milp`; nullopt (nothing run) when the rounds,
  // the nodes or the time are spent.
  std::optional<Milp::Result> solve(Milp& milp);
  // False, with stopped() "time", once the time safety net is spent.
  bool time_allows() {
    if (seconds_ <= 0 || left() > 0) return true;
    stopped_by_ = "time";
    return false;
  }
  const std::string& stopped() const { return stopped_by_; }
  void forget_stop() { stopped_by_.clear(); }

  // --- the answer ---
  [[noreturn]] void unreachable(int64_t bound) const;
  Outcome finish(const char* mode, const Proof& proof = {});

 private:
  using Clock = std::chrono::steady_clock;
  double left() const;
  int64_t check_chained(const std::vector<uint8_t>& saved, int64_t simulated, bool hazard_free);
  void record_peak(int64_t peak);

  const DecideContext& ctx_;
  PlanSpace& space_;
  const int64_t limit_;
  const double seconds_;  // Effort::seconds: 0, none
  const Builder& build_;
  const Clock::time_point start_;
  std::map<std::string, Verdict> seen_;
  std::vector<uint32_t> hazardous_;  // vars whose saving made a hazard
  std::optional<Outcome> best_;
  int64_t smallest_peak_ = -1;
  bool model_bounds_ = true;    // every built plan's peak >= its model peak
  bool screened_ = false;       // torch's plans were screened by chained_peak
  bool chained_bounds_ = true;  // every plan built since: peak >= chained_peak
  int64_t chained_gap_ = -1;   // chained_gap()
  int built_ = 0;
  int cuts_ = 0;
  int rounds_ = 0;
  int max_rounds_ = std::numeric_limits<int>::max();  // allow_rounds caps it
  int64_t node_cap_;           // solves stop when nodes_used_ reaches it; < 0: sized at the first
  int64_t nodes_used_ = 0;     // nodes spent, each solve counting at least one
  int64_t solver_nodes_ = 0;   // branch-and-bound nodes the solver reported
  int64_t size_cap_ = -1;  // allow_rounds' size while it applies; < 0: none
  bool size_cap_every_round_ = false;
  std::string stopped_by_;     // PeakSearchSummary::stopped_by
};

}  // namespace remat::optimize
