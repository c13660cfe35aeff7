// tests/cpp/test_budget.cc — the activation memory budget end to end:
// choose_saved_values_set's three tiers and its knapsack stage (item
// selection, normalization, MUST_SAVE and input-storage exclusion), the
// per-graph budgets (meta memory_budget, region annotations) and their
// errors, and the Pareto sweep through the library and `remat pareto`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <optional>

#include <gtest/gtest.h>

#include "analyze/analyze.h"
#include "budget/pareto.h"
#include "decide/decide.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/partition.h"

namespace remat {
namespace {

using testing::Ref;
using testing::TestGraph;
using testing::saved_names;
using testing::slurp;
using Names = std::vector<std::string>;

struct Solved {
  Graph g;
  PartitionOptions opt;
  NodeInfo info;
  std::vector<int64_t> dist;
  std::vector<uint8_t> cats;

  Solved(const TestGraph& t, int num_fwd_outputs, PartitionOptions o = {})
      : g(t.build()), opt(std::move(o)) {
    info = classify_nodes(g, {}, num_fwd_outputs, opt);
    dist = dist_from_bw(g, info);
    cats = opt.ops.classify(g, opt.torch);
  }
  DecideContext ctx() const { return DecideContext{g, info, dist, cats, opt}; }
  Names names(const std::vector<NodeId>& ids) const {
    Names out;
    for (NodeId n : ids) out.emplace_back(g.name(n));
    return out;
  }
  Names choose(double budget, MinCutResult* last = nullptr) const {
    return names(choose_saved_values_set(ctx(), budget, last));
  }
};

// p (16 B) -> two random ops of 256 B each (banned in every tier: random),
// both needed by the backward.
TestGraph two_random_values() {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {4});
  Ref tg = t.placeholder("tangents_1", {64});
  Ref r1 = t.call("aten.rand_like.default", {p}, {64});
  Ref r2 = t.call("aten.rand_like.default", {p}, {64});
  Ref s = t.call("aten.add.Tensor", {r1, r2}, {64});
  Ref g1 = t.call("aten.mul.Tensor", {tg, r1}, {64});
  Ref g2 = t.call("aten.mul.Tensor", {g1, r2}, {64});
  t.output({s, g2});
  return t;
}

// --- the tiers -------------------------------------------------------------------

TEST(BudgetTiers, MoreAggressiveCutLiftsTheMaterializedBan) {
  // cos(p) is only banned because the backward's mm cannot fuse with it.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {4, 4});
  Ref tg = t.placeholder("tangents_1", {16, 16});
  Ref c = t.call("aten.cos.default", {p}, {16, 16});
  Ref y = t.call("aten.sin.default", {c}, {16, 16});
  Ref g = t.call("aten.mm.default", {tg, c}, {16, 16});
  t.output({y, g});
  Solved sv(t, 1);
  MinCutResult last;
  EXPECT_EQ(sv.choose(1.0, &last), Names({"cos"}));
  EXPECT_EQ(last.ban_reason[sv.g.find("cos")], "materialized in backward");
  EXPECT_EQ(sv.choose(0.5, &last), Names({"primals_1"}));
  EXPECT_EQ(last.ban_reason[sv.g.find("cos")], "");
}

TEST(BudgetTiers, FullyAggressiveCutLiftsTheAllowlist) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {64});
  Ref tg = t.placeholder("tangents_1", {128});
  Ref c = t.call("aten.native_layer_norm_like.default", {p}, {128});
  Ref y = t.call("aten.cos.default", {c}, {128});
  Ref g = t.call("aten.mul.Tensor", {tg, c}, {128});
  t.output({y, g});
  Solved sv(t, 1);
  EXPECT_EQ(sv.choose(1.0), Names({"native_layer_norm_like"}));
  // ratio 0 is under any positive budget; at 0 the inputs are saved outright.
  EXPECT_EQ(sv.choose(0.01), Names({"primals_1"}));
  EXPECT_EQ(sv.choose(0.0), Names({"primals_1"}));
}

