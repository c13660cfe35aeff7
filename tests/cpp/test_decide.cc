// tests/cpp/test_decide.cc — decide/: solve_min_cut's rules one at a time,
// the cut side, the no-finite-cut diagnosis, choose_saved_values_set's
// budget exits, default_saved_values and the cuts' memo.
//
// Each graph is a minimal joint graph in which the rule under test decides
// the outcome; where useful the same graph is solved with the rule switched
// off to show the decision flips.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "analyze/analyze.h"
#include "decide/capacity_graph.h"
#include "decide/cut_memo.h"
#include "decide/decide.h"
#include "graph_fixture.h"
#include "random_mlp.h"
#include "remat/error.h"

namespace remat {
namespace {

using testing::A;
using testing::Ref;
using testing::TestGraph;
using testing::random_mlp;

// A built graph with everything solve_min_cut reads.
struct Solved {
  Graph g;
  PartitionOptions opt;
  NodeInfo info;
  std::vector<int64_t> dist;
  std::vector<uint8_t> cats;

  Solved(const TestGraph& t, int num_fwd_outputs, PartitionOptions o = {},
         std::vector<int> static_inputs = {})
      : g(t.build()), opt(std::move(o)) {
    info = classify_nodes(g, static_inputs, num_fwd_outputs, opt);
    dist = dist_from_bw(g, info);
    cats = opt.ops.classify(g, opt.torch);
  }
  DecideContext ctx() const { return DecideContext{g, info, dist, cats, opt}; }
  MinCutResult solve(const MinCutOptions& mc) const { return solve_min_cut(ctx(), mc); }
  MinCutResult solve() const { return solve(min_cut_options_from(opt)); }

  std::vector<std::string> names(const std::vector<NodeId>& ids) const {
    std::vector<std::string> out;
    for (NodeId n : ids) out.emplace_back(g.name(n));
    return out;
  }
  std::string reason(const MinCutResult& r, const char* name) const {
    return std::string(r.ban_reason.at(g.find(name)));
  }
};

using Names = std::vector<std::string>;

// --- should_ban_recomputation -------------------------------------------------

TEST(DecideBan, ReductionIsSavedInsteadOfItsInput) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {1024});
  Ref tg = t.placeholder("tangents_1", {1});
  Ref x = t.call("aten.exp.default", {p}, {1024});
  Ref s = t.call("aten.sum.default", {x}, {1});
  Ref y = t.call("aten.cos.default", {s}, {1});
  Ref gx = t.call("aten.mul.Tensor", {tg, s}, {1});
  t.output({y, gx});
  Solved sv(t, 1);
  MinCutResult r = sv.solve();
  EXPECT_EQ(sv.reason(r, "sum"), "reduction op");
  EXPECT_EQ(sv.names(r.saved_values), Names({"sum"}));
  EXPECT_EQ(sv.names(r.banned_nodes), Names({"primals_1", "sum", "cos"}));
  (void)x;
}

TEST(DecideBan, ReductionCountsPositionalNodeArgsOnly) {
  // The input is passed by keyword: torch's `for i in node.args` misses it,
  // so the node is not a reduction.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {1024});
  Ref tg = t.placeholder("tangents_1", {1});
  Ref s = t.call("aten.sum.default", {}, {1});
  t[s].kwargs.push_back({"input", A(p)});
  Ref y = t.call("aten.cos.default", {s}, {1});
  Ref gx = t.call("aten.mul.Tensor", {tg, s}, {1});
  t.output({y, gx});
  Solved sv(t, 1);
  MinCutResult r = sv.solve();
  EXPECT_EQ(sv.reason(r, "sum"), "");
}

TEST(DecideBan, ComputeIntensiveIsBanned) {
  // mm of two thin inputs: cheaper to save the inputs and recompute, unless
  // mm is banned as compute intensive.
  auto build = [](TestGraph& t) {
    Ref a = t.placeholder("primals_1", {64, 1});
    Ref b = t.placeholder("primals_2", {1, 64});
    Ref tg = t.placeholder("tangents_1", {64, 64});
    Ref m = t.call("aten.mm.default", {a, b}, {64, 64});
    Ref r = t.call("aten.relu.default", {m}, {64, 64});
    Ref gm = t.call("aten.mul.Tensor", {tg, m}, {64, 64});
    t.output({r, gm});
  };
  PartitionOptions o;
  o.ban_recompute_not_in_allowlist = false;
  {
    TestGraph t;
    build(t);
    Solved sv(t, 1, o);
    MinCutResult r = sv.solve();
    EXPECT_EQ(sv.reason(r, "mm"), "compute intensive op");
    EXPECT_EQ(sv.names(r.saved_values), Names({"mm"}));
  }
  {
    o.ops.set("aten.mm", kCatRecomputable | kCatFusible);
    TestGraph t;
    build(t);
    Solved sv(t, 1, o);
    MinCutResult r = sv.solve();
    EXPECT_EQ(sv.reason(r, "mm"), "");
    EXPECT_EQ(sv.names(r.saved_values), Names({"primals_1", "primals_2"}));
  }
}

