// cli/commands.h — the subcommands of the `remat` command.
//
// Contract: each command takes its parsed settings, writes its report to
// stdout and diagnostics to stderr, and returns the process exit status
// (0 success, 1 failure). Errors of the library (remat::Error) propagate to
// main, which prints them; nothing here aborts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "options.h"
#include "remat/error.h"
#include "remat/io.h"

namespace remat::cli {

// A usage error found once the graph is read (a flag naming a node the
// graph lacks): main says it as a usage error and exits 2.
class UsageError : public Error {
 public:
  explicit UsageError(std::string message) : Error(ErrorCode::kInvalidOption, std::move(message)) {}
};

struct CommonSettings {
  std::string graph;   // path of the joint graph; empty: the shipped example
  bool verbose = false;
  uint64_t max_input_bytes = kDefaultMaxInputBytes;  // --max-input-size
  // --progress: "auto" (a bar on a terminal for long work: any pareto
  // sweep, big graphs), "always" (on a terminal, whatever the size), "never".
  std::string progress = "auto";
  std::string argv0;   // to find the examples next to the installed binary
};

struct PartitionSettings {
  std::string output;           // -o: result JSON path ("" = none)
  bool timings = false;         // --timings: seconds and stages go into -o
  std::string partitioner = "min_cut";
  std::string explain;          // --explain NODE
  OptionSources sources;        // --options FILE, --config KEY=VALUE
  std::string cut_side;         // "sink" or "source"; "" = not given
  std::optional<double> memory_budget;
  std::string peak_budget;      // --peak-budget SIZE ("2GiB", "512MB", "1000000")
  std::string peak_search;      // --peak-search torch_plans|fast|exact; "" = not given
  std::optional<int64_t> peak_search_nodes;   // --peak-search-nodes
  std::optional<double> peak_search_seconds;  // --peak-search-seconds
  std::string backward_order;   // --backward-order autograd|memory; "" = not given
  std::string memory_model;     // --memory-model aten|inductor; "" = not given
  bool no_inductor_reorder = false;  // --no-inductor-reorder
  std::string solver;           // activation_memory_budget_solver; "" = not given
  std::string estimator;        // activation_memory_budget_runtime_estimator; "" = not given
  bool no_cse = false;
  std::string dot;              // --dot PATH: DOT of a failed min-cut
  // --activation-quantization JSON: torch's activation_quantization_aten_pass
  // dict ("" = off), as ActivationQuantizationOptions::from_json reads it.
  std::string activation_quantization;
};

struct ParetoSettings {
  std::string svg;              // -o: the frontier as an SVG chart (required)
  std::string csv;              // --csv PATH
  std::string json;             // --json PATH
  OptionSources sources;        // --options FILE, --config KEY=VALUE
  std::string solver;           // activation_memory_budget_solver; "" = not given
  std::string estimator;        // activation_memory_budget_runtime_estimator; "" = not given
  double resolution = 1e-3;     // bisection stops below this budget width
  bool no_cse = false;
  // --peak: instead of the sweep, torch's budget plans (kPlanBudgets) and
  // remat's peak frontier (peak_frontier) on one chart.
  bool peak = false;
  std::string peak_search;      // --peak-search fast|exact; "" = the options' (fast for torch_plans)
  std::optional<int64_t> peak_search_nodes;   // --peak-search-nodes
  std::optional<double> peak_search_seconds;  // --peak-search-seconds
  int points = 8;               // --points: the frontier's peak limits
};

struct ReportSettings {
  std::string html;             // -o: the report (required)
  std::string json;             // --json PATH: also the partition result
  std::string partitioner = "min_cut";
  OptionSources sources;        // --options FILE, --config KEY=VALUE
  std::optional<double> memory_budget;
  bool no_cse = false;
  bool no_pareto = false;       // skip torch's budget plans (one build each)
};

int run_info(const CommonSettings& common);
int run_report(const CommonSettings& common, const ReportSettings& settings);
int run_partition(const CommonSettings& common, const PartitionSettings& settings);
int run_pareto(const CommonSettings& common, const ParetoSettings& settings);

// Bytes of a size written as a number with an optional unit: B, KB/MB/GB/TB
// (powers of 1000), KiB/MiB/GiB/TiB (powers of 1024); case-insensitive, an
// optional space before the unit, a fraction allowed ("1.5GiB"). Throws
// Error(kInvalidOption) naming `option` when it is not one, is not positive,
// or overflows.
int64_t parse_size(const std::string& text, const char* option);

// The graph path a command should read: `common.graph`, or the shipped
// example mlp.json searched in $REMAT_EXAMPLES, <exe_dir>/../share/remat/examples
// and the source tree's examples/. Throws Error(kIo) listing where it looked.
std::string resolve_graph_path(const CommonSettings& common);

}  // namespace remat::cli
