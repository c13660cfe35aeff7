// tests/cpp/test_ops.cc — the op registry (remat/ops.h) and option validation.
//
// Each test isolates one rule: default categories, the pointwise rule,
// overrides, name-shape facts and the generated tag data.
#include <gtest/gtest.h>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/options.h"

namespace remat {
namespace {

using testing::TestGraph;

TEST(OpsCategories, NamesRoundTrip) {
  EXPECT_EQ(op_category_from_name("recomputable"), kCatRecomputable);
  EXPECT_EQ(op_category_from_name("view"), kCatView);
  EXPECT_EQ(op_category_from_name("random"), kCatRandom);
  EXPECT_EQ(op_category_from_name("compute_intensive"), kCatComputeIntensive);
  EXPECT_EQ(op_category_from_name("fusible"), kCatFusible);
  EXPECT_EQ(op_category_from_name("nope"), 0);
  EXPECT_EQ(op_category_names(kCatRecomputable | kCatFusible), "recomputable|fusible");
  EXPECT_EQ(op_category_names(0), "");
}

TEST(OpsDefaults, ExplicitLists) {
  const OpRegistry& r = OpRegistry::defaults();
  EXPECT_EQ(r.lookup("aten.mm"), kCatComputeIntensive);
  EXPECT_EQ(r.lookup("aten.native_dropout"), kCatRandom | kCatFusible);
  EXPECT_EQ(r.lookup("aten.view"), kCatRecomputable | kCatFusible | kCatView);
  EXPECT_EQ(r.lookup("prims.convert_element_type"), kCatRecomputable | kCatFusible);
  EXPECT_EQ(r.lookup("aten.lift_fresh_copy"), kCatRecomputable | kCatFusible);
  EXPECT_EQ(r.lookup("operator.getitem"), kCatRecomputable | kCatFusible);
  EXPECT_EQ(r.lookup("aten.add"), kCatRecomputable | kCatFusible);
  // Not listed anywhere.
  EXPECT_EQ(r.lookup("aten.native_layer_norm"), 0);
  EXPECT_FALSE(r.has_override("aten.mm"));
}

TEST(OpsDefaults, MagicMethodFunctions) {
  // method_to_operator(m) for m in magic_methods, under the name rule
  // module.qualname with _operator spelled operator.
  const OpRegistry& r = OpRegistry::defaults();
  for (const char* name : {"operator.add", "operator.mul", "operator.truediv", "operator.floordiv",
                           "operator.and_", "operator.pos", "operator.eq", "math.floor",
                           "math.ceil", "builtins.round", "torch.sym_float", "torch.sym_max",
                           "torch.sym_ite", "torch._sym_sqrt", "torch.sym_not"}) {
    EXPECT_EQ(r.lookup(name), kCatRecomputable | kCatFusible) << name;
  }
  EXPECT_EQ(r.lookup("_operator.add"), 0);
}

TEST(OpsDefaults, PointwiseRuleAppliesToAtenPackets) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a = t.call("aten.sin.default", {x});             // listed anyway
  auto b = t.call("aten.hypot.default", {x, x});        // pointwise only
  auto c = t.call("aten.native_layer_norm.default", {x});  // neither
  auto d = t.call("prims.hypot.default", {x, x});  // pointwise prims: not in pointwise_ops()
  t.output({a, b, c, d});
  Graph g = t.build();
  const OpRegistry& r = OpRegistry::defaults();
  auto cats = [&](const char* name) {
    return r.categories(g, g.ops()[g.find_op(name)], TorchBehavior{});
  };
  EXPECT_EQ(cats("aten.hypot.default"), kCatRecomputable | kCatFusible);
  EXPECT_EQ(cats("aten.native_layer_norm.default"), 0);
  EXPECT_EQ(cats("prims.hypot.default"), 0);
  EXPECT_EQ(g.ops()[g.find_op("prims.hypot.default")].packet_tags & kTagPointwise, kTagPointwise);
  std::vector<uint8_t> all = r.classify(g, TorchBehavior{});
  ASSERT_EQ(all.size(), g.ops().size());
  EXPECT_EQ(all[g.find_op("aten.sin.default")], kCatRecomputable | kCatFusible);
}

TEST(OpsRegistry, SetOverridesPointwiseRuleAddDoesNot) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto b = t.call("aten.hypot.default", {x, x});
  t.output({b});
  Graph g = t.build();
  const OpInfo& hypot = g.ops()[g.find_op("aten.hypot.default")];