TEST(DecideBan, NotInAllowlist) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {64});
  Ref tg = t.placeholder("tangents_1", {64});
  Ref c = t.call("aten.native_layer_norm_like.default", {p}, {64});
  Ref g = t.call("aten.mul.Tensor", {tg, c}, {64});
  t.output({c, g});
  Solved sv(t, 1);
  MinCutResult r = sv.solve();
  EXPECT_EQ(sv.reason(r, "native_layer_norm_like"), "not in recomputable allowlist");
  EXPECT_EQ(sv.reason(r, "primals_1"), "primal input");
  EXPECT_EQ(sv.names(r.banned_nodes), Names({"primals_1", "native_layer_norm_like"}));
}

TEST(DecideBan, MaterializedInBackward) {
  // relu's backward user (mm) cannot fuse with it: recomputing is not free.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8, 8});
  Ref tg = t.placeholder("tangents_1", {8, 8});
  Ref x = t.call("aten.relu.default", {p}, {8, 8});
  Ref y = t.call("aten.cos.default", {x}, {8, 8});
  Ref g = t.call("aten.mm.default", {tg, x}, {8, 8});
  t.output({y, g});
  Solved sv(t, 1);
  EXPECT_EQ(sv.reason(sv.solve(), "relu"), "materialized in backward");
  MinCutOptions mc = min_cut_options_from(sv.opt);
  mc.ban_if_materialized_backward = false;
  EXPECT_EQ(sv.reason(sv.solve(mc), "relu"), "");
}

TEST(DecideBan, MustSaveTagIsBanned) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref x = t.call("aten.relu.default", {p}, {8});
  Ref g = t.call("aten.mul.Tensor", {tg, x}, {8});
  t.checkpoint(x, RecomputePolicy::kMustSave);
  t.output({x, g});
  Solved sv(t, 1);
  MinCutResult r = sv.solve();
  EXPECT_EQ(sv.reason(r, "relu"), "marked MUST_SAVE");
  EXPECT_EQ(sv.names(r.saved_values), Names({"relu"}));
}

// --- tags and weights ---------------------------------------------------------

TEST(DecideRule, MustRecomputeNodeIsRecomputed) {
  // relu's value is much smaller than its input (banned as a reduction),
  // so it is saved; tagged MUST_RECOMPUTE, it skips the ban rules, is tied
  // to the sink, and its input is saved instead.
  auto build = [](TestGraph& t, bool tag) {
    Ref p = t.placeholder("primals_1", {64});
    Ref tg = t.placeholder("tangents_1", {2});
    Ref x = t.call("aten.relu.default", {p}, {2});
    Ref y = t.call("aten.cos.default", {x}, {2});
    Ref g = t.call("aten.mul.Tensor", {tg, x}, {2});
    if (tag) t.checkpoint(x, RecomputePolicy::kMustRecompute);
    t.output({y, g});
  };
  {
    TestGraph t;
    build(t, false);
    Solved sv(t, 1);
    EXPECT_EQ(sv.names(sv.solve().saved_values), Names({"relu"}));
  }
  {
    TestGraph t;
    build(t, true);
    Solved sv(t, 1);
    EXPECT_EQ(sv.names(sv.solve().saved_values), Names({"primals_1"}));
  }
}

TEST(DecideRule, ParametersAreFreeToSave) {
  // relu's value is half its input (not a reduction): saved, unless the
  // parameter it comes from is free.
  auto build = [](TestGraph& t) {
    Ref p = t.placeholder("primals_1", {64});
    Ref tg = t.placeholder("tangents_1", {32});
    Ref x = t.call("aten.relu.default", {p}, {32});
    Ref y = t.call("aten.cos.default", {x}, {32});
    Ref g = t.call("aten.mul.Tensor", {tg, x}, {32});
    t.output({y, g});
  };
  TestGraph t;
  build(t);
  {
    Solved sv(t, 1, {}, {0});  // primals_1 is a parameter
    EXPECT_EQ(sv.names(sv.solve().saved_values), Names({"primals_1"}));
  }
  {
    PartitionOptions o;
    o.treat_parameters_as_free_to_save = false;
    Solved sv(t, 1, o, {0});
    EXPECT_EQ(sv.names(sv.solve().saved_values), Names({"relu"}));
  }
}

