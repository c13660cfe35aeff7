// tests/cpp/test_report.cc — what the engine tells beyond its decision: the
// trace (torch's log lines, knapsack calls, the Pareto sweep), the failed
// cut's edge list, progress, and the HTML report.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include "analyze/analyze.h"
#include "budget/pareto.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/partition.h"
#include "remat/report.h"
#include "remat/explain.h"
#include "remat/graphviz.h"
#include "remat/pareto.h"
#include "report/timeline_svg.h"

namespace remat {
namespace {

const std::string kExamples = REMAT_EXAMPLES_DIR;

JointGraph example(const char* name) { return read_joint_graph_file(kExamples + "/" + name); }

using testing::has;
using testing::joint_of;
using testing::TestGraph;
using testing::A;
using testing::Ref;
using Why = NodeDecision::Why;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// --- the trace ------------------------------------------------------------------

TEST(Trace, EmptyUnlessAskedFor) {
  const JointGraph joint = example("transformer_block.json");
  PartitionOptions o;
  EXPECT_TRUE(min_cut_rematerialization_partition(joint, o).trace.empty());
  EXPECT_FALSE(has(write_result(joint, min_cut_rematerialization_partition(joint, o)), "\"trace\""));
}

TEST(Trace, LogsTheBannedOpsOncePerMinCutRun) {
  const JointGraph joint = example("transformer_block.json");
  PartitionOptions o;
  o.trace = true;
  const PartitionTrace one = min_cut_rematerialization_partition(joint, o).trace;
  o.activation_memory_budget = 0.5;  // runtime-optimized, more aggressive, fully aggressive
  const PartitionTrace three = min_cut_rematerialization_partition(joint, o).trace;
  auto banned_lines = [](const PartitionTrace& t) {
    return std::count_if(t.log.begin(), t.log.end(), [](const LogRecord& r) {
      return r.debug_only && r.format == "Ops banned from re-materialization: %s";
    });
  };
  EXPECT_EQ(banned_lines(one), 1);
  ASSERT_EQ(three.budget_step, "aggressive");
  EXPECT_EQ(banned_lines(three), 3);
  EXPECT_EQ(one.budget_step, "runtime_optimized");
  // The set is what str(OrderedSet) prints: mm is not recomputable.
  const LogRecord& first = one.log.front();
  ASSERT_EQ(first.args.size(), 1u);
  EXPECT_EQ(first.args[0].rfind("OrderedSet(['", 0), 0u) << first.args[0];
  EXPECT_TRUE(has(first.args[0], "'aten.mm'")) << first.args[0];
}

TEST(Trace, SavedBytesFollowTheSavedValues) {
  const JointGraph joint = example("mlp.json");
  PartitionOptions o;
  o.trace = true;
  const PartitionResult r = min_cut_rematerialization_partition(joint, o);
  ASSERT_EQ(r.trace.saved_bytes.size(), r.saved_values.size());
  for (size_t i = 0; i < r.saved_values.size(); ++i)
    EXPECT_EQ(r.trace.saved_bytes[i], report::bytes_of(joint.graph, r.saved_values[i], o));
}

TEST(Trace, KnapsackCallsAreRecordedWithTheirChoice) {
  const JointGraph joint = example("transformer_block.json");
  PartitionOptions o;
  o.trace = true;
  o.activation_memory_budget = 0.1;
  const PartitionResult r = min_cut_rematerialization_partition(joint, o);
  ASSERT_EQ(r.trace.budget_step, "knapsack");
  ASSERT_EQ(r.trace.knapsack.size(), 1u);
  const KnapsackRecord& k = r.trace.knapsack[0];
  EXPECT_EQ(k.memory_budget, 0.1);
  EXPECT_EQ(k.items.size(), k.item_memory.size());
  EXPECT_EQ(k.items.size(), k.item_runtime.size());
  EXPECT_EQ(k.items.size(), k.item_bytes.size());
  EXPECT_EQ(k.saved_items.size() + k.recomputed_items.size(), k.items.size());
  // Items come largest first; the min-cut that followed is the partition's.
  EXPECT_TRUE(std::is_sorted(k.item_bytes.rbegin(), k.item_bytes.rend()));
  std::vector<NodeId> saved = r.saved_values;
  for (NodeId id : r.saved_sym_nodes) saved.push_back(id);
  std::sort(saved.begin(), saved.end());
  std::vector<NodeId> cut = k.saved_values;
  std::sort(cut.begin(), cut.end());
  EXPECT_EQ(cut, saved);
  EXPECT_GT(k.max_act_size, k.min_act_size);
  EXPECT_TRUE(r.trace.pareto.empty());  // not asked for
}

TEST(Trace, ParetoSweepOnlyWhenTheKnapsackIsReached) {
  const JointGraph joint = example("transformer_block.json");
  PartitionOptions o;
  o.visualize_memory_budget_pareto = true;
  EXPECT_TRUE(min_cut_rematerialization_partition(joint, o).trace.pareto.empty());
  o.activation_memory_budget = 0.1;
  const PartitionResult r = min_cut_rematerialization_partition(joint, o);
  ASSERT_FALSE(r.trace.pareto.empty());
  // The same points the standalone sweep finds.
  const std::vector<MemoryBudgetPoint> alone = memory_budget_pareto(joint, PartitionOptions{});
  ASSERT_EQ(alone.size(), r.trace.pareto.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(alone[i].budget, r.trace.pareto[i].budget);
    EXPECT_EQ(alone[i].recompute_runtime, r.trace.pareto[i].recompute_runtime);
    EXPECT_EQ(alone[i].memory_ratio, r.trace.pareto[i].memory_ratio);
  }
  // One knapsack record per budget the sweep tried, plus the final call.
  EXPECT_GT(r.trace.knapsack.size(), 2u);
  EXPECT_EQ(r.trace.knapsack.back().memory_budget, 0.1);
}

// --- a failed cut -------------------------------------------------------------------

TEST(FailedCut, EdgeListIsNetworkxsGenerateEdgelist) {
  const JointGraph joint = read_joint_graph_file(kExamples + "/../tests/data/no_finite_cut.json");
  try {
    min_cut_rematerialization_partition(joint, PartitionOptions{});
    FAIL() << "expected NoFiniteCutError";
  } catch (const NoFiniteCutError& e) {
    const std::string& list = e.edge_list();
    EXPECT_EQ(list.rfind("source primals_1_in {'capacity': inf, 'reason': 'cannot recompute: "
                         "primal input'}\n", 0), 0u) << list;
    EXPECT_TRUE(has(list, "\nprimals_1_in primals_1_out {'capacity': 77}\n")) << list;
    EXPECT_TRUE(has(list, "\nmm_in mm_out {'capacity': inf, 'reason': 'cannot save: non-tensor "
                          "output'}\n")) << list;
    EXPECT_NE(list.back(), '\n');  // "\n".join(...)
    EXPECT_EQ(count(list, "\n") + 1, count(e.dot(), " -> "));
  }
}

// --- progress --------------------------------------------------------------------------

TEST(Progress, PartitionReportsRisingFractionsEndingAtOne) {
  const JointGraph joint = example("transformer_block.json");
  std::vector<double> seen;
  PartitionOptions o;
  o.progress = [&](std::string_view task, double f) {
    EXPECT_EQ(task, "partition");
    seen.push_back(f);
  };
  min_cut_rematerialization_partition(joint, o);
  ASSERT_GE(seen.size(), 4u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), 1.0);
}

TEST(Progress, PeakBudgetSearchReportsOnceAndEndsAtOne) {
  const JointGraph joint = example("transformer_block.json");
  std::vector<double> seen;
  PartitionOptions o;
  o.peak_memory_budget = int64_t{1} << 40;  // fits at once
  o.progress = [&](std::string_view, double f) { seen.push_back(f); };
  min_cut_rematerialization_partition(joint, o);
  ASSERT_FALSE(seen.empty());
  // Candidate plans are built on a silent clock: the fractions never repeat.
  EXPECT_TRUE(std::adjacent_find(seen.begin(), seen.end(), std::greater_equal<>()) == seen.end());
  EXPECT_EQ(seen.back(), 1.0);
}

TEST(Progress, ParetoSweepCoversTheUnitInterval) {
  std::vector<double> seen;
  // A step function of the budget: four distinct outcomes.
  auto step = [](double b) { return std::pair<double, double>{b < 0.3 ? 3 : b < 0.6 ? 2 : b < 0.9 ? 1 : 0, 0}; };
  pareto_sweep(step, 1e-2, [&](std::string_view task, double f) {
    EXPECT_EQ(task, "pareto");
    seen.push_back(f);
  });
  ASSERT_GE(seen.size(), 3u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_DOUBLE_EQ(seen.back(), 1.0);
  EXPECT_LT(seen.front(), 1.0);
}

// --- the HTML report -------------------------------------------------------------------

std::string report_of(const JointGraph& joint, const std::string& result, ReportOptions r = {}) {
  return html_report(joint, result, r);
}

TEST(Report, HasEverySectionAndNoNetwork) {
  const JointGraph joint = example("transformer_block.json");
  PartitionOptions o;
  const std::string result = write_result(joint, min_cut_rematerialization_partition(joint, o));
  ReportOptions r;
  r.title = "block";
  r.pareto = memory_budget_pareto(joint, o);
  const std::string html = report_of(joint, result, r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* id : {"id=\"overview\"", "id=\"memory\"", "id=\"pareto\"", "id=\"cut\"",
                         "id=\"nodes\"", "id=\"search\"", "id=\"node-data\""})
    EXPECT_TRUE(has(html, id)) << id;
  EXPECT_TRUE(has(html, "Pareto Frontier of Memory Budget"));  // remat/pareto.h's chart
  EXPECT_TRUE(has(html, "class=\"timeline\""));  // every result carries its simulation
  // Self-contained: no external scripts, styles or images.
  EXPECT_FALSE(has(html, "src=\"http"));
  EXPECT_FALSE(has(html, "href=\"http"));
  EXPECT_FALSE(has(html, "<link"));
  // Every joint node has a row; the reasons' words travel once, as templates.
  EXPECT_EQ(count(html, "\n[") , joint.graph.size());
  EXPECT_TRUE(has(html, report::why_template(NodeDecision::Why::kSavedCheaper)));
}

TEST(Report, SameInputsSameBytesApartFromTimings) {
  const JointGraph joint = example("mlp.json");
  PartitionResult r = min_cut_rematerialization_partition(joint, PartitionOptions{});
  r.seconds = 0;
  r.stages.clear();
  const std::string result = write_result(joint, r);
  EXPECT_EQ(report_of(joint, result), report_of(joint, result));
}

TEST(Report, ShowsTheSimulatedTimelineWithThePeakNode) {
  const JointGraph joint = example("mlp.json");
  const PartitionResult r = min_cut_rematerialization_partition(joint, PartitionOptions{});
  const Graph& peak_graph = r.memory.peak_pass == Pass::kForward ? r.forward : r.backward;
  ASSERT_NE(r.memory.peak_node, kNoNode);
  const std::string html = report_of(joint, write_result(joint, r));
  EXPECT_TRUE(has(html, "class=\"timeline\"")) << html.substr(0, 2000);
  // The plot's peak is the simulator's: its bytes and the node reaching it.
  EXPECT_TRUE(has(html, fmt::format("({})</title>", peak_graph.name(r.memory.peak_node))));
  EXPECT_TRUE(has(html, fmt::format("{} bytes)", r.memory.peak_bytes)));
  EXPECT_TRUE(has(html, ">backward</text>"));
}

// What fills the peak: the simulator's storages in its order, each with its
// joint node's fate and the node after which it goes.
TEST(Report, WhatFillsThePeakListsTheSimulatorsStoragesLargestFirst) {
  const JointGraph joint = example("transformer_block.json");
  const PartitionResult r = min_cut_rematerialization_partition(joint, PartitionOptions{});
  ASSERT_GE(r.memory.at_peak.size(), 2u);
  const std::string html = report_of(joint, write_result(joint, r));
  ASSERT_TRUE(has(html, "<section id=\"peak\">"));
  const std::string table = html.substr(html.find("id=\"peak-table\""));
  size_t at = 0;
  for (size_t i = 0; i < std::min<size_t>(r.memory.at_peak.size(), 50); ++i) {
    const LiveStorage& s = r.memory.at_peak[i];
    const Graph& g = s.pass == Pass::kForward ? r.forward : r.backward;
    const std::string cell = fmt::format("<td>{}</td><td>{}: {}</td>", i + 1, pass_name(s.pass), g.name(s.node));
    const size_t next = table.find(cell, at);
    ASSERT_NE(next, std::string::npos) << cell;
    at = next;
    const std::string released =
        s.released_after == kNoNode
            ? std::string("the end of the step")
            : fmt::format("{}: {}", pass_name(s.released_pass),
                          (s.released_pass == Pass::kForward ? r.forward : r.backward).name(s.released_after));
    EXPECT_NE(table.find("<td>" + released + "</td></tr>", at), std::string::npos) << released;
  }
  // Saved values are among them, named by their fate.
  EXPECT_TRUE(has(table, "<td>saved</td>"));
}

// A result whose peak holds `cats` storages of 1000 B made by aten.cat,
// listed first as the simulator lists the largest, then `mms` of 64 B made
// by aten.mm, then one forward input of 64 B.
std::string peak_result(int cats, int mms) {
  std::string nodes, at_peak;
  int64_t peak = 0;
  auto add = [&](const std::string& name, const char* op, const char* target, int64_t bytes) {
    nodes += fmt::format("{}{{\"name\": \"{}\", \"op\": \"{}\", \"target\": \"{}\"}}",
                         nodes.empty() ? "" : ", ", name, op, target);
    at_peak += fmt::format("{}{{\"graph\": \"forward\", \"node\": \"{}\", \"bytes\": {}}}",
                           at_peak.empty() ? "" : ", ", name, bytes);
    peak += bytes;
  };
  for (int i = 0; i < cats; ++i) add(fmt::format("cat_{}", i), "call_function", "aten.cat.default", 1000);
  for (int i = 0; i < mms; ++i) add(fmt::format("mm_{}", i), "call_function", "aten.mm.default", 64);
  add("primals_1", "placeholder", "primals_1", 64);
  return fmt::format(
      "{{\"format\": \"remat.partition_result\", \"decisions\": {{}}, \"forward\": "
      "{{\"nodes\": [{}]}}, \"backward\": {{\"nodes\": []}}, \"memory\": {{\"peak_bytes\": {}, "
      "\"at_peak\": [{}]}}}}",
      nodes, peak, at_peak);
}

// On a big graph the peak is thousands of storages of one size from one
// op: "what fills the peak" groups them by producer op and size, and its
// first line is the largest group by bytes, though each of its storages is
// smaller than others listed one by one below it. The storages not listed
// one by one are counted in the groups, never called "smaller".
TEST(Report, WhatFillsThePeakGroupsByProducerAndSizeLargestGroupFirst) {
  TestGraph t;
  Ref x = t.placeholder("primals_1");
  t.output({A::tuple({x})});
  const JointGraph joint = joint_of(t);
  const std::string html = report_of(joint, peak_result(5, 300));
  const size_t groups = html.find("<table id=\"peak-groups\">");
  ASSERT_NE(groups, std::string::npos);
  const std::string first = html.substr(html.find("<tbody>", groups), 300);
  EXPECT_TRUE(has(first, "<tr><td>1</td><td>aten.mm.default</td><td>64 B</td><td>300</td>"
                         "<td>18.8 KiB</td><td>79.1%</td><td>created by a rewrite 300</td>"
                         "<td>forward: mm_0, forward: mm_1, forward: mm_2, ...</td></tr>"))
      << first;
  const size_t second = html.find("<tr><td>2</td><td>aten.cat.default</td><td>1000 B</td><td>5</td>", groups);
  const size_t third = html.find("<tr><td>3</td><td>input of the forward (placeholder)</td><td>64 B</td><td>1</td>", groups);
  EXPECT_NE(second, std::string::npos);
  EXPECT_NE(third, std::string::npos);
  EXPECT_LT(second, third);
  // One by one, the largest storages first: the cats, then the first mms.
  const std::string table = html.substr(html.find("id=\"peak-table\""));
  EXPECT_TRUE(has(table, "<tr><td>1</td><td>forward: cat_0</td>"));
  EXPECT_TRUE(has(table, "The other 256 storages (16.0 KiB, 67.5% of the peak) are counted in the "
                         "groups above, not listed here."))
      << table.substr(table.size() - 400);
  EXPECT_FALSE(has(html, "smaller"));
}

TEST(Report, RejectsAMemoryTimelineThatIsNotByteCounts) {
  const JointGraph joint = example("mlp.json");
  std::string result = write_result(joint, min_cut_rematerialization_partition(joint, PartitionOptions{}));
  const std::string key = "\"forward\":[";
  const size_t at = result.find(key, result.find("\"timeline\""));
  ASSERT_NE(at, std::string::npos);
  result.insert(at + key.size(), "\"x\", ");
  try {
    report_of(joint, result);
    FAIL() << "accepted a timeline entry that is no byte count";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "memory.timeline.forward")) << e.what();
  }
}

