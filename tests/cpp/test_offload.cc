// tests/cpp/test_offload.cc — activation offloading (rewrite/offload.h), one
// rule per test, through the partitioners as torch runs it. Expected graphs
// are what torch 2.13's enable_activation_offloading gives on the same joint
// graphs (tests/python/test_offload_parity.py checks the same rules live).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/partition.h"
#include "remat/torch_release.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using Names = std::vector<std::string>;

Names names(const Graph& g) { return testing::node_names(g); }
Names outputs(const Graph& g) { return testing::output_names(g); }

// A node's args on one line, as the expectations below spell them.
std::string args(const Graph& g, NodeId id) {
  std::string out;
  for (const std::string& a : testing::arg_texts(g, id)) out += (out.empty() ? "" : ", ") + a;
  return out;
}

std::string device_of(const Graph& g, std::string_view name) {
  return std::string(g.str(g.tensors(g.find(name)).front().device));
}

// Forward: a = relu(p1), b = sin(p2), v = view(a), s = sum(v), c = mul(a, b),
// o = add(c, s). Backward: mul(t, b), mul(t, a), mul(t, v). Every tensor is
// on cuda:0 and tagged forward / backward as AOTAutograd tags them; the
// default partitioner saves relu, sin and view.
struct Case {
  TestGraph t;
  Ref p1, p2, relu, sin, view, sum, mul, add;
};

Case make_case() {
  Case c;
  TestGraph& t = c.t;
  c.p1 = t.placeholder("primals_1", {4, 8});
  c.p2 = t.placeholder("primals_2", {4, 8});
  Ref t1 = t.placeholder("tangents_1", {4, 8});
  c.relu = t.call("aten.relu.default", {c.p1}, {4, 8});
  c.sin = t.call("aten.sin.default", {c.p2}, {4, 8});
  c.view = t.call("aten.view.default", {c.relu, A::list({32})}, {32});
  c.sum = t.call("aten.sum.default", {c.view}, {}, "sum_1");  // FX avoids the builtin
  c.mul = t.call("aten.mul.Tensor", {c.relu, c.sin}, {4, 8});
  c.add = t.call("aten.add.Tensor", {c.mul, c.sum}, {4, 8});
  Ref g1 = t.call("aten.mul.Tensor", {t1, c.sin}, {4, 8});
  Ref g2 = t.call("aten.mul.Tensor", {t1, c.relu}, {4, 8});
  Ref g3 = t.call("aten.mul.Tensor", {t1, c.view}, {32});
  t.output({A::tuple({c.add, g1, g2, g3})});
  for (Ref r : {c.relu, c.sin, c.view, c.sum, c.mul, c.add}) t[r].tag = PartitionerTag::kIsForward;
  for (Ref r : {g1, g2, g3}) t[r].tag = PartitionerTag::kIsBackward;
  for (Ref r : {c.p1, c.p2, t1, c.relu, c.sin, c.view, c.sum, c.mul, c.add, g1, g2, g3}) {
    testing::TensorSpec& ts = t[r].tensors.at(0);
    ts.device = "cuda:0";
    ts.stride.clear();
    int64_t s = 1;
    ts.stride.assign(ts.shape.size(), 0);
    for (size_t k = ts.shape.size(); k-- > 0;) {
      ts.stride[k] = s;
      s *= ts.shape[k];
    }
  }
  return c;
}

void mark(Case& c, std::initializer_list<Ref> refs) {
  for (Ref r : refs) c.t[r].flags |= kFlagShouldOffload;
}

JointGraph joint_of(const Case& c) {
  JointGraph j;
  j.graph = c.t.build();
  j.num_fwd_outputs = 1;
  return j;
}

PartitionOptions offloading(bool separate_stream = false) {
  PartitionOptions o;
  o.enable_activation_offloading = true;
  o.activation_offload_separate_stream = separate_stream;
  return o;
}

TEST(OffloadTest, SavedActivationsGoToTheCpuAfterTheirLastEffectiveUse) {
  Case c = make_case();
  mark(c, {c.relu, c.sin});
  PartitionResult r = default_partition(joint_of(c), offloading());
  const Graph& fw = r.forward;
  // relu lives on through its view until sum, and both end at mul: the two
  // offloads follow mul, the later one first (FX's inserting_after).
  EXPECT_EQ(names(fw), (Names{"primals_1", "primals_2", "relu", "sin", "view", "sum_1", "mul",
                              "cpu_offload_sin", "cpu_offload_relu", "add", "output"}));
  EXPECT_EQ(outputs(fw), (Names{"add", "cpu_offload_relu", "cpu_offload_sin", "view"}));
  const NodeId put = fw.find("cpu_offload_relu");
  EXPECT_EQ(fw.str(fw.op(put)->name), "prims.device_put.default");
  EXPECT_EQ(args(fw, put), "relu, device:cpu");
  const Arg& kw = fw.arg(fw.children(fw.node(put).kwargs).at(1));
  EXPECT_EQ(kw.kind, ArgKind::kBool);
  EXPECT_EQ(kw.i, 1);  // non_blocking=True
  EXPECT_EQ(device_of(fw, "cpu_offload_relu"), "cpu");
  EXPECT_TRUE(fw.node(fw.find("relu")).has(kFlagSavedForOffloading));
  EXPECT_EQ(fw.node(put).origin, kCreatedNode);
  // The saved values are still named by their joint nodes.
  EXPECT_EQ(testing::saved_names(joint_of(c), r), (Names{"relu", "sin", "view"}));
}

