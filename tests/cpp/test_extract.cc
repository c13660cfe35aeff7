// tests/cpp/test_extract.cc — extract_fwd_bwd (torch's
// _extract_fwd_bwd_modules) and eliminate_dead_collectives, one rule per
// test: pruning, symbol bindings, saved-value order, BackwardState, FX names.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "extract/extract.h"
#include "graph/copy.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/result.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using Names = std::vector<std::string>;

Names names(const Graph& g) { return testing::node_names(g); }

Names names_of(const Graph& g, const std::vector<NodeId>& ids) {
  Names out;
  for (NodeId id : ids) out.emplace_back(g.name(id));
  return out;
}

// The leaves of the output node's (values,) tuple: node names, "None", and
// constants spelled as "int:64", "float:0.5", "bool:1", "str:..." .
Names outputs(const Graph& g) {
  Names out;
  const Node& o = g.node(g.output());
  const ArgId values = g.children(o.args).at(0);
  for (ArgId c : g.children(values)) {
    const Arg& a = g.arg(c);
    switch (a.kind) {
      case ArgKind::kNode: out.emplace_back(g.name(a.id)); break;
      case ArgKind::kNone: out.emplace_back("None"); break;
      case ArgKind::kInt: out.push_back("int:" + std::to_string(a.i)); break;
      case ArgKind::kBool: out.push_back("bool:" + std::to_string(a.i)); break;
      case ArgKind::kFloat: out.push_back("float:" + std::to_string(a.f)); break;
      case ArgKind::kStr: out.push_back("str:" + std::string(g.str(a.id))); break;
      default: out.push_back(arg_kind_name(a.kind)); break;
    }
  }
  return out;
}

Names placeholders(const Graph& g) {
  Names out;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind == NodeKind::kPlaceholder) out.emplace_back(g.name(id));
  }
  return out;
}

// Symbol facts the fixture cannot express: per node name, the symbol it
// binds ("" for none) and its free symbols; and by its raw expressions
// (before replacements): the symbols free_symbols lacks and, when set, the
// symbol it binds ("" for none).
struct Symbols {
  std::string binds;
  std::vector<std::string> free;
  std::vector<std::string> unreplaced = {};
  std::optional<std::string> binds_raw = std::nullopt;
};

Graph with_symbols(const Graph& g, const std::map<std::string, Symbols>& facts) {
  GraphBuilder b;
  NodeCopier copier(g, b);
  std::vector<NodeId> remap(g.size(), kNoNode);
  for (NodeId id = 0; id < g.size(); ++id) {
    auto it = facts.find(std::string(g.name(id)));
    if (it == facts.end()) {
      remap[id] = copier.copy(id, remap);
      continue;
    }
    Node n;
    copier.copy_value(id, n);
    n.args = copier.copy_args(g.node(id).args, remap);
    n.kwargs = copier.copy_args(g.node(id).kwargs, remap);
    n.origin = kNoNode;
    NodeExtra x = g.extra(id);
    x.binds_symbol = it->second.binds.empty() ? 0 : b.intern(it->second.binds);
    n.symbols_begin = static_cast<uint32_t>(b.symbol_count());
    n.symbols_count = static_cast<uint32_t>(it->second.free.size());
    for (const std::string& s : it->second.free) b.add_symbol(b.intern(s));
    x.unreplaced_symbols_begin = static_cast<uint32_t>(b.symbol_count());
    x.unreplaced_symbols_count = static_cast<uint32_t>(it->second.unreplaced.size());
    for (const std::string& s : it->second.unreplaced) b.add_symbol(b.intern(s));
    if (it->second.binds_raw) {
      x.binds_unreplaced_differs = true;
      x.binds_unreplaced = it->second.binds_raw->empty() ? 0 : b.intern(*it->second.binds_raw);
    }
    remap[id] = b.add_node(n, x);
  }
  return b.finish();
}

