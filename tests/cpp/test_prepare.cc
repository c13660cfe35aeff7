// tests/cpp/test_prepare.cc — stage 1 (src/prepare): DCE, CSE, the
// recompute-tag passes and the two prologues, one rule per test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "graph_fixture.h"
#include "prepare/mutation.h"
#include "prepare/prepare.h"
#include "remat/error.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

bool has(const Graph& g, const char* name) { return g.find(name) != kNoNode; }

const TorchBehavior kNewest = TorchBehavior::of(kNewestTorchRelease);

PartitionOptions as_release(TorchRelease release) {
  PartitionOptions o;
  o.torch = TorchBehavior::of(release);
  return o;
}

// Returns `values` through one stack node: a node returned directly aliases
// an output, which CSE never merges.
void output_via_sink(TestGraph& t, std::vector<A> values) {
  t.output({t.call("aten.stack.default", {A::list(std::move(values))}, {4}, "sink")});
}

// --- eliminate_dead_code -----------------------------------------------------

TEST(PrepareDce, RemovesDeadChainsKeepsPlaceholders) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto unused = t.placeholder("primals_2");
  auto a = t.call("aten.relu.default", {x});
  auto b = t.call("aten.neg.default", {a});  // dead, and makes `a` dead
  auto c = t.call("aten.sin.default", {x});
  t.output({c});
  (void)unused;
  (void)b;
  Graph g = t.build();
  Graph d = eliminate_dead_code(g, Impurity{});
  EXPECT_EQ(d.size(), 4u);
  EXPECT_TRUE(has(d, "primals_2"));
  EXPECT_FALSE(has(d, "relu"));
  EXPECT_FALSE(has(d, "neg"));
  // Origins point at the input graph.
  EXPECT_EQ(d.node(d.find("sin")).origin, g.find("sin"));
  EXPECT_EQ(d.node(d.output()).origin, g.output());
}

TEST(PrepareDce, ImpureNodesAndTheirInputsStay) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a = t.call("aten.relu.default", {x});
  auto p = t.call("aten.neg.default", {a}, {4}, "printer");
  t[p].flags |= kFlagImpure;
  t.output({x});
  Graph d = eliminate_dead_code(t.build(), Impurity{});
  EXPECT_TRUE(has(d, "printer"));
  EXPECT_TRUE(has(d, "relu"));
}

TEST(PrepareDce, RandomOpsImpureOnlyWithImpureRandom) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  t.call("aten.rand_like.default", {x});
  t.output({x});
  Graph g = t.build();
  EXPECT_TRUE(has(eliminate_dead_code(g, Impurity{}), "rand_like"));
  EXPECT_FALSE(has(eliminate_dead_code(g, Impurity{.random = false}), "rand_like"));
}

TEST(PrepareDce, PacketTargetsAnswerAsTheirDefaultOverloadFrom213) {
  // A dead torch.ops.aten.rand (a packet, as a joint pass may insert one).
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto rand = t.call("aten.rand", {A::list({3})}, {3}, "dead_rand");
  t.output({x});
  Graph g = t.build();
  ASSERT_EQ(g.op(rand.id)->kind, OpKind::kPacket);
  // 2.13 on: random like aten.rand.default, so kept; 2.12: a packet is pure.
  EXPECT_TRUE(has(eliminate_dead_code(g, impurity(true, TorchBehavior::of({2, 13}))), "dead_rand"));
  EXPECT_FALSE(has(eliminate_dead_code(g, impurity(true, TorchBehavior::of({2, 12}))), "dead_rand"));
  EXPECT_FALSE(has(eliminate_dead_code(g, impurity(false, TorchBehavior::of({2, 13}))), "dead_rand"));
}

TEST(PrepareDce, UnusedGetAttrDies) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  t.get_attr("_tensor_constant0");
  t.output({x});
  EXPECT_FALSE(has(eliminate_dead_code(t.build(), Impurity{}), "_tensor_constant0"));
}

// --- common_subexpression_elimination ------------------------------------------

TEST(PrepareCse, MergesEqualNodesIntoTheFirst) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a1 = t.call("aten.relu.default", {x});
  auto a2 = t.call("aten.relu.default", {x});
  auto b1 = t.call("aten.neg.default", {a1});
  auto b2 = t.call("aten.neg.default", {a2});  // equal once a2 -> a1
  auto s = t.call("aten.add.Tensor", {b1, b2});
  t.output({s});
  Graph g = t.build();
  std::vector<NodeId> replaced;
  Graph c = common_subexpression_elimination(g, replaced, kNewest);
  ASSERT_EQ(replaced.size(), g.size());
  EXPECT_EQ(replaced[a2.id], a1.id);
  EXPECT_EQ(replaced[b2.id], b1.id);
  EXPECT_EQ(replaced[a1.id], a1.id);
  EXPECT_EQ(c.size(), g.size() - 2);
  EXPECT_FALSE(has(c, "relu_1"));
  // add now uses neg twice: one distinct input.
  const NodeId add = c.find("add");
  ASSERT_EQ(c.inputs(add).size(), 1u);
  EXPECT_EQ(c.inputs(add)[0], c.find("neg"));
  EXPECT_EQ(c.node(add).origin, s.id);
}