TEST(OffloadTest, BackwardReceivesCpuCopiesAndReloadsBeforeFirstUse) {
  Case c = make_case();
  mark(c, {c.relu, c.sin});
  PartitionResult r = default_partition(joint_of(c), offloading());
  const Graph& bw = r.backward;
  EXPECT_EQ(names(bw), (Names{"cpu_offload_relu", "cpu_offload_sin", "view", "tangents_1",
                              "gpu_reload_sin", "mul_1", "gpu_reload_relu", "mul_2", "mul_3",
                              "output"}));
  const NodeId p = bw.find("cpu_offload_relu");
  EXPECT_EQ(bw.str(bw.node(p).target), "cpu_offload_relu");
  EXPECT_TRUE(bw.node(p).has(kFlagSavedForOffloading));
  EXPECT_EQ(device_of(bw, "cpu_offload_relu"), "cpu");
  const NodeExtra& x = bw.extra(p);
  ASSERT_LT(x.original_tensor, bw.values().sizes().tensors);
  EXPECT_EQ(bw.str(bw.values().tensors(x.original_tensor)->device), "cuda:0");
  EXPECT_EQ(args(bw, bw.find("gpu_reload_relu")), "cpu_offload_relu, device:cuda:0");
  EXPECT_EQ(device_of(bw, "gpu_reload_relu"), "cuda:0");
  EXPECT_EQ(args(bw, bw.find("mul_2")), "tangents_1, gpu_reload_relu");
}

TEST(OffloadTest, OnlyContiguousNonViewSavedTensorsQualify) {
  Case c = make_case();
  // A model output, a view, an unsaved node, a non-contiguous tensor.
  c.t[c.sin].tensors.at(0).stride = {1, 4};
  mark(c, {c.add, c.view, c.sum, c.sin, c.p1});
  PartitionResult with = default_partition(joint_of(c), offloading());
  PartitionResult without = default_partition(joint_of(c), PartitionOptions{});
  EXPECT_EQ(names(with.forward), names(without.forward));
  EXPECT_EQ(names(with.backward), names(without.backward));
}

TEST(OffloadTest, SeparateStreamPairsEachTransferWithAWait) {
  Case c = make_case();
  mark(c, {c.relu});
  PartitionResult r = default_partition(joint_of(c), offloading(/*separate_stream=*/true));
  const Graph& fw = r.forward;
  EXPECT_EQ(names(fw), (Names{"primals_1", "primals_2", "relu", "sin", "view", "sum_1", "mul",
                              "async_cpu_offload_relu", "cpu_offload_relu", "add", "output"}));
  EXPECT_EQ(fw.str(fw.op(fw.find("async_cpu_offload_relu"))->name), "ao.offload.default");
  EXPECT_EQ(args(fw, fw.find("cpu_offload_relu")), "async_cpu_offload_relu, relu");  // keepalive
  const Graph& bw = r.backward;
  EXPECT_EQ(names(bw), (Names{"cpu_offload_relu", "sin", "view", "tangents_1", "mul_1",
                              "async_gpu_reload_relu", "gpu_reload_relu", "mul_2", "mul_3",
                              "output"}));
  EXPECT_EQ(args(bw, bw.find("async_gpu_reload_relu")), "cpu_offload_relu, device:cuda:0, [4,8], [8,1]");
  EXPECT_EQ(args(bw, bw.find("gpu_reload_relu")), "async_gpu_reload_relu, cpu_offload_relu");
  EXPECT_EQ(bw.str(bw.op(bw.find("gpu_reload_relu"))->name), "ao.wait_tensor.default");
}

PartitionOptions offloading_as(TorchRelease release, bool separate_stream) {
  PartitionOptions o = offloading(separate_stream);
  o.torch = TorchBehavior::of(release);
  return o;
}

