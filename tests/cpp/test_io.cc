// tests/cpp/test_io.cc — JSON format v1: round trips, one test per rejection
// rule (each asserting that the message names the node and the field), the
// writer's number and string forms, and atomic file writes.
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <dirent.h>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "remat/error.h"
#include "remat/io.h"
#include "remat/ops.h"

namespace remat {
namespace {

// A joint graph with one placeholder, the given middle nodes and an output.
std::string doc(const std::string& nodes, const std::string& extra = "") {
  return R"({"format":"remat.joint_graph","version":1,"num_fwd_outputs":1,)" + extra +
         R"("nodes":[{"name":"x","op":"placeholder","target":"x","val":{"kind":"tensor","dtype":"float32","shape":[2,3]}},)" +
         nodes + R"(]})";
}
const std::string kOutput = R"({"name":"output","op":"output","target":"output","args":[[{"node":"x"}]]})";

// Runs the reader and returns the error, failing the test if none is thrown.
Error rejected(const std::string& json) {
  try {
    read_joint_graph(json);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << json;
  return Error(ErrorCode::kInternal, "");
}

#define EXPECT_REJECTED(json, want_code, ...)                                         \
  do {                                                                           \
    Error e_ = rejected(json);                                                   \
    EXPECT_EQ(e_.code(), want_code) << e_.what();                                     \
    for (const char* s_ : {__VA_ARGS__}) {                                       \
      EXPECT_NE(std::string(e_.what()).find(s_), std::string::npos)              \
          << "message lacks '" << s_ << "': " << e_.what();                      \
    }                                                                            \
  } while (0)

std::string tiny_path() { return std::string(REMAT_EXAMPLES_DIR) + "/tiny.json"; }

// --- reading ------------------------------------------------------------------

TEST(IoRead, TinyExample) {
  JointGraph j = read_joint_graph_file(tiny_path());
  const Graph& g = j.graph;
  ASSERT_EQ(g.size(), 11u);
  EXPECT_EQ(j.num_fwd_outputs, 1);
  EXPECT_EQ(j.static_lifetime_input_indices, std::vector<int>{0});
  const NodeId mm = g.find("mm");
  ASSERT_NE(mm, kNoNode);
  EXPECT_EQ(g.node(mm).kind, NodeKind::kCallFunction);
  EXPECT_EQ(g.str(g.op(mm)->name), "aten.mm.default");
  ASSERT_EQ(g.inputs(mm).size(), 2u);
  EXPECT_EQ(g.name(g.inputs(mm)[0]), "primals_2");
  EXPECT_EQ(g.name(g.inputs(mm)[1]), "t");
  ASSERT_EQ(g.tensors(mm).size(), 1u);
  EXPECT_EQ(g.tensors(mm)[0].numel_hint, 8);
  EXPECT_EQ(g.tensors(mm)[0].itemsize, 4);
  EXPECT_EQ(g.tensors(mm)[0].storage, 3);
  EXPECT_TRUE(g.node(mm).has(kFlagTensorMeta));
  EXPECT_EQ(g.output(), 10u);
  EXPECT_EQ(g.users(g.find("relu")).size(), 2u);
}

TEST(IoRead, ShippedExamplesLoad) {
  for (const char* name : {"mlp.json", "tiny.json"}) {
    const std::string p = std::string(REMAT_EXAMPLES_DIR) + "/" + name;
    if (access(p.c_str(), R_OK) != 0) continue;  // produced concurrently
    EXPECT_NO_THROW(read_joint_graph_file(p)) << p;
  }
}

TEST(IoRead, NumelHintDefaults) {
  JointGraph j = read_joint_graph(doc(
      R"({"name":"a","op":"call_function","target":"aten.relu.default","args":[{"node":"x"}],
          "val":{"kind":"tensor","dtype":"bfloat16","shape":[{"expr":"s0","hint":5},3]}},
         {"name":"b","op":"call_function","target":"aten.relu.default","args":[{"node":"x"}],
          "val":{"kind":"tensor","dtype":"float32","shape":[{"expr":"u0"},3]}},
         {"name":"c","op":"call_function","target":"aten.relu.default","args":[{"node":"x"}],
          "val":{"kind":"tensor","dtype":"float32","shape":[4],"numel_hint":7}},)" + kOutput));
  const Graph& g = j.graph;
  EXPECT_EQ(g.tensors(g.find("a"))[0].numel_hint, 15);
  EXPECT_EQ(g.tensors(g.find("a"))[0].itemsize, 2);
  EXPECT_EQ(g.tensors(g.find("b"))[0].numel_hint, 4096);
  EXPECT_FALSE(g.shape(g.tensors(g.find("b"))[0])[0].has_hint);
  EXPECT_EQ(g.tensors(g.find("c"))[0].numel_hint, 7);
}

TEST(IoRead, ArgumentsAndMeta) {
  JointGraph j = read_joint_graph(doc(
      R"({"name":"a","op":"call_function","target":"aten.sum.dim_IntList",
          "args":[{"node":"x"},[1,-2],{"tuple":[true,null]},2.5,{"float":"-inf"},"s",
                  {"slice":[null,3,null]},{"dtype":"float16"},{"opaque":"<obj>","handle":7}],
          "kwargs":{"keepdim":true,"out":{"dict":{"k":{"node":"x"}}}},
          "val":{"kind":"sequence","items":[{"kind":"none"},{"kind":"tensor","dtype":"int64","shape":[]}]},
          "free_symbols":["s1","s0"],"impure":true,
          "meta":{"recompute":"PREFER_RECOMPUTE","ac_graph_id":3,"partitioner_tag":"weird",
                  "has_backward_hook":true,"saved_tensor_with_no_vc_check":true,"memory_budget":0.5}},)" +
      kOutput));
  const Graph& g = j.graph;
  const NodeId a = g.find("a");
  const Node& n = g.node(a);
  EXPECT_EQ(n.recompute, RecomputePolicy::kPreferRecompute);
  EXPECT_EQ(g.extra(a).ac_graph_id, 3);
  EXPECT_TRUE(n.has(kFlagAcGraphId));
  EXPECT_EQ(n.tag, PartitionerTag::kOther);
  EXPECT_EQ(g.str(g.extra(a).tag_name), "weird");
  EXPECT_TRUE(n.has(kFlagBackwardHook));
  EXPECT_TRUE(n.has(kFlagNoVcCheck));
  EXPECT_TRUE(n.has(kFlagImpure));
  EXPECT_DOUBLE_EQ(g.extra(a).memory_budget, 0.5);
  ASSERT_EQ(g.free_symbols(a).size(), 2u);
  EXPECT_EQ(g.str(g.free_symbols(a)[0]), "s0");  // sorted
  ASSERT_EQ(g.tensors(a).size(), 1u);
  EXPECT_EQ(g.tensors(a)[0].index, 1);
  EXPECT_EQ(g.tensors(a)[0].numel_hint, 1);  // a 0-d tensor
  EXPECT_EQ(g.inputs(a).size(), 1u);         // x once, though used twice
  const std::vector<ArgId> args = g.children(n.args);
  ASSERT_EQ(args.size(), 9u);
  EXPECT_EQ(g.arg(args[1]).kind, ArgKind::kList);
  EXPECT_EQ(g.arg(args[2]).kind, ArgKind::kTuple);
  EXPECT_EQ(g.arg(args[3]).kind, ArgKind::kFloat);
  EXPECT_TRUE(std::isinf(g.arg(args[4]).f));
  EXPECT_EQ(g.arg(args[5]).kind, ArgKind::kStr);
  EXPECT_EQ(g.arg(args[6]).kind, ArgKind::kSlice);
  EXPECT_EQ(g.arg(args[7]).kind, ArgKind::kDtype);
  EXPECT_EQ(g.arg(args[8]).kind, ArgKind::kOpaque);
  EXPECT_EQ(g.arg(args[8]).i, 7);
  EXPECT_EQ(g.children(n.kwargs).size(), 4u);
}

TEST(IoRead, OpTableAndCategoryOverrides) {
  JointGraph j = read_joint_graph(doc(
      R"({"name":"a","op":"call_function","target":"mylib.foo.default","args":[{"node":"x"}],
          "val":{"kind":"tensor","dtype":"float32","shape":[2,3]}},)" + kOutput,
      R"("ops":[{"name":"mylib.foo.default","kind":"overload","namespace":"mylib","packet":"mylib.foo",
                 "mutable":true,"view":false,"returns":1,"tags":["pointwise","core"],
                 "packet_tags":["pointwise"],"mutable_args":["out"],
                 "categories":["recomputable","fusible"]}],)"));
  const Graph& g = j.graph;
  const OpInfo* op = g.op(g.find("a"));
  ASSERT_NE(op, nullptr);
  EXPECT_TRUE(op->is_mutable);
  EXPECT_EQ(op->num_returns, 1);
  EXPECT_EQ(op->tags, kTagPointwise);
  ASSERT_EQ(g.mutable_args(*op).size(), 1u);
  EXPECT_EQ(g.str(g.mutable_args(*op)[0]), "out");
  ASSERT_EQ(j.op_overrides.size(), 1u);
  EXPECT_EQ(j.op_overrides[0].first, "mylib.foo");
  EXPECT_EQ(j.op_overrides[0].second, kCatRecomputable | kCatFusible);
}

