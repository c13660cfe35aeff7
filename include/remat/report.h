// remat/report.h — one partition as a self-contained HTML page.
//
// Contract: html_report returns one HTML document that needs no network and
// no other file: a summary; the memory timeline when the result carries
// one (the result JSON's "memory" object, docs/format.md: its "peak_bytes"
// and per-graph "timeline", labelled with the graphs' nodes); the
// memory-budget Pareto
// frontier when given; the cut's neighborhood drawn by Graphviz (when its
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

#include "remat/options.h"
#include "remat/result.h"

namespace remat {

struct ReportOptions {
  std::string title;                      // what the report is about (a path, a graph name)
  std::vector<MemoryBudgetPoint> pareto;  // the budget frontier; empty: none
  std::string pareto_note;                // shown when `pareto` is empty: why there is none
  PartitionOptions options;               // for node sizes (the op registry)
};

// `result_json`: the partition-result document of `joint` (write_result's
// output).
std::string html_report(const JointGraph& joint, std::string_view result_json,
                        const ReportOptions& report);

}  // namespace remat
