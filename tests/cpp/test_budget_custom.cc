// tests/cpp/test_budget_custom.cc — the memory budget's custom hooks
// (PartitionOptions::custom_knapsack / custom_runtime_estimator, torch's
// CustomKnapsackSolver / CustomRuntimeEstimator calling convention): what
// they are told (normalized memories, the budget, the items as joint ids, in
// item order), how their answer is used (recomputed indices only, out-of-range
// ones skipped, expected runtime 0), exceptions passing through unchanged,
// and the reserved name "custom".
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "budget/flops.h"
#include "budget/knapsack.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/partition.h"

namespace remat {
namespace {

using testing::Ref;
using testing::TestGraph;
using testing::saved_names;
using Names = std::vector<std::string>;

// p (16 B) -> two random ops of 256 B each, both needed by the backward, so
// both stay banned and reach the knapsack. A dead cos before them makes the
// prepared graph's ids differ from the joint ids the hooks must see.
JointGraph two_random_values_with_dead_node() {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {4});
  Ref tg = t.placeholder("tangents_1", {64});
  t.call("aten.cos.default", {p}, {4});  // dead: DCE removes it
  Ref r1 = t.call("aten.rand_like.default", {p}, {64});
  Ref r2 = t.call("aten.rand_like.default", {p}, {64});
  Ref s = t.call("aten.add.Tensor", {r1, r2}, {64});
  Ref g1 = t.call("aten.mul.Tensor", {tg, r1}, {64});
  Ref g2 = t.call("aten.mul.Tensor", {g1, r2}, {64});
  t.output({s, g2});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  return j;
}

struct KnapsackCall {
  std::vector<double> memory;
  double max_memory;
  std::vector<NodeId> banned;
};

TEST(BudgetCustom, SolverIsToldTheItemsAsJointIds) {
  const JointGraph j = two_random_values_with_dead_node();
  std::vector<KnapsackCall> calls;
  PartitionOptions o;
  o.activation_memory_budget = 0.5;
  o.activation_memory_budget_solver = "custom";
  o.custom_knapsack = [&](const std::vector<double>& memory, double max_memory,
                          const std::vector<NodeId>& banned) {
    calls.push_back({memory, max_memory, banned});
    return std::pair<std::vector<int>, std::vector<int>>{{0}, {1}};  // recompute rand_like_1
  };
  const PartitionResult r = min_cut_rematerialization_partition(j, o);
  ASSERT_EQ(calls.size(), 1u);
  // Equal sizes keep graph order (torch's stable sort); 256 / (512 - 16).
  EXPECT_EQ(calls[0].banned,
            (std::vector<NodeId>{j.graph.find("rand_like"), j.graph.find("rand_like_1")}));
  const double w = (256 / 1e9) / (512 / 1e9 - 16 / 1e9);
  EXPECT_EQ(calls[0].memory, (std::vector<double>{w, w}));
  EXPECT_EQ(calls[0].max_memory, 0.5);
  EXPECT_EQ(saved_names(j, r), Names({"primals_1", "rand_like"}));
}

TEST(BudgetCustom, OnlyInRangeRecomputedIndicesCount) {
  const JointGraph j = two_random_values_with_dead_node();
  PartitionOptions o;
  o.activation_memory_budget = 0.5;
  o.activation_memory_budget_solver = "custom";
  // "saved" is ignored, as torch ignores it; -1 and 7 are not items.
  o.custom_knapsack = [](const std::vector<double>&, double, const std::vector<NodeId>&) {
    return std::pair<std::vector<int>, std::vector<int>>{{1}, {-1, 0, 7, 0}};
  };
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, o)),
            Names({"primals_1", "rand_like_1"}));
  o.custom_knapsack = [](const std::vector<double>&, double, const std::vector<NodeId>&) {
    return std::pair<std::vector<int>, std::vector<int>>{{}, {}};
  };
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, o)),
            Names({"rand_like", "rand_like_1"}));  // the fully aggressive cut
}