TEST(PrepareCse, ConstantsCompareWithTheirType) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto i = t.call("aten.mul.Tensor", {x, 1});
  auto f = t.call("aten.mul.Tensor", {x, 1.0});
  auto b = t.call("aten.mul.Tensor", {x, true});
  auto i2 = t.call("aten.mul.Tensor", {x, 1});
  auto f2 = t.call("aten.mul.Tensor", {x, 1.0});
  output_via_sink(t, {i, f, b, i2, f2});
  Graph g = t.build();
  for (TorchRelease release : {TorchRelease{2, 13}, TorchRelease{2, 14}}) {
    std::vector<NodeId> r;
    common_subexpression_elimination(g, r, TorchBehavior::of(release));
    EXPECT_EQ(r[f.id], f.id);
    EXPECT_EQ(r[b.id], b.id);
    EXPECT_EQ(r[i2.id], i.id);
    EXPECT_EQ(r[f2.id], f.id);
  }
}

TEST(PrepareCse, FloatsCompareByValueUntil213ByBitsFrom214) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto z = t.call("aten.mul.Tensor", {x, 0.0});
  auto nz = t.call("aten.mul.Tensor", {x, -0.0});
  auto n1 = t.call("aten.mul.Tensor", {x, nan});
  auto n2 = t.call("aten.mul.Tensor", {x, nan});
  auto neg_nan = t.call("aten.mul.Tensor", {x, -nan});  // the sign bit set
  output_via_sink(t, {z, nz, n1, n2, neg_nan});
  Graph g = t.build();
  std::vector<NodeId> r;
  // 2.13: -0.0 == 0.0, and NaN equals nothing.
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 13}));
  EXPECT_EQ(r[nz.id], z.id);
  EXPECT_EQ(r[n2.id], n2.id);
  EXPECT_EQ(r[neg_nan.id], neg_nan.id);
  // 2.14: bit patterns; equal NaNs merge, -nan is another pattern.
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 14}));
  EXPECT_EQ(r[nz.id], nz.id);
  EXPECT_EQ(r[n2.id], n1.id);
  EXPECT_EQ(r[neg_nan.id], neg_nan.id);
}

TEST(PrepareCse, StructureKwargsAndTargetMatter) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto l = t.call("aten.view.default", {x, A::list({2, 2})});
  auto tu = t.call("aten.view.default", {x, A::tuple({2, 2})});
  auto l2 = t.call("aten.view.default", {x, A::list({2, 2})});
  auto k1 = t.call("aten.sum.dim_IntList", {x, A::list({0})});
  t[k1].kwargs = {{"keepdim", true}};
  auto k2 = t.call("aten.sum.dim_IntList", {x, A::list({0})});
  t[k2].kwargs = {{"keepdim", false}};
  auto k3 = t.call("aten.sum.dim_IntList", {x, A::list({0})});
  t[k3].kwargs = {{"keepdim", true}};
  auto o = t.call("aten.neg.default", {x});
  auto o2 = t.call("aten.abs.default", {x});
  output_via_sink(t, {l, tu, l2, k1, k2, k3, o, o2});
  Graph g = t.build();
  std::vector<NodeId> r;
  common_subexpression_elimination(g, r, kNewest);
  EXPECT_EQ(r[tu.id], tu.id);
  EXPECT_EQ(r[l2.id], l.id);
  EXPECT_EQ(r[k2.id], k2.id);
  EXPECT_EQ(r[k3.id], k1.id);
  EXPECT_EQ(r[o2.id], o2.id);
}

TEST(PrepareCse, RandomOpsAndEmptyAreNeverMerged) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto r1 = t.call("aten.rand_like.default", {x});
  auto r2 = t.call("aten.rand_like.default", {x});
  auto e1 = t.call("aten.empty.memory_format", {A::list({4})});
  auto e2 = t.call("aten.empty.memory_format", {A::list({4})});
  auto d1 = t.call_multi("aten.native_dropout.default", {x, 0.5, true}, {{4}, {4}});
  auto d2 = t.call_multi("aten.native_dropout.default", {x, 0.5, true}, {{4}, {4}});
  auto s = t.call("aten.add.Tensor", {r1, r2});
  auto s2 = t.call("aten.add.Tensor", {e1, e2});
  auto g1 = t.getitem(d1, 0);
  auto g2 = t.getitem(d2, 0);
  output_via_sink(t, {s, s2, g1, g2});
  Graph g = t.build();
  std::vector<NodeId> r;
  common_subexpression_elimination(g, r, kNewest);
  EXPECT_EQ(r[r2.id], r2.id);
  EXPECT_EQ(r[e2.id], e2.id);
  EXPECT_EQ(r[d2.id], d2.id);
  EXPECT_EQ(r[g2.id], g2.id);
}