TEST(Report, EscapesNamesEverywhere) {
  std::string text = read_file(kExamples + "/tiny.json");
  // Rename a node to something that would break HTML and the script block.
  const std::string evil = "x</script><b>&'\\\"";
  for (size_t at = text.find("\"relu\""); at != std::string::npos; at = text.find("\"relu\"", at + 1))
    text.replace(at, 6, "\"x</script><b>&'\\\"\"");
  const JointGraph joint = read_joint_graph(text);
  ASSERT_NE(joint.graph.find("x</script><b>&'\""), kNoNode);
  const std::string html =
      report_of(joint, write_result(joint, min_cut_rematerialization_partition(joint, PartitionOptions{})));
  EXPECT_EQ(count(html, "</script>"), 2u);  // the two scripts' own
  EXPECT_FALSE(has(html, "<b>"));
  EXPECT_TRUE(has(html, "x\\u003c/script>\\u003cb>"));
}

TEST(Report, BadResultNamesTheField) {
  const JointGraph joint = example("mlp.json");
  try {
    report_of(joint, R"({"format": "remat.partition_result", "decisions": {"nowhere": {"where": "saved"}}})");
    FAIL() << "expected a parse error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse);
    EXPECT_TRUE(has(e.what(), "decisions")) << e.what();
    EXPECT_TRUE(has(e.what(), "nowhere")) << e.what();
  }
  EXPECT_THROW(report_of(joint, "not json"), Error);
  EXPECT_THROW(report_of(joint, R"({"format": "remat.joint_graph"})"), Error);
}

