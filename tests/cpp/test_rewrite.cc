// tests/cpp/test_rewrite.cc — functionalize_rng_ops,
// reorder_to_mimic_autograd_engine and raise_getitems (and the two in one
// rebuild), one rule per test.
// Expected graphs are what torch 2.13's functions give on the same graphs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "extract/extract.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/partition.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using Names = std::vector<std::string>;

Names names(const Graph& g) { return testing::node_names(g); }
Names outputs(const Graph& g) { return testing::output_names(g); }
Names args(const Graph& g, NodeId id) { return testing::arg_texts(g, id); }

// torch: x -> rand_like (MUST_RECOMPUTE) -> mul -> sin -> cos, with its
// backward; saved values primals_1 and sin, so rand_like is replayed.
struct RngCase {
  Graph g;
  Ref p1, sin;
};

RngCase rng_case() {
  TestGraph t;
  RngCase c;
  c.p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref rand = t.call("aten.rand_like.default", {c.p1});
  t[rand].kwargs = {{"pin_memory", false}};
  t[rand].recompute = RecomputePolicy::kMustRecompute;
  t.op("aten.rand_like.default").tags = kTagNondeterministicSeeded;
  Ref mul = t.call("aten.mul.Tensor", {c.p1, rand});
  c.sin = t.call("aten.sin.default", {mul});
  Ref cos = t.call("aten.cos.default", {c.sin});
  Ref sin1 = t.call("aten.sin.default", {c.sin});
  Ref neg = t.call("aten.neg.default", {sin1});
  Ref mul1 = t.call("aten.mul.Tensor", {t1, neg});
  Ref cos1 = t.call("aten.cos.default", {mul});
  Ref mul2 = t.call("aten.mul.Tensor", {mul1, cos1});
  Ref mul3 = t.call("aten.mul.Tensor", {mul2, rand});
  t.output({A::tuple({cos, mul3})});
  c.g = t.build();
  return c;
}

Extracted extract(const RngCase& c) { return testing::extract_saving(c.g, {c.p1.id, c.sin.id}); }

TEST(RewriteTest, RngOpsAreFunctionalized) {
  RngCase c = rng_case();
  Extracted e = extract(c);
  ASSERT_EQ(functionalize_rng_ops(c.g, e), 1);

  const Graph& fw = e.forward;
  EXPECT_EQ(names(fw), (Names{"primals_1", "run_and_save_rng_state", "getitem", "getitem_1",
                              "mul", "sin", "cos", "output_1"}));
  EXPECT_EQ(outputs(fw), (Names{"cos", "primals_1", "sin", "getitem"}));
  const NodeId rs = fw.find("run_and_save_rng_state");
  EXPECT_EQ(fw.str(fw.node(rs).target), "higher_order.run_and_save_rng_state");
  EXPECT_EQ(args(fw, rs), (Names{"target:aten.rand_like.default", "primals_1"}));
  EXPECT_EQ(fw.children(fw.node(rs).kwargs).size(), 2u);  // pin_memory: False
  EXPECT_EQ(fw.node(rs).value, ValueKind::kMissing);
  EXPECT_EQ(fw.node(rs).origin, kCreatedNode);
  // The state: a uint8 CPU tensor shaped like torch.get_rng_state().
  const NodeId state = fw.find("getitem");
  EXPECT_EQ(args(fw, state), (Names{"run_and_save_rng_state", "0"}));
  ASSERT_EQ(fw.tensors(state).size(), 1u);
  const TensorMeta& tm = fw.tensors(state)[0];
  EXPECT_EQ(fw.str(tm.dtype), "uint8");
  EXPECT_EQ(fw.str(tm.device), "cpu");
  ASSERT_EQ(fw.shape(tm).size(), 1u);
  EXPECT_EQ(fw.shape(tm)[0].value, 5056);
  // The value keeps the op's meta.
  const NodeId value = fw.find("getitem_1");
  EXPECT_EQ(args(fw, value), (Names{"run_and_save_rng_state", "1"}));
  EXPECT_EQ(fw.node(value).recompute, RecomputePolicy::kMustRecompute);
  EXPECT_EQ(args(fw, fw.find("mul")), (Names{"primals_1", "getitem_1"}));

  const Graph& bw = e.backward;
  EXPECT_EQ(names(bw), (Names{"primals_1", "sin", "rng_state_output_0", "tangents_1",
                              "run_with_rng_state", "mul", "sin_1", "neg", "mul_1", "cos_1",
                              "mul_2", "mul_3", "output"}));
  const NodeId rw = bw.find("run_with_rng_state");
  EXPECT_EQ(args(bw, rw),
            (Names{"rng_state_output_0", "target:aten.rand_like.default", "primals_1"}));
  EXPECT_EQ(args(bw, bw.find("mul_3")), (Names{"mul_2", "run_with_rng_state"}));
  EXPECT_EQ(bw.node(bw.find("rng_state_output_0")).kind, NodeKind::kPlaceholder);

  // Then the autograd-engine order.
  Graph reordered = reorder_to_mimic_autograd_engine(bw);
  EXPECT_EQ(names(reordered),
            (Names{"primals_1", "sin", "rng_state_output_0", "tangents_1", "sin_1", "neg", "mul_1",
                   "run_with_rng_state", "mul", "cos_1", "mul_2", "mul_3", "output"}));
}