NodeId id_of(const Graph& g, const char* name) {
  NodeId id = g.find(name);
  EXPECT_NE(id, kNoNode) << name;
  return id;
}

// x @ w -> relu, and its backward; torch names the same graph's nodes
// mm_default, relu_default, ... (the fixture drops the overload suffix).
struct Mlp {
  Graph g;
  Ref p1, p2, t1, mm, relu;
};

Mlp mlp() {
  TestGraph t;
  Mlp m;
  m.p1 = t.placeholder("primals_1", {4, 8});
  m.p2 = t.placeholder("primals_2", {8, 8});
  m.t1 = t.placeholder("tangents_1", {4, 8});
  m.mm = t.call("aten.mm.default", {m.p1, m.p2}, {4, 8});
  m.relu = t.call("aten.relu.default", {m.mm}, {4, 8});
  Ref tb = t.call("aten.threshold_backward.default", {m.t1, m.relu, 0}, {4, 8});
  Ref tt = t.call("aten.t.default", {m.p2}, {8, 8});
  Ref mm1 = t.call("aten.mm.default", {tb, tt}, {4, 8});
  Ref tp = t.call("aten.t.default", {m.p1}, {8, 4});
  Ref mm2 = t.call("aten.mm.default", {tp, tb}, {8, 8});
  t.output({A::tuple({m.relu, mm1, mm2})});
  m.g = t.build();
  return m;
}

TEST(ExtractTest, MlpForwardAndBackward) {
  Mlp m = mlp();
  SavedSets saved;
  saved.saved_values = {m.p1.id, m.p2.id, m.relu.id, m.mm.id};  // mm: unused by backward
  Extracted e = extract_fwd_bwd(m.g, saved, 1, PartitionOptions{});

  EXPECT_EQ(names_of(m.g, e.saved_values), (Names{"primals_1", "primals_2", "relu"}));
  EXPECT_EQ(names(e.forward), (Names{"primals_1", "primals_2", "mm", "relu", "output"}));
  EXPECT_EQ(outputs(e.forward), (Names{"relu", "primals_1", "primals_2", "relu"}));
  EXPECT_EQ(names(e.backward),
            (Names{"primals_1", "primals_2", "relu", "tangents_1", "threshold_backward", "t",
                   "mm_1", "t_1", "mm_2", "output"}));
  EXPECT_EQ(outputs(e.backward), (Names{"mm_1", "mm_2"}));

  // A saved value becomes a placeholder targeting its name; origins point
  // at the graph the extraction ran on.
  const NodeId relu_ph = id_of(e.backward, "relu");
  EXPECT_EQ(e.backward.node(relu_ph).kind, NodeKind::kPlaceholder);
  EXPECT_EQ(e.backward.str(e.backward.node(relu_ph).target), "relu");
  EXPECT_EQ(e.backward.node(relu_ph).origin, m.relu.id);
  EXPECT_EQ(e.forward.node(id_of(e.forward, "mm")).origin, m.mm.id);
}

TEST(ExtractTest, ASavedValueReadThroughADroppedForwardSyncStaysSaved) {
  // The backward's cos reads primals_1 only through getitem(cd, 1) of a
  // forward sync, which torch 2.14 drops from the backward: cos then reads
  // primals_1, which therefore is used and stays saved.
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref sg = t.get_attr("subgraph_record_event_0");
  Ref cd = t.control_deps({p1}, sg, {p1});
  Ref gi = t.getitem(cd, 1);
  Ref t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {gi});
  Ref cos = t.call("aten.cos.default", {gi});
  Ref mul = t.call("aten.mul.Tensor", {t1, cos});
  t.output({A::tuple({sin, mul})});
  const Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {p1.id};
  for (TorchRelease release : {TorchRelease{2, 13}, TorchRelease{2, 14}}) {
    PartitionOptions o;
    o.torch = TorchBehavior::of(release);
    const Extracted e = extract_fwd_bwd(g, saved, 1, o);
    EXPECT_EQ(names_of(g, e.saved_values), (Names{"primals_1"})) << release.str();
    const Graph& bw = e.backward;
    if (release >= TorchRelease{2, 14}) {
      EXPECT_EQ(names(bw), (Names{"primals_1", "tangents_1", "cos", "mul", "output"}));
      EXPECT_EQ(testing::arg_texts(bw, bw.find("cos")), (Names{"primals_1"}));
    } else {
      EXPECT_EQ(names(bw), (Names{"primals_1", "tangents_1", "subgraph_record_event_0",
                                  "control_deps", "getitem", "cos", "mul", "output"}));
    }
  }
}

