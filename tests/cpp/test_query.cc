// tests/cpp/test_query.cc — graph/query.h: the node questions every stage
// shares (one home each), one rule per test.
#include <gtest/gtest.h>

#include <vector>

#include "graph/query.h"
#include "graph_fixture.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

TEST(QueryTargets, OnlyCallsHaveATarget) {
  TestGraph t;
  Ref p = t.placeholder("primals_1");
  Ref sin = t.call("aten.sin.default", {p});
  t.output({sin});
  const Graph g = t.build();
  EXPECT_EQ(target_name(g, sin.id), "aten.sin.default");
  EXPECT_TRUE(target_is(g, sin.id, "aten.sin.default"));
  EXPECT_FALSE(target_is(g, sin.id, "aten.cos.default"));
  EXPECT_EQ(target_name(g, p.id), "");
  EXPECT_FALSE(target_is(g, p.id, ""));  // a placeholder calls nothing, not ""
}

TEST(QueryArguments, PositionalNodesAndDictKeysOrNothing) {
  TestGraph t;
  Ref p = t.placeholder("primals_1");
  Ref q = t.placeholder("primals_2");
  Ref add = t.call("aten.add.Tensor", {p, 2, q});
  t[add].kwargs = {{"alpha", A(3)}, {"out", A(q)}};
  t.output({add});
  const Graph g = t.build();
  EXPECT_EQ(node_arg(g, add.id, 0), p.id);
  EXPECT_EQ(node_arg(g, add.id, 1), kNoNode);  // a constant
  EXPECT_EQ(node_arg(g, add.id, 2), q.id);
  EXPECT_EQ(positional(g, add.id, 3), kNoArg);  // past the end
  EXPECT_EQ(node_arg(g, add.id, 3), kNoNode);
  EXPECT_EQ(g.arg(positional(g, add.id, 1)).i, 2);
  EXPECT_EQ(arg_node(g, dict_lookup(g, g.node(add.id).kwargs, "out")), q.id);
  EXPECT_EQ(g.arg(dict_lookup(g, g.node(add.id).kwargs, "alpha")).i, 3);
  EXPECT_EQ(dict_lookup(g, g.node(add.id).kwargs, "beta"), kNoArg);
  EXPECT_EQ(dict_lookup(g, g.node(p.id).kwargs, "out"), kNoArg);  // no kwargs at all
  EXPECT_EQ(arg_node(g, kNoArg), kNoNode);
}

TEST(QueryPolicy, MustRecomputeIsMustOrPreferRecompute) {
  Node n;
  for (RecomputePolicy p : {RecomputePolicy::kMustRecompute, RecomputePolicy::kPreferRecompute}) {
    n.recompute = p;
    EXPECT_TRUE(must_recompute(n));
  }
  for (RecomputePolicy p : {RecomputePolicy::kNone, RecomputePolicy::kMustSave,
                            RecomputePolicy::kPreferSave, RecomputePolicy::kMustCpuOffload}) {
    n.recompute = p;
    EXPECT_FALSE(must_recompute(n));
  }
}

// Not derived: a node is its own joint node. Derived: its origin, including
// kCreatedNode for a node a rewrite made, which maps back to no joint node.
TEST(QueryJointIds, OriginOrTheNodeItselfAndBack) {
  TestGraph t;
  Ref p = t.placeholder("primals_1");
  Ref sin = t.call("aten.sin.default", {p});
  Ref cos = t.call("aten.cos.default", {sin});
  t.output({cos});
  const Graph joint = t.build();
  EXPECT_EQ(joint_id(joint, cos.id), cos.id);

  // Drop sin's user chain to a graph without sin: ids shift, origins do not.
  Graph derived = GraphBuilder::rearrange(joint, std::vector<NodeId>{p.id, cos.id, 3},
                                          std::vector<NodeId>{kNoNode, p.id, kNoNode, kNoNode});
  ASSERT_EQ(derived.size(), 3u);
  EXPECT_EQ(joint_ids(derived, std::vector<NodeId>{0, 1, 2}),
            (std::vector<NodeId>{p.id, cos.id, 3}));
  EXPECT_EQ(nodes_by_joint_id(derived, joint.size()),
            (std::vector<NodeId>{0, kNoNode, 1, 2}));
  derived.set_origin(1, kCreatedNode);
  EXPECT_EQ(joint_id(derived, 1), kCreatedNode);
  EXPECT_EQ(nodes_by_joint_id(derived, joint.size()),
            (std::vector<NodeId>{0, kNoNode, kNoNode, 2}));
}

}  // namespace
}  // namespace remat