TEST(DecideCut, EqualCostCutsFollowCutSide) {
  // Two symbolic values of weight 1 each: saving the primal or the derived
  // SymInt costs the same. networkx (kSinkMinimal) saves the one nearest
  // the backward.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {});
  t[p].value = ValueKind::kSymInt;
  t[p].tensors.clear();
  t[p].flags = 0;
  t[p].sym_expr = "s0";
  t[p].sym_hint = 4;
  Ref tg = t.placeholder("tangents_1", {4});
  Ref x = t.placeholder("primals_2", {4});
  Ref m = t.call_sym("operator.mul", {p, 2}, "2*s0", 8);
  Ref y = t.call("aten.cos.default", {x}, {4});
  Ref g = t.call("aten.mul.Tensor", {tg, m}, {4});
  t.output({y, g});
  {
    Solved sv(t, 1);
    EXPECT_EQ(sv.names(sv.solve().saved_values), Names({"mul"}));
  }
  {
    PartitionOptions o;
    o.cut_side = CutSide::kSourceMinimal;
    Solved sv(t, 1, o);
    EXPECT_EQ(sv.names(sv.solve().saved_values), Names({"primals_1"}));
  }
}

// --- the two banning heuristics ---------------------------------------------

TEST(DecideHeuristic, UsedFarApart) {
  // relu feeds cos (which feeds an unfusible mm) and, later, sin: sin sits
  // past the first unfusible node reachable from relu's uses.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8, 8});
  Ref tg = t.placeholder("tangents_1", {8, 8});
  Ref x = t.call("aten.relu.default", {p}, {8, 8});
  Ref a = t.call("aten.cos.default", {x}, {8, 8});
  Ref m = t.call("aten.mm.default", {a, a}, {8, 8});
  Ref b = t.call("aten.sin.default", {x}, {8, 8});
  Ref m2 = t.call("aten.mm.default", {m, b}, {8, 8});
  Ref g = t.call("aten.mul.Tensor", {tg, b}, {8, 8});
  t.output({m2, g});
  Solved sv(t, 1);
  MinCutResult r = sv.solve();
  EXPECT_EQ(sv.reason(r, "sin"), "used far apart from an unfusible use");
  // As torch 2.13 bans them on the same graph.
  EXPECT_EQ(sv.names(r.banned_nodes), Names({"primals_1", "mm", "mm_1", "sin"}));
  MinCutOptions mc = min_cut_options_from(sv.opt);
  mc.ban_if_used_far_apart = false;
  EXPECT_EQ(sv.reason(sv.solve(mc), "sin"), "");
}

TEST(DecideHeuristic, LongFusibleChain) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref cur = p;
  std::vector<Ref> chain;
  for (int i = 0; i < 110; ++i) {
    cur = t.call("aten.relu.default", {cur}, {8});
    chain.push_back(cur);
  }
  Ref g = t.call("aten.mul.Tensor", {tg, cur}, {8});
  t.output({cur, g});
  Solved sv(t, 1);
  MinCutOptions mc = min_cut_options_from(sv.opt);
  mc.ban_if_used_far_apart = false;
  MinCutResult r = sv.solve(mc);
  // The forward output is banned first (its use by the output node cannot
  // fuse). The walk starting at relu (fw order 1) ends at the first node
  // past order 101 with nothing else queued: relu_101 (order 102).
  EXPECT_EQ(sv.names(r.banned_nodes), Names({"primals_1", "relu_109", "relu_101"}));
  EXPECT_EQ(sv.reason(r, "relu_109"), "materialized in backward");
  EXPECT_EQ(sv.reason(r, "relu_101"), "long fusible chain");
  mc.ban_if_long_fusible_chains = false;
  EXPECT_EQ(sv.names(sv.solve(mc).banned_nodes), Names({"primals_1", "relu_109"}));
}

// --- no finite cut ------------------------------------------------------------