TEST(IoRead, PacketOps) {
  JointGraph j = read_joint_graph(doc(
      R"({"name":"a","op":"call_function","target":"aten.rand","args":[[3]],
          "val":{"kind":"tensor","dtype":"float32","shape":[3]}},)" + kOutput,
      R"("ops":[{"name":"aten.rand","kind":"packet","namespace":"aten","packet":"aten.rand",
                 "mutable":false,"view":false,"tags":["nondeterministic_seeded"],
                 "packet_tags":["nondeterministic_seeded"],"mutable_args":[]}],)"));
  const OpInfo* op = j.graph.op(j.graph.find("a"));
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->kind, OpKind::kPacket);
  EXPECT_EQ(op->tags, kTagNondeterministicSeeded);
  EXPECT_NE(write_joint_graph(j).find(R"("name":"aten.rand","kind":"packet")"), std::string::npos);
}

TEST(IoRead, UnknownDtypeWithItemsizeIsAccepted) {
  JointGraph j = read_joint_graph(doc(
      R"({"name":"a","op":"call_function","target":"aten.relu.default","args":[{"node":"x"}],
          "val":{"kind":"tensor","dtype":"float6_e3m2","itemsize":1,"shape":[8]}},)" + kOutput));
  EXPECT_EQ(j.graph.tensors(j.graph.find("a"))[0].itemsize, 1);
}