TEST(ExtractTest, NonNodeOutputsPassThroughUnchanged) {
  // torch appends an output leaf that is no node (a SymInt specialized to an
  // int, None, a float ...) to the extracted graph's outputs as it is.
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref t1 = t.placeholder("tangents_1", {4});
  Ref sin = t.call("aten.sin.default", {p1}, {4});
  Ref cos = t.call("aten.cos.default", {p1}, {4});
  Ref mul = t.call("aten.mul.Tensor", {t1, cos}, {4});
  // Forward leaves: sin, 64, 0.5, "s" (nested: pytree flattens the list);
  // backward leaves: mul, None, True.
  t.output({A::tuple({sin, A::list({64, 0.5}), "s", mul, nullptr, true})});
  Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {cos.id};
  Extracted e = extract_fwd_bwd(g, saved, 4, PartitionOptions{});
  EXPECT_EQ(outputs(e.forward),
            (Names{"sin", "int:64", "float:0.500000", "str:s", "cos"}));
  EXPECT_EQ(outputs(e.backward), (Names{"mul", "None", "bool:1"}));
}

TEST(ExtractTest, NamespacesRememberDeadNames) {
  Mlp m = mlp();
  SavedSets saved;
  saved.saved_values = {m.p1.id, m.p2.id, m.relu.id};
  Extracted e = extract_fwd_bwd(m.g, saved, 1, PartitionOptions{});
  // The forward selection created (then removed) no other "mm"; the next
  // free "mm" name is mm_1 in both graphs.
  EXPECT_EQ(e.forward_names.create_name("mm"), "mm_1");
  EXPECT_EQ(e.backward_names.create_name("mm"), "mm_3");
  EXPECT_EQ(e.forward_names.create_name("output"), "output_1");
}

TEST(ExtractTest, PlaceholderNamesAreSnakeCasedAndPrunedByName) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref used = t.call("aten.sin.default", {p1}, {4}, "convBackward");
  Ref unused = t.call("aten.cos.default", {p1}, {4}, "someValue");
  Ref mul = t.call("aten.mul.Tensor", {t1, used});
  t.output({A::tuple({p1, mul})});
  Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {used.id, unused.id};
  Extracted e = extract_fwd_bwd(g, saved, 1, PartitionOptions{});
  // fx.Graph.placeholder("convBackward") is named "conv_backward"; torch
  // then looks the unused "some_value" up by that name, finds nothing and
  // keeps it saved.
  EXPECT_EQ(names_of(g, e.saved_values), (Names{"convBackward", "someValue"}));
  EXPECT_EQ(placeholders(e.backward), (Names{"conv_backward", "some_value", "tangents_1"}));
  EXPECT_EQ(e.backward.str(e.backward.node(0).target), "convBackward");
}