TEST(DecideNoFiniteCut, ExplainsTheConflict) {
  // A multi-output op outside the allowlist, used directly by the backward:
  // it can be neither recomputed nor saved (not a tensor).
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref d = t.call_multi("aten.foo.default", {p}, {{8}, {8}});
  Ref d0 = t.getitem(d, 0, {8});
  Ref g = t.call("aten.mul.Tensor", {tg, d}, {8});
  t.output({d0, g});
  Solved sv(t, 1);
  try {
    sv.solve();
    FAIL() << "expected NoFiniteCutError";
  } catch (const NoFiniteCutError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNoFiniteCut);
    const std::string expl = e.explanation();
    EXPECT_NE(expl.find("  foo:\n"
                        "    - cannot recompute: not in recomputable allowlist\n"
                        "    - cannot save: non-tensor output\n"
                        "  mul:\n"
                        "    - depends on foo\n"
                        "    - must be computed in backward: required for gradient"),
              std::string::npos)
        << expl;
    EXPECT_NE(expl.find("[Debug: min-cut path] source -> foo_in -> foo_out -> mul_in -> sink"),
              std::string::npos)
        << expl;
    EXPECT_NE(std::string(e.what()).find("Nodes involved in the conflict"), std::string::npos);
    EXPECT_NE(e.dot().find("\"foo_in\" -> \"foo_out\" [capacity=inf, reason=\"cannot save: "
                           "non-tensor output\", label=\"inf\", color=red];"),
              std::string::npos)
        << e.dot();
    EXPECT_EQ(e.dot().rfind("strict digraph {\n\"source\";\n\"primals_1_in\";\n", 0), 0u) << e.dot();
  }
}

// The diagnosis walks edges torch takes for infinite: math.inf ones, and
// before 2.15 also INT_INF ones (a SymFloat's finite weight), which can give
// a path no flow is unbounded on. (solve_min_cut never weighs a node
// INT_INF: a SymFloat is a sym node, weighed by its size. So the network is
// built by hand here.)
TEST(DecideNoFiniteCut, DiagnosisFollowsOnlyInfiniteEdgesFrom215) {
  TestGraph t;
  Ref a = t.placeholder("a", {1});
  Ref b = t.placeholder("b", {1});
  Ref c = t.call("aten.mul.Tensor", {a, b}, {1});
  t.output({c});
  const Graph g = t.build();
  auto diagnose = [&](const TorchBehavior& torch) {
    CapacityGraph cg(g, torch);
    const uint32_t src = cg.source(), snk = cg.sink();
    cg.add_edge(src, cg.in(a.id), CapacityGraph::kInf, "banned: primal input");
    cg.add_edge(src, cg.in(b.id), CapacityGraph::kInf, "banned: primal input");
    cg.add_edge(cg.in(a.id), cg.out(a.id), CapacityGraph::kIntInf,
                "cannot save: SymFloat (non-SymInt symbolic value)");
    cg.add_edge(cg.in(b.id), cg.out(b.id), CapacityGraph::kInf, "cannot save: non-tensor output");
    cg.add_edge(cg.out(a.id), snk, CapacityGraph::kInf, "must recompute");
    cg.add_edge(cg.out(b.id), cg.in(c.id), CapacityGraph::kInf, "data dependency");
    cg.add_edge(cg.in(c.id), cg.out(c.id), CapacityGraph::kInf, "cannot save: non-tensor output");
    cg.add_edge(cg.out(c.id), snk, CapacityGraph::kInf, "must recompute");
    try {
      (void)cg.cut(CutSide::kSinkMinimal);
    } catch (const NoFiniteCutError& e) {
      const std::string& expl = e.explanation();
      return expl.substr(expl.find("[Debug: min-cut path]"));
    }
    return std::string("no error");
  };
  EXPECT_EQ(diagnose(TorchBehavior::of({2, 14})),
            "[Debug: min-cut path] source -> a_in -> a_out -> sink\n");
  EXPECT_EQ(diagnose(TorchBehavior::of({2, 15})),
            "[Debug: min-cut path] source -> b_in -> b_out -> mul_in -> mul_out -> sink\n");
}

// --- choose_saved_values_set ----------------------------------------------------

TEST(DecideChoose, BudgetsZeroAndOne) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {64});
  Ref tg = t.placeholder("tangents_1", {2});
  Ref x = t.call("aten.relu.default", {p}, {2});
  Ref y = t.call("aten.cos.default", {x}, {2});
  Ref g = t.call("aten.mul.Tensor", {tg, x}, {2});
  t.output({y, g});
  Solved sv(t, 1);
  MinCutResult last;
  EXPECT_EQ(sv.names(choose_saved_values_set(sv.ctx(), 0.0, &last)), Names({"primals_1"}));
  EXPECT_EQ(sv.names(choose_saved_values_set(sv.ctx(), 1.0, &last)), Names({"relu"}));
  EXPECT_EQ(sv.names(last.saved_values), Names({"relu"}));
  // The min-cut already saves less than the inputs: no knapsack needed.
  EXPECT_EQ(sv.names(choose_saved_values_set(sv.ctx(), 0.5, nullptr)), Names({"relu"}));
  EXPECT_THROW(choose_saved_values_set(sv.ctx(), 1.5, nullptr), Error);
}

