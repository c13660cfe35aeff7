// tests/cpp/test_hop_rng.cc — RNG states of invoke_subgraph bodies
// (torch 2.13's thread_graphsafe_rng_from_hops), one rule per test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

TEST(HopRng, ThreadingIsRefusedByNameUntilSupported) {
  const JointGraph j = hop_joint({"primals_0", "fwd_rng_state_0"}, {"saved", "tangents_0"});
  for (auto* partition : {&min_cut_rematerialization_partition, &default_partition}) {
    try {
      partition(j, {});
      FAIL() << "expected an UnsupportedError";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("thread_graphsafe_rng_from_hops: node "
                                           "'invoke_subgraph_2' of the forward calls "
                                           "'partitioned_fw_subgraph_0_0'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace remat