  OpRegistry added = OpRegistry::defaults();
  added.add("aten.hypot", kCatView);
  EXPECT_EQ(added.categories(g, hypot, TorchBehavior{}), kCatRecomputable | kCatFusible | kCatView);
  EXPECT_FALSE(added.has_override("aten.hypot"));

  OpRegistry replaced = OpRegistry::defaults();
  replaced.set("aten.hypot", kCatComputeIntensive);
  EXPECT_TRUE(replaced.has_override("aten.hypot"));
  EXPECT_EQ(replaced.categories(g, hypot, TorchBehavior{}), kCatComputeIntensive);
  replaced.add("aten.hypot", kCatView);  // adding to an override keeps it one
  EXPECT_EQ(replaced.categories(g, hypot, TorchBehavior{}), kCatComputeIntensive | kCatView);

  OpRegistry cleared = OpRegistry::defaults();
  cleared.set("aten.mm", 0);
  EXPECT_EQ(cleared.lookup("aten.mm"), 0);
  EXPECT_EQ(OpRegistry::defaults().lookup("aten.mm"), kCatComputeIntensive);
}

// 2.12 tagged leaky_relu (and seven more) pointwise; under 2.11 the packet
// is in no list, whatever tag a graph captured under a newer torch records.
TEST(OpsReleases, LeakyReluFamilyIsPointwiseFrom212) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto a = t.call("aten.leaky_relu.default", {x});
  auto b = t.call("aten._conj_physical.default", {x});
  auto c = t.call("aten.hypot.default", {x, x});  // pointwise in every release
  t.output({a, b, c});
  Graph g = t.build();
  const OpRegistry& r = OpRegistry::defaults();
  ASSERT_EQ(g.ops()[g.find_op("aten.leaky_relu.default")].packet_tags & kTagPointwise,
            kTagPointwise);
  TorchBehavior v211 = TorchBehavior::of({2, 11});
  TorchBehavior v212 = TorchBehavior::of({2, 12});
  for (const char* name : {"aten.leaky_relu.default", "aten._conj_physical.default"}) {
    const OpInfo& op = g.ops()[g.find_op(name)];
    EXPECT_EQ(r.categories(g, op, v212), kCatRecomputable | kCatFusible) << name;
    EXPECT_EQ(r.categories(g, op, v211), 0) << name;
  }
  const OpInfo& hypot = g.ops()[g.find_op("aten.hypot.default")];
  EXPECT_EQ(r.categories(g, hypot, v211), kCatRecomputable | kCatFusible);
  // The switch alone decides, not the release it came with.
  v212.leaky_relu_family_pointwise = false;
  EXPECT_EQ(r.categories(g, g.ops()[g.find_op("aten.leaky_relu.default")], v212), 0);
  // The in-place activations are gated with it.
  for (const char* packet : {"aten.celu_", "aten.elu_", "aten.hardsigmoid_", "aten.hardtanh_",
                             "aten.leaky_relu_", "aten.selu_"}) {
    EXPECT_EQ(default_op_facts(std::string(packet) + ".default").packet_tags & kTagPointwise,
              kTagPointwise)
        << packet;
  }
  // An override wins in every release.
  OpRegistry set = OpRegistry::defaults();
  set.set("aten.leaky_relu", kCatRecomputable);
  EXPECT_EQ(set.categories(g, g.ops()[g.find_op("aten.leaky_relu.default")], v211),
            kCatRecomputable);
}