// --- rejection rules: one test each --------------------------------------------

TEST(IoReject, InvalidJson) {
  EXPECT_REJECTED("{\"format\": ", ErrorCode::kParse, "invalid JSON");
}

TEST(IoReject, TruncatedJson) {
  const std::string text = read_file(tiny_path());
  // Every prefix must be rejected cleanly (most are invalid JSON; none crash).
  for (size_t n = 0; n + 1 < text.size(); n += 7) {
    EXPECT_THROW(read_joint_graph(text.substr(0, n)), Error) << n;
  }
  EXPECT_REJECTED(text.substr(0, text.size() / 2), ErrorCode::kParse, "invalid JSON");
}

TEST(IoReject, RandomGarbageNeverCrashes) {
  const std::string text = read_file(tiny_path());
  std::mt19937 rng(12345);
  for (int round = 0; round < 300; ++round) {
    std::string s = text;
    // Flip a few bytes to printable junk; most results are invalid, some are
    // valid JSON with wrong fields; all must end in an Error or a graph.
    for (int k = 0; k < 1 + round % 5; ++k) s[rng() % s.size()] = static_cast<char>(32 + rng() % 95);
    try {
      read_joint_graph(s);
    } catch (const Error&) {
    }
  }
  for (int round = 0; round < 100; ++round) {
    std::string s(rng() % 200, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    EXPECT_THROW(read_joint_graph(s), Error);
  }
}

TEST(IoReject, NotAnObject) {
  EXPECT_REJECTED("[1,2]", ErrorCode::kParse, "expected an object");
}

TEST(IoReject, WrongFormat) {
  EXPECT_REJECTED(R"({"format":"other","version":1,"num_fwd_outputs":0,"nodes":[]})",
                  ErrorCode::kParse, "field 'format'", "other");
}

TEST(IoReject, BadVersion) {
  EXPECT_REJECTED(R"({"format":"remat.joint_graph","version":2,"num_fwd_outputs":0,"nodes":[]})",
                  ErrorCode::kUnsupported, "field 'version'", "2");
}

TEST(IoReject, MissingTopLevelField) {
  EXPECT_REJECTED(R"({"format":"remat.joint_graph","version":1,"nodes":[]})", ErrorCode::kParse,
                  "field 'num_fwd_outputs'", "missing");
}

TEST(IoReject, MissingNodeField) {
  EXPECT_REJECTED(doc(R"({"name":"a","target":"aten.relu.default"},)" + kOutput), ErrorCode::kParse,
                  "node 'a'", "field 'op'", "missing");
}

TEST(IoReject, NamelessNode) {
  EXPECT_REJECTED(doc(R"({"op":"call_function","target":"aten.relu.default"},)" + kOutput),
                  ErrorCode::kParse, "node #1", "field 'name'");
}

TEST(IoReject, WrongType) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default","args":"x"},)" +
                      kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'args'", "expected an array, got a string");
}

TEST(IoReject, WrongTypeInValue) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"tensor","dtype":"float32","shape":[2.5]}},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'val.shape'");
}

TEST(IoRead, StreamSyncMarksAControlDepsAndRoundTrips) {
  const JointGraph j = read_joint_graph(doc(
      R"({"name":"sg","op":"get_attr","target":"subgraph_record_event_0"},
         {"name":"control_deps","op":"call_function","target":"higher_order.control_deps",
          "args":[{"tuple":[{"node":"x"}]},{"node":"sg"},{"node":"x"}],"stream_sync":true},)" +
      kOutput));
  EXPECT_TRUE(j.graph.node(j.graph.find("control_deps")).has(kFlagStreamSync));
  EXPECT_FALSE(j.graph.node(j.graph.find("sg")).has(kFlagStreamSync));
  const std::string text = write_joint_graph(j);
  EXPECT_NE(text.find(R"("stream_sync":true)"), std::string::npos) << text;
  EXPECT_TRUE(read_joint_graph(text).graph.node(j.graph.find("control_deps")).has(kFlagStreamSync));
}

TEST(IoReject, StreamSyncMustBeABool) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"higher_order.control_deps",
                          "stream_sync":1},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'stream_sync'");
}

TEST(IoReject, UnknownNodeOp) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_module","target":"m"},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'op'", "call_module");
}

TEST(IoReject, UnknownOpKind) {
  EXPECT_REJECTED(doc(kOutput, R"("ops":[{"name":"aten.foo.default","kind":"method"}],)"),
                  ErrorCode::kParse, "op 'aten.foo.default'", "field 'kind'", "method");
}

