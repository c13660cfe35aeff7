// tests/cpp/test_pipeline.cc — pipeline/partition.cc, the walk through the
// stages: which partitioner hands a graph to which (and the error where
// torch's two would hand it back and forth forever), how every id in a
// result maps back to the caller's joint graph, and the stage times.
//
// Contract: one rule per test, named after it, on the smallest joint graph
// in which the rule decides the outcome; only the public partition API
// (remat/partition.h) is used, as a caller sees it.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/ops.h"
#include "remat/partition.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using Names = std::vector<std::string>;

using testing::joint_of;

// Calls default_partition, then min_cut_rematerialization_partition, on j:
// each must throw a remat::Error, which `check` inspects.
void expect_both_partitioners_throw(const JointGraph& j,
                                    const std::function<void(const Error&)>& check) {
  for (bool from_default : {true, false}) {
    try {
      if (from_default) default_partition(j, PartitionOptions{});
      else min_cut_rematerialization_partition(j, PartitionOptions{});
      ADD_FAILURE() << "no error, from_default=" << from_default;
    } catch (const Error& e) {
      check(e);
    }
  }
}

Names stage_names(const PartitionResult& r) {
  Names out;
  for (const StageTime& st : r.stages) out.push_back(st.stage);
  return out;
}

// primals_1 -> mm -> relu; the backward (threshold_backward, two mm's)
// needs relu and both inputs.
JointGraph mlp() {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4, 8});
  Ref p2 = t.placeholder("primals_2", {8, 8});
  Ref t1 = t.placeholder("tangents_1", {4, 8});
  Ref mm = t.call("aten.mm.default", {p1, p2}, {4, 8});
  Ref relu = t.call("aten.relu.default", {mm}, {4, 8});
  Ref tb = t.call("aten.threshold_backward.default", {t1, relu, 0}, {4, 8});
  Ref tt = t.call("aten.t.default", {p2}, {8, 8});
  Ref mm1 = t.call("aten.mm.default", {tb, tt}, {4, 8});
  Ref tp = t.call("aten.t.default", {p1}, {8, 4});
  Ref mm2 = t.call("aten.mm.default", {tp, tb}, {8, 8});
  t.output({A::tuple({relu, mm1, mm2})});
  return joint_of(t);
}

// A forward with no backward (no node depends on a tangent): primals_1 -> sin.
JointGraph forward_only() {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref sin = t.call("aten.sin.default", {p1}, {4});
  t.output({A::tuple({sin})});
  return joint_of(t);
}

// A graph with a recompute tag (relu, PREFER_RECOMPUTE) that mutates a
// value that is not an input (add_ on relu): not functional, so torch's
// default partitioner hands it to the min-cut. With `with_backward` the
// backward multiplies the tangent by relu; without, there is no backward
// (no node depends on a tangent), which the min-cut hands back.
JointGraph tagged_and_mutating(bool with_backward) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref relu = t.call("aten.relu.default", {p1}, {4});
  t.checkpoint(relu, RecomputePolicy::kPreferRecompute);
  t.op("aten.add_.Tensor").is_mutable = true;
  Ref add = t.call("aten.add_.Tensor", {relu, 1}, {4});
  Ref sin = t.call("aten.sin.default", {add}, {4});
  if (!with_backward) {
    t.output({A::tuple({sin})});
    return joint_of(t);
  }
  Ref t1 = t.placeholder("tangents_1", {4});
  Ref grad = t.call("aten.mul.Tensor", {t1, relu}, {4});
  t.output({A::tuple({sin, grad})});
  return joint_of(t);
}

// --- the handover between the two partitioners ---------------------------------

TEST(PipelineHandover, MinCutHandsAGraphWithoutBackwardToDefault) {
  const PartitionResult r = min_cut_rematerialization_partition(forward_only(), PartitionOptions{});
  EXPECT_EQ(r.partitioner, "default");
}

TEST(PipelineHandover, DefaultHandsATaggedNonFunctionalGraphToMinCut) {
  const PartitionResult r =
      default_partition(tagged_and_mutating(/*with_backward=*/true), PartitionOptions{});
  EXPECT_EQ(r.partitioner, "min_cut");
}

TEST(PipelineHandover, AFunctionalTaggedGraphStaysWithDefault) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref t1 = t.placeholder("tangents_1", {4});
  Ref relu = t.call("aten.relu.default", {p1}, {4});
  t.checkpoint(relu, RecomputePolicy::kPreferRecompute);
  Ref grad = t.call("aten.mul.Tensor", {t1, relu}, {4});
  t.output({A::tuple({relu, grad})});
  EXPECT_EQ(default_partition(joint_of(t), PartitionOptions{}).partitioner, "default");
}

// torch's partitioners would pass this graph back and forth until Python's
// recursion limit: the default one hands it to the min-cut (tagged, not
// functional), the min-cut back (no backward). remat stops
// at the second handover, whichever partitioner was called.
TEST(PipelineHandover, AGraphHandedBackIsAnUnsupportedError) {
  expect_both_partitioners_throw(tagged_and_mutating(/*with_backward=*/false), [](const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("recurse forever"), std::string::npos) << e.what();
  });
}