// --- why each node ended where it did ---------------------------------------------

PartitionOptions traced() {
  PartitionOptions o;
  o.trace = true;
  return o;
}

// A traced min-cut gives every fate its reason: bans name themselves,
// inputs and tangents are told apart, and a saved value's capacity is what
// saving it cost the cut (its size scaled by at least 1.1 for its distance
// to the backward).
TEST(Why, ATracedMinCutGivesEveryFateItsReason) {
  const JointGraph joint = example("transformer_block.json");
  const PartitionOptions o = traced();
  const PartitionResult r = min_cut_rematerialization_partition(joint, o);
  const Graph& g = joint.graph;
  std::vector<size_t> seen(static_cast<size_t>(Why::kUnused) + 1, 0);
  for (NodeId id = 0; id < g.size(); ++id) {
    const NodeDecision& d = r.decisions[id];
    ASSERT_NE(d.why, Why::kUnknown) << g.name(id);
    ++seen[static_cast<size_t>(d.why)];
    EXPECT_FALSE(has(report::why_text(g, d), "{")) << g.name(id);
    if (g.node(id).kind == NodeKind::kPlaceholder) {
      EXPECT_TRUE(d.why == Why::kInput || d.why == Why::kTangent) << g.name(id);
      continue;
    }
    if (d.where != NodeDecision::Where::kSaved) continue;
    EXPECT_EQ(d.why == Why::kSavedBanned, !d.ban_reason.empty()) << g.name(id);
    ASSERT_GE(d.capacity, 0) << g.name(id);
    if (g.node(id).value == ValueKind::kTensor) {
      EXPECT_GT(d.capacity, size_of(g, id, o)) << g.name(id);
    }
  }
  for (Why w : {Why::kInput, Why::kTangent, Why::kSavedBanned, Why::kSavedCheaper,
                Why::kRecomputedCheaper, Why::kNotNeeded})
    EXPECT_GT(seen[static_cast<size_t>(w)], 0u) << why_name(w);
}