TEST(IoReject, UnknownCategory) {
  EXPECT_REJECTED(doc(kOutput, R"("ops":[{"name":"aten.foo.default","categories":["cheap"]}],)"),
                  ErrorCode::kParse, "op 'aten.foo.default'", "field 'categories'", "cheap");
}

TEST(IoReject, ConflictingCategories) {
  EXPECT_REJECTED(doc(kOutput, R"("ops":[{"name":"aten.foo.a","packet":"aten.foo","categories":["view"]},
                                         {"name":"aten.foo.b","packet":"aten.foo","categories":["random"]}],)"),
                  ErrorCode::kInvalidGraph, "op 'aten.foo.b'", "field 'categories'");
}

TEST(IoReject, DuplicateOp) {
  EXPECT_REJECTED(doc(kOutput, R"("ops":[{"name":"aten.foo.a"},{"name":"aten.foo.a"}],)"),
                  ErrorCode::kInvalidGraph, "op 'aten.foo.a'", "twice");
}

TEST(IoReject, UnknownRecomputePolicy) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "meta":{"recompute":"SOMETIMES"}},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'meta.recompute'", "SOMETIMES");
}

TEST(IoReject, UnknownValueKind) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"ndarray"}},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'val.kind'", "ndarray");
}

TEST(IoReject, UnknownArgTag) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "args":[{"nod":"x"}]},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'args'", "unknown argument tag 'nod'");
}

TEST(IoReject, FloatBitsOfANonNan) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.mul.Tensor",
                          "args":[{"node":"x"},{"float":"nan","bits":"3ff0000000000000"}]},)" +
                      kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'args'", "16 hex digits of a NaN");
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.mul.Tensor",
                          "args":[{"node":"x"},{"float":"inf","bits":"fff8000000000000"}]},)" +
                      kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'args'", "for a NaN only");
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.mul.Tensor",
                          "args":[{"node":"x"},{"float":"nan","bits":"fff8"}]},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'args'", "'fff8'");
}

TEST(IoReject, MalformedCustomContext) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.sin.default",
                          "args":[{"node":"x"}],"meta":{"custom_context":[1,null]}},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'meta.custom_context'",
                  "[stream, mempool, mempool_device]");
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.sin.default",
                          "args":[{"node":"x"}],"meta":{"custom_context":[1.5,null,null]}},)" +
                      kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'meta.custom_context'");
}

TEST(IoReject, DanglingReference) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "args":[{"node":"y"}]},)" + kOutput),
                  ErrorCode::kInvalidGraph,
                  "node 'a': field 'args': refers to 'y', which does not exist");
}

TEST(IoReject, DanglingReferenceInKwargs) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "kwargs":{"out":{"node":"zz"}}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'kwargs'", "'zz'");
}

TEST(IoReject, DuplicateName) {
  EXPECT_REJECTED(doc(R"({"name":"x","op":"placeholder","target":"x2"},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'x'", "duplicate name");
}

TEST(IoReject, EmptyName) {
  EXPECT_REJECTED(doc(R"({"name":"","op":"placeholder","target":"x2"},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node #1", "field 'name'", "empty");
}

TEST(IoReject, Cycle) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default","args":[{"node":"b"}]},
                         {"name":"b","op":"call_function","target":"aten.relu.default","args":[{"node":"a"}]},)" +
                      kOutput),
                  ErrorCode::kInvalidGraph, "cycle", "'a'", "'b'");
}

TEST(IoReject, SelfCycle) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default","args":[{"node":"a"}]},)" +
                      kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "uses itself");
}

TEST(IoReject, NotTopologicalOrder) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default","args":[{"node":"b"}]},
                         {"name":"b","op":"call_function","target":"aten.relu.default","args":[{"node":"x"}]},)" +
                      kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "'b'", "topological order");
}

TEST(IoReject, NegativeSize) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"tensor","dtype":"float32","shape":[2,-1]}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'val.shape'", "negative size -1");
}

TEST(IoRead, NestedIntHintIsNoNumber) {
  // A jagged tensor's ragged size: a SymInt hinted by a nested int.
  JointGraph j = read_joint_graph(doc(
      R"({"name":"s","op":"placeholder","target":"s","val":{"kind":"symint","expr":"s1","hint":{"nested_int":"2*j1"}}},)"
      R"({"name":"a","op":"call_function","target":"aten.relu.default","val":{"kind":"tensor","dtype":"float32","shape":[{"expr":"s1","hint":{"nested_int":"j1"}}]}},)" +
      kOutput));
  const Graph& g = j.graph;
  const NodeExtra& x = g.extra(g.find("s"));
  EXPECT_FALSE(x.has_sym_hint);
  EXPECT_EQ(g.str(x.nested_hint), "2*j1");
  const TensorMeta& t = g.tensors(g.find("a"))[0];
  EXPECT_FALSE(g.shape(t)[0].has_hint);
}

