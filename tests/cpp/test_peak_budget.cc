// tests/cpp/test_peak_budget.cc — PartitionOptions::peak_memory_budget under
// the torch_plans search (memory/peak_budget.h): the plan fits, it is
// torch's own when that fits, nothing fitting is a clear error, and a
// smaller limit never gives a higher peak, on random MLP-shaped joint
// graphs. fast, the default search, and exact: test_optimize.cc.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "analyze/analyze.h"
#include "decide/decide.h"
#include "graph_fixture.h"
#include "memory/peak_budget.h"
#include "random_mlp.h"
#include "remat/error.h"
#include "remat/partition.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using testing::random_mlp;

PartitionResult with_limit(const JointGraph& j, int64_t limit) {
  PartitionOptions o;
  o.peak_memory_budget = limit;
  o.peak_search = PartitionOptions::PeakSearch::kTorchPlans;
  return min_cut_rematerialization_partition(j, o);
}

// The smallest peak torch's plans reach, from the error of an impossible
// limit: its field, and the number its message names.
int64_t smallest_peak(const JointGraph& j) {
  try {
    with_limit(j, 1);
  } catch (const BudgetUnreachableError& e) {
    const std::string msg = e.what();
    const size_t at = msg.find("smallest peak found is ");
    EXPECT_NE(at, std::string::npos) << msg;
    if (at == std::string::npos) return -1;
    EXPECT_EQ(std::stoll(msg.substr(msg.find('(', at) + 1)), e.smallest_peak()) << msg;
    return e.smallest_peak();
  }
  ADD_FAILURE() << "a 1-byte limit was met";
  return -1;
}

// random_mlp(seed) as solve_peak_budget sees it under the torch_plans
// search: its prepared graph and min-cut context, and each saved set
// (prepared ids) built exactly as the pipeline builds a plan.
struct TorchPlansCase {
  explicit TorchPlansCase(uint32_t seed)
      : j(random_mlp(seed)),
        plan(plan_min_cut_rematerialization_partition(j, o)),
        g(plan.prepared()),
        in(min_cut_inputs(g, j, o)),
        ctx(in.context(g, o)) {}
  TorchPlansCase(const TorchPlansCase&) = delete;
  TorchPlansCase& operator=(const TorchPlansCase&) = delete;

  PartitionResult build(const std::vector<NodeId>& saved) const {
    std::vector<NodeId> joint_ids;
    for (NodeId p : saved) joint_ids.push_back(g.node(p).origin);
    return emit_partition(plan_min_cut_rematerialization_partition(j, o), joint_ids);
  }

  static PartitionOptions options() {
    PartitionOptions o;
    o.peak_search = PartitionOptions::PeakSearch::kTorchPlans;
    return o;
  }

  const JointGraph j;
  const PartitionOptions o = options();
  PartitionPlan plan;
  const Graph& g;
  MinCutInputs in;
  const DecideContext ctx;
};

TEST(PeakBudget, ALimitTorchsPlanMeetsGivesTorchsPlan) {
  const JointGraph j = random_mlp(7);
  const PartitionResult plain = min_cut_rematerialization_partition(j, PartitionOptions{});
  const PartitionResult r = with_limit(j, plain.memory.peak_bytes);
  EXPECT_EQ(r.saved_values, plain.saved_values);
  EXPECT_EQ(r.memory.peak_bytes, plain.memory.peak_bytes);
  EXPECT_EQ(r.stages.back().stage, "peak_search");
  // The default search (fast) there: a plan that fits, recomputing no more.
  PartitionOptions o;
  o.peak_memory_budget = plain.memory.peak_bytes;
  const PartitionResult f = min_cut_rematerialization_partition(j, o);
  EXPECT_EQ(f.peak_search.search, "fast");
  EXPECT_LE(f.memory.peak_bytes, plain.memory.peak_bytes);
  EXPECT_LE(f.recompute_runtime, plain.recompute_runtime);
}