// offload_reload_layout (2.13): before it, the async reload takes only the
// device and its wait only the reload; the placeholder's meta names the
// original device alone, and the offloaded forward node records its own.
TEST(OffloadTest, Torch212ReloadsWithoutTheOriginalLayout) {
  Case c = make_case();
  mark(c, {c.relu});
  PartitionResult r = default_partition(joint_of(c), offloading_as({2, 12}, true));
  const Graph& bw = r.backward;
  EXPECT_EQ(names(bw), (Names{"cpu_offload_relu", "sin", "view", "tangents_1", "mul_1",
                              "async_gpu_reload_relu", "gpu_reload_relu", "mul_2", "mul_3",
                              "output"}));
  EXPECT_EQ(args(bw, bw.find("async_gpu_reload_relu")), "cpu_offload_relu, device:cuda:0");
  EXPECT_EQ(args(bw, bw.find("gpu_reload_relu")), "async_gpu_reload_relu");
  EXPECT_EQ(device_of(bw, "gpu_reload_relu"), "cuda:0");
  EXPECT_EQ(args(bw, bw.find("mul_2")), "tangents_1, gpu_reload_relu");
  const NodeExtra& px = bw.extra(bw.find("cpu_offload_relu"));
  EXPECT_FALSE(px.original_layout);
  ASSERT_LT(px.original_tensor, bw.values().sizes().tensors);
  const Graph& fw = r.forward;
  const NodeExtra& fx = fw.extra(fw.find("relu"));
  ASSERT_LT(fx.original_tensor, fw.values().sizes().tensors);
  EXPECT_EQ(fw.str(fw.values().tensors(fx.original_tensor)->device), "cuda:0");
  // The forward's offload itself is the same in 2.12 and 2.13.
  EXPECT_EQ(args(fw, fw.find("cpu_offload_relu")), "async_cpu_offload_relu, relu");
  const PartitionResult later = default_partition(joint_of(c), offloading_as({2, 13}, true));
  EXPECT_TRUE(later.backward.extra(later.backward.find("cpu_offload_relu")).original_layout);
}

TEST(OffloadTest, Torch212OffloadMetaNamesOnlyTheDevice) {
  Case c = make_case();
  mark(c, {c.relu});
  JointGraph j = joint_of(c);
  const std::string doc = write_result(j, default_partition(j, offloading_as({2, 12}, false)));
  // The backward placeholder, then the forward node.
  EXPECT_NE(doc.find("\"saved_for_offloading\":true,\"original_device\":\"cuda:0\"}"),
            std::string::npos)
      << doc;
  EXPECT_EQ(doc.find("original_size"), std::string::npos) << doc;
  const PartitionResult r = default_partition(j, offloading_as({2, 13}, false));
  EXPECT_EQ(r.forward.extra(r.forward.find("relu")).original_tensor,
            NodeExtra{}.original_tensor);  // 2.13 records no device on the forward node
}

// offload_async_ops (2.12): torch 2.11's separate stream numbers streams and
// events from dynamo's global registry; remat refuses it, but not the
// synchronous path, nor a separate stream with nothing to offload.
TEST(OffloadTest, Torch211RefusesTheSeparateStreamButNotTheSynchronousPath) {
  Case c = make_case();
  mark(c, {c.relu});
  try {
    default_partition(joint_of(c), offloading_as({2, 11}, true));
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("node 'relu'"), std::string::npos) << what;
    EXPECT_NE(what.find("torch 2.11"), std::string::npos) << what;
    EXPECT_NE(what.find("registry"), std::string::npos) << what;
  }
  const PartitionResult sync11 = default_partition(joint_of(c), offloading_as({2, 11}, false));
  const PartitionResult sync12 = default_partition(joint_of(c), offloading_as({2, 12}, false));
  EXPECT_EQ(names(sync11.forward), names(sync12.forward));
  EXPECT_EQ(names(sync11.backward), names(sync12.backward));
  EXPECT_EQ(args(sync11.backward, sync11.backward.find("gpu_reload_relu")),
            "cpu_offload_relu, device:cuda:0");
  Case unmarked = make_case();
  const PartitionResult none = default_partition(joint_of(unmarked), offloading_as({2, 11}, true));
  EXPECT_EQ(names(none.forward), names(default_partition(joint_of(unmarked), PartitionOptions{}).forward));
}

TEST(OffloadTest, SinkWaitMovesOffloadWaitsBeforeTheOutput) {
  Case c = make_case();
  mark(c, {c.relu, c.sin});
  PartitionOptions o = offloading(true);
  o.activation_offload_sink_wait = true;
  PartitionResult r = default_partition(joint_of(c), o);
  EXPECT_EQ(names(r.forward),
            (Names{"primals_1", "primals_2", "relu", "sin", "view", "sum_1", "mul",
                   "async_cpu_offload_sin", "async_cpu_offload_relu", "add", "cpu_offload_sin",
                   "cpu_offload_relu", "output"}));
}