TEST(ExtractTest, SymbolBindingsComeFirstSortedByName) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref p2 = t.placeholder("primals_2");
  Ref p3 = t.placeholder("primals_3");
  for (Ref r : {p1, p2}) {
    t[r].value = ValueKind::kSymInt;
    t[r].tensors.clear();
    t[r].flags = 0;
  }
  Ref t1 = t.placeholder("tangents_1");
  Ref mul = t.call("aten.mul.Tensor", {p3, p3});
  Ref sym = t.call_sym("operator.mul", {p2, 2}, "2*s1", 6, "mul_sym");
  Ref out = t.call("aten.mul.Tensor", {t1, mul});
  Ref view = t.call("aten.view.default", {out, A::list({sym})});
  t.output({A::tuple({mul, view})});
  Graph g = with_symbols(t.build(), {{"primals_1", {"s0", {"s0"}}},
                                     {"primals_2", {"s1", {"s1"}}},
                                     {"primals_3", {"", {"s0", "s1", "u9"}}},
                                     {"mul", {"", {"s0", "s1", "u9"}}},
                                     {"tangents_1", {"", {"s0", "s1"}}},
                                     {"mul_sym", {"", {"s1"}}}});
  SavedSets saved;
  saved.saved_values = {id_of(g, "mul")};
  saved.saved_sym_nodes = {id_of(g, "mul_sym")};
  Extracted e = extract_fwd_bwd(g, saved, 1, PartitionOptions{});
  // mul_sym (derived) needs s1 -> primals_2; mul then needs s0 -> primals_1;
  // u9 has no binding node and is skipped.
  EXPECT_EQ(names_of(g, e.saved_sym_nodes), (Names{"primals_2", "primals_1", "mul_sym"}));
  EXPECT_EQ(outputs(e.forward), (Names{"mul", "mul", "primals_2", "primals_1", "mul_sym"}));
  EXPECT_EQ(placeholders(e.backward),
            (Names{"primals_2", "primals_1", "mul_sym", "mul", "tangents_1"}));
}

TEST(ExtractTest, SavedBindingSymNodesStayFirst) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  t[p1].value = ValueKind::kSymInt;
  t[p1].tensors.clear();
  Ref p2 = t.placeholder("primals_2");
  Ref t1 = t.placeholder("tangents_1");
  Ref sym = t.call_sym("operator.mul", {p1, 2}, "2*s0", 6);
  Ref view = t.call("aten.view.default", {t1, A::list({sym, p1})});
  t.output({A::tuple({p2, view})});
  Graph g = with_symbols(t.build(), {{"primals_1", {"s0", {"s0"}}}, {"mul", {"", {"s0"}}}});
  SavedSets saved;
  saved.saved_sym_nodes = {id_of(g, "mul"), id_of(g, "primals_1")};
  Extracted e = extract_fwd_bwd(g, saved, 1, PartitionOptions{});
  EXPECT_EQ(names_of(g, e.saved_sym_nodes), (Names{"primals_1", "mul"}));
}

TEST(ExtractTest, NoVcCheckTensorsLastScriptObjectsAfterTensors) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref obj = t.placeholder("primals_2");
  t[obj].value = ValueKind::kScriptObject;
  t[obj].tensors.clear();
  Ref t1 = t.placeholder("tangents_1");
  Ref a = t.call("aten.sin.default", {p1});
  Ref b = t.call("aten.cos.default", {p1});
  t[b].flags |= kFlagNoVcCheck;
  Ref c = t.call("aten.exp.default", {p1});
  Ref x = t.call("aten.mul.Tensor", {t1, a});
  Ref y = t.call("aten.mul.Tensor", {x, b});
  Ref z = t.call("aten.mul.Tensor", {y, c});
  Ref w = t.call("aten.mul.Tensor", {z, obj});
  t.output({A::tuple({p1, w})});
  Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {obj.id, a.id, b.id, c.id};
  Extracted e = extract_fwd_bwd(g, saved, 1, PartitionOptions{});
  EXPECT_EQ(names_of(g, e.saved_values), (Names{"sin", "exp", "cos"}));
  EXPECT_EQ(names_of(g, e.saved_script_objects), (Names{"primals_2"}));
  EXPECT_EQ(outputs(e.forward), (Names{"primals_1", "sin", "exp", "cos", "primals_2"}));
  EXPECT_EQ(placeholders(e.backward), (Names{"sin", "exp", "cos", "primals_2", "tangents_1"}));
}

