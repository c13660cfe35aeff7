// tests/cpp/test_memory.cc — the liveness simulator and the mutation-hazard
// check (remat/memory.h), on forward/backward pairs written by hand, and
// their place in a partition result. Sizes: a [4] float32 tensor is 16 bytes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/memory.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

std::string node_at(const Graph& g, NodeId n) { return n == kNoNode ? "-" : std::string(g.name(n)); }

// forward: x -> a = sin(x) -> b = cos(a) -> c = exp(b); returns c, saves a.
// backward: a, tangents_1 -> d = mul(tangents_1, a) -> returns d.
struct Pair {
  Graph fw, bw;
};

Pair chain() {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {4});
  Ref b = f.call("aten.cos.default", {a}, {8});
  Ref c = f.call("aten.exp.default", {b}, {2});
  f.output({A::tuple({c, a})});
  TestGraph g;
  Ref sa = g.placeholder("sin", {4});
  Ref t = g.placeholder("tangents_1", {2});
  Ref d = g.call("aten.mul.Tensor", {t, sa}, {4});
  g.output({A::tuple({d})});
  return {f.build(), g.build()};
}

TEST(MemorySimulator, ValuesLiveFromTheirNodeToTheirLastUse) {
  Pair p = chain();
  const MemoryProfile m = simulate_memory(p.fw, p.bw, 1);
  // x 16 | a +16 | b +32 | c +8, then b goes | output
  EXPECT_EQ(m.forward_timeline, (std::vector<int64_t>{16, 32, 64, 72, 40}));
  // placeholders: sin (held), tangents_1 +8 | mul +16, then both go | output
  EXPECT_EQ(m.backward_timeline, (std::vector<int64_t>{40, 48, 64, 40}));
  EXPECT_EQ(m.peak_bytes, 72);
  EXPECT_EQ(m.peak_pass, Pass::kForward);
  EXPECT_EQ(node_at(p.fw, m.peak_node), "exp");
  EXPECT_EQ(m.inputs_bytes, 16);
  EXPECT_EQ(m.between_bytes, 40);  // x, c (the caller's), a (saved)
  EXPECT_EQ(m.forward_peak_bytes, 72);
  EXPECT_EQ(m.backward_peak_bytes, 64);
}

TEST(MemorySimulator, AtPeakListsLiveStoragesLargestFirst) {
  Pair p = chain();
  const MemoryProfile m = simulate_memory(p.fw, p.bw, 1);
  std::vector<std::string> names;
  for (const LiveStorage& s : m.at_peak) names.push_back(node_at(p.fw, s.node) + ":" + std::to_string(s.bytes));
  EXPECT_EQ(names, (std::vector<std::string>{"cos:32", "primals_1:16", "sin:16", "exp:8"}));
}

// What fills the peak, with when each storage goes: cos after its last user
// exp, sin (saved) after the backward's mul, the input and the caller's
// output never.
TEST(MemorySimulator, AtPeakNamesTheNodeAfterWhichEachStorageIsReleased) {
  Pair p = chain();
  const MemoryProfile m = simulate_memory(p.fw, p.bw, 1);
  std::vector<std::string> released;
  for (const LiveStorage& s : m.at_peak) {
    const Graph& g = s.released_pass == Pass::kForward ? p.fw : p.bw;
    released.push_back(node_at(p.fw, s.node) + "->" +
                       (s.released_after == kNoNode ? std::string("end")
                                                    : std::string(pass_name(s.released_pass)) +
                                                          ":" + node_at(g, s.released_after)));
  }
  EXPECT_EQ(released, (std::vector<std::string>{"cos->forward:exp", "primals_1->end",
                                                "sin->backward:mul", "exp->end"}));
}

// A storage released after one node is not alive at the next: at_peak holds
// exactly the storages the peak counts. Here sin goes after cos runs, and
// the peak comes one node later, at exp.
TEST(MemorySimulator, AtPeakSumsToThePeak) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {4});
  Ref b = f.call("aten.cos.default", {a}, {4});
  Ref c = f.call("aten.exp.default", {b}, {64});
  f.output({A::tuple({c})});
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {1});
  g.output({A::tuple({t})});
  const Pair p{f.build(), g.build()};
  const MemoryProfile m = simulate_memory(p.fw, p.bw, 1);
  ASSERT_EQ(node_at(p.fw, m.peak_node), "exp");
  std::vector<std::string> names;
  int64_t sum = 0;
  for (const LiveStorage& s : m.at_peak) {
    names.push_back(node_at(p.fw, s.node));
    sum += s.bytes;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"exp", "primals_1", "cos"}));
  EXPECT_EQ(sum, m.peak_bytes);
}