TEST(BudgetTiers, RatioMustBeStrictlyUnderTheBudget) {
  // Random ops stay banned in every tier: each tier's ratio is 1, which is
  // not < 1 - so the knapsack decides even at 0.999.
  Solved sv(two_random_values(), 1);
  MinCutResult last;
  EXPECT_EQ(sv.choose(1.0), Names({"rand_like", "rand_like_1"}));
  const Names knapsack = sv.choose(0.999, &last);
  ASSERT_EQ(knapsack.size(), 2u);
  EXPECT_EQ(knapsack[0], "primals_1");
}

// --- the knapsack stage --------------------------------------------------------

TEST(BudgetKnapsack, NormalizedSizesAgainstTheBudget) {
  // min = 16 B (the input), max = 512 B: each value weighs 256/496 = 0.516.
  for (const char* solver : {"dp", "greedy", "ilp", "dp_knapsack_sliding_hirschberg"}) {
    PartitionOptions o;
    o.activation_memory_budget_solver = solver;
    Solved sv(two_random_values(), 1, o);
    EXPECT_EQ(sv.choose(0.5), Names({"primals_1"})) << solver;  // neither fits
    const Names one = sv.choose(0.6);                            // one fits
    ASSERT_EQ(one.size(), 2u) << solver;
    EXPECT_EQ(one[0], "primals_1") << solver;
    EXPECT_EQ(sv.choose(0.999).size(), 2u) << solver;
  }
  // The Pareto evaluation at fixed budgets: (recomputed runtime, ratio).
  Solved sv(two_random_values(), 1);
  const std::vector<double> budgets{0.5, 0.6, 1.0};
  std::vector<MemoryBudgetPoint> pts = memory_budget_pareto(sv.ctx(), 1e-3, budgets);
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(pts[0].recompute_runtime, 2);  // rand_like counts 0 flops -> 1 each
  EXPECT_EQ(pts[0].memory_ratio, 0.0);
  EXPECT_EQ(pts[1].recompute_runtime, 1);
  EXPECT_EQ(pts[1].memory_ratio, (272 / 1e9 - 16 / 1e9) / (512 / 1e9 - 16 / 1e9));
  // Both together weigh 1.03 > 1: even budget 1 keeps only one.
  EXPECT_EQ(pts[2].recompute_runtime, 1);
  EXPECT_EQ(pts[2].memory_ratio, pts[1].memory_ratio);
}

TEST(BudgetKnapsack, MustSaveNodesAreNotItems) {
  // Only one MUST_SAVE: the other is the single item and is recomputed.
  TestGraph t2 = two_random_values();
  t2.checkpoint(Ref{3}, RecomputePolicy::kMustSave);
  Solved sv2(t2, 1);
  const Names got = sv2.choose(0.3);
  EXPECT_EQ(got, Names({"primals_1", "rand_like_1"}));
}

// When no recomputable banned node is left for the knapsack, 2.14 returns
// the fully aggressive cut (what the knapsack gives unbanning nothing);
// 2.13 returned the inputs and the MUST_SAVE banned nodes. The peak-budget
// plan list enumerates the same answers.
TEST(BudgetReleases, NoKnapsackItemLeftReturnsTheAggressiveCutFrom214) {
  TestGraph t = two_random_values();
  t.checkpoint(Ref{2}, RecomputePolicy::kMustSave);  // rand_like
  t.checkpoint(Ref{3}, RecomputePolicy::kMustSave);  // rand_like_1
  PartitionOptions v213;
  v213.torch = TorchBehavior::of({2, 13});
  PartitionOptions v214;
  v214.torch = TorchBehavior::of({2, 14});
  const Solved old_release(t, 1, v213), new_release(t, 1, v214);
  EXPECT_EQ(old_release.choose(0.3), Names({"primals_1", "rand_like", "rand_like_1"}));
  MinCutResult aggressive;
  EXPECT_EQ(new_release.choose(0.3, &aggressive), Names({"rand_like", "rand_like_1"}));
  EXPECT_EQ(new_release.names(aggressive.saved_values), Names({"rand_like", "rand_like_1"}));

  auto labels = [](const Solved& sv) {
    const double budgets[] = {0.5};
    const DecideContext ctx = sv.ctx();  // the list keeps a reference
    BudgetPlanList plans(ctx, budgets);
    Names out;
    while (std::optional<BudgetPlan> p = plans.next()) out.push_back(p->label);
    return out;
  };
  const Names old_plans = labels(old_release), new_plans = labels(new_release);
  EXPECT_NE(std::find(old_plans.begin(), old_plans.end(), "inputs and MUST_SAVE"), old_plans.end());
  EXPECT_EQ(std::find(new_plans.begin(), new_plans.end(), "inputs and MUST_SAVE"), new_plans.end());
}