TEST(OffloadTest, PrefetchMovesReloadsEarlierUntilTheirTransferIsCovered) {
  Case c = make_case();
  mark(c, {c.relu, c.sin});
  PartitionOptions o = offloading(true);
  o.activation_reload_prefetch = true;
  JointGraph j = joint_of(c);
  Names asked;
  o.offload_node_runtime = [&](NodeId joint) {
    asked.emplace_back(j.graph.name(joint));
    return 0.5;
  };
  // A 128-byte transfer at 128e-6 GB/s takes ~0.93 ms: mul_1 (0.5 ms) does
  // not cover relu's, the created wait before it counts 0, and the last
  // placeholder takes both queued reloads, the later queued first.
  o.activation_offload_cpu_gpu_bw = 128e-6;
  PartitionResult slow = default_partition(j, o);
  EXPECT_EQ(names(slow.backward),
            (Names{"cpu_offload_relu", "cpu_offload_sin", "view", "tangents_1",
                   "async_gpu_reload_sin", "async_gpu_reload_relu", "gpu_reload_sin", "mul_1",
                   "gpu_reload_relu", "mul_2", "mul_3", "output"}));
  // Only joint nodes are asked for, and only while a reload is queued.
  EXPECT_EQ(asked, (Names{"mul_1"}));

  // A fast link: mul_1 covers relu's transfer, which moves right before it.
  o.activation_offload_cpu_gpu_bw = 1e9;
  asked.clear();
  PartitionResult fast = default_partition(j, o);
  EXPECT_EQ(names(fast.backward),
            (Names{"cpu_offload_relu", "cpu_offload_sin", "view", "tangents_1",
                   "async_gpu_reload_sin", "gpu_reload_sin", "async_gpu_reload_relu", "mul_1",
                   "gpu_reload_relu", "mul_2", "mul_3", "output"}));
  EXPECT_EQ(asked, (Names{"mul_1"}));
}

TEST(OffloadTest, PrefetchNeedsNodeRuntimesAndAPositiveBandwidth) {
  PartitionOptions o = offloading(true);
  o.activation_reload_prefetch = true;
  EXPECT_THROW(o.validate(), Error);
  o.offload_node_runtime = [](NodeId) { return 0.0; };
  EXPECT_NO_THROW(o.validate());
  o.activation_offload_cpu_gpu_bw = 0;
  EXPECT_THROW(o.validate(), Error);
  o.activation_offload_separate_stream = false;  // no prefetch runs: bandwidth unread
  EXPECT_NO_THROW(o.validate());
}

TEST(OffloadTest, NothingMarkedLeavesTheGraphsAsTheyWere) {
  Case c = make_case();
  PartitionResult with = default_partition(joint_of(c), offloading(true));
  PartitionResult without = default_partition(joint_of(c), PartitionOptions{});
  EXPECT_EQ(names(with.forward), names(without.forward));
  EXPECT_EQ(names(with.backward), names(without.backward));
}

TEST(OffloadTest, AMarkedSavedValueThatIsNoTensorIsAnError) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1", {4});
  Ref t1 = t.placeholder("tangents_1", {4});
  Ref n = t.call_sym("aten.sym_size.int", {p1, 0}, "s0", 4, "sym_size_int");
  Ref r = t.call("aten.relu.default", {p1}, {4});
  Ref g = t.call("aten.mul.Tensor", {t1, n}, {4});
  t.output({A::tuple({r, g})});
  t[n].flags |= kFlagShouldOffload;
  t[n].tag = t[r].tag = PartitionerTag::kIsForward;
  t[g].tag = PartitionerTag::kIsBackward;
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  try {
    default_partition(j, offloading());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sym_size_int"), std::string::npos) << e.what();
  }
}

TEST(OffloadTest, TheResultDocumentCarriesTheOffloadMeta) {
  Case c = make_case();
  mark(c, {c.relu});
  JointGraph j = joint_of(c);
  const std::string doc = write_result(j, default_partition(j, offloading()));
  EXPECT_NE(doc.find("\"saved_for_offloading\":true,\"original_device\":\"cuda:0\","
                     "\"original_size\":[4,8],\"original_stride\":[8,1]"),
            std::string::npos)
      << doc;
  // The joint graph's request round-trips.
  EXPECT_NE(write_joint_graph(j).find("\"should_offload\":true"), std::string::npos);
  EXPECT_TRUE(read_joint_graph(write_joint_graph(j)).graph.node(c.relu.id).has(kFlagShouldOffload));
}

}  // namespace
}  // namespace remat