// A ban says what its rule measured, traced or not.
TEST(Why, BansSayWhatTheRuleMeasuredTracedOrNot) {
  const JointGraph joint = example("transformer_block.json");
  const Graph& g = joint.graph;
  const PartitionResult r = min_cut_rematerialization_partition(joint, traced());
  size_t allowlist = 0, materialized = 0;
  for (NodeId id = 0; id < g.size(); ++id) {
    const NodeDecision& d = r.decisions[id];
    if (d.ban_reason == "not in recomputable allowlist") {
      ++allowlist;
      EXPECT_EQ(d.ban_detail, fmt::format("op {}", g.str(g.node(id).target)));
    } else if (d.ban_reason == "materialized in backward") {
      ++materialized;
      // It names the backward use (of the node or of a view of it) that
      // cannot fuse: a node that reads it, directly or through views, or
      // the graph's return.
      if (has(d.ban_detail, "the joint graph returns it")) continue;
      const size_t open = d.ban_detail.find('\''), close = d.ban_detail.find('\'', open + 1);
      ASSERT_NE(close, std::string::npos) << d.ban_detail;
      const NodeId user = g.find(d.ban_detail.substr(open + 1, close - open - 1));
      ASSERT_NE(user, kNoNode) << d.ban_detail;
      EXPECT_EQ(r.decisions[user].where, NodeDecision::Where::kBackwardOnly) << d.ban_detail;
      EXPECT_TRUE(has(d.ban_detail, "cannot fuse with it"));
    } else if (d.ban_reason == "primal input") {
      EXPECT_EQ(d.ban_detail, "");  // nothing measured
    }
  }
  EXPECT_GT(allowlist, 0u);
  EXPECT_GT(materialized, 0u);
  // The trace adds torch's log lines, never words to the reasons.
  const PartitionResult plain = min_cut_rematerialization_partition(joint, PartitionOptions{});
  for (NodeId id = 0; id < g.size(); ++id)
    EXPECT_EQ(plain.decisions[id].ban_detail, r.decisions[id].ban_detail) << g.name(id);
}