TEST(PrepareCse, ImpureNodesNeverMergeFrom214) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  // randn_like is random but not in compile_utils.rand_ops.
  auto r1 = t.call("aten.randn_like.default", {x});
  auto r2 = t.call("aten.randn_like.default", {x});
  auto p1 = t.call("aten.neg.default", {x}, {4}, "printer");
  auto p2 = t.call("aten.neg.default", {x}, {4}, "printer_1");
  t[p1].flags |= kFlagImpure;  // a side effect, as the exporter records it
  t[p2].flags |= kFlagImpure;
  output_via_sink(t, {r1, r2, p1, p2});
  Graph g = t.build();
  std::vector<NodeId> r;
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 13}));
  EXPECT_EQ(r[r2.id], r1.id);
  EXPECT_EQ(r[p2.id], p1.id);
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 14}));
  EXPECT_EQ(r[r2.id], r2.id);
  EXPECT_EQ(r[p2.id], p2.id);
}

TEST(PrepareCse, StreamContextsSeparateEqualNodesFrom214) {
  // sin four times: on the default stream, on stream 1, on the default
  // stream, on stream 1.
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto s0 = t.call("aten.sin.default", {x});
  auto s1 = t.call("aten.sin.default", {x});
  auto s2 = t.call("aten.sin.default", {x});
  auto s3 = t.call("aten.sin.default", {x});
  t[s1].custom_context = "[1,null,null]";
  t[s3].custom_context = "[1,null,null]";
  output_via_sink(t, {s0, s1, s2, s3});
  Graph g = t.build();
  std::vector<NodeId> r;
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 13}));
  EXPECT_EQ(r[s1.id], s0.id);
  EXPECT_EQ(r[s3.id], s0.id);
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 14}));
  EXPECT_EQ(r[s1.id], s1.id);
  EXPECT_EQ(r[s2.id], s0.id);
  // As torch: the context is in the token, not the hash; s3 finds s0 and
  // is kept, s1 never became a node to merge into.
  EXPECT_EQ(r[s3.id], s3.id);
}

TEST(PrepareCse, FunctionalWrapperBasesNeverMergeFrom214) {
  // Pairs of equal factory calls, each call a buffer a functional wrapper
  // mutates: auto_functionalized_v2 (_all_bases), auto_functionalized (the
  // wrapped op's schema names the kwarg), triton_kernel_wrapper_functional
  // (tensors_to_clone names an entry of kwargs["kwargs"]).
  TestGraph t;
  t.op("mylib.add_into.default").mutable_args = {"buf"};
  auto x = t.placeholder("primals_1");
  const A target = A::str_like(ArgKind::kTarget, "mylib.add_into.default");
  std::vector<Ref> bufs;
  for (int i = 0; i < 6; ++i) bufs.push_back(t.call("aten.ones.default", {A::list({4})}));
  std::vector<A> uses;
  for (int i = 0; i < 2; ++i) {
    auto v2 = t.call_multi("higher_order.auto_functionalized_v2", {target}, {{4}});
    t[v2].kwargs = {{"x", x}, {"_all_bases", A::list({bufs[i]})}};
    auto v1 = t.call_multi("higher_order.auto_functionalized", {target}, {{4}});
    t[v1].kwargs = {{"buf", bufs[2 + i]}, {"x", x}};
    auto tr = t.call_multi("higher_order.triton_kernel_wrapper_functional", {}, {{4}});
    t[tr].kwargs = {{"kernel_idx", 0},
                    {"kwargs", A::container(ArgKind::kDict, {"buf", bufs[4 + i], "x", x})},
                    {"tensors_to_clone", A::list({"buf"})}};
    for (Ref r : {v2, v1, tr}) uses.push_back(t.getitem(r, 0));
  }
  output_via_sink(t, uses);
  Graph g = t.build();
  std::vector<NodeId> r;
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 13}));
  for (int i = 1; i < 6; ++i) EXPECT_EQ(r[bufs[i].id], bufs[0].id) << i;
  common_subexpression_elimination(g, r, TorchBehavior::of({2, 14}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r[bufs[i].id], bufs[i].id) << i;
}

TEST(PrepareCse, NodesAliasingOutputsAreKept) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a1 = t.call("aten.relu.default", {x});
  auto a2 = t.call("aten.relu.default", {x});  // both returned: distinct outputs
  auto v1 = t.call("aten.neg.default", {x});
  auto v2 = t.call("aten.neg.default", {x});
  auto w = t.call("aten.view.default", {v2, A::list({4})});
  t.alias(w, v2);  // v2 aliases the returned w
  auto u = t.call("aten.add.Tensor", {v1, v2});
  t.output({a1, a2, w, u});
  Graph g = t.build();
  std::vector<NodeId> r;
  common_subexpression_elimination(g, r, kNewest);
  EXPECT_EQ(r[a2.id], a2.id);
  EXPECT_EQ(r[v2.id], v2.id);
}

