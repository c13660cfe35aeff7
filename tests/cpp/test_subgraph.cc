// tests/cpp/test_subgraph.cc — select_subgraph (torch's
// _extract_graph_with_inputs_outputs + DCE) and FxNamespace, one rule per
// test. Expected values were checked against torch 2.13's own functions on
// the same graphs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/fx_names.h"
#include "graph/subgraph.h"
#include "graph_fixture.h"
#include "remat/error.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using Names = std::vector<std::string>;

Names names_of(const Graph& g, const std::vector<NodeId>& ids) {
  Names out;
  for (NodeId id : ids) out.push_back(id == kNoNode ? "None" : std::string(g.name(id)));
  return out;
}

TEST(SubgraphTest, KeepsValidNodesThenEliminatesDeadCode) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref p2 = t.placeholder("primals_2");
  Ref t1 = t.placeholder("tangents_1");
  Ref mul = t.call("aten.mul.Tensor", {p1, p2});
  t.call("aten.sin.default", {p1});  // valid but unused
  Ref relu = t.call("aten.relu.default", {mul});
  Ref mul1 = t.call("aten.mul.Tensor", {t1, relu});  // needs a tangent: invalid
  t.output({A::tuple({relu, mul1})});
  Graph g = t.build();

  SubgraphSelection s =
      select_subgraph(g, {p1.id, p2.id}, {relu.id}, Subgraph::kForward, Impurity{});
  EXPECT_EQ(names_of(g, s.inputs), (Names{"primals_1", "primals_2"}));
  // Every copy is created before DCE, the dead `sin` included.
  EXPECT_EQ(names_of(g, s.created), (Names{"primals_1", "primals_2", "mul", "sin", "relu"}));
  EXPECT_EQ(names_of(g, s.body), (Names{"mul", "relu"}));
  EXPECT_EQ(names_of(g, s.outputs), (Names{"relu"}));
}

TEST(SubgraphTest, AnyNodeCanBeAnInput) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {p1});
  Ref cos = t.call("aten.cos.default", {sin});
  Ref mul = t.call("aten.mul.Tensor", {t1, cos});
  t.output({A::tuple({cos, mul})});
  Graph g = t.build();

  SubgraphSelection s = select_subgraph(g, {sin.id, t1.id}, {mul.id, kNoNode},
                                        Subgraph::kBackward, Impurity{});
  EXPECT_EQ(names_of(g, s.body), (Names{"cos", "mul"}));
  EXPECT_EQ(names_of(g, s.outputs), (Names{"mul", "None"}));
}

TEST(SubgraphTest, RandomOpsAreImpureOnlyWhenAsked) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  t.call("aten.rand_like.default", {p1});
  Ref cos = t.call("aten.cos.default", {p1});
  t.output({A::tuple({cos})});
  t.op("aten.rand_like.default").tags = kTagNondeterministicSeeded;
  Graph g = t.build();

  EXPECT_EQ(names_of(g, select_subgraph(g, {p1.id}, {cos.id}, Subgraph::kForward, Impurity{}).body),
            (Names{"rand_like", "cos"}));
  EXPECT_EQ(names_of(g, select_subgraph(g, {p1.id}, {cos.id}, Subgraph::kForward,
                                        Impurity{.random = false})
                           .body),
            (Names{"cos"}));
}

TEST(SubgraphTest, ImpureNodesAndTheirInputsStay) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref sin = t.call("aten.sin.default", {p1});
  Ref effect = t.call("aten._print.default", {sin});
  t[effect].flags |= kFlagImpure;
  Ref cos = t.call("aten.cos.default", {p1});
  t.get_attr("_tensor_constant0");  // get_attr nodes die like pure nodes
  t.output({A::tuple({cos})});
  Graph g = t.build();

  SubgraphSelection s = select_subgraph(g, {p1.id}, {cos.id}, Subgraph::kForward, Impurity{});
  EXPECT_EQ(names_of(g, s.body), (Names{"sin", "_print", "cos"}));
  EXPECT_EQ(names_of(g, s.created),
            (Names{"primals_1", "sin", "_print", "cos", "_tensor_constant0"}));
}

