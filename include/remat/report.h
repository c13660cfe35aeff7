// remat/report.h — one partition as a self-contained HTML page.
//
// Contract: html_report returns one HTML document that needs no network and
// no other file: a summary; the memory timeline when the result carries
// one (the result JSON's "memory" object, docs/format.md: its "peak_bytes"
// and per-graph "timeline", labelled with the graphs' nodes) and what fills
// the peak ("at_peak"); torch's budget plans as peak bytes against
// recompute, this partition's plan marked, and torch's memory-budget
// Pareto frontier, each when given; the cut's neighborhood drawn by Graphviz (when its
// `dot` command is on PATH, else a note); and a table of every joint node
// with its fate and the reason (the `--explain` text), sortable by column
// and filtered by a name search (pre-filled from a "#search=TEXT" URL
// fragment). Same inputs, same bytes, except the result's own timings.
// Throws Error(kParse) when `result_json` is not a partition result of
// `joint` (naming the field).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "remat/error.h"
#include "remat/options.h"
#include "remat/partition.h"
#include "remat/result.h"

namespace remat {

struct ReportOptions {
  std::string title;                      // what the report is about (a path, a graph name)
  // torch's budget plans (budget_plans()), drawn as peak bytes against
  // recompute beside this partition's own plan; empty: none.
  std::vector<BudgetPlanPoint> plans;
  std::vector<MemoryBudgetPoint> pareto;  // torch's budget frontier (memory ratio); empty: none
  std::string pareto_note;                // shown when both are empty: why there is none
  PartitionOptions options;               // for node sizes (the op registry)
};

// `result_json`: the partition-result document of `joint` (write_result's
// output).
std::string html_report(const JointGraph& joint, std::string_view result_json,
                        const ReportOptions& report);

// The report of a graph with no valid partition (the min cut found no
// finite cut): the diagnosis torch prints (the nodes that can be neither
// saved nor recomputed, and why), the conflicting path drawn from source to
// sink when Graphviz is there, and the involved nodes with their types and
// sizes. Same inputs, same bytes.
std::string html_no_cut_report(const JointGraph& joint, const NoFiniteCutError& error,
                               const ReportOptions& report);

}  // namespace remat
