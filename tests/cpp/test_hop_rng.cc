// tests/cpp/test_hop_rng.cc — RNG states of invoke_subgraph bodies
// (torch 2.13's thread_graphsafe_rng_from_hops), one rule per test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/copy.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/partition.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

// A body whose placeholders are `inputs` (RNG states among them by name),
// computing sin of the first and returning it.
NestedGraph body(const std::string& name, const std::vector<std::string>& inputs) {
  TestGraph t;
  std::vector<Ref> ps;
  for (const std::string& p : inputs) ps.push_back(t.placeholder(p));
  Ref sin = t.call("aten.sin.default", {ps.at(0)});
  t.output({A::tuple({sin, sin})});
  return NestedGraph{name, t.build()};
}

// The joint graph AOTAutograd hands the partitioner after partitioning one
// invoke_subgraph region: a forward call returning (out, saved) and a
// backward call taking (saved, tangent). `fw_inputs`/`bw_inputs` are the
// bodies' placeholders.
JointGraph hop_joint(const std::vector<std::string>& fw_inputs,
                     const std::vector<std::string>& bw_inputs) {
  TestGraph t;
  Ref p = t.placeholder("primals_1");
  Ref tangent = t.placeholder("tangents_1");
  Ref fw_body = t.get_attr("partitioned_fw_subgraph_0_0");
  Ref fw = t.call_multi("higher_order.invoke_subgraph",
                        {fw_body, "partitioned_fw_subgraph_0_0", p}, {{4}, {4}}, "invoke_subgraph_2");
  Ref out = t.getitem(fw, 0);
  Ref saved = t.getitem(fw, 1);
  Ref bw_body = t.get_attr("partitioned_bw_subgraph_0_0");
  Ref bw = t.call_multi("higher_order.invoke_subgraph",
                        {bw_body, "partitioned_bw_subgraph_0_0", saved, tangent}, {{4}},
                        "invoke_subgraph_3");
  Ref grad = t.getitem(bw, 0);
  t.output({A::tuple({out, grad})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  j.nested.push_back(body("partitioned_fw_subgraph_0_0", fw_inputs));
  j.nested.push_back(body("partitioned_bw_subgraph_0_0", bw_inputs));
  return j;
}

TEST(HopRng, CallsAreFoundByTheirBodiesRngPlaceholders) {
  const JointGraph j = hop_joint({"primals_0", "fwd_rng_state_0", "fwd_rng_state_1"},
                                 {"saved", "tangents_0", "bwd_rng_state_0"});
  const std::vector<HopRngCall> fw = find_hop_rng_calls(j.graph, j.nested, false);
  ASSERT_EQ(fw.size(), 1u);
  EXPECT_EQ(j.graph.name(fw[0].hop), "invoke_subgraph_2");
  EXPECT_EQ(fw[0].body->name, "partitioned_fw_subgraph_0_0");
  EXPECT_EQ(fw[0].states, std::vector<NodeId>({1, 2}));
  const std::vector<HopRngCall> bw = find_hop_rng_calls(j.graph, j.nested, true);
  ASSERT_EQ(bw.size(), 1u);
  EXPECT_EQ(j.graph.name(bw[0].hop), "invoke_subgraph_3");
  EXPECT_EQ(bw[0].states, std::vector<NodeId>({2}));
}

TEST(HopRng, BodiesWithoutRngStatesOrNotExportedAreSkipped) {
  JointGraph j = hop_joint({"primals_0"}, {"saved", "tangents_0"});
  EXPECT_TRUE(find_hop_rng_calls(j.graph, j.nested, false).empty());
  EXPECT_TRUE(find_hop_rng_calls(j.graph, j.nested, true).empty());
  // A body that is not among the nested graph modules: torch skips
  // attributes that are no GraphModule.
  j = hop_joint({"primals_0", "fwd_rng_state_0"}, {"saved", "tangents_0"});
  j.nested.clear();
  EXPECT_TRUE(find_hop_rng_calls(j.graph, j.nested, false).empty());
}

TEST(HopRng, PartitionWithoutBodyRngStatesSucceeds) {
  const JointGraph j = hop_joint({"primals_0"}, {"saved", "tangents_0"});
  EXPECT_NO_THROW(min_cut_rematerialization_partition(j, {}));
  EXPECT_NO_THROW(default_partition(j, {}));
}

// The node names of a graph, and the args of one node as names/strings.
std::vector<std::string> names(const Graph& g) { return testing::node_names(g); }

std::vector<std::string> args_of(const Graph& g, std::string_view node) {
  std::vector<std::string> out;
  for (ArgId c : g.children(g.node(g.find(node)).args)) {
    const Arg& a = g.arg(c);
    out.push_back(a.kind == ArgKind::kNode ? std::string(g.name(a.id))
                                           : a.kind == ArgKind::kStr ? std::string(g.str(a.id))
                                                                     : arg_kind_name(a.kind));
  }
  return out;
}

TEST(HopRng, StatesBecomeInputsAfterTheLastPlaceholderAndCallsAreReplacedInPlace) {
  const JointGraph j = hop_joint({"primals_0", "fwd_rng_state_0", "fwd_rng_state_1"},
                                 {"saved", "tangents_0", "bwd_rng_state_0"});
  const PartitionResult r = min_cut_rematerialization_partition(j, {});
  // torch: per call its placeholders, then the new call, named by FX.
  EXPECT_EQ(names(r.forward),
            std::vector<std::string>({"primals_1", "fwd_rng_state_0", "fwd_rng_state_1",
                                      "partitioned_fw_subgraph_0_0", "invoke_subgraph", "getitem",
                                      "getitem_1", "output"}));
  EXPECT_EQ(args_of(r.forward, "invoke_subgraph"),
            std::vector<std::string>({"partitioned_fw_subgraph_0_0", "partitioned_fw_subgraph_0_0",
                                      "primals_1", "fwd_rng_state_0", "fwd_rng_state_1"}));
  const Node& call = r.forward.node(r.forward.find("invoke_subgraph"));
  EXPECT_EQ(j.graph.name(call.origin), "invoke_subgraph_2");  // its meta: the old call's
  EXPECT_EQ(r.forward.node(r.forward.find("fwd_rng_state_1")).origin, kCreatedNode);
  EXPECT_EQ(r.forward.str(r.forward.node(r.forward.find("fwd_rng_state_1")).target), "fwd_rng_state_1");
  // The backward's states follow its last placeholder, the tangent.
  const std::vector<std::string> bw = names(r.backward);
  ASSERT_GE(bw.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(bw.begin(), bw.begin() + 3),
            std::vector<std::string>({"getitem_1", "tangents_1", "bwd_rng_state_0"}));
  EXPECT_EQ(args_of(r.backward, "invoke_subgraph"),
            std::vector<std::string>({"partitioned_bw_subgraph_0_0", "partitioned_bw_subgraph_0_0",
                                      "getitem_1", "tangents_1", "bwd_rng_state_0"}));
}

TEST(HopRng, StateValuesAreTheBodysGenerators) {
  JointGraph j = hop_joint({"primals_0"}, {"saved", "tangents_0"});
  // A body whose RNG input holds a generator with a host handle.
  TestGraph t;
  Ref x = t.placeholder("primals_0");
  Ref state = t.placeholder("fwd_rng_state_0");
  t[state].value = ValueKind::kGenerator;
  t[state].tensors.clear();
  t[state].flags = 0;
  Ref sin = t.call("aten.sin.default", {x});
  t.output({A::tuple({sin, sin})});
  Graph body = t.build();
  {
    // TestGraph has no generator fields: rebuild the node with them.
    GraphBuilder b(body);
    NodeCopier c(body, b);
    std::vector<NodeId> remap(body.size(), kNoNode);
    for (NodeId id = 0; id < body.size(); ++id) {
      if (id != state.id) {
        remap[id] = c.copy(id, remap);
        continue;
      }
      Node n;
      c.copy_value(id, n);
      n.args = c.copy_args(body.node(id).args, remap);
      n.kwargs = c.copy_args(body.node(id).kwargs, remap);
      NodeExtra ex;
      ex.device = b.intern("cuda:1");
      ex.handle = 7;
      remap[id] = b.add_node(n, ex);
    }
    body = b.finish();
  }
  j.nested[0].graph = std::move(body);
  const PartitionResult r = min_cut_rematerialization_partition(j, {});
  const NodeId ph = r.forward.find("fwd_rng_state_0");
  ASSERT_NE(ph, kNoNode);
  EXPECT_EQ(r.forward.node(ph).value, ValueKind::kGenerator);
  EXPECT_EQ(r.forward.str(r.forward.extra(ph).device), "cuda:1");
  EXPECT_EQ(r.forward.extra(ph).handle, 7);
}

TEST(HopRng, DefaultPartitionThreadsBothGraphsWhenTheBackwardNeedsTheForward) {
  const JointGraph j = hop_joint({"primals_0", "fwd_rng_state_0"},
                                 {"saved", "tangents_0", "bwd_rng_state_0"});
  const PartitionResult r = default_partition(j, {});
  EXPECT_NE(r.forward.find("fwd_rng_state_0"), kNoNode);
  EXPECT_NE(r.backward.find("bwd_rng_state_0"), kNoNode);
}

}  // namespace
}  // namespace remat