TEST(BudgetKnapsack, ValuesAliasingAnInputAreNotItems) {
  // No item left shows as 2.13's answer for that case: the inputs.
  PartitionOptions v213;
  v213.torch = TorchBehavior::of({2, 13});
  TestGraph t = two_random_values();
  t.alias(Ref{2}, Ref{0});  // rand_like shares primals_1's storage
  t.alias(Ref{3}, Ref{0});
  Solved sv(t, 1, v213);
  EXPECT_EQ(sv.choose(0.3), Names({"primals_1"}));
  // A non-builtin op keeps its alias an item when is_non_builtin_to_include.
  PartitionOptions o = v213;
  o.is_non_builtin_to_include = true;
  TestGraph t2 = two_random_values();
  t2.alias(Ref{2}, Ref{0});
  t2.alias(Ref{3}, Ref{0});
  EXPECT_EQ(Solved(t2, 1, o).choose(0.3), Names({"primals_1"}));
}

TEST(BudgetKnapsack, OutOfRange) {
  Solved sv(two_random_values(), 1);
  for (double b : {-0.1, 1.5, std::nan("")}) {
    try {
      choose_saved_values_set(sv.ctx(), b, nullptr);
      FAIL() << b;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
      EXPECT_NE(std::string(e.what()).find("0 <= m <= 1"), std::string::npos) << e.what();
    }
  }
}

// The options, the driver, a graph's own budget and the frontier's explicit
// budgets all refuse an out-of-range budget with one message: the field or
// node it came from, then torch's words with the value as Python prints it.
TEST(BudgetRange, EverySourceSharesOneMessageNamingTheField) {
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string torch_words =
      ": the valid ranges for memory budget are 0 <= m <= 1. The provided value is ";
  PartitionOptions o;
  o.activation_memory_budget = 1.5;
  EXPECT_EQ(message_of([&] { o.validate(); }), "activation_memory_budget" + torch_words + "1.5");
  Solved sv(two_random_values(), 1);
  EXPECT_EQ(message_of([&] { choose_saved_values_set(sv.ctx(), 2, nullptr); }),
            "activation_memory_budget" + torch_words + "2.0");
  const std::vector<double> budgets{0.5, -1};
  EXPECT_EQ(message_of([&] { memory_budget_pareto(sv.ctx(), 1e-3, budgets); }),
            "budgets[1]" + torch_words + "-1.0");
  TestGraph t = two_random_values();
  t[Ref{2}].flags |= kFlagMemoryBudget;
  t[Ref{2}].memory_budget = 1.5;
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  EXPECT_EQ(message_of([&] { min_cut_rematerialization_partition(j, {}); }),
            "node 'rand_like': meta memory_budget" + torch_words + "1.5");
}

TEST(BudgetKnapsack, ProfiledRuntimesAreReadByJointId) {
  PartitionOptions o;
  o.activation_memory_budget_runtime_estimator = "profile";
  o.profiled_runtimes = {0, 0, 5.0, 1.0, 0, 0, 0, 0};
  Solved sv(two_random_values(), 1, o);
  // Greedy keeps the slower-to-recompute value saved.
  sv.opt.activation_memory_budget_solver = "greedy";
  EXPECT_EQ(sv.choose(0.6), Names({"primals_1", "rand_like"}));
  sv.opt.profiled_runtimes = {0, 0, 1.0, 5.0, 0, 0, 0, 0};
  EXPECT_EQ(sv.choose(0.6), Names({"primals_1", "rand_like_1"}));
  sv.opt.profiled_runtimes.clear();
  EXPECT_THROW(sv.choose(0.6), Error);
}

