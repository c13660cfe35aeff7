// tests/cpp/test_analyze.cc — stage 2 (src/analyze): node predicates,
// _size_of, output splitting, classify_nodes and dist_from_bw.
#include <gtest/gtest.h>

#include "analyze/analyze.h"
#include "graph_fixture.h"
#include "remat/error.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;

std::vector<NodeId> ids(std::initializer_list<Ref> refs) {
  std::vector<NodeId> out;
  for (Ref r : refs) out.push_back(r.id);
  return out;
}

std::vector<NodeId> flagged(const std::vector<uint8_t>& flags) {
  std::vector<NodeId> out;
  for (NodeId i = 0; i < flags.size(); ++i) {
    if (flags[i]) out.push_back(i);
  }
  return out;
}

TEST(AnalyzePredicates, PlaceholderRolesFromTarget) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto tg = t.placeholder("tangents_1");
  auto fs = t.placeholder("fwd_seed");
  auto fo = t.placeholder("fwd_base_offset");
  auto bs = t.placeholder("bwd_seed");
  auto bo = t.placeholder("bwd_base_offset");
  auto bstate = t.placeholder("primals_2");
  t[bstate].value = ValueKind::kBackwardState;
  auto r = t.call("aten.relu.default", {p});
  t.output({r});
  Graph g = t.build();
  EXPECT_TRUE(is_primal(g, p.id));
  EXPECT_TRUE(is_primal(g, bstate.id));
  EXPECT_TRUE(is_backward_state(g, bstate.id));
  EXPECT_FALSE(is_backward_state(g, p.id));
  for (Ref x : {tg, fs, fo, bs, bo}) EXPECT_FALSE(is_primal(g, x.id));
  EXPECT_TRUE(is_tangent(g, tg.id));
  EXPECT_TRUE(is_fwd_seed_offset(g, fs.id));
  EXPECT_TRUE(is_fwd_seed_offset(g, fo.id));
  EXPECT_TRUE(is_bwd_seed_offset(g, bs.id));
  EXPECT_TRUE(is_bwd_seed_offset(g, bo.id));
  EXPECT_FALSE(is_fwd_seed_offset(g, bs.id));
  // Not placeholders: never a role, whatever the name.
  EXPECT_FALSE(is_primal(g, r.id));
  EXPECT_FALSE(is_tangent(g, r.id));
}

TEST(AnalyzePredicates, TheTargetNotTheNameDecides) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  t[p].target = "tangents_7";  // FX target differs from the node name
  t.output({p});
  Graph g = t.build();
  EXPECT_TRUE(is_tangent(g, p.id));
  EXPECT_FALSE(is_primal(g, p.id));
}

TEST(AnalyzePredicates, SymOpaqueAndAssertOnlySymbool) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto s = t.call_sym("aten.sym_size.int", {p, 0}, "s0", 4);
  auto b = t.call_sym("operator.eq", {s, 4}, "Eq(s0, 4)", 1);
  t[b].value = ValueKind::kSymBool;
  auto as = t.call("aten._assert_scalar.default", {b, "msg"});
  t[as].value = ValueKind::kNone;
  auto b2 = t.call_sym("operator.ne", {s, 4}, "Ne(s0, 4)", 0);
  t[b2].value = ValueKind::kSymBool;
  auto user = t.call("aten.mul.Tensor", {p, b2});
  auto unused = t.call_sym("operator.gt", {s, 4}, "s0 > 4", 0);
  t[unused].value = ValueKind::kSymBool;
  auto obj = t.placeholder("primals_2");
  t[obj].value = ValueKind::kScriptObject;
  auto pg = t.placeholder("primals_3");
  t[pg].value = ValueKind::kOpaque;
  t.output({user, unused, obj, pg});
  Graph g = t.build();
  EXPECT_TRUE(is_sym_node(g, s.id));
  EXPECT_TRUE(is_sym_node(g, b.id));
  EXPECT_FALSE(is_sym_node(g, p.id));
  EXPECT_TRUE(is_assert_only_symbool(g, b.id));
  EXPECT_FALSE(is_assert_only_symbool(g, b2.id));     // used by a mul
  EXPECT_FALSE(is_assert_only_symbool(g, unused.id)); // used only by the output
  EXPECT_FALSE(is_assert_only_symbool(g, s.id));      // not a SymBool
  EXPECT_TRUE(is_opaque_node(g, obj.id, TorchBehavior{}));
  EXPECT_TRUE(is_opaque_node(g, pg.id, TorchBehavior{}));
  EXPECT_FALSE(is_opaque_node(g, p.id, TorchBehavior{}));
}