TEST(RewriteTest, RngStatesGoBeforeSymNodesAndNamesFollowFx) {
  RngCase c = rng_case();
  Extracted e = extract(c);
  // Pretend the last forward output is a saved sym node, and that the
  // forward already used the name getitem_5.
  e.saved_sym_nodes = {c.sin.id};
  e.forward_names.create_name("getitem_5");
  ASSERT_EQ(functionalize_rng_ops(c.g, e), 1);
  EXPECT_EQ(outputs(e.forward), (Names{"cos", "primals_1", "getitem", "sin"}));
  EXPECT_NE(e.forward.find("getitem_6"), kNoNode);
}

TEST(RewriteTest, RngNeedsATangentPlaceholder) {
  RngCase c = rng_case();
  Extracted e = extract(c);
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  t.output({A::tuple({p1})});
  e.backward = t.build();
  EXPECT_THROW(functionalize_rng_ops(c.g, e), Error);
}

TEST(RewriteTest, RngOpsOnlyInOneGraphAreLeftAlone) {
  RngCase c = rng_case();
  // Saving the random value itself keeps it out of the backward.
  Extracted e = testing::extract_saving(c.g, {c.p1.id, c.sin.id, c.g.find("rand_like")});
  const Names fw = names(e.forward);
  EXPECT_EQ(functionalize_rng_ops(c.g, e), 0);
  EXPECT_EQ(names(e.forward), fw);
}

// Checkpointed attention without dropout (dropout_p left to its schema
// default, 0.0), recomputed in the backward: x -> sdpa (MUST_RECOMPUTE) ->
// getitem -> sin, backward tangent * cos(getitem).
struct AttentionCase {
  Graph g;
  Ref p1;
};

AttentionCase attention_case() {
  TestGraph t;
  AttentionCase c;
  c.p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  const std::string op = "aten._scaled_dot_product_flash_attention_for_cpu.default";
  Ref sdpa = t.call_multi(op, {c.p1, c.p1, c.p1}, {{4}, {4}});
  t.op(op).tags = kTagNondeterministicSeeded;
  t.op(op).dropout_p_index = 3;
  t.op(op).dropout_p_default = 0.0;
  t.checkpoint(sdpa, RecomputePolicy::kMustRecompute, 0);
  Ref out = t.getitem(sdpa, 0);
  Ref sin = t.call("aten.sin.default", {out});
  Ref cos = t.call("aten.cos.default", {out});
  Ref mul = t.call("aten.mul.Tensor", {t1, cos});
  t.output({A::tuple({sin, mul})});
  c.g = t.build();
  return c;
}

TEST(RewriteTest, AttentionWithoutDropoutIsReplayedOnlyBefore214) {
  // 2.13: a seeded op, so its recomputation replays the forward's RNG state.
  AttentionCase c = attention_case();
  Extracted e213 = testing::extract_saving(c.g, {c.p1.id});
  ASSERT_EQ(functionalize_rng_ops(c.g, e213, true, {"cuda"}, TorchBehavior::of({2, 13})), 1);
  EXPECT_NE(e213.forward.find("run_and_save_rng_state"), kNoNode);
  EXPECT_NE(e213.backward.find("run_with_rng_state"), kNoNode);
  // 2.14: dropout is statically zero, so nothing random is recomputed.
  Extracted e214 = testing::extract_saving(c.g, {c.p1.id});
  const Names fw = names(e214.forward), bw = names(e214.backward);
  EXPECT_EQ(functionalize_rng_ops(c.g, e214, true, {"cuda"}, TorchBehavior::of({2, 14})), 0);
  EXPECT_EQ(names(e214.forward), fw);
  EXPECT_EQ(names(e214.backward), bw);
}

// --- graph-safe RNG on a stored joint graph with CUDA metadata -------------
// tests/data/rng/ckpt_dropout.json (tools/capture_rng_graphs.py): one
// checkpointed native_dropout on cuda:0, replayed in the backward. The exact
// graphs are pinned against live torch by tests/python/test_rng_parity.py;
// these pin each path's rule.