TEST(PeakBudget, NothingFittingNamesTheSmallestReachablePeak) {
  const JointGraph j = random_mlp(3);
  const int64_t smallest = smallest_peak(j);
  ASSERT_GT(smallest, 0);
  // It is reachable: that limit is met, exactly.
  EXPECT_EQ(with_limit(j, smallest).memory.peak_bytes, smallest);
  try {
    with_limit(j, smallest - 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBudgetUnreachable);
    EXPECT_NE(std::string(e.what()).find(std::to_string(smallest) + " bytes"), std::string::npos)
        << e.what();
  }
}

// The repair path under a bound of each saved set's peak (the optimizer's
// chained model, optimize/torch_plans.h): candidates that could not start
// the path and moves that could not be a step's best are not built, and the
// path is the same. Here the bound is the exact simulated peak, so every
// build it sets aside is one the path did not need.
TEST(PeakBudget, ABoundBuildsFewerRepairsAndWalksTheSamePath) {
  int fewer = 0, moves_set_aside = 0;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const TorchPlansCase c(seed);
    int built = 0;
    const PlanBuilder build = [&](const std::vector<NodeId>& saved, const MinCutResult*) {
      ++built;
      return c.build(saved);
    };
    const PeakBound exact = [&](const std::vector<NodeId>& saved) { return c.build(saved).memory.peak_bytes; };
    // A limit nothing meets walks the whole path; its end is the error's peak.
    PeakSearchStats stats;
    auto walk = [&](const PeakBound& bound) {
      built = 0;
      stats = PeakSearchStats{};
      try {
        solve_peak_budget(c.ctx, 1, build, &stats, /*repairs=*/true, bound);
      } catch (const BudgetUnreachableError& e) {
        return std::make_pair(e.smallest_peak(), std::string(e.what()));
      }
      ADD_FAILURE() << "seed " << seed << ": a 1-byte limit was met";
      return std::make_pair(int64_t{-1}, std::string());
    };
    const auto [peak, message] = walk(nullptr);
    const int unbounded = built;
    const auto [bounded_peak, bounded_message] = walk(exact);
    EXPECT_EQ(bounded_peak, peak) << "seed " << seed;
    EXPECT_EQ(bounded_message, message) << "seed " << seed;  // the same plan named
    EXPECT_LE(built, unbounded) << "seed " << seed;
    fewer += built < unbounded;
    moves_set_aside += stats.moves_set_aside;
    // A bound of 0 sets nothing aside.
    walk([](const std::vector<NodeId>&) { return int64_t{0}; });
    EXPECT_EQ(built, unbounded) << "seed " << seed;
    EXPECT_EQ(stats.moves_set_aside, 0) << "seed " << seed;
  }
  EXPECT_GT(fewer, 0);
  EXPECT_GT(moves_set_aside, 0);  // the path's own moves, not only candidates
}

// PeakCandidates keeps torch's list (fast's passes share one): the same
// candidates in BudgetPlanList's order, each kept where it was first given,
// and searches reading a list that earlier searches read return what they
// return on a fresh one.
TEST(PeakBudget, KeptCandidatesAreTorchsListAndASecondSearchGivesTheSameAnswer) {
  for (uint32_t seed = 0; seed < 6; ++seed) {
    const TorchPlansCase c(seed);
    BudgetPlanList list(c.ctx, kPeakSearchBudgets);
    PeakCandidates kept(c.ctx);
    const BudgetPlan* first = kept.at(0);
    ASSERT_NE(first, nullptr);
    size_t n = 0;
    while (std::optional<BudgetPlan> p = list.next()) {
      const BudgetPlan* k = kept.at(n++);
      ASSERT_NE(k, nullptr) << "seed " << seed;
      EXPECT_EQ(k->label, p->label) << "seed " << seed;
      EXPECT_EQ(k->saved, p->saved) << "seed " << seed;
    }
    EXPECT_EQ(kept.at(n), nullptr);
    EXPECT_EQ(kept.at(0), first);  // kept, not cut again
    const PlanBuilder build = [&](const std::vector<NodeId>& saved, const MinCutResult*) { return c.build(saved); };
    auto answer = [&](int64_t limit, PeakCandidates* candidates) {
      try {
        const PartitionResult r = solve_peak_budget(c.ctx, limit, build, nullptr, true, nullptr, candidates);
        return std::make_pair(r.memory.peak_bytes, fmt::format("{}", fmt::join(r.saved_values, ",")));
      } catch (const BudgetUnreachableError& e) {
        return std::make_pair(e.smallest_peak(), std::string(e.what()));
      }
    };
    const int64_t plain = min_cut_rematerialization_partition(c.j, PartitionOptions{}).memory.peak_bytes;
    for (const int64_t limit : {plain, plain * 9 / 10, plain * 3 / 4, int64_t{1}})
      EXPECT_EQ(answer(limit, &kept), answer(limit, nullptr)) << "seed " << seed << " at " << limit;
  }
}