TEST(BudgetCustom, EstimatorPricesEachItemOnceByJointId) {
  const JointGraph j = two_random_values_with_dead_node();
  std::vector<NodeId> asked;
  PartitionOptions o;
  o.activation_memory_budget = 0.6;  // one of the two fits
  o.activation_memory_budget_solver = "greedy";
  o.activation_memory_budget_runtime_estimator = "custom";
  const NodeId slow = j.graph.find("rand_like_1");
  o.custom_runtime_estimator = [&](NodeId n) {
    asked.push_back(n);
    return n == slow ? 5.0 : 1.0;
  };
  // Greedy keeps the slower-to-recompute value saved.
  EXPECT_EQ(saved_names(j, min_cut_rematerialization_partition(j, o)),
            Names({"primals_1", "rand_like_1"}));
  EXPECT_EQ(asked, (std::vector<NodeId>{j.graph.find("rand_like"), slow}));
}

TEST(BudgetCustom, BothHooksTogetherAndThePareto) {
  const JointGraph j = two_random_values_with_dead_node();
  PartitionOptions o;
  o.activation_memory_budget_solver = "custom";
  o.activation_memory_budget_runtime_estimator = "custom";
  o.custom_runtime_estimator = [](NodeId) { return 2.5; };
  o.custom_knapsack = [](const std::vector<double>&, double max_memory,
                         const std::vector<NodeId>&) {
    // Recompute everything below budget 0.7, nothing above.
    return max_memory < 0.7 ? std::pair<std::vector<int>, std::vector<int>>{{}, {0, 1}}
                            : std::pair<std::vector<int>, std::vector<int>>{{0, 1}, {}};
  };
  const std::vector<MemoryBudgetPoint> pts = memory_budget_pareto(j, o, 1e-3, {0.5, 0.9});
  ASSERT_EQ(pts.size(), 2u);
  // The custom solver's expected runtime is 0, so torch reports the total.
  EXPECT_EQ(pts[0].recompute_runtime, 5.0);
  EXPECT_EQ(pts[0].memory_ratio, 0.0);
  EXPECT_EQ(pts[1].recompute_runtime, 5.0);
  EXPECT_EQ(pts[1].memory_ratio, 1.0);
}

TEST(BudgetCustom, ExceptionsPassThroughUnchanged) {
  const JointGraph j = two_random_values_with_dead_node();
  struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  PartitionOptions o;
  o.activation_memory_budget = 0.5;
  o.activation_memory_budget_solver = "custom";
  o.custom_knapsack = [](const std::vector<double>&, double, const std::vector<NodeId>&)
      -> std::pair<std::vector<int>, std::vector<int>> { throw Boom("solver"); };
  EXPECT_THROW(min_cut_rematerialization_partition(j, o), Boom);
  o.activation_memory_budget_runtime_estimator = "custom";
  o.custom_runtime_estimator = [](NodeId) -> double { throw Boom("estimator"); };
  try {
    min_cut_rematerialization_partition(j, o);
    FAIL();
  } catch (const Boom& e) {
    EXPECT_STREQ(e.what(), "estimator");  // the estimator runs first, as in torch
  }
}

TEST(BudgetCustom, CustomNeedsItsHookAndIsReserved) {
  PartitionOptions o;
  o.activation_memory_budget_solver = "custom";
  EXPECT_THROW(o.validate(), Error);
  o.custom_knapsack = [](const std::vector<double>&, double, const std::vector<NodeId>&) {
    return std::pair<std::vector<int>, std::vector<int>>{};
  };
  EXPECT_NO_THROW(o.validate());
  o.activation_memory_budget_runtime_estimator = "custom";
  try {
    o.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
    EXPECT_NE(std::string(e.what()).find("custom_runtime_estimator"), std::string::npos);
  }
  o.custom_runtime_estimator = [](NodeId) { return 1.0; };
  EXPECT_NO_THROW(o.validate());
  EXPECT_THROW(register_knapsack_solver("custom", greedy_knapsack), Error);
  EXPECT_THROW(register_runtime_estimator("custom", [](const Graph&, NodeId) { return 1.0; }),
               Error);
}

}  // namespace
}  // namespace remat
