// tests/cpp/test_report.cc — what the engine tells beyond its decision: the
// trace (torch's log lines, knapsack calls, the Pareto sweep), the failed
// cut's edge list, progress, and the HTML report.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "budget/pareto.h"
#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/partition.h"
#include "remat/report.h"
#include "remat/explain.h"
#include "report/timeline_svg.h"

namespace remat {
namespace {

const std::string kExamples = REMAT_EXAMPLES_DIR;

JointGraph example(const char* name) { return read_joint_graph_file(kExamples + "/" + name); }

using testing::has;

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
  // Every joint node has a row, with its explanation.
  EXPECT_EQ(count(html, "\n[") , joint.graph.size());
  EXPECT_TRUE(has(html, "computed in the forward and saved for the backward"));
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

TEST(TimelineSvg, MarksThePeak) {
  const std::string svg = report::timeline_svg({{10, "a", ""}, {30, "b", ""}, {20, "c", ""}}, 30);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_TRUE(has(svg, "peak 30 B at step 1 (b)"));
  EXPECT_TRUE(has(report::timeline_svg({}, 0), "no steps"));
}

}  // namespace
}  // namespace remat