TEST(ExtractTest, BackwardStateIsPassedDirectly) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref state = t.placeholder("primals_2");
  t[state].value = ValueKind::kBackwardState;
  t[state].tensors.clear();
  Ref t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {p1});
  Ref hook = t.call("aten.mul.Tensor", {t1, state});
  Ref mul = t.call("aten.mul.Tensor", {hook, sin});
  t.output({A::tuple({sin, mul})});
  Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {sin.id, state.id};
  Extracted e = extract_fwd_bwd(g, saved, 1, PartitionOptions{});
  EXPECT_EQ(names_of(g, e.saved_values), (Names{"sin"}));
  EXPECT_EQ(outputs(e.forward), (Names{"sin", "sin"}));
  EXPECT_EQ(placeholders(e.backward), (Names{"sin", "tangents_1", "primals_2"}));
}

TEST(ExtractTest, DeadWaitTensorActivationsArePrunedWhenDistributed) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref ag = t.call("_c10d_functional.all_gather_into_tensor.default", {p1, 2, "0"});
  Ref sin = t.call("aten.sin.default", {p1});
  Ref wait = t.call("_c10d_functional.wait_tensor.default", {ag});
  t[wait].flags |= kFlagImpure;  // so that the backward keeps it, unused
  Ref mul = t.call("aten.mul.Tensor", {t1, sin});
  t.output({A::tuple({sin, mul})});
  Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {ag.id, sin.id};

  Extracted e = extract_fwd_bwd(g, saved, 1, PartitionOptions{});
  EXPECT_EQ(names_of(g, e.saved_values), (Names{"sin"}));

  PartitionOptions local;
  local.distributed_available = false;
  Extracted kept = extract_fwd_bwd(g, saved, 1, local);
  EXPECT_EQ(names_of(g, kept.saved_values), (Names{"all_gather_into_tensor", "sin"}));
  EXPECT_EQ(names(kept.backward), (Names{"all_gather_into_tensor", "sin", "tangents_1",
                                         "wait_tensor", "mul", "output"}));
}

TEST(ExtractTest, DeadWaitTensorsActivationsArePrunedFrom215) {
  // The multi-tensor wait_tensors (new in 2.15) is pruned behind like
  // wait_tensor from 2.15 on; before, it is an ordinary use.
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref ag = t.call("_c10d_functional.all_gather_into_tensor.default", {p1, 2, "0"});
  Ref sin = t.call("aten.sin.default", {p1});
  Ref wait = t.call_multi("_c10d_functional.wait_tensors.default", {A::list({ag})}, {{4}});
  t[wait].flags |= kFlagImpure;
  Ref mul = t.call("aten.mul.Tensor", {t1, sin});
  t.output({A::tuple({sin, mul})});
  Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {ag.id, sin.id};
  PartitionOptions o;
  o.torch = TorchBehavior::of({2, 14});
  EXPECT_EQ(names_of(g, extract_fwd_bwd(g, saved, 1, o).saved_values),
            (Names{"all_gather_into_tensor", "sin"}));
  o.torch = TorchBehavior::of({2, 15});
  EXPECT_EQ(names_of(g, extract_fwd_bwd(g, saved, 1, o).saved_values), (Names{"sin"}));
}