TEST(AnalyzePredicates, OpaqueValuesExistFrom212AndGeneratorsFrom213) {
  TestGraph t;
  auto obj = t.placeholder("primals_1");
  t[obj].value = ValueKind::kScriptObject;
  auto pg = t.placeholder("primals_2");
  t[pg].value = ValueKind::kOpaque;
  auto gen = t.placeholder("primals_3");
  t[gen].value = ValueKind::kGenerator;
  t.output({obj, pg, gen});
  Graph g = t.build();
  const TorchBehavior t211 = TorchBehavior::of({2, 11});
  const TorchBehavior t212 = TorchBehavior::of({2, 12});
  const TorchBehavior t213 = TorchBehavior::of({2, 13});
  // 2.11 has no opaque values at all.
  for (Ref r : {obj, pg, gen}) EXPECT_FALSE(is_opaque_node(g, r.id, t211));
  // 2.12: script objects and registered opaque values; not generators.
  EXPECT_TRUE(is_opaque_node(g, obj.id, t212));
  EXPECT_TRUE(is_opaque_node(g, pg.id, t212));
  EXPECT_FALSE(is_opaque_node(g, gen.id, t212));
  // 2.13 registers torch.Generator as an opaque type.
  for (Ref r : {obj, pg, gen}) EXPECT_TRUE(is_opaque_node(g, r.id, t213));
}

TEST(AnalyzePredicates, MustBeInForwardOrBackward) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto m = t.call("aten.add_.Tensor", {p, 1});         // mutable: forward
  auto mb = t.call("aten.add_.Tensor", {p, 2});        // mutable, is_backward: backward
  t[mb].tag = PartitionerTag::kIsBackward;
  auto mbb = t.call("aten.add_.Tensor", {p, 3});       // must_be_in_backward tag wins
  t[mbb].tag = PartitionerTag::kMustBeInBackward;
  auto f = t.call("aten.relu.default", {p});           // pure, tagged forward
  t[f].tag = PartitionerTag::kMustBeInForward;
  auto pb = t.call("aten.neg.default", {p});           // pure, is_backward: neither
  t[pb].tag = PartitionerTag::kIsBackward;
  auto fn = t.call("torch.my_fill_", {p});             // not an OpOverload: neither
  t.output({m, mb, mbb, f, pb, fn});
  Graph g = t.build();
  EXPECT_TRUE(must_be_in_forward(g, m.id));
  EXPECT_FALSE(must_be_in_backward(g, m.id));
  EXPECT_FALSE(must_be_in_forward(g, mb.id));
  EXPECT_TRUE(must_be_in_backward(g, mb.id));
  EXPECT_FALSE(must_be_in_forward(g, mbb.id));
  EXPECT_TRUE(must_be_in_backward(g, mbb.id));
  EXPECT_TRUE(must_be_in_forward(g, f.id));
  EXPECT_FALSE(must_be_in_forward(g, pb.id));
  EXPECT_FALSE(must_be_in_backward(g, pb.id));
  EXPECT_FALSE(must_be_in_forward(g, fn.id));
}

TEST(AnalyzeSize, TensorsSequencesAndSyms) {
  TestGraph t;
  auto p = t.placeholder("primals_1", {4, 8});
  t[p].tensors[0].dtype = "float16";
  t[p].tensors[0].itemsize = 2;
  auto u = t.placeholder("primals_2", {3});
  t[u].tensors[0].symbolic_numel = true;  // no hint: 4096 elements
  auto multi = t.call_multi("aten.var_mean.correction", {p}, {{4}, {4, 2}});
  auto s = t.call_sym("aten.sym_size.int", {p, 0}, "s0", 4);
  t.output({p, u, multi, s});
  Graph g = t.build();
  PartitionOptions o;
  EXPECT_EQ(size_of(g, p.id, o), 4 * 8 * 2);
  EXPECT_EQ(size_of(g, u.id, o), 4096 * 4);
  EXPECT_EQ(size_of(g, multi.id, o), (4 + 8) * 4);
  EXPECT_EQ(size_of(g, s.id, o), 1);
}