TEST(DecideChoose, IntermediateBudgetRunsTheKnapsack) {
  // A random op (banned in every tier) whose value outweighs the input: at a
  // budget of 0.5 the knapsack cannot keep it (its normalized size is over
  // 1), so the last min-cut recomputes it and saves the input.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {4});
  Ref tg = t.placeholder("tangents_1", {64});
  Ref r = t.call("aten.rand_like.default", {p}, {64});
  Ref y = t.call("aten.cos.default", {r}, {64});
  Ref g = t.call("aten.mul.Tensor", {tg, r}, {64});
  t.output({y, g});
  Solved sv(t, 1);
  MinCutResult last;
  EXPECT_EQ(sv.names(choose_saved_values_set(sv.ctx(), 0.5, &last)), Names({"primals_1"}));
  EXPECT_EQ(sv.reason(last, "rand_like"), "");  // unbanned by the knapsack
}

TEST(DecideChoose, AggressiveRecomputationLiftsTheAllowlist) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {64});
  Ref tg = t.placeholder("tangents_1", {128});
  Ref c = t.call("aten.native_layer_norm_like.default", {p}, {128});
  Ref y = t.call("aten.cos.default", {c}, {128});
  Ref g = t.call("aten.mul.Tensor", {tg, c}, {128});
  t.output({y, g});
  PartitionOptions o;
  o.aggressive_recomputation = true;
  Solved sv(t, 1, o);
  MinCutResult last;
  EXPECT_EQ(sv.names(choose_saved_values_set(sv.ctx(), 1.0, &last)), Names({"primals_1"}));
  Solved plain(t, 1);
  EXPECT_EQ(plain.names(choose_saved_values_set(plain.ctx(), 1.0, nullptr)),
            Names({"native_layer_norm_like"}));
}

// torch 2.15 stamps aot_runtime_epilogue_input_mutation on a primal the
// runtime epilogue overwrites after the forward: saving it would hand the
// backward the overwritten data, so it cannot be saved, and budget 0 no
// longer simply saves the inputs. Before 2.15 it weighs as any primal.
TEST(DecideRule, EpilogueMutatedInputCannotBeSavedFrom215) {
  auto graph = [](bool backward_reads_the_input) {
    TestGraph t;
    Ref p = t.placeholder("primals_1", {64});
    Ref tg = t.placeholder("tangents_1", {64});
    Ref a = t.call("aten.add.Tensor", {p, 1}, {64});
    Ref y = t.call("aten.sin.default", {a}, {64});
    Ref c = t.call("aten.cos.default", {a}, {64});
    Ref g = t.call("aten.mul.Tensor", {tg, c}, {64});
    Ref g2 = backward_reads_the_input ? t.call("aten.mul.Tensor", {g, p}, {64}) : g;
    t.output({y, g2});
    t[p].flags |= kFlagEpilogueMutation;
    return t;
  };
  PartitionOptions v214;
  v214.torch = TorchBehavior::of({2, 14});
  PartitionOptions v215;
  v215.torch = TorchBehavior::of({2, 15});
  const Solved old_release(graph(false), 1, v214), new_release(graph(false), 1, v215);
  EXPECT_EQ(old_release.names(old_release.solve().saved_values), Names({"primals_1"}));
  EXPECT_EQ(new_release.names(new_release.solve().saved_values), Names({"cos"}));
  EXPECT_EQ(old_release.names(choose_saved_values_set(old_release.ctx(), 0.0, nullptr)),
            Names({"primals_1"}));
  EXPECT_EQ(new_release.names(choose_saved_values_set(new_release.ctx(), 0.0, nullptr)),
            Names({"cos"}));
  // A backward that needs the input itself has no finite cut any more.
  const Solved reads(graph(true), 1, v215);
  try {
    reads.solve();
    FAIL() << "expected NoFiniteCutError";
  } catch (const NoFiniteCutError& e) {
    EXPECT_NE(e.explanation().find("cannot save: input mutation replayed after forward"),
              std::string::npos)
        << e.explanation();
  }
  EXPECT_NO_THROW(Solved(graph(true), 1, v214).solve());
}

// --- default_saved_values -----------------------------------------------------

