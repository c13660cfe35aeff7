// tests/cpp/test_frontier.cc — remat's peak frontier (peak_frontier), the
// error that tells where a peak limit becomes reachable
// (BudgetUnreachableError), the plans chart with both series, its CSV and
// JSON, and `remat pareto --peak`.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "graph_fixture.h"
#include "temp_dir.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/pareto.h"
#include "remat/partition.h"

namespace remat {
namespace {

using Search = PartitionOptions::PeakSearch;
using testing::A;
using testing::has;
using testing::joint_of;
using testing::Ref;
using testing::slurp;
using testing::TempDir;
using testing::TestGraph;

const std::string kExamples = REMAT_EXAMPLES_DIR;

JointGraph example(const char* name) { return read_joint_graph_file(kExamples + "/" + name); }

PartitionOptions searching(Search search) {
  PartitionOptions o;
  o.peak_search = search;
  return o;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The smallest peak the optimizer reports when asked for one byte.
int64_t smallest_reachable(const JointGraph& joint, Search search) {
  PartitionOptions o = searching(search);
  o.peak_memory_budget = 1;
  try {
    min_cut_rematerialization_partition(joint, o);
  } catch (const BudgetUnreachableError& e) {
    return e.smallest_peak();
  }
  ADD_FAILURE() << "a step fit in one byte";
  return -1;
}

// --- BudgetUnreachableError -----------------------------------------------------

// The fields say what the message says, for every search; only fast and
// exact prove a bound. cnn_batchnorm's numbers are in its message.
TEST(BudgetUnreachableError, CarriesTheSmallestPeakItsMessageNamesAndCallsItReachableOnlyWhenProven) {
  const JointGraph joint = example("cnn_batchnorm.json");
  for (Search search : {Search::kTorchPlans, Search::kFast, Search::kExact}) {
    PartitionOptions o = searching(search);
    o.peak_memory_budget = 1;
    try {
      min_cut_rematerialization_partition(joint, o);
      FAIL() << "expected BudgetUnreachableError";
    } catch (const BudgetUnreachableError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBudgetUnreachable);
      ASSERT_GT(e.smallest_peak(), 0) << e.what();
      EXPECT_TRUE(has(e.what(), fmt::format("({} bytes)", e.smallest_peak()))) << e.what();
      // "Reachable" only where a bound proves no plan goes lower; else the
      // least the search found, which another plan may beat.
      const bool proven = e.proven_bound() == e.smallest_peak();
      EXPECT_TRUE(has(e.what(), proven ? "the smallest reachable peak is " : "the smallest peak found is "))
          << e.what();
      if (search == Search::kTorchPlans) {
        EXPECT_EQ(e.proven_bound(), -1);
      } else {
        EXPECT_EQ(e.smallest_peak(), 20800) << e.what();
        EXPECT_GT(e.proven_bound(), 0);
        EXPECT_LE(e.proven_bound(), e.smallest_peak());
      }
    }
  }
}

// --- peak_frontier ----------------------------------------------------------------

// Each point is the partition at its limit: it fits, and the points run by
// peak from the smallest reachable up to the runtime-optimized plan's.
TEST(PeakFrontier, EachPlanIsThePartitionAtItsLimitAndFitsIt) {
  for (const char* name : {"cnn_batchnorm.json", "transformer_block.json"}) {
    const JointGraph joint = example(name);
    const int64_t top = budget_plans(joint, PartitionOptions{}, {}).front().peak_bytes;
    for (Search search : {Search::kFast, Search::kExact}) {
      const PartitionOptions o = searching(search);
      const std::vector<BudgetPlanPoint> frontier = peak_frontier(joint, o, 8);
      const int64_t bottom = smallest_reachable(joint, search);
      ASSERT_FALSE(frontier.empty()) << name;
      EXPECT_EQ(frontier.front().limit_bytes, bottom) << name;
      int64_t highest_limit = 0;
      for (size_t i = 0; i < frontier.size(); ++i) {
        const BudgetPlanPoint& p = frontier[i];
        SCOPED_TRACE(fmt::format("{} {}", name, p.label));
        EXPECT_LE(p.peak_bytes, p.limit_bytes);
        EXPECT_GE(p.limit_bytes, bottom);
        EXPECT_LE(p.limit_bytes, std::max(top, bottom));
        EXPECT_EQ(p.label.rfind(fmt::format("{} <= ", peak_search_name(search)), 0), 0u);
        if (i) {
          EXPECT_LE(frontier[i - 1].peak_bytes, p.peak_bytes);
        }
        highest_limit = std::max(highest_limit, p.limit_bytes);
        PartitionOptions at = o;
        at.peak_memory_budget = p.limit_bytes;
        const PartitionResult r = min_cut_rematerialization_partition(joint, at);
        EXPECT_EQ(r.memory.peak_bytes, p.peak_bytes);
        EXPECT_EQ(r.recompute_runtime, p.recompute_runtime);
        EXPECT_EQ(r.saved_values.size(), p.saved_values);
        EXPECT_TRUE(r.hazards.empty());
      }
      EXPECT_EQ(highest_limit, std::max(top, bottom)) << name;
      for (size_t i = 0; i < frontier.size(); ++i)
        for (size_t k = i + 1; k < frontier.size(); ++k)
          EXPECT_FALSE(frontier[i].peak_bytes == frontier[k].peak_bytes &&
                       frontier[i].recompute_runtime == frontier[k].recompute_runtime)
              << name << ": " << frontier[i].label << " and " << frontier[k].label;
    }
  }
}

// remat is at least as good: for each torch plan T, the exact frontier's
// point with the smallest limit >= T's peak recomputes at most what T
// does (exact is the least recompute of any valid plan under its limit,
// and that least only falls as the limit grows). The runtime-optimized
// plan's peak is the frontier's top limit, so some plan is always compared.
TEST(PeakFrontier, ExactRecomputesNoMoreThanAnyTorchPlanItsLimitAdmits) {
  for (const char* name : {"cnn_batchnorm.json", "transformer_block.json"}) {
    const JointGraph joint = example(name);
    const std::vector<BudgetPlanPoint> torch = budget_plans(
        joint, PartitionOptions{}, std::vector<double>(std::begin(kPlanBudgets), std::end(kPlanBudgets)));
    const std::vector<BudgetPlanPoint> exact = peak_frontier(joint, searching(Search::kExact), 8);
    size_t compared = 0;
    for (const BudgetPlanPoint& t : torch) {
      const BudgetPlanPoint* nearest = nullptr;
      for (const BudgetPlanPoint& p : exact)
        if (p.limit_bytes >= t.peak_bytes && (!nearest || p.limit_bytes < nearest->limit_bytes))
          nearest = &p;
      if (!nearest) continue;
      ++compared;
      EXPECT_LE(nearest->recompute_runtime, t.recompute_runtime)
          << name << ": " << nearest->label << " against torch's " << t.label;
    }
    EXPECT_GE(compared, 1u) << name;
  }
}

TEST(PeakFrontier, RefusesTorchPlansAndFewerThanTwoPoints) {
  const JointGraph joint = example("transformer_block.json");
  auto code_of = [&](const PartitionOptions& o, int points) {
    try {
      peak_frontier(joint, o, points);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;  // nothing thrown
  };
  EXPECT_EQ(code_of(searching(Search::kTorchPlans), 8), ErrorCode::kInvalidOption);
  EXPECT_EQ(code_of(searching(Search::kFast), 1), ErrorCode::kInvalidOption);
  EXPECT_EQ(code_of(searching(Search::kFast), 0), ErrorCode::kInvalidOption);
}

TEST(PeakFrontier, AGraphWhoseBackwardNeedsNothingHasNone) {
  TestGraph t;  // a forward without a backward
  Ref p1 = t.placeholder("primals_1");
  Ref sin = t.call("aten.sin.default", {p1});
  t.output({A::tuple({sin})});
  try {
    peak_frontier(joint_of(t), searching(Search::kFast), 4);
    FAIL() << "expected Error(kUnsupported)";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_TRUE(has(e.what(), "needs nothing from the forward")) << e.what();
  }
}

// The caller hears one task, "frontier", rising to 1; not each partition's.
TEST(PeakFrontier, ProgressHearsTheFrontierAlone) {
  const JointGraph joint = example("cnn_batchnorm.json");
  PartitionOptions o = searching(Search::kFast);
  std::vector<std::pair<std::string, double>> heard;
  o.progress = [&](std::string_view task, double f) { heard.emplace_back(std::string(task), f); };
  peak_frontier(joint, o, 5);
  ASSERT_EQ(heard.size(), 7u);  // the two ends, then each limit
  for (size_t i = 0; i < heard.size(); ++i) {
    EXPECT_EQ(heard[i].first, "frontier");
    if (i) {
      EXPECT_GE(heard[i].second, heard[i - 1].second);
    }
  }
  EXPECT_EQ(heard.back().second, 1.0);
}

// --- the chart with both series -------------------------------------------------

std::vector<BudgetPlanPoint> torch_plans() {
  return {{"runtime-optimized", 1000, 5, 20}, {"knapsack 0.5", 1100, 50, 10}, {"inputs only", 1100, 90, 8}};
}

std::vector<BudgetPlanPoint> frontier_of(size_t n) {
  std::vector<BudgetPlanPoint> out;
  for (size_t i = 0; i < n; ++i) {
    const int64_t limit = 600 + static_cast<int64_t>(i) * 400 / static_cast<int64_t>(n);
    out.push_back({fmt::format("exact <= {} B", limit), limit - 3, 40.0 - static_cast<double>(i % 40),
                   10 + i, limit});
  }
  return out;
}

TEST(PlansSvg, DrawsRematsFrontierBesideTorchsPlans) {
  const std::vector<BudgetPlanPoint> frontier = frontier_of(4);
  const std::string svg = plans_svg(torch_plans(), nullptr, frontier, "remat exact");
  EXPECT_EQ(count(svg, "class=\"plan\""), 3u);
  EXPECT_EQ(count(svg, "class=\"remat-plan\""), 4u);
  EXPECT_EQ(count(svg, "class=\"remat-frontier\""), 1u);
  EXPECT_TRUE(has(svg, ">torch's activation-budget plans</text>"));
  EXPECT_TRUE(has(svg, ">remat exact</text>"));
  EXPECT_TRUE(has(svg, "and remat's frontier"));
  // Each square's tooltip: its label, peak and recompute.
  EXPECT_TRUE(has(svg, "<title>exact &lt;= 700 B: peak 697 B (697 B), recompute 39, 11 saved</title>"))
      << svg;
  EXPECT_TRUE(has(svg, "(bytes)"));
  EXPECT_TRUE(has(svg, "estimator units"));
}

// Every point's words are in its tooltip: the chart's text is the same for
// 5 frontier points as for 50.
TEST(PlansSvg, TextIsTheSameForAnyNumberOfFrontierPoints) {
  const BudgetPlanPoint chosen{"mine", 1040, 10, 3};
  const std::string five = plans_svg(torch_plans(), &chosen, frontier_of(5), "remat fast");
  const std::string fifty = plans_svg(torch_plans(), &chosen, frontier_of(50), "remat fast");
  EXPECT_EQ(count(five, "<text"), count(fifty, "<text"));
  EXPECT_EQ(count(fifty, "class=\"remat-plan\""), 50u);
}

// The report's chart has no frontier: the two-series code leaves it as it was.
TEST(PlansSvg, WithoutAFrontierItIsTheOneSeriesChart) {
  const BudgetPlanPoint chosen{"mine", 1040, 10, 3};
  const std::string one = plans_svg(torch_plans(), &chosen);
  EXPECT_EQ(one, plans_svg(torch_plans(), &chosen, {}, "remat exact"));
  EXPECT_FALSE(has(one, "remat"));
  EXPECT_TRUE(has(one, "a torch budget plan (hover for which)"));
}

// The staircase visits the undominated plans only, each step two corners:
// (a, b, c undominated; d beaten by b) -> a, then (b's peak, a's recompute),
// b, then (c's peak, b's recompute), c: five vertices.
TEST(PlansSvg, RematsStaircaseStepsThroughItsUndominatedPlans) {
  const std::vector<BudgetPlanPoint> frontier{
      {"a", 100, 50, 1, 100}, {"b", 120, 30, 1, 130}, {"d", 125, 35, 1, 140}, {"c", 150, 0, 1, 160}};
  const std::string svg = plans_svg({}, nullptr, frontier, "remat fast");
  const size_t at = svg.find("class=\"remat-frontier\"");
  ASSERT_NE(at, std::string::npos);
  const size_t from = svg.find("points=\"", at) + 8, to = svg.find('"', from);
  EXPECT_EQ(count(svg.substr(from, to - from), ","), 5u);
}

// --- CSV and JSON -----------------------------------------------------------------

TEST(PlansCsv, ListsBothSeriesInOrderAndQuotesLabelsWithCommas) {
  const std::vector<BudgetPlanPoint> torch{{"knapsack 0.5, again", 1100, 50, 10}};
  const std::vector<BudgetPlanPoint> frontier{{"exact <= 1.00 KiB", 1000, 2.5, 12, 1024}};
  const PlanSeries both[] = {{"torch", torch}, {"remat_exact", frontier}};
  EXPECT_EQ(plans_csv(both),
            "label,series,peak_bytes,recompute_runtime,saved_values,limit_bytes\n"
            "\"knapsack 0.5, again\",torch,1100,50,10,0\n"
            "exact <= 1.00 KiB,remat_exact,1000,2.5,12,1024\n");
  EXPECT_EQ(plans_json(both),
            "{\"plans\": [\n"
            "  {\"label\": \"knapsack 0.5, again\", \"series\": \"torch\", \"peak_bytes\": 1100, "
            "\"recompute_runtime\": 50, \"saved_values\": 10, \"limit_bytes\": 0},\n"
            "  {\"label\": \"exact <= 1.00 KiB\", \"series\": \"remat_exact\", \"peak_bytes\": 1000, "
            "\"recompute_runtime\": 2.5, \"saved_values\": 12, \"limit_bytes\": 1024}\n"
            "]}\n");
  EXPECT_EQ(plans_json({}), "{\"plans\": []}\n");
}

// --- remat pareto --peak ------------------------------------------------------------

TEST(ParetoPeakCli, WritesBothSeriesAsSvgJsonAndCsv) {
  TempDir dir("remat_pareto_peak");
  const testing::CliRun r = testing::remat(
      fmt::format("pareto '{}/cnn_batchnorm.json' --peak --peak-search exact --points 5 -o '{}' "
                  "--json '{}' --csv '{}'",
                  kExamples, dir / "chart.svg", dir / "plans.json", dir / "plans.csv"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string svg = slurp(dir / "chart.svg");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_GE(count(svg, "class=\"plan\""), 1u);
  EXPECT_GE(count(svg, "class=\"remat-plan\""), 1u);
  EXPECT_TRUE(has(svg, ">remat exact</text>"));
  const std::string csv = slurp(dir / "plans.csv");
  EXPECT_EQ(csv.rfind("label,series,peak_bytes,recompute_runtime,saved_values,limit_bytes\n", 0), 0u);
  EXPECT_EQ(count(csv, ",torch,"), count(svg, "class=\"plan\""));
  EXPECT_EQ(count(csv, ",remat_exact,"), count(svg, "class=\"remat-plan\""));
  const std::string json = slurp(dir / "plans.json");
  EXPECT_EQ(count(json, "\"series\": \"torch\""), count(svg, "class=\"plan\""));
  EXPECT_EQ(count(json, "\"series\": \"remat_exact\""), count(svg, "class=\"remat-plan\""));
  EXPECT_TRUE(has(r.out, "remat exact frontier")) << r.out;
}

// The frontier's flags mean nothing without --peak, and the sweep's
// resolution nothing with it: usage errors, nothing written.
TEST(ParetoPeakCli, ItsFlagsNeedPeakAndTheSweepsResolutionExcludesIt) {
  TempDir dir("remat_pareto_peak");
  const std::string graph = kExamples + "/cnn_batchnorm.json";
  for (const char* flags : {"--peak-search fast", "--points 4", "--peak-search-seconds 1",
                            "--peak --resolution 0.1", "--peak --points 1"}) {
    const testing::CliRun r =
        testing::remat(fmt::format("pareto '{}' -o '{}' {}", graph, dir / "chart.svg", flags));
    EXPECT_EQ(r.status, 2) << flags << ": " << r.err;
    EXPECT_TRUE(has(r.err, "remat: error:")) << r.err;
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(ParetoPeakCli, HelpNamesEachFlag) {
  const testing::CliRun r = testing::remat("pareto --help");
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--peak ", "--peak-search ", "--peak-search-seconds ", "--points "})
    EXPECT_TRUE(has(r.out, flag)) << flag;
}

}  // namespace
}  // namespace remat
