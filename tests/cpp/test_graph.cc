// tests/cpp/test_graph.cc — GraphBuilder's rules (include/remat/graph.h),
// through the builder's own API rather than through JSON: what finish()
// derives (FX's all_input_nodes, users, the name index, the output), what it
// rejects (each malformed shape with the Error naming the node), and the
// builder's bookkeeping (op interning, argument containers, tree copies,
// reuse after finish, rearrange).
//
// Contract: one test per rule, named after it; each graph is the smallest
// one in which the rule decides the outcome.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/error.h"
#include "remat/graph.h"

namespace remat {
namespace {

using Names = std::vector<std::string>;

Arg node_ref(NodeId id) {
  Arg a;
  a.kind = ArgKind::kNode;
  a.id = id;
  return a;
}

Arg int_arg(int64_t v) {
  Arg a;
  a.kind = ArgKind::kInt;
  a.i = v;
  return a;
}

// Appends a node of `kind` named `name` whose args are the tuple of
// references to `uses` (and, when given, whose kwargs hold references to
// `kwarg_uses` as dict values).
NodeId add(GraphBuilder& b, std::string_view name, NodeKind kind, std::vector<NodeId> uses = {},
           std::vector<NodeId> kwarg_uses = {}) {
  Node n;
  n.name = b.intern(name);
  n.kind = kind;
  n.target = b.intern(kind == NodeKind::kOutput ? std::string_view("output") : name);
  if (kind == NodeKind::kCallFunction) n.op = b.add_op_by_name("aten.mul.Tensor");
  if (kind != NodeKind::kPlaceholder && kind != NodeKind::kGetAttr) {
    n.args = b.begin(ArgKind::kTuple);
    for (NodeId u : uses) b.leaf(node_ref(u));
    b.end(n.args);
  }
  if (!kwarg_uses.empty()) {
    n.kwargs = b.begin(ArgKind::kDict);
    for (NodeId u : kwarg_uses) {
      Arg key;
      key.kind = ArgKind::kStr;
      key.id = b.intern("other");
      b.leaf(key);
      b.leaf(node_ref(u));
    }
    b.end(n.kwargs);
  }
  return b.add_node(n);
}

NodeId placeholder(GraphBuilder& b, std::string_view name) { return add(b, name, NodeKind::kPlaceholder); }
NodeId call(GraphBuilder& b, std::string_view name, std::vector<NodeId> uses) {
  return add(b, name, NodeKind::kCallFunction, std::move(uses));
}
NodeId output(GraphBuilder& b, std::vector<NodeId> uses) { return add(b, "output", NodeKind::kOutput, std::move(uses)); }

// finish()'s Error, checked for its code; the message is returned.
std::string finish_error(GraphBuilder& b, ErrorCode code = ErrorCode::kInvalidGraph) {
  try {
    b.finish();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "finish() accepted the graph";
  return "";
}

std::vector<NodeId> ids(std::span<const NodeId> s) { return {s.begin(), s.end()}; }

// --- what finish derives -------------------------------------------------------

TEST(GraphBuilderTest, InputsAreFirstReferencesInArgsThenKwargsOrder) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  const NodeId y = placeholder(b, "y");
  const NodeId z = placeholder(b, "z");
  // args (y, x, y), kwargs {other: z, other: x}: FX's all_input_nodes is
  // [y, x, z], each node once, in the order first met.
  const NodeId m = add(b, "mul", NodeKind::kCallFunction, {y, x, y}, {z, x});
  output(b, {m});
  const Graph g = b.finish();
  EXPECT_EQ(ids(g.inputs(m)), (std::vector<NodeId>{y, x, z}));
  EXPECT_TRUE(g.inputs(x).empty());
}

TEST(GraphBuilderTest, InputsInsideNestedContainersCount) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  Node n;
  n.name = b.intern("cat");
  n.target = b.intern("aten.cat.default");
  n.op = b.add_op_by_name("aten.cat.default");
  n.args = b.begin(ArgKind::kTuple);
  const ArgId list = b.begin(ArgKind::kList);
  b.leaf(node_ref(x));
  b.leaf(node_ref(x));
  b.end(list);
  b.leaf(int_arg(0));
  b.end(n.args);
  const NodeId cat = b.add_node(n);
  output(b, {cat});
  const Graph g = b.finish();
  EXPECT_EQ(ids(g.inputs(cat)), (std::vector<NodeId>{x}));
}

TEST(GraphBuilderTest, UsersAreListedInGraphOrder) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  const NodeId a = call(b, "a", {x});
  const NodeId c = call(b, "c", {a, x});
  const NodeId o = output(b, {c, a});
  const Graph g = b.finish();
  EXPECT_EQ(ids(g.users(x)), (std::vector<NodeId>{a, c}));
  EXPECT_EQ(ids(g.users(a)), (std::vector<NodeId>{c, o}));
  EXPECT_TRUE(g.users(o).empty());
}