// The sorted saved sets of torch's candidates for c's context, to tell
// the candidates' builds from the repair path's.
std::set<std::vector<NodeId>> candidate_sets(const TorchPlansCase& c) {
  std::set<std::vector<NodeId>> sets;
  BudgetPlanList list(c.ctx, kPeakSearchBudgets);
  while (std::optional<BudgetPlan> p = list.next()) {
    std::sort(p->saved.begin(), p->saved.end());
    sets.insert(p->saved);
  }
  return sets;
}

// Builds c's saved sets, counting the builds of torch's candidates (count)
// and noting whether any build had a hazard.
struct CandidateBuilds {
  explicit CandidateBuilds(const TorchPlansCase& graph_case)
      : c(graph_case), candidates(candidate_sets(graph_case)) {}
  PlanBuilder builder() {
    return [this](const std::vector<NodeId>& saved, const MinCutResult*) {
      std::vector<NodeId> key = saved;
      std::sort(key.begin(), key.end());
      count += candidates.count(key) > 0;
      PartitionResult r = c.build(saved);
      hazards = hazards || !r.hazards.empty();
      return r;
    };
  }
  const TorchPlansCase& c;
  const std::set<std::vector<NodeId>> candidates;
  int count = 0;
  bool hazards = false;
};

// A bound equal to each saved set's simulated peak.
PeakBound exact_peaks(const TorchPlansCase& c) {
  return [&c](const std::vector<NodeId>& saved) { return c.build(saved).memory.peak_bytes; };
}

// Where no candidate fits, those set aside are built least bound first: a
// bound equal to each saved set's peak builds one candidate (the path's
// start) and sets every other aside. In list order the runtime-optimized
// plan, the largest, was built first, and each later one below it. The
// start, the path and the error are the same as without a bound.
TEST(PeakBudget, ACandidateSetAsideIsBuiltLeastBoundFirstToStartTheRepairPath) {
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const TorchPlansCase c(seed);
    CandidateBuilds counted(c);
    const std::set<std::vector<NodeId>>& candidates = counted.candidates;
    int& candidate_builds = counted.count;
    const bool& hazards = counted.hazards;
    const PlanBuilder build = counted.builder();
    const PeakBound exact = exact_peaks(c);
    auto walk = [&](const PeakBound& bound) {
      candidate_builds = 0;
      try {
        solve_peak_budget(c.ctx, 1, build, nullptr, /*repairs=*/true, bound);
      } catch (const BudgetUnreachableError& e) {
        return std::string(e.what());
      }
      ADD_FAILURE() << "seed " << seed << ": a 1-byte limit was met";
      return std::string();
    };
    const std::string unbounded = walk(nullptr);
    EXPECT_EQ(candidate_builds, static_cast<int>(candidates.size())) << "seed " << seed;
    EXPECT_EQ(walk(exact), unbounded) << "seed " << seed;  // the same start and path
    if (!hazards) {
      EXPECT_EQ(candidate_builds, 1) << "seed " << seed;
    }
  }
}