TEST(IoRead, SubgraphsAreReadAsNestedGraphs) {
  const std::string top = doc(kOutput);
  JointGraph j = read_joint_graph(top.substr(0, top.size() - 1) +
      R"(,"subgraphs":[{"name":"outer.body","nodes":[
        {"name":"a","op":"placeholder","target":"a"},
        {"name":"sin","op":"call_function","target":"aten.sin.default","args":[{"node":"a"}],"meta":{"region_memory_budget":0.5}},
        {"name":"output","op":"output","target":"output","args":[[{"node":"sin"}]]}]}]})");
  ASSERT_EQ(j.nested.size(), 1u);
  EXPECT_EQ(j.nested[0].name, "outer.body");
  const Graph& b = j.nested[0].graph;
  ASSERT_EQ(b.size(), 3u);
  EXPECT_TRUE(b.node(b.find("sin")).has(kFlagRegionBudget));
  // Written back in the same form.
  const JointGraph again = read_joint_graph(write_joint_graph(j));
  ASSERT_EQ(again.nested.size(), 1u);
  EXPECT_EQ(write_joint_graph(again), write_joint_graph(j));
}

TEST(IoReject, ErrorsInsideASubgraphNameIt) {
  const std::string top = doc(kOutput);
  EXPECT_REJECTED(top.substr(0, top.size() - 1) +
                      R"(,"subgraphs":[{"name":"body0","nodes":[
        {"name":"sin","op":"call_function","target":"aten.sin.default","args":[{"node":"nope"}]},
        {"name":"output","op":"output","target":"output","args":[[{"node":"sin"}]]}]}]})",
                  ErrorCode::kInvalidGraph, "subgraph 'body0'", "node 'sin'", "nope");
  EXPECT_REJECTED(top.substr(0, top.size() - 1) + R"(,"subgraphs":[{"nodes":[]}]})",
                  ErrorCode::kParse, "subgraphs[0]", "field 'name'");
}

TEST(IoReject, HintObjectWithoutNestedInt) {
  EXPECT_REJECTED(doc(R"({"name":"s","op":"placeholder","target":"s","val":{"kind":"symint","expr":"s1","hint":{"j":1}}},)" + kOutput),
                  ErrorCode::kParse, "node 's'", "field 'val.hint'", "nested_int");
}

TEST(IoReject, NegativeSymbolicHint) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"tensor","dtype":"float32","shape":[{"expr":"s0","hint":-4}]}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'val.shape'", "negative");
}

TEST(IoReject, NegativeNumelHint) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"tensor","dtype":"float32","shape":[2],"numel_hint":-2}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'val.numel_hint'");
}

TEST(IoReject, OverflowingSize) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"tensor","dtype":"float32","shape":[4294967296,4294967296]}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'val.shape'", "overflows");
}

TEST(IoReject, OverflowingBytes) {
  // numel fits in int64; numel * itemsize does not.
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"sequence","items":[{"kind":"tensor","dtype":"float64","shape":[4611686018427387904]}]}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'val.items.shape'", "overflows");
}

TEST(IoReject, IntegerOutsideInt64) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.add.Scalar",
                          "args":[{"node":"x"},18446744073709551615]},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'args'", "signed 64-bit");
}

TEST(IoReject, IntegerBeyondUint64) {
  const Error e = rejected(doc(R"({"name":"a","op":"call_function","target":"aten.add.Scalar",
                                  "args":[{"node":"x"},123456789012345678901234567890]},)" + kOutput));
  EXPECT_TRUE(e.code() == ErrorCode::kParse || e.code() == ErrorCode::kInvalidGraph) << e.what();
}

TEST(IoReject, MissingOutputNode) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default","args":[{"node":"x"}]})"),
                  ErrorCode::kInvalidGraph, "no output node");
}

TEST(IoReject, OutputNotLast) {
  EXPECT_REJECTED(doc(kOutput + R"(,{"name":"a","op":"call_function","target":"aten.relu.default"})"),
                  ErrorCode::kInvalidGraph, "output", "not the last");
}

TEST(IoReject, UnknownDtypeWithoutItemsize) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"tensor","dtype":"float6_e3m2","shape":[2]}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'val.dtype'", "float6_e3m2", "itemsize");
}

TEST(IoReject, StrideRankMismatch) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "val":{"kind":"tensor","dtype":"float32","shape":[2,3],"stride":[1]}},)" + kOutput),
                  ErrorCode::kInvalidGraph, "node 'a'", "field 'val.stride'");
}

TEST(IoReject, BadSlice) {
  EXPECT_REJECTED(doc(R"({"name":"a","op":"call_function","target":"aten.relu.default",
                          "args":[{"slice":[1,2]}]},)" + kOutput),
                  ErrorCode::kParse, "node 'a'", "field 'args'", "slice");
}

// --- writing --------------------------------------------------------------------