TEST(GraphBuilderTest, NodesAreFoundByName) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  const NodeId o = output(b, {x});
  const Graph g = b.finish();
  EXPECT_EQ(g.find("x"), x);
  EXPECT_EQ(g.find("output"), o);
  EXPECT_EQ(g.find("missing"), kNoNode);
  EXPECT_EQ(g.output(), o);
}

// --- what finish rejects -------------------------------------------------------

TEST(GraphBuilderTest, EveryNodeNeedsAName) {
  GraphBuilder b;
  placeholder(b, "x");
  Node n;
  n.kind = NodeKind::kPlaceholder;  // name 0: the empty string
  b.add_node(n);
  output(b, {});
  EXPECT_EQ(finish_error(b), "node #1: field 'name' is empty");
}

TEST(GraphBuilderTest, ANameFromOutsideThePoolIsRejectedAsEmpty) {
  GraphBuilder b;
  Node n;
  n.name = 1000000;  // never interned
  n.kind = NodeKind::kPlaceholder;
  b.add_node(n);
  output(b, {});
  EXPECT_EQ(finish_error(b), "node #0: field 'name' is empty");
}

TEST(GraphBuilderTest, NamesAreUnique) {
  GraphBuilder b;
  placeholder(b, "x");
  placeholder(b, "y");
  placeholder(b, "x");
  output(b, {});
  EXPECT_EQ(finish_error(b), "node 'x' (#2): duplicate name (also node #0)");
}

TEST(GraphBuilderTest, AGraphNeedsAnOutputNode) {
  GraphBuilder b;
  placeholder(b, "x");
  EXPECT_EQ(finish_error(b), "graph has no output node");
}

TEST(GraphBuilderTest, AGraphHasOneOutputNode) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  output(b, {x});
  add(b, "output_1", NodeKind::kOutput, {x});
  EXPECT_EQ(finish_error(b), "node 'output_1': a second output node (the first is 'output')");
}

TEST(GraphBuilderTest, TheOutputNodeComesLast) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  output(b, {x});
  placeholder(b, "y");
  EXPECT_EQ(finish_error(b), "output node 'output' is not the last node");
}

TEST(GraphBuilderTest, ArgumentTreesMustExist) {
  GraphBuilder b;
  Node n;
  n.name = b.intern("x");
  n.args = 7;  // no argument item was added
  b.add_node(n);
  output(b, {});
  EXPECT_EQ(finish_error(b), "node 'x': argument tree out of range");
}

TEST(GraphBuilderTest, ReferencesMustNameExistingNodes) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  call(b, "sin", {x, 42});
  output(b, {});
  EXPECT_EQ(finish_error(b), "node 'sin': field 'args' refers to node #42, which does not exist");
}

TEST(GraphBuilderTest, DanglingReferencesInKwargsAreRejectedToo) {
  GraphBuilder b;
  add(b, "sin", NodeKind::kCallFunction, {}, {9});
  output(b, {});
  EXPECT_EQ(finish_error(b), "node 'sin': field 'args' refers to node #9, which does not exist");
}

TEST(GraphBuilderTest, ANodeCannotUseItself) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  call(b, "sin", {x, 1});  // node #1 is sin itself
  output(b, {});
  EXPECT_EQ(finish_error(b), "cycle in graph: node 'sin' uses itself");
}