TEST(MemorySimulator, NumFwdOutputsOutOfRangeIsAnError) {
  Pair p = chain();
  EXPECT_THROW(simulate_memory(p.fw, p.bw, 3), Error);
  EXPECT_THROW(simulate_memory(p.fw, p.bw, -1), Error);
}

TEST(MemorySimulator, ViewsShareTheirBaseStorage) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {16});
  Ref v = f.call("aten.view.default", {a, A::list({A(4), A(4)})}, {4, 4});
  f.alias(v, a);
  Ref c = f.call("aten.exp.default", {v}, {1});
  f.output({A::tuple({c})});
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {1});
  g.output({A::tuple({t})});
  const Graph fw = f.build(), bw = g.build();
  const MemoryProfile m = simulate_memory(fw, bw, 1);
  // x 16 | sin +64 | view +0 | exp +4, then the view (and with it sin) goes
  EXPECT_EQ(m.forward_timeline, (std::vector<int64_t>{16, 80, 80, 84, 20}));
}

TEST(MemorySimulator, AViewWithoutStorageIdsStillAliasesItsInput) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {16});
  Ref v = f.call("aten.view.default", {a, A::list({A(4), A(4)})}, {4, 4});
  Ref c = f.call("aten.exp.default", {v}, {1});
  f[a].tensors[0].storage = -1;
  f[v].tensors[0].storage = -1;
  f.output({A::tuple({c})});
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {1});
  g.output({A::tuple({t})});
  const MemoryProfile m = simulate_memory(f.build(), g.build(), 1);
  EXPECT_EQ(m.peak_bytes, 84);
}

TEST(MemorySimulator, UnusedValuesGoRightAfterTheirNode) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  f.call("aten.cos.default", {x}, {100});  // nothing uses it
  Ref b = f.call("aten.sin.default", {x}, {4});
  f.output({A::tuple({b})});
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {4});
  g.output({A::tuple({t})});
  const MemoryProfile m = simulate_memory(f.build(), g.build(), 1);
  EXPECT_EQ(m.forward_timeline, (std::vector<int64_t>{16, 416, 32, 32}));
}

TEST(MemorySimulator, TupleElementsLiveUntilTheTuplesLastGetitem) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref tup = f.call_multi("aten.native_dropout.default", {x, 0.5, true}, {{4}, {8}});
  Ref e0 = f.getitem(tup, 0, {4});
  f.alias(e0, tup);
  Ref y = f.call("aten.exp.default", {e0}, {4});
  f.output({A::tuple({y})});
  TestGraph g;
  Ref t = g.placeholder("tangents_1", {4});
  g.output({A::tuple({t})});
  const MemoryProfile m = simulate_memory(f.build(), g.build(), 1);
  // x 16 | tuple +16 +32 | getitem +0, then the tuple goes: its unused
  // element (32) with it | exp +16, then the element goes
  EXPECT_EQ(m.forward_timeline, (std::vector<int64_t>{16, 64, 64, 48, 32}));
}

TEST(MemorySimulator, AValuelessHigherOrderOpAllocatesWhatItsGetitemsHold) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref hop = f.call("higher_order.run_and_save_rng_state", {x}, {});
  f[hop].tensors.clear();
  f[hop].value = ValueKind::kMissing;
  f[hop].flags = 0;
  Ref state = f.getitem(hop, 0, {100});
  Ref out = f.getitem(hop, 1, {4});
  Ref y = f.call("aten.exp.default", {out}, {4});
  f.output({A::tuple({y, state})});
  TestGraph g;
  Ref s = g.placeholder("rng_state_output_0", {100});
  Ref t = g.placeholder("tangents_1", {4});
  Ref z = g.call("aten.mul.Tensor", {t, s}, {4});
  g.output({A::tuple({z})});
  const Graph fw = f.build(), bw = g.build();
  const MemoryProfile m = simulate_memory(fw, bw, 1);
  // x 16 | hop +400 +16 (both results exist when it returns) | getitems +0
  // | exp +16, then out goes
  EXPECT_EQ(m.forward_timeline, (std::vector<int64_t>{16, 432, 432, 432, 448, 432}));
  // The state reaches the backward by position (its placeholder has another
  // name) and goes after its last use there.
  EXPECT_EQ(m.backward_timeline, (std::vector<int64_t>{432, 448, 464, 48}));
}