TEST(IoWrite, RoundTripIsByteIdentical) {
  // The first write canonicalizes; from then on JSON -> Graph -> JSON is the
  // identity.
  for (const char* name : {"tiny.json", "mlp.json", "mlp_dynamic.json", "checkpointed.json",
                           "cnn_batchnorm.json", "transformer_block.json"}) {
    const std::string p = std::string(REMAT_EXAMPLES_DIR) + "/" + name;
    if (access(p.c_str(), R_OK) != 0) continue;
    const std::string once = write_joint_graph(read_joint_graph_file(p));
    const std::string twice = write_joint_graph(read_joint_graph(once));
    EXPECT_EQ(once, twice) << name;
  }
}

TEST(IoWrite, CanonicalDocumentIsAFixedPoint) {
  const std::string canonical = R"({
  "format":"remat.joint_graph",
  "version":1,
  "num_fwd_outputs":1,
  "static_lifetime_input_indices":[0],
  "ops":[
    {"name":"aten.relu.default","kind":"overload","namespace":"aten","packet":"aten.relu","mutable":false,"view":false,"returns":1,"tags":["pointwise"],"packet_tags":["pointwise"],"mutable_args":[],"categories":["recomputable","fusible"]},
    {"name":"aten.sym_size.int","kind":"overload","namespace":"aten","packet":"aten.sym_size","mutable":false,"view":false,"tags":[],"packet_tags":[],"mutable_args":[]}
  ],
  "nodes":[
    {"name":"x","op":"placeholder","target":"x","val":{"kind":"tensor","dtype":"float32","shape":[{"expr":"s0","hint":4},3],"stride":[3,1],"device":"cuda:0","storage":0},"tensor_meta":true,"free_symbols":["s0"]},
    {"name":"sym_size_int","op":"call_function","target":"aten.sym_size.int","args":[{"node":"x"},0],"val":{"kind":"symint","expr":"s0","hint":4},"free_symbols":["s0"],"binds_symbol":"s0"},
    {"name":"relu","op":"call_function","target":"aten.relu.default","args":[{"node":"x"},1.0,1e-05,{"float":"nan"},"a\"b\\c\n\u0001é",{"tuple":[null,true,-3]},{"slice":[null,2,null]},{"dtype":"float16"},{"device":"cpu"},{"layout":"strided"},{"memory_format":"contiguous_format"},{"target":"aten.add.Tensor"},{"opaque":"<pg>","handle":3},{"opaque":"<x>"}],"kwargs":{"k":[1,2],"d":{"dict":{"z":{"node":"sym_size_int"}}}},"val":{"kind":"sequence","items":[{"kind":"none"},{"kind":"tensor","dtype":"weird","itemsize":3,"shape":[{"expr":"u0"}],"numel_hint":10}]},"impure":true,"meta":{"recompute":"MUST_SAVE","ac_graph_id":2,"partitioner_tag":"is_backward","has_backward_hook":true,"saved_tensor_with_no_vc_check":true,"memory_budget":0.25}},
    {"name":"c","op":"get_attr","target":"_tensor_constant0","val":{"kind":"constant","repr":"3"}},
    {"name":"ragged","op":"placeholder","target":"ragged","val":{"kind":"symint","expr":"s1","hint":{"nested_int":"j1"}},"free_symbols":["s1"]},
    {"name":"output","op":"output","target":"output","args":[[{"node":"relu"},{"node":"c"},null,64]]}
  ]
}
)";
  const std::string written = write_joint_graph(read_joint_graph(canonical));
  EXPECT_EQ(written, canonical);
}