TEST(GraphBuilderTest, NodesAreInTopologicalOrder) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  call(b, "a", {x, 2});  // uses b, defined next; b does not use a
  call(b, "b", {x});
  output(b, {});
  EXPECT_EQ(finish_error(b),
            "node 'a' uses 'b', which comes later: nodes must be in topological order");
}

TEST(GraphBuilderTest, ACycleIsReportedAlongItsPath) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  call(b, "a", {x, 3});  // a -> c -> b -> a
  call(b, "b", {1});
  call(b, "c", {2});
  output(b, {});
  EXPECT_EQ(finish_error(b),
            "cycle in graph: 'a' -> 'c' -> 'b' -> 'a' (each node uses the next)");
}

TEST(GraphBuilderTest, FinishRefusesAnOpenContainer) {
  GraphBuilder b;
  placeholder(b, "x");
  b.begin(ArgKind::kList);
  EXPECT_EQ(finish_error(b, ErrorCode::kInternal),
            "GraphBuilder::finish: an argument container is open");
}

// --- the builder's bookkeeping -------------------------------------------------

TEST(GraphBuilderTest, ContainersCloseInnermostFirst) {
  GraphBuilder b;
  const ArgId outer = b.begin(ArgKind::kTuple);
  b.begin(ArgKind::kList);
  try {
    b.end(outer);
    ADD_FAILURE() << "end() closed the outer container first";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_STREQ(e.what(), "GraphBuilder::end: containers closed out of order");
  }
}

TEST(GraphBuilderTest, AContainerSpansItsItems) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  Node n;
  n.name = b.intern("add");
  n.op = b.add_op_by_name("aten.add.Tensor");
  n.args = b.begin(ArgKind::kTuple);
  b.leaf(node_ref(x));
  const ArgId list = b.begin(ArgKind::kList);
  b.leaf(int_arg(1));
  b.leaf(int_arg(2));
  b.end(list);
  b.end(n.args);
  const NodeId add_id = b.add_node(n);
  output(b, {add_id});
  const Graph g = b.finish();
  const ArgId root = g.node(add_id).args;
  EXPECT_EQ(g.arg(root).span, 5u);  // the tuple, x, the list, 1, 2
  const std::vector<ArgId> children = g.children(root);
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(g.arg(children[1]).span, 3u);
  EXPECT_EQ(g.children(children[1]).size(), 2u);
}

TEST(GraphBuilderTest, AnOpIsRegisteredOncePerName) {
  GraphBuilder b;
  const OpId first = b.add_op_by_name("aten.sin.default");
  OpInfo other = b.op_info(first);
  other.is_mutable = !other.is_mutable;
  EXPECT_EQ(b.add_op(other), first);  // the first registration's facts stay
  EXPECT_EQ(b.op_info(first).is_mutable, !other.is_mutable);
  EXPECT_NE(b.add_op_by_name("aten.cos.default"), first);
}

TEST(GraphBuilderTest, RegisteredOpsAreFoundByNameInTheGraph) {
  GraphBuilder b;
  const OpId sin = b.add_op_by_name("aten.sin.default");
  output(b, {});
  const Graph g = b.finish();
  EXPECT_EQ(g.find_op("aten.sin.default"), sin);
  EXPECT_EQ(g.find_op("aten.cos.default"), kNoOp);
}

TEST(GraphBuilderTest, AnAllDefaultExtraIsNotStored) {
  GraphBuilder b;
  Node n;
  n.name = b.intern("x");
  n.kind = NodeKind::kPlaceholder;
  const NodeId plain = b.add_node(n, NodeExtra{});
  NodeExtra extra;
  extra.ac_graph_id = 3;
  n.name = b.intern("y");
  const NodeId with = b.add_node(n, extra);
  output(b, {});
  const Graph g = b.finish();
  EXPECT_EQ(g.node(plain).extra, kNoExtra);
  EXPECT_NE(g.node(with).extra, kNoExtra);
  EXPECT_EQ(g.extra(with).ac_graph_id, 3);
}