TEST(SubgraphTest, InvalidOutputIsAnErrorNamingIt) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref mul = t.call("aten.mul.Tensor", {t1, p1});
  t.output({A::tuple({mul})});
  Graph g = t.build();
  try {
    select_subgraph(g, {p1.id}, {mul.id}, Subgraph::kForward, Impurity{});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    EXPECT_NE(std::string(e.what()).find("'mul'"), std::string::npos) << e.what();
  }
}

TEST(SubgraphTest, MustBeInForwardNodesAreInvalidElsewhere) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {p1});
  t[sin].tag = PartitionerTag::kMustBeInForward;
  Ref mul = t.call("aten.mul.Tensor", {t1, sin});
  t.output({A::tuple({mul})});
  Graph g = t.build();
  EXPECT_THROW(select_subgraph(g, {p1.id, t1.id}, {mul.id}, Subgraph::kBackward, Impurity{}), Error);
  // Unless it is an input, or the rule is switched off.
  EXPECT_EQ(names_of(g, select_subgraph(g, {sin.id, t1.id}, {mul.id}, Subgraph::kBackward, Impurity{})
                            .body),
            (Names{"mul"}));
  EXPECT_EQ(names_of(g, select_subgraph(g, {p1.id, t1.id}, {mul.id}, Subgraph::kBackward, Impurity{},
                                        /*ignore_must_be_in_fw_bw=*/true)
                            .body),
            (Names{"sin", "mul"}));
}

TEST(SubgraphTest, BackwardCopyOutputStandsForItsDestination) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref copy = t.call("aten.copy_.default", {p1, t1});
  t[copy].tag = PartitionerTag::kMustBeInBackward;
  t.output({A::tuple({copy})});
  Graph g = t.build();
  SubgraphSelection s = select_subgraph(g, {p1.id}, {copy.id}, Subgraph::kForward, Impurity{});
  EXPECT_EQ(names_of(g, s.outputs), (Names{"primals_1"}));
  EXPECT_TRUE(s.body.empty());
}

TEST(SubgraphTest, HigherOrderOpOutputsStandForTheInputTheyMutate) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref hop = t.call("higher_order.triton_kernel_wrapper_functional", {});
  t[hop].kwargs = {{"grid", A::list({})},
                   {"kwargs", A::container(ArgKind::kDict, {A("in_ptr"), A(t1), A("buf"), A(p1)})}};
  Ref item = t.call("operator.getitem", {hop, "buf"}, {4}, "getitem");
  Ref view = t.call("aten.view.default", {item, A::list({4})});
  Ref other = t.call("operator.getitem", {hop, "in_ptr"}, {4}, "getitem");
  t.output({A::tuple({view, item, other})});
  Graph g = t.build();

  SubgraphSelection s =
      select_subgraph(g, {p1.id}, {view.id, item.id}, Subgraph::kForward, Impurity{});
  EXPECT_EQ(names_of(g, s.outputs), (Names{"primals_1", "primals_1"}));
  // The key maps to a node that is not in the forward: no stand-in.
  EXPECT_THROW(select_subgraph(g, {p1.id}, {other.id}, Subgraph::kForward, Impurity{}), Error);
}

TEST(SubgraphTest, ListedTwiceMakesTwoPlaceholders) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref sin = t.call("aten.sin.default", {p1});
  t.output({A::tuple({sin})});
  Graph g = t.build();
  SubgraphSelection s = select_subgraph(g, {p1.id, p1.id}, {sin.id}, Subgraph::kForward, Impurity{});
  EXPECT_EQ(names_of(g, s.created), (Names{"primals_1", "primals_1", "sin"}));
  EXPECT_EQ(names_of(g, s.body), (Names{"sin"}));
}

// rearrange keeps the listed nodes in the listed order, redirects merged
// ones through `alias`, and refuses an order that drops a used node.
// A forward sync: control_deps((p1,), subgraph, p1) runs a stream sync
// before sin reads p1 through getitem(cd, 1); the backward's cos reads the
// same getitem.
struct ForwardSync {
  Graph g;
  Ref p1, t1, cd, gi, cos, mul;
};