TEST(PrepareCse, MutationRegionsSeparateEqualNodes) {
  TestGraph t;
  auto y = t.placeholder("primals_1");
  auto b1 = t.call("aten.relu.default", {y});
  auto mut = t.call("aten.add_.Tensor", {y, 1});  // starts region 1
  auto b2 = t.call("aten.relu.default", {y});     // kept: another region
  auto b3 = t.call("aten.relu.default", {y});     // merges into b2, not b1
  auto s = t.call("aten.stack.default", {A::list({b1, b2, b3})});
  t.output({s, mut});
  Graph g = t.build();
  std::vector<NodeId> r;
  Graph c = common_subexpression_elimination(g, r, kNewest);
  EXPECT_EQ(r[b1.id], b1.id);
  EXPECT_EQ(r[b2.id], b2.id);
  EXPECT_EQ(r[b3.id], b2.id);
  EXPECT_EQ(c.size(), g.size() - 1);
}

TEST(PrepareCse, MutationOpByNameAndOutKwarg) {
  EXPECT_TRUE(mutation_name_match("add_"));
  EXPECT_TRUE(mutation_name_match("resize_storage_bytes_.default"));
  EXPECT_TRUE(mutation_name_match("set_"));
  EXPECT_TRUE(mutation_name_match("manual_seed"));
  EXPECT_TRUE(mutation_name_match("seed"));
  EXPECT_TRUE(mutation_name_match("_enter_autocast"));
  EXPECT_TRUE(mutation_name_match("exit"));
  EXPECT_FALSE(mutation_name_match("__and__"));
  EXPECT_FALSE(mutation_name_match("setitem"));
  EXPECT_FALSE(mutation_name_match("sym_float"));
  EXPECT_FALSE(mutation_name_match("getitem"));
  EXPECT_FALSE(mutation_name_match("foo__"));
  EXPECT_FALSE(mutation_name_match("__set__"));

  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto buf = t.placeholder("primals_2");
  // For an OpOverload only the schema counts; for other callables the
  // name, then a non-None "out" kwarg.
  auto ov = t.call("mylib.fill.default", {x});
  t[ov].kwargs = {{"out", buf}};
  auto o = t.call("torch.my_fill", {x});
  t[o].kwargs = {{"out", buf}};
  auto n = t.call("torch.my_fill", {x}, {4}, "no_out");
  t[n].kwargs = {{"out", nullptr}};
  auto s = t.call("operator.setitem", {x, 0, 1});
  auto st = t.call("torch._C._set_grad_enabled", {false});
  t.output({ov, o, n, s, st});
  Graph g = t.build();
  EXPECT_FALSE(is_mutation_op(g, ov.id));
  EXPECT_TRUE(is_mutation_op(g, o.id));
  EXPECT_FALSE(is_mutation_op(g, n.id));
  EXPECT_FALSE(is_mutation_op(g, s.id));
  EXPECT_TRUE(is_mutation_op(g, st.id));
}

TEST(PrepareCse, PartitionKeyKeepsBackwardValuesApartFromForwardOnlyOnes) {
  // The forward computes x @ w for a forward-only output; the backward
  // computes it again (a custom Function's backward, say).
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto w = t.placeholder("primals_2");
  auto tan = t.placeholder("tangents_1");
  auto mm = t.call("aten.mm.default", {x, w});
  auto side = t.call("aten.mul.Tensor", {mm, 2});
  auto sin = t.call("aten.sin.default", {x});
  auto mm_bw = t.call("aten.mm.default", {x, w});
  auto cos = t.call("aten.cos.default", {x});
  auto grad = t.call("aten.mul.Tensor", {tan, cos});
  auto add = t.call("aten.add.Tensor", {grad, mm_bw});
  t.output({sin, side, add});
  Graph g = t.build();

  const std::vector<uint8_t> needed = backward_dependencies(g, 2);
  EXPECT_FALSE(needed[mm.id]);
  EXPECT_FALSE(needed[side.id]);
  EXPECT_TRUE(needed[mm_bw.id]);
  EXPECT_TRUE(needed[x.id] && needed[w.id] && needed[tan.id] && needed[add.id]);

  // 2.13 merges the backward's mm into the forward-only one; 2.14 on, not.
  EXPECT_EQ(prepare_for_min_cut(g, 2, as_release({2, 13})).survivor[mm_bw.id], mm.id);
  EXPECT_EQ(prepare_for_min_cut(g, 2, as_release({2, 14})).survivor[mm_bw.id], mm_bw.id);
  // Two nodes with the same key still merge.
  std::vector<NodeId> r;
  std::vector<uint8_t> all_needed(g.size(), 1);
  common_subexpression_elimination(g, r, kNewest, all_needed);
  EXPECT_EQ(r[mm_bw.id], mm.id);
}

// --- recompute-tag passes ---------------------------------------------------------

TEST(PrepareTags, MustRecomputePredicates) {
  Node n;
  n.recompute = RecomputePolicy::kPreferRecompute;
  EXPECT_TRUE(must_recompute(n));
  n.recompute = RecomputePolicy::kMustRecompute;
  EXPECT_TRUE(must_recompute(n));
  n.recompute = RecomputePolicy::kPreferSave;
  EXPECT_FALSE(must_recompute(n));

  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a = t.call("aten.relu.default", {x});
  auto r = t.call("aten.rand_like.default", {x});
  t.output({a, r});
  EXPECT_FALSE(has_recomputable_ops(t.build()));
  t.checkpoint(a, RecomputePolicy::kPreferRecompute, 0);
  EXPECT_TRUE(has_recomputable_ops(t.build()));
  EXPECT_FALSE(has_recomputable_rng_ops(t.build(), TorchBehavior{}));
  t.checkpoint(r, RecomputePolicy::kMustRecompute, 0);
  EXPECT_TRUE(has_recomputable_rng_ops(t.build(), TorchBehavior{}));
}