TEST(GraphBuilderTest, AddTreeMapsReferencesThroughRemap) {
  GraphBuilder src_b;
  const NodeId x = placeholder(src_b, "x");
  const NodeId y = placeholder(src_b, "y");
  const NodeId m = call(src_b, "mul", {x, y});
  output(src_b, {m});
  const Graph src = src_b.finish();

  GraphBuilder b(src);
  const NodeId y2 = placeholder(b, "y");
  const NodeId x2 = placeholder(b, "x");
  Node n = src.node(m);
  const std::vector<NodeId> remap = {x2, y2, kNoNode, kNoNode};
  n.args = b.add_tree(src, n.args, remap);
  const NodeId m2 = b.add_node(n);
  output(b, {m2});
  const Graph g = b.finish();
  EXPECT_EQ(ids(g.inputs(m2)), (std::vector<NodeId>{x2, y2}));
}

TEST(GraphBuilderTest, AddTreeRefusesAReferenceWithoutACopy) {
  GraphBuilder src_b;
  const NodeId x = placeholder(src_b, "x");
  const NodeId m = call(src_b, "mul", {x});
  output(src_b, {m});
  const Graph src = src_b.finish();

  GraphBuilder b(src);
  const std::vector<NodeId> remap = {kNoNode, kNoNode, kNoNode};
  try {
    b.add_tree(src, src.node(m).args, remap);
    ADD_FAILURE() << "add_tree copied a reference it cannot map";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_STREQ(e.what(), "node 'x' is used but has no copy in the new graph");
  }
  // Nothing of the refused tree stays behind: the next tree starts fresh.
  const NodeId x2 = placeholder(b, "x");
  Node n = src.node(m);
  n.args = b.add_tree(src, n.args, std::vector<NodeId>{x2, kNoNode, kNoNode});
  output(b, {b.add_node(n)});
  EXPECT_EQ(b.finish().arg(0).span, 2u);  // the copied tuple is the first item
}

TEST(GraphBuilderTest, ABuilderIsEmptyAfterFinishAndKeepsItsPools) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  output(b, {x});
  const Graph first = b.finish();
  EXPECT_EQ(b.next_id(), 0u);
  placeholder(b, "y");
  output(b, {});
  const Graph second = b.finish();
  EXPECT_EQ(second.size(), 2u);
  EXPECT_EQ(second.find("x"), kNoNode);
  EXPECT_TRUE(second.shares_strings_with(first));  // StrIds agree between them
}

TEST(GraphBuilderTest, ADerivedBuilderSharesTheBasePools) {
  GraphBuilder base_b;
  output(base_b, {});
  const Graph base = base_b.finish();
  GraphBuilder b(base);
  EXPECT_TRUE(b.shares_strings_with(base));
  EXPECT_TRUE(b.shares_values_with(base));
}

TEST(GraphBuilderTest, RearrangeReordersAndSendsDroppedNodesToTheirAlias) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  const NodeId y = placeholder(b, "y");
  const NodeId a = call(b, "a", {x});
  const NodeId a2 = call(b, "a2", {x});  // equal to a: CSE drops it
  const NodeId o = output(b, {a, a2, y});
  const Graph g = b.finish();
  const std::vector<NodeId> order = {y, x, a, o};
  std::vector<NodeId> alias(g.size(), kNoNode);
  alias[a2] = a;
  const Graph r = GraphBuilder::rearrange(g, order, alias);
  Names names;
  for (NodeId id = 0; id < r.size(); ++id) names.emplace_back(r.name(id));
  EXPECT_EQ(names, (Names{"y", "x", "a", "output"}));
  // The output's reference to a2 now names a's copy.
  EXPECT_EQ(ids(r.inputs(r.output())), (std::vector<NodeId>{2, 0}));
  // Each copy records where it came from.
  EXPECT_EQ(r.node(0).origin, y);
  EXPECT_EQ(r.node(2).origin, a);
}

TEST(GraphBuilderTest, RearrangeKeepsAnOriginAlreadyRecorded) {
  GraphBuilder b;
  const NodeId x = placeholder(b, "x");
  output(b, {x});
  Graph g = b.finish();
  g.set_origin(x, 17);
  const Graph r = GraphBuilder::rearrange(g, std::vector<NodeId>{0, 1});
  EXPECT_EQ(r.node(0).origin, 17u);
  EXPECT_EQ(r.node(1).origin, 1u);
}

}  // namespace
}  // namespace remat