TEST(MemorySimulator, SavedValuesLiveUntilTheBackwardsLastUse) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {40});
  Ref b = f.call("aten.cos.default", {x}, {4});
  f.output({A::tuple({b, a})});
  TestGraph g;
  Ref sa = g.placeholder("sin", {40});
  Ref t = g.placeholder("tangents_1", {4});
  Ref d = g.call("aten.mul.Tensor", {t, sa}, {4});
  Ref e = g.call("aten.exp.default", {d}, {4});
  g.output({A::tuple({e})});
  const MemoryProfile m = simulate_memory(f.build(), g.build(), 1);
  // x 16, sin 160, cos 16 | tangents 16 | mul +16, then sin and the tangent
  // go | exp +16, then mul goes
  EXPECT_EQ(m.backward_timeline, (std::vector<int64_t>{192, 208, 224, 64, 48}));
}

TEST(MemorySimulator, UnusedBackwardInputsLiveUntilTheBackwardReturns) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref a = f.call("aten.sin.default", {x}, {40});
  Ref b = f.call("aten.cos.default", {x}, {4});
  f.output({A::tuple({b, a})});
  TestGraph g;
  g.placeholder("sin", {40});
  Ref t = g.placeholder("tangents_1", {4});
  Ref d = g.call("aten.exp.default", {t}, {4});
  g.output({A::tuple({d})});
  const MemoryProfile m = simulate_memory(f.build(), g.build(), 1);
  // exp +16, then the tangent goes; the unused saved input stays
  EXPECT_EQ(m.backward_timeline, (std::vector<int64_t>{192, 208, 224, 208}));
}

TEST(MemorySimulator, ConstantsLiveAllStep) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref y = f.call("aten.sin.default", {x}, {4});
  f.output({A::tuple({y})});
  TestGraph g;
  Ref c = g.get_attr("_tensor_constant0");
  g[c].value = ValueKind::kTensor;
  testing::TensorSpec constant;
  constant.shape = {25};
  constant.storage = 77;
  g[c].tensors.push_back(constant);
  Ref t = g.placeholder("tangents_1", {4});
  Ref d = g.call("aten.mul.Tensor", {t, c}, {4});
  g.output({A::tuple({d})});
  const MemoryProfile m = simulate_memory(f.build(), g.build(), 1);
  EXPECT_EQ(m.inputs_bytes, 116);
  EXPECT_EQ(m.forward_timeline.front(), 116);
}

TEST(MemorySimulator, GraphsWithoutTensorsPeakAtZeroOnTheirFirstNode) {
  TestGraph f;
  f.output({A::tuple({})});
  TestGraph g;
  g.output({A::tuple({})});
  const Graph fw = f.build(), bw = g.build();
  const MemoryProfile m = simulate_memory(fw, bw, 0);
  EXPECT_EQ(m.peak_bytes, 0);
  EXPECT_EQ(node_at(fw, m.peak_node), "output");
  EXPECT_TRUE(m.at_peak.empty());
}

// --- mutation hazards --------------------------------------------------------

// forward: running (an input) is read by `use`, then copy_ writes it;
// `saved` picks which forward value the backward receives.
Pair mutation(bool save_input, bool save_after) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref running = f.placeholder("primals_2", {4});
  Ref use = f.call("aten.add.Tensor", {x, running}, {4});
  Ref fresh = f.call("aten.mul.Tensor", {use, x}, {4});
  Ref copy = f.call("aten.copy_.default", {running, fresh}, {4});
  f.alias(copy, running);
  Ref after = f.call("aten.view.default", {copy, A::list({A(4)})}, {4});
  f.alias(after, running);
  Ref saved = save_input ? running : (save_after ? after : use);
  f.output({A::tuple({use, saved})});
  TestGraph g;
  Ref s = g.placeholder(save_input ? "primals_2" : (save_after ? "view" : "add"), {4});
  Ref t = g.placeholder("tangents_1", {4});
  g.call("aten.add.Tensor", {s, t}, {4}, "reader");
  g.output({A::tuple({t})});
  return {f.build(), g.build()};
}

TEST(MutationHazards, ASavedInputMutatedInTheForwardIsAHazard) {
  Pair p = mutation(/*save_input=*/true, false);
  const auto hz = find_mutation_hazards(p.fw, p.bw, 1);
  ASSERT_EQ(hz.size(), 1u);
  EXPECT_EQ(node_at(p.fw, hz[0].input), "primals_2");
  EXPECT_EQ(node_at(p.fw, hz[0].mutated_by), "copy_");
  EXPECT_EQ(node_at(p.fw, hz[0].saved), "primals_2");
  ASSERT_EQ(hz[0].readers.size(), 1u);
  EXPECT_EQ(node_at(p.bw, hz[0].readers[0]), "reader");
  EXPECT_EQ(describe_hazard(p.fw, p.bw, hz[0]),
            "the forward saves its input 'primals_2' for the backward, but 'primals_2' is "
            "mutated in place by 'copy_' before the backward reads it in 'reader'");
}