// The Pareto sweep is the min-cut's; it has no default partitioner to hand
// a graph to.
TEST(PipelineHandover, TheParetoSweepRefusesAGraphMinCutWouldHandOver) {
  try {
    memory_budget_pareto(forward_only(), PartitionOptions{}, 0.5, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("default partitioner"), std::string::npos) << e.what();
  }
}

// --- origin mapping ------------------------------------------------------------

// Every node of the two graphs that comes from the joint graph has its
// joint id as origin, though prepare's DCE renumbered the nodes.
TEST(PipelineOrigins, ResultNodesPointAtTheirJointNode) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref t1 = t.placeholder("tangents_1", {4});
  t.call("aten.cos.default", {p1}, {4});  // dead: DCE removes it before deciding
  Ref sin = t.call("aten.sin.default", {p1}, {4});
  Ref grad = t.call("aten.mul.Tensor", {t1, sin}, {4});
  t.output({A::tuple({sin, grad})});
  const JointGraph j = joint_of(t);
  const PartitionResult r = min_cut_rematerialization_partition(j, PartitionOptions{});
  for (const Graph* g : {&r.forward, &r.backward}) {
    for (NodeId id = 0; id < g->size(); ++id) {
      if (g->node(id).kind == NodeKind::kOutput) continue;
      EXPECT_EQ(g->node(id).origin, j.graph.find(g->name(id))) << g->name(id);
    }
  }
  EXPECT_EQ(testing::saved_names(j, r), (Names{"sin"}));
  EXPECT_EQ(r.saved_values, (std::vector<NodeId>{sin.id}));
}

// kNoNode means "not derived" and never appears in a result: a node a
// rewrite created (the RNG state plumbing here) has origin kCreatedNode,
// every other node the joint node it comes from.
TEST(PipelineOrigins, CreatedNodesAreMarkedCreatedAndTheRestNameAJointNode) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref rand = t.call("aten.rand_like.default", {p1});
  t[rand].recompute = RecomputePolicy::kMustRecompute;
  t.op("aten.rand_like.default").tags = kTagNondeterministicSeeded;
  Ref mul = t.call("aten.mul.Tensor", {p1, rand});
  Ref grad = t.call("aten.mul.Tensor", {t1, rand});
  t.output({A::tuple({mul, grad})});
  const JointGraph j = joint_of(t);
  const PartitionResult r = min_cut_rematerialization_partition(j, PartitionOptions{});
  ASSERT_GT(r.num_rng_states, 0);
  size_t created = 0;
  for (const Graph* g : {&r.forward, &r.backward}) {
    for (NodeId id = 0; id < g->size(); ++id) {
      if (g->node(id).kind == NodeKind::kOutput) continue;
      const NodeId origin = g->node(id).origin;
      if (origin == kCreatedNode) {
        ++created;
      } else {
        EXPECT_LT(origin, j.graph.size()) << g->name(id);  // never kNoNode
      }
    }
  }
  EXPECT_GT(created, 0u);  // the RNG state placeholders and run_* nodes
}

// Decisions are per joint node: a node CSE merged names the joint node that
// replaced it; a node DCE removed names none.
TEST(PipelineOrigins, DecisionsNameJointNodes) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref t1 = t.placeholder("tangents_1", {4});
  Ref dead = t.call("aten.cos.default", {p1}, {4});
  Ref sin = t.call("aten.sin.default", {p1}, {4});
  Ref sin_again = t.call("aten.sin.default", {p1}, {4});  // equal to sin: CSE merges it
  Ref cos = t.call("aten.cos.default", {sin}, {4}, "cos_1");  // sin is no direct output
  // Both sins feed the backward (CSE merges only values the backward needs
  // alike, from 2.14 on).
  Ref both = t.call("aten.add.Tensor", {sin, sin_again}, {4});
  Ref grad = t.call("aten.mul.Tensor", {t1, both}, {4});
  t.output({A::tuple({cos, grad})});
  const JointGraph j = joint_of(t);
  const PartitionResult r = min_cut_rematerialization_partition(j, PartitionOptions{});
  ASSERT_EQ(r.decisions.size(), j.graph.size());
  using W = NodeDecision::Where;
  EXPECT_EQ(r.decisions[dead.id].where, W::kRemoved);
  EXPECT_EQ(r.decisions[dead.id].merged_into, kNoNode);
  EXPECT_EQ(r.decisions[sin_again.id].where, W::kRemoved);
  EXPECT_EQ(r.decisions[sin_again.id].merged_into, sin.id);
  EXPECT_NE(r.decisions[sin.id].where, W::kRemoved);
  EXPECT_EQ(r.decisions[grad.id].where, W::kBackwardOnly);
}