TEST(AnalyzeSize, ScriptObjectsNeedTheEscapeHatch) {
  TestGraph t;
  auto obj = t.placeholder("primals_1");
  t[obj].value = ValueKind::kScriptObject;
  t.output({obj});
  Graph g = t.build();
  PartitionOptions o;
  try {
    size_of(g, obj.id, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("primals_1"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("unsafe_treat_script_objects_as_zero_size"),
              std::string::npos);
  }
  o.unsafe_treat_script_objects_as_zero_size = true;
  EXPECT_EQ(size_of(g, obj.id, o), 0);
}

TEST(AnalyzeSize, ScriptObjectZeroSizeFlagIsReadFrom213) {
  // 2.11 and 2.12 have no unsafe_treat_script_objects_as_zero_size: a script
  // object cannot be sized there, whatever the option says.
  TestGraph t;
  auto obj = t.placeholder("primals_1");
  t[obj].value = ValueKind::kScriptObject;
  t.output({obj});
  Graph g = t.build();
  PartitionOptions o;
  o.unsafe_treat_script_objects_as_zero_size = true;
  o.torch = TorchBehavior::of({2, 12});
  try {
    size_of(g, obj.id, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("primals_1"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("unsafe_treat_script_objects_as_zero_size"),
              std::string::npos);  // no flag to suggest in that release
  }
  o.torch = TorchBehavior::of({2, 13});
  EXPECT_EQ(size_of(g, obj.id, o), 0);
}

TEST(AnalyzeSize, NoReturnOpsCountZeroFrom213OnlyAssertScalarBefore) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto scalar = t.call("aten._assert_scalar.default", {p, "m"});
  t[scalar].value = ValueKind::kMissing;
  t.op("aten._assert_scalar.default").num_returns = 0;
  auto noret = t.call("aten._assert_async.msg", {p, "m"});
  t[noret].value = ValueKind::kMissing;
  t.op("aten._assert_async.msg").num_returns = 0;
  t.output({p});
  Graph g = t.build();
  PartitionOptions o;
  o.torch = TorchBehavior::of({2, 12});
  EXPECT_EQ(size_of(g, scalar.id, o), 0);
  EXPECT_THROW(size_of(g, noret.id, o), Error);
  o.torch = TorchBehavior::of({2, 13});
  EXPECT_EQ(size_of(g, scalar.id, o), 0);
  EXPECT_EQ(size_of(g, noret.id, o), 0);
}

TEST(AnalyzeSize, DeviceValuesCountZeroFrom215) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto dev = t.call("coor.current_device.default", {});
  t[dev].value = ValueKind::kDevice;
  t[dev].flags = 0;
  t[dev].tensors.clear();
  t.output({p, dev});
  Graph g = t.build();
  PartitionOptions o;
  o.torch = TorchBehavior::of({2, 14});
  try {
    size_of(g, dev.id, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("current_device"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("device"), std::string::npos);
  }
  o.torch = TorchBehavior::of({2, 15});
  EXPECT_EQ(size_of(g, dev.id, o), 0);
}

TEST(AnalyzeSize, MissingValIsZeroOnlyForGetAttrAndNoReturnOps) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto ga = t.get_attr("_tensor_constant0");
  auto noret = t.call("aten._assert_async.msg", {p, "m"});
  t[noret].value = ValueKind::kMissing;
  t.op("aten._assert_async.msg").num_returns = 0;
  auto unknown = t.call("aten.relu.default", {p});
  t[unknown].value = ValueKind::kMissing;
  auto none = t.call("aten.neg.default", {p});
  t[none].value = ValueKind::kNone;
  t.output({p, ga, unknown, none});
  Graph g = t.build();
  PartitionOptions o;
  EXPECT_EQ(size_of(g, ga.id, o), 0);
  EXPECT_EQ(size_of(g, noret.id, o), 0);
  try {
    size_of(g, unknown.id, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'relu'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("val"), std::string::npos);
  }
  EXPECT_THROW(size_of(g, none.id, o), Error);
}