// --- per-graph budgets ----------------------------------------------------------

using testing::joint_of;

TEST(BudgetPerGraph, MetaBudgetOutOfRangeNamesTheNode) {
  TestGraph t = two_random_values();
  t[Ref{2}].flags |= kFlagMemoryBudget;
  t[Ref{2}].memory_budget = 1.5;
  try {
    min_cut_rematerialization_partition(joint_of(t), PartitionOptions{});
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("node 'rand_like'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("The provided value is 1.5"), std::string::npos) << msg;
  }
  t[Ref{2}].memory_budget = 0.0;
  EXPECT_EQ(saved_names(joint_of(t), min_cut_rematerialization_partition(joint_of(t), {})),
            Names({"primals_1"}));
}

// Annotates every node of the graph with a region budget.
void annotate_all(TestGraph& t, size_t count, double budget) {
  for (NodeId id = 0; id < count; ++id) {
    t[Ref{id}].flags |= kFlagRegionBudget;
    t[Ref{id}].region_memory_budget = budget;
  }
}

TEST(BudgetPerGraph, RegionBudgetOverridesTheOthers) {
  TestGraph t = two_random_values();
  annotate_all(t, 8, 0.0);
  t[Ref{2}].flags |= kFlagMemoryBudget;  // the legacy key loses to the region
  t[Ref{2}].memory_budget = 1.0;
  const JointGraph j = joint_of(t);
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, {})), Names({"primals_1"}));
  // Through JSON and back.
  const JointGraph back = read_joint_graph(write_joint_graph(j));
  EXPECT_TRUE(back.graph.node(2).has(kFlagRegionBudget));
  EXPECT_EQ(back.graph.extra(2).region_memory_budget, 0.0);
  EXPECT_EQ(saved_names(back, min_cut_rematerialization_partition(back, {})), Names({"primals_1"}));
}

TEST(BudgetPerGraph, RegionBudgetsMustAgree) {
  TestGraph t = two_random_values();
  annotate_all(t, 8, 0.5);
  t[Ref{3}].region_memory_budget = 0.25;
  try {
    min_cut_rematerialization_partition(joint_of(t), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conflicting budgets within a single joint graph "
                                         "(including nested subgraphs): [0.25, 0.5]"),
              std::string::npos)
        << e.what();
  }
}

TEST(BudgetPerGraph, RegionBudgetMustCoverTheForward) {
  TestGraph t = two_random_values();
  annotate_all(t, 8, 0.5);
  t[Ref{4}].flags &= ~kFlagRegionBudget;  // add: a forward op
  t[Ref{6}].flags &= ~kFlagRegionBudget;  // mul_1: backward only, allowed
  try {
    min_cut_rematerialization_partition(joint_of(t), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("but 1 forward op(s) are unannotated"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Unannotated ops: ['add']."), std::string::npos) << e.what();
  }
  t[Ref{4}].flags |= kFlagRegionBudget;
  EXPECT_NO_THROW(min_cut_rematerialization_partition(joint_of(t), {}));
}

// A HOP body: x -> sin -> (sin,), its op annotated with `budget` (or not).
NestedGraph body(const char* name, std::optional<double> budget) {
  TestGraph t;
  Ref x = t.placeholder("arg0_1");
  Ref sin = t.call("aten.sin.default", {x});
  t.output({testing::A::tuple({sin})});
  if (budget) {
    t[sin].flags |= kFlagRegionBudget;
    t[sin].region_memory_budget = *budget;
  }
  return NestedGraph{name, t.build()};
}

TEST(BudgetPerGraph, NestedBodiesJoinTheAgreement) {
  TestGraph t = two_random_values();
  annotate_all(t, 8, 0.0);
  JointGraph j = joint_of(t);
  j.nested.push_back(body("repeated_subgraph0", 0.0));
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, {})), Names({"primals_1"}));
  j.nested.push_back(body("repeated_subgraph1", 0.8));
  try {
    min_cut_rematerialization_partition(j, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(including nested subgraphs): [0.0, 0.8]"),
              std::string::npos)
        << e.what();
  }
}