TEST(IoWrite, ReleaseFactsRoundTrip) {
  // What torch releases read differently: an op's dropout_p (2.14), a
  // device value (2.15), the raw-expression symbols and bindings (2.14).
  const std::string canonical = R"({
  "format":"remat.joint_graph",
  "version":1,
  "num_fwd_outputs":1,
  "static_lifetime_input_indices":[],
  "ops":[
    {"name":"aten._scaled_dot_product_flash_attention_for_cpu.default","kind":"overload","namespace":"aten","packet":"aten._scaled_dot_product_flash_attention_for_cpu","mutable":false,"view":false,"returns":2,"tags":["nondeterministic_seeded"],"packet_tags":["nondeterministic_seeded"],"mutable_args":[],"dropout_p":{"index":3,"default":0.0}},
    {"name":"aten._efficient_attention_forward.default","kind":"overload","namespace":"aten","packet":"aten._efficient_attention_forward","mutable":false,"view":false,"tags":["nondeterministic_seeded"],"packet_tags":["nondeterministic_seeded"],"mutable_args":[],"dropout_p":{"index":8}},
    {"name":"coor.current_device.default","kind":"overload","namespace":"coor","packet":"coor.current_device","mutable":false,"view":false,"returns":1,"tags":[],"packet_tags":[],"mutable_args":[]}
  ],
  "nodes":[
    {"name":"x","op":"placeholder","target":"x","val":{"kind":"tensor","dtype":"float32","shape":[{"expr":"s0","hint":4}],"stride":[1],"device":"cpu","storage":0},"tensor_meta":true,"free_symbols":["s0"],"free_symbols_unreplaced":["s1"]},
    {"name":"n","op":"placeholder","target":"n","val":{"kind":"symint","expr":"s0","hint":4},"free_symbols":["s0"],"binds_symbol":"s0","free_symbols_unreplaced":["s1"],"binds_symbol_unreplaced":"s1"},
    {"name":"u","op":"placeholder","target":"u","val":{"kind":"symint","expr":"u0"},"free_symbols":["u0"],"binds_symbol":"u0","binds_symbol_unreplaced":null},
    {"name":"sdpa","op":"call_function","target":"aten._scaled_dot_product_flash_attention_for_cpu.default","args":[{"node":"x"},{"node":"x"},{"node":"x"}],"val":{"kind":"sequence","items":[{"kind":"tensor","dtype":"float32","shape":[4],"stride":[1],"device":"cpu","storage":1},{"kind":"tensor","dtype":"float32","shape":[4],"stride":[1],"device":"cpu","storage":2}]}},
    {"name":"eff","op":"call_function","target":"aten._efficient_attention_forward.default","args":[{"node":"x"},{"node":"x"},{"node":"x"}],"val":{"kind":"none"}},
    {"name":"dev","op":"call_function","target":"coor.current_device.default","val":{"kind":"device","device":"cuda:1"}},
    {"name":"mode","op":"get_attr","target":"mode","val":{"kind":"constant","repr":"<Mode.A: 1>","scalar":false}},
    {"name":"output","op":"output","target":"output","args":[[{"node":"x"},{"node":"dev"}]]}
  ]
}
)";
  const JointGraph j = read_joint_graph(canonical);
  const Graph& g = j.graph;
  const OpInfo& sdpa = *g.op(g.find("sdpa"));
  EXPECT_EQ(sdpa.dropout_p_index, 3);
  EXPECT_TRUE(sdpa.dropout_p_has_default);
  const OpInfo& eff = *g.op(g.find("eff"));
  EXPECT_EQ(eff.dropout_p_index, 8);
  EXPECT_FALSE(eff.dropout_p_has_default);
  EXPECT_EQ(g.node(g.find("dev")).value, ValueKind::kDevice);
  EXPECT_EQ(g.str(g.extra(g.find("dev")).device), "cuda:1");
  EXPECT_TRUE(g.node(g.find("mode")).has(kFlagNonScalarConstant));
  const NodeId n = g.find("n");
  EXPECT_EQ(g.str(g.binds_symbol(n, false)), "s0");
  EXPECT_EQ(g.str(g.binds_symbol(n, true)), "s1");
  EXPECT_EQ(g.binds_symbol(g.find("u"), true), 0u);
  ASSERT_EQ(g.unreplaced_symbols(g.find("x")).size(), 1u);
  EXPECT_EQ(g.str(g.unreplaced_symbols(g.find("x"))[0]), "s1");
  EXPECT_EQ(write_joint_graph(j), canonical);
}

TEST(IoReject, DropoutPWithoutIndex) {
  EXPECT_REJECTED(
      doc(kOutput, R"("ops":[{"name":"aten.foo.default","dropout_p":{"default":0.0}}],)"),
      ErrorCode::kParse, "op 'aten.foo.default'", "field 'dropout_p.index'", "missing");
}

TEST(IoReject, DeviceValueWithoutDevice) {
  EXPECT_REJECTED(doc(R"({"name":"d","op":"call_function","target":"coor.current_device.default",
                         "val":{"kind":"device"}},)" + kOutput),
                  ErrorCode::kParse, "node 'd'", "field 'val.device'", "missing");
}

TEST(IoWrite, FloatsAlwaysReadBackAsFloats) {
  JointGraph j = read_joint_graph(doc(
      R"({"name":"a","op":"call_function","target":"aten.add.Scalar",
          "args":[{"node":"x"},3.0,1e300,-0.0,0.1,{"float":"inf"}]},)" + kOutput));
  const std::string text = write_joint_graph(j);
  EXPECT_NE(text.find(R"([{"node":"x"},3.0,1e+300,-0.0,0.1,{"float":"inf"}])"), std::string::npos)
      << text;
  JointGraph back = read_joint_graph(text);
  const std::vector<ArgId> args = back.graph.children(back.graph.node(back.graph.find("a")).args);
  for (size_t i = 1; i < args.size(); ++i) EXPECT_EQ(back.graph.arg(args[i]).kind, ArgKind::kFloat);
}

TEST(IoWrite, NanBitsRoundTrip) {
  // A NaN with its sign bit set keeps it; Python's float("nan") needs no bits.
  JointGraph j = read_joint_graph(doc(
      R"({"name":"a","op":"call_function","target":"aten.mul.Tensor",
          "args":[{"node":"x"},{"float":"nan","bits":"fff8000000000001"},{"float":"nan"}]},)" +
      kOutput));
  const Graph& g = j.graph;
  const std::vector<ArgId> args = g.children(g.node(g.find("a")).args);
  EXPECT_EQ(std::bit_cast<uint64_t>(g.arg(args[1]).f), 0xfff8000000000001ull);
  EXPECT_EQ(std::bit_cast<uint64_t>(g.arg(args[2]).f), 0x7ff8000000000000ull);
  const std::string text = write_joint_graph(j);
  EXPECT_NE(text.find(R"({"float":"nan","bits":"fff8000000000001"},{"float":"nan"}])"),
            std::string::npos)
      << text;
}