// An attention op (seeded, with a dropout_p argument) tagged for recompute,
// with dropout_p given as `dropout` (absent: the schema default 0.0).
Graph checkpointed_attention(std::optional<testing::A> dropout, bool as_kwarg = false) {
  TestGraph t;
  auto q = t.placeholder("primals_1");
  const std::string op = "aten._scaled_dot_product_flash_attention_for_cpu.default";
  std::vector<testing::A> args = {q, q, q};
  if (dropout && !as_kwarg) args.push_back(*dropout);
  auto sdpa = t.call_multi(op, args, {{4}, {4}});
  if (dropout && as_kwarg) t[sdpa].kwargs = {{"dropout_p", *dropout}};
  t.op(op).tags = kTagNondeterministicSeeded;
  t.op(op).dropout_p_index = 3;
  t.op(op).dropout_p_default = 0.0;
  t.checkpoint(sdpa, RecomputePolicy::kMustRecompute, 0);
  auto out = t.getitem(sdpa, 0);
  t.output({out});
  return t.build();
}

TEST(PrepareTags, AttentionWithStaticZeroDropoutIsRandomOnlyBefore214) {
  const TorchBehavior t213 = TorchBehavior::of({2, 13});
  const TorchBehavior t214 = TorchBehavior::of({2, 14});
  // 2.13: the seeded tag decides. 2.14: dropout_p statically 0 (positional,
  // keyword, the schema's default; 0, 0.0, -0.0, False) is not random.
  for (const std::optional<testing::A>& zero :
       {std::optional<testing::A>{}, std::optional<testing::A>{0.0}, std::optional<testing::A>{-0.0},
        std::optional<testing::A>{0}, std::optional<testing::A>{false}}) {
    for (bool kw : {false, true}) {
      const Graph g = checkpointed_attention(zero, kw);
      EXPECT_TRUE(has_recomputable_rng_ops(g, t213));
      EXPECT_FALSE(has_recomputable_rng_ops(g, t214));
    }
  }
  // A nonzero constant, or a node (a SymFloat input), is random in both.
  EXPECT_TRUE(has_recomputable_rng_ops(checkpointed_attention(testing::A{0.1}), t214));
  TestGraph t;
  auto q = t.placeholder("primals_1");
  auto p = t.call_sym("aten.sym_size.int", {q, 0}, "s0", 4);
  const std::string op = "aten._scaled_dot_product_flash_attention_for_cpu.default";
  auto sdpa = t.call_multi(op, {q, q, q, p}, {{4}, {4}});
  t.op(op).tags = kTagNondeterministicSeeded;
  t.op(op).dropout_p_index = 3;
  t.op(op).dropout_p_default = 0.0;
  t.checkpoint(sdpa, RecomputePolicy::kMustRecompute, 0);
  t.output({t.getitem(sdpa, 0)});
  EXPECT_TRUE(has_recomputable_rng_ops(t.build(), t214));
}

TEST(PrepareTags, AttentionWithoutADropoutDefaultIsRandom) {
  // _efficient_attention_forward's dropout_p has no default: absent, the op
  // stays random; an op without the dropout_p fact is judged by its tag.
  TestGraph t;
  auto q = t.placeholder("primals_1");
  const std::string op = "aten._efficient_attention_forward.default";
  auto a = t.call_multi(op, {q, q, q}, {{4}, {4}});
  t.op(op).tags = kTagNondeterministicSeeded;
  t.op(op).dropout_p_index = 8;
  t.checkpoint(a, RecomputePolicy::kMustRecompute, 0);
  t.output({t.getitem(a, 0)});
  EXPECT_TRUE(has_recomputable_rng_ops(t.build(), TorchBehavior::of({2, 14})));
}

TEST(PrepareTags, CleanupSavesTheBoundaryOfConsecutiveRegions) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a = t.call("aten.relu.default", {x});
  auto b = t.call("aten.neg.default", {a});    // same region as a
  auto c = t.call("aten.sin.default", {b});    // next region: b is the boundary
  auto d = t.call("aten.cos.default", {c});    // recompute, but without ac_graph_id
  t.checkpoint(a, RecomputePolicy::kPreferRecompute, 1);
  t.checkpoint(b, RecomputePolicy::kPreferRecompute, 1);
  t.checkpoint(c, RecomputePolicy::kPreferRecompute, 2);
  t.checkpoint(d, RecomputePolicy::kPreferRecompute);
  t.output({d});
  Graph g = t.build();
  std::vector<NodeId> forced;
  cleanup_recompute_tags(g, false, forced);
  EXPECT_EQ(g.node(a.id).recompute, RecomputePolicy::kPreferRecompute);
  EXPECT_EQ(g.node(b.id).recompute, RecomputePolicy::kMustSave);
  EXPECT_EQ(g.node(c.id).recompute, RecomputePolicy::kPreferRecompute);
  EXPECT_EQ(forced, std::vector<NodeId>{b.id});
}