TEST(BudgetPerGraph, EveryOpOfANestedBodyMustBeCovered) {
  TestGraph t = two_random_values();
  annotate_all(t, 8, 0.5);
  JointGraph j = joint_of(t);
  j.nested.push_back(body("repeated_subgraph0", std::nullopt));
  try {
    min_cut_rematerialization_partition(j, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Unannotated ops: ['sin']."), std::string::npos)
        << e.what();
  }
  // Unannotated bodies do not matter when no budget is set anywhere.
  JointGraph plain = joint_of(two_random_values());
  plain.nested.push_back(body("repeated_subgraph0", std::nullopt));
  EXPECT_NO_THROW(min_cut_rematerialization_partition(plain, {}));
}

// Region budgets arrived in 2.13: 2.12 reads neither the annotation nor its
// agreement and coverage rules.
TEST(BudgetReleases, RegionBudgetsAreReadFrom213) {
  TestGraph t = two_random_values();
  annotate_all(t, 8, 0.0);
  const JointGraph j = joint_of(t);
  PartitionOptions v212;
  v212.torch = TorchBehavior::of({2, 12});
  PartitionOptions v213;
  v213.torch = TorchBehavior::of({2, 13});
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, v213)), Names({"primals_1"}));
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, v212)),
            saved_names(joint_of(two_random_values()),
                        min_cut_rematerialization_partition(joint_of(two_random_values()), v212)));
  t[Ref{3}].region_memory_budget = 0.25;  // conflicting
  EXPECT_THROW(min_cut_rematerialization_partition(joint_of(t), v213), Error);
  EXPECT_NO_THROW(min_cut_rematerialization_partition(joint_of(t), v212));
}

// 2.15's activation_memory_budget_require_full_coverage=False applies a
// partial annotation to the whole graph; the coverage error of 2.15 names
// the flag, 2.13's and 2.14's text does not.
TEST(BudgetReleases, PartialRegionBudgetAppliesUnderTheFlagFrom215) {
  TestGraph t = two_random_values();
  annotate_all(t, 8, 0.0);
  t[Ref{4}].flags &= ~kFlagRegionBudget;  // add: a forward op
  const JointGraph j = joint_of(t);
  auto error = [&](const PartitionOptions& o) {
    try {
      min_cut_rematerialization_partition(j, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  PartitionOptions v214;
  v214.torch = TorchBehavior::of({2, 14});
  PartitionOptions v215;
  v215.torch = TorchBehavior::of({2, 15});
  const std::string head = "but 1 forward op(s) are unannotated. Wrap the whole forward in a single region";
  EXPECT_NE(error(v214).find(head + "; use a graph break to scope different budgets to different "
                                    "graphs."),
            std::string::npos)
      << error(v214);
  EXPECT_NE(error(v215).find(head + ", or set torch._functorch.config."
                                    "activation_memory_budget_require_full_coverage=False to apply "
                                    "the budget to the entire graph. Unannotated ops: ['add']."),
            std::string::npos)
      << error(v215);
  v215.activation_memory_budget_require_full_coverage = false;
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, v215)), Names({"primals_1"}));
  v214.activation_memory_budget_require_full_coverage = false;  // 2.14 has no such flag
  EXPECT_NE(error(v214).find(head), std::string::npos);
}

// --- the Pareto sweep -------------------------------------------------------------

TEST(BudgetPareto, SweepIsSortedAndSpansBothEnds) {
  const JointGraph j = joint_of(two_random_values());
  const std::vector<MemoryBudgetPoint> pts = memory_budget_pareto(j, {});
  ASSERT_GE(pts.size(), 4u);
  EXPECT_EQ(pts.front().budget, 0.0);
  EXPECT_EQ(pts.back().budget, 1.0);
  EXPECT_EQ(pts.front().recompute_runtime, 2);
  EXPECT_EQ(pts.front().memory_ratio, 0.0);
  EXPECT_EQ(pts.back().recompute_runtime, 1);
  for (size_t i = 1; i < pts.size(); ++i) EXPECT_LE(pts[i - 1].budget, pts[i].budget);
}