TEST(IoWrite, CustomContextRoundTrip) {
  JointGraph j = read_joint_graph(doc(
      R"x({"name":"a","op":"call_function","target":"aten.sin.default","args":[{"node":"x"}],
          "meta":{"custom_context":[ 1, null, "(0, 1)" ]}},)x" + kOutput));
  EXPECT_EQ(j.graph.str(j.graph.extra(j.graph.find("a")).custom_context),
            R"x([1,null,"(0, 1)"])x");
  EXPECT_NE(write_joint_graph(j).find(R"x("meta":{"custom_context":[1,null,"(0, 1)"]})x"),
            std::string::npos);
}

TEST(IoWrite, ResultNamesOriginsAndDecisions) {
  JointGraph joint = read_joint_graph_file(tiny_path());
  const Graph& g = joint.graph;
  PartitionResult r;
  {
    // A forward that computes relu from mm and returns it plus the saved mm.
    GraphBuilder b;
    Node x;
    x.name = b.intern("primals_2");
    x.kind = NodeKind::kPlaceholder;
    x.target = x.name;
    x.origin = g.find("primals_2");
    const NodeId xi = b.add_node(x);
    Node out;
    out.name = b.intern("output");
    out.kind = NodeKind::kOutput;
    out.target = out.name;
    out.args = b.begin(ArgKind::kTuple);
    const ArgId list = b.begin(ArgKind::kList);
    Arg ref;
    ref.kind = ArgKind::kNode;
    ref.id = xi;
    b.leaf(ref);
    b.end(list);
    b.end(out.args);
    b.add_node(out);
    r.forward = b.finish();
  }
  r.partitioner = "min_cut";
  r.num_fwd_outputs = 1;
  r.saved_values = {g.find("relu")};
  r.decisions.resize(g.size());
  r.decisions[g.find("relu")].where = NodeDecision::Where::kSaved;
  r.decisions[g.find("mm")].where = NodeDecision::Where::kForwardOnly;
  r.decisions[g.find("mm")].ban_reason = "compute-intensive";
  r.decisions[g.find("t_1")].where = NodeDecision::Where::kRemoved;
  r.decisions[g.find("t_1")].merged_into = g.find("t");
  r.seconds = 0.75;
  r.stages = {{"prepare", 0.25}, {"decide", 0.5}};
  const std::string text = write_result(joint, r, /*timings=*/true);
  EXPECT_NE(text.find(R"("seconds":0.75)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("stages":{"prepare":0.25,"decide":0.5})"), std::string::npos) << text;
  // Without timings, the only fields that differ between runs are left out.
  const std::string plain = write_result(joint, r);
  EXPECT_EQ(plain.find("\"seconds\""), std::string::npos) << plain;
  EXPECT_EQ(plain.find("\"stages\""), std::string::npos) << plain;
  EXPECT_NE(text.find(R"("format":"remat.partition_result")"), std::string::npos);
  EXPECT_NE(text.find(R"("saved_values":["relu"])"), std::string::npos);
  EXPECT_NE(text.find(R"("origin":"primals_2")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("relu":{"where":"saved"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("mm":{"where":"forward_only","ban":"compute-intensive"})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("merged_into":"t")"), std::string::npos) << text;
  EXPECT_EQ(text, write_result(joint, r, true));  // deterministic

  PartitionResult bad = r;
  bad.saved_values = {999};
  EXPECT_THROW(write_result(joint, bad), Error);
}

// --- files ----------------------------------------------------------------------

std::string temp_dir() {
  char tmpl[] = "/tmp/remat_io_test_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

size_t count_entries(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

TEST(IoFile, AtomicWriteAndRead) {
  const std::string dir = temp_dir();
  const std::string p = dir + "/out.json";
  write_file_atomic(p, "first");
  write_file_atomic(p, "second");
  EXPECT_EQ(read_file(p), "second");
  EXPECT_EQ(count_entries(dir), 1u);  // no temporary file left
  struct stat st {};
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_IRUSR, 0u);
  std::remove(p.c_str());
  rmdir(dir.c_str());
}

TEST(IoFile, WriteFailureNamesPathAndLeavesNothing) {
  const std::string dir = temp_dir();
  try {
    write_file_atomic(dir + "/missing/out.json", "x");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("missing/out.json"), std::string::npos) << e.what();
  }
  // Renaming onto a directory fails after the temporary file was written.
  mkdir((dir + "/taken").c_str(), 0755);
  EXPECT_THROW(write_file_atomic(dir + "/taken", "x"), Error);
  EXPECT_EQ(count_entries(dir), 1u);
  rmdir((dir + "/taken").c_str());
  rmdir(dir.c_str());
}

TEST(IoFile, ReadMissingFileNamesPath) {
  try {
    read_file("/nonexistent/remat.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/remat.json"), std::string::npos);
  }
  EXPECT_THROW(read_joint_graph_file("/nonexistent/remat.json"), Error);
}

}  // namespace
}  // namespace remat