// A plan's decision and a caller's replacement are both joint ids.
TEST(PipelineOrigins, APlanSpeaksInJointIds) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref t1 = t.placeholder("tangents_1", {4});
  t.call("aten.cos.default", {p1}, {4});  // dead: shifts the prepared ids
  Ref sin = t.call("aten.sin.default", {p1}, {4});
  Ref cos = t.call("aten.cos.default", {sin}, {4}, "cos_1");
  Ref grad = t.call("aten.mul.Tensor", {t1, cos}, {4});
  t.output({A::tuple({cos, grad})});
  const JointGraph j = joint_of(t);
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  for (NodeId id : plan.saved()) EXPECT_LT(id, j.graph.size());
  const PartitionResult r = emit_partition(std::move(plan), {sin.id});
  EXPECT_EQ(r.saved_values, (std::vector<NodeId>{sin.id}));
  EXPECT_EQ(r.decisions[cos.id].where, NodeDecision::Where::kRecomputed);
}

// --- stage times ---------------------------------------------------------------

// The stage times split the engine time exactly, in the order the stages ran.
TEST(PipelineStages, StagesSplitTheEngineTime) {
  const PartitionResult r = min_cut_rematerialization_partition(mlp(), PartitionOptions{});
  double total = 0;
  for (const StageTime& st : r.stages) {
    EXPECT_GE(st.seconds, 0) << st.stage;
    total += st.seconds;
  }
  EXPECT_EQ(stage_names(r), (Names{"prepare", "classify", "decide", "extract", "reorder",
                                   "getitems", "report", "memory"}));
  EXPECT_NEAR(total, r.seconds, 1e-9);
}

// Handed from the min-cut to the default partitioner, prepare and classify
// run twice; each stage is still reported once.
TEST(PipelineStages, StagesRunTwiceAreReportedOnce) {
  const PartitionResult r = min_cut_rematerialization_partition(forward_only(), PartitionOptions{});
  EXPECT_EQ(r.partitioner, "default");
  EXPECT_EQ(stage_names(r), (Names{"prepare", "classify", "decide", "extract", "getitems",
                                   "report", "memory"}));
}

// A caller's replacement is a stage of its own.
TEST(PipelineStages, AReplacedDecisionIsTimedAsReplace) {
  PartitionPlan plan = plan_min_cut_rematerialization_partition(mlp(), PartitionOptions{});
  const std::vector<NodeId> saved = plan.saved();
  const PartitionResult r = emit_partition(std::move(plan), saved);
  EXPECT_EQ(stage_names(r), (Names{"prepare", "classify", "decide", "replace", "extract",
                                   "reorder", "getitems", "report", "memory"}));
}

// The time a caller holds a plan between its two steps is not engine time.
TEST(PipelineStages, TimeBetweenPlanAndEmitIsNotCounted) {
  PartitionPlan plan = plan_min_cut_rematerialization_partition(mlp(), PartitionOptions{});
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const PartitionResult r = emit_partition(std::move(plan));
  EXPECT_LT(r.seconds, 0.5);
}

// The progress hook hears of the partition as stages finish: fractions
// that never go back, ending at 1.
TEST(PipelineStages, ProgressNeverGoesBackAndEndsAtOne) {
  std::vector<double> fractions;
  PartitionOptions o;
  o.progress = [&](std::string_view task, double fraction) {
    EXPECT_EQ(task, "partition");
    fractions.push_back(fraction);
  };
  min_cut_rematerialization_partition(forward_only(), o);  // stages run twice here
  ASSERT_FALSE(fractions.empty());
  for (size_t i = 1; i < fractions.size(); ++i) EXPECT_GT(fractions[i], fractions[i - 1]);
  EXPECT_EQ(fractions.back(), 1.0);
}

// The graph's own op categories are defaults: an override in the options
// (an --options file's "ops", PartitionOptions::ops) wins over them.
TEST(PipelineOps, TheOptionsOverrideWinsOverTheGraphsCategories) {
  const JointGraph plain = mlp();
  JointGraph overridden = mlp();
  overridden.op_overrides.emplace_back("aten.mm", uint8_t{kCatRecomputable | kCatFusible});
  const PartitionOptions defaults;
  const Names by_default =
      testing::saved_names(plain, min_cut_rematerialization_partition(plain, defaults));
  const Names by_graph =
      testing::saved_names(overridden, min_cut_rematerialization_partition(overridden, defaults));
  ASSERT_NE(by_graph, by_default) << "the graph's override must matter in this graph";
  PartitionOptions overriding;
  overriding.ops.set("aten.mm", OpRegistry::defaults().lookup("aten.mm"));
  EXPECT_EQ(
      testing::saved_names(overridden, min_cut_rematerialization_partition(overridden, overriding)),
      by_default);
}

// num_fwd_outputs counting a gradient among the forward outputs is named as
// such (mm_1 needs tangents_1), by both partitioners, before any stage runs.
TEST(PipelineChecks, AGradientCountedAsAForwardOutputNamesTheField) {
  JointGraph j = mlp();
  j.num_fwd_outputs = 2;
  expect_both_partitioners_throw(j, [](const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    EXPECT_EQ(std::string(e.what()),
              "field 'num_fwd_outputs' is 2, but output #1 ('mm_1') depends on a tangent: it is "
              "a gradient, so at most 1 outputs are forward outputs");
  });
}

}  // namespace
}  // namespace remat