JointGraph ckpt_dropout() {
  return read_joint_graph_file(std::string(REMAT_EXAMPLES_DIR) + "/../tests/data/rng/ckpt_dropout.json");
}

NodeId last_placeholder(const Graph& g) {
  NodeId last = kNoNode;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind == NodeKind::kPlaceholder) last = id;
  }
  return last;
}

bool has_kwarg(const Graph& g, NodeId id, std::string_view key, std::string_view node) {
  const std::vector<ArgId> items = g.children(g.node(id).kwargs);
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    const Arg& k = g.arg(items[i]);
    const Arg& v = g.arg(items[i + 1]);
    if (k.kind == ArgKind::kStr && g.str(k.id) == key && v.kind == ArgKind::kNode &&
        g.name(v.id) == node) {
      return true;
    }
  }
  return false;
}

// The shape of the RNG state the backward's first rng_state_output takes.
int64_t saved_state_bytes(const PartitionResult& r) {
  const NodeId ph = r.backward.find("rng_state_output_0");
  if (ph == kNoNode || r.backward.tensors(ph).size() != 1) return -1;
  return r.backward.shape(r.backward.tensors(ph)[0])[0].value;
}

TEST(RewriteTest, GraphsafeDeviceRandomOpsTakeGeneratorInputsInBothGraphs) {
  const PartitionResult r = min_cut_rematerialization_partition(ckpt_dropout(), {});
  EXPECT_EQ(r.num_rng_states, 0);  // nothing saved: the generators are inputs
  for (const auto& [g, input] : {std::pair<const Graph*, const char*>{&r.forward, "fwd_rng_state_0"},
                                 {&r.backward, "bwd_rng_state_0"}}) {
    const NodeId ph = last_placeholder(*g);
    ASSERT_NE(ph, kNoNode);
    EXPECT_EQ(g->name(ph), input);
    EXPECT_EQ(g->node(ph).value, ValueKind::kGenerator);
    EXPECT_EQ(g->str(g->extra(ph).device), "cuda:0");
    const NodeId run = g->find("graphsafe_run_with_rng_state");
    ASSERT_NE(run, kNoNode);
    EXPECT_EQ(args(*g, run).front(), "target:aten.native_dropout.default");
    EXPECT_TRUE(has_kwarg(*g, run, "rng_state", input));
    EXPECT_EQ(g->find("run_and_save_rng_state"), kNoNode);
    EXPECT_EQ(g->find("run_with_rng_state"), kNoNode);
  }
}

TEST(RewriteTest, GraphsafeOffSavesTheCudaGeneratorsStateInstead) {
  PartitionOptions o;
  o.graphsafe_rng_functionalization = false;
  const PartitionResult r = min_cut_rematerialization_partition(ckpt_dropout(), o);
  EXPECT_EQ(r.num_rng_states, 1);
  EXPECT_EQ(r.forward.find("graphsafe_run_with_rng_state"), kNoNode);
  EXPECT_NE(r.forward.find("run_and_save_rng_state"), kNoNode);
  EXPECT_EQ(saved_state_bytes(r), 16);  // torch.cuda.get_rng_state(): seed + offset
}

TEST(RewriteTest, DevicesNotRegisteredAsGraphsafeSaveTheCpuState) {
  PartitionOptions o;
  o.graphsafe_rng_device_types = {};  // supports_graphsafe_rng is false for cuda
  const PartitionResult r = min_cut_rematerialization_partition(ckpt_dropout(), o);
  EXPECT_EQ(r.num_rng_states, 1);
  EXPECT_EQ(saved_state_bytes(r), 5056);  // torch.get_rng_state()
}

TEST(RewriteTest, SavedStateSizeFollowsWhetherTheOpsDeviceIsRegistered) {
  PartitionOptions o;
  o.graphsafe_rng_functionalization = false;
  o.graphsafe_rng_device_types = {"xpu"};  // cuda not registered: the CPU state
  EXPECT_EQ(saved_state_bytes(min_cut_rematerialization_partition(ckpt_dropout(), o)), 5056);
  o.graphsafe_rng_device_types = {"cuda", "cpu"};
  EXPECT_EQ(saved_state_bytes(min_cut_rematerialization_partition(ckpt_dropout(), o)), 16);
}