// A search under the limit an earlier one on the same PeakCandidates ran
// under builds none of the candidates that one built hazard-free over the
// limit, and answers as a search on a fresh list does (fast's pass with
// repairs after its first pass, optimize/fast.h).
TEST(PeakBudget, ASecondSearchUnderOneLimitBuildsNoCandidateTheFirstBuiltOverIt) {
  int saved_builds = 0;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const TorchPlansCase c(seed);
    const std::set<std::vector<NodeId>> candidates = candidate_sets(c);
    std::set<std::vector<NodeId>> built;  // candidates built so far
    int rebuilt = 0;
    const PlanBuilder build = [&](const std::vector<NodeId>& saved, const MinCutResult*) {
      std::vector<NodeId> key = saved;
      std::sort(key.begin(), key.end());
      if (candidates.count(key) > 0 && !built.insert(key).second) ++rebuilt;
      return c.build(saved);
    };
    // Just under every candidate's peak: those built do not fit.
    int64_t least = INT64_MAX;
    for (const std::vector<NodeId>& saved : candidates) least = std::min(least, c.build(saved).memory.peak_bytes);
    const int64_t limit = least - 1;
    auto answer = [&](PeakCandidates* kept, bool repairs) {
      try {
        const PartitionResult r = solve_peak_budget(c.ctx, limit, build, nullptr, repairs, nullptr, kept);
        return std::make_pair(r.memory.peak_bytes, fmt::format("{}", fmt::join(r.saved_values, ",")));
      } catch (const BudgetUnreachableError& e) {
        return std::make_pair(e.smallest_peak(), std::string(e.what()));
      }
    };
    PeakCandidates kept(c.ctx);
    answer(&kept, /*repairs=*/false);
    const size_t first = built.size();
    const auto second = answer(&kept, /*repairs=*/true);
    EXPECT_EQ(rebuilt, 0) << "seed " << seed;
    saved_builds += static_cast<int>(first);
    built.clear();
    EXPECT_EQ(second, answer(nullptr, /*repairs=*/true)) << "seed " << seed;
    // Under another limit the record is not used.
    PeakCandidates other(c.ctx);
    answer(&other, false);
    built.clear();
    rebuilt = 0;
    try {
      solve_peak_budget(c.ctx, limit - 1, build, nullptr, true, nullptr, &other);
    } catch (const BudgetUnreachableError&) {
    }
    EXPECT_EQ(built.size(), candidates.size()) << "seed " << seed;
  }
  EXPECT_GT(saved_builds, 0);  // the first searches built candidates the second did not
}

// build_repair_start builds what the search with repairs builds before its
// path and no more (a bound equal to each peak: the one candidate that
// starts it), and the search after it on the same PeakCandidates builds
// none of those again and says what a fresh search says.
TEST(PeakBudget, TheRepairPathsStartIsBuiltOnceAndTheSearchAfterItGoesOnFromIt) {
  for (uint32_t seed = 0; seed < 12; ++seed) {
    const TorchPlansCase c(seed);
    CandidateBuilds counted(c);
    int& candidate_builds = counted.count;
    const bool& hazards = counted.hazards;
    const PlanBuilder build = counted.builder();
    const PeakBound exact = exact_peaks(c);
    auto message = [&](PeakCandidates* kept) {
      try {
        solve_peak_budget(c.ctx, 1, build, nullptr, /*repairs=*/true, exact, kept);
      } catch (const BudgetUnreachableError& e) {
        return std::string(e.what());
      }
      ADD_FAILURE() << "seed " << seed << ": a 1-byte limit was met";
      return std::string();
    };
    const std::string fresh = message(nullptr);
    PeakCandidates kept(c.ctx);
    candidate_builds = 0;
    EXPECT_FALSE(build_repair_start(c.ctx, 1, build, exact, kept).has_value()) << "seed " << seed;
    if (hazards) continue;
    EXPECT_EQ(candidate_builds, 1) << "seed " << seed;
    candidate_builds = 0;
    EXPECT_EQ(message(&kept), fresh) << "seed " << seed;
    EXPECT_EQ(candidate_builds, 0) << "seed " << seed;
  }
}

TEST(PeakBudget, TheSearchReachesBelowEveryActivationBudget) {
  for (uint32_t seed = 0; seed < 10; ++seed) {
    const JointGraph j = random_mlp(seed);
    const int64_t smallest = smallest_peak(j);
    for (double b : {1.0, 0.5, 0.2, 0.0}) {
      PartitionOptions o;
      o.activation_memory_budget = b;
      EXPECT_LE(smallest, min_cut_rematerialization_partition(j, o).memory.peak_bytes)
          << "seed " << seed << " budget " << b;
    }
  }
}