TEST(DecideDefault, SavesForwardValuesUsedByBackward) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref x = t.call("aten.relu.default", {p}, {8});
  Ref y = t.call("aten.cos.default", {x}, {8});
  Ref z = t.call("aten.sin.default", {p}, {8});
  t[x].tag = t[y].tag = t[z].tag = PartitionerTag::kIsForward;
  Ref sz = t.call_sym("aten.sym_size.int", {z, 0}, "s0", 8);
  Ref g = t.call("aten.mul.Tensor", {tg, x}, {8});
  Ref g2 = t.call("aten.mul.Tensor", {g, sz}, {8});
  t.output({y, g2});
  Graph gr = t.build();
  PartitionOptions o;
  NodeInfo info = classify_nodes(gr, {}, 1, o);
  SavedSets s = default_saved_values(gr, info, o);
  auto names = [&](const std::vector<NodeId>& v) {
    Names out;
    for (NodeId n : v) out.emplace_back(gr.name(n));
    return out;
  };
  // relu is used by the backward; cos only by the output (which counts as
  // outside the forward); sin only through its size.
  EXPECT_EQ(names(s.saved_values), Names({"relu", "cos"}));
  EXPECT_EQ(names(s.saved_sym_nodes), Names({"sym_size"}));
  EXPECT_TRUE(s.saved_opaque_nodes.empty());
}

// --- release switches: what is saved, and where --------------------------------

PartitionOptions under(TorchRelease release) {
  PartitionOptions o;
  o.torch = TorchBehavior::of(release);
  return o;
}

// A joint graph's node whose value is no tensor (an opaque object, a
// device ...): no tensors, no tensor_meta.
void make_non_tensor(TestGraph& t, Ref r, ValueKind kind) {
  t[r].value = kind;
  t[r].flags = 0;
  t[r].tensors.clear();
}

TEST(DecideRule, OpaqueValuesAreSavableFrom212) {
  // An opaque placeholder the backward reads: a primal cannot be recomputed,
  // so 2.11 (where it is just a non-tensor, impossible to save) has no
  // finite cut; 2.12 saves it for free.
  TestGraph t;
  Ref h = t.placeholder("primals_1");
  make_non_tensor(t, h, ValueKind::kOpaque);
  Ref p = t.placeholder("primals_2", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref y = t.call("aten.sin.default", {p}, {8});
  Ref g = t.call("test.use_handle", {tg, h}, {8});
  t.output({y, g});
  EXPECT_THROW(Solved(t, 1, under({2, 11})).solve(), NoFiniteCutError);
  Solved sv(t, 1, under({2, 12}));
  EXPECT_EQ(sv.names(sv.solve().saved_values), Names({"primals_1"}));
}

TEST(DecideSplit, OpaqueValuesGetTheirOwnListFrom212) {
  TestGraph t;
  Ref h = t.placeholder("primals_1");
  make_non_tensor(t, h, ValueKind::kOpaque);
  Ref p = t.placeholder("primals_2", {8});
  t.output({p, h});
  Graph g = t.build();
  SavedSets s211 = split_saved_values(g, {p.id, h.id}, TorchBehavior::of({2, 11}));
  EXPECT_EQ(s211.saved_values, (std::vector<NodeId>{p.id, h.id}));
  EXPECT_TRUE(s211.saved_opaque_nodes.empty());
  SavedSets s212 = split_saved_values(g, {p.id, h.id}, TorchBehavior::of({2, 12}));
  EXPECT_EQ(s212.saved_values, (std::vector<NodeId>{p.id}));
  EXPECT_EQ(s212.saved_opaque_nodes, (std::vector<NodeId>{h.id}));
}

TEST(DecideSplit, AssertOnlySymBoolIsDroppedFrom212) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref s = t.call_sym("aten.sym_size.int", {p, 0}, "s0", 8);
  Ref b = t.call_sym("operator.ge", {s, 2}, "s0 >= 2", 1);
  t[b].value = ValueKind::kSymBool;
  Ref a = t.call("aten._assert_scalar.default", {b, "m"});
  make_non_tensor(t, a, ValueKind::kMissing);
  t.output({p});
  Graph g = t.build();
  EXPECT_EQ(split_saved_values(g, {s.id, b.id}, TorchBehavior::of({2, 11})).saved_sym_nodes,
            (std::vector<NodeId>{s.id, b.id}));
  EXPECT_EQ(split_saved_values(g, {s.id, b.id}, TorchBehavior::of({2, 12})).saved_sym_nodes,
            (std::vector<NodeId>{s.id}));
}