TEST(MutationHazards, ValuesComputedBeforeOrFromTheMutationAreNot) {
  Pair computed = mutation(false, false);  // `use`: a fresh tensor
  EXPECT_TRUE(find_mutation_hazards(computed.fw, computed.bw, 1).empty());
  Pair after = mutation(false, true);  // a view of the mutation's result
  EXPECT_TRUE(find_mutation_hazards(after.fw, after.bw, 1).empty());
}

TEST(MutationHazards, InputsTheCallerMutatesAfterTheForwardAreHazards) {
  TestGraph f;
  Ref x = f.placeholder("primals_1", {4});
  Ref running = f.placeholder("primals_2", {4});
  Ref y = f.call("aten.add.Tensor", {x, running}, {4});
  f.output({A::tuple({y, running})});
  TestGraph g;
  Ref s = g.placeholder("primals_2", {4});
  Ref t = g.placeholder("tangents_1", {4});
  g.call("aten.mul.Tensor", {t, s}, {4});
  g.output({A::tuple({t})});
  const Graph fw = f.build(), bw = g.build();
  EXPECT_TRUE(find_mutation_hazards(fw, bw, 1).empty());
  const std::vector<NodeId> mutated{running.id};
  const auto hz = find_mutation_hazards(fw, bw, 1, mutated);
  ASSERT_EQ(hz.size(), 1u);
  EXPECT_EQ(hz[0].mutated_by, kNoNode);
  EXPECT_NE(describe_hazard(fw, bw, hz[0]).find("after the forward returns"), std::string::npos);
  const std::vector<NodeId> not_input{y.id};
  EXPECT_THROW(find_mutation_hazards(fw, bw, 1, not_input), Error);
}

// --- in a partition ------------------------------------------------------------

TEST(MemoryInPartition, TheResultCarriesTheSimulationOfItsGraphs) {
  TestGraph t;
  Ref x = t.placeholder("primals_1", {64});
  Ref a = t.call("aten.sin.default", {x}, {64});
  Ref b = t.call("aten.cos.default", {a}, {64});
  Ref tan = t.placeholder("tangents_1", {64});
  Ref g1 = t.call("aten.mul.Tensor", {tan, b}, {64});
  t.output({A::tuple({b, g1})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  const PartitionResult r = min_cut_rematerialization_partition(j, PartitionOptions{});
  const MemoryProfile again = simulate_memory(r.forward, r.backward, r.num_fwd_outputs);
  EXPECT_EQ(r.memory.peak_bytes, again.peak_bytes);
  EXPECT_EQ(r.memory.forward_timeline, again.forward_timeline);
  EXPECT_EQ(r.memory.backward_timeline, again.backward_timeline);
  EXPECT_GT(r.memory.peak_bytes, 0);
  const std::string json = write_result(j, r);
  EXPECT_NE(json.find("\"memory\":{"), std::string::npos);
  EXPECT_NE(json.find("\"peak_bytes\":" + std::to_string(r.memory.peak_bytes)), std::string::npos);
  EXPECT_NE(json.find("\"hazards\":[]"), std::string::npos);
}

TEST(MemoryInPartition, MutatedInputsRoundTripThroughTheFormat) {
  TestGraph t;
  Ref x = t.placeholder("primals_1", {4});
  Ref stat = t.placeholder("primals_2", {4});
  Ref y = t.call("aten.add.Tensor", {x, stat}, {4});
  t.output({A::tuple({y})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  j.mutated_inputs = {stat.id};
  const std::string text = write_joint_graph(j);
  EXPECT_NE(text.find("\"mutated_inputs\":[\"primals_2\"]"), std::string::npos) << text;
  const JointGraph back = read_joint_graph(text);
  EXPECT_EQ(back.mutated_inputs, j.mutated_inputs);
  EXPECT_EQ(write_joint_graph(back), text);
}

TEST(MemoryInPartition, MutatedInputsMustNameEachPlaceholderOnce) {
  const std::string head =
      R"({"format":"remat.joint_graph","version":1,"num_fwd_outputs":1,"nodes":[)"
      R"({"name":"x","op":"placeholder","target":"x"},)"
      R"({"name":"y","op":"call_function","target":"aten.sin.default","args":[{"node":"x"}]},)"
      R"({"name":"output","op":"output","target":"output","args":[[{"node":"y"}]]}],)";
  for (const char* bad : {R"("mutated_inputs":["y"]})", R"("mutated_inputs":["x","x"]})",
                          R"("mutated_inputs":["nope"]})", R"("mutated_inputs":"x"})"}) {
    try {
      read_joint_graph(head + bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mutated_inputs"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(read_joint_graph(head + R"("mutated_inputs":["x"]})").mutated_inputs.size(), 1u);
}

}  // namespace
}  // namespace remat