// The property: for limits L1 > L2, peak(plan(L2)) <= peak(plan(L1)), every
// plan fits its limit, and once nothing fits, nothing smaller fits.
TEST(PeakBudget, ASmallerLimitNeverGivesAHigherPeak) {
  int ranged = 0;  // graphs where the search goes below torch's plan
  for (uint32_t seed = 0; seed < 24; ++seed) {
    const JointGraph j = random_mlp(100 + seed);
    const int64_t top = min_cut_rematerialization_partition(j, PartitionOptions{}).memory.peak_bytes;
    const int64_t bottom = smallest_peak(j);
    ranged += bottom < top;
    // Limits around every peak the search can return, plus a sweep.
    std::vector<int64_t> limits{top + top / 2, top, top - 1, bottom, bottom - 1};
    for (int k = 1; k < 12; ++k) limits.push_back(bottom + (top - bottom) * k / 12);
    std::sort(limits.rbegin(), limits.rend());
    limits.erase(std::unique(limits.begin(), limits.end()), limits.end());
    int64_t previous = INT64_MAX;
    bool failed = false;
    for (int64_t limit : limits) {
      if (limit <= 0) continue;
      try {
        const int64_t peak = with_limit(j, limit).memory.peak_bytes;
        EXPECT_FALSE(failed) << "seed " << seed << ": limit " << limit << " met after a larger failed";
        EXPECT_LE(peak, limit) << "seed " << seed;
        EXPECT_LE(peak, previous) << "seed " << seed << " limit " << limit;
        previous = peak;
      } catch (const Error& e) {
        ASSERT_EQ(e.code(), ErrorCode::kBudgetUnreachable) << e.what();
        EXPECT_LT(limit, bottom) << "seed " << seed << ": " << e.what();
        failed = true;
      }
    }
  }
  EXPECT_GE(ranged, 12) << "too few random graphs leave the search a choice";
}

// x (an input) times a one-element running statistic the caller updates
// after the forward: the cheapest cut saves both inputs and recomputes the
// product in the backward, which then reads the updated statistic.
JointGraph mutated_statistic() {
  TestGraph t;
  Ref x = t.placeholder("primals_1", {64});
  Ref stat = t.placeholder("primals_2", {1});
  Ref r = t.call("aten.mul.Tensor", {x, stat}, {64});
  Ref y = t.call("aten.sin.default", {r}, {64});
  Ref tangent = t.placeholder("tangents_1", {64});
  Ref c = t.call("aten.cos.default", {r}, {64});
  Ref g = t.call("aten.mul.Tensor", {tangent, c}, {64});
  Ref gx = t.call("aten.mul.Tensor", {g, x}, {64});
  t.output({A::tuple({y, gx, nullptr})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  j.mutated_inputs = {stat.id};
  return j;
}

TEST(PeakBudget, PlansReadingAMutatedInputAreRepairedNotReturned) {
  const JointGraph j = mutated_statistic();
  const PartitionResult plain = min_cut_rematerialization_partition(j, PartitionOptions{});
  ASSERT_EQ(plain.hazards.size(), 1u);  // torch's plan, kept for parity
  EXPECT_EQ(plain.forward.name(plain.hazards[0].saved), "primals_2");
  EXPECT_EQ(plain.backward.name(plain.hazards[0].readers.at(0)), "mul");
  const PartitionResult r = with_limit(j, int64_t{1} << 40);
  EXPECT_TRUE(r.hazards.empty());
  // The product is computed once, in the forward, from the statistic's old
  // value; the statistic itself is not saved.
  EXPECT_NE(r.decisions[j.graph.find("mul")].where, NodeDecision::Where::kRecomputed);
  EXPECT_EQ(std::count(r.saved_values.begin(), r.saved_values.end(), j.graph.find("primals_2")), 0);
}

TEST(PeakBudget, NegativeLimitsAreInvalidOptions) {
  PartitionOptions o;
  o.peak_memory_budget = -5;
  EXPECT_THROW(o.validate(), Error);
}

}  // namespace
}  // namespace remat