// default_saved_values of a built graph under a release.
SavedSets default_under(const TestGraph& t, TorchRelease release, int num_fwd_outputs = 1,
                        bool distributed = false) {
  Graph g = t.build();
  PartitionOptions o = under(release);
  o.distributed_available = distributed;
  NodeInfo info = classify_nodes(g, {}, num_fwd_outputs, o);
  return default_saved_values(g, info, o);
}

TEST(DecideDefault, OpaqueForwardValueIsSavedFrom212AndNotATensorBefore) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref h = t.call("test.make_handle", {p});
  make_non_tensor(t, h, ValueKind::kOpaque);
  Ref y = t.call("aten.sin.default", {p}, {8});
  t[h].tag = t[y].tag = PartitionerTag::kIsForward;
  Ref g = t.call("test.use_handle", {tg, h}, {8});
  t.output({y, g});
  try {
    default_under(t, {2, 11});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    EXPECT_NE(std::string(e.what()).find("'make_handle' to be a tensor"), std::string::npos);
  }
  SavedSets s = default_under(t, {2, 12});
  EXPECT_EQ(s.saved_opaque_nodes, (std::vector<NodeId>{h.id}));
}

TEST(DecideDefault, AssertOnlySymBoolIsNotSavedFrom213) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref s = t.call_sym("aten.sym_size.int", {p, 0}, "s0", 8);
  Ref b = t.call_sym("operator.ge", {s, 2}, "s0 >= 2", 1);
  t[b].value = ValueKind::kSymBool;
  Ref y = t.call("aten.sin.default", {p}, {8});
  t[s].tag = t[b].tag = t[y].tag = PartitionerTag::kIsForward;
  Ref a = t.call("aten._assert_scalar.default", {b, "m"});
  make_non_tensor(t, a, ValueKind::kMissing);
  Ref g = t.call("aten.mul.Tensor", {tg, s}, {8});
  t.output({y, g});
  EXPECT_EQ(default_under(t, {2, 12}).saved_sym_nodes, (std::vector<NodeId>{s.id, b.id}));
  EXPECT_EQ(default_under(t, {2, 13}).saved_sym_nodes, (std::vector<NodeId>{s.id}));
}