TEST(PrepareTags, CleanupSavesHookedRegionOutputs) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a = t.call("aten.relu.default", {x});
  auto b = t.call("aten.neg.default", {a});  // region output with a hook
  auto c = t.call("aten.sin.default", {b});
  t.checkpoint(a, RecomputePolicy::kPreferRecompute, 1);
  t.checkpoint(b, RecomputePolicy::kPreferRecompute, 1);
  t[a].flags |= kFlagBackwardHook;  // has a recompute user: stays
  t[b].flags |= kFlagBackwardHook;
  t.output({c});
  Graph g = t.build();
  std::vector<NodeId> forced;
  cleanup_recompute_tags(g, false, forced);
  EXPECT_EQ(g.node(a.id).recompute, RecomputePolicy::kPreferRecompute);
  EXPECT_EQ(g.node(b.id).recompute, RecomputePolicy::kMustSave);
  EXPECT_EQ(forced, std::vector<NodeId>{b.id});
}

TEST(PrepareTags, CleanupSavesRegionInputsOnlyForDefaultPartition) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto in = t.call("aten.cos.default", {x});
  auto multi = t.call_multi("aten.var_mean.correction", {x}, {{1}, {1}});
  auto gi = t.getitem(multi, 0);
  auto a = t.call("aten.relu.default", {in});
  auto b = t.call("aten.add.Tensor", {a, gi});
  t.checkpoint(a, RecomputePolicy::kPreferRecompute, 1);
  t.checkpoint(b, RecomputePolicy::kPreferRecompute, 1);
  t.checkpoint(multi, RecomputePolicy::kPreferRecompute, 1);
  t.output({b});
  Graph g = t.build();
  Graph g_min = g;
  std::vector<NodeId> forced;
  cleanup_recompute_tags(g_min, false, forced);
  EXPECT_TRUE(forced.empty());
  cleanup_recompute_tags(g, true, forced);
  // x feeds the recomputed `multi`, `in` feeds `a`.
  EXPECT_EQ(forced, (std::vector<NodeId>{x.id, in.id}));
  EXPECT_EQ(g.node(in.id).recompute, RecomputePolicy::kMustSave);
  // The getitem of a multi-output node inside a region is exempt.
  EXPECT_EQ(g.node(gi.id).recompute, RecomputePolicy::kNone);
}

TEST(PrepareTags, ForcedIdsAreInputGraphIds) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  t.call("aten.sin.default", {x}, {4}, "dead");
  auto ar = t.call("_c10d_functional.all_reduce.default", {x, "sum", "0"});
  t.output({ar});
  Graph g = eliminate_dead_code(t.build(), Impurity{});
  std::vector<NodeId> forced;
  force_save_collectives(g, kNewest, forced);
  EXPECT_EQ(forced, std::vector<NodeId>{ar.id});
  EXPECT_EQ(g.node(g.find("all_reduce")).recompute, RecomputePolicy::kMustSave);
  force_save_collectives(g, kNewest, forced);  // already MUST_SAVE: not listed again
  EXPECT_EQ(forced.size(), 1u);
}

TEST(PrepareTags, CollectivesUnlessMarkedRecompute) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a = t.call("_c10d_functional.all_reduce.default", {x, "sum", "0"});
  auto b = t.call("_c10d_functional.all_gather_into_tensor.default", {x, 2, "0"});
  auto w = t.call("_c10d_functional.wait_tensor.default", {a});
  auto other = t.call("c10d.allreduce_.default", {x}, {4}, "not_functional");
  t.checkpoint(b, RecomputePolicy::kPreferRecompute);
  t.output({w, b, other});
  Graph g = t.build();
  std::vector<NodeId> forced;
  force_save_collectives(g, kNewest, forced);
  EXPECT_EQ(forced, (std::vector<NodeId>{a.id, w.id}));
  EXPECT_EQ(g.node(b.id).recompute, RecomputePolicy::kPreferRecompute);
  EXPECT_EQ(g.node(other.id).recompute, RecomputePolicy::kNone);
}