ForwardSync forward_sync(PartitionerTag cd_tag = PartitionerTag::kNone) {
  TestGraph t;
  ForwardSync f;
  f.p1 = t.placeholder("primals_1");
  Ref sg = t.get_attr("subgraph_record_event_0");
  f.cd = t.control_deps({f.p1}, sg, {f.p1});
  t[f.cd].tag = cd_tag;
  f.gi = t.getitem(f.cd, 1);
  f.t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {f.gi});
  f.cos = t.call("aten.cos.default", {f.gi});
  f.mul = t.call("aten.mul.Tensor", {f.t1, f.cos});
  t.output({A::tuple({sin, f.mul})});
  f.g = t.build();
  return f;
}

SubgraphSelection backward_of(const ForwardSync& f, bool control_deps_rules) {
  return select_subgraph(f.g, {f.p1.id, f.t1.id}, {f.mul.id}, Subgraph::kBackward,
                         Impurity{}, false, control_deps_rules);
}

TEST(SubgraphTest, ForwardSyncsLeaveTheBackwardTheirGetitemsReadingTheirDeps) {
  const ForwardSync f = forward_sync();
  const SubgraphSelection s = backward_of(f, /*control_deps_rules=*/true);
  // No control_deps (nor its getitem) is made; cos reads primals_1.
  EXPECT_EQ(names_of(f.g, s.created), (Names{"primals_1", "tangents_1",
                                             "subgraph_record_event_0", "sin", "cos", "mul"}));
  EXPECT_EQ(names_of(f.g, s.body), (Names{"cos", "mul"}));
  EXPECT_EQ(s.value_of(f.gi.id), f.p1.id);
  EXPECT_EQ(s.value_of(f.cos.id), f.cos.id);
}

TEST(SubgraphTest, BeforeTorch214AForwardSyncIsCopiedIntoTheBackward) {
  const ForwardSync f = forward_sync();
  const SubgraphSelection s = backward_of(f, /*control_deps_rules=*/false);
  // Its inputs are valid there and it is impure: it stays, with its getitem.
  EXPECT_EQ(names_of(f.g, s.body),
            (Names{"subgraph_record_event_0", "control_deps", "getitem", "cos", "mul"}));
  EXPECT_TRUE(s.stands_for.empty());
}

TEST(SubgraphTest, ABackwardTaggedSyncIsNoForwardSync) {
  for (PartitionerTag tag : {PartitionerTag::kIsBackward, PartitionerTag::kMustBeInBackward}) {
    const ForwardSync f = forward_sync(tag);
    const SubgraphSelection s = backward_of(f, /*control_deps_rules=*/true);
    EXPECT_EQ(names_of(f.g, s.body),
              (Names{"subgraph_record_event_0", "control_deps", "getitem", "cos", "mul"}));
  }
}

TEST(SubgraphTest, APartlyAvailableControlDepsIsRefusedFromTorch214) {
  // A backward sync passing a forward value (sin) and a backward one (mul):
  // extracting the forward, torch 2.14 rebuilds it with sin alone. Without
  // sin among its dependencies it is merely invalid there.
  struct Sync {
    Graph g;
    Ref p1, sin;
  };
  auto backward_sync = [](bool passes_sin) {
    TestGraph t;
    Sync s;
    s.p1 = t.placeholder("primals_1");
    Ref t1 = t.placeholder("tangents_1");
    s.sin = t.call("aten.sin.default", {s.p1});
    Ref mul = t.call("aten.mul.Tensor", {t1, s.sin});
    Ref sg = t.get_attr("subgraph_record_event_0");
    Ref cd = passes_sin ? t.control_deps({mul}, sg, {s.sin, mul}) : t.control_deps({}, sg, {mul});
    t[cd].tag = PartitionerTag::kIsBackward;
    Ref gi = t.getitem(cd, passes_sin ? 2 : 1);
    t.output({A::tuple({s.sin, gi})});
    s.g = t.build();
    return s;
  };
  const Sync mixed = backward_sync(true);
  const Graph& g = mixed.g;
  try {
    select_subgraph(g, {mixed.p1.id}, {mixed.sin.id}, Subgraph::kForward, Impurity{}, false, true);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("node 'control_deps'"), std::string::npos) << what;
    EXPECT_NE(what.find("forward graph"), std::string::npos) << what;
    EXPECT_NE(what.find("subgraph_cd_extract"), std::string::npos) << what;
  }
  // Before 2.14 it is simply invalid in the forward.
  const SubgraphSelection before =
      select_subgraph(g, {mixed.p1.id}, {mixed.sin.id}, Subgraph::kForward, Impurity{});
  EXPECT_EQ(names_of(g, before.body), (Names{"sin"}));
  const Sync bwd_only = backward_sync(false);
  const SubgraphSelection none = select_subgraph(bwd_only.g, {bwd_only.p1.id}, {bwd_only.sin.id},
                                                 Subgraph::kForward, Impurity{}, false, true);
  EXPECT_EQ(names_of(bwd_only.g, none.body), (Names{"sin"}));
}