// Under a budget the knapsack lets banned nodes be recomputed: their reason
// names the ban lifted, the one the fully aggressive cut (whose banned
// nodes are the knapsack's items) gives them.
TEST(Why, TheKnapsacksRecomputedItemsNameTheBanItLifted) {
  const JointGraph joint = example("transformer_block.json");
  PartitionOptions aggressive = traced();
  aggressive.aggressive_recomputation = true;
  const PartitionResult plain = min_cut_rematerialization_partition(joint, aggressive);
  PartitionOptions o = traced();
  o.activation_memory_budget = 0.3;
  const PartitionResult r = min_cut_rematerialization_partition(joint, o);
  ASSERT_EQ(r.trace.budget_step, "knapsack");
  size_t lifted = 0;
  for (NodeId id = 0; id < joint.graph.size(); ++id) {
    const NodeDecision& d = r.decisions[id];
    if (d.why != Why::kRecomputedLifted) continue;
    ++lifted;
    EXPECT_EQ(d.where, NodeDecision::Where::kRecomputed);
    EXPECT_FALSE(d.detail.empty());
    EXPECT_EQ(d.detail, plain.decisions[id].ban_reason) << joint.graph.name(id);
    const KnapsackRecord& k = r.trace.knapsack.back();
    bool recomputed_item = false;
    for (int i : k.recomputed_items) recomputed_item = recomputed_item || k.items[i] == id;
    EXPECT_TRUE(recomputed_item) << joint.graph.name(id);
  }
  EXPECT_GT(lifted, 0u);
}

TEST(Why, ACheckpointPolicyTiesItsNodeToTheBackward) {
  TestGraph t;
  Ref p1 = t.placeholder("primals_1");
  Ref t1 = t.placeholder("tangents_1");
  Ref sin = t.call("aten.sin.default", {p1});
  t[sin].recompute = RecomputePolicy::kMustRecompute;
  Ref mul = t.call("aten.mul.Tensor", {sin, sin});
  Ref grad = t.call("aten.mul.Tensor", {t1, sin});
  t.output({A::tuple({mul, grad})});
  const JointGraph j = joint_of(t);
  const PartitionResult r = min_cut_rematerialization_partition(j, traced());
  const NodeDecision& d = r.decisions[j.graph.find("sin")];
  EXPECT_EQ(d.where, NodeDecision::Where::kRecomputed);
  EXPECT_EQ(d.why, Why::kTied);
  EXPECT_TRUE(has(d.detail, "MUST_RECOMPUTE")) << d.detail;
}

// A budget tier that drops the rule behind a ban says so, as the knapsack
// does for the bans it lifts: at 0.3 the shipped transformer block is
// decided by the knapsack over the aggressive tier's cut, which recomputes
// gelu (banned by the runtime-optimized tier as materialized in backward)
// and addmm_2 (a compute intensive op the knapsack let go).
TEST(Why, ABudgetTierThatDropsABanSaysSo) {
  const JointGraph joint = example("transformer_block.json");
  PartitionOptions o;
  o.activation_memory_budget = 0.3;
  const PartitionResult r = min_cut_rematerialization_partition(joint, o);
  const NodeDecision& gelu = r.decisions[joint.graph.find("gelu")];
  EXPECT_EQ(gelu.where, NodeDecision::Where::kRecomputed);
  EXPECT_EQ(gelu.why, Why::kRecomputedTier);
  EXPECT_EQ(gelu.detail, "aggressive tier drops the rule that banned it (materialized in backward)");
  EXPECT_TRUE(has(report::why_text(joint.graph, gelu), "the memory budget's aggressive tier drops"));
  const NodeDecision& addmm = r.decisions[joint.graph.find("addmm_2")];
  EXPECT_EQ(addmm.why, Why::kRecomputedLifted);
  EXPECT_EQ(addmm.detail, "compute intensive op");
  // Without a budget nothing is lifted.
  const PartitionResult plain = min_cut_rematerialization_partition(joint, PartitionOptions{});
  for (const NodeDecision& d : plain.decisions) {
    EXPECT_NE(d.why, Why::kRecomputedTier);
    EXPECT_NE(d.why, Why::kRecomputedLifted);
  }
}

// --- one source for why: the result, the report and --explain -----------------