TEST(DecideDefault, AssertAsyncIsSkippedFrom213AndImpureBefore) {
  // Under recompute tags an impure forward node is an error (2.12); 2.13
  // skips _assert_async like _assert_scalar.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref y = t.call("aten.sin.default", {p}, {8});
  t.checkpoint(y, RecomputePolicy::kPreferRecompute, 0);
  Ref a = t.call("aten._assert_async.msg", {p, "m"});
  make_non_tensor(t, a, ValueKind::kMissing);
  t[a].flags = kFlagImpure;
  Ref c = t.call("aten.cos.default", {y}, {8});
  t[y].tag = t[a].tag = t[c].tag = PartitionerTag::kIsForward;
  Ref g = t.call("aten.mul.Tensor", {tg, y}, {8});
  t.output({c, g});
  try {
    default_under(t, {2, 12});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Trying to apply AC on a graph with impure op: "
                                         "_assert_async, aten._assert_async.msg"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(default_under(t, {2, 13}).saved_values, (std::vector<NodeId>{c.id}));
}

TEST(DecideDefault, WaitTensorsIsNoImpureValueFrom215) {
  // A dead multi-tensor wait: 2.14 saves it as an impure value; 2.15 judges
  // it like wait_tensor (not impure), and then it is no tensor.
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref w = t.call_multi("_c10d_functional.wait_tensors.default", {A::list({p})}, {{8}});
  t[w].flags = kFlagImpure;
  Ref y = t.call("aten.sin.default", {p}, {8});
  t[w].tag = t[y].tag = PartitionerTag::kIsForward;
  Ref g = t.call("aten.mul.Tensor", {tg, p}, {8});
  t.output({y, g});
  EXPECT_EQ(default_under(t, {2, 14}, 1, true).saved_values,
            (std::vector<NodeId>{p.id, w.id, y.id}));
  try {
    default_under(t, {2, 15}, 1, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'wait_tensors' to be a tensor"), std::string::npos);
  }
}

TEST(DecideBan, DeviceValuedNodeIsNeverBannedFrom215) {
  TestGraph t;
  Ref p = t.placeholder("primals_1", {8});
  Ref tg = t.placeholder("tangents_1", {8});
  Ref dev = t.call("coor.current_device.default", {});
  make_non_tensor(t, dev, ValueKind::kDevice);
  Ref ones = t.call("aten.ones.default", {A::list({8})}, {8});
  t[ones].kwargs = {{"device", dev}};
  Ref y = t.call("aten.mul.Tensor", {p, ones}, {8});
  Ref g = t.call("aten.mul.Tensor", {tg, ones}, {8});
  t.output({y, g});
  Solved s214(t, 1, under({2, 14}));
  EXPECT_EQ(s214.reason(s214.solve(), "current_device"), "not in recomputable allowlist");
  Solved s215(t, 1, under({2, 15}));
  MinCutResult r = s215.solve();
  EXPECT_EQ(s215.reason(r, "current_device"), "");
  // Still no tensor: never saved itself.
  for (NodeId n : r.saved_values) EXPECT_NE(n, s215.g.find("current_device"));
}

// --- the cut memo (decide/cut_memo.h) ------------------------------------------

// One cut's answer, or its error's text.
struct CutAnswer {
  std::vector<NodeId> saved, banned;
  std::vector<std::string_view> reasons;
  std::string error;
  bool operator==(const CutAnswer&) const = default;
};

CutAnswer cut_answer(const DecideContext& ctx, const MinCutOptions& mc, const CutOverrides& o) {
  try {
    MinCutResult r = solve_min_cut(ctx, mc, o);
    return {r.saved_values, r.banned_nodes, r.ban_reason, ""};
  } catch (const Error& e) {
    return {{}, {}, {}, e.what()};
  }
}

// random_mlp(seed) with what solve_min_cut reads, and a memo for it.
struct MlpCuts {
  explicit MlpCuts(uint32_t seed)
      : j(random_mlp(seed)),
        g(j.graph),
        info(classify_nodes(g, {}, j.num_fwd_outputs, opt)),
        dist(dist_from_bw(g, info)),
        cats(opt.ops.classify(g, opt.torch)),
        memo(g.size()) {}
  // A context over the graph, through the memo or not, with the story or not.
  DecideContext ctx(bool memoized, bool story = false) {
    return DecideContext{g, info, dist, cats, opt, nullptr, story, memoized ? &memo : nullptr};
  }

  const JointGraph j;
  const Graph& g;
  const PartitionOptions opt;
  const NodeInfo info;
  const std::vector<int64_t> dist;
  const std::vector<uint8_t> cats;
  CutMemo memo;
};

// The memo keeps what a node's cut reads from the node alone; whatever the
// overrides and the ban-rule options of the cuts before, a cut through it
// answers as one without it.
TEST(DecideMemo, AMemoChangesNoCutWhateverTheCutsBefore) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    MlpCuts m(seed);
    const Graph& g = m.g;
    const DecideContext plain = m.ctx(false);
    const DecideContext memoized = m.ctx(true);
    std::mt19937 rng(seed);
    for (int k = 0; k < 24; ++k) {
      MinCutOptions mc;
      mc.ban_if_not_in_allowlist = rng() % 2;
      mc.ban_if_materialized_backward = rng() % 2;
      mc.ban_if_reduction = rng() % 2;
      CutOverrides o;
      for (std::vector<uint8_t>* v : {&o.dont_ban, &o.ban, &o.recompute}) {
        if (rng() % 2) continue;
        v->assign(g.size(), 0);
        for (auto& x : *v) x = rng() % 5 == 0;
      }
      ASSERT_EQ(cut_answer(memoized, mc, o), cut_answer(plain, mc, o)) << "seed " << seed << ", cut " << k;
    }
    // The memo was read and filled: every weighed node's weight is known.
    size_t known = 0;
    for (NodeId n = 0; n < g.size(); ++n) known += m.memo.weight(n).has_value();
    EXPECT_GT(known, g.size() / 2) << "seed " << seed;
  }
}

// A cut that records its story explains each ban as it goes: it neither
// reads the memo nor fills it.
TEST(DecideMemo, ACutWithItsStoryLeavesTheMemoAlone) {
  MlpCuts m(3);
  const MinCutOptions mc;
  const MinCutResult r = solve_min_cut(m.ctx(true, /*story=*/true), mc);
  EXPECT_FALSE(r.ban_detail.empty());
  for (NodeId n = 0; n < m.g.size(); ++n) {
    EXPECT_FALSE(m.memo.weight(n).has_value());
    EXPECT_EQ(m.memo.size(n), CutMemo::kUnknownSize);
    EXPECT_FALSE(m.memo.ban_reason(mc, n).has_value());
  }
}

}  // namespace
}  // namespace remat