TEST(RearrangeTest, ReordersRedirectsAndRefusesDanglingUses) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref sin = t.call("aten.sin.default", {p1});
  Ref sin2 = t.call("aten.sin.default", {p1});
  Ref cos = t.call("aten.cos.default", {sin2});
  t.output({A::tuple({sin, cos})});
  Graph g = t.build();

  std::vector<NodeId> alias = {0, 1, 1, 3, 4};  // sin_1 merges into sin
  Graph r = GraphBuilder::rearrange(g, std::vector<NodeId>{0, 1, 3, 4}, alias);
  EXPECT_EQ(names_of(r, {0, 1, 2, 3}), (Names{"primals_1", "sin", "cos", "output"}));
  EXPECT_EQ(r.inputs(2).size(), 1u);
  EXPECT_EQ(r.inputs(2)[0], 1u);  // cos now uses sin
  EXPECT_EQ(r.node(2).origin, cos.id);

  try {
    GraphBuilder::rearrange(g, std::vector<NodeId>{0, 1, 3, 4});
    FAIL() << "a use of a dropped node must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("'sin_1'"), std::string::npos) << e.what();
  }
}

TEST(FxNamesTest, MatchesFxNamespace) {
  // torch.fx.graph._Namespace().create_name(c, None) for each c, in order.
  FxNamespace ns;
  const Names in = {"a..b", "getitem", "getitem_1", "getitem_5", "getitem", "getitem",
                    "x.y.z", "3a", "", "sum", "input", "a_01", "a_1"};
  const Names want = {"a_b", "getitem", "getitem_1", "getitem_5", "getitem_6", "getitem_7",
                      "x_y_z", "_3a", "_unnamed", "sum_1", "input_1", "a_01", "a_1"};
  Names got;
  for (const std::string& c : in) got.emplace_back(ns.create_name(c));
  EXPECT_EQ(got, want);
}

TEST(FxNamesTest, TakenSuffixedNameCountsFromTheBaseFrom212) {
  // torch 2.11 and 2.12's _Namespace().create_name(c, None), in order.
  const Names in = {"add_5", "add_5", "add_5", "add",     "add_2",
                    "add_2", "mul_1_3", "mul_1", "mul_1"};
  const Names v211 = {"add_5", "add_1", "add_2", "add",  "add_3",
                      "add_4", "mul_1_3", "mul_1", "mul_4"};
  const Names v212 = {"add_5", "add_6", "add_7", "add",  "add_2",
                      "add_3", "mul_1_3", "mul_1", "mul_2"};
  for (bool by_base : {false, true}) {
    FxNamespace ns(std::make_shared<StringPool>(), by_base);
    Names got;
    for (const std::string& c : in) got.emplace_back(ns.create_name(c));
    EXPECT_EQ(got, by_base ? v212 : v211);
  }
}

TEST(FxNamesTest, FreeBaseAfterHigherNumberIsTakenAsIs) {
  FxNamespace ns;
  EXPECT_EQ(ns.create_name("getitem_5"), "getitem_5");
  EXPECT_EQ(ns.create_name("getitem"), "getitem");
  EXPECT_EQ(ns.create_name("getitem"), "getitem_6");
}

}  // namespace
}  // namespace remat