TEST(AnalyzeOutputs, LeavesInPreOrderWithNoneAndDictValues) {
  TestGraph t;
  auto a = t.placeholder("primals_1");
  auto b = t.placeholder("primals_2");
  auto c = t.placeholder("tangents_1");
  auto d = t.call("aten.relu.default", {a});
  A dict = A::container(ArgKind::kDict, {"k", c, "j", d});
  t.output({a, A::list({b, nullptr}), dict, nullptr});
  Graph g = t.build();
  OutputLeaves leaves = split_outputs(g, 2);
  EXPECT_EQ(leaves.fwd, ids({a, b}));
  EXPECT_EQ(leaves.bwd, (std::vector<NodeId>{kNoNode, c.id, d.id, kNoNode}));
  // Every leaf keeps the item that holds it: a None leaf is a kNone item.
  ASSERT_EQ(leaves.bwd_args.size(), 4u);
  EXPECT_EQ(g.arg(leaves.bwd_args[0]).kind, ArgKind::kNone);
  EXPECT_EQ(g.arg(leaves.bwd_args[1]).kind, ArgKind::kNode);
  leaves = split_outputs(g, 0);
  EXPECT_TRUE(leaves.fwd.empty());
  EXPECT_EQ(leaves.bwd.size(), 6u);
  EXPECT_EQ(leaves.bwd_args.size(), 6u);
}

// A small joint graph:
//   fw:  a = relu(p1); b = sin(a); out_fw = b;  dead_fw = cos(p1) (fw-dead)
//   bw:  c = mul(tangents_1, a); grad_p2 = neg(p2) (no tangent dependency)
struct Joint {
  TestGraph t;
  Ref p1, p2, seed, tan, a, b, dead_fw, c, grad_p2;
  Joint() {
    seed = t.placeholder("fwd_seed");
    p1 = t.placeholder("primals_1");
    p2 = t.placeholder("primals_2");
    tan = t.placeholder("tangents_1");
    a = t.call("aten.relu.default", {p1});
    b = t.call("aten.sin.default", {a});
    dead_fw = t.call("aten.cos.default", {p1});
    c = t.call("aten.mul.Tensor", {tan, a});
    grad_p2 = t.call("aten.neg.default", {p2});
    auto use_dead = t.call("aten.add.Tensor", {c, dead_fw});
    t.output({b, use_dead, grad_p2});
  }
};

TEST(AnalyzeClassify, SetsOfAJointGraph) {
  Joint j;
  Graph g = j.t.build();
  PartitionOptions o;
  NodeInfo info = classify_nodes(g, {1}, 1, o);
  const NodeId use_dead = g.find("add");
  // Inputs: primals in graph order, then forward seeds.
  EXPECT_EQ(info.inputs, ids({j.p1, j.p2, j.seed}));
  // Forward-only graph: inputs (placeholders always stay) + what reaches b.
  EXPECT_EQ(flagged(info.required_fw), ids({j.seed, j.p1, j.p2, j.a, j.b}));
  EXPECT_EQ(info.required_fw_nodes, ids({j.seed, j.p1, j.p2, j.a, j.b}));
  EXPECT_EQ(info.fw_order[j.seed.id], 0);
  EXPECT_EQ(info.fw_order[j.b.id], 4);
  EXPECT_EQ(info.fw_order[j.c.id], -1);
  // Tangent closure (the output node is a user, as in torch).
  EXPECT_EQ(flagged(info.tangents_closure),
            (std::vector<NodeId>{j.tan.id, j.c.id, use_dead, g.output()}));
  // Backward outputs join required_bw but not the tangent closure.
  EXPECT_EQ(flagged(info.required_bw),
            (std::vector<NodeId>{j.tan.id, j.c.id, j.grad_p2.id, use_dead, g.output()}));
  EXPECT_EQ(info.num_required_bw, 5u);
  EXPECT_EQ(flagged(info.unclaimed), ids({j.dead_fw}));
  // static_lifetime indexes the primals.
  EXPECT_EQ(flagged(info.static_lifetime), ids({j.p2}));
  EXPECT_TRUE(info.is_required_fw(j.a.id));
  EXPECT_TRUE(info.is_required_bw(j.c.id));
}