TEST(RewriteTest, ReorderPullsInputsJustInTime) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  t.call("aten.copy_.default", {p1, p1});
  t.call("aten.sin.default", {p1});  // before the backward, needed by nothing
  Ref cos = t.call("aten.cos.default", {p1});
  Ref mul = t.call("aten.mul.Tensor", {t1, p1});
  Ref mul1 = t.call("aten.mul.Tensor", {mul, cos});
  t.output({A::tuple({mul1})});
  Graph g = t.build();
  Graph r = reorder_to_mimic_autograd_engine(g);
  EXPECT_EQ(names(r), (Names{"primals_1", "tangents_1", "copy_", "mul", "cos", "mul_1", "output"}));
  EXPECT_EQ(r.node(r.find("cos")).origin, cos.id);
}

TEST(RewriteTest, ReorderWithoutTangentUsersKeepsTheGraph) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {p1});
  t.call("aten.cos.default", {p1});
  t.output({A::tuple({sin})});
  Graph g = t.build();
  EXPECT_EQ(names(reorder_to_mimic_autograd_engine(g)), names(g));
}

TEST(RewriteTest, RaiseGetitemsMovesEachRightAfterItsParent) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref split = t.call_multi("aten.split.Tensor", {p1, 2}, {{2}, {2}});
  Ref sin = t.call("aten.sin.default", {p1});
  Ref g0 = t.getitem(split, 0);
  Ref cos = t.call("aten.cos.default", {p1});
  Ref g00 = t.getitem(g0, 0);  // a getitem of a getitem
  Ref g1 = t.getitem(split, 1);
  Ref p2 = t.placeholder("primals_2");
  Ref gp = t.getitem(p2, 1);
  t.output({A::tuple({sin, cos, g00, g1, gp})});
  Graph g = t.build();
  // As compile_utils.raise_getitems: reverse order, each after its parent,
  // so getitem_1 moves after split first; getitem_1 (of getitem) stays
  // where getitem was.
  EXPECT_EQ(names(raise_getitems(g)),
            (Names{"primals_1", "split", "getitem", "getitem_2", "sin", "getitem_1", "cos",
                   "primals_2", "getitem_3", "output"}));
}

// Every node's name, arguments and origin, in order.
std::vector<std::string> described(const Graph& g) {
  std::vector<std::string> out;
  for (NodeId id = 0; id < g.size(); ++id) {
    std::string line = std::string(g.name(id)) + " <- " + std::to_string(g.node(id).origin) + ":";
    if (g.node(id).args != kNoArg)
      for (const std::string& a : args(g, id)) line += " " + a;
    out.push_back(std::move(line));
  }
  return out;
}

// reorder_and_raise_getitems (what the pipeline runs when nothing comes
// between the two passes) is the two passes in turn: where the reorder
// moves nodes and drops one and the raise then moves getitems, where no
// tangent has a user (only the raise moves), and where neither moves.
TEST(RewriteTest, ReorderAndRaiseGetitemsIsTheTwoPassesInOneRebuild) {
  auto backward = [](bool tangent_used) {
    TestGraph t;
    Ref p1 = t.placeholder("primals_1");
    Ref t1 = t.placeholder("tangents_1");
    Ref split = t.call_multi("aten.split.Tensor", {p1, 2}, {{2}, {2}});
    t.call("aten.sin.default", {p1});  // needed by nothing: the reorder drops it
    Ref g0 = t.getitem(split, 0);
    Ref mul = t.call("aten.mul.Tensor", {tangent_used ? t1 : p1, p1});
    Ref g1 = t.getitem(split, 1);
    Ref mul1 = t.call("aten.mul.Tensor", {mul, g0});
    Ref mul2 = t.call("aten.mul.Tensor", {mul1, g1});
    t.output({A::tuple({mul2})});
    return t.build();
  };
  for (const bool tangent_used : {true, false}) {
    const Graph g = backward(tangent_used);
    const Graph two = raise_getitems(reorder_to_mimic_autograd_engine(g));
    const Graph one = reorder_and_raise_getitems(g);
    EXPECT_EQ(described(one), described(two)) << "tangent used: " << tangent_used;
    EXPECT_NE(names(two), names(g));  // something moved
  }
  const Graph settled = raise_getitems(reorder_to_mimic_autograd_engine(backward(true)));
  EXPECT_EQ(described(reorder_and_raise_getitems(settled)), described(settled));
}

TEST(RewriteTest, RaiseGetitemsNeedsOneInput) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref p2 = t.placeholder("primals_2");
  Ref bad = t.call("operator.getitem", {A::tuple({p1, p2}), 0}, {4}, "getitem");
  t.output({A::tuple({bad})});
  Graph g = t.build();
  EXPECT_THROW(raise_getitems(g), Error);
}

}  // namespace
}  // namespace remat