TEST(ExtractTest, UnreplacedSymbolsAreBoundFrom214) {
  // x: [s0], y: [s1] with s1 replaced by s0, and their sizes as SymInt
  // inputs n0 (s0) and n1 (s0 after replacement, s1 raw). 2.13 binds only
  // s0; 2.14 also binds y's raw s1, through n1.
  TestGraph t;
  Ref x = t.placeholder("primals_1");
  Ref y = t.placeholder("primals_2");
  Ref n0 = t.placeholder("primals_3");
  Ref n1 = t.placeholder("primals_4");
  for (Ref r : {n0, n1}) {
    t[r].value = ValueKind::kSymInt;
    t[r].tensors.clear();
    t[r].flags = 0;
  }
  Ref t1 = t.placeholder("tangents_1");
  Ref mul = t.call("aten.mul.Tensor", {x, y});
  Ref sin = t.call("aten.sin.default", {mul});
  Ref cos = t.call("aten.cos.default", {mul});
  Ref g1 = t.call("aten.mul.Tensor", {t1, cos});
  Ref gx = t.call("aten.mul.Tensor", {g1, y});
  Ref gy = t.call("aten.mul.Tensor", {g1, x});
  t.output({A::tuple({sin, gx, gy, A(), A()})});
  Graph g = with_symbols(t.build(), {{"primals_1", {"", {"s0"}}},
                                     {"primals_2", {"", {"s0"}, {"s1"}}},
                                     {"primals_3", {"s0", {"s0"}}},
                                     {"primals_4", {"s0", {"s0"}, {"s1"}, "s1"}},
                                     {"tangents_1", {"", {"s0"}}}});
  SavedSets saved;
  saved.saved_values = {id_of(g, "primals_1"), id_of(g, "primals_2")};
  PartitionOptions o;
  o.torch = TorchBehavior::of({2, 13});
  EXPECT_EQ(names_of(g, extract_fwd_bwd(g, saved, 1, o).saved_sym_nodes), (Names{"primals_3"}));
  o.torch = TorchBehavior::of({2, 14});
  Extracted e = extract_fwd_bwd(g, saved, 1, o);
  EXPECT_EQ(names_of(g, e.saved_sym_nodes), (Names{"primals_3", "primals_4"}));
  EXPECT_EQ(placeholders(e.backward),
            (Names{"primals_3", "primals_4", "primals_1", "primals_2", "tangents_1"}));
}

TEST(ExtractTest, SavedConstantThatIsNoScalarCannotBeBound) {
  // torch's free_symbols asserts on a saved value it cannot read (an Enum
  // member that torch 2.11 does not count opaque, a string ...).
  TestGraph t;
  Ref mode = t.placeholder("primals_1");
  t[mode].value = ValueKind::kConstant;
  t[mode].flags = kFlagNonScalarConstant;
  t[mode].tensors.clear();
  Ref p = t.placeholder("primals_2");
  Ref t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {p});
  Ref use = t.call("test.use_mode", {t1, mode});
  t.output({A::tuple({sin, A(), use})});
  Graph g = t.build();
  SavedSets saved;
  saved.saved_values = {mode.id};
  try {
    extract_fwd_bwd(g, saved, 1, PartitionOptions{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    EXPECT_NE(std::string(e.what()).find("'primals_1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot extract sympy expressions"), std::string::npos);
  }
  // A plain constant (an int) has no symbols and is fine.
  TestGraph t2 = t;
  t2[mode].flags = 0;
  Graph g2 = t2.build();
  EXPECT_NO_THROW(extract_fwd_bwd(g2, saved, 1, PartitionOptions{}));
}

TEST(ExtractTest, DeadCollectivesGoOtherNodesStay) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref ag = t.call("_c10d_functional.all_gather_into_tensor.default", {p1, 2, "0"});
  t.call("_c10d_functional.wait_tensor.default", {ag});
  t.call("aten.sin.default", {p1});  // unused, but not a collective
  Ref cos = t.call("aten.cos.default", {p1});
  t.output({A::tuple({cos})});
  Graph g = t.build();
  Graph out = eliminate_dead_collectives(g);
  EXPECT_EQ(names(out), (Names{"primals_1", "sin", "cos", "output"}));
  EXPECT_EQ(out.node(1).origin, 3u);  // sin
}

}  // namespace
}  // namespace remat