TEST(AnalyzeClassify, MustBeInBackwardSpreadsToUsers) {
  TestGraph t;
  auto p = t.placeholder("primals_1");
  auto m = t.call("aten.add_.Tensor", {p, 1});
  t[m].tag = PartitionerTag::kIsBackward;
  auto u = t.call("aten.relu.default", {m});
  auto w = t.call("aten.neg.default", {u});
  auto f = t.call("aten.sin.default", {p});
  t.output({f, w});
  Graph g = t.build();
  NodeInfo info = classify_nodes(g, {}, 1, PartitionOptions());
  EXPECT_TRUE(info.is_required_bw(m.id));
  EXPECT_TRUE(info.is_required_bw(u.id));
  EXPECT_TRUE(info.is_required_bw(w.id));
  EXPECT_FALSE(info.is_required_bw(f.id));
  EXPECT_TRUE(info.tangents_closure[w.id]);
}

TEST(AnalyzeClassify, ControlDepsPassesRequiredBackwardOnlyToRequiredDepsFromTorch214) {
  // A backward sync (must be in the backward) carrying sin (forward) and
  // mul (backward) through: torch 2.14 marks getitem(cd, 1) required only
  // if sin is; its getitem of mul, and any other user, always.
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {p1});
  Ref mul = t.call("aten.mul.Tensor", {t1, sin});
  Ref sg = t.get_attr("subgraph_record_event_0");
  Ref cd = t.control_deps({mul}, sg, {sin, mul});
  t[cd].tag = PartitionerTag::kMustBeInBackward;
  Ref of_sin = t.getitem(cd, 1);
  Ref of_mul = t.getitem(cd, 2);
  Ref result = t.getitem(cd, 0);
  Ref add = t.call("aten.add.Tensor", {of_sin, of_mul});
  t.output({A::tuple({sin, add, result})});
  const Graph g = t.build();
  for (TorchRelease release : {TorchRelease{2, 13}, TorchRelease{2, 14}}) {
    PartitionOptions o;
    o.torch = TorchBehavior::of(release);
    const NodeInfo info = classify_nodes(g, {}, 1, o);
    const bool rules = release >= TorchRelease{2, 14};
    EXPECT_TRUE(info.is_required_bw(cd.id));
    EXPECT_EQ(info.is_required_bw(of_sin.id), !rules) << release.str();
    EXPECT_TRUE(info.is_required_bw(of_mul.id)) << release.str();
    EXPECT_TRUE(info.is_required_bw(result.id)) << release.str();
    EXPECT_TRUE(info.is_required_bw(add.id)) << release.str();
    EXPECT_EQ(info.tangents_closure[of_sin.id] != 0, !rules) << release.str();
  }
}

TEST(AnalyzeDistance, DistanceToTheBackward) {
  Joint j;
  Graph g = j.t.build();
  NodeInfo info = classify_nodes(g, {}, 1, PartitionOptions());
  std::vector<int64_t> d = dist_from_bw(g, info);
  EXPECT_EQ(d[g.output()], kFarFromBackward);
  EXPECT_EQ(d[j.c.id], 0);        // not required in forward
  EXPECT_EQ(d[j.dead_fw.id], 0);
  EXPECT_EQ(d[j.a.id], 1);        // used by c
  EXPECT_EQ(d[j.p1.id], 1);       // used by dead_fw (0) + 1
  EXPECT_EQ(d[j.b.id], kFarFromBackward);  // only the output uses it
  EXPECT_EQ(d[j.seed.id], kFarFromBackward);
  EXPECT_EQ(d[j.p2.id], 1);       // used by grad_p2
}

}  // namespace
}  // namespace remat
