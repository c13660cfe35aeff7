// tests/cpp/test_sync.cc — the stage boundary between deciding and
// extracting (plan_* / emit_partition) and cross-rank agreement on it
// (sync_decision_cross_ranks, canonical names), one rule per test. Parity of
// names, digests and payloads with torch itself is checked live in
// tests/python/test_sync_decision.py and test_sync_multiprocess.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/partition.h"
#include "remat/sync.h"
#include "remat/torch_release.h"
#include "sync/canonical.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using Names = std::vector<std::string>;

Names names_of(const Graph& g, const std::vector<NodeId>& ids) {
  Names out;
  for (NodeId id : ids) out.emplace_back(g.name(id));
  return out;
}

// x @ w scaled by an all-reduced buffer, then relu and sin, and the backward.
// `extra` adds an exp in the forward (a structurally different graph);
// `rename` renames every call node (the same structure).
JointGraph mlp_with_collective(bool extra = false, bool rename = false) {
  TestGraph t;
  auto name = [&](const char* n) { return rename ? std::string("r_") + n : std::string(n); };
  Ref x = t.placeholder("primals_1", {4, 8});
  Ref w = t.placeholder("primals_2", {8, 8});
  Ref buf = t.placeholder("primals_3", {8});
  Ref tan = t.placeholder("tangents_1", {4, 8});
  Ref ar = t.call("_c10d_functional.all_reduce.default", {buf, "sum", "0"}, {8}, name("all_reduce"));
  Ref wt = t.call("_c10d_functional.wait_tensor.default", {ar}, {8}, name("wait_tensor"));
  Ref mm = t.call("aten.mm.default", {x, w}, {4, 8}, name("mm"));
  Ref mul = t.call("aten.mul.Tensor", {mm, wt}, {4, 8}, name("mul"));
  Ref relu = t.call("aten.relu.default", {mul}, {4, 8}, name("relu"));
  Ref out = t.call("aten.sin.default", {relu}, {4, 8}, name("sin"));
  if (extra) out = t.call("aten.exp.default", {out}, {4, 8}, name("exp"));
  Ref cos = t.call("aten.cos.default", {relu}, {4, 8}, name("cos"));
  Ref g1 = t.call("aten.mul.Tensor", {tan, cos}, {4, 8}, name("mul_1"));
  Ref tb = t.call("aten.threshold_backward.default", {g1, relu, 0}, {4, 8}, name("tb"));
  Ref g2 = t.call("aten.mul.Tensor", {tb, wt}, {4, 8}, name("mul_2"));
  Ref xt = t.call("aten.t.default", {x}, {8, 4}, name("t"));
  Ref gw = t.call("aten.mm.default", {xt, g2}, {8, 8}, name("mm_1"));
  t.output({A::tuple({out, nullptr, gw, nullptr})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  return j;
}

Names saved_names(const JointGraph& j, const PartitionResult& r) {
  return names_of(j.graph, r.saved_values);
}

// --- the stage boundary ----------------------------------------------------------

TEST(PlanEmit, PlanThenEmitIsTheOneCallPartition) {
  const JointGraph j = mlp_with_collective();
  for (bool min_cut : {true, false}) {
    const PartitionOptions o;
    PartitionResult one = min_cut ? min_cut_rematerialization_partition(j, o) : default_partition(j, o);
    PartitionPlan plan = min_cut ? plan_min_cut_rematerialization_partition(j, o)
                                 : plan_default_partition(j, o);
    EXPECT_STREQ(plan.partitioner(), min_cut ? "min_cut" : "default");
    PartitionResult two = emit_partition(std::move(plan));
    EXPECT_EQ(saved_names(j, two), saved_names(j, one));
    EXPECT_EQ(testing::node_names(two.forward), testing::node_names(one.forward));
    EXPECT_EQ(testing::node_names(two.backward), testing::node_names(one.backward));
  }
}

TEST(PlanEmit, PlanSavedIsTheDecisionInJointIdsAndPreparedMapsBack) {
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  ASSERT_FALSE(plan.saved().empty());
  for (NodeId id : plan.saved()) ASSERT_LT(id, j.graph.size());
  const Graph& p = plan.prepared();
  for (NodeId id = 0; id < p.size(); ++id) {
    EXPECT_EQ(p.name(id), j.graph.name(p.node(id).origin));
  }
}

TEST(PlanEmit, ReplacedDecisionIsWhatTheForwardSaves) {
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  const Names decided = names_of(j.graph, plan.saved());
  // The min-cut saves mm and recomputes mul and relu from it; save relu
  // instead: the backward then needs neither mm nor mul.
  std::vector<NodeId> saved;
  for (NodeId id : plan.saved()) {
    if (j.graph.name(id) != "mm") saved.push_back(id);
  }
  ASSERT_NE(saved.size(), plan.saved().size())
      << "mm was expected among " << fmt::format("{}", fmt::join(decided, ","));
  saved.push_back(j.graph.find("relu"));
  PartitionResult r = emit_partition(std::move(plan), saved);
  const Names got = saved_names(j, r);
  EXPECT_NE(std::find(got.begin(), got.end(), "relu"), got.end());
  EXPECT_EQ(std::find(got.begin(), got.end(), "mm"), got.end());
  const Names bw = testing::node_names(r.backward);
  for (const char* gone : {"mm", "mul"}) {
    EXPECT_EQ(std::find(bw.begin(), bw.end(), gone), bw.end()) << gone << " is not recomputed";
  }
  EXPECT_EQ(r.decisions[j.graph.find("relu")].where, NodeDecision::Where::kSaved);
  EXPECT_EQ(r.decisions[j.graph.find("mm")].where, NodeDecision::Where::kForwardOnly);
  // The plan's own decision recomputes relu: the replacement really changed it.
  PartitionResult own = min_cut_rematerialization_partition(j, PartitionOptions{});
  EXPECT_EQ(own.decisions[j.graph.find("relu")].where, NodeDecision::Where::kRecomputed);
}

TEST(PlanEmit, ReplacementThatTheForwardCannotComputeIsRefusedByName) {
  const JointGraph j = mlp_with_collective();
  auto refused = [&](std::vector<NodeId> saved, const std::string& needle) {
    PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
    try {
      emit_partition(std::move(plan), std::move(saved));
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidOption);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const NodeId mm = j.graph.find("mm");
  refused({mm, j.graph.find("mul_1")}, "'mul_1' depends on the backward");
  refused({mm, j.graph.find("tangents_1")}, "'tangents_1' depends on the backward");
  refused({mm, mm}, "'mm' is listed twice");
  refused({mm, j.graph.output()}, "is the output node");
  refused({mm, 999}, "999 is not a node id");
}

TEST(PlanEmit, DefaultPlanRefusesSymNodesInItsTensorDecision) {
  TestGraph t;
  Ref x = t.placeholder("primals_1", {4});
  Ref tan = t.placeholder("tangents_1", {4});
  Ref n = t.call_sym("aten.sym_size.int", {x, 0}, "4", 4, "sym_size_int");
  Ref y = t.call("aten.sin.default", {x}, {4}, "sin");
  Ref g = t.call("aten.mul.Tensor", {tan, n}, {4}, "mul");
  t.output({A::tuple({y, g})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  PartitionPlan plan = plan_default_partition(j, PartitionOptions{});
  EXPECT_THROW(emit_partition(std::move(plan), {n.id}), Error);
}

TEST(PlanEmit, PlanDropsTheCallersHooks) {
  const JointGraph j = mlp_with_collective();
  PartitionOptions o;
  o.activation_memory_budget_solver = "custom";
  o.custom_knapsack = [](const std::vector<double>& m, double, const std::vector<NodeId>&) {
    std::vector<int> all(m.size());
    for (size_t i = 0; i < m.size(); ++i) all[i] = static_cast<int>(i);
    return std::pair{std::vector<int>{}, all};
  };
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, o);
  EXPECT_FALSE(plan.options().custom_knapsack);
  EXPECT_EQ(plan.options().rank_group, nullptr);
}

// --- canonical names -----------------------------------------------------------------

TEST(CanonicalNames, IgnoreNodeNamesAndGiveEveryNodeOne) {
  const JointGraph a = mlp_with_collective();
  const JointGraph b = mlp_with_collective(/*extra=*/false, /*rename=*/true);
  const Names na = canonical_node_names(a.graph), nb = canonical_node_names(b.graph);
  EXPECT_EQ(na, nb);
  Names sorted = na;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  EXPECT_EQ(canonical_graph_digest(a.graph, na), canonical_graph_digest(b.graph, nb));
}

TEST(CanonicalNames, IgnoreTheOrderOfIndependentNodes) {
  // The same two branches, declared in either order.
  auto build = [](bool swap) {
    TestGraph t;
    Ref x = t.placeholder("primals_1", {4});
    Ref a, b;
    if (swap) {
      b = t.call("aten.cos.default", {x}, {4}, "cos");
      a = t.call("aten.sin.default", {x}, {4}, "sin");
    } else {
      a = t.call("aten.sin.default", {x}, {4}, "sin");
      b = t.call("aten.cos.default", {x}, {4}, "cos");
    }
    Ref s = t.call("aten.add.Tensor", {a, b}, {4}, "add");
    t.output({A::tuple({s})});
    return t.build();
  };
  const Graph g1 = build(false), g2 = build(true);
  const Names n1 = canonical_node_names(g1), n2 = canonical_node_names(g2);
  for (const char* node : {"primals_1", "sin", "cos", "add", "output"}) {
    EXPECT_EQ(n1[g1.find(node)], n2[g2.find(node)]) << node;
  }
  // Ready calls go by target: "aten.cos.default" < "aten.sin.default".
  EXPECT_EQ(n1[g1.find("cos")], "node_1");
  EXPECT_EQ(canonical_graph_digest(g1, n1), canonical_graph_digest(g2, n2));
}

TEST(CanonicalNames, DigestDiffersWhenTheStructureDoes) {
  const JointGraph a = mlp_with_collective();
  const JointGraph b = mlp_with_collective(/*extra=*/true);
  EXPECT_NE(canonical_graph_digest(a.graph, canonical_node_names(a.graph)),
            canonical_graph_digest(b.graph, canonical_node_names(b.graph)));
  EXPECT_EQ(canonical_graph_digest(a.graph, canonical_node_names(a.graph)).size(), 64u);
}

TEST(CanonicalNames, FunctionalCollectivesAreDetectedByNamespace) {
  EXPECT_TRUE(has_functional_collectives(mlp_with_collective().graph));
  TestGraph t;
  Ref x = t.placeholder("primals_1", {4});
  t.output({A::tuple({t.call("aten.sin.default", {x}, {4}, "sin")})});
  EXPECT_FALSE(has_functional_collectives(t.build()));
}

// --- the agreement ---------------------------------------------------------------------

// A group whose other ranks are scripted: what they send, what the MAX
// all-reduce returns. Records every call.
class ScriptedGroup : public RankGroup {
 public:
  int me = 0;
  int world = 3;
  std::vector<std::string> digests;              // empty: all equal to mine
  std::vector<std::vector<std::string>> others;  // lists of ranks != me, in rank order
  std::vector<int64_t> maxima;                   // empty: the sizes sent
  std::vector<std::string> calls;
  int picked = -1;
  std::string payload;

  int rank() const override { return me; }
  int world_size() const override { return world; }
  std::vector<std::string> all_gather(const std::string& mine) override {
    calls.push_back("all_gather(digest)");
    sent_digest = mine;
    return digests.empty() ? std::vector<std::string>(world, mine) : digests;
  }
  std::vector<std::vector<std::string>> all_gather(const std::vector<std::string>& mine) override {
    calls.push_back("all_gather(names)");
    sent_names = mine;
    std::vector<std::vector<std::string>> out = others;
    out.insert(out.begin() + me, mine);
    return out;
  }
  std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& mine) override {
    calls.push_back("all_reduce_max");
    sent_sizes = mine;
    return maxima.empty() ? mine : maxima;
  }
  void agreed(int p, const std::string& text) override {
    picked = p;
    payload = text;
  }
  std::string sent_digest;
  std::vector<std::string> sent_names;
  std::vector<int64_t> sent_sizes;
};

TEST(Sync, OneRankSendsNothingAndKeepsTheDecision) {
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  ScriptedGroup g;
  g.world = 1;
  const SyncOutcome o = sync_decision_cross_ranks(plan, g);
  EXPECT_EQ(o.status, SyncOutcome::Status::kSingleRank);
  EXPECT_TRUE(g.calls.empty());
  EXPECT_EQ(o.saved, plan.saved());
}

TEST(Sync, GraphWithoutCollectivesSendsNothing) {
  TestGraph t;
  Ref x = t.placeholder("primals_1", {4});
  Ref tan = t.placeholder("tangents_1", {4});
  Ref s = t.call("aten.sin.default", {x}, {4}, "sin");
  Ref c = t.call("aten.cos.default", {x}, {4}, "cos");
  Ref g1 = t.call("aten.mul.Tensor", {tan, c}, {4}, "mul");
  t.output({A::tuple({s, g1})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  ScriptedGroup g;
  EXPECT_EQ(sync_decision_cross_ranks(plan, g).status, SyncOutcome::Status::kNoCollectives);
  EXPECT_TRUE(g.calls.empty());
}

TEST(Sync, DifferentGraphsStopAfterTheDigest) {
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  ScriptedGroup g;
  g.digests = {"a", "a", "b"};
  const SyncOutcome o = sync_decision_cross_ranks(plan, g);
  EXPECT_EQ(o.status, SyncOutcome::Status::kGraphsDiffer);
  EXPECT_EQ(g.calls, (std::vector<std::string>{"all_gather(digest)"}));
  EXPECT_EQ(o.saved, plan.saved());
  EXPECT_EQ(g.picked, -1);
}

TEST(Sync, SmallestOfTheReducedMaximaWinsFirstOnATie) {
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  const Graph& p = plan.prepared();
  const Names canon = canonical_node_names(p);
  std::vector<std::string> reversed, larger;
  for (auto it = plan.saved().rbegin(); it != plan.saved().rend(); ++it)
    reversed.push_back(canon[p.find(j.graph.name(*it))]);
  for (NodeId id : plan.saved()) larger.push_back(canon[p.find(j.graph.name(id))]);
  larger.push_back(canon[p.find("mm")]);
  ScriptedGroup g;
  g.others = {reversed, larger};
  // Local sizes tie ranks 0 and 1; the reduced maxima decide: ranks 1 and 2
  // tie at 3, and the first of them wins.
  g.maxima = {10, 3, 3};
  const SyncOutcome o = sync_decision_cross_ranks(plan, g);
  EXPECT_EQ(g.calls, (std::vector<std::string>{"all_gather(digest)", "all_gather(names)",
                                               "all_reduce_max"}));
  ASSERT_EQ(o.status, SyncOutcome::Status::kAgreed);
  EXPECT_EQ(o.picked_rank, 1);
  EXPECT_EQ(g.picked, 1);
  std::vector<NodeId> expected(plan.saved().rbegin(), plan.saved().rend());
  EXPECT_EQ(o.saved, expected);  // rank 1's order
  // Sizes sent: each rank's list priced on this graph (mm: 4x8 float32).
  ASSERT_EQ(g.sent_sizes.size(), 3u);
  EXPECT_EQ(g.sent_sizes[1], g.sent_sizes[0]);
  EXPECT_EQ(g.sent_sizes[2], g.sent_sizes[0] + 4 * 8 * 4);
  PartitionResult r = emit_partition(std::move(plan), o.saved);
  EXPECT_FALSE(r.saved_values.empty());
}

TEST(Sync, PayloadListsThisRanksValuesAndTheLastRanksTotal) {
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  const Names canon = canonical_node_names(plan.prepared());
  const Graph& p = plan.prepared();
  const std::string mm = canon[p.find("mm")], x = canon[p.find("primals_1")];
  // Rank 1 of 3: torch's dict gets "total size" at rank 0's turn (so first),
  // rank 1's values at its turn, and the value of "total size" is rewritten
  // for every rank, ending at rank 2's.
  ScriptedGroup g;
  g.me = 1;
  g.others = {{x}, {mm}};
  g.maxima = {1, 1, 1};
  const SyncOutcome o = sync_decision_cross_ranks(plan, g);
  ASSERT_EQ(o.status, SyncOutcome::Status::kAgreed);
  EXPECT_EQ(o.picked_rank, 0);
  // This rank's values follow, by joint name, priced as float32 tensors.
  std::string mine;
  for (NodeId id : plan.saved()) {
    int64_t numel = 1;
    for (const Dim& d : j.graph.shape(j.graph.tensors(id)[0])) numel *= d.value;
    mine += fmt::format(", '{}': {}", j.graph.name(id), numel * 4);
  }
  EXPECT_EQ(o.trace_payload,
            "picked_rank_idx=0, saved_nodes of current rank={'total size': 128" + mine + "}");
  EXPECT_EQ(o.trace_payload, g.payload);
}

TEST(Sync, UnknownNameFromAnotherRankIsAnError) {
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, PartitionOptions{});
  ScriptedGroup g;
  g.others = {{"node_999"}, {}};
  try {
    sync_decision_cross_ranks(plan, g);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    EXPECT_NE(std::string(e.what()).find("rank 1 saves 'node_999'"), std::string::npos);
  }
}

TEST(Sync, OneCallPartitionAgreesThroughTheOptionsGroup) {
  const JointGraph j = mlp_with_collective();
  PartitionOptions o;
  o.sync_decision_cross_ranks = true;
  auto g = std::make_shared<ScriptedGroup>();
  g->world = 2;
  g->others = {{}};  // rank 1 saves nothing, priced 0: it wins
  o.rank_group = g;
  // Rank 1's empty decision is not a valid partition of this graph (the
  // backward needs values only the forward has): remat says so, naming what
  // is missing, instead of building a broken backward.
  EXPECT_THROW(min_cut_rematerialization_partition(j, o), Error);
  EXPECT_EQ(g->calls.size(), 3u);
  // Without the flag the group is not used.
  o.sync_decision_cross_ranks = false;
  g->calls.clear();
  min_cut_rematerialization_partition(j, o);
  EXPECT_TRUE(g->calls.empty());
}


// --- what changed between releases ---------------------------------------------------

PartitionOptions options_of(TorchRelease release) {
  PartitionOptions o;
  o.torch = TorchBehavior::of(release);
  return o;
}

// What one rank sends: its digest and its decision's names.
struct Sent {
  std::string digest;
  Names names;
};

Sent sent_by(const JointGraph& j, const PartitionOptions& o) {
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, o);
  ScriptedGroup g;
  g.world = 2;
  g.others = {{}};
  g.maxima = {1, 2};  // this rank's own decision wins
  EXPECT_EQ(sync_decision_cross_ranks(plan, g).status, SyncOutcome::Status::kAgreed);
  return {g.sent_digest, g.sent_names};
}

// The same structure as mlp_with_collective, the two independent forward
// ops (all_reduce and mm) traced in the other order.
JointGraph mlp_traced_in_another_order() {
  TestGraph t;
  Ref x = t.placeholder("primals_1", {4, 8});
  Ref w = t.placeholder("primals_2", {8, 8});
  Ref buf = t.placeholder("primals_3", {8});
  Ref tan = t.placeholder("tangents_1", {4, 8});
  Ref mm = t.call("aten.mm.default", {x, w}, {4, 8}, "mm");
  Ref ar = t.call("_c10d_functional.all_reduce.default", {buf, "sum", "0"}, {8}, "all_reduce");
  Ref wt = t.call("_c10d_functional.wait_tensor.default", {ar}, {8}, "wait_tensor");
  Ref mul = t.call("aten.mul.Tensor", {mm, wt}, {4, 8}, "mul");
  Ref relu = t.call("aten.relu.default", {mul}, {4, 8}, "relu");
  Ref out = t.call("aten.sin.default", {relu}, {4, 8}, "sin");
  Ref cos = t.call("aten.cos.default", {relu}, {4, 8}, "cos");
  Ref g1 = t.call("aten.mul.Tensor", {tan, cos}, {4, 8}, "mul_1");
  Ref tb = t.call("aten.threshold_backward.default", {g1, relu, 0}, {4, 8}, "tb");
  Ref g2 = t.call("aten.mul.Tensor", {tb, wt}, {4, 8}, "mul_2");
  Ref xt = t.call("aten.t.default", {x}, {8, 4}, "t");
  Ref gw = t.call("aten.mm.default", {xt, g2}, {8, 8}, "mm_1");
  t.output({A::tuple({out, nullptr, gw, nullptr})});
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = 1;
  return j;
}

TEST(SyncCanonicalNames, Before213RanksSendNodeNamesAndTheDigestOfThemInGraphOrder) {
  const PartitionOptions o = options_of({2, 12});
  const JointGraph j = mlp_with_collective();
  const Sent sent = sent_by(j, o);
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, o);
  EXPECT_EQ(sent.digest, node_name_digest(plan.prepared()));
  EXPECT_EQ(sent.names, names_of(j.graph, plan.saved()));
  // "/".join(node.name for node in graph.nodes): any renaming or reordering
  // tells the ranks apart, even of the same structure.
  EXPECT_NE(sent_by(mlp_with_collective(false, /*rename=*/true), o).digest, sent.digest);
  EXPECT_NE(sent_by(mlp_traced_in_another_order(), o).digest, sent.digest);
}

TEST(SyncCanonicalNames, From213RanksSendCanonicalNamesAndAStructuralDigest) {
  for (TorchRelease release : {TorchRelease{2, 13}, TorchRelease{2, 15}}) {
    const PartitionOptions o = options_of(release);
    const JointGraph j = mlp_with_collective();
    const Sent sent = sent_by(j, o);
    for (const std::string& name : sent.names) EXPECT_EQ(name.rfind("node_", 0), 0u) << name;
    // Renamed or reordered, the same structure sends the same digest.
    EXPECT_EQ(sent_by(mlp_with_collective(false, /*rename=*/true), o).digest, sent.digest);
    EXPECT_EQ(sent_by(mlp_traced_in_another_order(), o).digest, sent.digest);
  }
}

TEST(SyncCanonicalNames, Before213ARankAdoptsAnotherRanksDecisionByNodeName) {
  const PartitionOptions o = options_of({2, 12});
  const JointGraph j = mlp_with_collective();
  PartitionPlan plan = plan_min_cut_rematerialization_partition(j, o);
  ScriptedGroup g;
  g.world = 2;
  g.others = {{"relu", "primals_2"}};
  g.maxima = {10, 3};
  const SyncOutcome out = sync_decision_cross_ranks(plan, g);
  ASSERT_EQ(out.status, SyncOutcome::Status::kAgreed);
  EXPECT_EQ(names_of(j.graph, out.saved), (Names{"relu", "primals_2"}));
}

// x -> torch.sym_not, x -> mm -> getitem: a Python function, an operator and
// a builtin (torch 2.14's repro of sync_stable_target_str).
Graph graph_with_python_callables() {
  TestGraph t;
  Ref x = t.placeholder("primals_1", {4});
  Ref s = t.call("torch.sym_not", {x}, {4}, "sym_not");
  Ref mm = t.call("aten.mm.default", {x, x}, {4}, "mm_default");
  Ref gi = t.call("operator.getitem", {mm, 0}, {4}, "getitem");
  t.output({A::tuple({s, gi})});
  return t.build();
}

// A process's str() of a Python function holds its address.
class ProcessGroup : public ScriptedGroup {
 public:
  explicit ProcessGroup(std::string address) : address_(std::move(address)) {}
  std::string target_repr(std::string_view qualified) const override {
    if (qualified == "torch.sym_not") return "<function sym_not at " + address_ + ">";
    return RankGroup::target_repr(qualified);
  }

 private:
  std::string address_;
};

TEST(SyncStableTargetStr, From214TargetsAreFxQualifiedNames) {
  const Graph g = graph_with_python_callables();
  const ProcessGroup p("0x7f01");
  EXPECT_EQ(python_targets(g, &p, TargetSpelling::kQualified),
            (Names{"primals_1", "torch.sym_not", "torch.ops.aten.mm.default", "_operator.getitem",
                   "output"}));
  EXPECT_EQ(python_targets(g, &p, TargetSpelling::kStr),
            (Names{"primals_1", "<function sym_not at 0x7f01>", "aten.mm.default",
                   "<built-in function getitem>", "output"}));
  EXPECT_EQ(default_qualified_name("builtins.getattr"), "getattr");
  EXPECT_EQ(default_qualified_name("math.ceil"), "math.ceil");
  // Higher-order operators live in torch.ops.higher_order.
  TestGraph t;
  Ref x = t.placeholder("primals_1", {4});
  t.output({A::tuple({t.call("higher_order.invoke_subgraph", {x}, {4}, "hop")})});
  EXPECT_EQ(python_targets(t.build(), nullptr, TargetSpelling::kQualified)[1],
            "torch.ops.higher_order.invoke_subgraph");
}

TEST(SyncStableTargetStr, From214DigestsNoLongerDependOnTheProcess) {
  const Graph g = graph_with_python_callables();
  const ProcessGroup a("0x7f01"), b("0x7f02");
  auto digest = [&](const RankGroup& p, TargetSpelling s) {
    return canonical_graph_digest(g, canonical_node_names(g, &p, s), &p, s);
  };
  EXPECT_NE(digest(a, TargetSpelling::kStr), digest(b, TargetSpelling::kStr));
  EXPECT_EQ(digest(a, TargetSpelling::kQualified), digest(b, TargetSpelling::kQualified));
}

TEST(SyncStableTargetStr, From214QualifiedNamesOrderTheReadyNodes) {
  const Graph g = graph_with_python_callables();
  const ProcessGroup p("0x7f01");
  // "<function ..." < "aten.mm.default"; "torch.ops.aten.mm.default" <
  // "torch.sym_not", and then "_operator.getitem" < "torch.sym_not".
  const Names str = canonical_node_names(g, &p, TargetSpelling::kStr);
  EXPECT_EQ((Names{str[1], str[2], str[3]}), (Names{"node_1", "node_2", "node_3"}));
  const Names qualified = canonical_node_names(g, &p, TargetSpelling::kQualified);
  EXPECT_EQ((Names{qualified[1], qualified[2], qualified[3]}), (Names{"node_3", "node_1", "node_2"}));
}

TEST(SyncStableTargetStr, From214TheFirstRankWithAnotherGraphIsLogged) {
  const JointGraph j = mlp_with_collective();
  for (TorchRelease release : {TorchRelease{2, 13}, TorchRelease{2, 14}}) {
    PartitionPlan plan = plan_min_cut_rematerialization_partition(j, options_of(release));
    ScriptedGroup g;
    g.world = 4;
    g.digests = {"a", "a", "b", "c"};
    const SyncOutcome o = sync_decision_cross_ranks(plan, g);
    EXPECT_EQ(o.status, SyncOutcome::Status::kGraphsDiffer);
    if (release < TorchRelease{2, 14}) {
      EXPECT_TRUE(o.log.empty());
      continue;
    }
    ASSERT_EQ(o.log.size(), 1u);
    EXPECT_EQ(o.log[0].level, LogRecord::Level::kDebug);
    EXPECT_FALSE(o.log[0].debug_only);
    EXPECT_EQ(o.log[0].format,
              "Skipping sync decision cross rank due to different inputs between rank 0 and "
              "rank %s");
    EXPECT_EQ(o.log[0].args, (Names{"2"}));
  }
  // The one-call partition records it in the trace, with deciding's lines.
  PartitionOptions o = options_of({2, 14});
  o.sync_decision_cross_ranks = true;
  o.trace = true;
  auto g = std::make_shared<ScriptedGroup>();
  g->world = 2;
  g->digests = {"a", "b"};
  o.rank_group = g;
  const PartitionResult r = min_cut_rematerialization_partition(j, o);
  ASSERT_FALSE(r.trace.log.empty());
  EXPECT_EQ(r.trace.log.back().args, (Names{"1"}));
}

TEST(SyncDecisionCompilePg, TheEnginesCallsAreTheSameOnEitherGroup) {
  // 2.15 moved torch's collectives to another process group; which group a
  // RankGroup talks on is the caller's (remat.torch's TorchRankGroup): the
  // engine sends the same calls with the same payloads either way.
  const JointGraph j = mlp_with_collective();
  std::vector<std::vector<std::string>> calls;
  std::vector<Sent> sent;
  for (bool compile_pg : {false, true}) {
    PartitionOptions o = options_of({2, 15});
    o.torch.sync_decision_compile_pg = compile_pg;
    PartitionPlan plan = plan_min_cut_rematerialization_partition(j, o);
    ScriptedGroup g;
    g.world = 2;
    g.others = {{}};
    g.maxima = {1, 2};
    sync_decision_cross_ranks(plan, g);
    calls.push_back(g.calls);
    sent.push_back({g.sent_digest, g.sent_names});
  }
  EXPECT_EQ(calls[0], calls[1]);
  EXPECT_EQ(sent[0].digest, sent[1].digest);
  EXPECT_EQ(sent[0].names, sent[1].names);
}

}  // namespace
}  // namespace remat