// A decision as the result document writes it (write_decisions).
struct Written {
  std::string where, why, ban, detail;
  int64_t capacity = -1;
};

std::string text_of(simdjson::dom::element e, const char* key) {
  std::string_view v;
  return e[key].get(v) ? std::string() : std::string(v);
}

std::vector<Written> written_decisions(const Graph& g, const std::string& doc) {
  simdjson::dom::parser parser;
  simdjson::dom::object decisions;
  EXPECT_FALSE(parser.parse(doc)["decisions"].get(decisions));
  std::vector<Written> out(g.size());
  for (auto [name, value] : decisions) {
    Written& w = out[g.find(name)];
    w.where = text_of(value, "where");
    w.why = text_of(value, "why");
    w.ban = text_of(value, "ban");
    w.detail = text_of(value, "detail");
    int64_t c;
    if (!value["capacity"].get(c)) w.capacity = c;
  }
  return out;
}

// The report's node rows (html.cc's node_rows) with their strings resolved:
// fate, why (as its name), ban, detail, capacity.
std::vector<Written> report_rows(const Graph& g, const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"node-data\">";
  const size_t at = html.find(open);
  EXPECT_NE(at, std::string::npos);
  const size_t start = at + open.size();
  const std::string json = html.substr(start, html.find("</script>", start) - start);
  simdjson::dom::parser parser;
  simdjson::dom::object doc;
  EXPECT_FALSE(parser.parse(json).get(doc));
  std::vector<std::string> strings;
  for (auto s : doc["s"].get_array()) strings.emplace_back(std::string_view(s));
  std::vector<Written> out(g.size());
  for (auto row : doc["r"].get_array()) {
    std::vector<simdjson::dom::element> r;
    for (auto cell : row.get_array()) r.push_back(cell);
    Written& w = out[static_cast<size_t>(int64_t(r[0]))];
    w.where = strings[static_cast<size_t>(int64_t(r[6]))];
    w.ban = strings[static_cast<size_t>(int64_t(r[7]))];
    w.why = why_name(static_cast<Why>(int64_t(r[8])));
    w.capacity = int64_t(r[9]);
    w.detail = strings[static_cast<size_t>(int64_t(r[10]))];
  }
  return out;
}