// 2.13 listed prims.prepare_softmax_online as recomputable (so fusible);
// 2.12 did not. A caller's own add() survives the older release.
TEST(OpsReleases, PrepareSoftmaxOnlineIsRecomputableFrom213) {
  TestGraph t;
  auto x = t.placeholder("primals_1");
  auto p = t.call("prims.prepare_softmax_online.default", {x, 1});
  t.output({p});
  Graph g = t.build();
  const OpInfo& op = g.ops()[g.find_op("prims.prepare_softmax_online.default")];
  const OpRegistry& r = OpRegistry::defaults();
  EXPECT_EQ(r.categories(g, op, TorchBehavior::of({2, 13})), kCatRecomputable | kCatFusible);
  EXPECT_EQ(r.categories(g, op, TorchBehavior::of({2, 12})), 0);
  TorchBehavior flipped = TorchBehavior::of({2, 15});
  flipped.prepare_softmax_online_recomputable = false;
  EXPECT_EQ(r.categories(g, op, flipped), 0);
  EXPECT_EQ(r.lookup("prims.prepare_softmax_online"), kCatRecomputable | kCatFusible);

  OpRegistry added = OpRegistry::defaults();
  added.add("prims.prepare_softmax_online", kCatRecomputable);
  EXPECT_EQ(added.categories(g, op, TorchBehavior::of({2, 12})), kCatRecomputable);
  OpRegistry set = OpRegistry::defaults();
  set.set("prims.prepare_softmax_online", kCatFusible);
  EXPECT_EQ(set.categories(g, op, TorchBehavior::of({2, 12})), kCatFusible);
}

TEST(OpsFacts, KindFromNameShape) {
  OpFacts hop = default_op_facts("higher_order.with_effects");
  EXPECT_EQ(hop.kind, OpKind::kHigherOrder);
  EXPECT_EQ(hop.ns, "higher_order");
  EXPECT_EQ(hop.packet, "higher_order.with_effects");

  for (const char* f : {"operator.getitem", "torch.sym_sum", "math.floor", "builtins.round",
                        "torch.fx.experimental.sym_node.<lambda>"}) {
    OpFacts facts = default_op_facts(f);
    EXPECT_EQ(facts.kind, OpKind::kFunction) << f;
    EXPECT_EQ(facts.packet, f);
    EXPECT_FALSE(facts.is_mutable) << f;
  }

  OpFacts mm = default_op_facts("aten.mm.default");
  EXPECT_EQ(mm.kind, OpKind::kOverload);
  EXPECT_EQ(mm.ns, "aten");
  EXPECT_EQ(mm.packet, "aten.mm");
  EXPECT_FALSE(mm.is_mutable);

  OpFacts custom = default_op_facts("mylib.foo.default");
  EXPECT_EQ(custom.kind, OpKind::kOverload);
  EXPECT_EQ(custom.packet, "mylib.foo");
  EXPECT_EQ(custom.tags, 0);

  // A bare packet of an op namespace: its tags are its .default overload's,
  // and it has no schema facts of its own.
  OpFacts rand = default_op_facts("aten.rand");
  EXPECT_EQ(rand.kind, OpKind::kPacket);
  EXPECT_EQ(rand.packet, "aten.rand");
  EXPECT_EQ(rand.tags, kTagNondeterministicSeeded);
  OpFacts relu_ = default_op_facts("aten.relu_");
  EXPECT_EQ(relu_.kind, OpKind::kPacket);
  EXPECT_FALSE(relu_.is_mutable);
}

TEST(OpsFacts, Mutability) {
  EXPECT_TRUE(default_op_facts("aten.add_.Tensor").is_mutable);
  EXPECT_TRUE(default_op_facts("aten.copy_.default").is_mutable);
  EXPECT_TRUE(default_op_facts("mylib.scale_.default").is_mutable);
  EXPECT_FALSE(default_op_facts("aten.__and__.Tensor").is_mutable);  // dunder, not in-place
  EXPECT_TRUE(default_op_facts("aten.add.out").is_mutable);
  // Schema exceptions recorded from torch.
  EXPECT_TRUE(default_op_facts("aten.gelu_backward.grad_input").is_mutable);
  EXPECT_TRUE(default_op_facts("aten._native_batch_norm_legit.default").is_mutable);
}