// A resolution below the spacing of doubles used to bisect one interval of
// adjacent doubles forever (its midpoint is one of its ends).
TEST(BudgetPareto, SweepEndsAtAdjacentDoublesWhateverTheResolution) {
  for (double resolution : {1e-16, 1e-300, 5e-324}) {
    int calls = 0;
    const BudgetEvaluator step = [&](double b) {
      if (++calls > 10000) throw std::runtime_error("the sweep does not terminate");
      return b < 0.3 ? std::pair{2.0, 0.0} : std::pair{1.0, 1.0};
    };
    const std::vector<MemoryBudgetPoint> pts = pareto_sweep(step, resolution);
    // The change is pinned down to two adjacent doubles around 0.3.
    double below = 0, above = 1;
    for (const MemoryBudgetPoint& p : pts) {
      if (p.budget < 0.3) below = std::max(below, p.budget);
      else above = std::min(above, p.budget);
    }
    EXPECT_EQ(std::nextafter(below, 1.0), above) << resolution;
    EXPECT_LT(calls, 200) << resolution;
  }
}

TEST(BudgetPareto, CliEndsWithATinyResolution) {
  const std::string base = "/tmp/remat_pareto_test_tiny_" + std::to_string(getpid());
  const std::string cmd = std::string("'") + REMAT_CLI_PATH + "' pareto '" + REMAT_EXAMPLES_DIR +
                          "/transformer_block.json' --resolution 1e-16 -o " + base + ".svg >" +
                          base + ".out 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(base + ".out");
  EXPECT_NE(slurp(base + ".svg").find("</svg>"), std::string::npos);
  for (const char* ext : {".svg", ".out"}) std::remove((base + ext).c_str());
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(BudgetPareto, CliWritesAnSvgChart) {
  const std::string base = "/tmp/remat_pareto_test_" + std::to_string(getpid());
  const std::string cmd = std::string("'") + REMAT_CLI_PATH + "' pareto '" + REMAT_EXAMPLES_DIR +
                          "/transformer_block.json' -o " + base + ".svg --csv " + base +
                          ".csv --json " + base + ".json >" + base + ".out 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(base + ".out");
  const std::string svg = slurp(base + ".svg");
  // Minimal XML checks: one <svg> root, balanced, with the points drawn.
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << svg.substr(0, 80);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<svg"), 1u);
  EXPECT_EQ(count(svg, "<circle"), count(svg, "</circle>"));
  EXPECT_GE(count(svg, "<circle"), 2u);
  const std::string csv = slurp(base + ".csv");
  EXPECT_EQ(csv.rfind("budget,recompute_runtime,memory_ratio\n", 0), 0u);
  EXPECT_EQ(count(csv, "\n") - 1, count(svg, "<circle"));
  EXPECT_NE(slurp(base + ".json").find("\"points\""), std::string::npos);
  for (const char* ext : {".svg", ".csv", ".json", ".out"}) std::remove((base + ext).c_str());
}

TEST(BudgetPareto, CliFailsCleanlyWithoutATradeOff) {
  const std::string base = "/tmp/remat_pareto_test_none_" + std::to_string(getpid());
  const std::string cmd = std::string("'") + REMAT_CLI_PATH + "' pareto '" + REMAT_EXAMPLES_DIR +
                          "/tiny.json' -o " + base + ".svg >" + base + ".out 2>&1";
  const int raw = std::system(cmd.c_str());
  EXPECT_NE(raw, 0);
  EXPECT_NE(slurp(base + ".out").find("remat: error:"), std::string::npos);
  EXPECT_EQ(slurp(base + ".svg"), "");  // nothing written
  std::remove((base + ".out").c_str());
}

}  // namespace
}  // namespace remat