// For every node of every shipped example at several budgets, the result
// JSON of a plain partition (what `remat partition -o` writes), the report
// (built, as `remat report` builds it, from a traced partition) and
// --explain (a partition with --explain's options) give the same reason,
// in the same words. The reasons once depended on the trace: at 0.3 on the
// transformer block the JSON said addmm_2 was recomputed_cheaper while the
// report and --explain said the knapsack lifted its ban.
TEST(Why, TheResultTheReportAndExplainGiveEachNodeOneReason) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kExamples))
    if (e.path().extension() == ".json") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 5u);
  size_t compared = 0;
  for (const std::string& file : files) {
    const JointGraph joint = example(file.c_str());
    const Graph& g = joint.graph;
    for (double budget : {1.0, 0.5, 0.3, 0.1}) {
      SCOPED_TRACE(fmt::format("{} at budget {}", file, budget));
      PartitionOptions plain = default_options(joint), traced_o = plain;
      plain.activation_memory_budget = traced_o.activation_memory_budget = budget;
      traced_o.trace = true;
      PartitionResult r, t;
      try {
        r = min_cut_rematerialization_partition(joint, plain);
      } catch (const NoFiniteCutError&) {
        continue;
      }
      t = min_cut_rematerialization_partition(joint, traced_o);
      const std::vector<Written> json = written_decisions(g, write_result(joint, r));
      ReportOptions ro;
      ro.options = traced_o;
      const std::vector<Written> rows =
          report_rows(g, html_report(joint, write_result(joint, t, true), ro));
      for (NodeId id = 0; id < g.size(); ++id) {
        const NodeDecision& d = r.decisions[id];
        ASSERT_NE(d.why, Why::kUnknown) << g.name(id);
        // The document says what the decision says ...
        EXPECT_EQ(json[id].why, why_name(d.why)) << g.name(id);
        EXPECT_EQ(json[id].detail, d.detail) << g.name(id);
        EXPECT_EQ(json[id].capacity, d.capacity) << g.name(id);
        EXPECT_EQ(json[id].ban, d.ban_reason) << g.name(id);
        // ... the report's row the same ...
        EXPECT_EQ(rows[id].where, json[id].where) << g.name(id);
        EXPECT_EQ(rows[id].why, json[id].why) << g.name(id);
        EXPECT_EQ(rows[id].detail, json[id].detail) << g.name(id);
        EXPECT_EQ(rows[id].capacity, json[id].capacity) << g.name(id);
        EXPECT_EQ(rows[id].ban, json[id].ban) << g.name(id);
        // ... and --explain words it in the same sentence.
        const std::string explained = report::explain_node(g, id, t.decisions[id], traced_o);
        EXPECT_TRUE(has(explained, "\n  why: " + report::why_text(g, d) + "\n") ||
                    explained.ends_with("\n  why: " + report::why_text(g, d)))
            << explained;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 1000u);
}

TEST(Why, TheDefaultPartitionerSaysItIsTheDefaultOne) {
  const JointGraph joint = example("mlp.json");
  const PartitionResult r = default_partition(joint, traced());
  size_t saved = 0;
  for (NodeId id = 0; id < joint.graph.size(); ++id) {
    const NodeDecision& d = r.decisions[id];
    if (d.where != NodeDecision::Where::kSaved || joint.graph.node(id).kind == NodeKind::kPlaceholder) continue;
    ++saved;
    EXPECT_EQ(d.why, Why::kSavedDefault) << joint.graph.name(id);
  }
  EXPECT_GT(saved, 0u);
}

TEST(Why, NamesReadBackAndEveryReasonHasWords) {
  for (int w = 1; w <= static_cast<int>(Why::kUnused); ++w) {
    const auto why = static_cast<Why>(w);
    EXPECT_EQ(report::why_from_name(why_name(why)), why);
    EXPECT_STRNE(report::why_template(why), "");
  }
  EXPECT_FALSE(report::why_from_name("nonsense"));
}

// --- the report's other pieces -------------------------------------------------------

// The rows carry each node's reason as an index into the templates, which
// travel once; the page is small per node.
TEST(Report, RowsCarryTheReasonsAndStaySmall) {
  const JointGraph joint = example("transformer_block.json");
  const std::string result = write_result(joint, min_cut_rematerialization_partition(joint, traced()));
  const std::string html = report_of(joint, result);
  for (int w = 1; w <= static_cast<int>(Why::kUnused); ++w)
    EXPECT_TRUE(has(html, report::why_template(static_cast<Why>(w)))) << w;
  const size_t data = html.find("id=\"node-data\"");
  const size_t rows = html.find("</script>", data) - data;
  EXPECT_LT(rows / joint.graph.size(), 120u) << rows;
}

// The cut picture is about activations: saved inputs (parameters, mostly)
// are counted, not drawn as the cut.
TEST(Report, TheCutPictureCountsSavedInputsApart) {
  const JointGraph joint = example("transformer_block.json");
  const PartitionResult r = min_cut_rematerialization_partition(joint, PartitionOptions{});
  size_t inputs = 0;
  for (NodeId id : r.saved_values) inputs += joint.graph.node(id).kind == NodeKind::kPlaceholder;
  const size_t activations = r.saved_values.size() + r.saved_sym_nodes.size() +
                             r.saved_opaque_nodes.size() - inputs;
  ASSERT_GT(inputs, 0u);
  const std::string html = report_of(joint, write_result(joint, r));
  if (!report::dot_available()) GTEST_SKIP() << "Graphviz's dot is not on PATH";
  EXPECT_TRUE(has(html, fmt::format("The {} saved activations", activations))) << activations;
  EXPECT_TRUE(has(html, fmt::format("The {} saved inputs", inputs)));
}

TEST(Report, AGraphWithoutAFiniteCutGetsItsDiagnosis) {
  const JointGraph joint = read_joint_graph_file(kExamples + "/../tests/data/no_finite_cut.json");
  try {
    min_cut_rematerialization_partition(joint, PartitionOptions{});
    FAIL() << "expected no finite cut";
  } catch (const NoFiniteCutError& e) {
    ReportOptions r;
    r.title = "no cut";
    const std::string html = html_no_cut_report(joint, e, r);
    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_TRUE(has(html, "Nodes involved in the conflict"));
    EXPECT_TRUE(has(html, "<td>mm</td><td>call_function</td>"));
    EXPECT_TRUE(has(html, "<td>mul</td><td>call_function</td>"));
    if (report::dot_available()) {
      EXPECT_TRUE(has(html, "<svg"));
    }
    EXPECT_EQ(html, html_no_cut_report(joint, e, r));
  }
}

// torch's plans, built: the first is the plain partition's plan, the last
// budget 0's, each saved set once.
TEST(BudgetPlans, RunFromTheRuntimeOptimizedPlanToBudgetZero) {
  const JointGraph joint = example("transformer_block.json");
  const std::vector<BudgetPlanPoint> plans = budget_plans(joint, PartitionOptions{}, {0.9, 0.5, 0.1});
  ASSERT_GE(plans.size(), 3u);
  const PartitionResult plain = min_cut_rematerialization_partition(joint, PartitionOptions{});
  EXPECT_EQ(plans.front().label, "runtime-optimized");
  EXPECT_EQ(plans.front().peak_bytes, plain.memory.peak_bytes);
  EXPECT_EQ(plans.front().recompute_runtime, plain.recompute_runtime);
  EXPECT_EQ(plans.front().saved_values, plain.saved_values.size());
  PartitionOptions zero;
  zero.activation_memory_budget = 0;
  const PartitionResult inputs = min_cut_rematerialization_partition(joint, zero);
  EXPECT_EQ(plans.back().label, "inputs only");
  EXPECT_EQ(plans.back().peak_bytes, inputs.memory.peak_bytes);
  EXPECT_EQ(plans.back().recompute_runtime, inputs.recompute_runtime);
  for (size_t i = 0; i < plans.size(); ++i)
    for (size_t k = i + 1; k < plans.size(); ++k) EXPECT_NE(plans[i].label, plans[k].label);
}

TEST(BudgetPlans, AGraphWhoseBackwardNeedsNothingHasNone) {
  TestGraph t;  // a forward without a backward
  Ref p1 = t.placeholder("primals_1");
  Ref sin = t.call("aten.sin.default", {p1});
  t.output({A::tuple({sin})});
  try {
    budget_plans(joint_of(t), PartitionOptions{}, {0.5});
    FAIL() << "expected Error(kUnsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_TRUE(has(e.what(), "needs nothing from the forward")) << e.what();
  }
}

// A chart's text beside its tick labels (how many round ticks an axis
// gets depends on its range).
size_t texts_beside_ticks(const std::string& svg) {
  return count(svg, "<text") - count(svg, "class=\"x-tick\"") - count(svg, "class=\"y-tick\"");
}

// A chart of any number of plans has the same text: ticks, axes, title,
// legend and the chosen plan's label; the rest is in tooltips.
TEST(PlansSvg, LabelsOnlyTheChosenPlanAtAnyCount) {
  auto plans_of = [](size_t n) {
    std::vector<BudgetPlanPoint> out;
    for (size_t i = 0; i < n; ++i)
      out.push_back({fmt::format("p{}", i), static_cast<int64_t>(1000 + i * 7 % 97), 50.0 - static_cast<double>(i % 50), i});
    return out;
  };
  const BudgetPlanPoint chosen{"mine", 1040, 10, 3};
  const std::string few = plans_svg(plans_of(5), &chosen), many = plans_svg(plans_of(1000), &chosen);
  EXPECT_EQ(texts_beside_ticks(few), texts_beside_ticks(many));
  EXPECT_EQ(count(many, "class=\"plan\""), 1000u);
  EXPECT_EQ(count(many, "class=\"chosen\""), 1u);
  EXPECT_TRUE(has(many, "(bytes)"));
  EXPECT_TRUE(has(many, "estimator units"));
  EXPECT_EQ(count(plans_svg(plans_of(5), nullptr), "class=\"chosen\""), 0u);
}

// The line joins exactly the plans no other plan beats on both axes.
TEST(PlansSvg, TheFrontierJoinsTheUndominatedPlans) {
  const std::vector<BudgetPlanPoint> plans{
      {"a", 100, 50, 1}, {"b", 110, 40, 1}, {"c", 105, 60, 1}, {"d", 120, 40, 1}, {"e", 130, 10, 1}};
  const std::string svg = plans_svg(plans, nullptr);
  const size_t at = svg.find("class=\"frontier\"");
  ASSERT_NE(at, std::string::npos);
  const size_t from = svg.find("points=\"", at) + 8, to = svg.find('"', from);
  EXPECT_EQ(count(svg.substr(from, to - from), ",") , 3u);  // a, b, e
}

TEST(ParetoSvg, LabelsEachPointOnlyWhileTheyCannotPileUp) {
  auto points_of = [](size_t n) {
    std::vector<MemoryBudgetPoint> out;
    for (size_t i = 0; i < n; ++i)
      out.push_back({static_cast<double>(i) / static_cast<double>(n), static_cast<double>(n - i),
                     static_cast<double>(i) / static_cast<double>(n)});
    return out;
  };
  const size_t frame = texts_beside_ticks(pareto_svg(points_of(0)));
  EXPECT_EQ(texts_beside_ticks(pareto_svg(points_of(kParetoLabels))), frame + kParetoLabels);
  EXPECT_EQ(texts_beside_ticks(pareto_svg(points_of(1000))), frame);
}

// The axes are ticked at round numbers that are multiples of a step of 1,
// 2 or 5 times a power of ten (torch's sweep once read 0.301, 0.401, ...
// over a frame the data filled half of), the data's range snapped out to
// the next ticks; bytes tick in a binary unit, big counts in millions.
TEST(ParetoSvg, TicksAreRoundAndTheDataFillsTheFrame) {
  const std::vector<MemoryBudgetPoint> points{{0.1, 120000, 0.301}, {0.5, 60000, 0.55}, {0.9, 1000, 0.799}};
  const std::string svg = pareto_svg(points);
  for (const char* tick : {">0.3</text>", ">0.4</text>", ">0.5</text>", ">0.6</text>", ">0.7</text>",
                           ">0.8</text>", ">0</text>", ">50,000</text>", ">150,000</text>"})
    EXPECT_TRUE(has(svg, tick)) << tick;
  EXPECT_FALSE(has(svg, ">0.301<")) << svg;
  EXPECT_EQ(count(svg, "class=\"x-tick\""), 6u);  // 0.3 to 0.8: the data spans the frame
  const std::vector<BudgetPlanPoint> plans{{"a", 100 << 20, 5e8, 1}, {"b", 300 << 20, 1e8, 1}};
  const std::string chart = plans_svg(plans, nullptr);
  EXPECT_TRUE(has(chart, ">100 MiB</text>")) << chart;
  EXPECT_TRUE(has(chart, ">500M</text>")) << chart;  // not 500,000,000 or 5e+08
}

TEST(TimelineSvg, MarksThePeak) {
  const std::string svg = report::timeline_svg({{10, "a", ""}, {30, "b", ""}, {20, "c", ""}}, 30);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_TRUE(has(svg, "peak 30 B at step 1 (b)"));
  EXPECT_TRUE(has(report::timeline_svg({}, 0), "no steps"));
}

// More steps than pixels: the line is drawn per pixel column, so a
// million steps make a small picture that still reaches the peak.
TEST(TimelineSvg, AMillionStepsStaySmallAndKeepThePeak) {
  std::vector<report::MemoryStep> steps(1000000);
  for (size_t i = 0; i < steps.size(); ++i) steps[i].bytes = static_cast<int64_t>(i % 1000);
  steps[777777] = {5000, "top", "backward"};
  const std::string svg = report::timeline_svg(steps, 5000);
  EXPECT_LT(svg.size(), 100000u);
  EXPECT_TRUE(has(svg, "peak 4.9 KiB at step 777777 (top)"));
  EXPECT_TRUE(has(svg, ">peak 4.9 KiB at top</text>"));
}

}  // namespace
}  // namespace remat