TEST(OpsFacts, TagsFromTorchLibrary) {
  OpFacts add = default_op_facts("aten.add.Tensor");
  EXPECT_EQ(add.tags & kTagPointwise, kTagPointwise);
  EXPECT_EQ(add.packet_tags & kTagPointwise, kTagPointwise);
  // A non-pointwise overload of a pointwise packet keeps the packet tag.
  OpFacts add_out = default_op_facts("aten.add.out");
  EXPECT_EQ(add_out.packet_tags & kTagPointwise, kTagPointwise);
  OpFacts mm = default_op_facts("aten.mm.default");
  EXPECT_EQ(mm.tags, 0);
  EXPECT_EQ(mm.packet_tags, 0);

  OpFacts rand = default_op_facts("aten.rand_like.default");
  EXPECT_EQ(rand.tags & kTagNondeterministicSeeded, kTagNondeterministicSeeded);
  EXPECT_EQ(rand.packet_tags & kTagNondeterministicSeeded, kTagNondeterministicSeeded);
  EXPECT_EQ(default_op_facts("aten.native_dropout.default").tags & kTagNondeterministicSeeded,
            kTagNondeterministicSeeded);
  EXPECT_EQ(default_op_facts("aten.relu.default").tags & kTagNondeterministicSeeded, 0);
}

TEST(OpsFacts, Views) {
  EXPECT_TRUE(default_op_facts("aten.view.default").is_view);
  EXPECT_TRUE(default_op_facts("aten.t.default").is_view);
  EXPECT_TRUE(default_op_facts("aten.expand.default").is_view);
  EXPECT_FALSE(default_op_facts("aten.add_.Tensor").is_view);  // writes its input
  EXPECT_FALSE(default_op_facts("aten.clone.default").is_view);
}

TEST(OpsOptions, ValidateNamesTheField) {
  PartitionOptions ok;
  EXPECT_NO_THROW(ok.validate());
  auto field_of = [](PartitionOptions o) -> std::string {
    try {
      o.validate();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
      return e.what();
    }
    return "";
  };
  PartitionOptions o;
  o.activation_memory_budget = 1.5;
  EXPECT_NE(field_of(o).find("activation_memory_budget"), std::string::npos);
  o = PartitionOptions();
  o.activation_memory_budget = -0.1;
  EXPECT_NE(field_of(o).find("activation_memory_budget"), std::string::npos);
  o = PartitionOptions();
  o.max_dist_from_bw = -1;
  EXPECT_NE(field_of(o).find("max_dist_from_bw"), std::string::npos);
  o = PartitionOptions();
  o.activation_memory_budget_solver = "magic";
  EXPECT_NE(field_of(o).find("activation_memory_budget_solver"), std::string::npos);
  o = PartitionOptions();
  o.activation_memory_budget_runtime_estimator = "guess";
  EXPECT_NE(field_of(o).find("activation_memory_budget_runtime_estimator"), std::string::npos);
  for (const char* s : {"greedy", "ilp", "dp", "dp_knapsack_sliding_hirschberg",
                        "dynamic_memory_budget_dp"}) {
    o = PartitionOptions();
    o.activation_memory_budget_solver = s;
    EXPECT_NO_THROW(o.validate()) << s;
  }
  for (const char* s : {"flops", "testing", "profile"}) {
    o = PartitionOptions();
    o.activation_memory_budget_runtime_estimator = s;
    EXPECT_NO_THROW(o.validate()) << s;
  }
  o = PartitionOptions();
  o.activation_memory_budget = 0.0;
  EXPECT_NO_THROW(o.validate());
}

}  // namespace
}  // namespace remat