TEST(PrepareTags, MultiOutputCollectivesSaveTheirLeafGetitemsFrom215) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto c = t.call_multi("_c10d_functional.all_gather_into_tensor_coalesced.default",
                        {A::list({x, x}), 2, "0"}, {{8}, {8}});
  auto g0 = t.getitem(c, 0);
  auto g1 = t.getitem(c, 1);
  t.checkpoint(g1, RecomputePolicy::kMustRecompute);  // overwritten: only the collective counts
  auto w0 = t.call("_c10d_functional.wait_tensor.default", {g0});
  auto w1 = t.call("_c10d_functional.wait_tensor.default", {g1});
  // A list-valued collective nobody takes apart is not saved (2.15).
  auto unused = t.call_multi("_c10d_functional.all_gather_into_tensor_coalesced.default",
                             {A::list({x}), 2, "0"}, {{8}}, "unused");
  t.output({w0, w1, unused});
  const Graph built = t.build();

  Graph g = built;
  std::vector<NodeId> forced;
  force_save_collectives(g, TorchBehavior::of({2, 14}), forced);
  EXPECT_EQ(forced, (std::vector<NodeId>{c.id, w0.id, w1.id, unused.id}));
  EXPECT_EQ(g.node(g1.id).recompute, RecomputePolicy::kMustRecompute);

  g = built;
  forced.clear();
  force_save_collectives(g, TorchBehavior::of({2, 15}), forced);
  EXPECT_EQ(forced, (std::vector<NodeId>{g0.id, g1.id, w0.id, w1.id}));
  EXPECT_EQ(g.node(c.id).recompute, RecomputePolicy::kNone);
  EXPECT_EQ(g.node(g1.id).recompute, RecomputePolicy::kMustSave);
  EXPECT_EQ(g.node(unused.id).recompute, RecomputePolicy::kNone);
}

TEST(PrepareTags, EffectfulOpsSaveTheirLeafGetitems) {
  TestGraph t;
  auto tok = t.placeholder("primals_1");
  auto x = t.placeholder("primals_2");
  auto we = t.call_multi("higher_order.with_effects", {tok, A::str_like(ArgKind::kTarget, "mylib.log.default"), x},
                         {{0}, {4}, {4}});
  auto g0 = t.getitem(we, 0);
  auto g1 = t.call("operator.getitem", {we, 1}, {4}, "getitem");
  t[g1].value = ValueKind::kSequence;  // a nested tuple: not saved itself
  auto g10 = t.getitem(g1, 0);
  auto g11 = t.getitem(g1, 1);
  auto other = t.call("aten.relu.default", {we});  // not a getitem
  auto skipped = t.call_multi("higher_order.with_effects", {tok, x}, {{0}, {4}}, "bw_effects");
  t[skipped].tag = PartitionerTag::kIsBackward;
  auto sg = t.getitem(skipped, 1);
  t.output({g0, g10, g11, other, sg});
  Graph g = t.build();
  std::vector<NodeId> forced;
  force_save_effectful_ops(g, kNewest, forced);
  // Depth first: a getitem's own getitems are marked before it would be.
  EXPECT_EQ(forced, (std::vector<NodeId>{g0.id, g10.id, g11.id}));
  EXPECT_EQ(g.node(g1.id).recompute, RecomputePolicy::kNone);
  EXPECT_EQ(g.node(sg.id).recompute, RecomputePolicy::kNone);
  EXPECT_EQ(g.node(other.id).recompute, RecomputePolicy::kNone);
}

TEST(PrepareTags, EffectfulRecomputePoliciesUntil214AndFrom215) {
  TestGraph t;
  auto tok = t.placeholder("primals_1");
  auto x = t.placeholder("primals_2");
  auto we = t.call_multi("higher_order.with_effects",
                         {tok, A::str_like(ArgKind::kTarget, "mylib.log.default"), x},
                         {{0}, {4}});
  auto g0 = t.getitem(we, 0);
  auto g1 = t.getitem(we, 1);
  t.output({g0, g1});
  for (RecomputePolicy p : {RecomputePolicy::kPreferRecompute, RecomputePolicy::kMustRecompute}) {
    t.checkpoint(we, p);
    const Graph built = t.build();
    // Up to 2.14 either recompute policy exempts the op.
    Graph g = built;
    std::vector<NodeId> forced;
    force_save_effectful_ops(g, TorchBehavior::of({2, 14}), forced);
    EXPECT_TRUE(forced.empty()) << recompute_policy_name(p);
    // 2.15: PREFER_RECOMPUTE saves the outputs; MUST_RECOMPUTE is torch's error.
    g = built;
    if (p == RecomputePolicy::kPreferRecompute) {
      force_save_effectful_ops(g, TorchBehavior::of({2, 15}), forced);
      EXPECT_EQ(forced, (std::vector<NodeId>{g0.id, g1.id}));
      continue;
    }
    try {
      force_save_effectful_ops(g, TorchBehavior::of({2, 15}), forced);
      ADD_FAILURE() << "MUST_RECOMPUTE on an effectful op was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
      EXPECT_STREQ(e.what(),
                   "AOTAutograd does not support MUST_RECOMPUTE for effectful operations because "
                   "forward effects cannot join the backward effect-token chain.");
    }
  }
}

TEST(PrepareTags, BackwardMutationSourceIsSaved) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto q = t.placeholder("primals_2");
  auto tan = t.placeholder("tangents_1");
  auto a = t.call("aten.mul.Tensor", {p, 2});
  auto b = t.call("aten.mul.Tensor", {tan, 3});
  auto c = t.call("aten.mul.Tensor", {q, 4});
  auto cq = t.call("aten.copy_.default", {q, c});  // forward mutation, no bw one
  auto cf = t.call("aten.copy_.default", {p, a});
  auto cb = t.call("aten.copy_.default", {p, b});
  t[cq].tag = PartitionerTag::kMustBeInForward;
  t[cf].tag = PartitionerTag::kMustBeInForward;
  t[cb].tag = PartitionerTag::kMustBeInBackward;
  t.output({cq, cf, cb});
  Graph g = t.build();
  std::vector<NodeId> forced;
  force_save_bw_mutation_src(g, forced);
  EXPECT_EQ(forced, std::vector<NodeId>{a.id});
  EXPECT_EQ(g.node(c.id).recompute, RecomputePolicy::kNone);
}

TEST(PrepareTags, BackwardMutationWalkStopsAtFirstNonCopy) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto tan = t.placeholder("tangents_1");
  auto a = t.call("aten.mul.Tensor", {p, 2});
  auto cf = t.call("aten.copy_.default", {p, a});
  auto b = t.call("aten.mul.Tensor", {tan, 3});  // breaks the epilogue walk
  auto cb = t.call("aten.copy_.default", {p, b});
  t[cf].tag = PartitionerTag::kMustBeInForward;
  t[cb].tag = PartitionerTag::kMustBeInBackward;
  t.output({cf, cb});
  Graph g = t.build();
  std::vector<NodeId> forced;
  force_save_bw_mutation_src(g, forced);
  EXPECT_TRUE(forced.empty());
}

// --- is_functional_graph ---------------------------------------------------------

TEST(PrepareFunctional, ShallowCopyDataIntoAnInputIsAllowedFrom214) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto x = t.placeholder("primals_2");
  auto sin = t.call("aten.sin.default", {x});
  auto copy = t.call("aten.copy_.default", {p, sin});
  auto data = t.call("aten.shallow_copy_data_.default", {p, sin});
  t.output({copy, data});
  Graph g = t.build();
  EXPECT_TRUE(g.op(data.id)->is_mutable);
  EXPECT_FALSE(is_functional_graph(g, TorchBehavior::of({2, 13})));
  EXPECT_TRUE(is_functional_graph(g, TorchBehavior::of({2, 14})));

  // Into anything but an input, it is not functional in any release.
  TestGraph u;
  auto y = u.placeholder("primals_1");
  auto dst = u.call("aten.cos.default", {y});
  auto src = u.call("aten.sin.default", {y});
  auto bad = u.call("aten.shallow_copy_data_.default", {dst, src});
  u.output({bad});
  EXPECT_FALSE(is_functional_graph(u.build(), TorchBehavior::of({2, 14})));
}

// --- prologues ------------------------------------------------------------------

TEST(PreparePrologue, MinCutRunsDceCseAndTags) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  t.call("aten.cos.default", {x}, {4}, "dead");
  auto a1 = t.call("aten.relu.default", {x});
  auto a2 = t.call("aten.relu.default", {x});
  auto s = t.call("aten.add.Tensor", {a1, a2});
  auto ar = t.call("_c10d_functional.all_reduce.default", {s, "sum", "0"});
  t.output({ar});
  Graph g = t.build();
  PartitionOptions o;
  Prepared p = prepare_for_min_cut(g, 1, o);
  EXPECT_FALSE(has(p.graph, "dead"));
  EXPECT_FALSE(has(p.graph, "relu_1"));
  EXPECT_EQ(p.survivor[g.find("dead")], kNoNode);
  EXPECT_EQ(p.survivor[a2.id], a1.id);
  EXPECT_EQ(p.survivor[a1.id], a1.id);
  EXPECT_EQ(p.forced_must_save, std::vector<NodeId>{ar.id});
  for (const Node& n : p.graph.nodes()) EXPECT_NE(n.origin, kNoNode);

  o.cse = false;
  o.unsafe_allow_optimization_of_collectives = true;
  Prepared q = prepare_for_min_cut(g, 1, o);
  EXPECT_TRUE(has(q.graph, "relu_1"));
  EXPECT_EQ(q.survivor[a2.id], a2.id);
  EXPECT_TRUE(q.forced_must_save.empty());
}

TEST(PreparePrologue, MinCutCleansTagsAsNonDefault) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto in = t.call("aten.cos.default", {x});
  auto a = t.call("aten.relu.default", {in});
  auto b = t.call("aten.add.Tensor", {a, in});
  t.checkpoint(a, RecomputePolicy::kPreferRecompute, 1);
  t.checkpoint(b, RecomputePolicy::kPreferRecompute, 2);
  t.output({b});
  Graph g = t.build();
  PartitionOptions o;
  Prepared p = prepare_for_min_cut(g, 1, o);
  EXPECT_EQ(p.forced_must_save, std::vector<NodeId>{a.id});
  prepare_for_default(p, o);  // region input `in` is saved by the default prologue
  EXPECT_EQ(p.forced_must_save, (std::vector<NodeId>{a.id, in.id}));
}

TEST(PreparePrologue, DceHonorsDceImpureRandom) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  t.call("aten.rand_like.default", {x});
  t.output({x});
  Graph g = t.build();
  PartitionOptions o;
  EXPECT_TRUE(has(prepare_for_min_cut(g, 1, o).graph, "rand_like"));
  o.dce_impure_random = false;
  EXPECT_FALSE(has(prepare_for_min_cut(g, 1, o).graph, "rand_like"));
}

}  // namespace
}  // namespace remat
